#!/usr/bin/env bash
# Package test: builds the .deb (scripts/package.sh), installs it, checks
# its files and unit, serves a fresh directory the way rnfsd.service would
# (the unit's ExecStart under its NoNewPrivileges, CapabilityBoundingSet,
# LimitNOFILE, ProtectSystem=full and PrivateTmp, emulated with setpriv and
# a mount namespace, since no systemd runs here), copies a file in and out
# with libnfs, stops it with SIGTERM, then purges the package and checks
# nothing is left. Root only. Seconds when target/release is built, about
# 2-3 minutes from a cold release build (plus installing cargo-deb once).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: package test needs root (dpkg -i, mount namespaces)"
    exit 0
fi
for t in dpkg-deb setpriv unshare nfs-cp systemd-analyze timeout; do
    command -v "$t" >/dev/null || { echo "FAIL: $t is missing" >&2; exit 1; }
done
if dpkg-query -W -f='${Status}' rnfsd 2>/dev/null | grep -q installed; then
    echo "FAIL: rnfsd is already installed; this test installs and purges it" >&2
    exit 1
fi

t0=$SECONDS
target="${CARGO_TARGET_DIR:-$PWD/target}"
mkdir -p "$target"
# Not under /tmp: the emulated PrivateTmp hides it from the server.
work=$(mktemp -d "$target/package-test.XXXXXX")
server_pid=""
installed=""
state_made=""
step() { echo "== package test: $* ($((SECONDS - t0)) s)"; }
fail() {
    echo "FAIL: $*" >&2
    [ -f "$work/server.log" ] && sed 's/^/  server: /' "$work/server.log" >&2
    exit 1
}
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
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

step "configuring an export"
export_dir="$work/export"
mkdir -m 1777 "$export_dir"
# A free port, not 2049: other servers may run here. No rpcbind
# registration: the system's port mapper is not ours to change.
port=""
for _ in $(seq 20); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        port=$p
        break
    fi
done
[ -n "$port" ] || fail "no free port found"
sed -i "s/^listen = .*/listen = [\"127.0.0.1:$port\"]\nregister_rpcbind = false/" /etc/rnfsd.toml
# Insecure: libnfs may call from an unprivileged port.
cat >>/etc/rnfsd.toml <<EOF

[[export]]
path = "$export_dir"
clients = ["127.0.0.1"]
secure = false
EOF
/usr/sbin/rnfsd check-config /etc/rnfsd.toml >/dev/null || fail "check-config /etc/rnfsd.toml"

step "starting the server as the unit would"
val() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
exec_start=$(val ExecStart)
[ "$(val Type)" = notify ] || fail "Type is not notify"
[ "$(val NoNewPrivileges)" = yes ] || fail "NoNewPrivileges is not yes"
[ "$(val ProtectSystem)" = full ] || fail "ProtectSystem is not full"
[ "$(val PrivateTmp)" = yes ] || fail "PrivateTmp is not yes"
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
# ProtectSystem=full: /usr, /boot, /efi and /etc read-only; PrivateTmp: an
# empty /tmp and /var/tmp. Recursive binds keep submounts (/etc/hosts).
# unshare, bash and setpriv exec in turn: $! is the server's pid.
# shellcheck disable=SC2016
unshare -m --propagation private -- bash -c '
    set -e
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
    shift
    exec "$@"
' _ "$nofile" setpriv --no-new-privs --bounding-set="$bounding" -- $exec_start \
    >"$work/server.log" 2>&1 &
server_pid=$!

deadline=$((SECONDS + 30))
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || fail "the server exited before listening"
    [ $SECONDS -lt $deadline ] || fail "the server did not listen on $port within 30 s"
    sleep 0.2
done
status=/proc/$server_pid/status
grep -q '^NoNewPrivs:[[:space:]]*1' "$status" || fail "server runs without no_new_privs"
[ "$(awk '/^Max open files/ {print $4}' "/proc/$server_pid/limits")" = "$nofile" ] ||
    fail "server's open-files limit is not $nofile"
# The bounding set it runs with is no wider than the unit's.
want=$(setpriv --no-new-privs --bounding-set="$bounding" -- grep '^CapBnd' /proc/self/status)
[ "$(grep '^CapBnd' "$status")" = "$want" ] || fail "server's CapBnd is not the unit's ($want)"

step "copying a file in and out with libnfs"
url() { echo "nfs://127.0.0.1$export_dir/$1?version=3&nfsport=$port&mountport=$port"; }
head -c 3000000 /dev/urandom >"$work/in.bin"
timeout 60 nfs-cp "$work/in.bin" "$(url copied.bin)" >/dev/null || fail "nfs-cp in"
cmp "$work/in.bin" "$export_dir/copied.bin" || fail "the file written over NFS differs"
timeout 60 nfs-cp "$(url copied.bin)" "$work/out.bin" >/dev/null || fail "nfs-cp out"
cmp "$work/in.bin" "$work/out.bin" || fail "the file read over NFS differs"
timeout 30 nfs-ls "$(url '')" | grep -q copied.bin || fail "nfs-ls does not list the file"

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

step "purging the package"
dpkg --purge rnfsd >/dev/null
installed=""
for f in "${files[@]}"; do
    [ ! -e "$f" ] || fail "$f is left after dpkg --purge"
done
! dpkg-query -W -f='${Status}' rnfsd 2>/dev/null | grep -q installed ||
    fail "rnfsd is still installed"

step "passed"
