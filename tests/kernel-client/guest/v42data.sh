# v42data: NFSv4.2's data operations (RFC 7862) through the kernel client
# (run.sh --vers 4.2, or auto, where the client must settle on 4.2): cp of
# a large file by COPY (the server's own counters say COPY ran, and how:
# one asynchronous COPY ended by CB_OFFLOAD, or one synchronous call per
# nfs4_copy_sync_max), checked on the server's disk; a hole punched with fallocate -p
# (DEALLOCATE) seen in the blocks and as zeros; SEEK_DATA and SEEK_HOLE
# (SEEK) over the punched file; fallocate (ALLOCATE) holding blocks.
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
D=$M/v42
# The copied file's size: made on the host (the guest would take minutes
# to write it through TCG; by COPY no data crosses, so 1 GiB is quick).
SIZE_MIB=${V42_SIZE_MIB:-1024}
# The server's nfs4_copy_sync_max (its default, 32 MiB).
SYNC_MIB=${V42_SYNC_MIB:-32}
PY=/usr/bin/python3

# opcalls OP: the server's count of NFSv4 operation OP so far (rnfsd only).
opcalls() {
    local a
    a=$(host_request opcalls "$1") || { echo "opcalls $1: $a" >&2; return 1; }
    echo "${a#ok }"
}

t_mount() {
    # auto: mount.nfs must settle on 4.2 with a server that serves it.
    case $VERS in 4.2 | auto) ;; *) echo "v42data needs --vers 4.2 or auto (got $VERS)"; exit 1 ;; esac
    nfs_mount $M
    eq vers "$(mount_vers $M)" 4.2
    mkdir -p $D
}

t_copy() {
    local sum before after n sync how t0 t1
    sum=$(host_request mkrand v42/src "$SIZE_MIB") || { echo "host: $sum"; exit 1; }
    sum=${sum#ok }
    before=$(opcalls COPY)
    t0=$(date +%s.%N)
    cp $D/src $D/dst
    t1=$(date +%s.%N)
    after=$(opcalls COPY)
    n=$((after - before))
    [ "$n" -ge 1 ] || { echo "cp sent no COPY (the client copied by READ and WRITE)"; exit 1; }
    # Past the synchronous bound: one asynchronous COPY (CB_OFFLOAD ends
    # it), or one short synchronous COPY per bound; nothing else.
    sync=$(((SIZE_MIB + SYNC_MIB - 1) / SYNC_MIB))
    if [ "$n" = 1 ] && [ "$sync" -gt 1 ]; then how=asynchronous
    elif [ "$n" -ge "$sync" ]; then how=synchronous
    else echo "$n COPY calls for $SIZE_MIB MiB: neither one asynchronous nor $sync synchronous"; exit 1
    fi
    echo "INFO v42data: cp of $SIZE_MIB MiB sent $n COPY calls ($how) in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s" >>"$RESULTS"
    eq size "$(stat -c %s $D/dst)" $((SIZE_MIB << 20))
    # The last MiB through the client, all of it on the server's disk.
    dropcaches
    eq tail "$(tail -c 1048576 $D/dst | sha256sum)" "$(tail -c 1048576 $D/src | sha256sum)"
    hostcheck v42data/copy-on-server-disk v42/dst "$sum"
}

t_punch() {
    local b0 b1 before
    head -c 8388608 /dev/urandom >$D/p
    sync
    b0=$(stat -c %b $D/p)
    before=$(opcalls DEALLOCATE)
    fallocate -p -o 1048576 -l 4194304 $D/p
    [ "$(opcalls DEALLOCATE)" -gt "$before" ] || { echo "fallocate -p sent no DEALLOCATE"; exit 1; }
    dropcaches
    b1=$(stat -c %b $D/p)
    eq size "$(stat -c %s $D/p)" 8388608
    [ $(((b0 - b1) * 512)) -ge 4194304 ] || { echo "blocks $b0 -> $b1: the punch freed less than 4 MiB"; exit 1; }
    eq zeros "$(dd if=$D/p bs=1M skip=1 count=4 status=none | tr -d '\0' | wc -c)" 0
}

t_seek() {
    local before
    before=$(opcalls SEEK)
    $PY - $D/p <<'PYEOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
M = 1 << 20
def want(got, exp, what):
    if got != exp:
        sys.exit(f"{what}: got {got}, want {exp}")
want(os.lseek(fd, 0, os.SEEK_DATA), 0, "SEEK_DATA from 0")
want(os.lseek(fd, 0, os.SEEK_HOLE), M, "SEEK_HOLE from 0")
want(os.lseek(fd, M, os.SEEK_DATA), 5 * M, "SEEK_DATA from 1 MiB")
want(os.lseek(fd, 5 * M, os.SEEK_HOLE), 8 * M, "SEEK_HOLE from 5 MiB (end of file)")
try:
    os.lseek(fd, 8 * M, os.SEEK_DATA)
    sys.exit("SEEK_DATA at end of file succeeded")
except OSError as e:
    want(e.errno, errno.ENXIO, "SEEK_DATA at end of file")
PYEOF
    [ "$(opcalls SEEK)" -gt "$before" ] || { echo "lseek sent no SEEK"; exit 1; }
}

t_allocate() {
    local before
    : >$D/a
    before=$(opcalls ALLOCATE)
    fallocate -l 4194304 $D/a
    [ "$(opcalls ALLOCATE)" -gt "$before" ] || { echo "fallocate sent no ALLOCATE"; exit 1; }
    dropcaches
    eq size "$(stat -c %s $D/a)" 4194304
    [ $(($(stat -c %b $D/a) * 512)) -ge 4194304 ] || { echo "blocks $(stat -c %b $D/a): not held"; exit 1; }
}

check v42data/mount t_mount
[ "$CHECK_RC" = 0 ] || exit 1
check v42data/cp-by-copy t_copy
check v42data/fallocate-punch t_punch
check v42data/seek-hole-data t_seek
check v42data/fallocate-allocate t_allocate
umount $M
