//! NFS version 3 (RFC 1813), program 100003: every argument and result type
//! of the 22 procedures, with encode and decode.
//!
//! Results are `NfsRes<Ok, Fail>`: the RFC's `switch (nfsstat3 status)` union
//! with a resok body for NFS3_OK and a resfail body for every other status.
//! Unknown nfsstat3 values decode as `XdrError::BadDiscriminant` on both
//! sides: RFC 1813 §2.6 lists every value a server may send.
//!
//! Every variable-length item is bounded on decode: handles by NFS3_FHSIZE,
//! names by `MAX_NAME`, paths by `MAX_PATH`, data by `MAX_DATA`, and directory
//! listings by the bytes present (each entry consumes at least 24 bytes) and
//! `MAX_DIR_ENTRIES`.

use rnfsd_xdr::{pad4, xdr_enum, xdr_struct, Dec, Enc, Result, Xdr, XdrError};

pub const NFS_PROGRAM: u32 = 100003;
pub const NFS_V3: u32 = 3;

// Procedure numbers (RFC 1813 §3.3).
pub const NFSPROC3_NULL: u32 = 0;
pub const NFSPROC3_GETATTR: u32 = 1;
pub const NFSPROC3_SETATTR: u32 = 2;
pub const NFSPROC3_LOOKUP: u32 = 3;
pub const NFSPROC3_ACCESS: u32 = 4;
pub const NFSPROC3_READLINK: u32 = 5;
pub const NFSPROC3_READ: u32 = 6;
pub const NFSPROC3_WRITE: u32 = 7;
pub const NFSPROC3_CREATE: u32 = 8;
pub const NFSPROC3_MKDIR: u32 = 9;
pub const NFSPROC3_SYMLINK: u32 = 10;
pub const NFSPROC3_MKNOD: u32 = 11;
pub const NFSPROC3_REMOVE: u32 = 12;
pub const NFSPROC3_RMDIR: u32 = 13;
pub const NFSPROC3_RENAME: u32 = 14;
pub const NFSPROC3_LINK: u32 = 15;
pub const NFSPROC3_READDIR: u32 = 16;
pub const NFSPROC3_READDIRPLUS: u32 = 17;
pub const NFSPROC3_FSSTAT: u32 = 18;
pub const NFSPROC3_FSINFO: u32 = 19;
pub const NFSPROC3_PATHCONF: u32 = 20;
pub const NFSPROC3_COMMIT: u32 = 21;

/// RFC 1813 §2.4 sizes.
pub const NFS3_FHSIZE: usize = 64;
pub const NFS3_COOKIEVERFSIZE: usize = 8;
pub const NFS3_CREATEVERFSIZE: usize = 8;
pub const NFS3_WRITEVERFSIZE: usize = 8;

/// Our bounds on the RFC's unbounded strings and data.
pub const MAX_NAME: usize = 1024;
pub const MAX_PATH: usize = 4096;
pub const MAX_DATA: usize = 1 << 20;
/// Bound on entries in one decoded READDIR/READDIRPLUS reply.
pub const MAX_DIR_ENTRIES: usize = 1 << 16;

// ACCESS3 bits (RFC 1813 §3.3.4).
pub const ACCESS3_READ: u32 = 0x0001;
pub const ACCESS3_LOOKUP: u32 = 0x0002;
pub const ACCESS3_MODIFY: u32 = 0x0004;
pub const ACCESS3_EXTEND: u32 = 0x0008;
pub const ACCESS3_DELETE: u32 = 0x0010;
pub const ACCESS3_EXECUTE: u32 = 0x0020;

// FSINFO properties (RFC 1813 §3.3.19).
pub const FSF3_LINK: u32 = 0x0001;
pub const FSF3_SYMLINK: u32 = 0x0002;
pub const FSF3_HOMOGENEOUS: u32 = 0x0008;
pub const FSF3_CANSETTIME: u32 = 0x0010;

/// Encoded sizes of fixed-size items, for reply budgeting.
pub const FATTR3_LEN: usize = 84;
pub const POST_OP_ATTR_MAX_LEN: usize = 4 + FATTR3_LEN;
pub const WCC_ATTR_LEN: usize = 24;
pub const WCC_DATA_MAX_LEN: usize = 4 + WCC_ATTR_LEN + POST_OP_ATTR_MAX_LEN;
pub const NFS_FH3_MAX_LEN: usize = 4 + NFS3_FHSIZE;
pub const POST_OP_FH3_MAX_LEN: usize = 4 + NFS_FH3_MAX_LEN;

xdr_enum! {
    /// nfsstat3 (RFC 1813 §2.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Nfsstat3 {
        Ok = 0,
        Perm = 1,
        NoEnt = 2,
        Io = 5,
        NxIo = 6,
        Acces = 13,
        Exist = 17,
        XDev = 18,
        NoDev = 19,
        NotDir = 20,
        IsDir = 21,
        Inval = 22,
        FBig = 27,
        NoSpc = 28,
        RoFs = 30,
        MLink = 31,
        NameTooLong = 63,
        NotEmpty = 66,
        DQuot = 69,
        Stale = 70,
        Remote = 71,
        BadHandle = 10001,
        NotSync = 10002,
        BadCookie = 10003,
        NotSupp = 10004,
        TooSmall = 10005,
        ServerFault = 10006,
        BadType = 10007,
        Jukebox = 10008,
    }
}

impl Nfsstat3 {
    /// Every value, for tests and tables.
    pub const ALL: [Nfsstat3; 29] = [
        Nfsstat3::Ok,
        Nfsstat3::Perm,
        Nfsstat3::NoEnt,
        Nfsstat3::Io,
        Nfsstat3::NxIo,
        Nfsstat3::Acces,
        Nfsstat3::Exist,
        Nfsstat3::XDev,
        Nfsstat3::NoDev,
        Nfsstat3::NotDir,
        Nfsstat3::IsDir,
        Nfsstat3::Inval,
        Nfsstat3::FBig,
        Nfsstat3::NoSpc,
        Nfsstat3::RoFs,
        Nfsstat3::MLink,
        Nfsstat3::NameTooLong,
        Nfsstat3::NotEmpty,
        Nfsstat3::DQuot,
        Nfsstat3::Stale,
        Nfsstat3::Remote,
        Nfsstat3::BadHandle,
        Nfsstat3::NotSync,
        Nfsstat3::BadCookie,
        Nfsstat3::NotSupp,
        Nfsstat3::TooSmall,
        Nfsstat3::ServerFault,
        Nfsstat3::BadType,
        Nfsstat3::Jukebox,
    ];
}

impl std::fmt::Display for Nfsstat3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NFS3ERR_{:?}({})", self, *self as u32)
    }
}

xdr_enum! {
    /// ftype3 (RFC 1813 §2.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Ftype3 {
        Reg = 1,
        Dir = 2,
        Blk = 3,
        Chr = 4,
        Lnk = 5,
        Sock = 6,
        Fifo = 7,
    }
}

xdr_enum! {
    /// stable_how (RFC 1813 §3.3.7).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum StableHow {
        Unstable = 0,
        DataSync = 1,
        FileSync = 2,
    }
}

xdr_struct! {
    /// specdata3: device major/minor (RFC 1813 §2.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
    pub struct Specdata3 { pub specdata1: u32, pub specdata2: u32 }
}

xdr_struct! {
    /// nfstime3 (RFC 1813 §2.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
    pub struct Nfstime3 { pub seconds: u32, pub nseconds: u32 }
}

/// nfs_fh3: opaque<NFS3_FHSIZE> (RFC 1813 §2.6).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct NfsFh3 {
    pub data: Vec<u8>,
}

impl NfsFh3 {
    pub fn new(data: Vec<u8>) -> Self {
        NfsFh3 { data }
    }

    /// Bytes this handle takes on the wire.
    pub fn xdr_len(&self) -> usize {
        4 + pad4(self.data.len())
    }
}

impl Xdr for NfsFh3 {
    fn encode(&self, e: &mut Enc) {
        e.opaque(&self.data);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(NfsFh3 {
            data: d.opaque(NFS3_FHSIZE)?.to_vec(),
        })
    }
}

/// An 8-byte verifier: cookieverf3, createverf3 or writeverf3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Verf3(pub [u8; 8]);

impl Xdr for Verf3 {
    fn encode(&self, e: &mut Enc) {
        e.opaque_fixed(&self.0);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let mut v = [0u8; 8];
        v.copy_from_slice(d.opaque_fixed(8)?);
        Ok(Verf3(v))
    }
}

xdr_struct! {
    /// fattr3 (RFC 1813 §2.6).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Fattr3 {
        pub ftype: Ftype3,
        pub mode: u32,
        pub nlink: u32,
        pub uid: u32,
        pub gid: u32,
        pub size: u64,
        pub used: u64,
        pub rdev: Specdata3,
        pub fsid: u64,
        pub fileid: u64,
        pub atime: Nfstime3,
        pub mtime: Nfstime3,
        pub ctime: Nfstime3,
    }
}

/// post_op_attr: attributes_follow bool then fattr3.
pub type PostOpAttr = Option<Fattr3>;

xdr_struct! {
    /// wcc_attr (RFC 1813 §2.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WccAttr { pub size: u64, pub mtime: Nfstime3, pub ctime: Nfstime3 }
}

/// pre_op_attr.
pub type PreOpAttr = Option<WccAttr>;

xdr_struct! {
    /// wcc_data (RFC 1813 §2.6).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct WccData { pub before: PreOpAttr, pub after: PostOpAttr }
}

/// post_op_fh3.
pub type PostOpFh3 = Option<NfsFh3>;

/// set_atime / set_mtime with time_how (RFC 1813 §2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetTime3 {
    #[default]
    DontChange,
    ServerTime,
    ClientTime(Nfstime3),
}

impl Xdr for SetTime3 {
    fn encode(&self, e: &mut Enc) {
        match self {
            SetTime3::DontChange => e.u32(0),
            SetTime3::ServerTime => e.u32(1),
            SetTime3::ClientTime(t) => {
                e.u32(2);
                t.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(SetTime3::DontChange),
            1 => Ok(SetTime3::ServerTime),
            2 => Ok(SetTime3::ClientTime(Nfstime3::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_struct! {
    /// sattr3 (RFC 1813 §2.6). set_mode3, set_uid3, set_gid3 and set_size3
    /// are `switch (bool set_it)` unions, which is the optional-data encoding.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Sattr3 {
        pub mode: Option<u32>,
        pub uid: Option<u32>,
        pub gid: Option<u32>,
        pub size: Option<u64>,
        pub atime: SetTime3,
        pub mtime: SetTime3,
    }
}

/// sattrguard3: the ctime the client expects (RFC 1813 §3.3.2).
pub type SattrGuard3 = Option<Nfstime3>;

/// diropargs3: a directory and a name in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diropargs3 {
    pub dir: NfsFh3,
    pub name: Vec<u8>,
}

impl Xdr for Diropargs3 {
    fn encode(&self, e: &mut Enc) {
        self.dir.encode(e);
        e.opaque(&self.name);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let dir = NfsFh3::decode(d)?;
        let name = d.opaque(MAX_NAME)?.to_vec();
        Ok(Diropargs3 { dir, name })
    }
}

/// The status union every result uses: `Ok` carries the resok body, `Fail`
/// the non-OK status and the resfail body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NfsRes<T, F> {
    Ok(T),
    Fail(Nfsstat3, F),
}

impl<T, F> NfsRes<T, F> {
    pub fn status(&self) -> Nfsstat3 {
        match self {
            NfsRes::Ok(_) => Nfsstat3::Ok,
            NfsRes::Fail(s, _) => *s,
        }
    }
}

impl<T: Xdr, F: Xdr> Xdr for NfsRes<T, F> {
    fn encode(&self, e: &mut Enc) {
        match self {
            NfsRes::Ok(v) => {
                e.u32(Nfsstat3::Ok as u32);
                v.encode(e);
            }
            NfsRes::Fail(s, f) => {
                // A failure carrying NFS3_OK would make the peer decode the
                // resfail body as resok; send SERVERFAULT instead.
                let s = if *s == Nfsstat3::Ok {
                    Nfsstat3::ServerFault
                } else {
                    *s
                };
                e.u32(s as u32);
                f.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match Nfsstat3::decode(d)? {
            Nfsstat3::Ok => Ok(NfsRes::Ok(T::decode(d)?)),
            s => Ok(NfsRes::Fail(s, F::decode(d)?)),
        }
    }
}

// ---- Procedure 1: GETATTR ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetAttr3Args { pub object: NfsFh3 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetAttr3ResOk { pub obj_attributes: Fattr3 }
}
pub type GetAttr3Res = NfsRes<GetAttr3ResOk, ()>;

// ---- Procedure 2: SETATTR ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetAttr3Args {
        pub object: NfsFh3,
        pub new_attributes: Sattr3,
        pub guard: SattrGuard3,
    }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct SetAttr3ResOk { pub obj_wcc: WccData }
}
pub type SetAttr3Res = NfsRes<SetAttr3ResOk, WccData>;

// ---- Procedure 3: LOOKUP ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lookup3Args { pub what: Diropargs3 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lookup3ResOk {
        pub object: NfsFh3,
        pub obj_attributes: PostOpAttr,
        pub dir_attributes: PostOpAttr,
    }
}
pub type Lookup3Res = NfsRes<Lookup3ResOk, PostOpAttr>;

// ---- Procedure 4: ACCESS ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Access3Args { pub object: NfsFh3, pub access: u32 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Access3ResOk { pub obj_attributes: PostOpAttr, pub access: u32 }
}
pub type Access3Res = NfsRes<Access3ResOk, PostOpAttr>;

// ---- Procedure 5: READLINK ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReadLink3Args { pub symlink: NfsFh3 }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLink3ResOk {
    pub symlink_attributes: PostOpAttr,
    /// nfspath3, at most `MAX_PATH` bytes.
    pub data: Vec<u8>,
}

impl Xdr for ReadLink3ResOk {
    fn encode(&self, e: &mut Enc) {
        self.symlink_attributes.encode(e);
        e.opaque(&self.data);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let symlink_attributes = PostOpAttr::decode(d)?;
        let data = d.opaque(MAX_PATH)?.to_vec();
        Ok(ReadLink3ResOk {
            symlink_attributes,
            data,
        })
    }
}
pub type ReadLink3Res = NfsRes<ReadLink3ResOk, PostOpAttr>;

// ---- Procedure 6: READ ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Read3Args { pub file: NfsFh3, pub offset: u64, pub count: u32 }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read3ResOk {
    pub file_attributes: PostOpAttr,
    pub count: u32,
    pub eof: bool,
    /// At most `MAX_DATA` bytes.
    pub data: Vec<u8>,
}

impl Xdr for Read3ResOk {
    fn encode(&self, e: &mut Enc) {
        self.file_attributes.encode(e);
        e.u32(self.count);
        e.bool(self.eof);
        e.opaque(&self.data);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let file_attributes = PostOpAttr::decode(d)?;
        let count = d.u32()?;
        let eof = d.bool()?;
        let data = d.opaque(MAX_DATA)?.to_vec();
        Ok(Read3ResOk {
            file_attributes,
            count,
            eof,
            data,
        })
    }
}
pub type Read3Res = NfsRes<Read3ResOk, PostOpAttr>;

// ---- Procedure 7: WRITE ----

/// WRITE3args, owning its data (what our client builds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write3Args {
    pub file: NfsFh3,
    pub offset: u64,
    pub count: u32,
    pub stable: StableHow,
    /// At most `MAX_DATA` bytes.
    pub data: Vec<u8>,
}

/// WRITE3args borrowing its data from the received message, so the server
/// does not copy up to `MAX_DATA` bytes per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write3ArgsRef<'a> {
    pub file: NfsFh3,
    pub offset: u64,
    pub count: u32,
    pub stable: StableHow,
    pub data: &'a [u8],
}

impl<'a> Write3ArgsRef<'a> {
    pub fn decode(d: &mut Dec<'a>) -> Result<Self> {
        let file = NfsFh3::decode(d)?;
        let offset = d.u64()?;
        let count = d.u32()?;
        let stable = StableHow::decode(d)?;
        // Bounded by MAX_DATA and by the bytes present (Dec::opaque).
        let data = d.opaque(MAX_DATA)?;
        Ok(Write3ArgsRef {
            file,
            offset,
            count,
            stable,
            data,
        })
    }

    pub fn encode(&self, e: &mut Enc) {
        self.file.encode(e);
        e.u64(self.offset);
        e.u32(self.count);
        self.stable.encode(e);
        e.opaque(self.data);
    }
}

impl Xdr for Write3Args {
    fn encode(&self, e: &mut Enc) {
        self.file.encode(e);
        e.u64(self.offset);
        e.u32(self.count);
        self.stable.encode(e);
        e.opaque(&self.data);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let r = Write3ArgsRef::decode(d)?;
        Ok(Write3Args {
            file: r.file,
            offset: r.offset,
            count: r.count,
            stable: r.stable,
            data: r.data.to_vec(),
        })
    }
}

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Write3ResOk {
        pub file_wcc: WccData,
        pub count: u32,
        pub committed: StableHow,
        pub verf: Verf3,
    }
}
pub type Write3Res = NfsRes<Write3ResOk, WccData>;

// ---- Procedure 8: CREATE ----

/// createhow3 (RFC 1813 §3.3.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateHow3 {
    Unchecked(Sattr3),
    Guarded(Sattr3),
    Exclusive(Verf3),
}

impl Xdr for CreateHow3 {
    fn encode(&self, e: &mut Enc) {
        match self {
            CreateHow3::Unchecked(s) => {
                e.u32(0);
                s.encode(e);
            }
            CreateHow3::Guarded(s) => {
                e.u32(1);
                s.encode(e);
            }
            CreateHow3::Exclusive(v) => {
                e.u32(2);
                v.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(CreateHow3::Unchecked(Sattr3::decode(d)?)),
            1 => Ok(CreateHow3::Guarded(Sattr3::decode(d)?)),
            2 => Ok(CreateHow3::Exclusive(Verf3::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Create3Args { pub where_: Diropargs3, pub how: CreateHow3 }
}

xdr_struct! {
    /// The result body shared by CREATE, MKDIR, SYMLINK and MKNOD.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Create3ResOk {
        pub obj: PostOpFh3,
        pub obj_attributes: PostOpAttr,
        pub dir_wcc: WccData,
    }
}
pub type Create3Res = NfsRes<Create3ResOk, WccData>;

// ---- Procedure 9: MKDIR ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Mkdir3Args { pub where_: Diropargs3, pub attributes: Sattr3 }
}
pub type Mkdir3ResOk = Create3ResOk;
pub type Mkdir3Res = NfsRes<Mkdir3ResOk, WccData>;

// ---- Procedure 10: SYMLINK ----

/// SYMLINK3args with symlinkdata3 flattened (same wire order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symlink3Args {
    pub where_: Diropargs3,
    pub symlink_attributes: Sattr3,
    /// nfspath3, at most `MAX_PATH` bytes.
    pub symlink_data: Vec<u8>,
}

impl Xdr for Symlink3Args {
    fn encode(&self, e: &mut Enc) {
        self.where_.encode(e);
        self.symlink_attributes.encode(e);
        e.opaque(&self.symlink_data);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let where_ = Diropargs3::decode(d)?;
        let symlink_attributes = Sattr3::decode(d)?;
        let symlink_data = d.opaque(MAX_PATH)?.to_vec();
        Ok(Symlink3Args {
            where_,
            symlink_attributes,
            symlink_data,
        })
    }
}
pub type Symlink3ResOk = Create3ResOk;
pub type Symlink3Res = NfsRes<Symlink3ResOk, WccData>;

// ---- Procedure 11: MKNOD ----

/// mknoddata3 (RFC 1813 §3.3.11): a union on ftype3 whose regular file,
/// directory and symlink arms are void (the server answers NFS3ERR_BADTYPE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MknodData3 {
    Chr(Sattr3, Specdata3),
    Blk(Sattr3, Specdata3),
    Sock(Sattr3),
    Fifo(Sattr3),
    /// NF3REG, NF3DIR or NF3LNK: no body.
    Other(Ftype3),
}

impl Xdr for MknodData3 {
    fn encode(&self, e: &mut Enc) {
        match self {
            MknodData3::Chr(s, spec) => {
                Ftype3::Chr.encode(e);
                s.encode(e);
                spec.encode(e);
            }
            MknodData3::Blk(s, spec) => {
                Ftype3::Blk.encode(e);
                s.encode(e);
                spec.encode(e);
            }
            MknodData3::Sock(s) => {
                Ftype3::Sock.encode(e);
                s.encode(e);
            }
            MknodData3::Fifo(s) => {
                Ftype3::Fifo.encode(e);
                s.encode(e);
            }
            MknodData3::Other(t) => t.encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Ftype3::decode(d)? {
            Ftype3::Chr => MknodData3::Chr(Sattr3::decode(d)?, Specdata3::decode(d)?),
            Ftype3::Blk => MknodData3::Blk(Sattr3::decode(d)?, Specdata3::decode(d)?),
            Ftype3::Sock => MknodData3::Sock(Sattr3::decode(d)?),
            Ftype3::Fifo => MknodData3::Fifo(Sattr3::decode(d)?),
            t @ (Ftype3::Reg | Ftype3::Dir | Ftype3::Lnk) => MknodData3::Other(t),
        })
    }
}

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Mknod3Args { pub where_: Diropargs3, pub what: MknodData3 }
}
pub type Mknod3ResOk = Create3ResOk;
pub type Mknod3Res = NfsRes<Mknod3ResOk, WccData>;

// ---- Procedures 12, 13: REMOVE, RMDIR ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Remove3Args { pub object: Diropargs3 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Remove3ResOk { pub dir_wcc: WccData }
}
pub type Remove3Res = NfsRes<Remove3ResOk, WccData>;

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Rmdir3Args { pub object: Diropargs3 }
}
pub type Rmdir3ResOk = Remove3ResOk;
pub type Rmdir3Res = NfsRes<Rmdir3ResOk, WccData>;

// ---- Procedure 14: RENAME ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Rename3Args { pub from: Diropargs3, pub to: Diropargs3 }
}
xdr_struct! {
    /// Both the resok and the resfail body of RENAME.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Rename3Wcc { pub fromdir_wcc: WccData, pub todir_wcc: WccData }
}
pub type Rename3Res = NfsRes<Rename3Wcc, Rename3Wcc>;

// ---- Procedure 15: LINK ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Link3Args { pub file: NfsFh3, pub link: Diropargs3 }
}
xdr_struct! {
    /// Both the resok and the resfail body of LINK.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Link3Body { pub file_attributes: PostOpAttr, pub linkdir_wcc: WccData }
}
pub type Link3Res = NfsRes<Link3Body, Link3Body>;

// ---- Procedure 16: READDIR ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReadDir3Args {
        pub dir: NfsFh3,
        pub cookie: u64,
        pub cookieverf: Verf3,
        pub count: u32,
    }
}

/// entry3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry3 {
    pub fileid: u64,
    pub name: Vec<u8>,
    pub cookie: u64,
}

impl Entry3 {
    /// Wire size including the value_follows word before it.
    pub fn xdr_len(&self) -> usize {
        entry3_len(self.name.len())
    }
}

/// Wire size of an entry3 with an `name_len`-byte name, including its
/// value_follows word: 4 + fileid 8 + name 4+pad + cookie 8.
pub const fn entry3_len(name_len: usize) -> usize {
    4 + 8 + 4 + pad4(name_len) + 8
}

fn decode_entry_head(d: &mut Dec<'_>) -> Result<(u64, Vec<u8>, u64)> {
    let fileid = d.u64()?;
    let name = d.opaque(MAX_NAME)?.to_vec();
    let cookie = d.u64()?;
    Ok((fileid, name, cookie))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadDir3ResOk {
    pub dir_attributes: PostOpAttr,
    pub cookieverf: Verf3,
    /// dirlist3's entries, encoded as the XDR linked list.
    pub entries: Vec<Entry3>,
    pub eof: bool,
}

impl Xdr for ReadDir3ResOk {
    fn encode(&self, e: &mut Enc) {
        self.dir_attributes.encode(e);
        self.cookieverf.encode(e);
        for ent in &self.entries {
            e.bool(true);
            e.u64(ent.fileid);
            e.opaque(&ent.name);
            e.u64(ent.cookie);
        }
        e.bool(false);
        e.bool(self.eof);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let dir_attributes = PostOpAttr::decode(d)?;
        let cookieverf = Verf3::decode(d)?;
        let entries = crate::mount::decode_list(d, MAX_DIR_ENTRIES, |d| {
            let (fileid, name, cookie) = decode_entry_head(d)?;
            Ok(Entry3 {
                fileid,
                name,
                cookie,
            })
        })?;
        let eof = d.bool()?;
        Ok(ReadDir3ResOk {
            dir_attributes,
            cookieverf,
            entries,
            eof,
        })
    }
}
pub type ReadDir3Res = NfsRes<ReadDir3ResOk, PostOpAttr>;

// ---- Procedure 17: READDIRPLUS ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReadDirPlus3Args {
        pub dir: NfsFh3,
        pub cookie: u64,
        pub cookieverf: Verf3,
        pub dircount: u32,
        pub maxcount: u32,
    }
}

/// entryplus3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPlus3 {
    pub fileid: u64,
    pub name: Vec<u8>,
    pub cookie: u64,
    pub name_attributes: PostOpAttr,
    pub name_handle: PostOpFh3,
}

impl EntryPlus3 {
    /// Wire size including the value_follows word before it.
    pub fn xdr_len(&self) -> usize {
        entry3_len(self.name.len())
            + 4
            + if self.name_attributes.is_some() {
                FATTR3_LEN
            } else {
                0
            }
            + 4
            + self.name_handle.as_ref().map_or(0, NfsFh3::xdr_len)
    }

    /// The part RFC 1813 §3.3.17 counts against `dircount`: fileid, name and
    /// cookie, without attributes and handle.
    pub fn dir_len(&self) -> usize {
        8 + 4 + pad4(self.name.len()) + 8
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadDirPlus3ResOk {
    pub dir_attributes: PostOpAttr,
    pub cookieverf: Verf3,
    pub entries: Vec<EntryPlus3>,
    pub eof: bool,
}

impl Xdr for ReadDirPlus3ResOk {
    fn encode(&self, e: &mut Enc) {
        self.dir_attributes.encode(e);
        self.cookieverf.encode(e);
        for ent in &self.entries {
            e.bool(true);
            e.u64(ent.fileid);
            e.opaque(&ent.name);
            e.u64(ent.cookie);
            ent.name_attributes.encode(e);
            ent.name_handle.encode(e);
        }
        e.bool(false);
        e.bool(self.eof);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let dir_attributes = PostOpAttr::decode(d)?;
        let cookieverf = Verf3::decode(d)?;
        let entries = crate::mount::decode_list(d, MAX_DIR_ENTRIES, |d| {
            let (fileid, name, cookie) = decode_entry_head(d)?;
            let name_attributes = PostOpAttr::decode(d)?;
            let name_handle = PostOpFh3::decode(d)?;
            Ok(EntryPlus3 {
                fileid,
                name,
                cookie,
                name_attributes,
                name_handle,
            })
        })?;
        let eof = d.bool()?;
        Ok(ReadDirPlus3ResOk {
            dir_attributes,
            cookieverf,
            entries,
            eof,
        })
    }
}
pub type ReadDirPlus3Res = NfsRes<ReadDirPlus3ResOk, PostOpAttr>;

// ---- Procedure 18: FSSTAT ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct FsStat3Args { pub fsroot: NfsFh3 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct FsStat3ResOk {
        pub obj_attributes: PostOpAttr,
        pub tbytes: u64,
        pub fbytes: u64,
        pub abytes: u64,
        pub tfiles: u64,
        pub ffiles: u64,
        pub afiles: u64,
        pub invarsec: u32,
    }
}
pub type FsStat3Res = NfsRes<FsStat3ResOk, PostOpAttr>;

// ---- Procedure 19: FSINFO ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct FsInfo3Args { pub fsroot: NfsFh3 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct FsInfo3ResOk {
        pub obj_attributes: PostOpAttr,
        pub rtmax: u32,
        pub rtpref: u32,
        pub rtmult: u32,
        pub wtmax: u32,
        pub wtpref: u32,
        pub wtmult: u32,
        pub dtpref: u32,
        pub maxfilesize: u64,
        pub time_delta: Nfstime3,
        pub properties: u32,
    }
}
pub type FsInfo3Res = NfsRes<FsInfo3ResOk, PostOpAttr>;

// ---- Procedure 20: PATHCONF ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PathConf3Args { pub object: NfsFh3 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PathConf3ResOk {
        pub obj_attributes: PostOpAttr,
        pub linkmax: u32,
        pub name_max: u32,
        pub no_trunc: bool,
        pub chown_restricted: bool,
        pub case_insensitive: bool,
        pub case_preserving: bool,
    }
}
pub type PathConf3Res = NfsRes<PathConf3ResOk, PostOpAttr>;

// ---- Procedure 21: COMMIT ----

xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Commit3Args { pub file: NfsFh3, pub offset: u64, pub count: u32 }
}
xdr_struct! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Commit3ResOk { pub file_wcc: WccData, pub verf: Verf3 }
}
pub type Commit3Res = NfsRes<Commit3ResOk, WccData>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_sizes_match_encoding() {
        let t = Nfstime3::default();
        let a = Fattr3 {
            ftype: Ftype3::Reg,
            mode: 0,
            nlink: 0,
            uid: 0,
            gid: 0,
            size: 0,
            used: 0,
            rdev: Specdata3::default(),
            fsid: 0,
            fileid: 0,
            atime: t,
            mtime: t,
            ctime: t,
        };
        assert_eq!(rnfsd_xdr::to_vec(&a).len(), FATTR3_LEN);
        let w = WccData {
            before: Some(WccAttr {
                size: 0,
                mtime: t,
                ctime: t,
            }),
            after: Some(a),
        };
        assert_eq!(rnfsd_xdr::to_vec(&w).len(), WCC_DATA_MAX_LEN);
        let fh = NfsFh3::new(vec![0; NFS3_FHSIZE]);
        assert_eq!(rnfsd_xdr::to_vec(&fh).len(), NFS_FH3_MAX_LEN);
        assert_eq!(rnfsd_xdr::to_vec(&Some(fh)).len(), POST_OP_FH3_MAX_LEN);
    }

    #[test]
    fn fail_with_ok_status_encodes_as_serverfault() {
        let r: GetAttr3Res = NfsRes::Fail(Nfsstat3::Ok, ());
        assert_eq!(rnfsd_xdr::to_vec(&r), 10006u32.to_be_bytes());
    }
}
