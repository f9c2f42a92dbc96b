//! One slot of a session's fore channel (RFC 8881 §2.10.6): the sequence
//! id of its last request, whether that request is still running, a
//! digest of it (to tell a retry from a new request reusing the sequence
//! id), and its cached reply.

use std::sync::Arc;

use crate::error::V4Error;

/// A digest of a request, computed by the caller over what identifies it
/// (the compound's arguments): a retry has the same one.
pub type Digest = u64;

#[derive(Debug, Default, Clone)]
pub(crate) struct Slot {
    /// The sequence id of the last request (0: none yet; the first is 1).
    pub(crate) seqid: u32,
    pub(crate) in_use: bool,
    /// The last request's digest (None: no request yet).
    pub(crate) digest: Option<Digest>,
    /// Its reply, when the caller cached it.
    pub(crate) reply: Option<Arc<[u8]>>,
    /// While a request runs: the digest and reply of the one before, to
    /// put back if it is abandoned.
    prev: Option<Last>,
}

/// A request's digest and cached reply.
type Last = (Option<Digest>, Option<Arc<[u8]>>);

/// What a SEQUENCE on this slot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A new request: the slot is now in use with its sequence id.
    New,
    /// A retry of the last request: its cached reply.
    Replay(Arc<[u8]>),
}

impl Slot {
    /// The rules of §2.10.6.1 for a request with `seqid` and `digest`:
    /// the next sequence id is a new request; the last one again is a
    /// retry (its cached reply, NFS4ERR_RETRY_UNCACHED_REP when none was
    /// cached, NFS4ERR_SEQ_FALSE_RETRY when the digest differs: a new
    /// request reusing the id); a retry while the request still runs waits
    /// (NFS4ERR_DELAY); any other is NFS4ERR_SEQ_MISORDERED.
    pub(crate) fn begin(&mut self, seqid: u32, digest: Digest) -> Result<Verdict, V4Error> {
        if self.in_use {
            return Err(match seqid == self.seqid {
                true => V4Error::Delay,
                false => V4Error::SeqMisordered,
            });
        }
        if seqid == self.seqid.wrapping_add(1) {
            self.prev = Some((self.digest.replace(digest), self.reply.take()));
            self.seqid = seqid;
            self.in_use = true;
            return Ok(Verdict::New);
        }
        match self.digest {
            Some(d) if seqid == self.seqid => {
                if d != digest {
                    return Err(V4Error::SeqFalseRetry);
                }
                match &self.reply {
                    Some(r) => Ok(Verdict::Replay(r.clone())),
                    None => Err(V4Error::RetryUncachedRep),
                }
            }
            _ => Err(V4Error::SeqMisordered),
        }
    }

    /// The request that began with `seqid` is done: its reply is kept for
    /// retries (None: not cached). A slot since reused is left alone.
    pub(crate) fn finish(&mut self, seqid: u32, reply: Option<Arc<[u8]>>) {
        if self.in_use && self.seqid == seqid {
            self.in_use = false;
            self.reply = reply;
            self.prev = None;
        }
    }

    /// The request that began with `seqid` changed nothing and will be
    /// run again from the start (it was tried where it could not wait):
    /// the slot is as it was before it began.
    pub(crate) fn abandon(&mut self, seqid: u32) {
        if self.in_use && self.seqid == seqid {
            let (digest, reply) = self.prev.take().unwrap_or_default();
            self.seqid = seqid.wrapping_sub(1);
            self.digest = digest;
            self.reply = reply;
            self.in_use = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(b: &[u8]) -> Arc<[u8]> {
        Arc::from(b)
    }

    #[test]
    fn the_rules() {
        let mut s = Slot::default();
        assert_eq!(s.begin(0, 1), Err(V4Error::SeqMisordered), "ids start at 1");
        assert_eq!(s.begin(2, 1), Err(V4Error::SeqMisordered));
        assert_eq!(s.begin(1, 1), Ok(Verdict::New));
        assert_eq!(s.begin(1, 1), Err(V4Error::Delay), "still running");
        assert_eq!(s.begin(2, 2), Err(V4Error::SeqMisordered));
        s.finish(1, Some(bytes(b"r1")));
        assert_eq!(s.begin(1, 1), Ok(Verdict::Replay(bytes(b"r1"))));
        assert_eq!(s.begin(1, 9), Err(V4Error::SeqFalseRetry));
        assert_eq!(s.begin(3, 3), Err(V4Error::SeqMisordered), "ahead by 2");
        assert_eq!(s.begin(2, 2), Ok(Verdict::New));
        s.finish(2, None);
        assert_eq!(s.begin(2, 2), Err(V4Error::RetryUncachedRep));
        assert_eq!(s.begin(1, 1), Err(V4Error::SeqMisordered), "behind");
    }

    #[test]
    fn an_abandoned_request_leaves_the_slot_as_it_was() {
        let mut s = Slot::default();
        assert_eq!(s.begin(1, 1), Ok(Verdict::New));
        s.finish(1, Some(bytes(b"r1")));
        assert_eq!(s.begin(2, 2), Ok(Verdict::New));
        s.abandon(2);
        assert_eq!(
            s.begin(1, 1),
            Ok(Verdict::Replay(bytes(b"r1"))),
            "1 is still the last"
        );
        assert_eq!(s.begin(2, 2), Ok(Verdict::New), "2 runs again");
        s.abandon(1);
        assert!(s.in_use, "only the running request's own id abandons it");
        s.finish(2, None);
        assert_eq!(s.begin(2, 2), Err(V4Error::RetryUncachedRep));
    }

    #[test]
    fn wraps() {
        let mut s = Slot {
            seqid: u32::MAX,
            digest: Some(0),
            ..Slot::default()
        };
        assert_eq!(s.begin(0, 5), Ok(Verdict::New), "0 follows u32::MAX");
        s.finish(0, Some(bytes(b"x")));
        assert_eq!(s.begin(0, 5), Ok(Verdict::Replay(bytes(b"x"))));
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A request with the slot's id plus `delta` (wrapping), digest.
        Begin(i8, u8),
        /// Finish the running request, caching its reply or not.
        Finish(bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            ((-2i8..4), (0u8..3)).prop_map(|(d, g)| Op::Begin(d, g)),
            any::<bool>().prop_map(Op::Finish),
        ]
    }

    proptest! {
        /// Against a record of what was granted: the sequence id moves
        /// only by one and only on a new request; a replay is the reply
        /// cached for the last new request with its digest; every verdict
        /// is the one the rules give.
        #[test]
        fn slot_follows_the_rules(start in any::<u32>(), ops in prop::collection::vec(op(), 1..200)) {
            let mut s = Slot { seqid: start, ..Slot::default() };
            let mut last = start;
            let mut news = 0u32;
            let mut running = false;
            let mut digest: Option<Digest> = None;
            let mut cached: Option<Arc<[u8]>> = None;
            for o in ops {
                match o {
                    Op::Begin(delta, g) => {
                        let id = last.wrapping_add(delta as i32 as u32);
                        let g = g as Digest;
                        let r = s.begin(id, g);
                        let want = if running {
                            Err(if id == last { V4Error::Delay } else { V4Error::SeqMisordered })
                        } else if id == last.wrapping_add(1) {
                            Ok(Verdict::New)
                        } else if id == last && digest.is_some() {
                            if digest != Some(g) {
                                Err(V4Error::SeqFalseRetry)
                            } else {
                                cached.clone().map(Verdict::Replay).ok_or(V4Error::RetryUncachedRep)
                            }
                        } else {
                            Err(V4Error::SeqMisordered)
                        };
                        prop_assert_eq!(&r, &want);
                        if r == Ok(Verdict::New) {
                            last = id;
                            news += 1;
                            running = true;
                            digest = Some(g);
                            cached = None;
                        }
                    }
                    Op::Finish(cache) => {
                        let reply = cache.then(|| bytes(&last.to_be_bytes()));
                        s.finish(last, reply.clone());
                        if running {
                            running = false;
                            cached = reply;
                        }
                    }
                }
                prop_assert_eq!(s.seqid, start.wrapping_add(news));
                prop_assert_eq!(s.in_use, running);
            }
        }
    }
}
