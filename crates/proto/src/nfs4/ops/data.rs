//! Data operations: READ, WRITE, COMMIT (RFC 8881 §18.22, §18.32, §18.3).
//! WRITE's data is borrowed from the received record; READ's data can be
//! read straight into the reply with `ReadWriter`.

use rnfsd_xdr::{pad4, xdr_enum, xdr_struct, Dec, Enc, Result, Xdr};

use crate::nfs4::{NfsRes4, Nfsstat4, Stateid4, Verifier4, MAX_DATA, OP_READ};

xdr_enum! {
    /// stable_how4 (RFC 8881 §18.32).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum StableHow4 {
        Unstable = 0,
        DataSync = 1,
        FileSync = 2,
    }
}

xdr_struct! {
    /// READ4args (RFC 8881 §18.22).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Read4Args { pub stateid: Stateid4, pub offset: u64, pub count: u32 }
}

/// READ4resok (RFC 8881 §18.22), owning its data (what a client decodes).
/// A server writes it in place with `ReadWriter` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read4ResOk {
    pub eof: bool,
    /// At most `MAX_DATA` bytes.
    pub data: Vec<u8>,
}

impl Xdr for Read4ResOk {
    fn encode(&self, e: &mut Enc) {
        e.bool(self.eof);
        e.opaque(&self.data);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let eof = d.bool()?;
        let data = d.opaque(MAX_DATA)?.to_vec();
        Ok(Read4ResOk { eof, data })
    }
}
pub type Read4Res = NfsRes4<Read4ResOk>;

/// Writes a successful READ result (resop, NFS4_OK, eof, data) with the
/// data read straight into the reply buffer: `begin` reserves the head,
/// the caller appends the data to `Enc::buf_mut()`, `finish` pads it and
/// fills the head in.
#[derive(Debug)]
pub struct ReadWriter {
    start: usize,
}

impl ReadWriter {
    /// Bytes before the data: resop, status, eof, data length.
    pub const HEAD_LEN: usize = 16;

    pub fn begin(e: &mut Enc) -> Self {
        let start = e.len();
        e.buf_mut().resize(start + Self::HEAD_LEN, 0);
        ReadWriter { start }
    }

    /// Offset in the buffer where the data starts.
    pub fn data_start(&self) -> usize {
        self.start + Self::HEAD_LEN
    }

    /// Keeps at most `max` of the bytes appended since `begin` (never more
    /// than the client asked for, whatever the reader did; eof is then
    /// false), pads them and writes the head. Returns the data length.
    pub fn finish(self, e: &mut Enc, eof: bool, max: usize) -> u32 {
        let data_start = self.data_start();
        let buf = e.buf_mut();
        let got = buf.len().saturating_sub(data_start);
        let n = got.min(max).min(MAX_DATA);
        buf.truncate(data_start + n);
        buf.resize(data_start + pad4(n), 0);
        let mut h = Enc::with_capacity(Self::HEAD_LEN);
        h.u32(OP_READ);
        Nfsstat4::Ok.encode(&mut h);
        h.bool(eof && n == got);
        h.u32(n as u32);
        buf[self.start..data_start].copy_from_slice(h.as_slice());
        n as u32
    }

    /// Removes the reserved head and any data, for the caller to write a
    /// failed result instead.
    pub fn abandon(self, e: &mut Enc) {
        e.truncate(self.start);
    }
}

/// WRITE4args (RFC 8881 §18.32) borrowing its data from the received
/// message, so the server does not copy up to `MAX_DATA` bytes per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write4ArgsRef<'a> {
    pub stateid: Stateid4,
    pub offset: u64,
    pub stable: StableHow4,
    pub data: &'a [u8],
}

impl<'a> Write4ArgsRef<'a> {
    pub fn decode(d: &mut Dec<'a>) -> Result<Self> {
        let stateid = Stateid4::decode(d)?;
        let offset = d.u64()?;
        let stable = StableHow4::decode(d)?;
        // Bounded by MAX_DATA and by the bytes present (Dec::opaque).
        let data = d.opaque(MAX_DATA)?;
        Ok(Write4ArgsRef {
            stateid,
            offset,
            stable,
            data,
        })
    }

    pub fn encode(&self, e: &mut Enc) {
        self.stateid.encode(e);
        e.u64(self.offset);
        self.stable.encode(e);
        e.opaque(self.data);
    }
}

xdr_struct! {
    /// WRITE4resok (RFC 8881 §18.32).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Write4ResOk { pub count: u32, pub committed: StableHow4, pub writeverf: Verifier4 }
}
pub type Write4Res = NfsRes4<Write4ResOk>;

xdr_struct! {
    /// COMMIT4args (RFC 8881 §18.3).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Commit4Args { pub offset: u64, pub count: u32 }
}
/// COMMIT4res: the resok is the write verifier.
pub type Commit4Res = NfsRes4<Verifier4>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::ResOp;

    #[test]
    fn read_in_place_matches_the_owned_encoding() {
        let mut e = Enc::new();
        e.u32(0xdead_beef);
        let w = ReadWriter::begin(&mut e);
        e.buf_mut().extend_from_slice(b"hello");
        assert_eq!(w.finish(&mut e, true, 100), 5);
        let owned = ResOp::Read(NfsRes4::Ok(Read4ResOk {
            eof: true,
            data: b"hello".to_vec(),
        }));
        assert_eq!(&e.as_slice()[4..], rnfsd_xdr::to_vec(&owned).as_slice());
    }

    #[test]
    fn read_in_place_cuts_to_max_and_clears_eof() {
        let mut e = Enc::new();
        let w = ReadWriter::begin(&mut e);
        e.buf_mut().extend_from_slice(&[1; 10]);
        assert_eq!(w.finish(&mut e, true, 6), 6);
        let r = ResOp::decode(&mut Dec::new(e.as_slice())).unwrap();
        assert_eq!(
            r,
            ResOp::Read(NfsRes4::Ok(Read4ResOk {
                eof: false,
                data: vec![1; 6]
            }))
        );
        let w = ReadWriter::begin(&mut e);
        let before = w.data_start() - ReadWriter::HEAD_LEN;
        w.abandon(&mut e);
        assert_eq!(e.len(), before);
    }
}
