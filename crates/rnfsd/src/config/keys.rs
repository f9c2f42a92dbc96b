//! The machinery behind the `[server]` key table (`server.rs`): one
//! `server_keys!` entry per key gives its type, default, rustdoc, a
//! one-line summary and the command-line flags that set it, and from it
//! come `ServerConfig` and its `Default`, the key list `rnfsd serve --help`
//! prints (`help_text`), and those flags (`ServerFlags`, with each value
//! flag's `[default: ...]` taken from the same default). So a default is
//! written once.
//!
//! An entry:
//!
//! ```text
//! /// Rustdoc of the field.
//! key: Type = default, "summary for the help's key list"
//!     , unset "what an unset Option means"        (Option keys, optional)
//!     , flag "long-name" "VALUE" .clap_method(..) => "flag help"   (optional)
//!     , switch "no-long-name" .clap_method(..) => value, "switch help"  (any)
//!     ;
//! ```
//!
//! A value flag sets the key to its value (an `Option` key to `Some`; a
//! list key, repeated, to all of them); a switch sets it to `value`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::ValueParser;
use clap::{Arg, ArgAction, ArgMatches};

use super::{BackendKind, CephfsConfig, ExportConfig, HandleMode, MountPoint};
use super::{Handoff, Idmap, MaxWaking, PoolLayout, WakeOrder, WorkerSpin};

/// Declares `ServerConfig` (serde: unknown keys are errors, absent keys
/// take their default), its `Default`, `server_keys()` (the key list) and
/// `ServerFlags` (the flags). See the module documentation.
macro_rules! server_keys {
    (@unset) => { None };
    (@unset $u:expr) => { Some(::std::string::ToString::to_string(&$u)) };
    ($(
        $(#[doc = $doc:literal])*
        $key:ident: $ty:ty = $default:expr, $summary:literal
        $(, unset $unset:expr)?
        $(, flag $flong:literal $fvalue:literal $(.$fm:ident($($fa:expr),*))* => $fhelp:literal)?
        $(, switch $slong:literal $(.$sm:ident($($sa:expr),*))* => $sval:expr, $shelp:literal)*
        ;
    )*) => {
        /// The `[server]` table. Every bound the server enforces has a key
        /// here; the defaults are in `server.rs`'s key table.
        #[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct ServerConfig {
            $( $(#[doc = $doc])* pub $key: $ty, )*
        }

        impl Default for ServerConfig {
            fn default() -> Self {
                ServerConfig { $( $key: $default, )* }
            }
        }

        /// Every `[server]` key in the table's order, with its default as
        /// the help prints it.
        pub fn server_keys() -> Vec<$crate::config::keys::KeyDoc> {
            let d = ServerConfig::default();
            vec![$(
                $crate::config::keys::KeyDoc {
                    name: stringify!($key),
                    summary: $summary,
                    default: $crate::config::keys::shown(&d.$key, server_keys!(@unset $($unset)?)),
                    flags: vec![$($flong,)? $($slong,)*],
                },
            )*]
        }

        impl ServerConfig {
            /// Each key with its value as `server_keys()` shows a default.
            pub fn key_values(&self) -> Vec<(&'static str, String)> {
                vec![$(
                    (
                        stringify!($key),
                        $crate::config::keys::shown(&self.$key, server_keys!(@unset $($unset)?)),
                    ),
                )*]
            }
        }

        /// `[server]` values given on the command line, one per key (None:
        /// not given); `apply` puts them over the file's.
        #[derive(Debug, Clone, Default)]
        pub struct ServerFlags {
            $( pub $key: Option<$ty>, )*
        }

        impl ServerFlags {
            /// Sets every key given on the command line.
            pub fn apply(&self, s: &mut ServerConfig) {
                $( if let Some(v) = &self.$key { s.$key = v.clone(); } )*
            }
        }

        impl clap::Args for ServerFlags {
            fn augment_args(cmd: clap::Command) -> clap::Command {
                use $crate::config::keys::{switch_arg, value_arg};
                let keys = server_keys();
                let default = |key: &str| {
                    keys.iter().find(|k| k.name == key).map(|k| k.default.clone())
                };
                cmd $(
                    $(.arg(value_arg::<$ty>(
                        $flong,
                        $fvalue,
                        $fhelp,
                        &default(stringify!($key)).unwrap_or_default(),
                    ) $(.$fm($($fa),*))*))?
                    $(.arg(switch_arg($slong, $shelp) $(.$sm($($sa),*))*))*
                )*
            }
            fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
                Self::augment_args(cmd)
            }
        }

        impl clap::FromArgMatches for ServerFlags {
            fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
                let mut f = ServerFlags::default();
                f.update_from_arg_matches(m)?;
                Ok(f)
            }
            fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
                $(
                    $(if let Some(v) = $crate::config::keys::flag_value::<$ty>(m, $flong) {
                        self.$key = Some(v);
                    })?
                    $(if m.get_flag($slong) {
                        self.$key = Some($sval);
                    })*
                )*
                Ok(())
            }
        }
    };
}
pub(crate) use server_keys;

/// One `[server]` key as `rnfsd serve --help` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDoc {
    pub name: &'static str,
    pub summary: &'static str,
    /// TOML text (`1048576`, `"lifo"`, `["127.0.0.1:2049"]`), or what an
    /// unset key means in parentheses (`(adaptive)`).
    pub default: String,
    /// The long flags that set it (without `--`).
    pub flags: Vec<&'static str>,
}

impl KeyDoc {
    /// The default as a flag's value would be written (no quotes or
    /// brackets; an unset key's meaning without parentheses).
    pub fn cli_default(&self) -> String {
        cli_text(&self.default)
    }
}

/// `text` as a command-line value: `"lifo"` → lifo, `["a", "b"]` → a, b,
/// `(adaptive)` → adaptive.
pub fn cli_text(text: &str) -> String {
    let t = text
        .trim_start_matches(['[', '('])
        .trim_end_matches([']', ')']);
    t.replace('"', "")
}

/// The TOML text of a default value (None: unset).
pub trait DefaultText {
    fn toml(&self) -> Option<String>;
}

macro_rules! plain_text {
    ($($t:ty),*) => { $(impl DefaultText for $t {
        fn toml(&self) -> Option<String> { Some(self.to_string()) }
    })* };
}
plain_text!(u32, u64, usize, i32, bool);

macro_rules! quoted_text {
    ($($t:ty: $v:ident => $s:expr),*) => { $(impl DefaultText for $t {
        fn toml(&self) -> Option<String> { let $v = self; Some(format!("{:?}", $s)) }
    })* };
}
quoted_text!(
    String: s => s,
    SocketAddr: a => a.to_string(),
    PathBuf: p => p.display().to_string(),
    WakeOrder: w => w.word(),
    WorkerSpin: w => w.word(),
    Idmap: m => m.word(),
    Handoff: h => h.word(),
    PoolLayout: p => p.word(),
    HandleMode: m => m.word(),
    BackendKind: b => b.word(),
    rnfsd_stats::Mode: m => m.as_str()
);

impl DefaultText for MountPoint {
    fn toml(&self) -> Option<String> {
        match self {
            MountPoint::Off => false.toml(),
            MountPoint::Export => true.toml(),
            MountPoint::At(p) => p.toml(),
        }
    }
}

impl DefaultText for MaxWaking {
    fn toml(&self) -> Option<String> {
        match self {
            MaxWaking::N(n) => n.toml(),
            MaxWaking::Unlimited => Some("\"unlimited\"".into()),
        }
    }
}

/// An inline table.
impl DefaultText for CephfsConfig {
    fn toml(&self) -> Option<String> {
        let mut v = vec![format!("conf = {}", self.conf.toml()?)];
        v.push(format!("client = {}", self.client.toml()?));
        if let Some(fs) = &self.fs {
            v.push(format!("fs = {}", fs.toml()?));
        }
        v.push(format!("root = {}", self.root.toml()?));
        Some(format!("{{ {} }}", v.join(", ")))
    }
}

impl<T: DefaultText> DefaultText for Option<T> {
    fn toml(&self) -> Option<String> {
        self.as_ref().and_then(T::toml)
    }
}

impl<T: DefaultText> DefaultText for Vec<T> {
    fn toml(&self) -> Option<String> {
        let v: Option<Vec<String>> = self.iter().map(T::toml).collect();
        Some(format!("[{}]", v?.join(", ")))
    }
}

/// `v` as the help shows a default: its TOML text, else `(unset)` (what
/// an unset key means, or "unset").
pub fn shown<T: DefaultText>(v: &T, unset: Option<String>) -> String {
    v.toml()
        .unwrap_or_else(|| format!("({})", unset.as_deref().unwrap_or("unset")))
}

/// A key's type as a flag's: the type of one value, its parser, and
/// whether the flag may be repeated (a list key).
pub trait FlagValue: Sized {
    type One: Clone + Send + Sync + 'static;
    const MANY: bool = false;
    fn parser() -> ValueParser;
    /// The key's value from the flag's values (None: not given).
    fn from_flag(v: Vec<Self::One>) -> Option<Self>;
}

macro_rules! flag_scalar {
    ($($t:ty),*) => { $(impl FlagValue for $t {
        type One = $t;
        fn parser() -> ValueParser { clap::value_parser!($t).into() }
        fn from_flag(v: Vec<$t>) -> Option<$t> { v.into_iter().last() }
    })* };
}
flag_scalar!(
    u32,
    u64,
    usize,
    i32,
    String,
    PathBuf,
    SocketAddr,
    MaxWaking,
    WakeOrder,
    Idmap,
    Handoff,
    PoolLayout,
    rnfsd_stats::Mode
);

impl<T: FlagValue<One = T> + Clone + Send + Sync + 'static> FlagValue for Option<T> {
    type One = T;
    fn parser() -> ValueParser {
        T::parser()
    }
    fn from_flag(v: Vec<T>) -> Option<Self> {
        T::from_flag(v).map(Some)
    }
}

impl<T: FlagValue<One = T> + Clone + Send + Sync + 'static> FlagValue for Vec<T> {
    type One = T;
    const MANY: bool = true;
    fn parser() -> ValueParser {
        T::parser()
    }
    fn from_flag(v: Vec<T>) -> Option<Self> {
        (!v.is_empty()).then_some(v)
    }
}

/// The flag `--long VALUE` for a key of type `T`, its help ending in the
/// key's default.
pub fn value_arg<T: FlagValue>(
    long: &'static str,
    value_name: &'static str,
    help: &'static str,
    default: &str,
) -> Arg {
    Arg::new(long)
        .long(long)
        .value_name(value_name)
        .help(format!("{help} [default: {}]", cli_text(default)))
        .value_parser(T::parser())
        .action(if T::MANY {
            ArgAction::Append
        } else {
            ArgAction::Set
        })
}

/// The switch `--long` (no value).
pub fn switch_arg(long: &'static str, help: &'static str) -> Arg {
    Arg::new(long)
        .long(long)
        .help(help)
        .action(ArgAction::SetTrue)
}

/// The value of `value_arg::<T>(id, ..)`, if given.
pub fn flag_value<T: FlagValue>(m: &ArgMatches, id: &str) -> Option<T> {
    let v: Vec<T::One> = m.get_many::<T::One>(id)?.cloned().collect();
    T::from_flag(v)
}

/// Where the summary column starts in `help_text`, and the line width.
const COLUMN: usize = 33;
const WIDTH: usize = 79;

/// `  left   summary`, the summary from `COLUMN` on and wrapped at `WIDTH`.
fn entry(out: &mut String, left: &str, summary: &str) {
    let mut line = format!("  {left}");
    let mut col = match line.len() {
        n if n < COLUMN - 1 => COLUMN,
        n if n + 2 + 20 <= WIDTH => n + 2,
        // Too long to share its line with the summary.
        _ => {
            out.push_str(&line);
            out.push('\n');
            line.clear();
            COLUMN
        }
    };
    let mut first = true;
    for word in summary.split_whitespace() {
        if !first && col + 1 + word.len() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(COLUMN);
            first = true;
            col = COLUMN;
        }
        if first {
            let pad = col.saturating_sub(line.len());
            line.push_str(&" ".repeat(pad));
            first = false;
        } else {
            line.push(' ');
        }
        line.push_str(word);
        col = line.len();
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// `[[export]]`, `[[export.client]]` and `[export.cephfs]` keys, with the
/// defaults of `ExportConfig::new` and `CephfsConfig::default`.
pub fn export_keys() -> Vec<KeyDoc> {
    let e = ExportConfig::new("/srv/a");
    let c = CephfsConfig::default();
    let clients: Vec<String> = crate::access::DEFAULT_CLIENTS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let k = |name, default: String, summary| KeyDoc {
        name,
        summary,
        default,
        flags: Vec::new(),
    };
    vec![
        k("path", "(required)".into(), "clients mount its canonical path"),
        k("read_only", shown(&e.read_only, None), ""),
        k("id", shown(&e.id, Some("hash of the path".into())), "fixed export id (it is in every handle)"),
        k("handle_mode", shown(&e.handle_mode, None), "auto | kernel | path"),
        k("cross_mounts", shown(&e.cross_mounts, None), ""),
        k("mountpoint", shown(&e.mountpoint, None), "export only while a filesystem is mounted at the path (true) or at a PATH (exports(5) mp)"),
        k("sync", shown(&e.sync, None), "exports(5) sync; false = async (namespace changes and SETATTR answered before synced)"),
        k("clients", shown(&e.clients.clone().unwrap_or(clients), None), "addresses, networks (ADDR/LEN) or \"*\""),
        k("root_squash", shown(&e.root_squash, None), ""),
        k("all_squash", shown(&e.all_squash, None), ""),
        k("anonuid", shown(&e.anonuid, None), ""),
        k("anongid", shown(&e.anongid, None), ""),
        k("secure", shown(&e.secure, None), "clients must use a port < 1024 (exports(5) secure); false = insecure"),
        k("backend", shown(&e.backend, None), "local | cephfs (path is then only the name clients mount; id required, the same on every head; see docs/scale-out.md)"),
        k("[[export.client]]", String::new(), "per-client options: match = \"10.0.0.0/8\", then \
            any of read_only, root_squash, all_squash, anonuid, anongid, secure (default: the \
            export's)"),
        k("cephfs", shown(&e.cephfs, None), "with backend = \"cephfs\": the [export.cephfs] table"),
        k("[export.cephfs]", String::new(), ""),
        k("conf", shown(&c.conf, None), "the Ceph configuration file"),
        k("client", shown(&c.client, None), "the cephx id (\"admin\": client.admin)"),
        k("fs", shown(&c.fs, Some("the cluster's default".into())), "the filesystem's name"),
        k("root", shown(&c.root, None), "the exported directory inside CephFS"),
    ]
}

/// The configuration file's keys with their defaults, as `rnfsd serve
/// --help` prints them after the flags.
pub fn help_text() -> String {
    let mut out = String::from(
        "CONFIGURATION FILE (--config, TOML; unknown keys are errors; defaults shown):\n  [server]\n",
    );
    for k in super::server_keys() {
        let flags: Vec<String> = k.flags.iter().map(|f| format!("--{f}")).collect();
        let summary = match flags.is_empty() {
            true => k.summary.to_owned(),
            false => format!("{} ({})", k.summary, flags.join(", ")),
        };
        entry(&mut out, &format!("{} = {}", k.name, k.default), &summary);
    }
    out.push_str("\n  [[export]]                     one table per export\n");
    for k in export_keys() {
        match k.default.is_empty() {
            true => entry(&mut out, k.name, k.summary),
            false => entry(&mut out, &format!("{} = {}", k.name, k.default), k.summary),
        }
    }
    out.push_str(
        "  SIGHUP re-reads the file (and the exports file, resolving its names\n  \
         again): exports added, removed or changed go live, connections kept;\n  \
         [server] keys need a restart. `rnfsd exportfs` lists what is exported.",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_texts() {
        assert_eq!(shown(&1048576u32, None), "1048576");
        assert_eq!(shown(&WakeOrder::Lifo, None), "\"lifo\"");
        assert_eq!(shown(&PoolLayout::PerLoop, None), "\"per-loop\"");
        assert_eq!(shown(&MaxWaking::Unlimited, None), "\"unlimited\"");
        assert_eq!(shown(&None::<usize>, Some("adaptive".into())), "(adaptive)");
        assert_eq!(shown(&None::<usize>, None), "(unset)");
        let a: Vec<SocketAddr> = vec![
            "127.0.0.1:2049".parse().unwrap(),
            "[::1]:1".parse().unwrap(),
        ];
        assert_eq!(shown(&a, None), "[\"127.0.0.1:2049\", \"[::1]:1\"]");
        assert_eq!(cli_text("[\"127.0.0.1:2049\"]"), "127.0.0.1:2049");
        assert_eq!(cli_text("(max_io + 65536)"), "max_io + 65536");
        assert_eq!(cli_text("\"per-loop\""), "per-loop");
    }

    #[test]
    fn entries_align_and_wrap() {
        let mut out = String::new();
        entry(
            &mut out,
            "portmap = false",
            "built-in port mapper on port 111",
        );
        entry(
            &mut out,
            "ceph_inode_cache_entries = 16384",
            "CephFS, per export: cached inodes",
        );
        entry(&mut out, "x = 1", &"word ".repeat(30));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0].find("built-in"), Some(COLUMN));
        assert!(lines[1].contains("16384  CephFS"), "{}", lines[1]);
        assert!(lines.len() > 3);
        for l in &lines[2..] {
            assert!(l.len() <= WIDTH, "{l:?}");
            assert_eq!(l.find("word"), Some(COLUMN), "{l:?}");
        }
    }
}
