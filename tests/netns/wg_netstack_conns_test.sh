#!/usr/bin/env bash
# 10,000 SOCKS5 connections held through wg-netstack at once, all of which must work,
# and a proxy that still serves afterwards: a second 10,000 right after the first closed
# (lwIP's ephemeral ports once stayed in TIME_WAIT for 120 s: the second round failed),
# then short connections. Asserts success only; tests/bench/netstack_conns.sh measures.
# Topology: netstack_conns_lib.sh (wg-netstack in A, wireguard-go and the echo in B).
#
# Usage: wg_netstack_conns_test.sh BIN_DIR   (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
trap cleanup EXIT
require_root
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
command -v curl >/dev/null || { echo "curl missing"; exit 1; }
[ -x "$WGNET_BIN/wg-netstack" ] || { echo "$WGNET_BIN/wg-netstack missing: build it first"; exit 1; }
PEER_IMPL=wireguard-go
. "$(dirname "$0")/netstack_conns_lib.sh"
N=10000

# hold_round WHAT: N connections held, each echoing twice, then all closed.
hold_round() {
  local what=$1 line
  hold_start "$N"
  line=$(wait_line "$TMP/hold.out" '^held ' 300) || line="held ? ? ?"
  check "$what: $N SOCKS5 connections held, each proved by an echo ($line)" test "${line% *}" = "held $N 0"
  [ -s "$TMP/hold.err" ] && sed 's/^/    /' "$TMP/hold.err"
  check "$what: the netstack counts $N TCP connections" test "$(metric wgnet_tcp_connections_active)" = "$N"
  echo close | na timeout 30 python3 "$CONNS_PY" hold "$SOCKS" "$TARGET" "$ECHO_PORT" 1 >"$TMP/one.out" 2>&1
  check "$what: one more connection while $N are held" grep -q '^held 1 0 ' "$TMP/one.out"
  local b_drops_before
  b_drops_before=$(udp_socket_drops "$NS_B" 51821)
  hold_cmd echo
  line=$(wait_line "$TMP/hold.out" '^echo ' 300) || line="echo ? ? ?"
  check "$what: every held connection echoes again ($line)" test "${line% *}" = "echo $N 0"
  [ -s "$TMP/hold.err" ] && sed 's/^/    /' "$TMP/hold.err"
  # Where datagrams were lost (for the failure's reader): the netstack's queues, our UDP
  # socket, the peer's (during the echoes).
  log "  netstack queue drops so far $(metric 'wgnet_dropped_packets_total{reason="netstack_queue"}'), UDP socket drops in A $(udp_socket_drops "$NS_A" 51820), in B during the echoes $(($(udp_socket_drops "$NS_B" 51821) - b_drops_before))"
  hold_end
  check "$what: all closed at the proxy within 60 s" wait_closed 60
  check "$what: and in the netstack" test "$(metric wgnet_tcp_connections_active)" = 0
}

log "=== wg-netstack: $N SOCKS5 connections at once ==="
if conns_setup; then
  hold_round "first round"
  hold_round "second round"
  line=$(na timeout 60 python3 "$CONNS_PY" churn "$SOCKS" "$TARGET" "$ECHO_PORT" 200 5 2>"$TMP/churn.err")
  check "afterwards: 1000 short connections at 200/s all succeed (${line:-none})" \
    test "$(echo "$line" | awk '{print $2, $3}')" = "1000 0"
  [ -s "$TMP/churn.err" ] && sed 's/^/    /' "$TMP/churn.err"
  check "wg-netstack still running" kill -0 "$NETSTACK_PID"
else
  fail "setup"
fi

finish "wg-netstack connection"
