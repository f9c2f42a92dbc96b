#!/usr/bin/env bash
# Real-client conformance harness: the Linux kernel NFS client (NFSv3, or
# NFSv4.1/4.2 with --vers) in a qemu guest mounts rnfsd (or, for comparison,
# nfs-ganesha) and runs workloads. See docs/kernel-client.md.
#
#   tests/kernel-client/run.sh [--server rnfsd|ganesha|knfsd-guest]
#                              [--vers 3|4.1|4.2|auto]
#                              [--accel tcg|kvm] [--net tap|passt|slirp]
#                              [--timeout SECS] [--prepare] [WORKLOAD...]
#
# --vers: the NFS version the guest mounts (default 3). 4.1 and 4.2 start
# the server with NFSv4 on and mount vers=4.1 / 4.2 on port 2049 (no
# rpcbind, statd or lockd in the guest); auto mounts with no vers= through
# mount.nfs, which negotiates (the smoke check says what it settled on).
#
# --prepare: only install the host packages the workloads need and build
# their suites (cthon04, xfstests) into the cache, then exit; no guest. A
# run that needs them meanwhile waits for the build (scripts/test.sh builds
# xfstests this way beside the NFSv3 run).
#
# --net (default tap, or KC_NET): tap puts the guest on a tap device of the
# run's namespace (guest 10.0.2.15, server 10.0.2.2), so the server sees the
# guest's own address and its NLM GRANTED and NSM SM_NOTIFY calls reach the
# guest's lockd and statd; passt (guest connections reach the namespace's
# loopback from 127.0.0.1: no call back reaches the guest, a blocked NLM
# lock waits for the client's 30 s retry) and slirp (qemu user networking,
# guestfwd socats to 10.0.2.100) remain for comparison.
#
# Workloads: smoke pjdfstest tar restart locks (the default set;
# guest/NAME.sh; locks at NFSv3: NLM, mounted without nolock, rpcbind and
# rpc.statd in the guest; at NFSv4 also a second, NFSv3 mount with NLM
# beside the v4 one); also fsx (crates.io fsx, plain and mmap), load
# (fsmark, dbench, postmark, bonnie++; Debian packages installed on demand),
# cthon (the Connectathon tests: basic, general, special and lock, built on
# the host from CTHON_SRC; locks without nolock, as the locks workload)
# and failover (two rnfsd heads on one CephFS, a floating address moved
# from a killed head A to head B under fsx and tar; failover-host.sh), and
# xattr (user extended attributes with setfattr and getfattr; NFSv4.2's,
# checked on the server's file; at 3 and 4.1 setfattr must fail),
# deleg (NFSv4.x: a read delegation the guest holds is recalled by a
# write through an NFSv3 client, another NFSv4 client and a program on
# the server's host, and the guest's next read sees the new bytes; the
# host's clients are crates/client's nfs_write example, built here),
# revalidate (a 1,000-file tree the host made, opened and read three
# times: the client's NFS calls per pass, from its mountstats), and
# xfstests (the filesystem regression suite over NFS, FSTYP=nfs, built on
# the host from XFSTESTS_SRC; a test export and a scratch export; see
# docs/xfstests.md).
# Prints one PASS/FAIL line per check and, last, "N passed, M failed".
# Exit status 0 only when every check passed.
#
# Environment: RNFSD_BIN (server binary; default target/release/rnfsd, built
# if missing), KC_WORK (work and cache dir; default target/kernel-client),
# KC_KEEP=1 (keep the run dir: export, logs), KC_PCAP=1 (tcpdump of the
# server side into the run dir), PJD_PATTERNS, TAR_FILES, FSX_OPS,
# FO_TAR_FILES, FO_FSX_OPS, FO_EVICT, FO_CONTROL, FO_SERVER_TOML (failover),
# CTHON_SRC (the cthon04 suite; default the shared suites folder beside the
# checkout; without it the cthon workload is skipped, except under CI),
# CTHON_GROUPS (default "basic general special lock"),
# XFSTESTS_SRC (the xfstests suite; default the shared suites folder, found
# and skipped as CTHON_SRC), XFSTESTS (test names, "generic/001 ..."),
# XFSTESTS_GROUP (a group, e.g. quick; without either, the CI list
# tests/kernel-client/xfstests/ci.list), XFSTESTS_LIMIT (the workload's
# seconds in the guest, default 600; its tests stop 60 s before),
# XFSTESTS_TEST_LIMIT (one test's seconds, default 180),
# KC_BACKEND=cephfs (rnfsd serves the export from a Ceph cluster started in
# the namespace instead of a local directory; host-side checks read it
# through ceph-fuse; not with failover; ceph-host.sh). KC_SCRATCH_SIZE
# (xfstests' scratch export, a fresh filesystem on a loop device of
# KC_EXPORT_FS's type or ext4; default 4G). KC_EXPORT_FS=ext4|xfs
# puts the export on a fresh filesystem of that type on a loop device (a
# journaled one, where `sync` exports take the shared journal commit path;
# the work dir's own filesystem may have no journal). KC_DELEGATIONS=on|off
# sets rnfsd's nfs4_delegations (unset: the server's default); REVAL_FILES
# (1000): the revalidate workload's tree.
# --server ganesha: Debian's nfs-ganesha + nfs-ganesha-vfs (installed when
# missing), config from scripts/ganesha.sh, MOUNT on port 20048.
# --server knfsd-guest: no server on the host; the guest kernel's nfsd
# exports a tmpfs and the guest mounts it over loopback (nfs-kernel-server's
# rpc.nfsd, rpc.mountd and exportfs unpacked from Debian's package into the
# cache, never installed); cthon, fsx and xfstests only.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

SERVER=rnfsd
VERS=3
KC_PCAP=${KC_PCAP:-}
ACCEL=tcg
NET=${KC_NET:-tap}
TOTAL_TIMEOUT=
PREPARE=
WORKLOADS=()
while [ $# -gt 0 ]; do
    case $1 in
    --server) SERVER=$2; shift 2 ;;
    --accel) ACCEL=$2; shift 2 ;;
    --net) NET=$2; shift 2 ;;
    --timeout) TOTAL_TIMEOUT=$2; shift 2 ;;
    --vers) VERS=$2; shift 2 ;;
    --prepare) PREPARE=1; shift ;;
    -h | --help) sed -n '2,/^set -uo pipefail/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) WORKLOADS+=("$1"); shift ;;
    esac
done
[ ${#WORKLOADS[@]} -gt 0 ] || WORKLOADS=(smoke pjdfstest tar restart locks)
for w in "${WORKLOADS[@]}"; do
    [ -f "$HERE/guest/$w.sh" ] || { echo "run.sh: no workload '$w'" >&2; exit 2; }
done
has_workload() { [[ " ${WORKLOADS[*]} " == *" $1 "* ]]; }
# cthon: the suite is not part of the project (../shared/suites, or
# ../../shared/suites for a worktree in a folder of worktrees); without it
# the workload is skipped with the reason, except under CI.
if has_workload cthon; then
    if [ -z "${CTHON_SRC:-}" ]; then
        for d in "$REPO/../shared/suites/cthon04" "$REPO/../../shared/suites/cthon04"; do
            [ -f "$d/lock/tlock.c" ] && { CTHON_SRC=$(cd "$d" && pwd); break; }
        done
    fi
    if [ -z "${CTHON_SRC:-}" ] || [ ! -f "$CTHON_SRC/lock/tlock.c" ]; then
        why="the cthon04 suite is not there (shared/suites/cthon04 beside the checkout, or CTHON_SRC)"
        [ -z "${CI:-}" ] || { echo "run.sh: $why" >&2; echo "0 passed, 1 failed"; exit 1; }
        echo "SKIP: cthon ($why)"
        rest=()
        for w in "${WORKLOADS[@]}"; do [ "$w" = cthon ] || rest+=("$w"); done
        [ ${#rest[@]} -gt 0 ] || { echo "0 passed, 0 failed"; exit 0; }
        WORKLOADS=("${rest[@]}")
    fi
    export CTHON_SRC
    for g in ${CTHON_GROUPS:-}; do
        case $g in basic | general | special | lock) ;; *) echo "run.sh: CTHON_GROUPS: basic general special lock" >&2; exit 2 ;; esac
    done
fi
# xfstests: as cthon, from ../shared/suites/xfstests or XFSTESTS_SRC.
if has_workload xfstests; then
    if [ -z "${XFSTESTS_SRC:-}" ]; then
        for d in "$REPO/../shared/suites/xfstests" "$REPO/../../shared/suites/xfstests"; do
            [ -f "$d/check" ] && { XFSTESTS_SRC=$(cd "$d" && pwd); break; }
        done
    fi
    if [ -z "${XFSTESTS_SRC:-}" ] || [ ! -f "$XFSTESTS_SRC/check" ]; then
        why="the xfstests suite is not there (shared/suites/xfstests beside the checkout, or XFSTESTS_SRC)"
        [ -z "${CI:-}" ] || { echo "run.sh: $why" >&2; echo "0 passed, 1 failed"; exit 1; }
        echo "SKIP: xfstests ($why)"
        rest=()
        for w in "${WORKLOADS[@]}"; do [ "$w" = xfstests ] || rest+=("$w"); done
        [ ${#rest[@]} -gt 0 ] || { echo "0 passed, 0 failed"; exit 0; }
        WORKLOADS=("${rest[@]}")
    fi
    export XFSTESTS_SRC
fi
case $SERVER in rnfsd | ganesha | knfsd-guest) ;; *) echo "run.sh: --server rnfsd|ganesha|knfsd-guest" >&2; exit 2 ;; esac
# knfsd-guest: the guest's own kernel server over loopback (guest/knfsd.sh),
# for comparison; the workloads that ask the host for things do not apply.
if [ "$SERVER" = knfsd-guest ]; then
    for w in "${WORKLOADS[@]}"; do
        case $w in cthon | fsx | xfstests) ;; *) echo "run.sh: --server knfsd-guest runs cthon, fsx and xfstests only" >&2; exit 2 ;; esac
    done
    [ "$VERS" != auto ] || { echo "run.sh: --server knfsd-guest needs --vers 3, 4.1 or 4.2" >&2; exit 2; }
fi
case $VERS in 3 | 4.1 | 4.2 | auto) ;; *) echo "run.sh: --vers 3|4.1|4.2|auto" >&2; exit 2 ;; esac
[ "$VERS" = 3 ] || [[ " ${WORKLOADS[*]} " != *" failover "* ]] ||
    { echo "run.sh: the failover workload mounts NFSv3 only" >&2; exit 2; }
case $ACCEL in tcg | kvm) ;; *) echo "run.sh: --accel tcg|kvm" >&2; exit 2 ;; esac
case ${KC_DELEGATIONS:-} in
'' | on | off) ;;
*) echo "run.sh: KC_DELEGATIONS=on|off" >&2; exit 2 ;;
esac
[ -z "${KC_DELEGATIONS:-}" ] || [ "$SERVER" = rnfsd ] ||
    { echo "run.sh: KC_DELEGATIONS is rnfsd's (nfs4_delegations)" >&2; exit 2; }
case $NET in tap | passt | slirp) ;; *) echo "run.sh: --net tap|passt|slirp" >&2; exit 2 ;; esac
# No tun device (a container without /dev/net/tun): passt instead of tap,
# with a word on what it costs.
if [ "$NET" = tap ] && [ -z "${KC_NET:-}" ] && [ ! -c /dev/net/tun ]; then
    echo "[kernel-client] no /dev/net/tun: --net passt (NLM GRANTED and SM_NOTIFY cannot reach the guest)" >&2
    NET=passt
fi
KC_BACKEND=${KC_BACKEND:-local}
case $KC_BACKEND in
local) ;;
cephfs)
    [ "$SERVER" = rnfsd ] || { echo "run.sh: KC_BACKEND=cephfs needs --server rnfsd" >&2; exit 2; }
    [[ " ${WORKLOADS[*]} " != *" failover "* ]] ||
        { echo "run.sh: KC_BACKEND=cephfs and the failover workload each start a cluster: run them apart" >&2; exit 2; }
    ;;
*) echo "run.sh: KC_BACKEND=local|cephfs" >&2; exit 2 ;;
esac
export KC_BACKEND

# Per-workload time limits inside the guest (seconds, under TCG).
declare -A LIMIT=([smoke]=420 [pjdfstest]=420 [tar]=600 [restart]=360 [fsx]=900 [load]=900 [locks]=420 [failover]=600 [v42data]=600 [cthon]=1500 [deleg]=300)
# xfstests: the guest script stops starting tests 60 s before this.
LIMIT[xfstests]=${XFSTESTS_LIMIT:-600}
budget=120 # boot and setup
for w in "${WORKLOADS[@]}"; do budget=$((budget + ${LIMIT[$w]:-300})); done
QEMU_TIMEOUT=$budget
TOTAL_TIMEOUT=${TOTAL_TIMEOUT:-$((budget + 600))} # + first-time installs

# The whole script runs under timeout(1); cleanup runs on its SIGTERM.
if [ -z "${KC_UNDER_TIMEOUT:-}" ]; then
    export KC_UNDER_TIMEOUT=1
    exec timeout -k 20 "$TOTAL_TIMEOUT" "$0" --server "$SERVER" --vers "$VERS" --accel "$ACCEL" --net "$NET" \
        --timeout "$TOTAL_TIMEOUT" ${PREPARE:+--prepare} "${WORKLOADS[@]}"
fi

say() { echo "[kernel-client $(date +%T)] $*" >&2; }
die() { say "error: $*"; echo "0 passed, 1 failed"; exit 1; }

WORK=${KC_WORK:-$REPO/target/kernel-client}
CACHE=$WORK/cache
RUN=$WORK/run
mkdir -p "$CACHE"
T0=$(date +%s)

# ---- host packages -------------------------------------------------------
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
# grep without -q: it must read all of the list, or busybox may die of
# SIGPIPE and pipefail turns that into "missing" (a needless apt-get).
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -x cpio >/dev/null || need+=(busybox-static)
command -v socat >/dev/null || need+=(socat)
command -v modprobe >/dev/null || need+=(kmod)
command -v ip >/dev/null || need+=(iproute2)
[ "$NET" = passt ] && ! command -v passt >/dev/null && need+=(passt)
if [ "$SERVER" = ganesha ]; then
    command -v ganesha.nfsd >/dev/null || need+=(nfs-ganesha)
    dpkg-query -W -f='${Status}' nfs-ganesha-vfs 2>/dev/null | grep 'install ok installed' >/dev/null || need+=(nfs-ganesha-vfs)
    command -v rpcbind >/dev/null && command -v rpcinfo >/dev/null || need+=(rpcbind)
fi
# --vers auto: the guest runs the host's mount.nfs, which negotiates.
[ "$VERS" = auto ] && [ ! -x /usr/sbin/mount.nfs ] && need+=(nfs-common)
if has_workload locks || has_workload cthon; then # NLM client side (guest/lib.sh)
    [ -x /usr/sbin/rpcbind ] || need+=(rpcbind)
    [ -x /usr/sbin/rpc.statd ] || need+=(nfs-common)
fi
if has_workload cthon; then
    # Built here; the general group compiles, runs tbl, nroff and make in
    # the guest, from the host's /usr, and times them with /usr/bin/time.
    command -v cc >/dev/null || need+=(gcc)
    command -v make >/dev/null || need+=(make)
    [ -f /usr/include/stdio.h ] || need+=(libc6-dev)
    [ -x /usr/bin/time ] || need+=(time)
    { command -v tbl && command -v nroff; } >/dev/null || need+=(groff-base)
fi
# revalidate: python3 in the guest (the host's /usr) and for ns.sh's mktree.
has_workload revalidate && [ ! -x /usr/bin/python3 ] && need+=(python3)
if has_workload xfstests; then
    # Built here (the build dependencies its README names); the tests run
    # xfs_io, bc, setfacl, getfattr, fuser from the host's /usr.
    for p in autoconf automake libtool make gcc xfslibs-dev uuid-dev libacl1-dev libattr1-dev libaio-dev \
        liburing-dev libgdbm-dev python3 xfsprogs bc acl attr psmisc; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
    done
fi
if has_workload locks; then # guest/locks.sh's host probes
    [ -x /usr/bin/python3 ] || need+=(python3)
    [ -x /usr/bin/sqlite3 ] || need+=(sqlite3)
    [ -x /usr/bin/flock ] || need+=(util-linux)
fi
# guest/xattr.sh and its host-side checks: setfattr, getfattr.
[[ " ${WORKLOADS[*]} " == *" xattr "* ]] && ! command -v setfattr >/dev/null && need+=(attr)
if [[ " ${WORKLOADS[*]} " == *" load "* ]]; then # guest/load.sh's tools
    command -v fs_mark >/dev/null || need+=(fsmark)
    command -v dbench >/dev/null || need+=(dbench)
    command -v postmark >/dev/null || need+=(postmark)
    command -v bonnie++ >/dev/null || need+=(bonnie++)
fi
# failover and KC_BACKEND=cephfs: a Ceph cluster in the namespace
# (tests/ceph/cluster.sh) and libcephfs for rnfsd, without recommends (as
# scripts/test.sh); KC_BACKEND=cephfs also ceph-fuse (host-side checks).
need_ceph=()
ceph_pkgs=()
[[ " ${WORKLOADS[*]} " == *" failover "* ]] && ceph_pkgs=(ceph-mon ceph-osd ceph-mds ceph-mgr ceph-common libcephfs2)
[ "$KC_BACKEND" = cephfs ] && ceph_pkgs=(ceph-mon ceph-osd ceph-mds ceph-mgr ceph-common libcephfs2 ceph-fuse)
if [ ${#ceph_pkgs[@]} -gt 0 ]; then
    for p in "${ceph_pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || need_ceph+=("$p")
    done
    [ -x /usr/bin/python3 ] || need+=(python3)
    [ "$SERVER" = rnfsd ] || die "the failover workload and KC_BACKEND=cephfs run rnfsd only"
fi
apt_updated=
# apt-get one at a time (a --prepare run, or pynfs's stage, may be
# installing at the same time).
apt_get() { "$REPO/scripts/apt-get-locked" "$@"; }
apt_update() { [ -n "$apt_updated" ] || { apt_get update -qq && apt_updated=1; }; }
if [ ${#need[@]} -gt 0 ]; then
    say "apt-get install ${need[*]}"
    apt_update || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt_get install -y -qq "${need[@]}" >"$CACHE/apt.log" 2>&1 ||
        die "apt-get install ${need[*]} failed (see $CACHE/apt.log)"
fi
if [ ${#need_ceph[@]} -gt 0 ]; then
    say "apt-get install --no-install-recommends ${need_ceph[*]}"
    apt_update || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt_get install -y -qq --no-install-recommends "${need_ceph[@]}" >"$CACHE/apt-ceph.log" 2>&1 ||
        die "apt-get install ${need_ceph[*]} failed (see $CACHE/apt-ceph.log)"
fi

# ---- the suites built on the host (cthon04, xfstests) ---------------------
# Each built once per content of the suite (and, for cthon04, of tests.init's
# flags) in a copy in the cache (the shared folder is read-only), under a
# lock (a --prepare run may be building it). cthon04's tools/ (which needs
# libtirpc) is not built: no test runs it.
# build_suite NAME SRC MAKEDIR...: a copy of SRC built with make in each
# MAKEDIR (relative; "." the top) into $CACHE/NAME-STAMP; its path in
# SUITE_DIR.
build_suite() {
    local name=$1 src=$2 stamp dir d
    shift 2
    stamp=$(cd "$src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
    dir=$CACHE/$name-$stamp
    exec 8>"$CACHE/$name.lock" && flock 8 || die "cannot lock $CACHE/$name.lock"
    if [ ! -f "$dir/.built" ]; then
        say "building $name from $src"
        rm -rf "$CACHE/$name"-* && mkdir -p "$dir"
        cp -R "$src/." "$dir/" && chmod -R u+w "$dir" || die "copying $src failed"
        for d in "$@"; do
            make -C "$dir/$d" >>"$dir/build.log" 2>&1 || die "$name: make in $d failed (see $dir/build.log)"
        done
        touch "$dir/.built"
    fi
    exec 8>&-
    SUITE_DIR=$dir
}
build_cthon() { build_suite cthon "$CTHON_SRC" basic general special lock && CB=$SUITE_DIR; }
build_xfstests() { build_suite xfstests "$XFSTESTS_SRC" . && XB=$SUITE_DIR; }
if [ -n "$PREPARE" ]; then
    # --prepare: the named workloads' host packages (above) and suites,
    # nothing more (no kernel, no run dir: a guest run may be using it).
    has_workload cthon && build_cthon
    has_workload xfstests && build_xfstests
    say "prepared after $(($(date +%s) - T0))s"
    exit 0
fi

# ---- guest kernel (Debian's, unpacked into the cache, never installed) ----
KDIR=$(ls -d "$CACHE"/kernel/lib/modules/*/ 2>/dev/null | head -n 1)
if [ -z "$KDIR" ]; then
    apt_update || die "apt-get update failed"
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    [ -n "$kpkg" ] || die "cannot resolve linux-image-amd64"
    say "fetching $kpkg"
    rm -rf "$CACHE/kernel" "$CACHE/deb" && mkdir -p "$CACHE/deb"
    (cd "$CACHE/deb" && apt-get download "$kpkg" >/dev/null 2>&1) || die "apt-get download $kpkg failed"
    dpkg-deb -x "$CACHE"/deb/"$kpkg"_*.deb "$CACHE/kernel" || die "dpkg-deb -x failed"
    rm -rf "$CACHE/deb"
    KDIR=$(ls -d "$CACHE"/kernel/lib/modules/*/ | head -n 1)
fi
KVER=$(basename "$KDIR")
VMLINUZ=$CACHE/kernel/boot/vmlinuz-$KVER
[ -f "$VMLINUZ" ] || die "no $VMLINUZ"
[ -f "$KDIR/modules.dep" ] || depmod -b "$CACHE/kernel" "$KVER" || die "depmod failed"

# ---- initramfs (rebuilt when the init script or kernel changes) -----------
# nfsv4 (with its dependencies, dns_resolver among them) for --vers 4.x;
# loaded in every run, so one initramfs serves all versions.
MODS="virtio_pci virtio_net 9pnet_virtio 9p nfsv3 nfsv4"
# nfsd and what it needs beyond MODS: in the initramfs, listed in
# /kmod/order.nfsd, loaded only by --server knfsd-guest (guest/knfsd.sh).
MODS_NFSD="nfsd"
stamp=$( (cat "$HERE/guest/init"; echo "$KVER $MODS / $MODS_NFSD") | sha256sum | cut -c1-16)
INITRD=$CACHE/initramfs-$stamp.cpio
if [ ! -f "$INITRD" ]; then
    say "building initramfs for $KVER"
    ir=$CACHE/initramfs.d
    rm -rf "$ir" && mkdir -p "$ir"/{bb,kmod,etc}
    cp /bin/busybox "$ir/bb/busybox"
    cp "$HERE/guest/init" "$ir/init" && chmod 755 "$ir/init"
    : >"$ir/kmod/order"
    for m in $MODS; do
        modprobe -d "$CACHE/kernel" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'
    done | awk '!seen[$0]++' | while read -r ko; do
        cp "$ko" "$ir/kmod/" && basename "$ko" >>"$ir/kmod/order"
    done
    [ -s "$ir/kmod/order" ] || die "no modules resolved"
    : >"$ir/kmod/order.nfsd"
    for m in $MODS_NFSD; do
        modprobe -d "$CACHE/kernel" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'
    done | awk '!seen[$0]++' | while read -r ko; do
        grep -qx "$(basename "$ko")" "$ir/kmod/order" && continue
        cp "$ko" "$ir/kmod/" && basename "$ko" >>"$ir/kmod/order.nfsd"
    done
    # Users for chown and pjdfstest; the host's loader cache for its /usr.
    cat >"$ir/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/:/bin/false
bin:x:2:2:bin:/:/bin/false
tester:x:1000:1000:tester:/:/bin/false
tester2:x:1001:1001:tester2:/:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
    cat >"$ir/etc/group" <<'EOF'
root:x:0:
daemon:x:1:
bin:x:2:
tester:x:1000:
tester2:x:1001:
nogroup:x:65534:
EOF
    cp /etc/ld.so.cache "$ir/etc/" 2>/dev/null
    echo "127.0.0.1 localhost" >"$ir/etc/hosts"
    rm -f "$CACHE"/initramfs-*.cpio
    (cd "$ir" && find . | busybox cpio -o -H newc >"$INITRD.tmp" 2>/dev/null) && mv "$INITRD.tmp" "$INITRD" ||
        die "cpio failed"
fi

# ---- server and third-party tools ----------------------------------------
RNFSD_BIN=${RNFSD_BIN:-$REPO/target/release/rnfsd}
if [ "$SERVER" = rnfsd ] && [ ! -x "$RNFSD_BIN" ]; then
    say "building rnfsd (release)"
    (cd "$REPO" && cargo build --release -q -p rnfsd) || die "cargo build failed"
fi
NFS_WRITE=
if has_workload deleg; then # the host's other NFS clients (ns.sh's nfswrite)
    say "building the nfs_write example"
    (cd "$REPO" && cargo build -q -p rnfsd-client --example nfs_write) || die "cargo build failed"
    NFS_WRITE=${CARGO_TARGET_DIR:-$REPO/target}/debug/examples/nfs_write
fi
rm -rf "$RUN" && mkdir -p "$RUN"/{share/guest,share/bin,share/ctl,export,state}
# Loop-mounted filesystems of the run ("NAME LOOPDEV" lines): the export
# with KC_EXPORT_FS, xfstests' scratch export.
LOOPS=()
loop_fs() { # loop_fs NAME SIZE TYPE: a fresh TYPE filesystem at $RUN/NAME
    local img=$RUN/$1.img dev
    mkdir -p "$RUN/$1"
    truncate -s "$2" "$img" || die "$1 image"
    dev=$(losetup -f --show "$img") || die "losetup failed ($1)"
    LOOPS+=("$1 $dev")
    if [ "$3" = xfs ]; then
        mkfs.xfs -q -f "$dev" || die "mkfs.xfs failed ($1)"
    else
        mkfs.ext4 -q "$dev" || die "mkfs.ext4 failed ($1)"
    fi
    mount "$dev" "$RUN/$1" || die "mounting $1 failed"
    rmdir "$RUN/$1/lost+found" 2>/dev/null
}
unmount_export() { # the images stay with KC_KEEP (mount them to look)
    local l name dev
    for l in "${LOOPS[@]}"; do
        read -r name dev <<<"$l"
        umount "$RUN/$name" 2>/dev/null
        losetup -d "$dev" 2>/dev/null
        [ -n "${KC_KEEP:-}" ] || rm -f "$RUN/$name.img"
    done
    LOOPS=()
}
if [ -n "${KC_EXPORT_FS:-}" ]; then
    case $KC_EXPORT_FS in
    ext4 | xfs) ;;
    *) die "KC_EXPORT_FS must be ext4 or xfs" ;;
    esac
    # Sparse: the export must hold a >4 GiB sparse file.
    loop_fs export 16G "$KC_EXPORT_FS"
fi
cp "$HERE"/guest/*.sh "$HERE"/guest/*.pl "$RUN/share/guest/"
cargo_tool() { # cargo_tool NAME CRATE: a crates.io tool, into the guest's bin
    local bin=${CARGO_HOME:-$HOME/.cargo}/bin/$1
    if [ ! -x "$bin" ]; then
        say "cargo install $2"
        cargo install -q --locked "$2" >"$CACHE/cargo-install-$2.log" 2>&1 ||
            cargo install -q "$2" >>"$CACHE/cargo-install-$2.log" 2>&1 ||
            die "cargo install $2 failed (see $CACHE/cargo-install-$2.log)"
    fi
    cp "$bin" "$RUN/share/bin/"
}
for w in "${WORKLOADS[@]}"; do
    case $w in
    pjdfstest) cargo_tool pjdfstest pjdfstest ;;
    fsx | failover) cargo_tool fsx fsx ;;
    esac
done
cp "$HERE"/guest/*.toml "$RUN/share/"
# cthon04 (build_cthon), its basic, general, special and lock directories
# into the guest's share.
if has_workload cthon; then
    build_cthon
    mkdir -p "$RUN/share/cthon"
    cp -R "$CB/basic" "$CB/general" "$CB/special" "$CB/lock" "$CB/tests.init" "$RUN/share/cthon/"
fi
# xfstests (build_xfstests): what FSTYP=nfs needs goes to the guest's share, with the CI list and
# this server's and version's expected failures.
if has_workload xfstests; then
    build_xfstests
    # What FSTYP=nfs runs (the driver, helpers, programs, the generic and
    # nfs tests), not the other filesystems' tests: the guest reads it in
    # place over 9p, where every file costs.
    mkdir -p "$RUN/share/xfstests/tests"
    (cd "$XB" && cp -R check common src ltp lib include VERSION "$RUN/share/xfstests/" 2>/dev/null &&
        cp -R tests/generic tests/nfs "$RUN/share/xfstests/tests/") || die "copying xfstests failed"
    find "$RUN/share/xfstests" \( -name '*.o' -o -name '*.c' -o -name '*.lo' -o -name '*.la' -o -name Makefile \) -delete
    cp "$HERE/xfstests/ci.list" "$RUN/share/xfstests-ci.list"
    ev=$VERS
    [ "$ev" != auto ] || ev=4.2
    if [ -f "$HERE/xfstests/expected/$SERVER-$ev" ]; then
        cp "$HERE/xfstests/expected/$SERVER-$ev" "$RUN/share/xfstests-expected"
    fi
    # The scratch export: a filesystem of its own, KC_SCRATCH_SIZE (4G) in
    # a loop image: tests fill it (generic/103 fallocates all of its free
    # space), and a directory of the host's filesystem would fill the
    # host's disk instead.
    loop_fs scratch "${KC_SCRATCH_SIZE:-4G}" "${KC_EXPORT_FS:-ext4}"
fi

# The export must be on a filesystem that holds a >4 GiB sparse file; the
# run dir is under the work dir (target/, ext4 here).
EXPORT=$(cd "$RUN/export" && pwd -P)
NFS_PORT=2049
MNT_PORT=$NFS_PORT # rnfsd serves MOUNT on the NFS port
GANESHA_CONF=
KC_NLM=
GUEST_EXPORT=$EXPORT
# xfstests' scratch export (empty: none).
SCRATCH=
[ -d "$RUN/scratch" ] && SCRATCH=$(cd "$RUN/scratch" && pwd -P)
GUEST_SCRATCH=$SCRATCH
SERVER_IP=10.0.2.2
[ "$NET" != slirp ] || SERVER_IP=10.0.2.100
if [ "$SERVER" = knfsd-guest ]; then
    # The guest's nfsd on its loopback; rpc.mountd on a port of its own.
    MNT_PORT=20048
    GUEST_EXPORT=/srv/export
    [ -z "$SCRATCH" ] || GUEST_SCRATCH=/srv/scratch
    SERVER_IP=127.0.0.1
    kdeb=$CACHE/nfs-kernel-server
    if [ ! -x "$kdeb/usr/sbin/rpc.mountd" ]; then
        apt_update || die "apt-get update failed"
        say "fetching nfs-kernel-server"
        rm -rf "$kdeb" "$CACHE/deb" && mkdir -p "$CACHE/deb"
        (cd "$CACHE/deb" && apt-get download nfs-kernel-server >/dev/null 2>&1) || die "apt-get download nfs-kernel-server failed"
        dpkg-deb -x "$CACHE"/deb/nfs-kernel-server_*.deb "$kdeb" || die "dpkg-deb -x failed"
        rm -rf "$CACHE/deb"
    fi
    mkdir -p "$RUN/share/knfsd"
    cp "$kdeb"/usr/sbin/{rpc.nfsd,rpc.mountd,exportfs} "$RUN/share/knfsd/" || die "no nfs-kernel-server binaries"
fi
if [ "$SERVER" = ganesha ]; then
    # ganesha 4.3 answers MOUNT on the NFS port with PROG_UNAVAIL
    # (docs/ganesha.md): MOUNT on a port of its own.
    MNT_PORT=20048
    # NLM only for the lock workloads (then ns.sh runs an rpc.statd for it).
    gopts=()
    { has_workload locks || has_workload cthon; } && gopts=(--nlm) && KC_NLM=1
    # NFSv4.1 and 4.2 beside NFSv3 for --vers 4.x (locks at v4 mounts v3 too).
    [ "$VERS" = 3 ] || gopts+=(--nfs4)
    GANESHA_CONF=$(GANESHA_RUN=$RUN/ganesha "$REPO/scripts/ganesha.sh" config \
        --export "$EXPORT" --port "$NFS_PORT" --mnt-port "$MNT_PORT" "${gopts[@]}" 2>"$RUN/ganesha-config.log") ||
        die "scripts/ganesha.sh config failed: $(tail -n 3 "$RUN/ganesha-config.log")"
    if [ -n "$SCRATCH" ]; then
        # The scratch export: the same EXPORT block, another id and path.
        awk -v d="$SCRATCH" '
            /^EXPORT \{/ { on = 1 }
            on { b = b $0 "\n" }
            on && /^}/ { on = 0 }
            END {
                sub(/Export_Id = [0-9]+;/, "Export_Id = 78;", b)
                gsub(/"[^"]*";/, "\"" d "\";", b)
                printf "%s", b
            }' "$GANESHA_CONF" >"$RUN/ganesha-scratch.conf"
        grep -q 'Export_Id = 78' "$RUN/ganesha-scratch.conf" || die "no scratch export for ganesha"
        cat "$RUN/ganesha-scratch.conf" >>"$GANESHA_CONF"
    fi
fi
{
    echo "SERVER_IP=$SERVER_IP"
    echo "NFS_PORT=$NFS_PORT"
    echo "MNT_PORT=$MNT_PORT"
    echo "EXPORT=$GUEST_EXPORT"
    echo "SERVER_KIND=$SERVER"
    echo "VERS=$VERS"
    echo "BACKEND=$KC_BACKEND"
    echo "GRACE_SECS=${KC_GRACE:-15}" # rnfsd's nlm_grace_secs, also NFSv4's grace (ns.sh)
    echo "PJD_PATTERNS='${PJD_PATTERNS:-}'"
    echo "TAR_FILES=${TAR_FILES:-3000}"
    echo "FSX_OPS=${FSX_OPS:-10000}"
    echo "REVAL_FILES=${REVAL_FILES:-1000}"
    echo "DELEGATIONS=${KC_DELEGATIONS:-}"
    echo "WORKLOADS='${WORKLOADS[*]}'"
    echo "CTHON_GROUPS='${CTHON_GROUPS:-basic general special lock}'"
    echo "XFSTESTS='${XFSTESTS:-}'"
    echo "XFSTESTS_GROUP='${XFSTESTS_GROUP:-}'"
    echo "XFSTESTS_DEADLINE=$((${LIMIT[xfstests]} - 60))"
    echo "XFSTESTS_TEST_LIMIT=${XFSTESTS_TEST_LIMIT:-180}"
    echo "SCRATCH_EXPORT=$GUEST_SCRATCH"
    # failover: the floating address (routed to with tap; passt proxies the
    # guest's connections to it; slirp: a guestfwd address forwarded to it)
    # and the export. NET: the reclaim check waits for the server's own
    # SM_NOTIFY only where it reaches the guest (tap).
    if [ "$NET" = slirp ]; then echo "FO_ADDR=10.0.2.101"; else echo "FO_ADDR=10.77.0.100"; fi
    echo "NET=$NET"
    echo "FO_EXPORT=/ceph"
    echo "FO_TAR_FILES=${FO_TAR_FILES:-1000}"
    echo "FO_FSX_OPS=${FO_FSX_OPS:-5000}"
    for w in "${WORKLOADS[@]}"; do echo "LIMIT_$w=${LIMIT[$w]:-300}"; done
} >"$RUN/share/params"
: >"$RUN/share/results.txt"

# ---- boot: server + guest in a private network, mount and pid namespace ---
say "booting guest ($ACCEL, kernel $KVER, server $SERVER, NFS vers $VERS, backend $KC_BACKEND, workloads: ${WORKLOADS[*]})"
NS_PID=
cleanup() {
    if [ -n "$NS_PID" ] && kill -0 "$NS_PID" 2>/dev/null; then
        # SIGTERM lets ns.sh stop qemu and the server; the pid namespace
        # guarantees nothing outlives it.
        kill -TERM "$NS_PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$NS_PID" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$NS_PID" 2>/dev/null
    fi
    unmount_export
}
trap cleanup EXIT
trap 'exit 143' TERM INT
KC_WORKLOADS="${WORKLOADS[*]}"
export FO_EVICT=${FO_EVICT:-1} FO_CONTROL=${FO_CONTROL:-}
export KC_DELEGATIONS=${KC_DELEGATIONS:-}
export SCRATCH KC_WORKLOADS KC_PCAP KC_NLM VERS RUN EXPORT NFS_PORT MNT_PORT SERVER ACCEL NET QEMU_TIMEOUT VMLINUZ INITRD RNFSD_BIN GANESHA_CONF NFS_WRITE
unshare --net --mount --pid --fork --mount-proc --kill-child \
    bash "$HERE/ns.sh" >"$RUN/ns.log" 2>&1 &
NS_PID=$!
wait "$NS_PID"
ns_rc=$?
NS_PID=
T1=$(date +%s)
say "guest finished (ns.sh exit $ns_rc) after $((T1 - T0))s"

# ---- tally ----------------------------------------------------------------
passed=0
failed=0
notrun=0
emit() { # emit PASS|FAIL NAME [WHY]
    if [ "$1" = PASS ]; then
        passed=$((passed + 1)); echo "PASS $2"
    else
        failed=$((failed + 1)); echo "FAIL $2${3:+: $3}"
    fi
}
declare -A done_w=()
while IFS= read -r line; do
    case $line in
    "PASS "*) emit PASS "${line#PASS }" ;;
    "FAIL "*) n=${line#FAIL }; emit FAIL "${n%%: *}" "${n#*: }" ;;
    "HOSTCHECK "*)
        read -r _ name rel want <<<"$line"
        got=$(sha256sum "$EXPORT/$rel" 2>/dev/null | cut -d' ' -f1)
        if [ "$got" = "$want" ]; then emit PASS "$name"; else emit FAIL "$name" "server disk has ${got:-no file}, client wrote $want"; fi ;;
    "HOSTXATTR "*)
        read -r _ name rel xname want <<<"$line"
        if getfattr --absolute-names -n "$xname" "$EXPORT/$rel" >/dev/null 2>&1; then
            got=$(getfattr --absolute-names --only-values -n "$xname" "$EXPORT/$rel" | sha256sum | cut -d' ' -f1)
        else
            got=absent
        fi
        if [ "$got" = "$want" ]; then emit PASS "$name"; else emit FAIL "$name" "server file's $xname is $got, want $want"; fi ;;
    "DONE "*)
        read -r _ w rc secs <<<"$line"
        done_w[$w]=1
        echo "# workload $w finished in ${secs}s (exit $rc)" ;;
    "INFO "*) echo "# ${line#INFO }" ;;
    "NOTRUN "*) notrun=$((notrun + 1)); echo "$line" ;; # xfstests' own skips, with its reason
    esac
done <"$RUN/share/results.txt"
for w in "${WORKLOADS[@]}"; do
    [ -n "${done_w[$w]:-}" ] || emit FAIL "$w/completed" "the guest never finished it (hang, crash or qemu timeout; see $RUN/console.log)"
done
if [ "$failed" -gt 0 ] || [ "$ns_rc" -ne 0 ]; then
    say "logs: $RUN/console.log $RUN/server.log $RUN/ns.log"
    tail -n 15 "$RUN/ns.log" >&2
    KC_KEEP=1
fi
[ "$ns_rc" -eq 0 ] || emit FAIL harness/namespace "ns.sh exited $ns_rc"
if [ -z "${KC_KEEP:-}" ]; then
    unmount_export
    rm -rf "$RUN/export"
fi
echo "# total $((T1 - T0))s"
[ "$notrun" -eq 0 ] || echo "# $notrun not run (NOTRUN lines: the suite's reasons)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
