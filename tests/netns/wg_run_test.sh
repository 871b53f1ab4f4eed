#!/usr/bin/env bash
# wg-run, run by an unprivileged user (nobody; root only prepares), against Debian's
# wireguard-go:
#   - traffic: a file over HTTP (sha256 intact), ping, a UDP exchange, IPv4 and IPv6;
#   - confinement: lo and the TUN are the only interfaces, every route goes through the
#     TUN, the underlay and the user's own network cannot be reached (the packets end in
#     WireGuard as "no route", none leaves), the uid is the user's;
#   - the host hidden: /sys/class/net lists lo and the TUN only, /proc/*/net shows no
#     host address, /proc only COMMAND's own processes (a host process is not there);
#     a host socket under /tmp and one under /run unreachable by default and reachable
#     with --share-host-sockets; stand-in nscd and varlink sockets unreachable either way
#     while getent resolves through DNS=; a working directory under /tmp refused;
#   - DNS: DNS= resolves through the tunnel; the system's resolver (here one that would
#     answer, on B's underlay address) never sees a query, with or without DNS=;
#   - exit status and signals: COMMAND's status, 128+N, SIGTERM passed on (143), SIGHUP
#     reloads and is passed on, SIGUSR1 only reloads; SIGTERM and SIGINT end a COMMAND
#     that has no handler; nothing left behind (processes, namespaces, TUN), not even
#     a background process COMMAND left running;
#   - UAPI (--uapi), --health, --netns (a namespace the user made);
#   - the errors a user meets, with their exact lines: user namespaces disabled, the TUN
#     device closed or missing, no Address=, no such COMMAND.
#
#        namespace $NS_A (the user's network)                  namespace $NS_B
#   ┌───────────────────────────────────────────────┐     ┌──────────────────────────────┐
#   │ wg-run (uid nobody) UDP :51820                │     │ wireguard-go $WG_B :51821    │
#   │  └ COMMAND: user+net+mount namespaces         │ <═> │   198.19.0.2  fd00:19::2     │
#   │      lo, wg0 198.19.0.1/24 fd00:19::1/64      │ wg  │   HTTP :8080, UDP echo :7007 │
#   │      resolv.conf: nameserver 198.19.0.2       │     │   DNS :53 (wgrun.test)       │
#   │ HTTP 198.18.0.1:8081 (must stay unreachable)  │     │ DNS 198.18.0.2:53 (the       │
#   │ veth 198.18.0.1/24 fd00:18::1/64              │ <─> │   "system" resolver of A)    │
#   └───────────────────────────────────────────────┘     │ veth 198.18.0.2 fd00:18::2   │
#                                                         └──────────────────────────────┘
# /etc/netns/$NS_A/resolv.conf names 198.18.0.2: `ip netns exec` mounts it over
# /etc/resolv.conf for everything run in A, so A's system resolver would answer.
# /dev/net/tun is made 0666 for the run (as Debian ships it) and its mode restored.
# The user's files live under /var/tmp: COMMAND's /tmp is a fresh one.
#
# Usage: wg_run_test.sh BIN_DIR   (exit 77 = skipped)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
require_root
for tool in wireguard-go wg curl setpriv python3 unshare nsenter; do
  command -v "$tool" >/dev/null || { echo "$tool missing (scripts/setup.sh installs it)"; exit 1; }
done
[ -x "$WGNET_BIN/wg-run" ] || { echo "no wg-run in $WGNET_BIN"; exit 1; }
RESPONDER="$(cd "$(dirname "$0")/../.." && pwd)/scripts/dns_responder.py"
PY=/usr/bin/python3  # a system Python the unprivileged user can run too
USER_DIR=$(mktemp -d /var/tmp/wgnet-wgrun.XXXXXX) # the user's files: configs, logs, sockets
ETC_NETNS="/etc/netns/$NS_A"
TUN_MODE=$(stat -c %a /dev/net/tun 2>/dev/null)

run_cleanup() {
  [ -n "$TUN_MODE" ] && chmod "$TUN_MODE" /dev/net/tun
  rm -rf "$ETC_NETNS" "$USER_DIR"
  cleanup
}
trap run_cleanup EXIT
[ -c /dev/net/tun ] || { echo "SKIPPED: no /dev/net/tun"; exit 77; }
if [ "$(cat /proc/sys/user/max_user_namespaces 2>/dev/null)" = 0 ] ||
  [ "$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null)" = 1 ]; then
  echo "SKIPPED: unprivileged user namespaces are disabled on this machine"
  exit 77
fi

# The device as Debian ships it. Made so again before each run: another suite that
# restores its own saved mode meanwhile must not fail this one.
open_tun() { chmod 0666 /dev/net/tun; }

# as_user CMD...: CMD in A as nobody, with no supplementary groups. (A function: started
# in the background it would be a subshell, so background runs spell it out and $! is
# the program itself: ip and setpriv exec.)
as_user() { ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# wg_run CONF ARGS...: wg-run in A as nobody, with a time limit; its status is the result.
wg_run() {
  local conf=$1; shift
  open_tun
  as_user timeout -k 5 60 "$WGNET_BIN/wg-run" -c "$conf" "$@"
}
# inside CMD...: CMD under wg-run with wg0.conf, stdout kept; stderr to inside.log.
inside() { wg_run "$USER_DIR/wg0.conf" -- "$@" 2>>"$TMP/inside.log"; }
# expect_error WHAT LINE CMD...: CMD exits 1 with exactly LINE on stderr.
expect_error() {
  local what=$1 line=$2 err rc
  shift 2
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" = 1 ] && [ "$err" = "$line" ]; then pass "$what"; else fail "$what: status $rc, said '$err'"; fi
}

# The peer's reference answer to the user's config (DNS= and Address= as given).
user_conf() { # FILE ADDRESS-LINE DNS-LINE
  (umask 077; cat >"$1" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
$2
ListenPort = 51820
$3

[Peer]
PublicKey = $(cat "$TMP/b.pub")
Endpoint = 198.18.0.2:51821
AllowedIPs = 198.19.0.0/24, fd00:19::/64
CONF
  )
  chown nobody:nogroup "$1"
}

log "=== wg-run as nobody against wireguard-go ==="
make_namespaces
chmod 0711 "$TMP"
mkdir -p "$USER_DIR" "$TMP/www" "$ETC_NETNS"
chown nobody:nogroup "$USER_DIR"
(umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
start_impl "$NS_B" "$WG_B" wireguard-go || { fail "wireguard-go did not start"; finish wg-run; }
nb wg set "$WG_B" private-key "$TMP/b.key" listen-port 51821 \
  peer "$(cat "$TMP/a.pub")" allowed-ips 198.19.0.1/32,fd00:19::1/128 endpoint 198.18.0.1:51820
nb ip addr add 198.19.0.2/24 dev "$WG_B"
nb ip addr add fd00:19::2/64 dev "$WG_B" nodad
nb ip link set "$WG_B" up
user_conf "$USER_DIR/wg0.conf" "Address = 198.19.0.1/24, fd00:19::1/64" "DNS = 198.19.0.2"
user_conf "$USER_DIR/nodns.conf" "Address = 198.19.0.1/24, fd00:19::1/64" ""
user_conf "$USER_DIR/noaddr.conf" "" "DNS = 198.19.0.2"

# B: a file over HTTP on both families, a UDP echo, the tunnel's DNS; the underlay DNS
# that A's system resolver names. A: an HTTP server of the user's own network.
head -c 4000000 /dev/urandom >"$TMP/www/file"
WANT=$(sha256sum <"$TMP/www/file" | cut -d' ' -f1)
echo "outside" >"$TMP/www/outside"
cat >"$TMP/udp_echo.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1])))
while True:
    d, a = s.recvfrom(65535)
    s.sendto(d, a)
PY
# udp_ask HOST PORT: one datagram, the echo printed (3 tries, 2 s each).
cat >"$USER_DIR/udp_ask.py" <<'PY'
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(2)
for _ in range(3):
    s.sendto(b"wg-run udp", (host, port))
    try:
        print(s.recv(100).decode()); break
    except socket.timeout:
        pass
PY
# uapi_get PATH: the UAPI's get=1 answer.
cat >"$USER_DIR/uapi_get.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b"get=1\n\n")
out = b""
while not out.endswith(b"\n\n"):
    d = s.recv(4096)
    if not d: break
    out += d
print(out.decode(), end="")
PY
chmod 0644 "$USER_DIR"/*.py
bg() { # NS NAME CMD...
  local ns=$1 name=$2; shift 2
  ip netns exec "$ns" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}
bg "$NS_B" http4 python3 -m http.server --bind 198.19.0.2 --directory "$TMP/www" 8080
bg "$NS_B" http6 python3 -m http.server --bind fd00:19::2 --directory "$TMP/www" 8080
bg "$NS_B" udp-echo python3 "$TMP/udp_echo.py" 7007
bg "$NS_B" dns-tunnel python3 "$RESPONDER" 198.19.0.2 53 wgrun.test=198.19.0.2
: >"$TMP/dns-system.queries"
bg "$NS_B" dns-system python3 "$RESPONDER" --log "$TMP/dns-system.queries" 198.18.0.2 53 \
  wgrun.test=198.18.0.2 leak.test=198.18.0.2
bg "$NS_A" http-outside python3 -m http.server --bind 198.18.0.1 --directory "$TMP/www" 8081
echo "nameserver 198.18.0.2" >"$ETC_NETNS/resolv.conf"
wait_listen "$NS_B" 198.19.0.2:8080 && wait_listen "$NS_B" "[fd00:19::2]:8080" &&
  wait_listen "$NS_A" 198.18.0.1:8081 || fail "test servers did not start"
sleep 0.5 # the UDP responders bind at once; give Python its start

log "--- traffic ---"
out=$(inside curl -sS --max-time 20 http://198.19.0.2:8080/file | sha256sum | cut -d' ' -f1)
check "curl under wg-run fetches a 4 MB file over IPv4, sha256 intact" [ "$out" = "$WANT" ]
out=$(inside curl -sS --max-time 20 -g "http://[fd00:19::2]:8080/file" | sha256sum | cut -d' ' -f1)
check "... and over IPv6" [ "$out" = "$WANT" ]
out=$(inside ping -c 3 -i 0.2 -W 3 198.19.0.2)
check "ping -c 3 198.19.0.2 inside: 3 replies" grep -q "3 received" <<<"$out"
out=$(inside ping -6 -c 3 -i 0.2 -W 3 fd00:19::2)
check "ping -6 -c 3 fd00:19::2 inside: 3 replies" grep -q "3 received" <<<"$out"
out=$(inside "$PY" "$USER_DIR/udp_ask.py" 198.19.0.2 7007)
check "a UDP datagram to 198.19.0.2:7007 comes back" [ "$out" = "wg-run udp" ]
out=$(inside "$PY" "$USER_DIR/udp_ask.py" fd00:19::2 7007)
check "... and to [fd00:19::2]:7007" [ "$out" = "wg-run udp" ]

log "--- confinement ---"
out=$(inside sh -c 'ip -o link show | awk -F": " "{print \$2}" | sort | tr "\n" " "')
check "the interfaces inside are lo and wg0 (got: $out)" [ "$out" = "lo wg0 " ]
routes=$(inside sh -c 'ip -4 route show; ip -6 route show')
log "  routes inside: $(tr '\n' ';' <<<"$routes")"
only_tunnel_routes() { ! grep -v -e " dev wg0" -e " dev lo" <<<"$routes" | grep -q .; }
check "every route inside goes through wg0 (or lo)" only_tunnel_routes
check "an IPv4 and an IPv6 default route through wg0" [ "$(grep -c "^default dev wg0" <<<"$routes")" = 2 ]
out=$(inside id -u)
check "COMMAND runs as the user's own uid (65534), not as root (got $out)" [ "$out" = 65534 ]
out=$(inside sh -c 'grep -E "^Cap(Inh|Prm|Eff|Amb)" /proc/self/status | awk "{print \$2}" | sort -u')
check "COMMAND holds no capabilities (got $out)" [ "$out" = 0000000000000000 ]
# The underlay (B's veth), the user's own network (A's veth) and their IPv6 twins: the
# packets go into the tunnel, where WireGuard has no peer for them.
H=127.0.0.1:9180
open_tun
ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups timeout -k 5 60 \
  "$WGNET_BIN/wg-run" -c "$USER_DIR/wg0.conf" --health "$H" -- sh -c '
  for url in http://198.18.0.2:8080/outside http://198.18.0.1:8081/outside \
             "http://[fd00:18::2]:8080/outside" "http://[fd00:18::1]:8081/outside"; do
    if curl -sS -g --max-time 3 "$url" >/dev/null 2>&1; then echo "reached $url"; fi
  done
  sleep 1' >"$TMP/leak.out" 2>>"$TMP/inside.log" &
LEAK_PID=$!
PIDS+=("$LEAK_PID")
eventually 100 sh -c "ip netns exec $NS_A curl -s --max-time 2 http://$H/metrics | grep -q 'reason=\"no_route\"} [1-9]'"
metrics=$(na curl -s --max-time 5 "http://$H/metrics")
wait "$LEAK_PID"
forget_pid "$LEAK_PID"
check "no connection to the underlay or to the user's network succeeds from inside" \
  [ ! -s "$TMP/leak.out" ]
check "those packets ended in WireGuard as 'no route' (/metrics: $(grep -o 'reason="no_route"} [0-9]*' <<<"$metrics"))" \
  grep -q 'reason="no_route"} [1-9]' <<<"$metrics"
check "/metrics counts the handshake" grep -q '^wgnet_handshakes_total [1-9]' <<<"$metrics"

log "--- the host hidden from COMMAND ---"
out=$(inside ls /sys/class/net | tr '\n' ' ')
check "/sys/class/net inside lists lo and wg0 only (got: $out)" [ "$out" = "lo wg0 " ]
# Every process's view of the network that /proc shows: the namespace's only. The host
# side of the underlay is 198.18.0.1 / fd00:18::1 (000012C6: 198.18.0.0 in
# /proc/net/route's byte order).
inside sh -c 'for f in fib_trie if_inet6 route; do cat /proc/[0-9]*/net/$f; done 2>/dev/null' >"$TMP/procnet.out"
check "/proc/*/net inside shows the tunnel's own address (sanity)" grep -q "198\.19\.0\.1" "$TMP/procnet.out"
check "/proc/*/net inside shows no underlay address (198.18.0.x, fd00:18::)" \
  sh -c "! grep -qiE '198\.18\.0\.|fd000018|000012C6' '$TMP/procnet.out'"
stray=$(grep -oE '([0-9]+\.){3}[0-9]+' "$TMP/procnet.out" | sort -u |
  grep -vE '^(0\.0\.0\.0|255\.255\.255\.255|127\.[0-9.]+|198\.19\.0\.[0-9]+)$' | tr '\n' ' ')
check "the only IPv4 addresses in /proc/*/net/fib_trie are loopback's and the tunnel's (others: ${stray:-none})" \
  [ -z "$stray" ]
# A process of the user's network, started by the test: not visible inside by PID or by
# command line.
ip netns exec "$NS_A" sleep "33.$RUN_ID" &
HOST_SLEEP=$!
PIDS+=("$HOST_SLEEP")
eventually 50 sh -c "grep -q 'sleep' /proc/$HOST_SLEEP/comm"
inside sh -c 'for p in /proc/[0-9]*; do echo "${p#/proc/} $(xargs -0 <"$p/cmdline")"; done' >"$TMP/procs.out"
log "  processes inside: $(tr '\n' ';' <"$TMP/procs.out")"
check "a host process ($HOST_SLEEP) is not in /proc inside" \
  sh -c "! grep -q '^$HOST_SLEEP ' '$TMP/procs.out' && ! grep -q 'sleep 33.$RUN_ID' '$TMP/procs.out'"
check "/proc inside lists COMMAND's own processes only (wg-run's init and sh: $(wc -l <"$TMP/procs.out"))" \
  [ "$(wc -l <"$TMP/procs.out")" -le 3 ]
kill "$HOST_SLEEP"
wait "$HOST_SLEEP" 2>/dev/null
forget_pid "$HOST_SLEEP"

# Unix sockets of the host: a daemon's under /tmp and under /run, and stand-ins for nscd
# and systemd-resolved's varlink socket at their real paths. They live in a mount
# namespace of the test's own, whose /run is a tmpfs (the host's /run is not touched).
# The listener logs "PATH inside|outside COMM" per connection: inside when the peer is in
# another user namespace than the listener's (setpriv and wg-run itself look names up
# through nscd too, from outside).
cat >"$TMP/listen.py" <<'PY'
import os, selectors, socket, struct, sys, time
log = open(sys.argv[1], "a", buffering=1)
sel = selectors.DefaultSelector()
for path in sys.argv[2:]:
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    os.chmod(path, 0o666)
    s.listen(16)
    sel.register(s, selectors.EVENT_READ, path)
deadline = time.monotonic() + 90
while time.monotonic() < deadline:
    for key, _ in sel.select(1):
        c, _ = key.fileobj.accept()
        pid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        try:
            where = "outside" if os.readlink(f"/proc/{pid}/ns/user") == os.readlink("/proc/self/ns/user") else "inside"
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            where, comm = "gone", "?"
        log.write(f"{key.data} {where} {comm}\n")
        c.sendall(b"host\n")
        c.close()
PY
cat >"$USER_DIR/probe.py" <<'PY'
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(path)
        print(path, s.recv(16).decode().strip() or "closed")
    except OSError as e:
        print(path, "unreachable:", e.strerror)
PY
chmod 0644 "$USER_DIR/probe.py"
HOST_TMP_SOCK="$TMP/host.sock"
NSCD=/run/nscd/socket
VARLINK=/run/systemd/resolve/io.systemd.Resolve
DAEMON=/run/wgnet-daemon.sock
cat >"$TMP/standins.sh" <<SH
# standins.sh CMD...: CMD (its status) in a mount namespace whose /run is a tmpfs that
# holds the stand-in sockets; the listener logs each connection to \$TMP/standins.log.
mount -t tmpfs -o mode=0755 wgnet-run /run || exit 99
mkdir -p /run/nscd /run/systemd/resolve
rm -f "$HOST_TMP_SOCK"
python3 "$TMP/listen.py" "$TMP/standins.log" $NSCD $VARLINK $DAEMON "$HOST_TMP_SOCK" &
sp=\$!
i=0
while [ \$i -lt 50 ] && ! [ -S "$HOST_TMP_SOCK" ]; do sleep 0.1; i=\$((i + 1)); done
"\$@"
rc=\$?
kill \$sp
wait \$sp 2>/dev/null
rm -f "$HOST_TMP_SOCK"
exit \$rc
SH
# with_standins CMD...: CMD as the user beside the stand-ins, stdout kept.
with_standins() {
  open_tun
  : >"$TMP/standins.log"
  ip netns exec "$NS_A" unshare --mount --propagation private sh "$TMP/standins.sh" \
    setpriv --reuid=nobody --regid=nogroup --clear-groups timeout -k 5 60 "$@" 2>>"$TMP/inside.log"
}
PROBE=("$PY" "$USER_DIR/probe.py" "$HOST_TMP_SOCK" "$DAEMON" "$NSCD" "$VARLINK")
out=$(with_standins "${PROBE[@]}")
log "  outside wg-run: $(tr '\n' ';' <<<"$out")"
check "sanity: outside wg-run, the four sockets answer" [ "$(grep -c ' host$' <<<"$out")" = 4 ]
out=$(with_standins getent ahostsv4 wgrun.test)
check "sanity: outside wg-run, getent asks the stand-in nscd" grep -qx "$NSCD outside getent" "$TMP/standins.log"
no_standin_contacted() { ! grep -q -e "^$NSCD inside" -e "^$VARLINK inside" "$TMP/standins.log"; }
for mode in default --share-host-sockets; do
  flag=()
  [ "$mode" = default ] || flag=("$mode")
  got="$TMP/probe$mode.out"
  with_standins "$WGNET_BIN/wg-run" -c "$USER_DIR/wg0.conf" "${flag[@]}" -- sh -c \
    'getent ahostsv4 wgrun.test | awk "{print \"getent \" \$1; exit}"; "$@"' sh "${PROBE[@]}" >"$got"
  log "  $mode: $(tr '\n' ';' <"$got")"
  check "$mode: getent resolves wgrun.test through DNS= in the tunnel" grep -qx "getent 198.19.0.2" "$got"
  check "$mode: the stand-in nscd socket is unreachable inside" grep -qx "$NSCD unreachable:.*" "$got"
  check "$mode: the stand-in varlink socket is unreachable inside" grep -qx "$VARLINK unreachable:.*" "$got"
  check "$mode: the stand-ins saw no connection from inside ($(sort -u "$TMP/standins.log" | tr '\n' ';'))" \
    no_standin_contacted
  if [ "$mode" = default ]; then
    check "default: a host socket under /tmp is unreachable inside" grep -qx "$HOST_TMP_SOCK unreachable:.*" "$got"
    check "default: a host daemon's socket under /run is unreachable inside" grep -qx "$DAEMON unreachable:.*" "$got"
  else
    check "--share-host-sockets: the host socket under /tmp answers inside" grep -qx "$HOST_TMP_SOCK host" "$got"
    check "--share-host-sockets: the host daemon's socket under /run answers inside" grep -qx "$DAEMON host" "$got"
  fi
done
# /etc/resolv.conf a link to systemd-resolved's stub file in /run (as Debian and Ubuntu
# with systemd-resolved have it), naming A's system resolver, which answers wgrun.test
# with 198.18.0.2: DNS= is used inside in both modes. An overlay on /etc and a /run of
# the test's own mount namespace; the host's are not touched.
mkdir -p "$TMP/etc-upper" "$TMP/etc-work"
ln -s ../run/systemd/resolve/stub-resolv.conf "$TMP/etc-upper/resolv.conf"
cat >"$TMP/stub_resolv.sh" <<SH
# stub_resolv.sh CMD...: CMD (its status) with /etc/resolv.conf linked into /run.
mount -t overlay wgnet-etc -o lowerdir=/etc,upperdir=$TMP/etc-upper,workdir=$TMP/etc-work /etc || exit 99
mount -t tmpfs -o mode=0755 wgnet-run /run || exit 99
mkdir -p /run/systemd/resolve
echo "nameserver 198.18.0.2" >/run/systemd/resolve/stub-resolv.conf
"\$@"
SH
with_stub_resolv() {
  open_tun
  ip netns exec "$NS_A" unshare --mount --propagation private sh "$TMP/stub_resolv.sh" \
    setpriv --reuid=nobody --regid=nogroup --clear-groups timeout -k 5 60 "$@" 2>>"$TMP/inside.log"
}
out=$(with_stub_resolv getent ahostsv4 wgrun.test | awk '{print $1; exit}')
check "sanity: with resolv.conf linked into /run, wgrun.test resolves outside wg-run to 198.18.0.2 (got $out)" \
  [ "$out" = 198.18.0.2 ]
for flag in "" --share-host-sockets; do
  out=$(with_stub_resolv "$WGNET_BIN/wg-run" -c "$USER_DIR/wg0.conf" ${flag:+"$flag"} -- getent ahostsv4 wgrun.test |
    awk '{print $1; exit}')
  check "${flag:-default}: resolv.conf linked into /run, DNS= is used inside (wgrun.test: $out)" [ "$out" = 198.19.0.2 ]
done
# /tmp inside is a fresh one; a working directory under it is refused (relative paths
# would reach the host's /tmp).
mkdir -p "$TMP/cwd" && chmod 0755 "$TMP/cwd"
out=$(inside sh -c 'ls -A /tmp | wc -l')
check "/tmp inside is empty (got $out entries)" [ "$out" = 0 ]
expect_error "a working directory under /tmp is refused, with its fix" \
  "wg-run: the working directory $TMP/cwd is under /tmp, which is private inside: start wg-run elsewhere, or give --share-host-sockets" \
  sh -c "cd '$TMP/cwd' && exec ip netns exec '$NS_A' setpriv --reuid=nobody --regid=nogroup --clear-groups '$WGNET_BIN/wg-run' -c '$USER_DIR/wg0.conf' -- true"
out=$(cd "$TMP/cwd" && wg_run "$USER_DIR/wg0.conf" --share-host-sockets -- pwd 2>>"$TMP/inside.log")
check "... and kept with --share-host-sockets (got: $out)" [ "$out" = "$TMP/cwd" ]

log "--- DNS ---"
check "sanity: A's system resolver answers (getent outside wg-run)" \
  sh -c "ip netns exec $NS_A getent ahostsv4 leak.test | grep -q 198.18.0.2"
: >"$TMP/dns-system.queries"
out=$(inside getent ahostsv4 wgrun.test | awk '{print $1; exit}')
check "wgrun.test resolves inside through DNS= in the tunnel (got $out)" [ "$out" = 198.19.0.2 ]
out=$(inside cat /etc/resolv.conf | grep -v '^#')
check "resolv.conf inside names DNS= only" [ "$out" = "nameserver 198.19.0.2" ]
inside getent ahostsv4 leak.test >/dev/null
check "a name the tunnel's DNS does not know does not resolve inside" [ $? -ne 0 ]
wg_run "$USER_DIR/nodns.conf" -- getent ahostsv4 leak.test >/dev/null 2>"$TMP/nodns.err"
rc=$?
check "without DNS= a lookup fails inside (status $rc)" [ "$rc" -ne 0 ]
check "... and wg-run warned: $(head -1 "$TMP/nodns.err")" \
  grep -qF "wg-run: warning: $USER_DIR/nodns.conf has no DNS=: names will not resolve inside (only /etc/hosts); add DNS = a resolver's address in the tunnel" "$TMP/nodns.err"
check "the system resolver saw no query from inside ($(wc -l <"$TMP/dns-system.queries") logged)" \
  [ ! -s "$TMP/dns-system.queries" ]
check "/etc/resolv.conf outside is untouched by wg-run's mount" \
  sh -c "ip netns exec $NS_A cat /etc/resolv.conf | grep -qx 'nameserver 198.18.0.2'"

log "--- exit status and signals ---"
inside sh -c 'exit 7'
rc=$?
check "-- sh -c 'exit 7' exits 7 (got $rc)" [ "$rc" = 7 ]
wg_run "$USER_DIR/wg0.conf" sh -c 'exit 4' 2>>"$TMP/inside.log"
rc=$?
check "without --, COMMAND starts at the first argument not wg-run's: sh -c 'exit 4' exits 4 (got $rc)" [ "$rc" = 4 ]
wg_run "$USER_DIR/wg0.conf" --quiet true 2>>"$TMP/inside.log"
rc=$?
check "without --, after a flag of wg-run's: true exits 0 (got $rc)" [ "$rc" = 0 ]
inside sh -c 'kill -KILL $$'
rc=$?
check "COMMAND killed by SIGKILL: 137 (got $rc)" [ "$rc" = 137 ]
wg_run "$USER_DIR/wg0.conf" -- no-such-command-wgrun 2>"$TMP/nocmd.err"
rc=$?
check "no such COMMAND: exit 127 (got $rc)" [ "$rc" = 127 ]
check "... with 'wg-run: no-such-command-wgrun: command not found'" \
  grep -qx "wg-run: no-such-command-wgrun: command not found" "$TMP/nocmd.err"
# A COMMAND with no handler of its own, ended by a signal to wg-run: as a shell's child.
for sig in TERM INT; do
  open_tun
  ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups timeout -k 5 60 \
    "$WGNET_BIN/wg-run" -c "$USER_DIR/wg0.conf" -- sleep "31.$RUN_ID" 2>>"$TMP/inside.log" &
  RUN_PID=$!
  PIDS+=("$RUN_PID")
  eventually 100 pgrep -f "^sleep 31.$RUN_ID\$" >/dev/null
  WGRUN=$(pgrep -x -P "$RUN_PID" wg-run)
  started=$SECONDS
  kill "-$sig" "$WGRUN"
  wait "$RUN_PID"
  rc=$?
  forget_pid "$RUN_PID"
  want=$((128 + $(kill -l "$sig")))
  check "SIG$sig to wg-run ends a COMMAND without a handler (sleep): exit $want (got $rc, $((SECONDS - started)) s)" \
    [ "$rc" = "$want" -a $((SECONDS - started)) -lt 10 ]
done
# Ctrl-C on a terminal: COMMAND (in wg-run's foreground process group) gets SIGINT once,
# from the terminal; neither wg-run nor the namespace's init sends it again. (No
# timeout(1) here: it would pass the terminal's SIGINT on too. pty_int.py has a limit.)
cat >"$TMP/pty_int.py" <<'PY'
import os, pty, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
time.sleep(2)
os.write(fd, b"\x03")
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print(os.waitstatus_to_exitcode(status))
        sys.exit(0)
    try:
        os.read(fd, 1024)
    except OSError:
        time.sleep(0.1)
os.kill(pid, 9)
os.waitpid(pid, 0)
print("hung")
PY
rm -f "$USER_DIR/ints"
open_tun
rc=$(ip netns exec "$NS_A" "$PY" "$TMP/pty_int.py" setpriv --reuid=nobody --regid=nogroup --clear-groups \
  "$WGNET_BIN/wg-run" -c "$USER_DIR/wg0.conf" -- sh -c \
  'trap "echo INT >>$0/ints" INT; i=0; while [ $i -lt 40 ]; do sleep 0.1; i=$((i + 1)); done; exit 5' "$USER_DIR")
check "Ctrl-C on wg-run's terminal reaches COMMAND once ($(wc -l <"$USER_DIR/ints" 2>/dev/null || echo 0)), its status passes (got $rc)" \
  [ "$(cat "$USER_DIR/ints" 2>/dev/null)" = INT -a "$rc" = 5 ]
# A background process COMMAND leaves behind ends with it.
inside sh -c "sleep 32.$RUN_ID </dev/null >/dev/null 2>&1 & exit 0"
rc=$?
orphans=$(pgrep -f "^sleep 32.$RUN_ID\$" | tr '\n' ' ')
check "a process COMMAND left running is gone when wg-run exits (status $rc; left: ${orphans:-none})" \
  [ "$rc" = 0 -a -z "$orphans" ]
for p in $orphans; do kill "$p"; done

# A long COMMAND: it records its pid, namespaces and signals; SIGHUP, SIGUSR1, SIGTERM.
STATE="$USER_DIR/state"
cat >"$USER_DIR/long.sh" <<'SH'
echo $$ >"$1/pid"
readlink /proc/self/ns/net /proc/self/ns/user /proc/self/ns/mnt /proc/self/ns/pid >"$1/ns"
trap 'echo HUP >>"$1/signals"' HUP
trap 'echo TERM >>"$1/signals"; exit 143' TERM
trap 'echo USR2 >>"$1/signals"' USR2
i=0
while [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
SH
chmod 0644 "$USER_DIR/long.sh"
mkdir -p "$STATE" && chown nobody:nogroup "$STATE"
open_tun
ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups timeout -k 5 90 \
  "$WGNET_BIN/wg-run" -c "$USER_DIR/wg0.conf" --uapi "$USER_DIR/wg.sock" -- sh "$USER_DIR/long.sh" "$STATE" \
  >"$TMP/long.log" 2>&1 &
RUN_PID=$!
PIDS+=("$RUN_PID")
eventually 100 test -s "$STATE/ns"
eventually 50 test -S "$USER_DIR/wg.sock"
uapi=$(as_user "$PY" "$USER_DIR/uapi_get.py" "$USER_DIR/wg.sock")
check "the UAPI (--uapi) answers get=1 with the peer" grep -q "^public_key=" <<<"$uapi"
check "... and the listen port" grep -qx "listen_port=51820" <<<"$uapi"
# SIGHUP: the config re-read (a new AllowedIPs for the peer), and passed on to COMMAND.
# (Edited in place, as the sandbox needs: sed -i would put a new file there.)
sed 's|^AllowedIPs = .*|AllowedIPs = 198.19.0.0/24, fd00:19::/64, 198.19.1.0/24|' "$USER_DIR/wg0.conf" >"$TMP/wg0.new"
cat "$TMP/wg0.new" >"$USER_DIR/wg0.conf"
# wg-run is the child of timeout(1), whose pid $! is (ip and setpriv exec)
WGRUN=$(pgrep -x -P "$RUN_PID" wg-run)
kill -HUP "$WGRUN"
eventually 30 grep -qx HUP "$STATE/signals"
check "SIGHUP to wg-run reaches COMMAND" grep -qx HUP "$STATE/signals"
check "... and reloads the config (the peer has 198.19.1.0/24)" \
  eventually 30 sh -c "ip netns exec $NS_A setpriv --reuid=nobody --regid=nogroup --clear-groups $PY $USER_DIR/uapi_get.py $USER_DIR/wg.sock | grep -qx allowed_ip=198.19.1.0/24"
sed 's|, 198.19.1.0/24||' "$USER_DIR/wg0.conf" >"$TMP/wg0.new"
cat "$TMP/wg0.new" >"$USER_DIR/wg0.conf"
kill -USR1 "$WGRUN"
check "SIGUSR1 reloads (198.19.1.0/24 gone again)" \
  eventually 30 sh -c "! ip netns exec $NS_A setpriv --reuid=nobody --regid=nogroup --clear-groups $PY $USER_DIR/uapi_get.py $USER_DIR/wg.sock | grep -qx allowed_ip=198.19.1.0/24"
kill -USR2 "$WGRUN"
eventually 30 grep -qx USR2 "$STATE/signals"
check "SIGUSR2 reaches COMMAND, SIGUSR1 does not (signals: $(tr '\n' ' ' <"$STATE/signals"))" \
  [ "$(tr '\n' ' ' <"$STATE/signals")" = "HUP USR2 " ]
# COMMAND's PID as the test sees it (its own $$ counts in its PID namespace).
CMD_PID=$(pgrep -f "^sh $USER_DIR/long.sh")
read -r NETNS USERNS MNTNS PIDNS < <(tr '\n' ' ' <"$STATE/ns")
own_namespaces() {
  [ "$NETNS" != "$(readlink "/proc/$WGRUN/ns/net")" ] && [ "$USERNS" != "$(readlink "/proc/$WGRUN/ns/user")" ] &&
    [ "$MNTNS" != "$(readlink "/proc/$WGRUN/ns/mnt")" ] && [ "$PIDNS" != "$(readlink "/proc/$WGRUN/ns/pid")" ]
}
check "COMMAND has network, user, mount and PID namespaces of its own" own_namespaces
kill -TERM "$WGRUN"
wait "$RUN_PID"
rc=$?
forget_pid "$RUN_PID"
check "SIGTERM: COMMAND ends and wg-run exits 143 (got $rc)" [ "$rc" = 143 ]
check "... COMMAND saw the SIGTERM" grep -qx TERM "$STATE/signals"
check "... and no process is left: neither COMMAND ($CMD_PID) nor wg-run ($WGRUN)" \
  sh -c "! kill -0 $CMD_PID 2>/dev/null && ! kill -0 $WGRUN 2>/dev/null"
left=$(for p in /proc/[0-9]*; do readlink "$p/ns/net" "$p/ns/user" "$p/ns/pid" 2>/dev/null; done |
  grep -cxF -e "$NETNS" -e "$USERNS" -e "$PIDNS")
check "... no process in its network, user or PID namespace ($left)" [ "$left" = 0 ]
check "... no TUN left in the user's namespace A" sh -c "! ip netns exec $NS_A ip -o link show | grep -qv -e ': lo:' -e '${PREFIX}va'"
check "... and the UAPI socket is removed" [ ! -e "$USER_DIR/wg.sock" ]

log "--- --netns: a namespace the user made ---"
# The holder: a process of the user's in a user and network namespace of the user's own
# (as a rootless container's); ip, setpriv, unshare and sh all exec, so $! is it.
ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups \
  unshare --user --map-root-user --net sh -c 'exec sleep 60' &
HOLDER=$!
PIDS+=("$HOLDER")
eventually 50 sh -c "[ \"\$(readlink /proc/$HOLDER/ns/net)\" != \"\$(readlink /proc/self/ns/net)\" ] && grep -q sleep /proc/$HOLDER/comm"
open_tun
ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups timeout -k 5 60 \
  "$WGNET_BIN/wg-run" -c "$USER_DIR/wg0.conf" --netns "/proc/$HOLDER/ns/net" >"$TMP/netns.log" 2>&1 &
NETNS_PID=$!
PIDS+=("$NETNS_PID")
eventually 100 sh -c "nsenter -t $HOLDER -n ip -o link show wg0 2>/dev/null | grep -q UP"
out=$(timeout 30 nsenter -t "$HOLDER" -n curl -sS --max-time 20 http://198.19.0.2:8080/file | sha256sum | cut -d' ' -f1)
check "--netns /proc/PID/ns/net: the namespace's programs reach the peer, file intact" [ "$out" = "$WANT" ]
WGRUN=$(pgrep -x -P "$NETNS_PID" wg-run)
kill -TERM "${WGRUN:-$NETNS_PID}"
wait "$NETNS_PID"
rc=$?
forget_pid "$NETNS_PID"
check "--netns: SIGTERM stops wg-run with status 0 (got $rc)" [ "$rc" = 0 ]
check "... and the namespace's wg0 is gone with it" \
  eventually 30 sh -c "! nsenter -t $HOLDER -n ip link show wg0 >/dev/null 2>&1"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
forget_pid "$HOLDER"

log "--- the errors a user meets ---"
expect_error "no Address=" \
  "wg-run: $USER_DIR/noaddr.conf: [Interface] has no Address (wg-run gives the namespace these addresses; add Address = 198.19.0.1/24, say)" \
  wg_run "$USER_DIR/noaddr.conf" -- true
# User namespaces disabled: user.max_user_namespaces = 0 in a user namespace of the
# user's own (a limit set there holds for the namespaces made inside it).
expect_error "user namespaces disabled (user.max_user_namespaces = 0)" \
  "wg-run: cannot create a user namespace: unprivileged user namespaces are disabled, user.max_user_namespaces is 0 (as root: sysctl -w user.max_user_namespaces=15000, and in /etc/sysctl.d/ to keep it)" \
  as_user unshare --user --map-root-user sh -c \
  "echo 0 >/proc/sys/user/max_user_namespaces && exec '$WGNET_BIN/wg-run' -c '$USER_DIR/wg0.conf' -- true"
# The TUN device closed to the user, then missing: in a mount namespace of the test's,
# /dev/net/tun covered by a node of mode 0600 (or /dev/net by an empty directory).
mknod -m 0600 "$TMP/tun0600" c 10 200
mkdir -p "$TMP/emptydir"
open_tun
expect_error "/dev/net/tun not accessible" \
  "wg-run: cannot create the TUN interface: /dev/net/tun is not accessible to uid 65534 (mode 0600, owner uid 0): make it 0666 as Debian and Ubuntu ship it (as root: chmod 0666 /dev/net/tun)" \
  ip netns exec "$NS_A" unshare --mount --propagation private sh -c \
  "mount --bind '$TMP/tun0600' /dev/net/tun && exec setpriv --reuid=nobody --regid=nogroup --clear-groups '$WGNET_BIN/wg-run' -c '$USER_DIR/wg0.conf' -- true"
expect_error "/dev/net/tun missing" \
  "wg-run: cannot create the TUN interface: /dev/net/tun is missing (as root: modprobe tun; or mknod /dev/net/tun c 10 200)" \
  ip netns exec "$NS_A" unshare --mount --propagation private sh -c \
  "mount --bind '$TMP/emptydir' /dev/net && exec setpriv --reuid=nobody --regid=nogroup --clear-groups '$WGNET_BIN/wg-run' -c '$USER_DIR/wg0.conf' -- true"
expect_error "usage: an unknown option before COMMAND" \
  "wg-run: unknown option '--bogus' (--help for usage)" wg_run "$USER_DIR/wg0.conf" --bogus true
out=$("$WGNET_BIN/wg-run" -v)
check "-v prints the version, as --version does ('$out')" [ "$out" = "$("$WGNET_BIN/wg-run" --version)" ]
check "... which starts 'wg-run '" [ "${out#wg-run }" != "$out" ]
expect_error "usage: no COMMAND" "wg-run: no COMMAND: wg-run -c FILE -- COMMAND [ARGS...] (--help for usage)" \
  wg_run "$USER_DIR/wg0.conf"

finish wg-run
