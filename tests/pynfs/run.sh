#!/usr/bin/env bash
# The pynfs NFSv4.1 server tests (the Linux NFS community's conformance
# suite) against rnfsd, nfs-ganesha, or a server already running, judged
# against a committed list of expected failures. See docs/pynfs.md.
#
#   tests/pynfs/run.sh --server rnfsd|ganesha [--minorversion N]
#                      [--timeout SECS] [--expected FILE] [TESTS...]
#   tests/pynfs/run.sh --target HOST:PORT/PATH [--minorversion N]
#                      [--timeout SECS] [--expected FILE] [TESTS...]
#
# --server rnfsd: $RNFSD_BIN (default target/debug/rnfsd, built if missing)
# serves a fresh directory on 127.0.0.1 (a free port), NFSv4 on
# (`[server] nfs4 = true`, plus the lines in $PYNFS_RNFSD_TOML), and stops
# after the run. --server ganesha: scripts/ganesha.sh --nfs4 in its own
# network namespace (root). --target: a server you started; it must serve
# PATH to AUTH_SYS root from any port; the suite makes PATH/tree.
# TESTS: pynfs codes or flags (default `all`; `noCODE` leaves one out).
# --minorversion: default 1 (2 runs the NFSv4.2 tests too).
# --timeout: bound on the pynfs run, default 1200 s; on expiry pynfs is
# interrupted and its unfinished tests count as failures.
# --expected: default tests/pynfs/expected/SERVER-4.MINOR (none for --target).
#
# Prints pynfs's counts, every warning and every failure against the list,
# and closes with "pynfs: N passed, M failed" (N: tests whose outcome agrees
# with the list, M: those that do not); exits 0 only when M is 0. Results
# (pynfs.log, results.json, outcomes.tsv, summary.txt, the server's log)
# stay in $PYNFS_WORK/results/LABEL (default target/pynfs).
#
# Environment: PYNFS_SRC (the suite; default the shared suites folder beside
# the checkout: ../shared/suites/pynfs, or ../../shared/suites/pynfs for a
# worktree in a folder of worktrees), PYNFS_WORK, RNFSD_BIN,
# PYNFS_RNFSD_TOML, PYNFS_RNFSD_PATH (the path pynfs asks rnfsd for;
# default the export's directory). Without the suite it skips (exit 0),
# except under CI.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

# The config lines that turn rnfsd's NFSv4.1 on (the [server] table);
# delegations are on by default.
RNFSD_NFS4_TOML=$'nfs4 = true'
# Seconds to wait for a started server to answer.
START_WAIT_SECS=30

SERVER=
TARGET=
MINOR=1
TIMEOUT=1200
EXPECTED=
TESTS=()
while [ $# -gt 0 ]; do
    case $1 in
    --server) SERVER=${2:?}; shift 2 ;;
    --target) TARGET=${2:?}; shift 2 ;;
    --minorversion) MINOR=${2:?}; shift 2 ;;
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    --expected) EXPECTED=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) TESTS+=("$1"); shift ;;
    esac
done
[ ${#TESTS[@]} -gt 0 ] || TESTS=(all)
if [ -n "$TARGET" ]; then
    [ -z "$SERVER" ] || { echo "run.sh: --server or --target, not both" >&2; exit 2; }
    SERVER=target
fi
case $SERVER in rnfsd | ganesha | target) ;; *) echo "run.sh: --server rnfsd|ganesha or --target HOST:PORT/PATH" >&2; exit 2 ;; esac
case $MINOR in 1 | 2) ;; *) echo "run.sh: --minorversion 1|2" >&2; exit 2 ;; esac
[[ $TIMEOUT =~ ^[0-9]+$ ]] || { echo "run.sh: --timeout SECS" >&2; exit 2; }
if [ -z "$EXPECTED" ] && [ "$SERVER" != target ]; then
    EXPECTED=$HERE/expected/$SERVER-4.$MINOR
fi
[ -z "$EXPECTED" ] || [ -f "$EXPECTED" ] || { echo "run.sh: no expected-failures list $EXPECTED" >&2; exit 2; }
[ -z "$EXPECTED" ] || EXPECTED=$(cd "$(dirname "$EXPECTED")" && pwd)/$(basename "$EXPECTED")

say() { echo "[pynfs $(date +%T)] $*" >&2; }
die() { say "error: $*"; echo "pynfs: 0 passed, 1 failed"; exit 1; }

# ---- the suite ------------------------------------------------------------
SRC=${PYNFS_SRC:-}
if [ -z "$SRC" ]; then
    for d in "$REPO/../shared/suites/pynfs" "$REPO/../../shared/suites/pynfs"; do
        [ -f "$d/nfs4.1/testserver.py" ] && { SRC=$d; break; }
    done
fi
if [ -z "$SRC" ] || [ ! -f "$SRC/nfs4.1/testserver.py" ]; then
    why="the pynfs suite is not there (shared/suites/pynfs beside the checkout, or PYNFS_SRC)"
    [ -z "${CI:-}" ] || die "$why"
    echo "SKIP: pynfs ($why)"
    exit 0
fi
SRC=$(cd "$SRC" && pwd)
[ "$SERVER" != ganesha ] || [ "$(id -u)" = 0 ] || die "--server ganesha needs root (scripts/ganesha.sh: namespaces)"

WORK=${PYNFS_WORK:-$REPO/target/pynfs}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

# Debian's python3 first: another python (pyenv, a venv) may lack ply.
PY=/usr/bin/python3
need=()
[ -x "$PY" ] || need+=(python3)
"$PY" -c 'import ply' 2>/dev/null || need+=(python3-ply)
# Imported by pynfs's RPC layer (RPCSEC_GSS); the runs here use AUTH_SYS.
"$PY" -c 'import gssapi' 2>/dev/null || need+=(python3-gssapi)
"$PY" -c 'import setuptools' 2>/dev/null || need+=(python3-setuptools)
# pynfs takes xdrlib3 when present, else the standard library's xdrlib
# (Python < 3.13, as Debian 12's 3.11); a newer python needs Debian's
# python3-standard-xdrlib.
"$PY" -c 'import xdrlib3' 2>/dev/null || "$PY" -W ignore -c 'import xdrlib' 2>/dev/null ||
    need+=(python3-standard-xdrlib)
if [ ${#need[@]} -gt 0 ]; then
    SUDO=
    [ "$(id -u)" = 0 ] || SUDO="sudo -n"
    say "apt-get install ${need[*]}"
    # One at a time: the guest stage may be installing meanwhile.
    { $SUDO "$REPO/scripts/apt-get-locked" update -qq &&
        DEBIAN_FRONTEND=noninteractive $SUDO "$REPO/scripts/apt-get-locked" install -y -qq \
        --no-install-recommends "${need[@]}"; } >"$WORK/apt.log" 2>&1 ||
        die "apt-get install ${need[*]} failed (see $WORK/apt.log)"
fi

# Built once per content of the suite: setup.py writes generated modules
# into the tree, so it is copied first (the shared folder is read-only).
stamp=$(cd "$SRC" && find . -type f ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
BUILD=$WORK/build-$stamp
if [ ! -f "$BUILD/.built" ]; then
    say "building pynfs from $SRC in $BUILD"
    rm -rf "$WORK"/build-* && mkdir -p "$BUILD"
    cp -R "$SRC/." "$BUILD/" && chmod -R u+w "$BUILD" || die "copying $SRC failed"
    # Only what the 4.1 server tests import (the top setup.py also builds
    # nfs4.0, whose C parts need swig and krb5 headers).
    for d in xdr rpc nfs4.1; do
        (cd "$BUILD/$d" && PATH=/usr/bin:$PATH "$PY" setup.py build) >"$BUILD/build-$d.log" 2>&1 ||
            die "pynfs setup.py build in $d failed (see $BUILD/build-$d.log)"
    done
    touch "$BUILD/.built"
fi

LABEL=$SERVER-4.$MINOR
OUT=$WORK/results/$LABEL
rm -rf "$OUT" && mkdir -p "$OUT"
RUN=$WORK/run-$LABEL
rm -rf "$RUN" && mkdir -p "$RUN"

# pynfs_cmd URL: the suite's command line, bounded; SIGINT lets it write
# its results (the pickle verdict.py reads) and mark unfinished tests.
pynfs_cmd() {
    PYNFS_CMD=(env PATH="/usr/bin:$PATH" timeout -s INT -k 30 "$TIMEOUT"
        "$PY" testserver.py "$1" --minorversion "$MINOR" --maketree
        --json="$OUT/results.json" --outfile "$OUT/results.pickle" "${TESTS[@]}")
}

SRV_PID=
stop_rnfsd() {
    [ -n "$SRV_PID" ] || return 0
    kill -TERM "$SRV_PID" 2>/dev/null
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$SRV_PID" 2>/dev/null
    wait "$SRV_PID" 2>/dev/null
    SRV_PID=
}
trap stop_rnfsd EXIT
trap 'exit 143' TERM INT

T0=$(date +%s)
rc=0
case $SERVER in
rnfsd)
    RNFSD_BIN=${RNFSD_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/debug/rnfsd}
    if [ ! -x "$RNFSD_BIN" ]; then
        say "building rnfsd"
        (cd "$REPO" && cargo build -q -p rnfsd) || die "cargo build failed"
    fi
    mkdir -p "$RUN/export" "$RUN/state" && chmod 1777 "$RUN/export"
    EXPORT=$(cd "$RUN/export" && pwd -P)
    printf '[server]\n%s\n%s\n' "$RNFSD_NFS4_TOML" "${PYNFS_RNFSD_TOML:-}" >"$RUN/rnfsd.toml"
    # --insecure: pynfs calls from an ordinary port; --no-root-squash: it
    # makes and removes its tree as AUTH_SYS root.
    "$RNFSD_BIN" serve "$EXPORT" --insecure --no-root-squash --config "$RUN/rnfsd.toml" \
        --listen 127.0.0.1:0 --port-file "$RUN/port" --state-dir "$RUN/state" --no-rpcbind \
        >"$OUT/server.log" 2>&1 &
    SRV_PID=$!
    port=
    for ((i = 0; i < START_WAIT_SECS * 10; i++)); do
        port=$(cat "$RUN/port" 2>/dev/null) && [[ $port =~ ^[0-9]+$ ]] && break
        port=
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        tail -n 20 "$OUT/server.log" >&2
        die "rnfsd did not start (log: $OUT/server.log)"
    fi
    say "rnfsd pid $SRV_PID on 127.0.0.1:$port, export $EXPORT"
    pynfs_cmd "127.0.0.1:$port${PYNFS_RNFSD_PATH:-$EXPORT}"
    (cd "$BUILD/nfs4.1" && "${PYNFS_CMD[@]}") >"$OUT/pynfs.log" 2>&1 || rc=$?
    if ! kill -0 "$SRV_PID" 2>/dev/null; then
        wait "$SRV_PID"
        srv_rc=$?
        SRV_PID=
        tail -n 20 "$OUT/server.log" >&2
        die "rnfsd exited during the run (status $srv_rc; log: $OUT/server.log)"
    fi
    stop_rnfsd
    ;;
ganesha)
    mkdir -p "$RUN/export" && chmod 1777 "$RUN/export"
    EXPORT=$(cd "$RUN/export" && pwd -P)
    say "nfs-ganesha (scripts/ganesha.sh --nfs4), export $EXPORT"
    pynfs_cmd "127.0.0.1:2049$EXPORT"
    # pynfs runs inside ganesha's namespace, where 127.0.0.1:2049 is ganesha.
    GANESHA_RUN=$RUN/ganesha "$REPO/scripts/ganesha.sh" exec --export "$EXPORT" --nfs4 -- \
        bash -c 'cd "$0" && exec "$@"' "$BUILD/nfs4.1" "${PYNFS_CMD[@]}" >"$OUT/pynfs.log" 2>&1 || rc=$?
    cp "$RUN/ganesha/ganesha.log" "$OUT/server.log" 2>/dev/null
    ;;
target)
    say "server $TARGET"
    pynfs_cmd "$TARGET"
    (cd "$BUILD/nfs4.1" && "${PYNFS_CMD[@]}") >"$OUT/pynfs.log" 2>&1 || rc=$?
    ;;
esac
SECS=$(($(date +%s) - T0))
say "pynfs finished after ${SECS}s (exit $rc; log: $OUT/pynfs.log)"
[ "$rc" != 124 ] || say "the run reached --timeout ${TIMEOUT}s and was interrupted"
if [ ! -s "$OUT/results.pickle" ]; then
    tail -n 30 "$OUT/pynfs.log" >&2
    die "pynfs wrote no results (exit $rc)"
fi
exp=()
[ -z "$EXPECTED" ] || exp=(--expected "$EXPECTED")
(cd "$BUILD/nfs4.1" && "$PY" -W ignore "$HERE/verdict.py" --results "$OUT/results.pickle" \
    "${exp[@]}" --label "$LABEL" --out "$OUT" --seconds "$SECS") | tee "$OUT/verdict.txt"
st=${PIPESTATUS[0]}
[ "$st" = 0 ] || say "results: $OUT"
exit "$st"
