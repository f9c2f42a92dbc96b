# Ceph on the host side of the harness, sourced by ns.sh (inside run.sh's
# private namespaces) when a run needs a cluster: the failover workload
# (failover-host.sh) or KC_BACKEND=cephfs (the ordinary workloads against a
# CephFS export instead of a local directory).
#
# kc_ceph_up DIR ADDR LOG: a single-node cluster (tests/ceph/cluster.sh)
# in DIR, every daemon bound to ADDR; its output in LOG.
# kc_ceph_down DIR KEEP LOG: its logs copied to KEEP, the daemons stopped,
# DIR removed.
#
# KC_BACKEND=cephfs (kc_cephfs_*): a cluster on 127.0.0.1 in RUN/ceph; the
# one rnfsd of ns.sh serves EXPORT (the path the guest mounts) as a CephFS
# export (id 4343, CephFS root /) instead of the local directory, and
# ceph-fuse mounts the same CephFS at EXPORT in this mount namespace, so the
# host-side requests that touch EXPORT (restart's lose=, lockhold,
# lockprobe, sqlite) work unchanged through it. HOSTCHECK lines are checked
# here, through ceph-fuse, before the cluster goes (run.sh, which checks
# them for a local export, runs after this namespace is gone).
# KC_CEPH_TIMEOUT: cluster start limit (s).
# shellcheck shell=bash

# kc_wait_for PID TRIES CMD...: runs CMD every 0.1 s until it succeeds
# (0), or PID has exited or TRIES runs are done (1).
kc_wait_for() {
    local pid=$1 n=$2 i
    shift 2
    for ((i = 0; i < n; i++)); do
        "$@" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

kc_ceph_up() {
    RNFSD_CEPH_ADDR=$2 RNFSD_CEPH_TIMEOUT=${KC_CEPH_TIMEOUT:-240} \
        "$REPO/tests/ceph/cluster.sh" up "$1" >"$3" 2>&1
}

kc_ceph_down() {
    # The cluster's logs stay in the run dir (the MDS log shows evictions
    # and file recoveries), its data goes.
    [ -d "$1/log" ] && cp -r "$1/log" "$2" 2>/dev/null
    [ -f "$1/ceph.conf" ] && "$REPO/tests/ceph/cluster.sh" down "$1" >>"$3" 2>&1
    return 0
}

KC_CEPH=$RUN/ceph
KC_CEPHFS_ID=4343
KC_FUSE_ON=
KC_FUSE_PID=

# The [[export]] table rnfsd serves EXPORT with (ns.sh's start_server
# appends it to its config file; KC_CLIENTS_TOML: its clients, when not
# the default).
kc_cephfs_export_toml() {
    cat <<EOF
[[export]]
path = "$EXPORT"
id = $KC_CEPHFS_ID
backend = "cephfs"
root_squash = false
secure = false
${KC_CLIENTS_TOML:+clients = $KC_CLIENTS_TOML}
[export.cephfs]
conf = "$KC_CEPH/ceph.conf"
root = "/"
EOF
}

kc_fuse_mounted() { findmnt -rn -o FSTYPE "$EXPORT" 2>/dev/null | grep -q fuse; }

kc_cephfs_setup() {
    say "starting the Ceph cluster on 127.0.0.1"
    kc_ceph_up "$KC_CEPH" 127.0.0.1 "$RUN/cluster-up.log" ||
        { say "Ceph cluster did not come up:"; tail -n 30 "$RUN/cluster-up.log"; return 1; }
    say "Ceph cluster ready"
    # ceph-fuse (client.admin, the conf's keyring) at EXPORT, in this mount
    # namespace only; foreground, so its pid is ours.
    ceph-fuse -f -c "$KC_CEPH/ceph.conf" --client_mountpoint=/ "$EXPORT" >"$RUN/ceph-fuse.log" 2>&1 &
    KC_FUSE_PID=$!
    kc_wait_for "$KC_FUSE_PID" 300 kc_fuse_mounted && { KC_FUSE_ON=1; return 0; }
    say "ceph-fuse did not mount $EXPORT:"
    tail -n 10 "$RUN/ceph-fuse.log"
    return 1
}

# Replaces each HOSTCHECK line of results.txt by a PASS or FAIL line, the
# file's checksum read through ceph-fuse (after the guest is gone and the
# server stopped, so nothing is in flight).
kc_cephfs_hostchecks() {
    local out=$RUN/share/results.txt tmp line name rel want got
    [ -n "$KC_FUSE_ON" ] || return 0
    tmp=$out.tmp
    : >"$tmp"
    while IFS= read -r line; do
        case $line in
        "HOSTCHECK "*)
            read -r _ name rel want <<<"$line"
            got=$(timeout 120 sha256sum "$EXPORT/$rel" 2>/dev/null | cut -d' ' -f1)
            if [ "$got" = "$want" ]; then echo "PASS $name"; else
                echo "FAIL $name: CephFS (read through ceph-fuse) has ${got:-no file}, client wrote $want"
            fi
            ;;
        *) printf '%s\n' "$line" ;;
        esac
    done <"$out" >"$tmp"
    mv "$tmp" "$out"
}

kc_cephfs_cleanup() {
    local i
    if [ -n "$KC_FUSE_ON" ] || [ -n "${KC_FUSE_PID:-}" ]; then
        umount "$EXPORT" 2>/dev/null || umount -l "$EXPORT" 2>/dev/null
        [ -n "${KC_FUSE_PID:-}" ] && {
            for ((i = 0; i < 50; i++)); do kill -0 "$KC_FUSE_PID" 2>/dev/null || break; sleep 0.1; done
            kill -TERM "$KC_FUSE_PID" 2>/dev/null
            wait "$KC_FUSE_PID" 2>/dev/null
        }
        KC_FUSE_ON= KC_FUSE_PID=
    fi
    kc_ceph_down "$KC_CEPH" "$RUN/ceph-log" "$RUN/cluster-down.log"
}
