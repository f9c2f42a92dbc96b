//! RFC 5531 §11 record marking: each record is one or more fragments, each
//! preceded by a 4-byte big-endian header whose top bit marks the last
//! fragment and whose low 31 bits give the fragment length.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Top bit of a fragment header: this is the record's last fragment.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;
/// Largest fragment a header can describe.
pub const MAX_FRAGMENT: usize = 0x7fff_ffff;

/// Why a record could not be read.
#[derive(Debug)]
pub enum RecordError {
    Io(io::Error),
    /// The record's fragments add up to more than the allowed maximum. The
    /// stream cannot be resynchronised cheaply, so the caller closes it.
    TooLarge {
        max: usize,
    },
    /// The stream ended inside a record.
    Truncated,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Io(e) => write!(f, "read failed: {e}"),
            RecordError::TooLarge { max } => {
                write!(f, "reply record larger than the maximum of {max} bytes")
            }
            RecordError::Truncated => f.write_str("connection closed inside a record"),
        }
    }
}

/// Read one whole record into `buf` (cleared first), joining its fragments.
///
/// Returns `Ok(false)` on a clean end of stream before any byte of a new
/// record. Memory use is bounded by `max`: a fragment header is checked
/// against the running total before anything is allocated for it.
pub async fn read_record<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
    buf: &mut Vec<u8>,
) -> Result<bool, RecordError> {
    buf.clear();
    let mut first = true;
    loop {
        let mut hdr = [0u8; 4];
        if first {
            // Distinguish a clean EOF between records from one mid-header.
            let n = read_full(r, &mut hdr).await.map_err(RecordError::Io)?;
            if n == 0 {
                return Ok(false);
            }
            if n < 4 {
                return Err(RecordError::Truncated);
            }
        } else if read_full(r, &mut hdr).await.map_err(RecordError::Io)? < 4 {
            return Err(RecordError::Truncated);
        }
        first = false;
        let h = u32::from_be_bytes(hdr);
        let len = (h & !LAST_FRAGMENT) as usize;
        let old = buf.len();
        if len > max.saturating_sub(old) {
            return Err(RecordError::TooLarge { max });
        }
        buf.resize(old + len, 0);
        if let Some(dst) = buf.get_mut(old..) {
            if read_full(r, dst).await.map_err(RecordError::Io)? < len {
                return Err(RecordError::Truncated);
            }
        }
        if h & LAST_FRAGMENT != 0 {
            return Ok(true);
        }
    }
}

/// Fill `dst` unless the stream ends first; returns the bytes read.
async fn read_full<R: AsyncRead + Unpin>(r: &mut R, dst: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < dst.len() {
        let Some(rest) = dst.get_mut(got..) else {
            break;
        };
        let n = r.read(rest).await?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

/// Split `payload` into fragments of at most `frag` bytes each (at least one
/// fragment, even for an empty payload). Used by tests and fake servers;
/// the client itself sends each call as a single fragment.
pub fn encode_fragments(payload: &[u8], frag: usize) -> Vec<u8> {
    let frag = frag.clamp(1, MAX_FRAGMENT);
    let mut out = Vec::with_capacity(payload.len() + 4 * (payload.len() / frag + 1));
    let mut chunks = payload.chunks(frag).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&LAST_FRAGMENT.to_be_bytes());
        return out;
    }
    while let Some(c) = chunks.next() {
        let last = if chunks.peek().is_none() {
            LAST_FRAGMENT
        } else {
            0
        };
        out.extend_from_slice(&(last | c.len() as u32).to_be_bytes());
        out.extend_from_slice(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all_records(mut bytes: &[u8], max: usize) -> Result<Vec<Vec<u8>>, RecordError> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while read_record(&mut bytes, max, &mut buf).await? {
            out.push(buf.clone());
        }
        Ok(out)
    }

    #[tokio::test]
    async fn multi_fragment_reassembly() {
        let a: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let b = b"second record".to_vec();
        let mut wire = encode_fragments(&a, 7);
        wire.extend(encode_fragments(&b, 1));
        wire.extend(encode_fragments(&[], 4));
        let recs = read_all_records(&wire, 4096).await.unwrap();
        assert_eq!(recs, vec![a, b, vec![]]);
    }

    #[tokio::test]
    async fn zero_length_middle_fragments_are_allowed() {
        let mut wire = Vec::new();
        wire.extend_from_slice(&2u32.to_be_bytes());
        wire.extend_from_slice(b"ab");
        wire.extend_from_slice(&0u32.to_be_bytes());
        wire.extend_from_slice(&(LAST_FRAGMENT | 1).to_be_bytes());
        wire.extend_from_slice(b"c");
        assert_eq!(
            read_all_records(&wire, 16).await.unwrap(),
            vec![b"abc".to_vec()]
        );
    }

    #[tokio::test]
    async fn record_at_exact_maximum_is_accepted() {
        let p = vec![9u8; 100];
        let wire = encode_fragments(&p, 30);
        assert_eq!(read_all_records(&wire, 100).await.unwrap(), vec![p]);
    }

    #[tokio::test]
    async fn oversized_record_is_rejected_across_fragments() {
        // Each fragment is under the limit; their sum is not.
        let wire = encode_fragments(&[1u8; 101], 50);
        assert!(matches!(
            read_all_records(&wire, 100).await,
            Err(RecordError::TooLarge { max: 100 })
        ));
    }

    #[tokio::test]
    async fn huge_fragment_header_is_rejected_before_allocating() {
        let wire = (LAST_FRAGMENT | 0x7fff_ffff).to_be_bytes();
        assert!(matches!(
            read_all_records(&wire, 4 << 20).await,
            Err(RecordError::TooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn truncated_streams_are_errors() {
        let wire = encode_fragments(b"hello", 2);
        for cut in 1..wire.len() {
            assert!(
                matches!(
                    read_all_records(&wire[..cut], 64).await,
                    Err(RecordError::Truncated)
                ),
                "cut at {cut}"
            );
        }
    }
}
