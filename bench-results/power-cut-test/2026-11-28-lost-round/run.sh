#!/bin/bash
# usage: run.sh NAME FIRST ROUNDS [VAR=VAL ...]
name=$1 first=$2 rounds=$3; shift 3
cd /work/wt/powercut
log=/tmp/powercut-runs/$name-$first.log
{
  echo "# $(date -Is) first=$first rounds=$rounds env: RNFSD_CRASH_FS=ext4 RNFSD_CRASH_MOMENT_MS=500-3000 RNFSD_CRASH_KEEP_GOING=1 $*"
  echo "# commit $(git rev-parse --short HEAD); $(uname -r); loadavg $(cat /proc/loadavg)"
  env RNFSD_CRASH_FS=ext4 RNFSD_CRASH_MOMENT_MS=500-3000 RNFSD_CRASH_KEEP_GOING=1 RNFSD_CRASH_FIRST=$first RNFSD_CRASH_ROUNDS=$rounds "$@" \
    cargo test -p rnfsd --test it crash::acknowledged -- --nocapture
  echo "# exit $? $(date -Is) loadavg $(cat /proc/loadavg)"
} > $log 2>&1
