//! RFC 5531 §11 record marking, receive side: a record is a sequence of
//! fragments, each preceded by a 4-byte big-endian header whose high bit
//! marks the last fragment and whose low 31 bits give the fragment length.

use std::collections::VecDeque;

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
/// records come out in `ready`. Memory: the partial record is bounded by
/// `max_record` (checked from the header before any byte is stored), and
/// `ready` only holds what one parsed input slice contained.
#[derive(Default)]
pub(crate) struct RecordReader {
    hdr: [u8; 4],
    hdr_have: usize,
    in_frag: bool,
    last: bool,
    frag_left: usize,
    rec: Vec<u8>,
    pub ready: VecDeque<Vec<u8>>,
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
            if self.frag_left == 0 {
                self.in_frag = false;
                if self.last {
                    let r = std::mem::take(&mut self.rec);
                    if !r.is_empty() {
                        self.ready.push_back(r);
                        done += 1;
                    }
                }
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let got: Vec<_> = r.ready.drain(..).collect();
            assert_eq!(
                got,
                vec![b"hello".to_vec(), b"abcde".to_vec(), b"z".to_vec()]
            );
        }
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
