//! NFSv3 client (RFC 1813 §3): one typed method per procedure, taking and
//! returning the `rnfsd_proto::nfs3` wire types, plus helpers that walk
//! paths, page through directories and chunk file I/O.
//!
//! The per-procedure methods return the reply union ([`NfsRes`]) unchanged,
//! so tests can look at failure bodies (wcc data, post-op attributes); only
//! RPC-level failures are `Err`. The helpers return `Err(ClientError::Nfs)`
//! on a non-OK status ([`check`] does that conversion for any result).

use std::net::SocketAddr;

use rnfsd_proto::nfs3::*;

use crate::auth::Auth;
use crate::client::Client;
use crate::conn::ClientConfig;
use crate::error::ClientError;

/// Default READ/WRITE chunk for the helpers.
pub const DEFAULT_IO_SIZE: u32 = 128 * 1024;
/// Default READDIR `count` / READDIRPLUS `dircount`.
pub const DEFAULT_DIR_COUNT: u32 = 8 * 1024;
/// Default READDIRPLUS `maxcount`.
pub const DEFAULT_DIR_MAXCOUNT: u32 = 64 * 1024;

/// `Ok(body)` for NFS3_OK, else `Err(ClientError::Nfs(status))`.
pub fn check<T, F>(res: NfsRes<T, F>) -> Result<T, ClientError> {
    match res {
        NfsRes::Ok(v) => Ok(v),
        NfsRes::Fail(s, _) => Err(ClientError::Nfs(s)),
    }
}

/// What [`NfsClient::write_all`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSummary {
    /// Bytes written.
    pub written: u64,
    /// The weakest `committed` level any WRITE reply gave: anything below
    /// FILE_SYNC needs a COMMIT to be durable.
    pub committed: StableHow,
    /// The write verifier of the last reply.
    pub verf: Verf3,
    /// True if the verifier changed between replies (the server restarted,
    /// so UNSTABLE data may be lost; RFC 1813 §3.3.7).
    pub verf_changed: bool,
}

/// NFSv3 calls over a [`Client`].
#[derive(Clone, Debug)]
pub struct NfsClient {
    client: Client,
    rsize: u32,
    wsize: u32,
    dircount: u32,
    maxcount: u32,
}

impl NfsClient {
    pub fn new(client: Client) -> Self {
        NfsClient {
            client,
            rsize: DEFAULT_IO_SIZE,
            wsize: DEFAULT_IO_SIZE,
            dircount: DEFAULT_DIR_COUNT,
            maxcount: DEFAULT_DIR_MAXCOUNT,
        }
    }

    pub async fn connect(addr: SocketAddr, cfg: &ClientConfig) -> Result<Self, ClientError> {
        Ok(Self::new(Client::connect(addr, cfg).await?))
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The same connections and settings, calling with `auth`.
    pub fn with_auth(&self, auth: Auth) -> Self {
        NfsClient {
            client: self.client.with_auth(auth),
            ..self.clone()
        }
    }

    /// Chunk sizes for `read_all` / `write_all` (each clamped to
    /// 1..=`MAX_DATA`).
    pub fn with_io_size(&self, rsize: u32, wsize: u32) -> Self {
        let clamp = |v: u32| v.clamp(1, MAX_DATA as u32);
        NfsClient {
            rsize: clamp(rsize),
            wsize: clamp(wsize),
            ..self.clone()
        }
    }

    /// READDIR `count` and READDIRPLUS `dircount`/`maxcount` for the
    /// `*_all` helpers.
    pub fn with_dir_counts(&self, dircount: u32, maxcount: u32) -> Self {
        NfsClient {
            dircount,
            maxcount,
            ..self.clone()
        }
    }

    async fn call<A: rnfsd_xdr::Xdr, R: rnfsd_xdr::Xdr>(
        &self,
        proc_: u32,
        args: &A,
    ) -> Result<R, ClientError> {
        self.client.call(NFS_PROGRAM, NFS_V3, proc_, args).await
    }

    // ---- the 22 procedures (RFC 1813 §3.3.0 - §3.3.21) ----

    pub async fn null(&self) -> Result<(), ClientError> {
        self.call(NFSPROC3_NULL, &()).await
    }

    pub async fn getattr(&self, a: &GetAttr3Args) -> Result<GetAttr3Res, ClientError> {
        self.call(NFSPROC3_GETATTR, a).await
    }

    pub async fn setattr(&self, a: &SetAttr3Args) -> Result<SetAttr3Res, ClientError> {
        self.call(NFSPROC3_SETATTR, a).await
    }

    pub async fn lookup(&self, a: &Lookup3Args) -> Result<Lookup3Res, ClientError> {
        self.call(NFSPROC3_LOOKUP, a).await
    }

    pub async fn access(&self, a: &Access3Args) -> Result<Access3Res, ClientError> {
        self.call(NFSPROC3_ACCESS, a).await
    }

    pub async fn readlink(&self, a: &ReadLink3Args) -> Result<ReadLink3Res, ClientError> {
        self.call(NFSPROC3_READLINK, a).await
    }

    pub async fn read(&self, a: &Read3Args) -> Result<Read3Res, ClientError> {
        self.call(NFSPROC3_READ, a).await
    }

    pub async fn write(&self, a: &Write3Args) -> Result<Write3Res, ClientError> {
        self.call(NFSPROC3_WRITE, a).await
    }

    /// WRITE without copying the data into an owned argument first.
    pub async fn write_ref(&self, a: &Write3ArgsRef<'_>) -> Result<Write3Res, ClientError> {
        self.client
            .call_encoded(NFS_PROGRAM, NFS_V3, NFSPROC3_WRITE, |e| a.encode(e))
            .await
    }

    pub async fn create(&self, a: &Create3Args) -> Result<Create3Res, ClientError> {
        self.call(NFSPROC3_CREATE, a).await
    }

    pub async fn mkdir(&self, a: &Mkdir3Args) -> Result<Mkdir3Res, ClientError> {
        self.call(NFSPROC3_MKDIR, a).await
    }

    pub async fn symlink(&self, a: &Symlink3Args) -> Result<Symlink3Res, ClientError> {
        self.call(NFSPROC3_SYMLINK, a).await
    }

    pub async fn mknod(&self, a: &Mknod3Args) -> Result<Mknod3Res, ClientError> {
        self.call(NFSPROC3_MKNOD, a).await
    }

    pub async fn remove(&self, a: &Remove3Args) -> Result<Remove3Res, ClientError> {
        self.call(NFSPROC3_REMOVE, a).await
    }

    pub async fn rmdir(&self, a: &Rmdir3Args) -> Result<Rmdir3Res, ClientError> {
        self.call(NFSPROC3_RMDIR, a).await
    }

    pub async fn rename(&self, a: &Rename3Args) -> Result<Rename3Res, ClientError> {
        self.call(NFSPROC3_RENAME, a).await
    }

    pub async fn link(&self, a: &Link3Args) -> Result<Link3Res, ClientError> {
        self.call(NFSPROC3_LINK, a).await
    }

    pub async fn readdir(&self, a: &ReadDir3Args) -> Result<ReadDir3Res, ClientError> {
        self.call(NFSPROC3_READDIR, a).await
    }

    pub async fn readdirplus(&self, a: &ReadDirPlus3Args) -> Result<ReadDirPlus3Res, ClientError> {
        self.call(NFSPROC3_READDIRPLUS, a).await
    }

    pub async fn fsstat(&self, a: &FsStat3Args) -> Result<FsStat3Res, ClientError> {
        self.call(NFSPROC3_FSSTAT, a).await
    }

    pub async fn fsinfo(&self, a: &FsInfo3Args) -> Result<FsInfo3Res, ClientError> {
        self.call(NFSPROC3_FSINFO, a).await
    }

    pub async fn pathconf(&self, a: &PathConf3Args) -> Result<PathConf3Res, ClientError> {
        self.call(NFSPROC3_PATHCONF, a).await
    }

    pub async fn commit(&self, a: &Commit3Args) -> Result<Commit3Res, ClientError> {
        self.call(NFSPROC3_COMMIT, a).await
    }

    // ---- helpers ----

    /// GETATTR returning the attributes or the NFS error.
    pub async fn getattr_ok(&self, fh: &NfsFh3) -> Result<Fattr3, ClientError> {
        let a = GetAttr3Args { object: fh.clone() };
        Ok(check(self.getattr(&a).await?)?.obj_attributes)
    }

    /// LOOKUP one name in `dir`.
    pub async fn lookup_name(
        &self,
        dir: &NfsFh3,
        name: impl AsRef<[u8]>,
    ) -> Result<Lookup3ResOk, ClientError> {
        let a = Lookup3Args {
            what: Diropargs3 {
                dir: dir.clone(),
                name: name.as_ref().to_vec(),
            },
        };
        check(self.lookup(&a).await?)
    }

    /// Walk `path` ("a/b/c") from `root` one LOOKUP per component. Empty
    /// components and "." are skipped; ".." is sent to the server as is.
    /// Returns the final handle and its attributes (from GETATTR when the
    /// path names `root` itself).
    pub async fn lookup_path(
        &self,
        root: &NfsFh3,
        path: &str,
    ) -> Result<(NfsFh3, Fattr3), ClientError> {
        let mut fh = root.clone();
        let mut attrs = None;
        for comp in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            let r = self.lookup_name(&fh, comp).await?;
            fh = r.object;
            attrs = r.obj_attributes;
        }
        let attrs = match attrs {
            Some(a) => a,
            None => self.getattr_ok(&fh).await?,
        };
        Ok((fh, attrs))
    }

    /// READ the whole file from offset 0 in `rsize` chunks until EOF.
    ///
    /// Strict about the reply so server bugs show: `count` must equal the
    /// data length, and a short read must not come without EOF twice in a
    /// row with no data (that would loop forever).
    pub async fn read_all(&self, fh: &NfsFh3) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        let mut a = Read3Args {
            file: fh.clone(),
            offset: 0,
            count: self.rsize,
        };
        loop {
            let r = check(self.read(&a).await?)?;
            if r.count as usize != r.data.len() {
                return Err(ClientError::Protocol(format!(
                    "READ count {} but {} data bytes",
                    r.count,
                    r.data.len()
                )));
            }
            if r.data.len() > a.count as usize {
                return Err(ClientError::Protocol(format!(
                    "READ returned {} bytes for count {}",
                    r.data.len(),
                    a.count
                )));
            }
            out.extend_from_slice(&r.data);
            if r.eof {
                return Ok(out);
            }
            if r.data.is_empty() {
                return Err(ClientError::Protocol(
                    "READ returned no data and no EOF".into(),
                ));
            }
            a.offset += r.data.len() as u64;
        }
    }

    /// WRITE `data` at offset 0 in `wsize` chunks (see [`Self::write_at`]).
    pub async fn write_all(
        &self,
        fh: &NfsFh3,
        data: &[u8],
        stable: StableHow,
    ) -> Result<WriteSummary, ClientError> {
        self.write_at(fh, 0, data, stable).await
    }

    /// WRITE `data` at `offset` in `wsize` chunks, one call at a time,
    /// resending the rest after a short write.
    pub async fn write_at(
        &self,
        fh: &NfsFh3,
        offset: u64,
        data: &[u8],
        stable: StableHow,
    ) -> Result<WriteSummary, ClientError> {
        let mut done = 0usize;
        let mut sum = WriteSummary {
            written: 0,
            committed: StableHow::FileSync,
            verf: Verf3::default(),
            verf_changed: false,
        };
        let mut first = true;
        loop {
            let rest = data.get(done..).unwrap_or(&[]);
            let chunk = rest
                .get(..rest.len().min(self.wsize as usize))
                .unwrap_or(rest);
            let a = Write3ArgsRef {
                file: fh.clone(),
                offset: offset + done as u64,
                count: chunk.len() as u32,
                stable,
                data: chunk,
            };
            let r = check(self.write_ref(&a).await?)?;
            if r.count as usize > chunk.len() {
                return Err(ClientError::Protocol(format!(
                    "WRITE count {} for {} bytes sent",
                    r.count,
                    chunk.len()
                )));
            }
            if !first && r.verf != sum.verf {
                sum.verf_changed = true;
            }
            first = false;
            sum.verf = r.verf;
            sum.committed = sum.committed.min(r.committed);
            done += r.count as usize;
            sum.written = done as u64;
            if done >= data.len() {
                return Ok(sum);
            }
            if r.count == 0 {
                return Err(ClientError::Protocol("WRITE made no progress".into()));
            }
        }
    }

    /// Every entry of `dir` via READDIR, following cookies until EOF.
    pub async fn readdir_all(&self, dir: &NfsFh3) -> Result<Vec<Entry3>, ClientError> {
        let mut out = Vec::new();
        let mut a = ReadDir3Args {
            dir: dir.clone(),
            cookie: 0,
            cookieverf: Verf3::default(),
            count: self.dircount,
        };
        loop {
            let r = check(self.readdir(&a).await?)?;
            let last = r.entries.last().map(|e| e.cookie);
            out.extend(r.entries);
            if r.eof {
                return Ok(out);
            }
            a.cookie = last.ok_or_else(|| {
                ClientError::Protocol("READDIR returned no entries and no EOF".into())
            })?;
            a.cookieverf = r.cookieverf;
        }
    }

    /// Every entry of `dir` with attributes and handles via READDIRPLUS.
    pub async fn readdirplus_all(&self, dir: &NfsFh3) -> Result<Vec<EntryPlus3>, ClientError> {
        let mut out = Vec::new();
        let mut a = ReadDirPlus3Args {
            dir: dir.clone(),
            cookie: 0,
            cookieverf: Verf3::default(),
            dircount: self.dircount,
            maxcount: self.maxcount,
        };
        loop {
            let r = check(self.readdirplus(&a).await?)?;
            let last = r.entries.last().map(|e| e.cookie);
            out.extend(r.entries);
            if r.eof {
                return Ok(out);
            }
            a.cookie = last.ok_or_else(|| {
                ClientError::Protocol("READDIRPLUS returned no entries and no EOF".into())
            })?;
            a.cookieverf = r.cookieverf;
        }
    }
}
