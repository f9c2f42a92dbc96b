#!/bin/bash
# fresh ext4 at /tmp/wx/mnt
cd /tmp/wx
mountpoint -q mnt && umount mnt
rm -f img; truncate -s ${FSSIZE:-3G} img
mkfs.ext4 -q -F $MKFSARGS -E lazy_itable_init=0,lazy_journal_init=0 img
mount -o loop img mnt && mkdir -p mnt/export
[ -z "$LOOPDIO" ] || losetup --direct-io=on "$(findmnt -no SOURCE mnt)"
