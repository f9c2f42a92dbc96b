//! RFC 5531 §11 record marking, receive side: a record is a sequence of
//! fragments, each preceded by a 4-byte big-endian header whose high bit
//! marks the last fragment and whose low 31 bits give the fragment length.

use std::collections::VecDeque;
use std::io;

/// High bit of a fragment header: this is the record's last fragment.
pub(crate) const LAST_FRAGMENT: u32 = 0x8000_0000;
/// Largest fragment length a header can carry (31 bits).
pub(crate) const MAX_FRAGMENT: usize = 0x7fff_ffff;

/// A record (all its fragments so far) would exceed `max_record`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooBig {
    /// Bytes the record would have had with the offending fragment.
    pub claimed: usize,
}

/// Per-connection reassembly state. Input arrives in arbitrary slices; whole
/// records come out in `ready` ([`pop_ready`](Self::pop_ready)). Memory:
/// the partial record is bounded by `max_record` (checked from the header
/// before any byte is stored), and `ready` only holds what one parsed input
/// slice contained.
#[derive(Default)]
pub(crate) struct RecordReader {
    hdr: [u8; 4],
    hdr_have: usize,
    in_frag: bool,
    last: bool,
    frag_left: usize,
    rec: Vec<u8>,
    ready: VecDeque<Vec<u8>>,
    /// The capacity of the records in `ready`.
    ready_bytes: usize,
}

impl RecordReader {
    /// Consume all of `input`, appending completed records to `ready`.
    /// Empty records are dropped (no RPC message is empty). Returns the
    /// number of records completed.
    pub fn feed(&mut self, mut input: &[u8], max_record: usize) -> Result<usize, TooBig> {
        let mut done = 0;
        while !input.is_empty() {
            if !self.in_frag {
                let n = (4 - self.hdr_have).min(input.len());
                let (h, rest) = input.split_at(n);
                self.hdr[self.hdr_have..self.hdr_have + n].copy_from_slice(h);
                self.hdr_have += n;
                input = rest;
                if self.hdr_have < 4 {
                    break;
                }
                self.hdr_have = 0;
                let v = u32::from_be_bytes(self.hdr);
                let len = (v & !LAST_FRAGMENT) as usize;
                let total = self.rec.len().saturating_add(len);
                if total > max_record {
                    return Err(TooBig { claimed: total });
                }
                self.last = v & LAST_FRAGMENT != 0;
                self.frag_left = len;
                self.in_frag = true;
                // Bounded by max_record just above; pages are only touched
                // as data arrives. Exact for the first fragment (the usual
                // one-fragment record); amortised after, so a record sent as
                // many tiny fragments costs no reallocation per fragment.
                if self.rec.is_empty() {
                    // A small record in a buffer this loop kept, if any.
                    if self.rec.capacity() == 0 && len > 0 {
                        if let Some(v) = crate::recycle::take_record(len) {
                            self.rec = v;
                        }
                    }
                    self.rec.reserve_exact(len);
                } else {
                    self.rec.reserve(len);
                }
            }
            let n = self.frag_left.min(input.len());
            let (body, rest) = input.split_at(n);
            self.rec.extend_from_slice(body);
            self.frag_left -= n;
            input = rest;
            done += self.fragment_done();
        }
        Ok(done)
    }

    /// After bytes of a fragment: when it is whole, the next bytes are a
    /// header, and a last fragment completes its record (empty records are
    /// dropped: no RPC message is empty). Returns the records completed.
    fn fragment_done(&mut self) -> usize {
        if self.frag_left > 0 {
            return 0;
        }
        self.in_frag = false;
        if !self.last {
            return 0;
        }
        let rec = std::mem::take(&mut self.rec);
        if rec.is_empty() {
            return 0;
        }
        self.ready_bytes += rec.capacity();
        self.ready.push_back(rec);
        1
    }

    /// The next whole record, if any.
    pub fn pop_ready(&mut self) -> Option<Vec<u8>> {
        let r = self.ready.pop_front()?;
        self.ready_bytes -= r.capacity().min(self.ready_bytes);
        Some(r)
    }

    /// Put back a record `pop_ready` gave (it is next again).
    pub fn unpop(&mut self, r: Vec<u8>) {
        self.ready_bytes += r.capacity();
        self.ready.push_front(r);
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub fn clear_ready(&mut self) {
        self.ready.clear();
        self.ready_bytes = 0;
    }

    /// Bytes this reader holds: the partial record received so far and
    /// the whole records not yet taken (what counts against
    /// `max_buffered_bytes` until a record's call is handed on).
    pub fn held(&self) -> usize {
        self.rec.len() + self.ready_bytes
    }
}

/// What one direct read did.
pub(crate) struct Direct {
    /// Bytes read into the record.
    pub bytes: usize,
    /// Records completed (0 or 1).
    pub records: usize,
    /// The source said end of stream before the fragment was whole.
    pub eof: bool,
}

impl RecordReader {
    /// Bytes the fragment being received still owes (0 between fragments).
    pub fn frag_owed(&self) -> usize {
        if self.in_frag {
            self.frag_left
        } else {
            0
        }
    }

    /// Bytes still owed by the fragment being received, if it has this
    /// many or more: the body can then go straight into the record.
    pub fn direct_wanted(&self, min: usize) -> bool {
        self.frag_owed() >= min.max(1)
    }

    /// Read the rest of the current fragment straight into the record's
    /// reserved capacity (reserved when its header arrived), so a large
    /// WRITE's payload is copied once, socket to record, not through a
    /// scratch buffer too. `fill(rec, max)` appends at most `max` bytes to
    /// `rec` (0: end of stream); it is called until the fragment is whole
    /// or it fails (WouldBlock), so the next header stays in the socket,
    /// or `limit` bytes were read (at least one call is made). Bytes read
    /// before an error are kept.
    pub fn read_direct(
        &mut self,
        limit: usize,
        mut fill: impl FnMut(&mut Vec<u8>, usize) -> io::Result<usize>,
    ) -> (Direct, io::Result<()>) {
        let before = self.rec.len();
        let mut r = Ok(());
        let mut eof = false;
        while self.frag_left > 0 {
            let read = self.rec.len() - before;
            if read > 0 && read >= limit {
                break;
            }
            let max = self.frag_left.min(limit.saturating_sub(read).max(1));
            match fill(&mut self.rec, max) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => self.frag_left -= n.min(self.frag_left),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        let d = Direct {
            bytes: self.rec.len() - before,
            eof,
            records: self.fragment_done(),
        };
        (d, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn frag(last: bool, body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as u32 | if last { LAST_FRAGMENT } else { 0 })
            .to_be_bytes()
            .to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn single_and_multi_fragment_any_split() {
        let mut wire = frag(true, b"hello");
        wire.extend(frag(false, b"ab"));
        wire.extend(frag(false, b""));
        wire.extend(frag(true, b"cde"));
        wire.extend(frag(true, b"")); // empty record: dropped
        wire.extend(frag(true, b"z"));
        for chunk in 1..=wire.len() {
            let mut r = RecordReader::default();
            let mut n = 0;
            for c in wire.chunks(chunk) {
                n += r.feed(c, 100).unwrap();
            }
            assert_eq!(n, 3);
            let got: Vec<_> = std::iter::from_fn(|| r.pop_ready()).collect();
            assert_eq!(r.held(), 0);
            assert_eq!(
                got,
                vec![b"hello".to_vec(), b"abcde".to_vec(), b"z".to_vec()]
            );
        }
    }

    /// A reader that hands out at most `step` bytes a call, then WouldBlock
    /// every other call, like a nonblocking socket.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        block: bool,
    }
    /// What the socket's `fill` does, from any reader.
    fn append(src: &mut impl Read, v: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        let mut buf = vec![0; max];
        let n = src.read(&mut buf)?;
        v.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.block = !self.block;
            if self.block && !self.data.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn direct_reads_stop_at_the_fragment_end_and_mix_with_feeds() {
        let a: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..3000u32).map(|i| (i % 241) as u8).collect();
        let mut wire = frag(false, &a[..1000]);
        wire.extend(frag(false, &a[1000..]));
        wire.extend(frag(true, &b));
        for step in [1, 7, 100, 4096, 10_000] {
            for head in [1, 4, 5, 50] {
                let mut r = RecordReader::default();
                let mut src = Trickle {
                    data: &wire,
                    step,
                    block: false,
                };
                let mut got = 0;
                let mut rounds = 0;
                while got < 1 {
                    rounds += 1;
                    assert!(rounds < 100_000, "no progress");
                    if r.direct_wanted(64) {
                        let (d, res) = r.read_direct(usize::MAX, |v, max| append(&mut src, v, max));
                        assert!(!d.eof);
                        got += d.records;
                        match res {
                            Ok(()) => {}
                            Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                        }
                    } else {
                        let mut buf = vec![0; head];
                        match src.read(&mut buf) {
                            Ok(n) => got += r.feed(&buf[..n], 1 << 20).unwrap(),
                            Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                        }
                    }
                }
                let mut whole = a.clone();
                whole.extend(&b);
                assert_eq!(
                    r.ready.pop_front().unwrap(),
                    whole,
                    "step {step} head {head}"
                );
                assert!(src.data.is_empty());
            }
        }
    }

    #[test]
    fn direct_read_reports_end_of_stream_inside_a_fragment() {
        let mut r = RecordReader::default();
        let body = [9u8; 300];
        let w = frag(true, &body);
        assert_eq!(r.feed(&w[..10], 1000), Ok(0));
        let mut rest: &[u8] = &w[10..200];
        let (d, res) = r.read_direct(usize::MAX, |v, max| append(&mut rest, v, max));
        assert!(res.is_ok());
        assert_eq!((d.bytes, d.records, d.eof), (190, 0, true));
    }

    #[test]
    fn a_direct_read_stops_at_its_limit_and_held_counts_partial_and_whole_records() {
        let mut r = RecordReader::default();
        let w = frag(true, &[5u8; 1000]);
        assert_eq!(r.feed(&w[..4], 2000), Ok(0));
        let mut src: &[u8] = &w[4..];
        let (d, res) = r.read_direct(300, |v, max| append(&mut src, v, max.min(128)));
        assert!(res.is_ok());
        // Calls of at most 128 bytes until 300 are read: 128 + 128 + 44.
        assert_eq!((d.bytes, d.records), (300, 0));
        assert_eq!(r.held(), 300);
        let (d, _) = r.read_direct(usize::MAX, |v, max| append(&mut src, v, max));
        assert_eq!((d.bytes, d.records), (700, 1));
        assert_eq!(r.held(), 1000);
        let mut tail = frag(true, b"abc");
        tail.extend(frag(false, b"de"));
        assert_eq!(r.feed(&tail, 2000), Ok(1));
        assert_eq!(r.held(), 1000 + 3 + 2);
        let first = r.pop_ready().unwrap();
        assert_eq!(r.held(), 3 + 2);
        r.unpop(first);
        assert_eq!(r.held(), 1000 + 3 + 2);
        r.clear_ready();
        assert_eq!(r.held(), 2);
        assert!(!r.has_ready());
    }

    #[test]
    fn too_big_is_detected_from_headers() {
        let mut r = RecordReader::default();
        assert_eq!(r.feed(&frag(true, &[0; 10]), 10), Ok(1));
        // Two fragments that only together exceed the bound.
        assert_eq!(r.feed(&frag(false, &[0; 6]), 10), Ok(0));
        assert_eq!(
            r.feed(&frag(true, &[0; 5])[..4], 10),
            Err(TooBig { claimed: 11 })
        );
        // A huge claimed length never allocates.
        let mut r = RecordReader::default();
        let hdr = (LAST_FRAGMENT | MAX_FRAGMENT as u32).to_be_bytes();
        assert!(r.feed(&hdr, 1 << 20).is_err());
        assert_eq!(r.rec.capacity(), 0);
    }
}
