#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine: installs what the
# tests need, then formatting, lints and every test. `.ci/run` runs this.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v nfs-ls >/dev/null 2>&1 || need_apt+=(libnfs-utils)
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
