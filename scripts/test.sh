#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine: installs what the
# tests need, then formatting, lints, every cargo test, and the Linux kernel
# NFS client in a qemu guest (smoke, pjdfstest, tar, restart). `.ci/run`
# runs this.
#
# RNFSD_SKIP_KERNEL_CLIENT=1 skips the guest stage (it needs root, about
# 8 minutes, and downloads a kernel package the first time);
# RNFSD_SKIP_FUZZ=1 skips the short fuzz run (its first build takes minutes);
# RNFSD_SKIP_PACKAGE=1 skips the Debian package test (root; a release build
# and cargo-deb, installed when missing).
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
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The interop tests need libnfs's tools; under CI their absence is a failure,
# not a skip.
export RNFSD_REQUIRE_LIBNFS="${CI:-}"
cargo test --workspace

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
    # The debug server cargo test just built: correctness, not speed, and it
    # saves a release build.
    RNFSD_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/rnfsd" \
        tests/kernel-client/run.sh smoke pjdfstest tar restart locks
fi
