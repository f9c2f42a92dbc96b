# tar: a prepared tree of 3,000 files (tmpfs in the guest) is tarred into
# the mount and back out; manifests (checksums, modes, owners, mtimes, link
# targets, hard-link counts) must match at every step.
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
SRC=/tmp/tree
N=${TAR_FILES:-3000}

t_prepare() {
    rm -rf $SRC && mkdir $SRC
    perl /share/guest/tree.pl make $SRC "$N"
    perl /share/guest/tree.pl manifest $SRC >/tmp/m.src
    n=$(grep -c ' f [0-7]* ' /tmp/m.src)
    [ "$n" -ge "$N" ] || { echo "only $n files"; exit 1; }
    echo "$(wc -l </tmp/m.src) entries, $(du -sh $SRC | cut -f1)"
}

cmp_manifest() { # cmp_manifest WHAT FILE
    if ! cmp -s /tmp/m.src "$2"; then
        echo "$1: $(diff /tmp/m.src "$2" | grep -c '^[<>]') manifest lines differ, e.g.:"
        diff /tmp/m.src "$2" | grep '^[<>]' | head -n 4
        exit 1
    fi
}

t_into_mount() {
    mkdir -p $M/tar/tree
    tar -C $SRC -cf - . | tar -C $M/tar/tree -xpf -
    log "extracted: $(opstats $M)"
    dropcaches
    perl /share/guest/tree.pl manifest $M/tar/tree >/tmp/m.nfs
    cmp_manifest "on the mount" /tmp/m.nfs
}

t_archive_on_mount() {
    tar -C $SRC -cf $M/tar/tree.tar .
    tar -C $SRC -cf /tmp/tree.tar .
    dropcaches
    eq archive "$(sha256sum <$M/tar/tree.tar)" "$(sha256sum </tmp/tree.tar)"
    hostcheck tar/archive-on-server-disk tar/tree.tar "$(sha256sum </tmp/tree.tar | cut -d' ' -f1)"
    rm -rf /tmp/x && mkdir /tmp/x
    tar -C /tmp/x -xpf $M/tar/tree.tar
    perl /share/guest/tree.pl manifest /tmp/x >/tmp/m.x
    rm -rf /tmp/x /tmp/tree.tar
    cmp_manifest "extracted from the archive on the mount" /tmp/m.x
}

t_back_out() {
    rm -rf /tmp/back && mkdir /tmp/back
    dropcaches
    tar -C $M/tar/tree -cf - . | tar -C /tmp/back -xpf -
    perl /share/guest/tree.pl manifest /tmp/back >/tmp/m.back
    rm -rf /tmp/back
    cmp_manifest "copied back out" /tmp/m.back
}

t_remove() {
    # The archive stays for the host's check after the run.
    rm -rf $M/tar/tree
    [ ! -e $M/tar/tree ]
}

check tar/mount nfs_mount $M
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
check tar/prepare-tree t_prepare
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
check tar/extract-into-mount t_into_mount
check tar/archive-on-mount t_archive_on_mount
check tar/copy-back-out t_back_out
log "opstats: $(opstats $M)"
check tar/remove-tree t_remove
umount $M
exit 0
