# xattr: user extended attributes through the kernel client (NFSv4.2's
# GETXATTR, SETXATTR, LISTXATTRS, REMOVEXATTR, RFC 8276): setfattr and
# getfattr (the host's attr package, over the shared /usr) on a file and a
# directory, read back after dropcaches and checked on the server's file
# by the host (HOSTXATTR). At vers=3 and 4.1 there are none: setfattr
# must fail with "not supported".
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
D=$M/xattr

sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# The names of user attributes of $1, sorted, space-separated.
names() { getfattr --absolute-names -m '^user\.' "$1" | grep '^user\.' | sort | tr '\n' ' '; }

t_mount() {
    nfs_mount $M
    mkdir $D
    echo data >$D/f
    mkdir $D/dir
}

t_unsupported() {
    if setfattr -n user.colour -v blue $D/f 2>/tmp/err; then
        echo "setfattr worked at vers=$VERS"
        exit 1
    fi
    grep -q 'not supported' /tmp/err || { cat /tmp/err; exit 1; }
}

# Each host check names an attribute no later check changes: the host
# looks at the server's file once the guest is gone.
t_set_get() {
    setfattr -n user.kept -v blue $D/f
    dropcaches
    eq value "$(getfattr --absolute-names --only-values -n user.kept $D/f)" blue
    hostxattr xattr/set-on-server-disk xattr/f user.kept "$(sha blue)"
}

t_replace() {
    setfattr -n user.colour -v blue $D/f
    setfattr -n user.colour -v red $D/f
    dropcaches
    eq value "$(getfattr --absolute-names --only-values -n user.colour $D/f)" red
    hostxattr xattr/replace-on-server-disk xattr/f user.colour "$(sha red)"
}

t_binary_and_large() {
    setfattr -n user.bin -v 0x00ff1000 $D/f
    v=$(head -c 1500 /dev/zero | tr '\0' 'v')
    setfattr -n user.large -v "$v" $D/f
    dropcaches
    eq hex "$(getfattr --absolute-names -e hex -n user.bin $D/f | sed -n 's/^user\.bin=//p')" 0x00ff1000
    eq large "$(getfattr --absolute-names --only-values -n user.large $D/f)" "$v"
    hostxattr xattr/large-on-server-disk xattr/f user.large "$(sha "$v")"
}

t_list() {
    setfattr -n user.gone -v 1 $D/f
    dropcaches
    eq names "$(names $D/f)" "user.bin user.colour user.gone user.kept user.large "
}

t_missing() {
    if getfattr --absolute-names -n user.none $D/f 2>/tmp/err; then echo "a missing attribute was read"; exit 1; fi
    grep -q 'No such attribute' /tmp/err || { cat /tmp/err; exit 1; }
}

t_remove() {
    setfattr -x user.gone $D/f
    dropcaches
    if getfattr --absolute-names -n user.gone $D/f 2>/dev/null; then echo "removed attribute still there"; exit 1; fi
    eq names "$(names $D/f)" "user.bin user.colour user.kept user.large "
    hostxattr xattr/removed-on-server-disk xattr/f user.gone absent
}

t_directory() {
    setfattr -n user.d -v on-dir $D/dir
    dropcaches
    eq value "$(getfattr --absolute-names --only-values -n user.d $D/dir)" on-dir
    hostxattr xattr/dir-on-server-disk xattr/dir user.d "$(sha on-dir)"
}

check xattr/mount t_mount
if [ "$CHECK_RC" -eq 0 ]; then
    case $(mount_vers $M) in
    4.2)
        check xattr/set-get t_set_get
        check xattr/replace t_replace
        check xattr/binary-and-large t_binary_and_large
        check xattr/list t_list
        check xattr/missing t_missing
        check xattr/remove t_remove
        check xattr/directory t_directory
        ;;
    *) check xattr/unsupported-before-4.2 t_unsupported ;;
    esac
fi
umount $M 2>/dev/null || true
