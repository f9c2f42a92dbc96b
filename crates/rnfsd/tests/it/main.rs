//! rnfsd's integration tests, as one test binary: one link of the whole
//! crate instead of one per file. Each module was a binary of its own;
//! `cargo test -p rnfsd --test it MODULE::` runs one module's tests, and
//! `cargo test -p rnfsd --test it MODULE::NAME -- --exact` one test.
//!
//! All modules' tests run side by side in this one process, so none may
//! count on having it to itself:
//! - process-wide state (environment, current directory, rlimits, the
//!   panic hook) is left as found: `hostile_regressions` puts the panic
//!   hook back and counts only panics that are not another test's;
//! - temporary directories come from `common::TempDir` (unique in the
//!   process) or `tempfile`, and servers listen on ports the kernel picks;
//! - port 111 is bound on a loopback address of one test's own (nlm:
//!   127.0.0.9 and 127.0.0.10, smoke: 127.0.0.3 and 127.0.0.7): a new test
//!   that needs it takes another address.

mod common;

mod cephfs;
mod crash;
mod durability_errors;
mod e2e_handles;
mod e2e_mount;
mod e2e_nfs3;
mod e2e_rpc;
mod exports_file;
mod first_run;
mod handles_reuse;
mod hostile_regressions;
mod hostile_server;
mod layering;
mod libnfs_interop;
mod nfs4;
mod nfs4_cephfs;
mod nfs4_copy;
mod nfs4_deleg;
mod nfs4_deleg_watch;
mod nfs4_idmap;
mod nfs4_ns;
mod nfs4_open;
mod nfs4_v42;
mod nfs4_xattr;
mod nlm;
mod object_cache;
mod reload_exports;
mod security_access;
mod security_confinement;
mod security_drc;
mod security_privileges;
mod security_slots;
mod slow_calls;
mod smoke;
mod stats;
mod sync_replies;
mod systemd;
