#!/usr/bin/env bash
# Package test: builds the .deb (scripts/package.sh), installs it, checks
# its files and unit, starts the server the way rnfsd.service would (the
# unit's ExecStart under its NoNewPrivileges, CapabilityBoundingSet,
# LimitNOFILE, ProtectSystem=full and PrivateTmp, emulated with setpriv and
# namespaces, since no systemd runs here; its own network namespace with a
# private rpcbind), with nothing exported; checks READY=1 on the notify
# socket, adds an export to an exports(5) file and reloads (SIGHUP), checks
# rpcinfo -p, showmount -e and rnfsd exportfs, copies a file in and out
# with libnfs, stops it with SIGTERM (STOPPING=1), then purges the package
# and checks nothing is left. Root only. Seconds when target/release is built, about
# 2-3 minutes from a cold release build (plus installing cargo-deb once).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: package test needs root (dpkg -i, mount namespaces)"
    exit 0
fi
for t in dpkg-deb setpriv unshare nsenter ip nfs-cp systemd-analyze timeout rpcbind rpcinfo showmount python3; do
    command -v "$t" >/dev/null || { echo "FAIL: $t is missing" >&2; exit 1; }
done
if dpkg-query -W -f='${Status}' rnfsd 2>/dev/null | grep -q installed; then
    echo "FAIL: rnfsd is already installed; this test installs and purges it" >&2
    exit 1
fi

t0=$SECONDS
target="${CARGO_TARGET_DIR:-$PWD/target}"
mkdir -p "$target"
# Under /var/lib, not the checkout: the emulated PrivateTmp hides /tmp and
# /var/tmp from the server, and a checkout may live there (CI's may).
work=$(mktemp -d /var/lib/rnfsd-package-test.XXXXXX)
server_pid=""
installed=""
state_made=""
step() { echo "== package test: $* ($((SECONDS - t0)) s)"; }
fail() {
    echo "FAIL: $*" >&2
    [ -f "$work/server.log" ] && sed 's/^/  server: /' "$work/server.log" >&2
    exit 1
}
notify_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    [ -f "$work/rpcbind.pid" ] && kill -TERM "$(cat "$work/rpcbind.pid")" 2>/dev/null || true
    [ -n "$notify_pid" ] && kill -TERM "$notify_pid" 2>/dev/null || true
    [ -n "$installed" ] && dpkg --purge rnfsd >/dev/null 2>&1 || true
    [ -n "$state_made" ] && rm -rf /var/lib/rnfsd
    rm -rf "$work"
}
trap cleanup EXIT

step "building the package"
deb=$(scripts/package.sh | tail -n 1)
[ -f "$deb" ] || fail "scripts/package.sh gave no package ($deb)"

step "installing $deb"
installed=1
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >/dev/null

unit=/lib/systemd/system/rnfsd.service
files=(
    /usr/sbin/rnfsd "$unit" /etc/rnfsd.toml
    /usr/share/man/man8/rnfsd.8.gz /usr/share/man/man8/rnfsd-serve.8.gz
    /usr/share/man/man8/rnfsd-check-config.8.gz /usr/share/man/man8/rnfsd-stats.8.gz
    /usr/share/man/man8/rnfsd-exportfs.8.gz
    /usr/share/man/man5/rnfsd.toml.5.gz
    /usr/share/bash-completion/completions/rnfsd
    /usr/share/zsh/vendor-completions/_rnfsd
    /usr/share/fish/vendor_completions.d/rnfsd.fish
    /usr/share/doc/rnfsd/README.md /usr/share/doc/rnfsd/packaging.md
)
listed=$(dpkg -L rnfsd)
for f in "${files[@]}"; do
    [ -f "$f" ] || fail "$f is not installed"
    # The unit may be listed under /usr/lib (merged /usr).
    grep -qxE "$f|/usr$f" <<<"$listed" || fail "$f is not in dpkg -L rnfsd"
done
dpkg-query -W -f='${Conffiles}\n' rnfsd | grep -q '^ /etc/rnfsd.toml ' ||
    fail "/etc/rnfsd.toml is not a conffile"
/usr/sbin/rnfsd --version | grep -q '^rnfsd ' || fail "rnfsd --version"
if command -v man >/dev/null; then
    for p in rnfsd rnfsd-serve rnfsd.toml; do
        man -w "$p" >/dev/null || fail "man -w $p finds no page"
    done
fi
systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
socket_unit=${unit%.service}.socket
[ -f "$socket_unit" ] || fail "$socket_unit is not installed"
systemd-analyze verify "$socket_unit" || fail "systemd-analyze verify $socket_unit"

step "configuring: no exports yet, an exports(5) file to add them"
export_dir="$work/export"
mkdir -m 1777 "$export_dir"
# The server gets its own network namespace (unshare -n): port 2049 and a
# private rpcbind on 111 are its own, as on a host of its own, and clients
# reach it through `nsenter --net`.
exports_file="$work/exports"
: >"$exports_file"
sed -i "s|^#exports = .*|exports = \"$exports_file\"|" /etc/rnfsd.toml
grep -q "^exports = \"$exports_file\"" /etc/rnfsd.toml || fail "the shipped config has no #exports line"
/usr/sbin/rnfsd check-config /etc/rnfsd.toml >/dev/null || fail "check-config /etc/rnfsd.toml"

step "starting the server as the unit would"
val() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
exec_start=$(val ExecStart)
[ "$(val Type)" = notify ] || fail "Type is not notify"
[ "$(val NoNewPrivileges)" = yes ] || fail "NoNewPrivileges is not yes"
[ "$(val ProtectSystem)" = full ] || fail "ProtectSystem is not full"
[ "$(val PrivateTmp)" = yes ] || fail "PrivateTmp is not yes"
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID' "$unit" || fail "ExecReload does not send SIGHUP"
caps=$(val CapabilityBoundingSet)
[ -n "$caps" ] || fail "no CapabilityBoundingSet"
bounding="-all"
for c in $caps; do
    c=${c,,}
    bounding+=",+${c#cap_}"
done
nofile=$(val LimitNOFILE)
# StateDirectory=rnfsd: systemd makes /var/lib/rnfsd.
if [ ! -d /var/lib/rnfsd ]; then
    state_made=1
    mkdir -m 0700 /var/lib/rnfsd
fi
# systemd's notify socket, played by a small listener that logs each
# message on a line.
notify_sock="$work/notify.sock"
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        log.write(s.recv(4096).decode().replace("\n", " ") + "\n")
' "$notify_sock" "$work/notify.log" &
notify_pid=$!
for _ in $(seq 50); do [ -S "$notify_sock" ] && break; sleep 0.1; done
[ -S "$notify_sock" ] || fail "the notify listener did not start"
# In new mount and network namespaces: lo up, a private /run with its own
# rpcbind; then ProtectSystem=full (/usr, /boot, /efi and /etc read-only)
# and PrivateTmp (an empty /tmp and /var/tmp). Recursive binds keep
# submounts (/etc/hosts). unshare, bash and setpriv exec in turn: $! is the
# server's pid.
# shellcheck disable=SC2016
NOTIFY_SOCKET="$notify_sock" unshare -m -n --propagation private -- bash -c '
    set -e
    ip link set lo up
    mount -t tmpfs -o mode=755,size=16m tmpfs /run
    mkdir -p /run/rpcbind
    rpcbind -f -w &
    echo $! >"$2/rpcbind.pid"
    for _ in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
    for d in /usr /boot /efi /etc; do
        [ -d "$d" ] || continue
        mount --rbind "$d" "$d"
        mount -o remount,bind,ro "$d"
    done
    if touch /usr/.rnfsd-write-check 2>/dev/null; then
        rm -f /usr/.rnfsd-write-check
        echo "/usr is writable: ProtectSystem emulation failed" >&2
        exit 1
    fi
    mount -t tmpfs tmpfs /tmp
    mount -t tmpfs tmpfs /var/tmp
    ulimit -n "$1"
    shift 2
    exec "$@"
' _ "$nofile" "$work" setpriv --no-new-privs --bounding-set="$bounding" -- $exec_start \
    >"$work/server.log" 2>&1 &
server_pid=$!
innet() { nsenter --net="/proc/$server_pid/ns/net" -- "$@"; }

# Type=notify: systemd waits for READY=1 (sent once listening, registered
# and the exports open; here there are none yet).
wait_for() { # what, seconds, command...
    local what=$1 secs=$2 until=$((SECONDS + $2))
    shift 2
    until "$@"; do
        kill -0 "$server_pid" 2>/dev/null || fail "the server exited while waiting for $what"
        [ $SECONDS -lt $until ] || fail "no $what within $secs s"
        sleep 0.2
    done
}
wait_for "READY=1" 30 grep -q "READY=1" "$work/notify.log"
status=/proc/$server_pid/status
grep -q '^NoNewPrivs:[[:space:]]*1' "$status" || fail "server runs without no_new_privs"
[ "$(awk '/^Max open files/ {print $4}' "/proc/$server_pid/limits")" = "$nofile" ] ||
    fail "server's open-files limit is not $nofile"
# The bounding set it runs with is no wider than the unit's.
want=$(setpriv --no-new-privs --bounding-set="$bounding" -- grep '^CapBnd' /proc/self/status)
[ "$(grep '^CapBnd' "$status")" = "$want" ] || fail "server's CapBnd is not the unit's ($want)"
/usr/sbin/rnfsd exportfs | grep -q "nothing exported" || fail "rnfsd exportfs: expected no exports"

step "adding an export to the exports file, systemctl reload (SIGHUP)"
echo "$export_dir 127.0.0.1(rw,insecure,no_root_squash) # from the package test" >"$exports_file"
kill -HUP "$server_pid"
has_export() { /usr/sbin/rnfsd exportfs | grep -q "^$export_dir"; }
wait_for "the export after the reload" 30 has_export
/usr/sbin/rnfsd exportfs | sed 's/^/  exportfs: /'
grep -q "RELOADING=1" "$work/notify.log" || fail "no RELOADING=1 at the reload"
[ "$(grep -c "READY=1" "$work/notify.log")" -ge 2 ] || fail "no READY=1 after the reload"

step "rpcinfo -p and showmount -e"
innet rpcinfo -p 127.0.0.1 | sed 's/^/  rpcinfo: /'
# NFS, MOUNT, the lock manager (NLM) and the status monitor (NSM) on TCP;
# NLM and NSM on UDP too.
for pp in 100003/tcp 100005/tcp 100021/tcp 100024/tcp 100021/udp 100024/udp; do
    prog=${pp%/*} proto=${pp#*/}
    innet rpcinfo -p 127.0.0.1 | awk -v p="$prog" -v t="$proto" '$1 == p && $3 == t && $4 == 2049' |
        grep -q . || fail "rpcinfo -p does not show program $prog on $proto 2049"
done
innet showmount -e 127.0.0.1 | sed 's/^/  showmount: /'
innet showmount -e 127.0.0.1 | grep -qE "^$export_dir +127\.0\.0\.1" ||
    fail "showmount -e does not list $export_dir for 127.0.0.1"

step "copying a file in and out with libnfs (ports from the port mapper)"
url() { echo "nfs://127.0.0.1$export_dir/$1?version=3"; }
head -c 3000000 /dev/urandom >"$work/in.bin"
timeout 60 nsenter --net="/proc/$server_pid/ns/net" -- nfs-cp "$work/in.bin" "$(url copied.bin)" >/dev/null ||
    fail "nfs-cp in"
cmp "$work/in.bin" "$export_dir/copied.bin" || fail "the file written over NFS differs"
timeout 60 nsenter --net="/proc/$server_pid/ns/net" -- nfs-cp "$(url copied.bin)" "$work/out.bin" >/dev/null ||
    fail "nfs-cp out"
cmp "$work/in.bin" "$work/out.bin" || fail "the file read over NFS differs"
timeout 30 nsenter --net="/proc/$server_pid/ns/net" -- nfs-ls "$(url '')" | grep -q copied.bin ||
    fail "nfs-ls does not list the file"

step "stopping it with SIGTERM"
kill -TERM "$server_pid"
deadline=$((SECONDS + 30))
while kill -0 "$server_pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "the server did not exit within 30 s of SIGTERM"
    sleep 0.2
done
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[ "$rc" = 0 ] || fail "the server exited with status $rc after SIGTERM"
grep -q "STOPPING=1" "$work/notify.log" || fail "no STOPPING=1 at shutdown"

step "purging the package"
dpkg --purge rnfsd >/dev/null
installed=""
for f in "${files[@]}"; do
    [ ! -e "$f" ] || fail "$f is left after dpkg --purge"
done
! dpkg-query -W -f='${Status}' rnfsd 2>/dev/null | grep -q installed ||
    fail "rnfsd is still installed"

step "passed"
