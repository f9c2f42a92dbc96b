#!/usr/bin/env python3
"""Write the starting corpora under fuzz/seeds/TARGET (checked in; rerun
only to change them). Layouts are described in each fuzz target."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def u32(*v):
    return b"".join(struct.pack(">I", x & 0xFFFFFFFF) for x in v)


def u64(v):
    return struct.pack(">Q", v)


def opaque(b):
    return u32(len(b)) + b + b"\0" * (-len(b) % 4)


def frag(body, last=True):
    return u32(len(body) | (0x80000000 if last else 0)) + body


def auth_sys(uid=0):
    return u32(1) + opaque(u32(1) + opaque(b"fuzz") + u32(uid, uid, 2, uid, 100))


def call(prog, vers, proc, args=b"", cred=None):
    return u32(7, 0, 2, prog, vers, proc) + (cred or auth_sys()) + u32(0, 0) + args


SATTR_NONE = u32(0, 0, 0, 0, 0, 0)
FH = opaque(bytes(range(16)))


def write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# record: 2 bytes max_record, 4 read sizes, then the stream.
write("record", "one", b"\x01\x00\x03\x07\x01\xff" + frag(b"hello!!!"))
write("record", "multi", b"\x00\x40\x01\x02\x03\x04" + frag(b"ab", False) + frag(b"", False) + frag(b"cdef") + frag(b"") + frag(b"z" * 40))
write("record", "toobig", b"\x00\x10\x10\x10\x10\x10" + frag(b"x" * 8, False) + frag(b"y" * 9))
write("record", "huge", b"\x00\x00\x04\x04\x04\x04" + u32(0xFFFFFFFF) + b"abc")

# rpc_header: a call header (optionally followed by anything).
write("rpc_header", "null_sys", call(100003, 3, 0))
write("rpc_header", "null_none", call(100003, 3, 0, cred=u32(0, 0)))
write("rpc_header", "reply_ok", u32(7, 1, 0, 0, 0, 0))
write("rpc_header", "reply_mismatch", u32(7, 1, 0, 0, 0, 2, 3, 3))
write("rpc_header", "reply_denied", u32(7, 1, 1, 1, 5))

# xdr_args: selector byte (index in the target's table), then XDR.
name = opaque(b"file")
xa = {
    0: FH,
    1: FH + SATTR_NONE + u32(0),
    2: FH + name,
    3: FH + u32(0x3F),
    5: FH + u64(0) + u32(4096),
    6: FH + u64(0) + u32(5) + u32(2) + opaque(b"hello"),
    7: FH + name + u32(0) + SATTR_NONE,
    8: FH + name + SATTR_NONE,
    9: FH + name + SATTR_NONE + opaque(b"target"),
    10: FH + name + u32(7) + SATTR_NONE,
    13: FH + name + FH + opaque(b"other"),
    14: FH + FH + name,
    15: FH + u64(0) + b"\0" * 8 + u32(4096),
    16: FH + u64(0) + b"\0" * 8 + u32(1024, 8192),
    20: FH + u64(0) + u32(0),
    21: opaque(b"/srv/a"),
    24: u32(0) + opaque(b"\1" * 32) + u32(1, 1),
    26: u32(1) + opaque(b"host") + opaque(b"/srv") + u32(0),
    27: u32(1) + opaque(b"/srv") + u32(1) + opaque(b"*") + u32(0, 0),
    28: u32(100003, 3, 6, 2049),
}
# NLM v4 / v1 and NSM (selectors from 62, see the target's table).
cookie = opaque(b"\0\0\0\1")
lock4 = opaque(b"client") + FH + opaque(b"1@client") + u32(1) + u64(0) + u64(0)
lock1 = opaque(b"client") + FH + opaque(b"1@client") + u32(1, 0, 100)
share = opaque(b"client") + FH + opaque(b"oh") + u32(2, 1)
holder4 = u32(1, 7) + opaque(b"oh") + u64(10) + u64(0)
holder1 = u32(1, 7) + opaque(b"oh") + u32(10, 0)
my_id = opaque(b"localhost") + u32(100021, 4, 16)
xa.update({
    62: cookie + u32(1) + lock4,
    63: cookie + u32(1, 1) + lock4 + u32(0, 3),
    64: cookie + u32(1, 1) + lock4,
    65: cookie + lock4,
    66: cookie + share + u32(0),
    67: opaque(b"client") + u32(3),
    68: cookie + u32(1) + holder4,
    69: cookie + u32(3),
    70: cookie + u32(0, 1),
    71: cookie + u32(0) + lock1,
    72: cookie + u32(0, 1) + lock1 + u32(1, 5),
    73: cookie + u32(1, 0) + lock1,
    74: cookie + lock1,
    75: cookie + u32(1) + holder1,
    76: cookie + u32(4),
    77: cookie + u32(0, 2),
    78: opaque(b"peer"),
    79: opaque(b"peer") + my_id + b"\x55" * 16,
    80: opaque(b"peer") + my_id,
    81: my_id,
    82: opaque(b"me") + u32(9),
    83: opaque(b"peer") + u32(8) + b"\x55" * 16,
    84: u32(0, 3),
    85: u32(3),
})
for sel, b in xa.items():
    write("xdr_args", f"sel{sel}", bytes([sel]) + b)
write("xdr_args", "write_ref", b"\xff" + xa[6])

# dispatch: flags, then (structured) prog selector, vers, proc, uid, args.
S, FHF = 2, 4
nfs_args = {
    0: b"", 1: b"", 2: SATTR_NONE + u32(0), 3: name, 4: u32(0x3F), 5: b"",
    6: u64(0) + u32(4096), 7: u64(0) + u32(5, 2) + opaque(b"hello"),
    8: name + u32(0) + SATTR_NONE, 9: opaque(b"dir") + SATTR_NONE,
    10: opaque(b"ln") + SATTR_NONE + opaque(b"file"), 11: opaque(b"fifo") + u32(7) + SATTR_NONE,
    12: name, 13: opaque(b"dir"), 14: name + FH + opaque(b"new"), 15: FH + opaque(b"hard"),
    16: u64(0) + b"\0" * 8 + u32(4096), 17: u64(0) + b"\0" * 8 + u32(1024, 8192),
    18: b"", 19: b"", 20: b"", 21: u64(0) + u32(0),
}
for p, a in nfs_args.items():
    write("dispatch", f"nfs{p}", bytes([S | FHF, 0, 3, p, 0]) + a)
    write("dispatch", f"nfs{p}_user", bytes([S | FHF, 0, 3, p, 1]) + a)
for p, a in {0: b"", 1: opaque(b"/tmp"), 2: b"", 3: opaque(b"/tmp"), 4: b"", 5: b""}.items():
    write("dispatch", f"mount{p}", bytes([S, 1, 3, p, 0]) + a)
for p in range(6):
    write("dispatch", f"portmap{p}", bytes([S | 8 | 16 | 1, 2, 2, p, 0]) + u32(100003, 3, 6, 0))
write("dispatch", "raw_null", b"\x00" + call(100003, 3, 0))
write("dispatch", "raw_getattr", b"\x00" + call(100003, 3, 1, FH))

# nfs4_compound: COMPOUND4args (tag, minorversion, ops) as a server reads it.
SESSION = bytes(range(16))
SEQ = u32(53) + SESSION + u32(1, 0, 0, 0)  # OP_SEQUENCE, slot 0, seqid 1
write("nfs4_compound", "seq_putroot_getattr", opaque(b"t") + u32(1, 3) + SEQ + u32(24) + u32(9, 2, 0x0010011A, 0x00B0A23A))
write("nfs4_compound", "exchange_id", opaque(b"") + u32(1, 1) + u32(42) + bytes(8) + opaque(b"client") + u32(0, 0, 0))
write("nfs4_compound", "minor0", opaque(b"") + u32(0, 1, 24))
write("nfs4_compound", "illegal", opaque(b"") + u32(1, 2, 24, 10044))
# NFSv4.2 extended attributes (RFC 8276): SETXATTR (option, name, value),
# GETXATTR, LISTXATTRS (cookie, maxcount), REMOVEXATTR.
XATTRS = (u32(73, 1) + opaque(b"colour") + opaque(b"blue") + u32(72) + opaque(b"colour")
          + u32(74) + u64(0) + u32(8192) + u32(75) + opaque(b"colour"))
write("nfs4_compound", "xattr_ops", opaque(b"x") + u32(2, 6) + SEQ + u32(24) + XATTRS)
# NFSv4.2's data operations (RFC 7862 §15), minor version 2, after PUTROOTFH.
SID = u32(1) + bytes(12)
PUTROOT = u32(24)
v42 = {
    "allocate": u32(59) + SID + u64(0) + u64(4096),
    "copy": u32(32) + u32(60) + SID + SID + u64(0) + u64(0) + u64(0) + u32(1, 1) + u32(1) + u32(1) + opaque(b"srv"),
    "deallocate": u32(62) + SID + u64(4096) + u64(8192),
    "offload_cancel": u32(66) + SID,
    "offload_status": u32(67) + SID,
    "read_plus": u32(68) + SID + u64(0) + u32(65536),
    "seek": u32(69) + SID + u64(0) + u32(1),
    "clone": u32(32) + u32(71) + SID + SID + u64(0) + u64(0) + u64(0),
}
for name, op in v42.items():
    nops = 3 if name in ("copy", "clone") else 2
    write("nfs4_compound", f"v42_{name}", opaque(b"") + u32(2, nops) + PUTROOT + op)
# CB_COMPOUND4args (tag, minorversion, callback_ident, ops), which the
# target also decodes: CB_SEQUENCE then CB_OFFLOAD (RFC 7862 §16.1) with
# a write_response4, and with a failure and the bytes copied.
CB_SEQ = u32(11) + SESSION + u32(1, 0, 0, 0, 0)
VERF = bytes(range(8))
CB_OFFLOAD_OK = u32(15) + FH + SID + u32(0) + u32(0) + u64(1 << 30) + u32(0) + VERF
CB_OFFLOAD_FAIL = u32(15) + FH + SID + u32(5) + u64(4096)
write("nfs4_compound", "cb_offload_ok", opaque(b"") + u32(2, 0, 2) + CB_SEQ + CB_OFFLOAD_OK)
write("nfs4_compound", "cb_offload_fail", opaque(b"") + u32(2, 0, 2) + CB_SEQ + CB_OFFLOAD_FAIL)
