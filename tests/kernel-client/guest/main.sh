# Guest driver: runs each workload named in /share/params, each under its own
# time limit, and marks it done so the host can tell a hang from a pass.
# shellcheck shell=bash
. /share/guest/lib.sh
log "kernel $(uname -r); NFS vers $VERS; workloads: $WORKLOADS"
if [ "$SERVER_KIND" = knfsd-guest ]; then
    . /share/guest/knfsd.sh
    check knfsd/start knfsd_start
    if [ "$CHECK_RC" -ne 0 ]; then
        for w in $WORKLOADS; do echo "DONE $w 1 0" >>"$RESULTS"; done
        exit 1
    fi
fi
for w in $WORKLOADS; do
    limit_var="LIMIT_$w"
    limit=${!limit_var:-300}
    log "workload $w (limit ${limit}s)"
    start=$(date +%s)
    timeout -k 5 "$limit" bash /share/guest/"$w".sh
    rc=$?
    [ $rc -eq 124 ] && fail "$w/time-limit" "workload exceeded ${limit}s"
    echo "DONE $w $rc $(($(date +%s) - start))" >>"$RESULTS"
    # Leave no mount behind for the next workload.
    awk '$3 == "nfs" || $3 == "nfs4" { print $2 }' /proc/mounts |
        sort -r | while read -r m; do umount -f -l "$m"; done
done
log "all workloads done"
