#!/usr/bin/env bash
# The daemons confined as they run in production, read from /proc and shown to act:
#   - wg-netstack (sandbox on by default): Seccomp 2 and NoNewPrivs 1 in /proc/PID/status,
#     traffic through SOCKS5, `wg show` over its UAPI; a SIGHUP after its WGConfig was
#     edited in place is applied, one whose config names another WGConfig (beside the
#     first, or in another directory) fails with the sandbox's reason and changes
#     nothing while traffic goes on; SIGTERM still removes the UAPI socket. With --no-sandbox the same reload is
#     applied; on a kernel without Landlock (tests/support/no_landlock.cpp) it says it
#     could not confine its files and works, its system calls still filtered.
#   - wg-tun --user nobody: uid and gid nobody's, CapEff exactly CAP_NET_ADMIN and
#     CAP_NET_BIND_SERVICE, Seccomp 2; then traffic and what wg(8) does afterwards: a new
#     private key, peers removed and added, allowed IPs, listen ports (one below 1024),
#     fwmark; the interface moved to another namespace (down there: following it needs
#     CAP_SYS_ADMIN) and back (up again); `ip link del` ends it. Then wg-quick up and down
#     with WG_QUICK_USERSPACE_IMPLEMENTATION=wg-tun and WG_TUN_USER=nobody, as the
#     packaged drop-in runs it.
#
#        namespace $NS_A                                 namespace $NS_B
#   wg-netstack --interface $WG_N   <══ WireGuard ══>   wireguard-go $WG_B, 198.19.0.2
#     SOCKS5 127.0.0.1:1080                              HTTP :8000 (a 2 MB file)
#   then wg-tun --user nobody $WG_A, 198.19.0.1           (the same)
#
# Topology: lib.sh. Usage: sandbox_test.sh BIN_DIR (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netstack_peer_lib.sh"
require_root
WG_N="wn${RUN_ID}"
trap 'cleanup; rm -f "/var/run/wireguard/$WG_N.sock"' EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
for b in wg-netstack no_landlock; do
  [ -x "$WGNET_BIN/$b" ] || { echo "$WGNET_BIN/$b missing: build it first"; exit 1; }
done
SOCK="/var/run/wireguard/$WG_N.sock"

# status_field PID NAME: a field of /proc/PID/status ("Seccomp", "NoNewPrivs", ...).
status_field() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status" 2>/dev/null; }
# fetch_ok: the 2 MB file through SOCKS5 arrives intact.
fetch_ok() {
  na curl -sS --max-time 20 --socks5 "$SOCKS" -o "$TMP/got" http://198.19.0.2:8000/file 2>>"$TMP/curl.log" &&
    [ "$(sha256sum <"$TMP/got")" = "$(sha256sum <"$TMP/www/file")" ]
}
# peers_are N: `wg show` over the UAPI lists N peers.
peers_are() { test "$(na wg show "$WG_N" peers 2>/dev/null | grep -c .)" = "$1"; }
# wg_conf FILE PEER_C: writes a WGConfig file with B as a peer, and C too if PEER_C is yes.
wg_conf() {
  {
    printf '[Interface]\nPrivateKey = %s\nListenPort = %s\nAddress = 198.19.0.1/24\n\n' "$(cat "$TMP/a.key")" "$PORT_A"
    printf '[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.0.2/32\nEndpoint = 198.18.0.2:%s\n' "$(cat "$TMP/b.pub")" "$PORT_B"
    [ "$2" = yes ] && printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.0.3/32\n' "$(cat "$TMP/c.pub")"
  } >"$1"
  chmod 600 "$1"
}
# main_conf WGCONFIG: the wireproxy-style file wg-netstack reads, naming WGCONFIG.
main_conf() {
  printf 'WGConfig = %s\n\n[Socks5]\nBindAddress = %s\n' "$1" "$SOCKS" >"$TMP/conf/main.conf"
  chmod 600 "$TMP/conf/main.conf"
}
# start_n NAME [WRAPPER...] -- [FLAGS...]: wg-netstack on main.conf as interface $WG_N
# (log $TMP/NAME.log), waiting for its SOCKS5 listener; NETSTACK_PID is its PID.
start_n() {
  local name=$1 wrapper=()
  shift
  while [ "$1" != -- ]; do wrapper+=("$1"); shift; done
  shift
  run_bg "$NS_A" "$name" "${wrapper[@]}" "$WGNET_BIN/wg-netstack" -c "$TMP/conf/main.conf" \
    --interface "$WG_N" --log-level verbose "$@"
  NETSTACK_PID=${PIDS[-1]}
  wait_listen "$NS_A" "$SOCKS" && eventually 50 test -S "$SOCK"
}
# stop_n: SIGTERM, and wait for the exit status (0 expected).
stop_n() {
  kill -TERM "$NETSTACK_PID"
  wait "$NETSTACK_PID"
  local rc=$?
  forget_pid "$NETSTACK_PID"
  return "$rc"
}

log "=== wg-netstack confined ==="
make_namespaces
(umask 077; for k in a b c; do wg genkey >"$TMP/$k.key"; done)
for k in a b c; do wg pubkey <"$TMP/$k.key" >"$TMP/$k.pub"; done
start_impl "$NS_B" "$WG_B" wireguard-go || { fail "wireguard-go in B"; finish sandbox; }
configure "$NS_B" "$WG_B" "$TMP/b.key" "$PORT_B" "$(cat "$TMP/a.pub")" "198.18.0.1:$PORT_A" \
  198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
mkdir -p "$TMP/www" "$TMP/conf" "$TMP/outside"
head -c 2000000 /dev/urandom >"$TMP/www/file"
run_bg "$NS_B" http python3 -m http.server 8000 --bind 198.19.0.2 --directory "$TMP/www"
wait_listen "$NS_B" 198.19.0.2:8000 || fail "HTTP server in B"
wg_conf "$TMP/conf/wg.conf" no
wg_conf "$TMP/conf/wg2.conf" yes
wg_conf "$TMP/outside/wg.conf" no
main_conf "$TMP/conf/wg.conf"

start_n sandboxed -- || fail "wg-netstack did not start"
check "/proc: Seccomp 2 (a filter)" test "$(status_field "$NETSTACK_PID" Seccomp)" = 2
check "/proc: NoNewPrivs 1" test "$(status_field "$NETSTACK_PID" NoNewPrivs)" = 1
check "log: files confined by Landlock" grep -q "sandbox: files confined (Landlock ABI [0-9]*)" "$TMP/sandboxed.log"
check "traffic through SOCKS5, sha256 intact" eventually 50 fetch_ok
check "wg show over the UAPI: one peer" peers_are 1

log "--- SIGHUP under the sandbox ---"
wg_conf "$TMP/conf/wg.conf" yes  # (rewritten in place: the same file)
kill -HUP "$NETSTACK_PID"
check "its WGConfig edited in place is applied: two peers" eventually 50 peers_are 2
main_conf "$TMP/conf/wg2.conf"
kill -HUP "$NETSTACK_PID"
check "a WGConfig beside the first one (another instance's): the sandbox's reason is logged" \
  eventually 50 grep -q "reload: .*conf/wg2.conf: cannot open: Permission denied; nothing changed (the sandbox" \
  "$TMP/sandboxed.log"
main_conf "$TMP/outside/wg.conf"
kill -HUP "$NETSTACK_PID"
check "a WGConfig in another directory: the sandbox's reason is logged" \
  eventually 50 grep -q "reload: .*outside/wg.conf: cannot open: Permission denied; nothing changed (the sandbox" \
  "$TMP/sandboxed.log"
check "... and nothing changed: still two peers" peers_are 2
check "... and traffic goes on" fetch_ok
check "SIGTERM: exit status 0" stop_n
check "SIGTERM: the UAPI socket is removed" test ! -e "$SOCK"
check "no line of the run says a system call was denied" eval "! grep -q 'not on the allow-list' '$TMP/sandboxed.log'"

log "--- --no-sandbox ---"
wg_conf "$TMP/conf/wg.conf" no
main_conf "$TMP/conf/wg.conf"
start_n unconfined -- --no-sandbox || fail "wg-netstack --no-sandbox did not start"
check "/proc: Seccomp 0" test "$(status_field "$NETSTACK_PID" Seccomp)" = 0
wg_conf "$TMP/outside/wg.conf" yes
main_conf "$TMP/outside/wg.conf"
kill -HUP "$NETSTACK_PID"
check "the same reload from another directory is applied: two peers" eventually 50 peers_are 2
check "traffic through SOCKS5" fetch_ok
check "SIGTERM: exit status 0" stop_n

log "--- a kernel without Landlock ---"
main_conf "$TMP/conf/wg.conf"
start_n no-landlock "$WGNET_BIN/no_landlock" -- || fail "wg-netstack under no_landlock did not start"
check "log: it could not confine its files" \
  grep -q "warning: sandbox: this kernel has no Landlock (or it is turned off): files are not confined" \
  "$TMP/no-landlock.log"
check "/proc: its system calls are still filtered (Seccomp 2)" test "$(status_field "$NETSTACK_PID" Seccomp)" = 2
check "traffic through SOCKS5" eventually 50 fetch_ok
check "SIGTERM: exit status 0" stop_n

log "--- --sandbox-log ---"
start_n logging -- --sandbox-log || fail "wg-netstack --sandbox-log did not start"
check "/proc: Seccomp 2" test "$(status_field "$NETSTACK_PID" Seccomp)" = 2
check "traffic through SOCKS5" eventually 50 fetch_ok
check "SIGTERM: exit status 0" stop_n

log "=== wg-tun --user nobody ==="
ip netns exec "$NS_B" ip link set "$WG_B" down
# fetch_tun: the 2 MB file over the tunnel from wg-tun's namespace, sha256 intact.
fetch_tun() {
  na curl -sS --max-time 20 -o "$TMP/got" http://198.19.0.2:8000/file 2>>"$TMP/curl.log" &&
    [ "$(sha256sum <"$TMP/got")" = "$(sha256sum <"$TMP/www/file")" ]
}
# handshake_after T: wg-tun's latest handshake with B is later than T (seconds).
handshake_after() { test "$(na wg show "$WG_A" latest-handshakes | awk '{print $2}' | head -1)" -gt "$1"; }
ip netns exec "$NS_B" ip link set "$WG_B" up
start_impl "$NS_A" "$WG_A" wg-tun --user nobody || fail "wg-tun --user nobody did not start"
TUN_PID=${PIDS[-1]}
configure "$NS_A" "$WG_A" "$TMP/a.key" "$PORT_A" "$(cat "$TMP/b.pub")" "198.18.0.2:$PORT_B" \
  198.19.0.1 fd00:19::1 198.19.0.2 fd00:19::2
check "/proc: real and effective uid are nobody's" \
  test "$(awk '$1 == "Uid:" {print $2 " " $3}' "/proc/$TUN_PID/status")" = "$(id -u nobody) $(id -u nobody)"
check "/proc: gid nobody's, no supplementary groups" \
  eval "test \"\$(awk '\$1 == \"Gid:\" {print \$2}' /proc/$TUN_PID/status)\" = $(id -g nobody) && test -z \"\$(awk '\$1 == \"Groups:\" {print \$2}' /proc/$TUN_PID/status)\""
check "/proc: CapEff is CAP_NET_ADMIN + CAP_NET_BIND_SERVICE only" \
  test "$(status_field "$TUN_PID" CapEff)" = 0000000000001400
check "/proc: CapPrm the same, CapAmb none" \
  test "$(status_field "$TUN_PID" CapPrm) $(status_field "$TUN_PID" CapAmb)" = "0000000000001400 0000000000000000"
check "/proc: Seccomp 2, NoNewPrivs 1" \
  test "$(status_field "$TUN_PID" Seccomp) $(status_field "$TUN_PID" NoNewPrivs)" = "2 1"
check "traffic: ping and a 2 MB download through the tunnel" eval "ping_eventually '$NS_A' 198.19.0.2 && fetch_tun"

t0=$(date +%s)
(umask 077; wg genkey >"$TMP/a2.key")
wg pubkey <"$TMP/a2.key" >"$TMP/a2.pub"
nb wg set "$WG_B" peer "$(cat "$TMP/a.pub")" remove peer "$(cat "$TMP/a2.pub")" allowed-ips 198.19.0.1/32,fd00:19::1/128 \
  endpoint "198.18.0.1:$PORT_A"
check "wg set private-key: accepted" na wg set "$WG_A" private-key "$TMP/a2.key"
check "... wg show has the new public key" test "$(na wg show "$WG_A" public-key)" = "$(cat "$TMP/a2.pub")"
check "... and a new handshake carries traffic" eval "ping_eventually '$NS_A' 198.19.0.2 && handshake_after $((t0 - 1))"
check "wg set peer remove: no peer left" eval "na wg set '$WG_A' peer '$(cat "$TMP/b.pub")' remove && test -z \"\$(na wg show '$WG_A' peers)\""
check "... and traffic stops" eval "! ping_ok '$NS_A' 198.19.0.2"
check "wg set peer add with allowed IPs and endpoint" \
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" allowed-ips 198.19.0.2/32,fd00:19::2/128 endpoint "198.18.0.2:$PORT_B"
check "... allowed IPs as given" test "$(na wg show "$WG_A" allowed-ips | cut -f2)" = "198.19.0.2/32 fd00:19::2/128"
check "... traffic again" ping_eventually "$NS_A" 198.19.0.2
check "wg set listen-port 51830" eval "na wg set '$WG_A' listen-port 51830 && test \"\$(na wg show '$WG_A' listen-port)\" = 51830"
check "wg set listen-port 443 (below 1024)" eval "na wg set '$WG_A' listen-port 443 && test \"\$(na wg show '$WG_A' listen-port)\" = 443"
check "... something listens on UDP 443 in A" eval "na ss -lunH | awk '{print \$4}' | grep -q ':443\$'"
nb wg set "$WG_B" peer "$(cat "$TMP/a2.pub")" endpoint 198.18.0.1:443
check "... and B reaches it there" ping_eventually "$NS_B" 198.19.0.1
check "wg set fwmark 0x2a" eval "na wg set '$WG_A' fwmark 0x2a && test \"\$(na wg show '$WG_A' fwmark)\" = 0x2a"
check "... traffic with the mark" fetch_tun

NS_C="${PREFIX}c"
ip netns add "$NS_C"
downs() { grep -c "interface $WG_A is down" "$TMP/$WG_A.log"; }
downs_before=$(downs)
more_downs() { test "$(downs)" -gt "$downs_before"; }
na ip link set "$WG_A" netns "$NS_C"
check "moved to another namespace: wg-tun logs the interface down" eventually 50 more_downs
ip netns exec "$NS_C" ip link set "$WG_A" netns "$NS_A"
na ip addr add 198.19.0.1/24 dev "$WG_A"
na ip link set "$WG_A" up
check "... and still runs" kill -0 "$TUN_PID"
check "moved back and up: traffic again" eval "ping_eventually '$NS_A' 198.19.0.2 && fetch_tun"
ip netns del "$NS_C"
check "no line of the run says a system call was denied" eval "! grep -q 'not on the allow-list' '$TMP/$WG_A.log'"
na ip link del "$WG_A"
check "ip link del: wg-tun exits 0" eval "timeout 10 tail --pid=$TUN_PID -f /dev/null; wait $TUN_PID"
forget_pid "$TUN_PID"
na wg show interfaces >/dev/null 2>&1
check "the socket it could not remove (root's directory) is gone after wg show" \
  test ! -e "/var/run/wireguard/$WG_A.sock"

log "--- wg-quick, as the packaged drop-in runs it ---"
QI="wq${RUN_ID}"
mkdir -p "$TMP/quick"
cat >"$TMP/quick/$QI.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a2.key")
ListenPort = $PORT_A
Address = 198.19.0.1/24

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32
Endpoint = 198.18.0.2:$PORT_B
CONF
chmod 600 "$TMP/quick/$QI.conf"
nb wg set "$WG_B" peer "$(cat "$TMP/a2.pub")" endpoint "198.18.0.1:$PORT_A"
PATH="$WGNET_BIN:$PATH" WG_QUICK_USERSPACE_IMPLEMENTATION=wg-tun WG_TUN_USER=nobody \
  na wg-quick up "$TMP/quick/$QI.conf" >"$TMP/wg-quick.log" 2>&1
check "wg-quick up: the daemon runs as nobody" \
  eval "pgrep -u nobody -x wg-tun >/dev/null"
check "... traffic" eval "ping_eventually '$NS_A' 198.19.0.2 && fetch_tun"
QPID=$(pgrep -u nobody -x wg-tun | head -1)
check "wg-quick down" eval "na wg-quick down '$TMP/quick/$QI.conf' >>'$TMP/wg-quick.log' 2>&1"
check "... the daemon is gone" eventually 50 eval "! kill -0 '${QPID:-0}' 2>/dev/null"
rm -f "/var/run/wireguard/$QI.sock"

finish sandbox
