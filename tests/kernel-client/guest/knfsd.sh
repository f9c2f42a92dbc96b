# --server knfsd-guest: the guest kernel's own nfsd serves a tmpfs at
# $EXPORT and the workloads mount it over loopback ($SERVER_IP 127.0.0.1),
# for comparison with rnfsd and ganesha on the same client. Sourced by
# main.sh before the workloads. nfsd's modules are in the initramfs
# (/kmod/order.nfsd); rpc.nfsd, rpc.mountd and exportfs come from Debian's
# nfs-kernel-server package, unpacked by run.sh into /share/knfsd.
# shellcheck shell=bash

# Seconds of NFSv4 and NLM grace after nfsd starts (the kernel's
# minimum for NFSv4; nothing to reclaim, and no client tracking upcall).
KNFSD_GRACE_SECS=10

knfsd_start() {
    local m
    while read -r m; do
        insmod "/kmod/$m" || { echo "insmod $m failed"; return 1; }
    done </kmod/order.nfsd
    mkdir -p "$EXPORT" /var/lib/nfs/v4recovery /proc/fs/nfsd
    # tmpfs has no UUID: the export needs an fsid. Not fsid=0, so the
    # path is the same at NFSv3 and NFSv4 (mountd makes the pseudo root).
    mount -t tmpfs -o size=600m,mode=0777 knfsd-export "$EXPORT"
    mount -t nfsd nfsd /proc/fs/nfsd
    echo "$EXPORT *(rw,insecure,no_root_squash,no_subtree_check,sync,fsid=1)" >/etc/exports
    # xfstests' scratch export: a tmpfs of its own (fsid=2).
    if [ -n "${SCRATCH_EXPORT:-}" ]; then
        mkdir -p "$SCRATCH_EXPORT"
        mount -t tmpfs -o size=600m,mode=0777 knfsd-scratch "$SCRATCH_EXPORT"
        echo "$SCRATCH_EXPORT *(rw,insecure,no_root_squash,no_subtree_check,sync,fsid=2)" >>/etc/exports
    fi
    nlm_start_daemons
    nlm_daemons_ok
    /share/knfsd/exportfs -ra
    /share/knfsd/rpc.mountd -F -p "$MNT_PORT" >/tmp/mountd.log 2>&1 &
    echo "$KNFSD_GRACE_SECS" >/proc/fs/nfsd/nfsv4gracetime
    echo "$KNFSD_GRACE_SECS" >/proc/sys/fs/nfs/nlm_grace_period
    /share/knfsd/rpc.nfsd -p "$NFS_PORT" 8
    # The grace period both start with: wait it out, so no workload's
    # first OPEN or LOCK meets NFS4ERR_GRACE or NLM's grace refusal.
    sleep $((KNFSD_GRACE_SECS + 1))
    cat /proc/fs/nfsd/versions
    rpcinfo -p 127.0.0.1
}
