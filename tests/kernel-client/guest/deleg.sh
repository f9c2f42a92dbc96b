# deleg: the guest's NFSv4 client holds a read delegation on a file (it
# opened and read it; the server's delegation gauge says one is held) and
# the file is then written (a) through an NFSv3 client, (b) through
# another NFSv4 client, (c) by a program on the server's host (ns.sh's
# nfswrite3, nfswrite4 and hostwrite requests). Each recalls the
# delegation, and the guest's next read, with the file still open and no
# cache dropped, sees the new bytes. One file each: a file recalled
# lately gets no delegation for 30 s. Then (d) the guest opens a file
# for reading and writing (a write delegation) and writes it without
# closing it, and a program on the server's host reads it: the recall
# has the guest write its data back first. At --vers 3: nothing to
# check.
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
D=$M/deleg

[ "$VERS" != 3 ] || exit 0

t_mount() {
    nfs_mount $M
    mkdir -p $D
    # Made on the host, so no writer of the guest's (nor the server's
    # open-file cache) keeps the file open for writing: a lease, and so a
    # delegation, needs none.
    local f
    for f in v3 v4 local w; do host_request hostwrite "deleg/$f" "old-$f" >/dev/null; done
}

# delegated_then WAY REQUEST: the guest opens deleg/WAY and reads it (a
# read delegation), REQUEST writes it elsewhere, and the guest's next read
# sees "new-WAY" (as long as "old-WAY": NFSv3 and NFSv4 write in place).
delegated_then() {
    local way=$1 req=$2 ans n
    exec 3<"$D/$way"
    eq before "$(cat <&3)" "old-$way"
    ans=$(host_request delegs) || { echo "delegs: $ans"; return 1; }
    n=${ans#ok }
    [ "$n" -ge 1 ] 2>/dev/null || { echo "no delegation held after the open ($ans)"; return 1; }
    ans=$(host_request "$req" "deleg/$way" "new-$way") || { echo "$req: $ans"; return 1; }
    echo "$req: $ans"
    eq after "$(cat "$D/$way")" "new-$way"
    exec 3<&-
}

t_v3() { delegated_then v3 nfswrite3; }
t_v4() { delegated_then v4 nfswrite4; }
t_local() { delegated_then local hostwrite; }

# t_write: a write delegation (the server's gauge says one is held once
# the guest opened the file for reading and writing); the guest's write,
# still open and maybe only in its cache, is what a program on the host
# then reads (its open recalls the delegation).
t_write() {
    local ans n
    exec 4<>"$D/w"
    printf %s new-w >&4
    ans=$(host_request wdelegs) || { echo "wdelegs: $ans"; return 1; }
    n=${ans#ok }
    [ "$n" -ge 1 ] 2>/dev/null || { echo "no write delegation held after the open ($ans)"; return 1; }
    ans=$(host_request hostread deleg/w) || { echo "hostread: $ans"; return 1; }
    exec 4<&-
    eq "host read" "${ans#ok }" new-w
}

check deleg/mount t_mount
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
check deleg/nfsv3-write-seen t_v3
check deleg/nfsv4-write-seen t_v4
check deleg/local-write-seen t_local
check deleg/write-delegation-flushed-on-recall t_write
umount $M
exit 0
