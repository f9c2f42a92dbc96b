#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine: installs what the
# tests need, then formatting, lints, every cargo test, and the Linux kernel
# NFS client in a qemu guest (smoke, pjdfstest, tar, restart, locks, the
# Connectathon tests and a failover between two heads over CephFS, over
# NFSv3; then smoke, pjdfstest, tar, fsx, restart, locks, the
# Connectathon tests and xfstests' CI list over NFSv4.1, xfstests built on
# the host beside the NFSv3 run; then smoke, pjdfstest, tar, fsx,
# restart, locks, xattr, v42data and deleg mounted with no vers=, where
# the client must settle on NFSv4.2). `.ci/run` runs this.
#
# RNFSD_SKIP_KERNEL_CLIENT=1 skips the guest stage (it needs root, about
# 18 minutes, and downloads a kernel package the first time);
# RNFSD_KC_V4_WORKLOADS (default "smoke pjdfstest tar fsx restart locks
# cthon xfstests") are the workloads its second run does over NFSv4.1 (empty: no
# such run). RNFSD_KC_V42_WORKLOADS (default "smoke pjdfstest tar fsx
# restart locks xattr v42data deleg"): the third run's, with
# RNFSD_KC_V42_VERS (default auto: no vers=; smoke and v42data check the
# client settled on 4.2; or 4.2). RNFSD_KC_V4_TAR_FILES (default 1000) and
# RNFSD_KC_V4_FSX_OPS (default 3000) size tar and fsx in the NFSv4 runs
# (the NFSv3 run keeps tar's 3,000 files; docs/kernel-client.md);
# RNFSD_KC_V42_SIZE_MIB (default 256) the file v42data copies.
# RNFSD_KC_CTHON_GROUPS (default "basic special
# lock") are the Connectathon groups all three runs do (cthon04 from the shared
# suites folder beside the checkout, or CTHON_SRC; under CI its absence is
# a failure); the general group (compiles in the guest, about 6 minutes a
# version) runs outside CI: docs/cthon04.md.
# RNFSD_SKIP_FUZZ=1 skips the short fuzz run (its first build takes minutes);
# RNFSD_SKIP_PACKAGE=1 skips the Debian package test (root; a release build
# and cargo-deb, installed when missing).
# RNFSD_SKIP_CEPH=1 skips the single-node Ceph cluster the CephFS backend's
# tests run against (tests/ceph/cluster.sh: Debian's ceph packages, installed
# when missing, about 0.4 GiB of memory, 15 s to start); RNFSD_CEPH_DIR
# (default /tmp/rnfsd-ceph) is where the cluster lives for the run, and
# RNFSD_CEPH_MON_PORT (default 13300) its mon's port. The cargo tests get
# RNFSD_CEPH_CONF=<dir>/ceph.conf; without it those tests skip, or fail
# under CI.
# RNFSD_SKIP_PYNFS=1 skips the pynfs stage (tests/pynfs/run.sh: NFSv4.1,
# about 2.5 minutes, then NFSv4.2's xattr and delegation tests). When the guest stage runs
# it runs meanwhile, in the background (most of its time is spent waiting
# out leases), and its output follows the guest stage's.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v nfs-ls >/dev/null 2>&1 || need_apt+=(libnfs-utils)
# xfs_io: the power-cut test shuts the export's filesystem down with it;
# mkfs.xfs (same package): the inode-reuse handle test.
command -v xfs_io >/dev/null 2>&1 || need_apt+=(xfsprogs)
# fsfreeze, setpriv: the slow-calls and least-privilege tests.
{ command -v fsfreeze && command -v setpriv; } >/dev/null 2>&1 || need_apt+=(util-linux)
# The package test: showmount (nfs-common), a private rpcbind and rpcinfo,
# ip for its network namespace, python3 for its notify-socket listener.
command -v showmount >/dev/null 2>&1 || need_apt+=(nfs-common)
{ command -v rpcbind && command -v rpcinfo; } >/dev/null 2>&1 || need_apt+=(rpcbind)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# The NFSv4.1 client's tests run against nfs-ganesha (scripts/ganesha.sh).
command -v ganesha.nfsd >/dev/null 2>&1 || need_apt+=(nfs-ganesha nfs-ganesha-vfs)
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO scripts/apt-get-locked update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO scripts/apt-get-locked install -y -qq "${need_apt[@]}" >/dev/null
fi

# The Ceph cluster: optional where it cannot be had (not root, apt fails),
# except under CI as root, where that is a failure. The backend dlopens
# libcephfs.so.2, so no -dev package.
ceph_skip=""
ci_root=""
[ -n "${CI:-}" ] && [ "$(id -u)" = 0 ] && ci_root=1
if [ "${RNFSD_SKIP_CEPH:-}" = 1 ]; then
    ceph_skip="RNFSD_SKIP_CEPH=1"
else
    need_ceph=()
    for p in ceph-mon ceph-osd ceph-mds ceph-mgr ceph-common libcephfs2; do
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || need_ceph+=("$p")
    done
    if [ ${#need_ceph[@]} -gt 0 ]; then
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo -n"
        if [ -n "$SUDO" ] && ! sudo -n true 2>/dev/null; then
            ceph_skip="not root, and ${need_ceph[*]} not installed"
        elif ! { $SUDO scripts/apt-get-locked update -qq &&
            DEBIAN_FRONTEND=noninteractive $SUDO scripts/apt-get-locked install -y -qq --no-install-recommends \
                "${need_ceph[@]}" >/dev/null; }; then
            [ -z "$ci_root" ] || { echo "FAIL: apt-get could not install ${need_ceph[*]}" >&2; exit 1; }
            ceph_skip="apt-get could not install ${need_ceph[*]}"
        fi
    fi
fi

cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The interop tests need libnfs's tools; under CI their absence is a failure,
# not a skip.
export RNFSD_REQUIRE_LIBNFS="${CI:-}"
if [ -z "$ceph_skip" ]; then
    ceph_dir="${RNFSD_CEPH_DIR:-/tmp/rnfsd-ceph}"
    # Stopped on any exit, also a failed `up` (its logs go with it: `up`
    # printed their tails).
    trap 'tests/ceph/cluster.sh down "$ceph_dir" || true' EXIT
    if ceph_out=$(tests/ceph/cluster.sh up "$ceph_dir"); then
        export RNFSD_CEPH_CONF="${ceph_out#CEPH_CONF=}"
    elif [ -n "$ci_root" ]; then
        echo "FAIL: the Ceph test cluster did not start (see above)" >&2
        exit 1
    else
        ceph_skip="the cluster did not start in $ceph_dir (see above)"
    fi
fi
[ -z "$ceph_skip" ] || echo "SKIP: ceph tests ($ceph_skip)"
cargo test --workspace
# Its memory and CPU are the guest's from here on (the failover workload
# runs a cluster of its own in its namespace).
[ -n "$ceph_skip" ] || tests/ceph/cluster.sh down "$ceph_dir" >/dev/null 2>&1 || true

# Whether the guest stage runs (at the end): then pynfs's runs go on
# beside it.
kc_on=1
if [ "${RNFSD_SKIP_KERNEL_CLIENT:-}" = 1 ] || [ "$(id -u)" != 0 ]; then kc_on=; fi

# pynfs's NFSv4.1 server tests against a real rnfsd (tests/pynfs/run.sh:
# the debug server cargo test built, a temp export, `nfs4 = true`, a 15 s
# lease so the five tests that wait a lease out take 2 minutes, not 8),
# judged against tests/pynfs/expected/rnfsd-4.1; then at minor version 2
# its extended attribute tests (the `xattr` flag, RFC 8276) and its
# delegation tests (`deleg`: DELEG24/25 ask NFSv4.2's open_arguments, RFC
# 9754), 20 s, judged against tests/pynfs/expected/rnfsd-4.2;
# docs/pynfs.md. RNFSD_SKIP_PYNFS=1 skips them. pynfs_runs [&]: in the
# foreground, or (with the guest stage) in the background, its output into
# a file shown after.
pynfs_runs() {
    local bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/rnfsd"
    env RNFSD_BIN="$bin" PYNFS_RNFSD_TOML="nfs4_lease_secs = 15" \
        tests/pynfs/run.sh --server rnfsd || return
    exec env RNFSD_BIN="$bin" PYNFS_RNFSD_TOML="nfs4_lease_secs = 15" \
        tests/pynfs/run.sh --server rnfsd --minorversion 2 xattr deleg
}
pynfs_pid=
if [ "${RNFSD_SKIP_PYNFS:-}" = 1 ]; then
    echo "SKIP: pynfs stage (RNFSD_SKIP_PYNFS=1)"
elif [ -z "$kc_on" ]; then
    (pynfs_runs)
fi

if [ "${RNFSD_SKIP_PACKAGE:-}" = 1 ]; then
    echo "SKIP: package test (RNFSD_SKIP_PACKAGE=1)"
else
    # Builds the .deb, installs it, serves under the unit's hardening,
    # purges it (it skips itself when not root).
    tests/package/run.sh
fi

if [ "${RNFSD_SKIP_FUZZ:-}" = 1 ]; then
    echo "SKIP: fuzz smoke run (RNFSD_SKIP_FUZZ=1)"
else
    # Every fuzz target for a few seconds, after replaying its regressions.
    fuzz/run.sh --ci
fi

if [ "${RNFSD_SKIP_KERNEL_CLIENT:-}" = 1 ]; then
    echo "SKIP: kernel-client stage (RNFSD_SKIP_KERNEL_CLIENT=1)"
elif [ "$(id -u)" != 0 ]; then
    echo "SKIP: kernel-client stage needs root (namespaces, qemu, apt-get)"
else
    # pynfs's runs beside the guest (see pynfs_runs): stopped if this
    # stage fails first, shown and judged after it.
    if [ "${RNFSD_SKIP_PYNFS:-}" != 1 ]; then
        pynfs_out=$(mktemp)
        (pynfs_runs) >"$pynfs_out" 2>&1 &
        pynfs_pid=$!
        trap '[ -z "$pynfs_pid" ] || kill -TERM "$pynfs_pid" 2>/dev/null; [ -n "$ceph_skip" ] || tests/ceph/cluster.sh down "$ceph_dir" >/dev/null 2>&1 || true' EXIT
    fi
    # The debug server cargo test just built: correctness, not speed, and it
    # saves a release build. The export on a journaled ext4 (a loop device),
    # as most users have it: `sync` exports then take the journal commit
    # path, which pjdfstest's many users exercise (the work dir's own
    # filesystem may have no journal). cthon: the Connectathon groups CI
    # has time for (about 2 minutes a version, general left out).
    kc_cthon="${RNFSD_KC_CTHON_GROUPS-basic special lock}"
    read -r -a kc_v4 <<<"${RNFSD_KC_V4_WORKLOADS-smoke pjdfstest tar fsx restart locks cthon xfstests}"
    # xfstests (the NFSv4.1 run's) is built on the host beside the NFSv3
    # run (run.sh --prepare: its packages, then the build, into the shared
    # cache; the NFSv4.1 run waits for it).
    kc_prep_pid=
    if [[ " ${kc_v4[*]} " == *" xfstests "* ]]; then
        kc_prep_out=$(mktemp)
        tests/kernel-client/run.sh --prepare xfstests >"$kc_prep_out" 2>&1 &
        kc_prep_pid=$!
    fi
    KC_EXPORT_FS=ext4 RNFSD_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/rnfsd" \
        CTHON_GROUPS="$kc_cthon" tests/kernel-client/run.sh smoke pjdfstest tar restart locks cthon failover
    # The same guest over NFSv4.1: the v4 data path and namespace, opens
    # and locks reclaimed after restarts, v4 locks against NLM's, and
    # xfstests' CI list (tests/kernel-client/xfstests/ci.list,
    # docs/xfstests.md). tar and fsx smaller than at NFSv3 (the same
    # checks; CI's time).
    kc_v4_size=(TAR_FILES="${RNFSD_KC_V4_TAR_FILES-1000}" FSX_OPS="${RNFSD_KC_V4_FSX_OPS-3000}")
    if [ -n "$kc_prep_pid" ]; then
        kc_prep_rc=0
        wait "$kc_prep_pid" || kc_prep_rc=$?
        cat "$kc_prep_out" && rm -f "$kc_prep_out"
        [ "$kc_prep_rc" = 0 ] || { echo "FAIL: building xfstests (run.sh --prepare, exit $kc_prep_rc)" >&2; exit 1; }
    fi
    if [ ${#kc_v4[@]} -gt 0 ]; then
        env "${kc_v4_size[@]}" KC_EXPORT_FS=ext4 RNFSD_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/rnfsd" \
            CTHON_GROUPS="$kc_cthon" tests/kernel-client/run.sh --vers 4.1 "${kc_v4[@]}"
    fi
    # With no vers= (mount.nfs negotiates; smoke says what it settled on,
    # v42data insists on 4.2), the same again plus NFSv4.2's own
    # operations: extended attributes (setfattr, getfattr) and the data
    # operations (cp by COPY, punched holes, SEEK_DATA/SEEK_HOLE), and a
    # read delegation recalled by an NFSv3 client's, another NFSv4
    # client's and a local program's write (deleg).
    read -r -a kc_v42 <<<"${RNFSD_KC_V42_WORKLOADS-smoke pjdfstest tar fsx restart locks cthon xattr v42data deleg}"
    if [ ${#kc_v42[@]} -gt 0 ]; then
        env "${kc_v4_size[@]}" V42_SIZE_MIB="${RNFSD_KC_V42_SIZE_MIB-256}" KC_EXPORT_FS=ext4 \
            CTHON_GROUPS="$kc_cthon" \
            RNFSD_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/rnfsd" \
            tests/kernel-client/run.sh --vers "${RNFSD_KC_V42_VERS:-auto}" "${kc_v42[@]}"
    fi
    if [ -n "$pynfs_pid" ]; then
        pynfs_rc=0
        wait "$pynfs_pid" || pynfs_rc=$?
        pynfs_pid=
        cat "$pynfs_out" && rm -f "$pynfs_out"
        [ "$pynfs_rc" = 0 ] || { echo "FAIL: pynfs (exit $pynfs_rc)" >&2; exit 1; }
    fi
fi
