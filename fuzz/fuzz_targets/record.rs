//! Record marking (RFC 5531 §11), receive side, both implementations:
//! the server transport's `RecordReader` (compiled in from its source file:
//! it is crate-private) and the client's `read_record`. Both are fed one
//! stream in fuzzer-chosen slices and compared with a simple reference
//! parser: same records, same "too big" verdict, never more memory than the
//! bound.
#![no_main]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, ReadBuf};

#[allow(dead_code)]
#[path = "../../crates/transport/src/record.rs"]
mod record;

/// The transport's buffer reuse, which `record.rs` asks for a kept buffer
/// as a record begins: none kept here (each record freshly allocated, the
/// case the bound is checked against).
mod recycle {
    pub(crate) fn take_record(_capacity: usize) -> Option<Vec<u8>> {
        None
    }
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The stream ended between records.
    Clean,
    /// The stream ended inside a header or fragment.
    Partial,
    /// A header made the record exceed the bound (bytes it claimed).
    TooBig(usize),
}

/// The obvious parser over the whole stream. Records include empty ones.
fn reference(mut s: &[u8], max: usize) -> (Vec<Vec<u8>>, End) {
    let mut out = Vec::new();
    let mut rec = Vec::new();
    let mut in_record = false;
    loop {
        if s.is_empty() {
            let end = if in_record { End::Partial } else { End::Clean };
            return (out, end);
        }
        if s.len() < 4 {
            return (out, End::Partial);
        }
        let h = u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
        s = &s[4..];
        in_record = true;
        let len = (h & 0x7fff_ffff) as usize;
        if rec.len() + len > max {
            return (out, End::TooBig(rec.len() + len));
        }
        if s.len() < len {
            return (out, End::Partial);
        }
        rec.extend_from_slice(&s[..len]);
        s = &s[len..];
        if h & 0x8000_0000 != 0 {
            out.push(std::mem::take(&mut rec));
            in_record = false;
        }
    }
}

/// A reader that hands out at most `sizes[i]` bytes per read, cycling.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: [usize; 4],
    i: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let want = self.sizes[self.i % 4];
        self.i += 1;
        let n = want.min(buf.remaining()).min(self.data.len());
        let (a, b) = self.data.split_at(n);
        buf.put_slice(a);
        self.data = b;
        Poll::Ready(Ok(()))
    }
}

/// Poll once: every reader here is always ready.
fn now<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("an in-memory reader returned Pending"),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    // Small bounds so "too big" is reachable; a zero byte pair means 1 MiB.
    let max = match u16::from_be_bytes([data[0], data[1]]) as usize {
        0 => 1 << 20,
        m => m,
    };
    let sizes = [
        data[2] as usize + 1,
        data[3] as usize + 1,
        data[4] as usize + 1,
        data[5] as usize + 1,
    ];
    let stream = &data[6..];
    let (want, end) = reference(stream, max);

    // Server transport.
    let mut r = record::RecordReader::default();
    let mut rest = stream;
    let mut i = 0;
    let mut got_err = None;
    let mut got: Vec<Vec<u8>> = Vec::new();
    while !rest.is_empty() {
        let n = sizes[i % 4].min(rest.len());
        i += 1;
        let (a, b) = rest.split_at(n);
        rest = b;
        match r.feed(a, max) {
            Ok(_) => {}
            Err(e) => {
                got_err = Some(e.claimed);
                break;
            }
        }
        while let Some(rec) = r.pop_ready() {
            assert!(rec.len() <= max, "record over the bound");
            got.push(rec);
        }
    }
    // What the feed that failed completed before its error.
    while let Some(rec) = r.pop_ready() {
        got.push(rec);
    }
    let nonempty: Vec<&Vec<u8>> = want.iter().filter(|v| !v.is_empty()).collect();
    let ready: Vec<&Vec<u8>> = got.iter().collect();
    assert_eq!(ready, nonempty, "transport records differ from reference");
    match end {
        End::TooBig(c) => assert_eq!(got_err, Some(c), "transport missed too-big"),
        _ => assert_eq!(got_err, None, "transport reported too-big wrongly"),
    }

    // Client.
    let mut rd = Chunked {
        data: stream,
        sizes,
        i: 0,
    };
    let mut buf = Vec::new();
    let mut recs = Vec::new();
    let client_end = loop {
        match now(rnfsd_client::record::read_record(&mut rd, max, &mut buf)) {
            Ok(true) => {
                assert!(buf.len() <= max);
                recs.push(buf.clone());
            }
            Ok(false) => break End::Clean,
            Err(rnfsd_client::record::RecordError::Truncated) => break End::Partial,
            Err(rnfsd_client::record::RecordError::TooLarge { .. }) => break End::TooBig(0),
            Err(e) => panic!("unexpected client error {e}"),
        }
    };
    assert_eq!(recs, want, "client records differ from reference");
    match (&end, &client_end) {
        (End::TooBig(_), End::TooBig(_)) => {}
        (a, b) => assert_eq!(a, b, "client end state differs"),
    }
});
