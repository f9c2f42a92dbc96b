//! Many threads at once on shared files: no deadlock, and the
//! bookkeeping agrees with itself afterwards.

use std::sync::Barrier;

use super::audit::audit;
use super::locks::Env;
use super::*;
use crate::lock::*;

/// A small deterministic generator per thread.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn threads_at_once() {
    let env = Arc::new(Env::new());
    let s = state_with(Config {
        limits: Limits {
            stateids_per_client: 64,
            ..Limits::default()
        },
        ..Config::default()
    });
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut joins = Vec::new();
    for t in 0..threads {
        let s = s.clone();
        let env = env.clone();
        let barrier = barrier.clone();
        joins.push(std::thread::spawn(move || {
            let (c, sid) = handle(&s, &format!("client{t}"));
            let mut r = Lcg(t as u64 + 1);
            let mut seqids = [1u32; 4];
            let mut opens: Vec<Stateid> = Vec::new();
            let mut locks: Vec<Stateid> = Vec::new();
            barrier.wait();
            for _ in 0..400 {
                // The real file for locks is F; the others only share.
                let file = if r.next(2) == 0 {
                    F
                } else {
                    FileKey {
                        fsid: 9,
                        fileid: r.next(3),
                    }
                };
                match r.next(8) {
                    0 | 1 => {
                        let owner = format!("o{}", r.next(3));
                        if let Ok(o) =
                            open(&s, &c, &owner, file, 1 + r.next(3) as u32, r.next(4) as u32)
                        {
                            opens.push(o.stateid);
                        }
                    }
                    2 if !opens.is_empty() => {
                        let o = opens.swap_remove(r.next(opens.len() as u64) as usize);
                        let _ = s.close(&c, &Stateid { seqid: 0, ..o });
                    }
                    3 if !opens.is_empty() => {
                        let o = opens[r.next(opens.len() as u64) as usize];
                        let _ = s.open_downgrade(&c, &Stateid { seqid: 0, ..o }, 1, 0);
                    }
                    4 if !opens.is_empty() => {
                        let o = opens[r.next(opens.len() as u64) as usize];
                        let on_f = s.check_stateid(&c, &o, None).is_ok_and(|i| i.file == F);
                        if on_f {
                            let a = LockArgs {
                                locker: Locker4::New {
                                    open: Stateid { seqid: 0, ..o },
                                    owner: b"lo",
                                },
                                file: F,
                                write: r.next(2) == 0,
                                offset: r.next(50),
                                length: 1 + r.next(20),
                                reclaim: false,
                            };
                            if let Ok(l) = s.lock(&c, &a, &env.opener()) {
                                locks.push(l);
                            }
                        }
                    }
                    5 if !locks.is_empty() => {
                        let l = locks[r.next(locks.len() as u64) as usize];
                        let _ = s.locku(&c, &Stateid { seqid: 0, ..l }, F, 0, u64::MAX);
                        let _ = s.free_stateid(&c, &Stateid { seqid: 0, ..l });
                    }
                    6 => {
                        let slot = r.next(4) as usize;
                        seqids[slot] += 1;
                        if let Ok(Sequenced::New(t)) = seq(&s, sid, slot as u32, seqids[slot], 0) {
                            let _ = t.finish(Some(Arc::from(&b"r"[..])));
                        }
                    }
                    _ => {
                        let _ = s.check_io(&c, &Stateid::ANONYMOUS, file, r.next(2) == 0);
                    }
                }
            }
            (c, opens, locks.len())
        }));
    }
    // One more thread's worth of reaping and revocation meanwhile.
    barrier.wait();
    for i in 0..50 {
        s.reap(8);
        if i % 10 == 0 {
            s.revoke_files(|f| f.fsid == 9 && f.fileid == 2);
        }
        std::thread::yield_now();
    }
    let done: Vec<_> = joins.into_iter().map(|j| j.join().unwrap()).collect();
    audit(&s);
    let n = s.counts();
    assert!(n.stateids > 0, "the threads made state: {n:?}");
    let locks: usize = done.iter().map(|d| d.2).sum();
    assert!(locks > 0, "locks were granted");
    // Everyone goes: all of it is freed.
    s.clock.advance(Duration::from_secs(200));
    while s.reap(16).freed > 0 || s.counts().doomed_clients > 0 {}
    audit(&s);
    assert_eq!(s.counts().stateids, 0);
    assert_eq!(s.counts().clients, 0);
    assert!(!s.share_denies(&F, 3));
    drop(done);
}
