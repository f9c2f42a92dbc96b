#!/usr/bin/env bash
# Builds the Debian package: release build, man pages and completions from
# the binary (`rnfsd generate-docs`), then `cargo deb --no-build`. Prints
# the .deb's path on the last line. Installs cargo-deb when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo deb --version >/dev/null 2>&1; then
    echo "package.sh: installing cargo-deb" >&2
    cargo install --locked cargo-deb >&2
fi

target="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -p rnfsd --bin rnfsd >&2
docs="$target/release/rnfsd-docs"
rm -rf "$docs"
"$target/release/rnfsd" generate-docs --out "$docs" >/dev/null
# cargo-deb gzips man pages only when they are not under target/: do it here
# (-n: no timestamp, so the package is reproducible).
gzip -9n "$docs"/man/*
# --strip: the release profile keeps debug info, which cargo-deb would keep.
# cargo deb prints the .deb's path on stdout, its progress on stderr.
deb=$(cargo deb -p rnfsd --no-build --strip | tail -n 1)
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
    echo "package.sh: cargo deb printed no .deb path" >&2
    exit 1
fi
echo "$deb"
