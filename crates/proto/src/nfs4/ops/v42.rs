//! NFSv4.2's data operations (RFC 7862 §15, XDR in RFC 7863): ALLOCATE,
//! COPY, DEALLOCATE, OFFLOAD_CANCEL, OFFLOAD_STATUS, READ_PLUS, SEEK,
//! CLONE. COPY_NOTIFY,
//! IO_ADVISE, WRITE_SAME and the pNFS error and statistics operations
//! have no types: a server that does not serve them reads no arguments
//! (they decode as `ArgOp::Illegal`).
//!
//! READ_PLUS's data can be read straight into the reply with
//! `ReadPlusWriter`, as READ's with `ReadWriter`.

use rnfsd_xdr::{pad4, xdr_enum, xdr_struct, Dec, Enc, Result, Xdr};

use crate::nfs4::{
    decode_array, decode_at_most_one, fail_status, Netaddr4, NfsRes4, Nfsstat4, StableHow4,
    Stateid4, Utf8Str, Verifier4, MAX_DATA, OP_READ_PLUS,
};

/// Source servers named in one COPY (ca_source_server<>): an inter-server
/// copy names a few; we serve none, but read them to answer the rest of
/// the compound's decode correctly.
pub const MAX_COPY_SOURCES: usize = 16;
/// Segments in one decoded READ_PLUS result (a client's bound; the server
/// writes at most `MAX_READ_PLUS_SEGMENTS` of its own).
pub const MAX_READ_PLUS_SEGMENTS: usize = 1024;

xdr_struct! {
    /// ALLOCATE4args (RFC 7862 §15.1); the result is a status.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Allocate4Args { pub stateid: Stateid4, pub offset: u64, pub length: u64 }
}

xdr_struct! {
    /// DEALLOCATE4args (RFC 7862 §15.4); the result is a status.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Deallocate4Args { pub stateid: Stateid4, pub offset: u64, pub length: u64 }
}

xdr_struct! {
    /// CLONE4args (RFC 7862 §15.13): from the saved filehandle to the
    /// current one; the result is a status.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Clone4Args {
        pub src_stateid: Stateid4,
        pub dst_stateid: Stateid4,
        pub src_offset: u64,
        pub dst_offset: u64,
        pub count: u64,
    }
}

xdr_struct! {
    /// OFFLOAD_CANCEL4args and OFFLOAD_STATUS4args (RFC 7862 §15.8,
    /// §15.9): the stateid of an asynchronous copy.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Offload4Args { pub stateid: Stateid4 }
}

/// OFFLOAD_STATUS4resok (RFC 7862 §15.9): bytes copied so far, and the
/// copy's status once it is done (osr_complete<1>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffloadStatus4ResOk {
    pub count: u64,
    pub complete: Option<Nfsstat4>,
}

impl Xdr for OffloadStatus4ResOk {
    fn encode(&self, e: &mut Enc) {
        e.u64(self.count);
        self.complete.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(OffloadStatus4ResOk {
            count: d.u64()?,
            complete: decode_at_most_one(d)?,
        })
    }
}
pub type OffloadStatus4Res = NfsRes4<OffloadStatus4ResOk>;

xdr_enum! {
    /// data_content4 (RFC 7862 §15.11: SEEK's sa_what; READ_PLUS's
    /// segments).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DataContent4 {
        Data = 0,
        Hole = 1,
    }
}

xdr_struct! {
    /// SEEK4args (RFC 7862 §15.11).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Seek4Args { pub stateid: Stateid4, pub offset: u64, pub what: DataContent4 }
}

xdr_struct! {
    /// seek_res4 (RFC 7862 §15.11).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Seek4ResOk { pub eof: bool, pub offset: u64 }
}
pub type Seek4Res = NfsRes4<Seek4ResOk>;

xdr_struct! {
    /// READ_PLUS4args (RFC 7862 §15.10).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReadPlus4Args { pub stateid: Stateid4, pub offset: u64, pub count: u32 }
}

/// read_plus_content (RFC 7862 §15.10): data at an offset, or a hole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadPlusContent {
    /// data4: at most `MAX_DATA` bytes.
    Data { offset: u64, data: Vec<u8> },
    /// data_info4.
    Hole { offset: u64, length: u64 },
}

impl Xdr for ReadPlusContent {
    fn encode(&self, e: &mut Enc) {
        match self {
            ReadPlusContent::Data { offset, data } => {
                DataContent4::Data.encode(e);
                e.u64(*offset);
                e.opaque(data);
            }
            ReadPlusContent::Hole { offset, length } => {
                DataContent4::Hole.encode(e);
                e.u64(*offset);
                e.u64(*length);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match DataContent4::decode(d)? {
            DataContent4::Data => ReadPlusContent::Data {
                offset: d.u64()?,
                data: d.opaque(MAX_DATA)?.to_vec(),
            },
            DataContent4::Hole => ReadPlusContent::Hole {
                offset: d.u64()?,
                length: d.u64()?,
            },
        })
    }
}

/// read_plus_res4 (RFC 7862 §15.10), owning its data (what a client
/// decodes; a server writes it in place with `ReadPlusWriter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPlus4ResOk {
    pub eof: bool,
    pub contents: Vec<ReadPlusContent>,
}

impl Xdr for ReadPlus4ResOk {
    fn encode(&self, e: &mut Enc) {
        e.bool(self.eof);
        e.u32(self.contents.len() as u32);
        for c in &self.contents {
            c.encode(e);
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let eof = d.bool()?;
        // A segment is at least its arm and offset: 12 bytes.
        let contents = decode_array(d, MAX_READ_PLUS_SEGMENTS, 12, ReadPlusContent::decode)?;
        Ok(ReadPlus4ResOk { eof, contents })
    }
}
pub type ReadPlus4Res = NfsRes4<ReadPlus4ResOk>;

/// Writes a successful READ_PLUS result (resop, NFS4_OK, eof, segments)
/// with each data segment's bytes read straight into the reply buffer:
/// `begin` reserves the head; `hole` adds a hole; `data_begin` starts a
/// data segment, the caller appends its bytes to `Enc::buf_mut()` and
/// `data_end` pads them and fills its length in; `finish` writes eof and
/// the segment count.
#[derive(Debug)]
pub struct ReadPlusWriter {
    start: usize,
    segments: u32,
}

/// A data segment being written.
#[derive(Debug)]
pub struct DataSegment {
    len_at: usize,
}

impl ReadPlusWriter {
    /// Bytes before the first segment: resop, status, eof, count.
    pub const HEAD_LEN: usize = 16;
    /// A hole segment's bytes: arm, offset, length.
    pub const HOLE_LEN: usize = 20;
    /// A data segment's bytes before its data: arm, offset, length.
    pub const DATA_HEAD_LEN: usize = 16;

    pub fn begin(e: &mut Enc) -> Self {
        let start = e.len();
        e.buf_mut().resize(start + Self::HEAD_LEN, 0);
        ReadPlusWriter { start, segments: 0 }
    }

    pub fn hole(&mut self, e: &mut Enc, offset: u64, length: u64) {
        DataContent4::Hole.encode(e);
        e.u64(offset);
        e.u64(length);
        self.segments += 1;
    }

    pub fn data_begin(&mut self, e: &mut Enc, offset: u64) -> DataSegment {
        DataContent4::Data.encode(e);
        e.u64(offset);
        let len_at = e.len();
        e.u32(0);
        self.segments += 1;
        DataSegment { len_at }
    }

    /// Keeps at most `max` bytes appended since `data_begin` (and never
    /// more than `MAX_DATA`), pads them and writes their length. Returns
    /// the data length.
    pub fn data_end(&mut self, e: &mut Enc, seg: DataSegment, max: usize) -> u32 {
        let data_start = seg.len_at + 4;
        let buf = e.buf_mut();
        let n = buf.len().saturating_sub(data_start).min(max).min(MAX_DATA);
        buf.truncate(data_start + n);
        buf.resize(data_start + pad4(n), 0);
        e.patch_u32(seg.len_at, n as u32);
        n as u32
    }

    /// Removes a data segment begun but not wanted (nothing was read).
    pub fn data_abandon(&mut self, e: &mut Enc, seg: DataSegment) {
        e.truncate(seg.len_at - 12);
        self.segments -= 1;
    }

    pub fn segments(&self) -> u32 {
        self.segments
    }

    pub fn finish(self, e: &mut Enc, eof: bool) {
        let mut h = Enc::with_capacity(Self::HEAD_LEN);
        h.u32(OP_READ_PLUS);
        Nfsstat4::Ok.encode(&mut h);
        h.bool(eof);
        h.u32(self.segments);
        e.buf_mut()[self.start..self.start + Self::HEAD_LEN].copy_from_slice(h.as_slice());
    }

    /// Removes everything written since `begin`, for the caller to write
    /// a failed result instead.
    pub fn abandon(self, e: &mut Enc) {
        e.truncate(self.start);
    }
}

xdr_enum! {
    /// netloc_type4 (RFC 7862 §4.1).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum NetlocType4 {
        Name = 1,
        Url = 2,
        NetAddr = 3,
    }
}

/// netloc4 (RFC 7862 §4.1): where a copy's source server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Netloc4 {
    Name(Utf8Str),
    Url(Utf8Str),
    NetAddr(Netaddr4),
}

impl Xdr for Netloc4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            Netloc4::Name(s) => {
                NetlocType4::Name.encode(e);
                s.encode(e);
            }
            Netloc4::Url(s) => {
                NetlocType4::Url.encode(e);
                s.encode(e);
            }
            Netloc4::NetAddr(a) => {
                NetlocType4::NetAddr.encode(e);
                a.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match NetlocType4::decode(d)? {
            NetlocType4::Name => Netloc4::Name(Utf8Str::decode(d)?),
            NetlocType4::Url => Netloc4::Url(Utf8Str::decode(d)?),
            NetlocType4::NetAddr => Netloc4::NetAddr(Netaddr4::decode(d)?),
        })
    }
}

/// COPY4args (RFC 7862 §15.2): from the saved filehandle to the current
/// one; a source server names an inter-server copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy4Args {
    pub src_stateid: Stateid4,
    pub dst_stateid: Stateid4,
    pub src_offset: u64,
    pub dst_offset: u64,
    /// 0: to the source's end of file.
    pub count: u64,
    pub consecutive: bool,
    pub synchronous: bool,
    pub source_server: Vec<Netloc4>,
}

impl Xdr for Copy4Args {
    fn encode(&self, e: &mut Enc) {
        self.src_stateid.encode(e);
        self.dst_stateid.encode(e);
        e.u64(self.src_offset);
        e.u64(self.dst_offset);
        e.u64(self.count);
        e.bool(self.consecutive);
        e.bool(self.synchronous);
        e.u32(self.source_server.len() as u32);
        for s in &self.source_server {
            s.encode(e);
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(Copy4Args {
            src_stateid: Stateid4::decode(d)?,
            dst_stateid: Stateid4::decode(d)?,
            src_offset: d.u64()?,
            dst_offset: d.u64()?,
            count: d.u64()?,
            consecutive: d.bool()?,
            synchronous: d.bool()?,
            // A netloc4 is at least its arm and an empty string: 8 bytes.
            source_server: decode_array(d, MAX_COPY_SOURCES, 8, Netloc4::decode)?,
        })
    }
}

/// write_response4 (RFC 7862 §15.2): wr_callback_id<1> is the stateid of
/// an asynchronous copy, none for a synchronous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResponse4 {
    pub callback_id: Option<Stateid4>,
    pub count: u64,
    pub committed: StableHow4,
    pub writeverf: Verifier4,
}

impl Xdr for WriteResponse4 {
    fn encode(&self, e: &mut Enc) {
        self.callback_id.encode(e);
        e.u64(self.count);
        self.committed.encode(e);
        self.writeverf.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(WriteResponse4 {
            callback_id: decode_at_most_one(d)?,
            count: d.u64()?,
            committed: StableHow4::decode(d)?,
            writeverf: Verifier4::decode(d)?,
        })
    }
}

xdr_struct! {
    /// copy_requirements4 (RFC 7862 §15.2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CopyRequirements4 { pub consecutive: bool, pub synchronous: bool }
}

xdr_struct! {
    /// COPY4resok (RFC 7862 §15.2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Copy4ResOk { pub response: WriteResponse4, pub requires: CopyRequirements4 }
}

/// COPY4res (RFC 7862 §15.2): NFS4ERR_OFFLOAD_NO_REQS carries the
/// requirements the server could have met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copy4Res {
    Ok(Copy4ResOk),
    NoReqs(CopyRequirements4),
    Fail(Nfsstat4),
}

impl Copy4Res {
    pub fn status(&self) -> Nfsstat4 {
        match self {
            Copy4Res::Ok(_) => Nfsstat4::Ok,
            Copy4Res::NoReqs(_) => Nfsstat4::OffloadNoReqs,
            Copy4Res::Fail(s) => *s,
        }
    }
}

impl Xdr for Copy4Res {
    fn encode(&self, e: &mut Enc) {
        match self {
            Copy4Res::Ok(r) => {
                Nfsstat4::Ok.encode(e);
                r.encode(e);
            }
            Copy4Res::NoReqs(r) => {
                Nfsstat4::OffloadNoReqs.encode(e);
                r.encode(e);
            }
            Copy4Res::Fail(s) => fail_status(*s, &[Nfsstat4::OffloadNoReqs]).encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => Copy4Res::Ok(Copy4ResOk::decode(d)?),
            Nfsstat4::OffloadNoReqs => Copy4Res::NoReqs(CopyRequirements4::decode(d)?),
            s => Copy4Res::Fail(s),
        })
    }
}

/// Whether `opnum` is an NFSv4.2 operation with arguments here (the
/// others of 4.2 decode as `ArgOp::Illegal`).
pub fn is_v42_data_op(opnum: u32) -> bool {
    use crate::nfs4::*;
    matches!(
        opnum,
        OP_ALLOCATE
            | OP_COPY
            | OP_DEALLOCATE
            | OP_OFFLOAD_CANCEL
            | OP_OFFLOAD_STATUS
            | OP_READ_PLUS
            | OP_SEEK
            | OP_CLONE
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::{ArgOp, ResOp, OP_COPY, OP_SEEK};

    #[test]
    fn read_plus_in_place_matches_the_owned_encoding() {
        let mut e = Enc::new();
        e.u32(7);
        let mut w = ReadPlusWriter::begin(&mut e);
        w.hole(&mut e, 0, 4096);
        let s = w.data_begin(&mut e, 4096);
        e.buf_mut().extend_from_slice(b"hello, world");
        assert_eq!(w.data_end(&mut e, s, 5), 5);
        let s = w.data_begin(&mut e, 9000);
        w.data_abandon(&mut e, s);
        w.finish(&mut e, true);
        let owned = ResOp::ReadPlus(NfsRes4::Ok(ReadPlus4ResOk {
            eof: true,
            contents: vec![
                ReadPlusContent::Hole {
                    offset: 0,
                    length: 4096,
                },
                ReadPlusContent::Data {
                    offset: 4096,
                    data: b"hello".to_vec(),
                },
            ],
        }));
        assert_eq!(&e.as_slice()[4..], rnfsd_xdr::to_vec(&owned).as_slice());
        assert_eq!(ResOp::decode(&mut Dec::new(&e.as_slice()[4..])), Ok(owned));
    }

    #[test]
    fn copy_round_trips_and_bounds_its_sources() {
        let a = Copy4Args {
            src_stateid: Stateid4::default(),
            dst_stateid: Stateid4::default(),
            src_offset: 1,
            dst_offset: 2,
            count: 3,
            consecutive: true,
            synchronous: false,
            source_server: vec![Netloc4::Name(Utf8Str(b"srv".to_vec()))],
        };
        let op = ArgOp::Copy(a.clone());
        let mut e = Enc::new();
        op.encode(&mut e);
        let b = e.into_vec();
        let mut d = Dec::new(&b[4..]);
        assert_eq!(ArgOp::decode(&mut d, OP_COPY), Ok(op));
        assert_eq!(d.remaining(), 0);
        // A count of sources past the bound is refused before allocating.
        let mut e = Enc::new();
        let mut big = a;
        big.source_server.clear();
        big.encode(&mut e);
        let mut v = e.into_vec();
        let n = v.len();
        v[n - 4..].copy_from_slice(&(MAX_COPY_SOURCES as u32 + 1).to_be_bytes());
        v.extend(std::iter::repeat_n(0u8, 8 * (MAX_COPY_SOURCES + 1)));
        assert!(Copy4Args::decode(&mut Dec::new(&v)).is_err());
    }

    #[test]
    fn copy_results_keep_their_arms() {
        for r in [
            Copy4Res::Ok(Copy4ResOk {
                response: WriteResponse4 {
                    callback_id: None,
                    count: 9,
                    committed: StableHow4::FileSync,
                    writeverf: Verifier4([1; 8]),
                },
                requires: CopyRequirements4 {
                    consecutive: true,
                    synchronous: true,
                },
            }),
            Copy4Res::NoReqs(CopyRequirements4 {
                consecutive: false,
                synchronous: true,
            }),
            Copy4Res::Fail(Nfsstat4::NotSupp),
        ] {
            let r = ResOp::Copy(r);
            let b = rnfsd_xdr::to_vec(&r);
            assert_eq!(rnfsd_xdr::from_slice::<ResOp>(&b), Ok(r));
        }
        // A failure cannot claim the body-carrying status.
        let b = rnfsd_xdr::to_vec(&Copy4Res::Fail(Nfsstat4::OffloadNoReqs));
        assert_eq!(b, (Nfsstat4::ServerFault as u32).to_be_bytes());
    }

    #[test]
    fn seek_and_offload_results_decode() {
        let r = ResOp::Seek(NfsRes4::Ok(Seek4ResOk {
            eof: true,
            offset: 77,
        }));
        assert_eq!(
            rnfsd_xdr::from_slice::<ResOp>(&rnfsd_xdr::to_vec(&r)),
            Ok(r)
        );
        let mut d = Dec::new(&[0, 0, 0, 2]);
        assert!(DataContent4::decode(&mut d).is_err());
        let _ = OP_SEEK;
        let s = OffloadStatus4ResOk {
            count: 5,
            complete: Some(Nfsstat4::Ok),
        };
        assert_eq!(
            rnfsd_xdr::from_slice::<OffloadStatus4ResOk>(&rnfsd_xdr::to_vec(&s)),
            Ok(s)
        );
    }
}
