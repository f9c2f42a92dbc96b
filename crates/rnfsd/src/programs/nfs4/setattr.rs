//! SETATTR, VERIFY and NVERIFY (RFC 8881 §18.30, §18.31, §18.15).

use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{Dec, Enc, Xdr};

use super::attr::{obj_fattr, pseudo_fattr};
use super::compound::Compound;
use super::cur::{Cur, Obj};
use super::fattr::{self, WRITE_ONLY};
use super::open::{before_change, key_of, Changed};
use super::session::sid;
use super::status::{of_fs, of_state};

/// SETATTR (§18.30): what the client sets, with attrsset saying what was.
pub(super) fn setattr(c: &mut Compound<'_, '_>, a: SetAttr4Args) -> SetAttr4Res {
    match set(c, &a) {
        Ok(attrsset) => SetAttr4Res {
            status: Nfsstat4::Ok,
            attrsset,
        },
        Err(s) => SetAttr4Res::fail(s),
    }
}

fn set(c: &mut Compound<'_, '_>, a: &SetAttr4Args) -> Result<Bitmap4, Nfsstat4> {
    let (set, attrsset) = fattr::decode_settable(&a.obj_attributes, &fattr::owners(c))?;
    let o: Obj = match c.cur()? {
        Cur::Pseudo(_) => return Err(Nfsstat4::RoFs),
        Cur::Obj(o) => o.clone(),
    };
    let call = o.call(c.ctx);
    if set.size.is_some() {
        // A size is data: the stateid must allow writing (§18.30.3,
        // §8.2.3: the anonymous stateid too, unless a share denies it);
        // checked before the export's mode, as knfsd.
        let s = c.stateid(&a.stateid)?;
        let attr = o.exp.backend.getattr(&call, &o.fh).map_err(of_fs)?;
        let client = c.client()?;
        c.nfs4
            .state
            .check_io(&client, &sid(&s), key_of(&attr), true)
            .map_err(|e| of_state(&e))?;
    }
    o.writable()?;
    // Any attribute change is seen by a delegation's holder (knfsd
    // breaks delegations in notify_change).
    let _changing = before_change(c, &o, Changed::Fh(&o.fh))?;
    let r = o.exp.backend.setattr(&call, &o.fh, &set, None);
    c.owe(&call);
    r.map_err(of_fs)?;
    Ok(attrsset)
}

/// VERIFY (§18.31): NFS4ERR_NOT_SAME unless the attributes are as given.
pub(super) fn verify(c: &mut Compound<'_, '_>, a: Verify4Args) -> Nfsstat4 {
    match same(c, &a.obj_attributes) {
        Ok(true) => Nfsstat4::Ok,
        Ok(false) => Nfsstat4::NotSame,
        Err(s) => s,
    }
}

/// NVERIFY (§18.15): NFS4ERR_SAME if the attributes are as given.
pub(super) fn nverify(c: &mut Compound<'_, '_>, a: Verify4Args) -> Nfsstat4 {
    match same(c, &a.obj_attributes) {
        Ok(true) => Nfsstat4::Same,
        Ok(false) => Nfsstat4::Ok,
        Err(s) => s,
    }
}

/// Whether the current object's attributes are `f`'s, compared as
/// encoded (as knfsd compares): an attribute we do not support is
/// NFS4ERR_ATTRNOTSUPP, then a write-only one or rdattr_error
/// NFS4ERR_INVAL (§18.31.3).
fn same(c: &Compound<'_, '_>, f: &Fattr4) -> Result<bool, Nfsstat4> {
    check_verifiable(&f.attrmask, c.minor)?;
    let mut e = Enc::new();
    match c.cur()? {
        Cur::Pseudo(i) => pseudo_fattr(c, *i, &f.attrmask, &mut e),
        Cur::Obj(o) => {
            let call = o.call(c.ctx);
            let attr = o.exp.backend.getattr(&call, &o.fh).map_err(of_fs)?;
            obj_fattr(c, o, &attr, &f.attrmask, &mut e)?;
        }
    }
    let ours = Fattr4::decode(&mut Dec::new(e.as_slice())).map_err(|_| Nfsstat4::ServerFault)?;
    Ok(matches(&ours, f))
}

/// The mask's checks, in knfsd's order, against what minor version
/// `minor` supports.
fn check_verifiable(mask: &Bitmap4, minor: u32) -> Result<(), Nfsstat4> {
    let supported = fattr::supported_for(minor);
    if mask.iter().any(|bit| !supported.contains(bit)) {
        return Err(Nfsstat4::AttrNotSupp);
    }
    if mask.contains(FATTR4_RDATTR_ERROR) || WRITE_ONLY.iter().any(|&w| mask.contains(w)) {
        return Err(Nfsstat4::Inval);
    }
    Ok(())
}

/// Whether `ours` (what we encode) is what the client gave: the same
/// attributes (an attribute we could not give, such as a pseudo
/// directory's space, makes them differ) with the same bytes.
fn matches(ours: &Fattr4, theirs: &Fattr4) -> bool {
    ours.attrmask.same_bits(&theirs.attrmask) && ours.attr_vals == theirs.attr_vals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifiable_attributes() {
        assert_eq!(
            check_verifiable(&fattr::bits(&[FATTR4_SIZE, FATTR4_MODE]), 1),
            Ok(())
        );
        assert_eq!(
            check_verifiable(&fattr::bits(&[FATTR4_SIZE, FATTR4_ACL]), 1),
            Err(Nfsstat4::AttrNotSupp)
        );
        assert_eq!(
            check_verifiable(&fattr::bits(&[FATTR4_RDATTR_ERROR]), 1),
            Err(Nfsstat4::Inval)
        );
        assert_eq!(
            check_verifiable(&fattr::bits(&[FATTR4_TIME_MODIFY_SET]), 1),
            Err(Nfsstat4::Inval)
        );
        // xattr_support is NFSv4.2's (RFC 8276).
        let xa = fattr::bits(&[FATTR4_XATTR_SUPPORT]);
        assert_eq!(check_verifiable(&xa, 2), Ok(()));
        assert_eq!(check_verifiable(&xa, 1), Err(Nfsstat4::AttrNotSupp));
        // Unsupported is answered first.
        assert_eq!(
            check_verifiable(&fattr::bits(&[FATTR4_TIME_MODIFY_SET, FATTR4_ACL]), 1),
            Err(Nfsstat4::AttrNotSupp)
        );
    }

    #[test]
    fn matching_ignores_the_word_count_but_not_the_bits_or_values() {
        let ours = Fattr4 {
            attrmask: fattr::bits(&[FATTR4_SIZE]),
            attr_vals: 5u64.to_be_bytes().to_vec(),
        };
        let mut theirs = ours.clone();
        theirs.attrmask = Bitmap4::from_words(&[1 << FATTR4_SIZE, 0, 0]).unwrap();
        assert!(matches(&ours, &theirs));
        theirs.attr_vals = 6u64.to_be_bytes().to_vec();
        assert!(!matches(&ours, &theirs));
        let other = Fattr4 {
            attrmask: fattr::bits(&[FATTR4_CHANGE]),
            attr_vals: ours.attr_vals.clone(),
        };
        assert!(!matches(&ours, &other));
    }
}
