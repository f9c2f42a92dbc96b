#!/bin/bash
# usage: rounds.sh ROUNDS [dio] : the cutload program on ext4 on a loop device,
# as the power-cut test sets it up, ROUNDS times; moments 500-3000 ms.
set -u
N=$1 DIO=${2:-}
W=$(mktemp -d /tmp/cutload.XXXX)
trap 'umount "$W/m" 2>/dev/null; [ -n "${DEV:-}" ] && losetup -d "$DEV" 2>/dev/null; rm -rf "$W"' EXIT
mkdir "$W/m"
lost=0
for r in $(seq 0 $((N-1))); do
    ms=$(( 500 + (r * 7919 + 1237) % 2501 ))
    truncate -s 512M "$W/fs.img"
    DEV=$(losetup -f --show "$W/fs.img")
    [ "$DIO" = dio ] && losetup --direct-io=on "$DEV"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard -O has_journal "$DEV"
    mount -t ext4 -o errors=continue "$DEV" "$W/m"
    mkdir "$W/m/export"
    out=$(/tmp/powercut-local/cutload "$W/m/export" "$ms" 4 "$W/state")
    umount "$W/m"
    mount -t ext4 -o errors=continue "$DEV" "$W/m"
    if v=$(/tmp/powercut-local/cutload verify "$W/m/export" "$W/state"); then
        echo "round $r: $out; $(echo "$v" | tail -1)"
    else
        lost=$((lost+1))
        echo "round $r LOSS: $out"; echo "$v" | sed 's/^/  /'
        filefrag -v "$W/m/export"/w* | sed 's/^/  | /'
        cp --sparse=always "$W/fs.img" "/tmp/powercut-local/lost-round-$r.img"
    fi
    umount "$W/m"
    losetup -d "$DEV"; DEV=
    rm -f "$W/fs.img"
done
echo "rounds: $N, rounds with a loss: $lost"
