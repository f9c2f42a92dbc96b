//! Command line. Options given here override the configuration file.
//!
//! The flags that set a `[server]` key are made from the key table
//! (`config/server.rs`, flattened in as `ServerFlags`); this file has the
//! subcommands and the flags of `serve` that are no key: the file, the
//! port file, `--no-inline-writes` and the options of a DIR export.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::keys::{export_keys, help_text};
use crate::config::{Config, ConfigError, ExportConfig, HandleMode, ServerFlags};

#[derive(Debug, Parser)]
#[command(
    name = "rnfsd",
    version,
    about = "A userspace NFSv3 server (NFSv3 + MOUNT v3 over TCP)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Export directories over NFSv3 until SIGINT or SIGTERM.
    #[command(after_long_help = help_text())]
    Serve(Box<ServeArgs>),
    /// Load and validate a configuration file (and the export paths), then
    /// exit: 0 when it is usable.
    CheckConfig {
        /// The TOML configuration file.
        file: PathBuf,
    },
    /// Show a running server's statistics (through its admin socket):
    /// an nfsstat-like report, --raw lines, or a --watch live view.
    Stats(crate::stats_cmd::StatsArgs),
    /// List what a running server exports, with the effective options of
    /// each client, as `exportfs -v` does (through its admin socket).
    Exportfs(crate::stats_cmd::AdminArgs),
    /// Write man pages (DIR/man) and shell completions (DIR/completions),
    /// for packaging.
    #[command(hide = true)]
    GenerateDocs {
        /// Output directory.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// `help` ending in the default of the `[[export]]` key `key`.
fn export_help(help: &str, key: &str) -> String {
    let d = export_keys()
        .into_iter()
        .find(|k| k.name == key)
        .map(|k| k.cli_default())
        .unwrap_or_default();
    format!("{help} [default: {d}]")
}

#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// Directory to export. Clients mount its canonical absolute path
    /// (`mount -t nfs -o vers=3,tcp HOST:/that/path /mnt`). May be combined
    /// with [[export]] tables of --config.
    pub dir: Option<PathBuf>,

    /// TOML configuration file ([server] table and [[export]] tables; see
    /// the rnfsd::config documentation). Unknown keys are errors.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Write the bound NFS port (first listen address) to this file once
    /// the server is ready, for test harnesses.
    #[arg(long, value_name = "PATH")]
    pub port_file: Option<PathBuf>,

    /// The flags of `[server]` keys (`config/server.rs`).
    #[command(flatten)]
    pub server: ServerFlags,

    /// Send every WRITE to a pool thread (`inline_write_max = 0`). For
    /// comparison.
    #[arg(long, conflicts_with = "inline-write-max")]
    pub no_inline_writes: bool,

    /// DIR only: refuse every change.
    #[arg(long, requires = "dir")]
    pub read_only: bool,

    /// DIR only: a fixed export id instead of the hash of its path.
    #[arg(long, value_name = "ID", requires = "dir")]
    pub export_id: Option<u32>,

    #[arg(long, value_name = "MODE", requires = "dir",
          help = export_help("DIR only: file handle kind: auto, kernel or path.", "handle_mode"))]
    pub handle_mode: Option<HandleMode>,

    /// DIR only: let clients cross into filesystems mounted below DIR.
    #[arg(long, requires = "dir")]
    pub cross_mounts: bool,

    /// DIR only: exports(5) `async`: reply to namespace changes and SETATTR
    /// before they reach stable storage (faster; a crash of this host can
    /// undo changes clients were told were done). Default: `sync`.
    #[arg(long = "async", requires = "dir")]
    pub async_: bool,

    #[arg(long = "client", value_name = "SPEC", requires = "dir",
          help = export_help("DIR only: a client allowed to use it: an address, a network \
                              (ADDR/LEN) or \"*\"; repeat for several.", "clients"))]
    pub clients: Vec<String>,

    /// DIR only: let uid 0 act as root (default: root is mapped to the
    /// anonymous user, as knfsd's root_squash).
    #[arg(long, requires = "dir")]
    pub no_root_squash: bool,

    /// DIR only: map every caller to the anonymous user.
    #[arg(long, requires = "dir")]
    pub all_squash: bool,

    #[arg(long, value_name = "UID", requires = "dir",
          help = export_help("DIR only: the anonymous uid.", "anonuid"))]
    pub anonuid: Option<u32>,

    #[arg(long, value_name = "GID", requires = "dir",
          help = export_help("DIR only: the anonymous gid.", "anongid"))]
    pub anongid: Option<u32>,

    /// DIR only: accept only clients calling from a privileged port (< 1024),
    /// the default (exports(5) secure).
    #[arg(long, requires = "dir", conflicts_with = "insecure")]
    pub secure: bool,

    /// DIR only: accept clients calling from any port (exports(5) insecure):
    /// any local user of a client host can then claim any uid.
    #[arg(long, requires = "dir")]
    pub insecure: bool,
}

impl ServeArgs {
    /// The configuration file (or defaults) with these options applied.
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        self.server.apply(&mut c.server);
        if self.no_inline_writes {
            c.server.inline_write_max = 0;
            c.server.inline_write_alone_max = 0;
        }
        if let Some(d) = &self.dir {
            c.exports
                .push(self.dir_export(ExportConfig::new(d.clone())));
        }
        c.add_exports_file(&crate::config::exports_file::SystemResolver)?;
        // A file may export nothing yet (a reload adds exports); a command
        // line with nothing to export is a mistake.
        if c.exports.is_empty() && self.config.is_none() && c.server.exports.is_none() {
            return Err(ConfigError(
                "nothing to export: give a directory, --config FILE or --exports FILE".into(),
            ));
        }
        c.validate()?;
        Ok(c)
    }

    /// DIR's export: `base` (the `[[export]]` defaults) with the DIR-only
    /// flags applied.
    fn dir_export(&self, base: ExportConfig) -> ExportConfig {
        ExportConfig {
            read_only: base.read_only || self.read_only,
            clients: (!self.clients.is_empty()).then(|| self.clients.clone()),
            root_squash: base.root_squash && !self.no_root_squash,
            all_squash: base.all_squash || self.all_squash,
            anonuid: self.anonuid.unwrap_or(base.anonuid),
            anongid: self.anongid.unwrap_or(base.anongid),
            secure: base.secure && !self.insecure,
            id: self.export_id.or(base.id),
            handle_mode: self.handle_mode.unwrap_or(base.handle_mode),
            cross_mounts: base.cross_mounts || self.cross_mounts,
            sync: base.sync && !self.async_,
            ..base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{server_keys, PoolLayout, ServerConfig};
    use clap::CommandFactory;
    use std::path::Path;

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let mut v = vec!["rnfsd", "serve"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v)?.command {
            Command::Serve(s) => Ok(*s),
            c => panic!("unexpected {c:?}"),
        }
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// A value for a flag whose key's default is `default`, other than it,
    /// chosen by the flag's value name.
    fn other_value(value_name: &str, default: &str) -> String {
        if let Ok(n) = default.parse::<u64>() {
            return (n + 4).to_string();
        }
        match value_name {
            "N" | "BYTES" => "4096".into(),
            "ADDR:PORT" => "127.0.0.1:9".into(),
            "DIR" | "FILE" => "/x".into(),
            "LEVEL" => "debug".into(),
            words => {
                let w = words.split('|').find(|w| *w != default);
                w.unwrap_or_else(|| panic!("no value for {words}")).into()
            }
        }
    }

    /// Every flag of a `[server]` key is named after it (a switch that
    /// turns it off: `no-` and its name), sets that key and no other to a
    /// value other than its default, and (a flag with a value) ends its
    /// help with the key's default.
    #[test]
    fn each_flag_sets_its_key_and_shows_its_default() {
        let cmd = Cli::command();
        let serve = cmd.find_subcommand("serve").unwrap();
        let defaults = ServerConfig::default().key_values();
        let mut flags = 0;
        for k in server_keys() {
            let kebab = k.name.replace('_', "-");
            for &flag in &k.flags {
                let arg = serve
                    .get_arguments()
                    .find(|a| a.get_long() == Some(flag))
                    .unwrap_or_else(|| panic!("--{flag} of {} is no flag", k.name));
                let mut args = vec![format!("--{flag}")];
                if arg.get_action().takes_values() {
                    assert_eq!(flag, kebab, "a flag with a value is named after its key");
                    let help = arg.get_help().unwrap().to_string();
                    let want = format!("[default: {}]", k.cli_default());
                    assert!(help.ends_with(&want), "--{flag}: {help:?}, not {want:?}");
                    let names = arg.get_value_names().unwrap();
                    args.push(other_value(names[0].as_str(), &k.cli_default()));
                } else {
                    let named = [kebab.clone(), format!("no-{kebab}")];
                    let exception = (k.name, flag) == ("register_rpcbind", "no-rpcbind");
                    assert!(named.contains(&flag.to_owned()) || exception, "--{flag}");
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut s = ServerConfig::default();
                parse(&args).unwrap().server.apply(&mut s);
                let changed: Vec<&str> = s
                    .key_values()
                    .iter()
                    .zip(&defaults)
                    .filter(|(a, b)| a != b)
                    .map(|(a, _)| a.0)
                    .collect();
                assert_eq!(changed, [k.name], "{args:?}");
                flags += 1;
            }
        }
        // Every flag of ServeArgs that is no key's is one of these.
        let others = ["config", "port-file", "no-inline-writes", "help"];
        let keyed: Vec<&str> = server_keys().iter().flat_map(|k| k.flags.clone()).collect();
        for a in serve.get_arguments().filter_map(|a| a.get_long()) {
            let dir_only = serve
                .get_arguments()
                .find(|x| x.get_long() == Some(a))
                .is_some_and(|x| {
                    x.get_help()
                        .is_some_and(|h| h.to_string().starts_with("DIR only"))
                });
            assert!(
                keyed.contains(&a) || others.contains(&a) || dir_only,
                "--{a}"
            );
        }
        assert_eq!(flags, keyed.len());
        assert!(flags >= 48, "{flags} flags");
    }

    #[test]
    fn long_help_lists_every_key_with_its_default() {
        let mut cmd = Cli::command();
        let serve = cmd.find_subcommand_mut("serve").unwrap();
        let help = serve.render_long_help().to_string();
        for k in server_keys()
            .iter()
            .chain(&crate::config::keys::export_keys())
        {
            let line = match k.default.is_empty() {
                true => format!("\n  {}", k.name),
                false => format!("\n  {} = {}", k.name, k.default),
            };
            assert!(help.contains(&line), "no {line:?} in the help");
        }
    }

    #[test]
    fn switches_and_their_conflicts() {
        let c = parse(&["/x", "--no-inline-writes"])
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(
            (c.server.inline_write_max, c.server.inline_write_alone_max),
            (0, 0)
        );
        assert!(parse(&["/x", "--no-inline-writes", "--inline-write-max", "9"]).is_err());
        assert!(parse(&["/x", "--pin-loops", "--no-pin-loops"]).is_err());
        let c = parse(&[
            "/x",
            "--no-pin-loops",
            "--no-rpcbind",
            "--blocking-nice",
            "-5",
        ])
        .unwrap()
        .to_config()
        .unwrap();
        assert_eq!(c.server.pin_loops, Some(false));
        assert!(!c.server.register_rpcbind);
        assert_eq!(c.server.blocking_nice, -5);
        let e = parse(&["/x", "--max-io", "abc"]).unwrap_err().to_string();
        assert!(
            e.contains("invalid value 'abc' for '--max-io <BYTES>'"),
            "{e}"
        );
        let e = parse(&["/x", "--wake-order", "random"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("wake_order must be one of"), "{e}");
    }

    #[test]
    fn dir_alone_exports_on_loopback_2049() {
        let c = parse(&["/srv/x"]).unwrap().to_config().unwrap();
        assert_eq!(c.server.listen, vec!["127.0.0.1:2049".parse().unwrap()]);
        assert_eq!(c.exports, vec![ExportConfig::new("/srv/x")]);
        assert!(!c.server.portmap);
    }

    #[test]
    fn options_override() {
        let a = parse(&[
            "/srv/x",
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "[::1]:0",
            "--read-only",
            "--handle-mode",
            "path",
            "--export-id",
            "9",
            "--threads",
            "4",
            "--max-io",
            "65536",
            "--portmap",
            "--allow-auth-none",
            "--metrics",
            "127.0.0.1:9100",
            "--stats",
            "shared",
        ])
        .unwrap();
        let c = a.to_config().unwrap();
        assert_eq!(c.server.listen.len(), 2);
        assert_eq!(c.server.threads, Some(4));
        assert_eq!(c.server.max_io, 65536);
        assert_eq!(c.server.max_record(), 65536 + 65536);
        assert!(c.server.portmap && c.server.allow_auth_none);
        assert_eq!(c.server.metrics, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(c.server.stats, rnfsd_stats::Mode::Shared);
        assert!(c.exports[0].read_only);
        assert!(c.exports[0].root_squash && c.exports[0].secure);
        assert_eq!(c.exports[0].clients, None);
        assert_eq!(c.exports[0].id, Some(9));
        assert_eq!(c.exports[0].handle_mode, HandleMode::Path);
    }

    #[test]
    fn access_flags() {
        let c = parse(&[
            "/srv/x",
            "--client",
            "10.0.0.0/8",
            "--client",
            "::1",
            "--no-root-squash",
            "--all-squash",
            "--anonuid",
            "7",
            "--anongid",
            "8",
            "--secure",
        ])
        .unwrap()
        .to_config()
        .unwrap();
        let e = &c.exports[0];
        assert_eq!(e.clients, Some(vec!["10.0.0.0/8".into(), "::1".into()]));
        assert!(!e.root_squash && e.all_squash && e.secure);
        assert_eq!((e.anonuid, e.anongid), (7, 8));
        let c = parse(&["/srv/x", "--insecure"])
            .unwrap()
            .to_config()
            .unwrap();
        assert!(!c.exports[0].secure);
        assert!(parse(&["/x", "--secure", "--insecure"]).is_err());
        assert!(parse(&["/x", "--client", "nonsense"])
            .unwrap()
            .to_config()
            .is_err());
        assert!(parse(&["--no-root-squash"]).is_err(), "needs DIR");
    }

    #[test]
    fn pool_layout_flags() {
        let c = parse(&["/srv/x"]).unwrap().to_config().unwrap();
        assert_eq!(
            (c.server.pools, c.server.pin_loops, c.server.event_threads),
            (PoolLayout::PerLoop, None, 0)
        );
        let a = parse(&[
            "/srv/x",
            "--pools",
            "shared",
            "--pin-loops",
            "--event-threads",
            "2",
        ])
        .unwrap();
        let c = a.to_config().unwrap();
        assert_eq!(
            (c.server.pools, c.server.pin_loops, c.server.event_threads),
            (PoolLayout::Shared, Some(true), 2)
        );
        assert!(parse(&["/srv/x", "--pools", "perloop"]).is_err());
    }

    #[test]
    fn config_file_and_dir_combine() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        std::fs::write(
            &f,
            "[server]\nlisten = [\"127.0.0.1:3049\"]\nmax_threads = 9\n[[export]]\npath = \"/a\"\n",
        )
        .unwrap();
        let f = f.to_str().unwrap();
        let c = parse(&["--config", f, "/b"]).unwrap().to_config().unwrap();
        assert_eq!(c.exports.len(), 2);
        assert_eq!(c.server.max_threads, 9);
        assert_eq!(c.server.listen, vec!["127.0.0.1:3049".parse().unwrap()]);
        let c = parse(&["--config", f, "--listen", "127.0.0.1:1"])
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(c.server.listen, vec!["127.0.0.1:1".parse().unwrap()]);
    }

    #[test]
    fn exports_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("exports");
        std::fs::write(&f, "# knfsd\n/e 10.0.0.1(rw,wdelay)\n").unwrap();
        let toml = d.path().join("c.toml");
        std::fs::write(
            &toml,
            "[server]\nexports = \"/nonexistent/exports\"\n[[export]]\npath = \"/a\"\n",
        )
        .unwrap();
        let (f, toml) = (f.to_str().unwrap(), toml.to_str().unwrap());
        // --exports replaces server.exports.
        let c = parse(&["--config", toml, "--exports", f, "/b"])
            .unwrap()
            .to_config()
            .unwrap();
        let paths: Vec<_> = c.exports.iter().map(|e| e.path.to_str().unwrap()).collect();
        assert_eq!(paths, ["/a", "/b", "/e"]);
        assert_eq!(c.server.exports.as_deref(), Some(Path::new(f)));
        let e = &c.exports[2];
        assert!(e.read_only, "exports(5) default: ro");
        let o = e.access().unwrap();
        assert!(!o.lookup("10.0.0.1".parse().unwrap()).unwrap().read_only);
        assert!(o.lookup("127.0.0.1".parse().unwrap()).is_none());
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].starts_with(&format!("{f}:2: option \"wdelay\" ignored")));
        // A missing exports file is an error naming it.
        let e = parse(&["--config", toml]).unwrap().to_config().unwrap_err();
        assert!(e.0.contains("/nonexistent/exports"), "{e}");
        // A path in both the TOML file (or DIR) and the exports file.
        std::fs::write(f, "/b 10.0.0.1\n").unwrap();
        let e = parse(&["--exports", f, "/b"])
            .unwrap()
            .to_config()
            .unwrap_err();
        assert!(e.0.contains("/b is in both") && e.0.contains(":1"), "{e}");
        // The exports file alone is enough to serve.
        let c = parse(&["--exports", f]).unwrap().to_config().unwrap();
        assert_eq!(c.exports.len(), 1);
    }

    #[test]
    fn stats_subcommand() {
        let p = |v: &[&str]| Cli::try_parse_from(v.iter().copied()).map(|c| c.command);
        match p(&[
            "rnfsd",
            "stats",
            "--state-dir",
            "/s",
            "--watch",
            "--count",
            "3",
        ]) {
            Ok(Command::Stats(a)) => {
                assert_eq!(a.socket_path(), PathBuf::from("/s/admin.sock"));
                assert_eq!((a.watch, a.count), (true, Some(3)));
            }
            other => panic!("{other:?}"),
        }
        match p(&["rnfsd", "stats", "--socket", "/x.sock", "--raw"]) {
            Ok(Command::Stats(a)) => {
                assert!(a.raw && a.socket_path() == std::path::Path::new("/x.sock"))
            }
            other => panic!("{other:?}"),
        }
        assert!(
            p(&["rnfsd", "stats", "--count", "3"]).is_err(),
            "--count needs --watch"
        );
        assert!(p(&["rnfsd", "stats", "--raw", "--watch"]).is_err());
        assert!(p(&["rnfsd", "stats", "--socket", "/a", "--state-dir", "/b"]).is_err());
    }

    #[test]
    fn errors() {
        assert!(parse(&["--read-only"]).is_err(), "--read-only needs DIR");
        assert!(parse(&["/x", "--listen", "nonsense"]).is_err());
        assert!(parse(&["/x", "--handle-mode", "fast"]).is_err());
        assert!(parse(&["/x", "--bogus"]).is_err());
        assert!(parse(&["/x", "--stats", "fast"]).is_err());
        let e = parse(&[]).unwrap().to_config().unwrap_err();
        assert!(e.0.contains("nothing to export"));
        let e = parse(&["--config", "/nonexistent/rnfsd.toml"])
            .unwrap()
            .to_config()
            .unwrap_err();
        assert!(e.0.contains("/nonexistent/rnfsd.toml"));
    }
}
