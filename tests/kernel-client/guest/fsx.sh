# fsx: the crates.io fsx (file system exerciser) on one file in the mount;
# every read is checked against fsx's model of the file. Two runs of
# FSX_OPS operations (default 10,000), fixed seeds so a failure reproduces:
# plain (read/write/truncate/fsync via the fd) and mmap (adds mapread,
# mapwrite, msync invalidate). Not in the default set (run.sh fsx).
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
N=${FSX_OPS:-10000}

t_fsx() { # t_fsx NAME SEED
    local out=/share/fsx-$1.out start
    mkdir -p /tmp/fsx-$1
    start=$(date +%s)
    /share/bin/fsx -N "$N" -S "$2" -f /share/fsx-$1.toml -P /tmp/fsx-$1 $M/fsx/$1 >"$out" 2>&1 ||
        { tail -n 5 "$out"; exit 1; }
    grep -q 'All operations completed A-OK' "$out" || { echo "no A-OK line"; tail -n 3 "$out"; exit 1; }
    echo "INFO fsx $1: $N ops in $(($(date +%s) - start))s" >>"$RESULTS"
}

check fsx/mount nfs_mount $M
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
mkdir -p $M/fsx
check "fsx/plain-${N}-ops" t_fsx plain 1
check "fsx/mmap-${N}-ops" t_fsx mmap 2
rm -rf $M/fsx
umount $M
exit 0
