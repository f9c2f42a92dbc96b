//! File handle layout and MAC, for every backend.
//!
//! Every handle: byte 0 = VERSION, bytes 1..5 = export id (big-endian, see
//! `crate::export_id_of`), byte 5 = kind, kind-specific body, then a 16-byte
//! keyed BLAKE3 MAC over all preceding bytes. The MAC key is the server's
//! persisted secret, so handles survive restarts while a client cannot forge
//! or alter one (any change fails the MAC -> BadHandle).
//!
//! Kind KERNEL body: handle_type (u8), length (u8), the kernel's
//! name_to_handle_at bytes (<= 40). Kind PATH body: fs (u64, 0 = the export
//! root's filesystem, else its st_dev), inode (u64), generation (u32).
//! Kind CEPH body: the CephFS filesystem id (u64), inode (u64), creation
//! time (i64 seconds, u32 nanoseconds): nothing of the head that minted it,
//! so every head serving the export with the same key resolves it.

use crate::{Fh, FsError, FsResult, MAX_HANDLE};

pub const VERSION: u8 = 1;
pub const KIND_KERNEL: u8 = 1;
pub const KIND_PATH: u8 = 2;
pub const KIND_CEPH: u8 = 3;
const MAC_LEN: usize = 16;
const HEAD: usize = 6;
/// Largest kernel handle body that fits in MAX_HANDLE.
pub const MAX_KERNEL_BYTES: usize = MAX_HANDLE - HEAD - 2 - MAC_LEN;
const PATH_LEN: usize = HEAD + 8 + 8 + 4 + MAC_LEN;
const CEPH_LEN: usize = HEAD + 8 + 8 + 8 + 4 + MAC_LEN;
// Every kind's handle fits the bound a handle has on the wire.
const _: () = assert!(PATH_LEN <= MAX_HANDLE && CEPH_LEN <= MAX_HANDLE);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    Kernel {
        htype: i32,
        bytes: Vec<u8>,
    },
    Path {
        fs: u64,
        ino: u64,
        gen: u32,
    },
    Ceph {
        fscid: u64,
        ino: u64,
        btime: (i64, u32),
    },
}

/// A stable hex digest of `b` (names derived from identities).
pub fn digest_hex(b: &[u8]) -> String {
    blake3::hash(b).to_hex().to_string()
}

pub struct Sealer {
    key: [u8; 32],
    export_id: u32,
}

impl Sealer {
    pub fn new(handle_key: &[u8; 32], export_id: u32) -> Self {
        // Separate keys for handle MACs and readdir verifiers.
        let key = blake3::derive_key("rnfsd-fs local handle mac v1", handle_key);
        Sealer { key, export_id }
    }

    fn mac(&self, data: &[u8]) -> [u8; MAC_LEN] {
        let h = blake3::keyed_hash(&self.key, data);
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&h.as_bytes()[..MAC_LEN]);
        out
    }

    fn head(&self, kind: u8, cap: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(cap);
        v.push(VERSION);
        v.extend_from_slice(&self.export_id.to_be_bytes());
        v.push(kind);
        v
    }

    fn finish(&self, mut v: Vec<u8>) -> Fh {
        let m = self.mac(&v);
        v.extend_from_slice(&m);
        Fh(v)
    }

    /// None when the kernel handle does not fit our layout.
    pub fn seal_kernel(&self, htype: i32, bytes: &[u8]) -> Option<Fh> {
        let t = u8::try_from(htype).ok()?;
        let n = u8::try_from(bytes.len()).ok()?;
        if bytes.len() > MAX_KERNEL_BYTES {
            return None;
        }
        let mut v = self.head(KIND_KERNEL, MAX_HANDLE);
        v.push(t);
        v.push(n);
        v.extend_from_slice(bytes);
        Some(self.finish(v))
    }

    pub fn seal_path(&self, fs: u64, ino: u64, gen: u32) -> Fh {
        let mut v = self.head(KIND_PATH, PATH_LEN);
        v.extend_from_slice(&fs.to_be_bytes());
        v.extend_from_slice(&ino.to_be_bytes());
        v.extend_from_slice(&gen.to_be_bytes());
        self.finish(v)
    }

    pub fn seal_ceph(&self, fscid: u64, ino: u64, btime: (i64, u32)) -> Fh {
        let mut v = self.head(KIND_CEPH, CEPH_LEN);
        v.extend_from_slice(&fscid.to_be_bytes());
        v.extend_from_slice(&ino.to_be_bytes());
        v.extend_from_slice(&btime.0.to_be_bytes());
        v.extend_from_slice(&btime.1.to_be_bytes());
        self.finish(v)
    }

    /// Checks length, version, export id and MAC; BadHandle on any failure.
    pub fn open(&self, fh: &[u8]) -> FsResult<Decoded> {
        if fh.len() < HEAD + MAC_LEN || fh.len() > MAX_HANDLE {
            return Err(FsError::BadHandle);
        }
        let (body, mac) = fh.split_at(fh.len() - MAC_LEN);
        if body[0] != VERSION || crate::export_id_of(fh) != Some(self.export_id) {
            return Err(FsError::BadHandle);
        }
        // Constant-time compare.
        let want = self.mac(body);
        if want.iter().zip(mac).fold(0u8, |a, (x, y)| a | (x ^ y)) != 0 {
            return Err(FsError::BadHandle);
        }
        let rest = &body[HEAD..];
        let u = |r: std::ops::Range<usize>| -> FsResult<u64> {
            let b: [u8; 8] = rest
                .get(r)
                .and_then(|s| s.try_into().ok())
                .ok_or(FsError::BadHandle)?;
            Ok(u64::from_be_bytes(b))
        };
        let u4 = |r: std::ops::Range<usize>| -> FsResult<u32> {
            let b: [u8; 4] = rest
                .get(r)
                .and_then(|s| s.try_into().ok())
                .ok_or(FsError::BadHandle)?;
            Ok(u32::from_be_bytes(b))
        };
        match body[5] {
            KIND_KERNEL => {
                let (&t, rest) = rest.split_first().ok_or(FsError::BadHandle)?;
                let (&n, rest) = rest.split_first().ok_or(FsError::BadHandle)?;
                if rest.len() != usize::from(n) {
                    return Err(FsError::BadHandle);
                }
                Ok(Decoded::Kernel {
                    htype: i32::from(t),
                    bytes: rest.to_vec(),
                })
            }
            KIND_PATH => {
                if fh.len() != PATH_LEN {
                    return Err(FsError::BadHandle);
                }
                Ok(Decoded::Path {
                    fs: u(0..8)?,
                    ino: u(8..16)?,
                    gen: u4(16..20)?,
                })
            }
            KIND_CEPH => {
                if fh.len() != CEPH_LEN {
                    return Err(FsError::BadHandle);
                }
                Ok(Decoded::Ceph {
                    fscid: u(0..8)?,
                    ino: u(8..16)?,
                    btime: (u(16..24)? as i64, u4(24..28)?),
                })
            }
            _ => Err(FsError::BadHandle),
        }
    }

    /// A readdir cookie verifier for a directory: stable while its handle is.
    pub fn cookie_verifier(&self, dir_fh: &[u8]) -> [u8; 8] {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(b"cookieverf");
        h.update(dir_fh);
        let mut v = [0u8; 8];
        v.copy_from_slice(&h.finalize().as_bytes()[..8]);
        if v == [0; 8] {
            v[7] = 1;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_tamper() {
        let s = Sealer::new(&[7; 32], 0x01020304);
        let fh = s.seal_path(0, 1234, 99);
        assert!(fh.0.len() <= MAX_HANDLE);
        assert_eq!(crate::export_id_of(&fh.0), Some(0x01020304));
        assert_eq!(
            s.open(&fh.0),
            Ok(Decoded::Path {
                fs: 0,
                ino: 1234,
                gen: 99
            })
        );
        for i in 0..fh.0.len() {
            let mut b = fh.0.clone();
            b[i] ^= 0x40;
            assert_eq!(s.open(&b), Err(FsError::BadHandle), "byte {i}");
        }
        assert_eq!(s.open(&fh.0[..fh.0.len() - 1]), Err(FsError::BadHandle));
        assert_eq!(s.open(&[]), Err(FsError::BadHandle));
        let k = s.seal_kernel(1, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(
            s.open(&k.0),
            Ok(Decoded::Kernel {
                htype: 1,
                bytes: vec![1, 2, 3, 4, 5, 6, 7, 8]
            })
        );
        assert!(s.seal_kernel(1, &[0; MAX_KERNEL_BYTES + 1]).is_none());
        assert!(s
            .seal_kernel(1, &[0; MAX_KERNEL_BYTES])
            .is_some_and(|f| f.0.len() == MAX_HANDLE));
        let c = s.seal_ceph(1, 0x0100_0000_0123, (-5, 999));
        assert!(c.0.len() <= MAX_HANDLE);
        assert_eq!(
            s.open(&c.0),
            Ok(Decoded::Ceph {
                fscid: 1,
                ino: 0x0100_0000_0123,
                btime: (-5, 999)
            })
        );
        // Another key or export id rejects it.
        assert_eq!(
            Sealer::new(&[8; 32], 0x01020304).open(&fh.0),
            Err(FsError::BadHandle)
        );
        assert_eq!(
            Sealer::new(&[7; 32], 5).open(&fh.0),
            Err(FsError::BadHandle)
        );
    }
}
