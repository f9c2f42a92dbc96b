# revalidate: what reopening an unchanged tree costs on the wire. The host
# makes REVAL_FILES (1,000) small files of known content (ns.sh's mktree
# request, so the guest has none of them cached); the guest mounts, then
# opens, reads (checking the content) and closes every file, by its name
# after a chdir into its directory, in one python3 process: with python's
# open() (an fstat too), again with os.open and os.read (no fstat), and
# once more with open(). Per pass an INFO line gives the NFS calls the
# client sent, per operation, from /proc/self/mountstats (the client's
# own counts: the same figure against any server). Close-to-open makes every open revalidate the file (an
# OPEN, with a GETATTR in it) unless the client holds a read delegation
# for it. With the server's delegations on (run.sh's KC_DELEGATIONS=on,
# rnfsd only) passes 2 and 3 must send at most one call per file, plus
# one per directory of the tree and its root (a directory has no
# delegation: the chdir revalidates it). The one call per file that stays
# in pass 3 is a GETATTR for atime: the client marks atime stale after
# every READ (nfs4_read_done's nfs_invalidate_atime; pass 1's) and the
# fstat asks for it; without a delegation OPEN's own GETATTR refreshes it.
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
D=$M/reval
N=${REVAL_FILES:-1000}
PY=/usr/bin/python3

# counts DIR: "OP COUNT" lines, the client's calls so far on the mount at
# DIR (mountstats' per-op section: the op name and its call count).
counts() {
    awk -v m="$1" '
        $1 == "device" { on = ($5 == m) }
        on && $1 == "per-op" { ops = 1; next }
        on && ops && /^[[:space:]]+[A-Z_]+:/ { sub(/:$/, "", $1); print $1, $2 }' /proc/self/mountstats
}

# delta BEFORE AFTER: the calls between two `counts` snapshots, as
# "TOTAL OP=N OP=N ..." (operations with none left out, most first).
delta() {
    awk 'NR == FNR { b[$1] = $2; next }
        { d = $2 - b[$1]; if (d > 0) { t += d; s[$1] = d } }
        END {
            printf "%d", t
            for (;;) { best = ""; for (o in s) if (best == "" || s[o] > s[best]) best = o
                if (best == "") break; printf " %s=%d", best, s[best]; delete s[best] }
            print ""
        }' "$1" "$2"
}

t_mount() {
    local a
    a=$(host_request mktree reval "$N") || { echo "host: $a"; exit 1; }
    nfs_mount $M
    mount_line $M
    echo "INFO revalidate: vers=$(mount_vers $M), server $SERVER_KIND, delegations ${DELEGATIONS:-as the server defaults}" >>"$RESULTS"
}

# read_pass K [raw]: opens, reads and closes every file once; content
# checked. By python's open() (which does an fstat, as cat or cp do), or
# raw: os.open, os.read, os.close (no fstat).
read_pass() {
    counts $M >/tmp/reval.before
    $PY - "$D" "$N" "${2:-}" <<'PY'
import os, sys
d, n, raw = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "raw"
bad = 0
for i in range(n):
    # Into each directory once, then each file by its name there (as
    # tar or make do with openat): the directory is looked up once.
    if i % 100 == 0:
        os.chdir("%s/d%02d" % (d, i // 100))
    want = b"revalidate file %d\n" % i * 16
    if raw:
        fd = os.open("f%04d" % i, os.O_RDONLY)
        got = os.read(fd, 2 * len(want))
        os.close(fd)
    else:
        with open("f%04d" % i, "rb") as f:
            got = f.read()
    if got != want:
        bad += 1
os.chdir("/")
if bad:
    sys.exit("%d of %d files read back wrong" % (bad, n))
PY
    counts $M >/tmp/reval.after
    local r total
    r=$(delta /tmp/reval.before /tmp/reval.after)
    total=${r%% *}
    echo "INFO revalidate: pass $1${2:+ ($2)}: $N files, $total calls ($(awk -v t="$total" -v n="$N" 'BEGIN { printf "%.2f", t / n }') per file):${r#"$total"}" >>"$RESULTS"
    echo "$total" >/tmp/reval.pass$1
}

# With read delegations reopening a file costs no OPEN: at most one call
# a file, and one a directory (the 100-file ones, the tree's own and the
# mount's root), in passes 2 and 3.
t_bound() {
    local k got dirs
    dirs=$(((N + 99) / 100 + 2))
    for k in 2 3; do
        got=$(cat /tmp/reval.pass$k)
        [ "$got" -le $((N + dirs)) ] || { echo "pass $k: $got calls for $N files in $dirs directories"; exit 1; }
    done
}

check revalidate/mount t_mount
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
check revalidate/first-pass read_pass 1
# Reopened and read with no fstat, then with one (python's open(), as
# cat or cp do): what each costs.
check revalidate/second-pass-no-fstat read_pass 2 raw
check revalidate/third-pass read_pass 3
if [ "${DELEGATIONS:-}" = on ] && [ "$SERVER_KIND" = rnfsd ] && [ -s /tmp/reval.pass2 ] && [ -s /tmp/reval.pass3 ]; then
    check revalidate/reopen-at-most-one-call-per-file-or-directory t_bound
fi
rm -rf "${D:?}"
check revalidate/umount umount $M
exit 0
