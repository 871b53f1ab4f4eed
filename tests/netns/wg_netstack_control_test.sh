#!/usr/bin/env bash
# wg-netstack driven like a WireGuard interface, and its command line:
#   - with --interface NAME it serves the UAPI on /var/run/wireguard/NAME.sock (0600):
#     `wg show` sees it, `wg set` removes and re-adds the peer at run time (traffic stops,
#     then flows again), malformed requests get wg-tun's errno replies, and a second
#     wg-netstack never takes over the live socket;
#   - `wg syncconf` adds a peer and `wg setconf` replaces them, traffic flowing throughout;
#   - SIGHUP re-reads the config file and applies it as `wg syncconf` does while four
#     200 MB transfers run: a peer added and a keepalive changed, every transfer intact;
#     a config that does not parse changes nothing and the proxy keeps running;
#   - usage errors are one line on stderr and exit status 1; -n checks a file (Config OK /
#     its error with the line); -v; -d returns once the proxy is up (0) or failed (1).
#
#        namespace $NS_A                                 namespace $NS_B
#   wg-netstack --interface $WG_N   <══ WireGuard ══>   wireguard-go $WG_B, 198.19.0.2
#     SOCKS5 127.0.0.1:1080                              proxy_load.py server :9000
#
# Topology: lib.sh, netstack_peer_lib.sh. Usage: wg_netstack_control_test.sh BIN_DIR
# (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netstack_peer_lib.sh"
require_root
WG_N="wn${RUN_ID}"
WG_D="wd${RUN_ID}"
trap 'cleanup; rm -f "/var/run/wireguard/$WG_N.sock" "/var/run/wireguard/$WG_D.sock"' EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
LOAD_PY=$(cd "$(dirname "$0")" && pwd)/proxy_load.py
ABUSE_PY=$(cd "$(dirname "$0")" && pwd)/uapi_abuse.py
SOCK="/var/run/wireguard/$WG_N.sock"
PORT=9000

# fetch_ok: one 100 kB download through SOCKS5 from B's server arrives intact.
fetch_ok() {
  local line
  line=$(na timeout 30 python3 "$LOAD_PY" load socks5 "$SOCKS" 198.19.0.2 "$PORT" 1 100000 2>/dev/null)
  [ "$(awk '{print $2, $3}' <<<"$line")" = "2 0" ]
}
# socks_reply HOST PORT: the SOCKS5 reply code to a CONNECT (raw, no retries).
socks_reply() {
  na timeout 20 python3 - "$1" "$2" <<'PY'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", 1080), timeout=15)
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00"
s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton(sys.argv[1]) + struct.pack(">H", int(sys.argv[2])))
print(s.recv(3)[1])
PY
}
# one_line_exit1 WHAT CMD...: CMD exits 1 with exactly one line on stderr, nothing on stdout.
one_line_exit1() {
  local what=$1 out rc
  shift
  out=$("$@" 2>"$TMP/cli.err"); rc=$?
  check "$what: exit 1, one line ($(head -c 160 "$TMP/cli.err"); rc $rc)" \
    test "$rc" -eq 1 -a -z "$out" -a "$(wc -l <"$TMP/cli.err")" -eq 1
}

log "=== wg-netstack under wg(8) and SIGHUP, against wireguard-go ==="
NETSTACK_ARGS="--interface $WG_N" setup_netstack_pair wireguard-go || { fail "setup"; finish "control"; }
run_bg "$NS_B" server python3 "$LOAD_PY" server 198.19.0.2 "$PORT"
wait_listen "$NS_B" "198.19.0.2:$PORT" || fail "server in B"
B_PUB=$(cat "$TMP/b.pub")

log "--- the UAPI socket ---"
check "socket $SOCK exists with mode 600" test "$(stat -c %a "$SOCK" 2>/dev/null)" = 600
check "wg show lists the peer and the listen port" \
  eval "na wg show $WG_N | grep -qF 'peer: $B_PUB' && test \"\$(na wg show $WG_N listen-port)\" = $PORT_A"
check "wg show: a handshake with the peer" test "$(na wg show "$WG_N" latest-handshakes | awk '{print $2}')" -gt 0
check "traffic through SOCKS5" fetch_ok
check "malformed UAPI requests get wg-tun's errno replies" na python3 "$ABUSE_PY" requests "$SOCK"
sed -e "s/^ListenPort = .*/ListenPort = 51831/" "$TMP/a.conf" >"$TMP/second.conf"
chmod 600 "$TMP/second.conf"
one_line_exit1 "a second wg-netstack with the same --interface (its own ports)" \
  na "$WGNET_BIN/wg-netstack" -c "$TMP/second.conf" --socks5 127.0.0.1:1081 --interface "$WG_N"
check "the second one said the socket is in use" grep -q "$SOCK is in use" "$TMP/cli.err"
check "the live socket was not taken over: wg show still answers" na wg show "$WG_N" peers

na wg set "$WG_N" peer "$B_PUB" remove
check "wg set … remove: the peer is gone" test -z "$(na wg show "$WG_N" peers)"
out=$(socks_reply 198.19.0.2 "$PORT")
check "wg set … remove: 198.19.0.2 is no longer routable (SOCKS reply 4, got $out)" test "$out" = 4
na wg set "$WG_N" peer "$B_PUB" allowed-ips 198.19.0.2/32 endpoint "198.18.0.2:$PORT_B"
check "wg set … allowed-ips … endpoint: the peer is back" na wg show "$WG_N" peers
check "the re-added peer carries traffic" fetch_ok

log "--- SIGHUP while four 200 MB transfers run ---"
NEW_PUB=$(wg genkey | wg pubkey)
na timeout 120 python3 "$LOAD_PY" load socks5 "$SOCKS" 198.19.0.2 "$PORT" 2 200000000 >"$TMP/load.out" 2>"$TMP/load.err" &
LOAD=$!
PIDS+=("$LOAD")
cp "$TMP/a.conf" "$TMP/a.conf.orig"
cat >>"$TMP/a.conf" <<CONF
PersistentKeepalive = 7

[Peer]
PublicKey = $NEW_PUB
AllowedIPs = 198.19.0.3/32
CONF
sleep 1
kill -HUP "$NETSTACK_PID"
check "SIGHUP: a peer added" eventually 50 eval "na wg show $WG_N peers | grep -qF '$NEW_PUB'"
check "SIGHUP: the peer's keepalive changed to 7" \
  eventually 50 eval "na wg show $WG_N persistent-keepalive | grep -qF '$B_PUB	7'"
wait "$LOAD"
check "SIGHUP: the transfers ran through it, each intact ($(cat "$TMP/load.out"))" \
  test "$(awk '{print $2, $3}' "$TMP/load.out")" = "4 0"
check "SIGHUP: wg-netstack still running" kill -0 "$NETSTACK_PID"

printf '[Interface]\nPrivateKey = nonsense\n' >"$TMP/a.conf"
kill -HUP "$NETSTACK_PID"
check "SIGHUP with a broken file: an error logged" eventually 50 grep -q "reload: .*line 2" "$TMP/wg-netstack.log"
check "SIGHUP with a broken file: peers unchanged (2)" test "$(na wg show "$WG_N" peers | wc -l)" -eq 2
check "SIGHUP with a broken file: still serving" fetch_ok
cp "$TMP/a.conf.orig" "$TMP/a.conf"
kill -HUP "$NETSTACK_PID"
check "SIGHUP with the first file again: the added peer removed" \
  eventually 50 eval "test \"\$(na wg show $WG_N peers)\" = '$B_PUB'"
check "and traffic still flows" fetch_ok

log "--- wg syncconf and wg setconf ---"
SYNC_PUB=$(wg genkey | wg pubkey)
cat >"$TMP/sync.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
ListenPort = $PORT_A

[Peer]
PublicKey = $B_PUB
AllowedIPs = 198.19.0.2/32
Endpoint = 198.18.0.2:$PORT_B

[Peer]
PublicKey = $SYNC_PUB
AllowedIPs = 198.19.0.4/32
CONF
check "wg syncconf: accepted" na wg syncconf "$WG_N" "$TMP/sync.conf"
check "wg syncconf: the second peer is there" eval "na wg show $WG_N peers | grep -qF '$SYNC_PUB'"
check "wg syncconf: traffic still flows" fetch_ok
head -n 8 "$TMP/sync.conf" >"$TMP/set.conf"
check "wg setconf: accepted" na wg setconf "$WG_N" "$TMP/set.conf"
check "wg setconf: only the peer of the file is left" test "$(na wg show "$WG_N" peers)" = "$B_PUB"
check "wg setconf: traffic flows" fetch_ok

log "--- the command line ---"
N=$WGNET_BIN/wg-netstack
one_line_exit1 "--log-level loud" "$N" -c "$TMP/a.conf" --log-level loud
one_line_exit1 "an unknown flag" "$N" -c "$TMP/a.conf" --no-such-flag
one_line_exit1 "--interface with a slash" "$N" -c "$TMP/a.conf" --interface a/b
one_line_exit1 "a missing config file" "$N" -c "$TMP/none.conf"
one_line_exit1 "a missing --auth-file" "$N" -c "$TMP/a.conf" --socks5 127.0.0.1:1084 --auth-file "$TMP/none.auth"
check "... names the flag, the file and the reason" \
  grep -qxF "wg-netstack: --auth-file $TMP/none.auth: No such file or directory" "$TMP/cli.err"
one_line_exit1 "--socks5 with port 99999" "$N" -c "$TMP/a.conf" --socks5 127.0.0.1:99999
check "... names the flag" grep -qF -- "--socks5: '127.0.0.1:99999' is not ADDR:PORT" "$TMP/cli.err"
: >"$TMP/empty.conf"
one_line_exit1 "an empty config" "$N" -c "$TMP/empty.conf"
check "... says it has no [Interface]" grep -qF "$TMP/empty.conf: no [Interface] and no [Peer]" "$TMP/cli.err"
out=$("$N" -n -c "$TMP/a.conf" 2>&1); rc=$?
check "-n on a good file: 'Config OK', exit 0 (got '$out', rc $rc)" test "$out" = "Config OK" -a "$rc" -eq 0
printf '[Interface]\nPrivateKey = %s\nAddress = 198.19.0.1/24\nListenPort = 99999\n' "$(cat "$TMP/a.key")" >"$TMP/bad.conf"
one_line_exit1 "-n on a bad file" "$N" -n -c "$TMP/bad.conf"
check "-n on a bad file: the error names the file and line 4" grep -qF "$TMP/bad.conf: line 4" "$TMP/cli.err"
out=$("$N" -v 2>&1); rc=$?
check "-v: the version, exit 0 (got '$out', rc $rc)" eval "[[ '$out' == 'wg-netstack '*' (wgnet)' ]] && test $rc -eq 0"

# -d: a second proxy on its own ports returns once up and keeps running in the background.
sed -e "s/^ListenPort = .*/ListenPort = 51830/" "$TMP/a.conf.orig" >"$TMP/d.conf"
chmod 600 "$TMP/d.conf"
start=$(date +%s)
na timeout 20 "$N" -d -c "$TMP/d.conf" --socks5 127.0.0.1:1082 --interface "$WG_D" >"$TMP/d.out" 2>&1; rc=$?
DPID=$(na ss -xlpH | grep -F "/var/run/wireguard/$WG_D.sock" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
[ -n "$DPID" ] && PIDS+=("$DPID")
# Its output is the "up" line it logs before it lets go of the terminal, and nothing else
# but the first handshake, which its peer may complete before or just after that line.
check "-d: exit 0 once up, having said so ($(head -c 200 "$TMP/d.out"); rc $rc, $(($(date +%s) - start)) s)" \
  test "$rc" -eq 0 -a "$(grep -c '^wg-netstack: up, UDP port 51830' "$TMP/d.out")" -eq 1 \
  -a "$(grep -vc -e '^wg-netstack: up, UDP port 51830' -e '^peer(.*): handshake completed (initiator)$' "$TMP/d.out")" -eq 0
check "-d: the proxy runs on in the background (pid ${DPID:-none})" test -n "$DPID" -a "$DPID" != "$$"
check "-d: wg show sees it" na wg show "$WG_D" peers
# The same again: its UDP port is taken now, so the background start fails, and says why.
one_line_exit1 "-d when the start fails (UDP port 51830 taken)" \
  na timeout 20 "$N" -d -c "$TMP/d.conf" --socks5 127.0.0.1:1083 --interface "${WG_D}x"
check "-d failure: the reason on stderr" grep -q "51830" "$TMP/cli.err"

finish "wg-netstack control"
