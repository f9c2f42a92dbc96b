//! The usual compounds, one helper each: each sends SEQUENCE plus the
//! operations a client needs for the job (PUTFH first, GETFH after a
//! create, ...) and returns the interesting result, or
//! [`ClientError::Nfs4`] naming the operation that failed.

use rnfsd_proto::nfs4::*;

use super::{check4, unexpected, Attrs4, Nfs4Client, SetAttrs4};
use crate::error::ClientError;

/// Default READ/WRITE chunk for `read_all` / `write_all`.
pub const DEFAULT_IO_SIZE: u32 = 128 * 1024;
/// Default READDIR dircount.
pub const DEFAULT_DIR_COUNT: u32 = 8 * 1024;
/// Default READDIR maxcount.
pub const DEFAULT_DIR_MAXCOUNT: u32 = 64 * 1024;

/// Pulls the next result, which must be `$variant(NfsRes4::Ok(v))`; gives
/// `v`.
macro_rules! next_ok {
    ($it:expr, $variant:ident, $what:expr) => {
        match $it.next() {
            Some(ResOp::$variant(NfsRes4::Ok(v))) => v,
            other => return Err(unexpected($what, other.as_ref())),
        }
    };
}

/// How OPEN creates (createhow4, RFC 8881 §18.16), or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenHow {
    /// OPEN4_NOCREATE: the file must exist.
    NoCreate,
    Unchecked(SetAttrs4),
    Guarded(SetAttrs4),
    /// EXCLUSIVE4_1: the verifier and attributes together.
    Exclusive41(Verifier4, SetAttrs4),
}

/// OPEN by name in a directory (CLAIM_NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenArgs {
    pub name: Vec<u8>,
    /// OPEN4_SHARE_ACCESS_* (want flags included).
    pub access: u32,
    /// OPEN4_SHARE_DENY_*.
    pub deny: u32,
    pub how: OpenHow,
    /// The open owner's bytes; `None`: the client's default owner.
    pub owner: Option<Vec<u8>>,
}

impl OpenArgs {
    /// Open an existing file for reading.
    pub fn read(name: impl Into<Vec<u8>>) -> Self {
        OpenArgs {
            name: name.into(),
            access: OPEN4_SHARE_ACCESS_READ,
            deny: OPEN4_SHARE_DENY_NONE,
            how: OpenHow::NoCreate,
            owner: None,
        }
    }

    /// Create (UNCHECKED, mode 0644) and open for reading and writing.
    pub fn create(name: impl Into<Vec<u8>>) -> Self {
        OpenArgs {
            name: name.into(),
            access: OPEN4_SHARE_ACCESS_BOTH,
            deny: OPEN4_SHARE_DENY_NONE,
            how: OpenHow::Unchecked(SetAttrs4::mode(0o644)),
            owner: None,
        }
    }
}

/// What a successful OPEN gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub stateid: Stateid4,
    /// The opened file's handle (GETFH after OPEN).
    pub fh: NfsFh4,
    pub cinfo: ChangeInfo4,
    pub rflags: u32,
    pub attrset: Bitmap4,
    pub delegation: OpenDelegation4,
}

fn comp(name: impl AsRef<[u8]>) -> Component4 {
    Component4(name.as_ref().to_vec())
}

fn putfh(fh: &NfsFh4) -> ArgOp<'static> {
    ArgOp::PutFh(PutFh4Args { object: fh.clone() })
}

/// The components of `path`: empty ones and "." skipped, ".." sent as is.
fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty() && *c != ".")
}

impl Nfs4Client {
    // ---- handles and attributes ----

    /// PUTROOTFH, GETFH.
    pub async fn root_fh(&self) -> Result<NfsFh4, ClientError> {
        let r = self.run(&[ArgOp::PutRootFh, ArgOp::GetFh]).await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, GetFh, "GETFH"))
    }

    /// PUTROOTFH, one LOOKUP per component of `path`, GETFH.
    pub async fn lookup_path(&self, path: &str) -> Result<NfsFh4, ClientError> {
        self.lookup_ops(ArgOp::PutRootFh, path).await
    }

    /// PUTFH `dir`, one LOOKUP per component of `path`, GETFH.
    pub async fn lookup_from(&self, dir: &NfsFh4, path: &str) -> Result<NfsFh4, ClientError> {
        self.lookup_ops(putfh(dir), path).await
    }

    async fn lookup_ops(&self, start: ArgOp<'static>, path: &str) -> Result<NfsFh4, ClientError> {
        let mut ops = vec![start];
        for c in components(path) {
            ops.push(ArgOp::Lookup(Lookup4Args { objname: comp(c) }));
        }
        ops.push(ArgOp::GetFh);
        // SEQUENCE counts too; a server need not take more than it granted.
        let max = self.session().fore.maxoperations as usize;
        if max != 0 && ops.len() + 1 > max {
            return Err(ClientError::InvalidInput(format!(
                "path of {} components needs {} operations; the session allows {max}",
                ops.len() - 2,
                ops.len() + 1
            )));
        }
        let r = self.run(&ops).await?;
        match r.last() {
            Some(ResOp::GetFh(NfsRes4::Ok(fh))) => Ok(fh.clone()),
            other => Err(unexpected("GETFH", other)),
        }
    }

    /// PUTFH `dir`, LOOKUP `name`, GETFH, GETATTR `mask`.
    pub async fn lookup_getattr(
        &self,
        dir: &NfsFh4,
        name: impl AsRef<[u8]>,
        mask: &Bitmap4,
    ) -> Result<(NfsFh4, Fattr4), ClientError> {
        let r = self
            .run(&[
                putfh(dir),
                ArgOp::Lookup(Lookup4Args {
                    objname: comp(name),
                }),
                ArgOp::GetFh,
                ArgOp::GetAttr(GetAttr4Args {
                    attr_request: *mask,
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(2);
        let fh = next_ok!(it, GetFh, "GETFH");
        let attrs = next_ok!(it, GetAttr, "GETATTR");
        Ok((fh, attrs))
    }

    /// PUTFH, GETATTR `mask`: the raw fattr4.
    pub async fn getattr(&self, fh: &NfsFh4, mask: &Bitmap4) -> Result<Fattr4, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::GetAttr(GetAttr4Args {
                    attr_request: *mask,
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, GetAttr, "GETATTR"))
    }

    /// GETATTR of [`super::COMMON_ATTRS`], decoded.
    pub async fn getattr_decoded(&self, fh: &NfsFh4) -> Result<Attrs4, ClientError> {
        Attrs4::decode(&self.getattr(fh, &super::common_mask()).await?)
    }

    /// PUTFH, ACCESS `bits`.
    pub async fn access(&self, fh: &NfsFh4, bits: u32) -> Result<Access4ResOk, ClientError> {
        let r = self
            .run(&[putfh(fh), ArgOp::Access(Access4Args { access: bits })])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, Access, "ACCESS"))
    }

    /// PUTFH, SETATTR: the attributes set.
    pub async fn setattr(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        attrs: &SetAttrs4,
    ) -> Result<Bitmap4, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::SetAttr(Box::new(SetAttr4Args {
                    stateid: *stateid,
                    obj_attributes: attrs.to_fattr(),
                })),
            ])
            .await?;
        match r.get(1) {
            Some(ResOp::SetAttr(s)) => Ok(s.attrsset),
            other => Err(unexpected("SETATTR", other)),
        }
    }

    // ---- open state ----

    /// PUTFH `dir`, OPEN (CLAIM_NULL), GETFH.
    pub async fn open(&self, dir: &NfsFh4, a: &OpenArgs) -> Result<Opened, ClientError> {
        let openhow = match &a.how {
            OpenHow::NoCreate => OpenFlag4::NoCreate,
            OpenHow::Unchecked(s) => OpenFlag4::Create(CreateHow4::Unchecked(s.to_fattr())),
            OpenHow::Guarded(s) => OpenFlag4::Create(CreateHow4::Guarded(s.to_fattr())),
            OpenHow::Exclusive41(v, s) => OpenFlag4::Create(CreateHow4::Exclusive41 {
                verf: *v,
                attrs: s.to_fattr(),
            }),
        };
        self.open_ops(
            putfh(dir),
            a.access,
            a.deny,
            a.owner.as_deref(),
            openhow,
            OpenClaim4::Null(comp(&a.name)),
        )
        .await
    }

    /// PUTFH `fh`, OPEN (CLAIM_FH: the file itself), GETFH.
    pub async fn open_fh(
        &self,
        fh: &NfsFh4,
        access: u32,
        deny: u32,
    ) -> Result<Opened, ClientError> {
        self.open_ops(
            putfh(fh),
            access,
            deny,
            None,
            OpenFlag4::NoCreate,
            OpenClaim4::Fh,
        )
        .await
    }

    async fn open_ops(
        &self,
        start: ArgOp<'static>,
        access: u32,
        deny: u32,
        owner: Option<&[u8]>,
        openhow: OpenFlag4,
        claim: OpenClaim4,
    ) -> Result<Opened, ClientError> {
        let owner = match owner {
            Some(o) => StateOwner4 {
                clientid: self.clientid(),
                owner: Opaque1024(o.to_vec()),
            },
            None => self.open_owner(),
        };
        let r = self
            .run(&[
                start,
                ArgOp::Open(Box::new(Open4Args {
                    // Ignored in 4.1 (RFC 8881 §18.16.3).
                    seqid: 0,
                    share_access: access,
                    share_deny: deny,
                    owner,
                    openhow,
                    claim,
                })),
                ArgOp::GetFh,
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        let o = next_ok!(it, Open, "OPEN");
        let fh = next_ok!(it, GetFh, "GETFH");
        Ok(Opened {
            stateid: o.stateid,
            fh,
            cinfo: o.cinfo,
            rflags: o.rflags,
            attrset: o.attrset,
            delegation: o.delegation,
        })
    }

    /// PUTFH, CLOSE: the (now invalid) closed stateid.
    pub async fn close(&self, fh: &NfsFh4, stateid: &Stateid4) -> Result<Stateid4, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::Close(Close4Args {
                    seqid: 0,
                    open_stateid: *stateid,
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, Close, "CLOSE"))
    }

    /// PUTFH, DELEGRETURN.
    pub async fn delegreturn(&self, fh: &NfsFh4, stateid: &Stateid4) -> Result<(), ClientError> {
        self.run(&[
            putfh(fh),
            ArgOp::DelegReturn(DelegReturn4Args {
                deleg_stateid: *stateid,
            }),
        ])
        .await
        .map(drop)
    }

    // ---- data ----

    /// PUTFH, READ.
    pub async fn read(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        count: u32,
    ) -> Result<Read4ResOk, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::Read(Read4Args {
                    stateid: *stateid,
                    offset,
                    count,
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        let ok = next_ok!(it, Read, "READ");
        if ok.data.len() > count as usize {
            return Err(ClientError::Protocol(format!(
                "READ returned {} bytes for count {count}",
                ok.data.len()
            )));
        }
        Ok(ok)
    }

    /// PUTFH, WRITE.
    pub async fn write(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        data: &[u8],
        stable: StableHow4,
    ) -> Result<Write4ResOk, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::Write(Write4ArgsRef {
                    stateid: *stateid,
                    offset,
                    stable,
                    data,
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        let ok = next_ok!(it, Write, "WRITE");
        if ok.count as usize > data.len() {
            return Err(ClientError::Protocol(format!(
                "WRITE count {} for {} bytes sent",
                ok.count,
                data.len()
            )));
        }
        Ok(ok)
    }

    /// PUTFH, COMMIT: the write verifier.
    pub async fn commit(
        &self,
        fh: &NfsFh4,
        offset: u64,
        count: u32,
    ) -> Result<Verifier4, ClientError> {
        let r = self
            .run(&[putfh(fh), ArgOp::Commit(Commit4Args { offset, count })])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, Commit, "COMMIT"))
    }

    /// READ from offset 0 in `rsize` chunks until EOF.
    pub async fn read_all(&self, fh: &NfsFh4, stateid: &Stateid4) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        loop {
            let r = self.read(fh, stateid, out.len() as u64, self.rsize).await?;
            out.extend_from_slice(&r.data);
            if r.eof {
                return Ok(out);
            }
            if r.data.is_empty() {
                return Err(ClientError::Protocol(
                    "READ returned no data and no EOF".into(),
                ));
            }
        }
    }

    /// WRITE `data` at `offset` in `wsize` chunks, resending after a short
    /// write; returns the weakest `committed` level of the replies.
    pub async fn write_all(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        data: &[u8],
        stable: StableHow4,
    ) -> Result<StableHow4, ClientError> {
        let mut done = 0usize;
        let mut committed = StableHow4::FileSync;
        while done < data.len() {
            let rest = data.get(done..).unwrap_or(&[]);
            let chunk = rest
                .get(..rest.len().min(self.wsize as usize))
                .unwrap_or(rest);
            let r = self
                .write(fh, stateid, offset + done as u64, chunk, stable)
                .await?;
            if r.count == 0 {
                return Err(ClientError::Protocol("WRITE made no progress".into()));
            }
            committed = committed.min(r.committed);
            done += r.count as usize;
        }
        Ok(committed)
    }

    // ---- directories ----

    /// PUTFH, READDIR.
    pub async fn readdir(
        &self,
        dir: &NfsFh4,
        cookie: u64,
        cookieverf: Verifier4,
        dircount: u32,
        maxcount: u32,
        mask: &Bitmap4,
    ) -> Result<ReadDir4ResOk, ClientError> {
        let r = self
            .run(&[
                putfh(dir),
                ArgOp::ReadDir(ReadDir4Args {
                    cookie,
                    cookieverf,
                    dircount,
                    maxcount,
                    attr_request: *mask,
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, ReadDir, "READDIR"))
    }

    /// Every entry of `dir`, following cookies (and the verifier) until
    /// EOF.
    pub async fn readdir_all(
        &self,
        dir: &NfsFh4,
        mask: &Bitmap4,
    ) -> Result<Vec<Entry4>, ClientError> {
        let mut out = Vec::new();
        let (mut cookie, mut verf) = (0, Verifier4::default());
        loop {
            let r = self
                .readdir(
                    dir,
                    cookie,
                    verf,
                    DEFAULT_DIR_COUNT,
                    DEFAULT_DIR_MAXCOUNT,
                    mask,
                )
                .await?;
            let last = r.entries.last().map(|e| e.cookie);
            out.extend(r.entries);
            if r.eof {
                return Ok(out);
            }
            cookie = last.ok_or_else(|| {
                ClientError::Protocol("READDIR returned no entries and no EOF".into())
            })?;
            verf = r.cookieverf;
        }
    }

    /// PUTFH `dir`, CREATE, GETFH: the new object's handle and CREATE's
    /// result.
    pub async fn create(
        &self,
        dir: &NfsFh4,
        name: impl AsRef<[u8]>,
        objtype: CreateType4,
        attrs: &SetAttrs4,
    ) -> Result<(NfsFh4, Create4ResOk), ClientError> {
        let r = self
            .run(&[
                putfh(dir),
                ArgOp::Create(Box::new(Create4Args {
                    objtype,
                    objname: comp(name),
                    createattrs: attrs.to_fattr(),
                })),
                ArgOp::GetFh,
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        let c = next_ok!(it, Create, "CREATE");
        let fh = next_ok!(it, GetFh, "GETFH");
        Ok((fh, c))
    }

    /// CREATE of a directory with `mode`.
    pub async fn mkdir(
        &self,
        dir: &NfsFh4,
        name: impl AsRef<[u8]>,
        mode: u32,
    ) -> Result<NfsFh4, ClientError> {
        Ok(self
            .create(dir, name, CreateType4::Dir, &SetAttrs4::mode(mode))
            .await?
            .0)
    }

    /// CREATE of a symlink to `target`.
    pub async fn symlink(
        &self,
        dir: &NfsFh4,
        name: impl AsRef<[u8]>,
        target: impl AsRef<[u8]>,
    ) -> Result<NfsFh4, ClientError> {
        let t = CreateType4::Lnk(LinkText4(target.as_ref().to_vec()));
        Ok(self.create(dir, name, t, &SetAttrs4::default()).await?.0)
    }

    /// PUTFH, READLINK.
    pub async fn readlink(&self, fh: &NfsFh4) -> Result<Vec<u8>, ClientError> {
        let r = self.run(&[putfh(fh), ArgOp::ReadLink]).await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, ReadLink, "READLINK").0)
    }

    /// PUTFH `dir`, REMOVE `name`.
    pub async fn remove(
        &self,
        dir: &NfsFh4,
        name: impl AsRef<[u8]>,
    ) -> Result<ChangeInfo4, ClientError> {
        let r = self
            .run(&[
                putfh(dir),
                ArgOp::Remove(Remove4Args { target: comp(name) }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, Remove, "REMOVE"))
    }

    /// PUTFH `from_dir`, SAVEFH, PUTFH `to_dir`, RENAME.
    pub async fn rename(
        &self,
        from_dir: &NfsFh4,
        from: impl AsRef<[u8]>,
        to_dir: &NfsFh4,
        to: impl AsRef<[u8]>,
    ) -> Result<Rename4ResOk, ClientError> {
        let r = self
            .run(&[
                putfh(from_dir),
                ArgOp::SaveFh,
                putfh(to_dir),
                ArgOp::Rename(Rename4Args {
                    oldname: comp(from),
                    newname: comp(to),
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(3);
        Ok(next_ok!(it, Rename, "RENAME"))
    }

    /// PUTFH `file`, SAVEFH, PUTFH `dir`, LINK `name`.
    pub async fn link(
        &self,
        file: &NfsFh4,
        dir: &NfsFh4,
        name: impl AsRef<[u8]>,
    ) -> Result<ChangeInfo4, ClientError> {
        let r = self
            .run(&[
                putfh(file),
                ArgOp::SaveFh,
                putfh(dir),
                ArgOp::Link(Link4Args {
                    newname: comp(name),
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(3);
        Ok(next_ok!(it, Link, "LINK"))
    }

    // ---- extended attributes (NFSv4.2, RFC 8276: `Nfs4Config::minor` 2) ----

    /// PUTFH, GETXATTR `name` (of the `user.` namespace, without the
    /// prefix).
    pub async fn getxattr(
        &self,
        fh: &NfsFh4,
        name: impl AsRef<[u8]>,
    ) -> Result<Vec<u8>, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::GetXattr(GetXattr4Args { name: comp(name) }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, GetXattr, "GETXATTR").0)
    }

    /// PUTFH, SETXATTR `name` to `value`; `option` is a setxattr_option4.
    pub async fn setxattr(
        &self,
        fh: &NfsFh4,
        option: u32,
        name: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<ChangeInfo4, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::SetXattr(SetXattr4Args {
                    option,
                    key: comp(name),
                    value: XattrValue4(value.as_ref().to_vec()),
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, SetXattr, "SETXATTR"))
    }

    /// PUTFH, LISTXATTRS from `cookie`, at most `maxcount` bytes.
    pub async fn listxattrs(
        &self,
        fh: &NfsFh4,
        cookie: u64,
        maxcount: u32,
    ) -> Result<ListXattrs4ResOk, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::ListXattrs(ListXattrs4Args { cookie, maxcount }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, ListXattrs, "LISTXATTRS"))
    }

    /// PUTFH, REMOVEXATTR `name`.
    pub async fn removexattr(
        &self,
        fh: &NfsFh4,
        name: impl AsRef<[u8]>,
    ) -> Result<ChangeInfo4, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::RemoveXattr(RemoveXattr4Args { name: comp(name) }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, RemoveXattr, "REMOVEXATTR"))
    }

    // ---- byte-range locks ----

    /// PUTFH, LOCK: the result as is (NFS4ERR_DENIED carries the
    /// conflicting lock); other failures of the compound are `Err`.
    pub async fn lock(
        &self,
        fh: &NfsFh4,
        locktype: NfsLockType4,
        offset: u64,
        length: u64,
        locker: Locker4,
    ) -> Result<Lock4Res, ClientError> {
        let r = self
            .compound(&[
                putfh(fh),
                ArgOp::Lock(Box::new(Lock4Args {
                    locktype,
                    reclaim: false,
                    offset,
                    length,
                    locker,
                })),
            ])
            .await?;
        match r.results.get(2) {
            Some(ResOp::Lock(l)) => Ok(l.clone()),
            _ => {
                check4(&r)?;
                Err(unexpected("LOCK", r.results.get(2)))
            }
        }
    }

    /// The first lock of a new lock owner (`owner` bytes), from an open
    /// stateid.
    pub fn new_locker(&self, open_stateid: &Stateid4, owner: &[u8]) -> Locker4 {
        Locker4::OpenOwner(OpenToLockOwner4 {
            open_seqid: 0,
            open_stateid: *open_stateid,
            lock_seqid: 0,
            lock_owner: StateOwner4 {
                clientid: self.clientid(),
                owner: Opaque1024(owner.to_vec()),
            },
        })
    }

    /// A further lock of a lock owner that has `lock_stateid`.
    pub fn existing_locker(lock_stateid: &Stateid4) -> Locker4 {
        Locker4::LockOwner(ExistLockOwner4 {
            lock_stateid: *lock_stateid,
            lock_seqid: 0,
        })
    }

    /// PUTFH, LOCKT for lock owner `owner` bytes: the result as is.
    pub async fn lockt(
        &self,
        fh: &NfsFh4,
        locktype: NfsLockType4,
        offset: u64,
        length: u64,
        owner: &[u8],
    ) -> Result<LockT4Res, ClientError> {
        let r = self
            .compound(&[
                putfh(fh),
                ArgOp::LockT(LockT4Args {
                    locktype,
                    offset,
                    length,
                    owner: StateOwner4 {
                        clientid: self.clientid(),
                        owner: Opaque1024(owner.to_vec()),
                    },
                }),
            ])
            .await?;
        match r.results.get(2) {
            Some(ResOp::LockT(l)) => Ok(l.clone()),
            _ => {
                check4(&r)?;
                Err(unexpected("LOCKT", r.results.get(2)))
            }
        }
    }

    /// PUTFH, LOCKU: the lock stateid after the unlock.
    pub async fn locku(
        &self,
        fh: &NfsFh4,
        locktype: NfsLockType4,
        lock_stateid: &Stateid4,
        offset: u64,
        length: u64,
    ) -> Result<Stateid4, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::LockU(LockU4Args {
                    locktype,
                    seqid: 0,
                    lock_stateid: *lock_stateid,
                    offset,
                    length,
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        Ok(next_ok!(it, LockU, "LOCKU"))
    }
}
