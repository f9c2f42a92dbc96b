//! The exports in force and changing them while serving: opening an
//! export's backend, applying a reloaded configuration (SIGHUP) with no
//! restart and no connection dropped, and the `exportfs -v` view.
//!
//! A reload is all or nothing for the export set: every new export is
//! opened first, and only when all opened does the new set go into force
//! (one pointer swap). Calls already running finish with the export they
//! started with; a removed export's backend (descriptors, caches, its
//! flusher) is released when the last of them ends, written files flushed
//! on the way out.
//!
//! An export with `mountpoint` (exports(5) `mp`) whose mount point is not
//! mounted is left out, at start and at each reload, with an error in the
//! log; `exportfs` lists it as not exported, and a later reload that finds
//! it mounted exports it.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rnfsd_fs::cache::Caches;
use rnfsd_fs::ceph::CephFs;
use rnfsd_fs::local::LocalFs;
use rnfsd_fs::Backend;
use rnfsd_fs::WriteVerifier;
use rnfsd_stats::Registry;

use crate::access::{ClientOpts, ExportAccess};
use crate::config::{
    self, lower, CephfsConfig, Config, ResolvedBackend, ResolvedExport, ServerConfig,
};
use crate::state::{Export, Server};

/// What opening an export needs besides its configuration (fixed for the
/// life of the process: the handle key, the shared descriptor budget, the
/// write verifier and the statistics registry).
pub struct Opener {
    pub key: [u8; 32],
    pub caches: Arc<Caches>,
    pub verifier: Arc<WriteVerifier>,
    pub stats: Arc<Registry>,
    /// This head's identity (host name and state directory): the same on
    /// every start, different on every other head.
    pub head: String,
    /// The exports left out because their mount point is not mounted.
    pub not_exported: NotExported,
}

/// The exports left out because their `mountpoint` is not mounted, with
/// why (path, reason), for `exportfs`: set at start and by each reload that
/// is applied.
#[derive(Debug, Clone, Default)]
pub struct NotExported(Arc<Mutex<Vec<(String, String)>>>);

impl NotExported {
    fn set(&self, v: Vec<(String, String)>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = v;
    }

    fn get(&self) -> Vec<(String, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Logs (loudly: it is not served) that `e` is left out because of `why`.
fn left_out(e: &ResolvedExport, why: &str) -> (String, String) {
    let path = e.path.display().to_string();
    tracing::error!(
        path,
        "export NOT exported: {why} (mountpoint): is its filesystem mounted? A reload \
         (SIGHUP) exports it once it is"
    );
    (path, format!("{why} (mountpoint)"))
}

fn blake3_hex(b: &[u8]) -> String {
    rnfsd_fs::handle::digest_hex(b)
}

impl Opener {
    /// Open the backends of `exports` but those whose mount point is not
    /// mounted, which are logged and listed as not exported.
    pub fn open_all(
        &self,
        s: &ServerConfig,
        exports: &[ResolvedExport],
    ) -> Result<Vec<Arc<Export>>, String> {
        let mut opened = Vec::with_capacity(exports.len());
        let mut left = Vec::new();
        for e in exports {
            match &e.not_mounted {
                Some(why) => left.push(left_out(e, why)),
                None => opened.push(self.open(s, e)?),
            }
        }
        self.not_exported.set(left);
        Ok(opened)
    }

    /// Open `e`'s backend with the `[server]` cache settings `s`, and count
    /// its statistics for as long as it lives.
    pub fn open(&self, s: &ServerConfig, e: &ResolvedExport) -> Result<Arc<Export>, String> {
        let at = |x: &dyn std::fmt::Display| format!("export {}: {x}", e.path.display());
        let path = e.path.to_str().ok_or_else(|| at(&"not UTF-8"))?.to_owned();
        let backend: Arc<dyn Backend> = match &e.backend {
            ResolvedBackend::Local => Arc::new(self.open_local(s, e).map_err(|x| at(&x))?),
            ResolvedBackend::Cephfs(c) => Arc::new(self.open_cephfs(s, e, c).map_err(|x| at(&x))?),
        };
        tracing::info!(path, id = e.id, sync = e.sync, clients = %describe_access(&e.access), "export");
        if e.access.rules().iter().any(|r| !r.opts.secure) {
            tracing::warn!(path, "export is insecure for some clients: their calls may come from any source port, so any local user on such a client can claim any uid");
        }
        let root_calls = s.act_as_caller == Some(false) && rustix::process::geteuid().is_root();
        if matches!(e.backend, ResolvedBackend::Local) && root_calls {
            tracing::warn!(path, "export served as root for every call (act_as_caller = false as root, all_calls_as_root): whatever uid a client claims, and whatever root_squash or all_squash say, its calls run as root");
        }
        if !e.sync {
            tracing::warn!(path, "export is async: namespace changes and SETATTR are answered before they reach stable storage; a crash of this host can undo them");
        }
        let export = Arc::new(
            Export::new(e.id, path, backend, e.access.clone())
                .with_sync(e.sync)
                .with_layout(e.handle_mode, e.cross_mounts)
                .with_backend(e.backend.clone()),
        );
        // Weak: counted while it serves, dropped from the statistics once
        // a reload removed it and its last call ended.
        let (w, v) = (Arc::downgrade(&export), self.verifier.clone());
        self.stats.add_export(move || {
            w.upgrade()
                .map(|e| crate::metrics::export_counts(&e.path, &e.backend.stats(), v.resets()))
        });
        Ok(export)
    }

    fn shared(&self) -> lower::Shared<'_> {
        lower::Shared {
            key: self.key,
            caches: &self.caches,
            verifier: &self.verifier,
        }
    }

    /// A CephFS export: mounted through libcephfs; handles need the same
    /// key and export id on every head, and attributes carry the export id
    /// as their fsid.
    fn open_cephfs(
        &self,
        s: &ServerConfig,
        e: &ResolvedExport,
        c: &CephfsConfig,
    ) -> Result<CephFs, String> {
        // A restarted (or killed and restarted) head ends the session it
        // left, rather than every head waiting for its timeout.
        let session = format!("rnfsd-{}-{}", &blake3_hex(self.head.as_bytes())[..16], e.id);
        let o = lower::ceph(s, e, c, &self.shared(), session)?;
        tracing::info!(conf = o.conf.as_str(), client = %c.client, fs = c.fs.as_deref().unwrap_or("(default)"), root = %c.root, "mounting CephFS");
        CephFs::open(e.id, o)
    }

    fn open_local(&self, s: &ServerConfig, e: &ResolvedExport) -> std::io::Result<LocalFs> {
        LocalFs::open(&e.path, e.id, lower::local(s, e, &self.shared()))
    }
}

/// Put `new`'s exports in force on `server`, which runs with `running`.
/// Returns one line per change, or why nothing changed. `[server]` keys
/// are not applied (they size threads, listeners and caches: a restart).
pub fn apply(
    server: &Server,
    running: &Config,
    new: &Config,
    opener: &Opener,
) -> Result<Vec<String>, String> {
    let resolved = config::resolve_exports(&new.exports).map_err(|e| e.to_string())?;
    let mut changes = Vec::new();
    if new.server != running.server {
        changes.push("[server] changes need a restart and were not applied".to_owned());
    }
    let current = server.exports();
    let mut next: Vec<Arc<Export>> = Vec::with_capacity(resolved.len());
    // Access changes of kept exports wait until every new one has opened.
    let mut access_changes: Vec<(Arc<Export>, ExportAccess)> = Vec::new();
    let mut left = Vec::new();
    for r in &resolved {
        if let Some(why) = &r.not_mounted {
            left.push(left_out(r, why));
            continue;
        }
        let kept = current
            .iter()
            .find(|e| e.id == r.id && Path::new(&e.path) == r.path);
        match kept {
            Some(e)
                if (e.handle_mode, e.cross_mounts, e.sync, &e.backend_cfg)
                    == (r.handle_mode, r.cross_mounts, r.sync, &r.backend) =>
            {
                if **e.access() != r.access {
                    access_changes.push((e.clone(), r.access.clone()));
                }
                next.push(e.clone());
            }
            // Same id and path, other backend options: a fresh backend.
            // Handles stay valid (same key, same id); its caches start cold.
            Some(_) => {
                next.push(opener.open(&running.server, r)?);
                changes.push(format!(
                    "export {} reopened (handle_mode, crossmnt, sync or backend changed)",
                    r.path.display()
                ));
            }
            None => {
                next.push(opener.open(&running.server, r)?);
                changes.push(format!("export {} added (id {})", r.path.display(), r.id));
            }
        }
    }
    for (e, a) in access_changes {
        changes.push(format!(
            "export {} clients now {}",
            e.path,
            describe_access(&a)
        ));
        e.set_access(a);
    }
    for e in current.iter() {
        if !next.iter().any(|n| n.path == e.path) {
            changes.push(format!(
                "export {} removed: its handles now get NFS3ERR_STALE",
                e.path
            ));
        }
    }
    server.set_exports(next);
    opener.not_exported.set(left);
    crate::programs::nlm::release_unlisted(server);
    Ok(changes)
}

/// One client's options in exports(5) words, in exportfs's order.
fn client_opts(o: &ClientOpts) -> String {
    let mut v = vec![
        if o.read_only { "ro" } else { "rw" }.to_owned(),
        if o.secure { "secure" } else { "insecure" }.to_owned(),
        if o.root_squash {
            "root_squash"
        } else {
            "no_root_squash"
        }
        .to_owned(),
        if o.all_squash {
            "all_squash"
        } else {
            "no_all_squash"
        }
        .to_owned(),
    ];
    if o.all_squash || o.root_squash {
        v.push(format!("anonuid={}", o.anonuid));
        v.push(format!("anongid={}", o.anongid));
    }
    v.join(",")
}

/// "10.0.0.0/8(rw,...) *(ro,...)" for logs.
pub fn describe_access(a: &ExportAccess) -> String {
    let v: Vec<String> = a
        .rules()
        .iter()
        .map(|r| format!("{}({})", r.spec, client_opts(&r.opts)))
        .collect();
    v.join(" ")
}

/// What is exported, one line per export and client with the effective
/// options, as `exportfs -v` prints (`<world>` for `*`), then a comment
/// line for each export left out because its mount point is not mounted.
pub fn exportfs(server: &Server, not_exported: &NotExported) -> String {
    let mut out = String::new();
    for e in server.exports().iter() {
        let mut export_opts = vec![
            if e.sync { "sync" } else { "async" }.to_owned(),
            format!("fsid={}", e.id),
        ];
        if e.cross_mounts {
            export_opts.push("crossmnt".to_owned());
        }
        if let ResolvedBackend::Cephfs(c) = &e.backend_cfg {
            // Not exports(5): where a CephFS export's files come from.
            export_opts.push(format!(
                "cephfs={}:{}",
                c.fs.as_deref().unwrap_or("(default)"),
                c.root
            ));
        }
        export_opts.push("sec=sys".to_owned());
        for r in e.access().rules() {
            let who = match r.spec.as_str() {
                "*" => "<world>",
                s => s,
            };
            out.push_str(&format!(
                "{:<15}\t{who}({},{})\n",
                e.path,
                export_opts.join(","),
                client_opts(&r.opts)
            ));
        }
    }
    if out.is_empty() {
        out.push_str("# nothing exported\n");
    }
    for (path, why) in not_exported.get() {
        out.push_str(&format!("# {path:<13}\tnot exported: {why}\n"));
    }
    out
}
