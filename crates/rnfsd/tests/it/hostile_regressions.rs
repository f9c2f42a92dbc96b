//! Fuzzer inputs as ordinary tests (no libFuzzer, no special flags): every
//! file under fuzz/seeds/dispatch and fuzz/regressions/dispatch is fed to
//! `rnfsd::rpc::dispatch` over a real `LocalFs` export, laid out exactly as
//! the `dispatch` fuzz target reads it, and the reply checked the same way:
//! both use one harness, fuzz/harness/dispatch.rs. A crash the fuzzer finds is saved under
//! fuzz/regressions/dispatch/ and so stays covered by `cargo test`.
//!
//! The 10-minute fuzzing runs recorded in docs/fuzzing.md found no crash, so
//! the regressions directory is empty for now; the seeds still exercise
//! every NFSv3, MOUNT and port mapper procedure through this path.

use crate::common;

#[path = "../../../../fuzz/harness/dispatch.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::TempDir;
use harness::feed;
use rnfsd_proto::rpc::{AcceptStat, ReplyHeader};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Set by any panic of this test, even one dispatch catches and answers
/// SYSTEM_ERR.
static PANICKED: AtomicBool = AtomicBool::new(false);

type Hook = dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync;

/// Puts the panic hook found at the start back however the test ends: the
/// other modules' tests share this process.
struct RestoreHook(Arc<Hook>);

impl Drop for RestoreHook {
    fn drop(&mut self) {
        let prev = self.0.clone();
        drop(std::panic::take_hook());
        std::panic::set_hook(Box::new(move |info| prev(info)));
    }
}

#[test]
fn dispatch_seeds_and_regressions() {
    let prev: Arc<Hook> = Arc::from(std::panic::take_hook());
    let _restore = RestoreHook(prev.clone());
    // The other modules' tests run beside this one: a panic on a thread
    // named after another test (libtest names each test's thread
    // MODULE::NAME) is theirs. This test's thread and every other thread
    // (dispatch's, the export's) count.
    let me = std::thread::current().name().map(str::to_owned);
    std::panic::set_hook(Box::new(move |info| {
        let theirs = std::thread::current()
            .name()
            .is_some_and(|n| n.contains("::") && Some(n) != me.as_deref());
        if !theirs {
            PANICKED.store(true, Ordering::SeqCst);
        }
        prev(info)
    }));
    let dir = TempDir::new("hostile-regress");
    let env = harness::Env::new(dir.path());
    let seeds = inputs(&fuzz_dir().join("seeds/dispatch"));
    assert!(seeds.len() >= 40, "dispatch seeds missing: {}", seeds.len());
    let mut successes = 0;
    for p in seeds
        .iter()
        .chain(&inputs(&fuzz_dir().join("regressions/dispatch")))
    {
        let data = std::fs::read(p).expect("read input");
        if feed(&env, &data) == Some(ReplyHeader::Accepted(AcceptStat::Success)) {
            successes += 1;
        }
    }
    // The seeds are valid calls of every procedure: most must succeed at the
    // RPC level (an NFS error status is still an RPC SUCCESS).
    assert!(successes * 2 > seeds.len(), "only {successes} successes");
    assert!(!PANICKED.load(Ordering::SeqCst), "a handler panicked");
}
