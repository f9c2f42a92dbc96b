# pjdfstest (the Rust rewrite) on the NFS mount, as root. Each test case
# becomes a check; "failed as expected" cases (listed, with the NFS rule
# behind each, in pjdfstest.toml and docs/kernel-client.md) count as passes,
# a listed case that passes counts as a failure so the list stays honest.
#
# Two invocations: the EROFS cases first, alone, because remounting
# read-only fails with EBUSY while the client still has silly-renamed or
# written files of earlier cases in flight; then the rest with remounts off.
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
check pjdfstest/mount nfs_mount $M
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
mkdir -p /tmp/pjd-secondary
# NFSv4: nfstime4 seconds are 64-bit (RFC 8881 §3.3.1) and Linux gives NFSv4
# superblocks s_time_max = S64_MAX, so utimensat::y2038 must pass there.
conf=/tmp/pjd.toml
if [ "$(mount_vers $M)" = 3 ]; then
    cp /share/pjdfstest.toml $conf
else
    sed '/"utimensat::y2038",/d' /share/pjdfstest.toml >$conf
fi
sed 's/^allow_remount = true/allow_remount = false/' $conf >/tmp/pjd-noremount.toml

# pjd NAME CONFIG PATTERN...: one pjdfstest invocation, output in
# /share/pjdfstest-NAME.out, one result line per test case.
pjd() {
    local name=$1 conf=$2 out=/share/pjdfstest-$1.out rc
    shift 2
    (cd /tmp && NO_COLOR=1 timeout -k 5 $((LIMIT_pjdfstest - 60)) \
        /share/bin/pjdfstest -v -c "$conf" -p $M -s /tmp/pjd-secondary "$@") >"$out" 2>&1
    rc=$?
    log "pjdfstest $name: exit $rc"
    awk -v R="$RESULTS" -v N="$name" -v V="$(mount_vers $M)" '
        function flush() { if (name != "") { print "FAIL pjdfstest/" name ": " why >> R; name = "" } }
        /^[^ \t].* (ok|FAILED|skipped|failed as expected|PASSED UNEXPECTEDLY)$/ {
            flush()
            n = $1
            if ($0 ~ / ok$/) print "PASS pjdfstest/" n >> R
            else if ($0 ~ /failed as expected$/) print "PASS pjdfstest/" n " (expected failure under NFSv" V ")" >> R
            else if ($0 ~ /PASSED UNEXPECTEDLY$/) print "FAIL pjdfstest/" n ": listed as an expected failure but passed" >> R
            else if ($0 ~ /FAILED$/) { name = n; why = "" }
            next
        }
        name != "" && /^\t/ { line = $0; sub(/^\t/, "", line); if (why == "") why = line; else if (length(why) < 400) why = why " | " line; next }
        /^Summary:/ { flush(); print "INFO pjdfstest (" N ") " $0 >> R }
        END { flush() }
    ' "$out"
    grep -q '^Summary:' "$out" || fail "pjdfstest/$name-summary" "no summary line (exit $rc); see pjdfstest-$name.out"
}

if [ -n "${PJD_PATTERNS:-}" ]; then
    # shellcheck disable=SC2086
    pjd selected $conf $PJD_PATTERNS
else
    pjd erofs $conf erofs
    pjd all /tmp/pjd-noremount.toml
fi
umount $M
exit 0
