//! A full check of the state's bookkeeping (tests only): every count
//! agrees with what it counts.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::shards::locked;
use crate::table::Body;
use crate::*;

pub(crate) fn audit(s: &State) {
    let mut clients: Vec<Arc<registry::Client>> =
        locked(&s.registry).by_id.values().cloned().collect();
    clients.extend(locked(&s.doomed).iter().cloned());
    let mut stateids = 0;
    let mut sessions = 0;
    let mut shares: HashMap<FileKey, ([u32; 2], [u32; 2])> = HashMap::new();
    let mut lockers: HashMap<FileKey, usize> = HashMap::new();
    let mut delegs = 0;
    let mut held = Vec::new();
    for c in &clients {
        let st = locked(&c.st);
        stateids += st.stateids.len();
        sessions += st.sessions.len();
        assert!(st.stateids.len() <= s.cfg.limits.stateids_per_client);
        assert!(st.sessions.len() <= s.cfg.limits.sessions_per_client);
        assert_eq!(
            st.revoked,
            st.stateids.values().filter(|e| e.revoked.is_some()).count()
        );
        for (other, e) in &st.stateids {
            match &e.body {
                Body::Open(o) => {
                    for l in &o.locks {
                        assert!(
                            st.stateids.contains_key(l),
                            "an open's lock is in the table"
                        );
                    }
                    if e.revoked.is_none() {
                        let f = shares.entry(e.file).or_default();
                        for (i, bit) in [1u32, 2].into_iter().enumerate() {
                            f.0[i] += u32::from(o.access & bit != 0);
                            f.1[i] += u32::from(o.deny & bit != 0);
                        }
                        assert_eq!(
                            st.open_owners.get(&o.owner).and_then(|m| m.get(&e.file)),
                            Some(other),
                            "its owner lists it"
                        );
                    }
                }
                Body::Lock(l) => {
                    *lockers.entry(e.file).or_default() += 1;
                    match st.stateids.get(&l.open).map(|e| &e.body) {
                        Some(Body::Open(o)) => assert!(o.locks.contains(other)),
                        _ => panic!("a lock stateid without its open"),
                    }
                }
                Body::Delegation { write, .. } => {
                    if e.revoked.is_none() {
                        delegs += 1;
                        held.push((e.file, c.id, *other, *write));
                    }
                }
            }
        }
    }
    assert_eq!(s.total_stateids.load(Ordering::Relaxed), stateids);
    assert_eq!(s.delegations.load(Ordering::Relaxed), delegs);
    let mut listed = 0;
    for (file, client, other, write) in &held {
        let files = s.files.shard(file);
        let f = files.get(file).expect("a delegated file is listed");
        assert!(f
            .delegs
            .iter()
            .any(|d| d.client == *client && d.other == *other && d.write == *write));
    }
    for shard in s.files.each() {
        for f in shard.values() {
            listed += f.delegs.len();
            assert_eq!(f.busy, 0, "no access in progress");
        }
    }
    assert_eq!(listed, delegs, "files list only held delegations");
    assert_eq!(s.sessions.len(), sessions);
    let mut seen = 0;
    for shard in s.files.each() {
        for (k, f) in shard.iter() {
            let want = shares.get(k).copied().unwrap_or_default();
            assert_eq!(f.counts(), want, "share counts of {k:?}");
            assert_eq!(f.lockers.len(), lockers.get(k).copied().unwrap_or(0));
            assert!(!(f.is_empty() && f.lockers.is_empty()), "empty entries go");
            seen += 1;
        }
    }
    let nonempty = shares
        .iter()
        .filter(|(_, c)| c.0 != [0, 0] || c.1 != [0, 0])
        .map(|(k, _)| *k)
        .chain(lockers.keys().copied())
        .chain(held.iter().map(|h| h.0))
        .collect::<std::collections::HashSet<_>>()
        .len();
    assert_eq!(seen, nonempty);
}
