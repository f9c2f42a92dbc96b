# load: third-party load generators from the host's /usr (Debian packages
# fsmark, dbench, postmark, bonnie++; run.sh installs them when this
# workload is asked for). Each is a check that passes when the tool exits 0
# and reports no error. Sizes are small: the guest runs under TCG. Not in the
# default set (run.sh load).
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
L=$M/load

# timed NAME CMD...: runs CMD, output in /share/load-NAME.out, INFO line
# with the time; fails on a non-zero exit or an error line.
timed() {
    local name=$1 out=/share/load-$1.out start rc
    shift
    start=$(date +%s)
    "$@" >"$out" 2>&1
    rc=$?
    echo "INFO load $name: $(($(date +%s) - start))s (exit $rc)" >>"$RESULTS"
    [ $rc -eq 0 ] || { tail -n 5 "$out"; exit 1; }
    # dbench's "failed to create barrier semaphore" (no SysV IPC; it falls
    # back to a pipe) is not about the file system.
    if grep -Ei '(^|[^_a-z])(error|failed|fatal)' "$out" | grep -v 'barrier semaphore' | head -n 3 | grep .; then
        exit 1
    fi
}

t_fsmark() { # 2 threads x 200 files of 16 KiB, fsync before close
    mkdir -p $L/fsmark
    timed fsmark fs_mark -d $L/fsmark -n 200 -s 16384 -t 2 -L 1 -S 1
    rm -rf $L/fsmark
}

t_dbench() { # 2 clients, 20 s of the NetBench-like client.txt load
    mkdir -p $L/dbench
    timed dbench dbench -t 20 -D $L/dbench -c /usr/share/dbench/client.txt 2
    rm -rf $L/dbench
}

t_postmark() { # 200 files of 0.5-10 KiB, 1000 transactions
    mkdir -p $L/postmark
    cat >/tmp/postmark.cfg <<EOC
set location $L/postmark
set number 200
set transactions 1000
set size 500 10000
run
quit
EOC
    timed postmark postmark /tmp/postmark.cfg
    rm -rf $L/postmark
}

t_bonnie() { # no large-file phase (-s 0); 1024 small files (-n 1)
    mkdir -p $L/bonnie
    timed bonnie bonnie++ -d $L/bonnie -s 0 -n 1 -u root -q
    rm -rf $L/bonnie
}

check load/mount nfs_mount $M
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
mkdir -p $L
check load/fsmark t_fsmark
check load/dbench t_dbench
check load/postmark t_postmark
check load/bonnie++ t_bonnie
rm -rf $L
umount $M
exit 0
