//! NFSv4.2's data operations (RFC 7862 §15), one helper each, for a
//! client made with `with_minor(2)` (a 4.1 server answers them ILLEGAL).

use rnfsd_proto::nfs4::*;

use super::{unexpected, Nfs4Client};
use crate::error::ClientError;

fn putfh(fh: &NfsFh4) -> ArgOp<'static> {
    ArgOp::PutFh(PutFh4Args { object: fh.clone() })
}

impl Nfs4Client {
    /// PUTFH, SEEK: the first data or hole at or after `offset`.
    pub async fn seek(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        what: DataContent4,
    ) -> Result<Seek4ResOk, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::Seek(Seek4Args {
                    stateid: *stateid,
                    offset,
                    what,
                }),
            ])
            .await?;
        match r.into_iter().nth(1) {
            Some(ResOp::Seek(NfsRes4::Ok(v))) => Ok(v),
            other => Err(unexpected("SEEK", other.as_ref())),
        }
    }

    /// PUTFH, ALLOCATE.
    pub async fn allocate(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        length: u64,
    ) -> Result<(), ClientError> {
        let a = Allocate4Args {
            stateid: *stateid,
            offset,
            length,
        };
        self.run(&[putfh(fh), ArgOp::Allocate(a)]).await.map(drop)
    }

    /// PUTFH, DEALLOCATE.
    pub async fn deallocate(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        length: u64,
    ) -> Result<(), ClientError> {
        let a = Deallocate4Args {
            stateid: *stateid,
            offset,
            length,
        };
        self.run(&[putfh(fh), ArgOp::Deallocate(a)]).await.map(drop)
    }

    /// PUTFH, READ_PLUS.
    pub async fn read_plus(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        count: u32,
    ) -> Result<ReadPlus4ResOk, ClientError> {
        let r = self
            .run(&[
                putfh(fh),
                ArgOp::ReadPlus(ReadPlus4Args {
                    stateid: *stateid,
                    offset,
                    count,
                }),
            ])
            .await?;
        match r.into_iter().nth(1) {
            Some(ResOp::ReadPlus(NfsRes4::Ok(v))) => Ok(v),
            other => Err(unexpected("READ_PLUS", other.as_ref())),
        }
    }

    /// PUTFH `src`, SAVEFH, PUTFH `dst`, COPY (within the server).
    #[allow(clippy::too_many_arguments)]
    pub async fn copy(
        &self,
        src: &NfsFh4,
        src_stateid: &Stateid4,
        src_offset: u64,
        dst: &NfsFh4,
        dst_stateid: &Stateid4,
        dst_offset: u64,
        count: u64,
        synchronous: bool,
    ) -> Result<Copy4ResOk, ClientError> {
        let a = Copy4Args {
            src_stateid: *src_stateid,
            dst_stateid: *dst_stateid,
            src_offset,
            dst_offset,
            count,
            consecutive: true,
            synchronous,
            source_server: Vec::new(),
        };
        let r = self
            .run(&[putfh(src), ArgOp::SaveFh, putfh(dst), ArgOp::Copy(a)])
            .await?;
        match r.into_iter().nth(3) {
            Some(ResOp::Copy(Copy4Res::Ok(v))) => Ok(v),
            other => Err(unexpected("COPY", other.as_ref())),
        }
    }

    /// PUTFH `src`, SAVEFH, PUTFH `dst`, CLONE.
    #[allow(clippy::too_many_arguments)]
    pub async fn clone_range(
        &self,
        src: &NfsFh4,
        src_stateid: &Stateid4,
        src_offset: u64,
        dst: &NfsFh4,
        dst_stateid: &Stateid4,
        dst_offset: u64,
        count: u64,
    ) -> Result<(), ClientError> {
        let a = Clone4Args {
            src_stateid: *src_stateid,
            dst_stateid: *dst_stateid,
            src_offset,
            dst_offset,
            count,
        };
        self.run(&[putfh(src), ArgOp::SaveFh, putfh(dst), ArgOp::Clone(a)])
            .await
            .map(drop)
    }
}
