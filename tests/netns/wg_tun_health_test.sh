#!/usr/bin/env bash
# wg-tun --health: /readyz and /metrics of the root-mode daemon, peered with Debian's
# wireguard-go.
#
#        namespace $NS_A                                   namespace $NS_B
#   wg-tun $WG_A 198.19.0.1                             wireguard-go $WG_B 198.19.0.2
#     --health 127.0.0.1:9190 (A's own loopback)
#   veth 198.18.0.1  <═════════ WireGuard ═════════>    veth 198.18.0.2
#
#   - in the foreground: before any traffic /readyz is 503 and /metrics shows peer 0 with
#     no bytes and no handshake; after a ping /readyz is 200 and the last-handshake gauge
#     is `wg show`'s; during and after a bounded upload (iperf3 -n) the per-peer byte
#     counters grow (tx by at least the upload) and end equal to `wg show transfer`; every
#     scrape passes a strict Prometheus text parser (prom_text.py, itself checked on
#     planted defects first); SIGTERM ends wg-tun with 0 and closes the port;
#   - in the background (no -f): the parent binds, the daemon that stays serves (it owns
#     the socket, its health thread runs, its command line names --health); `ip link del`
#     ends it and the port closes;
#   - a port in use or a malformed address: one line, exit 1, no interface and no UAPI
#     socket left behind, with and without -f.
#
# Topology: lib.sh. Usage: wg_tun_health_test.sh BIN_DIR   (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
WG_H="wh${RUN_ID}"  # the interface of the start-error checks: it must never appear
trap 'rm -f "/var/run/wireguard/$WG_H.sock"; cleanup' EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
PROM="$(dirname "$0")/prom_text.py"
H=127.0.0.1:9190
UPLOAD=$((256 * 1024 * 1024))

# scrape NAME: /metrics of $H in A into $TMP/NAME.txt, parsed into $TMP/NAME.json; false
# (with the parser's complaints logged) when it does not parse.
scrape() {
  na curl -sS --max-time 3 -o "$TMP/$1.txt" "http://$H/metrics" || return 1
  python3 "$PROM" <"$TMP/$1.txt" >"$TMP/$1.json" 2>"$TMP/$1.problems" && return 0
  log "  /metrics ($1) does not parse:"; sed 's/^/    /' "$TMP/$1.problems" | head -20
  return 1
}
# sample NAME SERIES: one sample's value (as an integer) from scrape NAME; "" when absent.
sample() {
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["samples"]
print(int(s[sys.argv[2]]) if sys.argv[2] in s else "")' "$TMP/$1.json" "$2"
}
tx() { sample "$1" 'wgnet_peer_tx_bytes_total{peer="0"}'; }
rx() { sample "$1" 'wgnet_peer_rx_bytes_total{peer="0"}'; }
readyz() { na curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$1/readyz"; }
is_readyz() { [ "$(readyz "$1")" = "$2" ]; }
# The families device_metrics writes, with their types (wg-netstack's device part).
FAMILIES='{"wgnet_peer_tx_bytes_total": "counter", "wgnet_peer_rx_bytes_total": "counter",
  "wgnet_peer_last_handshake_seconds": "gauge", "wgnet_handshakes_total": "counter",
  "wgnet_handshake_messages_total": "counter", "wgnet_dropped_packets_total": "counter"}'
families_are() { # NAME
  python3 -c 'import json, sys
got = json.load(open(sys.argv[1]))["types"]
sys.exit(0 if got == json.loads(sys.argv[2]) else 1)' "$TMP/$1.json" "$FAMILIES"
}
# metrics_match_wg_show: one scrape's per-peer bytes are `wg show transfer`'s (rx tx).
metrics_match_wg_show() {
  local shown
  scrape settled || return 1
  shown=$(na wg show "$WG_A" transfer | awk '{print $2, $3}')
  [ "$shown" = "$(rx settled) $(tx settled)" ]
}
not_listening() { ! ip netns exec "$1" ss -ltnH | awk '{print $4}' | grep -qxF "$2"; }

check "the Prometheus text parser refuses planted defects" python3 "$PROM" --self-test

log "=== wg-tun -f --health $H <-> wireguard-go ==="
test_start=$(date +%s)
ARGS_A="--health $H" setup_pair wg-tun wireguard-go || { fail "setup"; finish "health"; }
WG_TUN_PID=${PIDS[0]}
wait_listen "$NS_A" "$H" || fail "nothing listens on $H"
check "the start line names the health address" \
  eventually 30 grep -q "started on $WG_A; /readyz and /metrics on $H\$" "$TMP/$WG_A.log"
status=$(readyz "$H")
check "/readyz before any handshake: 503 (got $status)" test "$status" = 503
# A server that never answers would make every scrape below wait for its timeout.
[ "$status" = 000 ] && { fail "nothing answers on $H: the other checks are not run"; finish "health"; }
check "/metrics before any traffic parses" scrape before
check "/metrics: the content type of the text format ($(na curl -s -o /dev/null -w '%{content_type}' "http://$H/metrics"))" \
  test "$(na curl -s -o /dev/null -w '%{content_type}' "http://$H/metrics")" = "text/plain; version=0.0.4"
check "/metrics: the families and types of wg-netstack's device part" families_are before
check "/metrics: one peer, labelled by index, no key ($(grep -o 'peer="[^"]*"' "$TMP/before.txt" | sort -u | xargs))" \
  test "$(grep -o 'peer="[^"]*"' "$TMP/before.txt" | sort -u)" = 'peer="0"'
check "/metrics: no key material" bash -c "! grep -qF -e '$(cat "$TMP/a.pub")' -e '$(cat "$TMP/b.pub")' '$TMP/before.txt'"
check "/metrics before any traffic: no bytes, no handshake ($(tx before)/$(rx before) B, last $(sample before 'wgnet_peer_last_handshake_seconds{peer="0"}'))" \
  test "$(tx before) $(rx before) $(sample before 'wgnet_peer_last_handshake_seconds{peer="0"}') $(sample before 'wgnet_handshakes_total{}')" = "0 0 0 0"
check "an unknown page: 404" test "$(na curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$H/nothing")" = 404

check "first ping through the tunnel (handshake)" ping_eventually "$NS_A" 198.19.0.2
check "/readyz after the handshake: 200" eventually 50 is_readyz "$H" 200
check "/metrics after the handshake parses" scrape handshake
shown=$(na wg show "$WG_A" latest-handshakes | awk '{print $2}')
gauge=$(sample handshake 'wgnet_peer_last_handshake_seconds{peer="0"}')
check "last-handshake gauge set: $gauge, wg show $shown, test started $test_start" \
  test "${gauge:-0}" -ge "$test_start" -a "${gauge:-0}" -le "$(date +%s)" -a "${gauge:-0}" = "$shown"
check "handshakes counted ($(sample handshake 'wgnet_handshakes_total{}'))" \
  test "$(sample handshake 'wgnet_handshakes_total{}')" -ge 1

log "--- a bounded upload A→B ($((UPLOAD >> 20)) MiB), /metrics scraped while it runs ---"
scrape start || fail "/metrics before the upload does not parse"
tx0=$(tx start) rx0=$(rx start)
nb iperf3 -s -1 -D -I "$TMP/iperf.pid" >/dev/null 2>&1
wait_tcp_port "$NS_B" 5201 || fail "iperf3 server"
# Started without na(): a function in the background would be a subshell, and $! its PID.
ip netns exec "$NS_A" timeout 120 iperf3 -c 198.19.0.2 -n "$UPLOAD" >"$TMP/iperf.out" 2>&1 &
IPERF=$!
PIDS+=("$IPERF")
scrapes=0 bad=0 grew_during=0 went_back=0 last_tx=$tx0
for i in $(seq 600); do  # at most 600 scrapes, 0.1 s apart (the upload's timeout is 120 s)
  kill -0 "$IPERF" 2>/dev/null || break
  if scrape "during$i"; then
    scrapes=$((scrapes + 1))
    t=$(tx "during$i")
    [ "$t" -lt "$last_tx" ] && went_back=$((went_back + 1))
    # Counted only if the upload still ran after this scrape: it was taken during it.
    [ "$t" -gt "$tx0" ] && kill -0 "$IPERF" 2>/dev/null && grew_during=$((grew_during + 1))
    last_tx=$t
  else
    bad=$((bad + 1))
  fi
  sleep 0.1
done
wait "$IPERF"
rc=$?
forget_pid "$IPERF"
[ -f "$TMP/iperf.pid" ] && kill "$(cat "$TMP/iperf.pid")" 2>/dev/null
check "the upload completed (iperf3 status $rc, $(grep -o '[0-9.]* [MG]bits/sec' "$TMP/iperf.out" | tail -1))" test "$rc" -eq 0
check "every scrape during the upload parses ($bad of $((scrapes + bad)) not)" test "$bad" -eq 0 -a "$scrapes" -gt 0
check "the tx counter grew during the upload ($grew_during scrapes saw it)" test "$grew_during" -ge 1
check "the tx counter never went back ($went_back times)" test "$went_back" -eq 0
check "/metrics after the upload parses" scrape after
tx1=$(tx after) rx1=$(rx after)
check "peer 0's tx grew by at least the upload: +$((tx1 - tx0)) B for $UPLOAD B" test $((tx1 - tx0)) -ge "$UPLOAD"
check "peer 0's rx grew, by less (the ACKs): +$((rx1 - rx0)) B" test $((rx1 - rx0)) -gt 0 -a $((rx1 - rx0)) -lt $((tx1 - tx0))
check "once settled, /metrics' bytes are wg show's (rx tx: $(na wg show "$WG_A" transfer | awk '{print $2, $3}'))" \
  eventually 50 metrics_match_wg_show
check "/readyz after the upload: 200" is_readyz "$H" 200

kill -TERM "$WG_TUN_PID"
timeout 5 tail --pid="$WG_TUN_PID" -f /dev/null
wait "$WG_TUN_PID"
rc=$?
forget_pid "$WG_TUN_PID"
check "SIGTERM: wg-tun exits 0 (got $rc)" test "$rc" -eq 0
check "SIGTERM: nothing listens on $H any more" not_listening "$NS_A" "$H"
teardown_pair

log "=== wg-tun --health $H in the background (no -f) ==="
make_namespaces
na env LOG_LEVEL=verbose "$WGNET_BIN/wg-tun" --health "$H" "$WG_A" >"$TMP/$WG_A.log" 2>&1
rc=$?
check "the parent returns 0 (got $rc)" test "$rc" -eq 0
eventually 50 pgrep -f "[w]g-tun -f $WG_A" >/dev/null
pid=$(pgrep -f "[w]g-tun -f $WG_A" | head -1)
[ -n "$pid" ] && PIDS+=("$pid")
check "the daemon runs (pid ${pid:-none}), its command line names --health ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))" \
  bash -c "[ -n '$pid' ] && tr '\0' ' ' </proc/$pid/cmdline | grep -q -- '-f $WG_A --health $H'"
wait_listen "$NS_A" "$H" || fail "nothing listens on $H"
owners=$(na ss -ltnpH "sport = :${H##*:}" | grep -o 'pid=[0-9]*' | sort -u | xargs)
check "the listening socket belongs to the daemon alone ($owners)" test "$owners" = "pid=$pid"
check "the daemon runs a wg-health thread" bash -c "grep -qx wg-health /proc/$pid/task/*/comm"
check "the daemon serves /metrics, and it parses" scrape background
check "... with the same families" families_are background
check "/readyz without peers: 503" is_readyz "$H" 503
na ip link del "$WG_A"
timeout 5 tail --pid="$pid" -f /dev/null
check "ip link del: the daemon exited" bash -c "! kill -0 $pid 2>/dev/null"
forget_pid "$pid"
check "ip link del: nothing listens on $H any more" not_listening "$NS_A" "$H"

log "=== start errors ==="
# A listener of the test's own holds the port.
ip netns exec "$NS_A" python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "${H##*:}" &
HOLDER=$!
PIDS+=("$HOLDER")
wait_listen "$NS_A" "$H" || fail "the test's own listener"
# start_error WHAT WANT ARG...: wg-tun ARG... (given 10 s at most) exits 1 with exactly the
# line WANT on stderr and nothing on stdout, and leaves no interface, socket or daemon.
start_error() {
  local what=$1 want=$2 out rc stray
  shift 2
  out=$(na timeout 10 "$WGNET_BIN/wg-tun" "$@" 2>"$TMP/start.err")
  rc=$?
  stray=$(pgrep -f "[w]g-tun -f $WG_H" | xargs)
  for p in $stray; do PIDS+=("$p"); done  # a daemon that should not be: cleanup ends it
  check "$what: exit 1 (got $rc), one line: $(head -1 "$TMP/start.err")" \
    test "$rc" -eq 1 -a -z "$out" -a "$(cat "$TMP/start.err")" = "$want"
  check "$what: no interface, no UAPI socket, no daemon left" \
    bash -c "! ip netns exec $NS_A ip link show $WG_H >/dev/null 2>&1 && [ ! -e /var/run/wireguard/$WG_H.sock ] && [ -z '$stray' ]"
}
start_error "port in use, background" "wg-tun: --health $H: Address already in use" --health "$H" "$WG_H"
start_error "port in use, -f" "wg-tun: --health $H: Address already in use" -f --health "$H" "$WG_H"
start_error "no port" "wg-tun: --health 127.0.0.1: '127.0.0.1' is not ADDR:PORT" --health 127.0.0.1 "$WG_H"
start_error "no IP address" "wg-tun: --health example.org:9190: 'example.org' is not an IP address" \
  -f --health example.org:9190 "$WG_H"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
forget_pid "$HOLDER"
teardown_pair

finish "health"
