//! Server configuration: the TOML file format, its defaults and validation,
//! and the resolution of exports (canonical paths, stable ids).
//!
//! ```toml
//! [server]
//! listen = ["127.0.0.1:2049"]
//! max_io = 1048576
//! exports = "/etc/exports"                # optional: a knfsd exports(5) file
//!
//! [[export]]
//! path = "/srv/a"
//! read_only = true
//! clients = ["127.0.0.1", "10.0.0.0/8"]   # default: loopback only
//! root_squash = true                      # default
//!
//! [[export.client]]                       # per-client options
//! match = "10.1.0.0/16"
//! read_only = false
//! ```
//!
//! See docs/security.md for the access-control semantics and
//! docs/exports.md for exports(5) files (`exports_file`).
//!
//! Unknown keys are errors, so a typo cannot silently leave a default in
//! force.
//!
//! The parts: `server.rs` (the `[server]` table: each key's default,
//! summary and flags, written once), `keys.rs` (what is made from that
//! table: the struct, the help's key list, the flags), `export.rs` (the
//! `[[export]]` tables and how exports are resolved), `exports_file/`
//! (knfsd's exports(5) file, read into `[[export]]` tables), `layout.rs`
//! (where threads and loops run on a host of N CPUs), `lower.rs` (the
//! options of the lower crates, from these), `validate.rs` (the checks that
//! need no filesystem), `check.rs` (`rnfsd check-config`).

mod check;
mod export;
pub mod exports_file;
pub mod keys;
mod layout;
pub mod lower;
mod server;
mod validate;

pub use check::check;
pub use export::*;
pub use layout::*;
pub use server::*;

use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// A configuration problem, with the key or export it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default, rename = "export")]
    pub exports: Vec<ExportConfig>,
    /// Problems that did not stop the load (from the exports(5) file:
    /// ignored options, names that did not resolve), for the log.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Config {
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(e.to_string()))
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    /// Adds the exports of the `server.exports` file, if set, resolving its
    /// host names and netgroups with `r`; its warnings go to `warnings`.
    /// A path exported both here and by an `[[export]]` table is an error.
    pub fn add_exports_file(&mut self, r: &dyn exports_file::Resolver) -> Result<(), ConfigError> {
        let Some(file) = &self.server.exports else {
            return Ok(());
        };
        let parsed = exports_file::load(file, r)?;
        for e in &parsed.exports {
            let same = |o: &&ExportConfig| o.path.components().eq(e.path.components());
            if let Some(o) = self.exports.iter().find(same) {
                return err(format!(
                    "export {} is in both {} and {}",
                    e.path.display(),
                    e.origin.as_deref().unwrap_or("the exports file"),
                    o.origin.as_deref().unwrap_or("the configuration"),
                ));
            }
        }
        self.exports.extend(parsed.exports);
        self.warnings.extend(parsed.warnings);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server, ServerConfig::default());
        assert_eq!(c.server.listen, vec!["127.0.0.1:2049".parse().unwrap()]);
        assert_eq!(c.server.max_io, 1048576);
        assert_eq!(c.server.max_record(), 1048576 + 65536);
        assert!(!c.server.allow_auth_none);
        assert_eq!(c.server.stats, rnfsd_stats::Mode::Percore);
        assert_eq!(
            (c.server.metrics, c.server.admin_socket.as_ref()),
            (None, None)
        );
        assert!(c.exports.is_empty());
        // No exports is legal in a file (added later by a reload).
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn udp_keys() {
        let c = Config::from_toml("").unwrap();
        assert!(c.server.udp);
        assert_eq!(c.server.udp_threads, 1);
        let c = Config::from_toml("[server]\nudp = false\nudp_threads = 2\n").unwrap();
        assert_eq!((c.server.udp, c.server.udp_threads), (false, 2));
        assert_eq!(c.validate(), Ok(()));
        for bad in [0, MAX_UDP_THREADS + 1] {
            let c = Config::from_toml(&format!("[server]\nudp_threads = {bad}\n")).unwrap();
            assert!(c.validate().is_err(), "udp_threads = {bad}");
        }
    }

    #[test]
    fn blocking_lazy_wake_us_bounded() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server.blocking_lazy_wake_us, 2000);
        for ok in [0, MAX_BLOCKING_LAZY_WAKE_US] {
            let c =
                Config::from_toml(&format!("[server]\nblocking_lazy_wake_us = {ok}\n")).unwrap();
            assert_eq!(c.validate(), Ok(()), "blocking_lazy_wake_us = {ok}");
        }
        let bad = MAX_BLOCKING_LAZY_WAKE_US + 1;
        let c = Config::from_toml(&format!("[server]\nblocking_lazy_wake_us = {bad}\n")).unwrap();
        assert!(c.validate().is_err());
    }

    #[test]
    fn inline_large_writes_per_turn_bounded() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server.inline_large_writes_per_turn, 4);
        for ok in [0, MAX_INLINE_LARGE_WRITES_PER_TURN] {
            let t = format!("[server]\ninline_large_writes_per_turn = {ok}\n");
            let c = Config::from_toml(&t).unwrap();
            assert_eq!(c.validate(), Ok(()), "inline_large_writes_per_turn = {ok}");
        }
        let bad = MAX_INLINE_LARGE_WRITES_PER_TURN + 1;
        let t = format!("[server]\ninline_large_writes_per_turn = {bad}\n");
        assert!(Config::from_toml(&t).unwrap().validate().is_err());
    }

    #[test]
    fn sync_sched_batch_key() {
        assert!(Config::from_toml("").unwrap().server.sync_sched_batch);
        let c = Config::from_toml("[server]\nsync_sched_batch = false\n").unwrap();
        assert!(!c.server.sync_sched_batch);
    }

    #[test]
    fn journal_commit_threads_bounded() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server.journal_commit_threads, 1);
        let c = Config::from_toml("[server]\njournal_commit_threads = 4\n").unwrap();
        assert_eq!(c.server.journal_commit_threads, 4);
        assert_eq!(c.validate(), Ok(()));
        for bad in [0, MAX_JOURNAL_COMMIT_THREADS + 1] {
            let t = format!("[server]\njournal_commit_threads = {bad}\n");
            let c = Config::from_toml(&t).unwrap();
            assert!(c.validate().is_err(), "journal_commit_threads = {bad}");
        }
    }

    #[test]
    fn ceph_mount_syncs_bounded() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server.ceph_mount_syncs, 1);
        for good in [0, MAX_CEPH_MOUNT_SYNCS] {
            let t = format!("[server]\nceph_mount_syncs = {good}\n");
            let c = Config::from_toml(&t).unwrap();
            assert_eq!(c.validate(), Ok(()), "ceph_mount_syncs = {good}");
        }
        let t = format!(
            "[server]\nceph_mount_syncs = {}\n",
            MAX_CEPH_MOUNT_SYNCS + 1
        );
        assert!(Config::from_toml(&t).unwrap().validate().is_err());
    }

    #[test]
    fn full_file() {
        let c = Config::from_toml(
            r#"
            [server]
            listen = ["127.0.0.1:2049", "[::1]:2049"]
            threads = 8
            max_record = 2162688
            max_io = 2097152
            state_dir = "/tmp/st"
            log_level = "debug"
            allow_auth_none = true
            path_cache_entries = 1000
            stats = "shared"
            metrics = "127.0.0.1:9100"
            admin_socket = "/run/rnfsd.sock"

            [[export]]
            path = "/srv/a"
            read_only = true
            id = 7
            handle_mode = "path"

            [[export]]
            path = "/srv/b"
            cross_mounts = true
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.server.listen.len(), 2);
        assert_eq!(c.server.threads, Some(8));
        assert_eq!(c.server.max_io, 2 << 20);
        assert_eq!(c.server.state_dir, Some(PathBuf::from("/tmp/st")));
        assert_eq!(c.server.path_cache_entries, 1000);
        assert_eq!(c.server.stats, rnfsd_stats::Mode::Shared);
        assert_eq!(c.server.metrics, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(
            c.server.admin_socket,
            Some(PathBuf::from("/run/rnfsd.sock"))
        );
        assert_eq!(c.server.min_threads, 2, "unset keys keep defaults");
        assert_eq!(c.exports.len(), 2);
        assert_eq!(c.exports[0].id, Some(7));
        assert!(c.exports[0].read_only);
        assert_eq!(c.exports[0].handle_mode, HandleMode::Path);
        assert_eq!(c.exports[1].handle_mode, HandleMode::Auto);
        assert!(c.exports[1].cross_mounts);
        assert!(!c.exports[1].read_only);
    }

    #[test]
    fn unknown_keys_are_errors() {
        for text in [
            "[server]\nlisten_on = [\"127.0.0.1:1\"]",
            "[[export]]\npath = \"/a\"\nreadonly = true",
            "[srever]\n",
            "threads = 3",
        ] {
            let e = Config::from_toml(text).unwrap_err();
            assert!(e.0.contains("unknown"), "{text:?}: {e}");
        }
    }

    #[test]
    fn bad_values_are_clear_errors() {
        assert!(Config::from_toml("[server]\nlisten = [\"nonsense\"]").is_err());
        assert!(Config::from_toml("[[export]]\npath = \"/a\"\nhandle_mode = \"fast\"").is_err());
        assert!(
            Config::from_toml("[[export]]\nread_only = true").is_err(),
            "path required"
        );
        assert!(Config::from_toml("[server]\nmax_io = -1").is_err());
        let check = |server: &str| {
            let mut c = Config::from_toml(server).unwrap();
            c.exports.push(ExportConfig::new("/x"));
            c.validate().map_err(|e| e.0)
        };
        assert!(check("").is_ok());
        assert!(check("[server]\nlisten = []")
            .unwrap_err()
            .contains("listen"));
        assert!(
            check("[server]\nlisten = [\"127.0.0.1:1\", \"127.0.0.1:1\"]")
                .unwrap_err()
                .contains("twice")
        );
        assert!(check("[server]\nmax_io = 100")
            .unwrap_err()
            .contains("max_io"));
        assert!(check("[server]\nmax_io = 2097152").is_ok());
        assert!(check("[server]\nmax_record = 8192")
            .unwrap_err()
            .contains("max_record"));
        assert!(check("[server]\nmin_threads = 9\nmax_threads = 4")
            .unwrap_err()
            .contains("min_threads"));
        assert!(check("[server]\nthreads = 0")
            .unwrap_err()
            .contains("threads"));
        assert!(check("[server]\nqueue_limit = 0")
            .unwrap_err()
            .contains("queue_limit"));
    }

    /// The buffered-bytes budget holds the reply room of the largest READ
    /// (0: no budget), or that READ would wait for room forever.
    #[test]
    fn the_budget_holds_the_largest_reply_room() {
        let check = |max_io: u32, budget: usize| {
            let mut c = Config::from_toml(&format!(
                "[server]\nmax_io = {max_io}\nmax_buffered_bytes = {budget}"
            ))
            .unwrap();
            c.exports.push(ExportConfig::new("/x"));
            c.validate().map_err(|e| e.0)
        };
        let room = |max_io: u32| max_io as usize + crate::limits::ROOM_HEAD;
        for max_io in [4096, 1 << 20, 4 << 20] {
            assert!(check(max_io, room(max_io)).is_ok(), "{max_io}");
            assert!(check(max_io, 0).is_ok(), "{max_io}: no budget");
            let e = check(max_io, room(max_io) - 1).unwrap_err();
            assert!(e.contains("max_buffered_bytes"), "{e}");
        }
    }
}
