#!/usr/bin/env bash
# wg-netstack's listeners under more clients than they may hold:
#   - run with RLIMIT_NOFILE 40 and 60 idle SOCKS5 clients, it does not spin (under 0.5 s
#     of CPU in 3 s), says so once, and serves a client again once the others left;
#   - --max-connections (SOCKS5, HTTP) and --health-max-connections: the connection past
#     the cap is reset, and one is served again after another closed;
#   - UDP ASSOCIATE: the caps per listener and per client address are answered "not
#     allowed", a silent association is closed after --udp-associate-timeout while a busy
#     one stays, and /metrics counts both;
#   - a client's host name and request line reach the log escaped (no ESC, NUL or newline);
#   - --reverse tcp under --max-connections 2: a third connection from the peer (a second
#     wg-netstack in B, forwarding to it) is reset, and one is served after the others left.
# No peer answers: nothing here needs the tunnel to carry traffic.
#
#        namespace $NS_A
#   limits_probe.py ──> wg-netstack (198.19.0.1 in its netstack; its peer at
#                        198.18.0.2 is never started)
#                         SOCKS5 127.0.0.1:1080  HTTP 127.0.0.1:3128  health 127.0.0.1:9090
#
# Usage: wg_netstack_limits_test.sh BIN_DIR   (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
trap cleanup EXIT
require_root
[ -x "$WGNET_BIN/wg-netstack" ] || { echo "$WGNET_BIN/wg-netstack missing: build it first"; exit 1; }
PROBE=$(cd "$(dirname "$0")" && pwd)/limits_probe.py
SOCKS=127.0.0.1:1080
HTTP=127.0.0.1:3128
HEALTH=127.0.0.1:9090
PID=

# start NAME [PRLIMIT_ARG] -- FLAGS...: wg-netstack in A as $PID, log $TMP/NAME.log.
start() {
  local name=$1 limit=$2
  shift 3
  [ -n "$PID" ] && { kill "$PID"; timeout 5 tail --pid="$PID" -f /dev/null; forget_pid "$PID"; }
  # shellcheck disable=SC2086  # limit: empty or one argument
  ip netns exec "$NS_A" prlimit ${limit:---nofile=1024} -- "$WGNET_BIN/wg-netstack" -c "$TMP/a.conf" --socks5 "$SOCKS" \
    --health "$HEALTH" "$@" >"$TMP/$name.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  wait_listen "$NS_A" "$SOCKS" && wait_listen "$NS_A" "$HEALTH"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
probe() { na timeout 20 python3 "$PROBE" probe "$@"; }
# served_eventually ADDR KIND: a well-behaved client is served within 5 s.
served_eventually() { eventually 50 test "$(probe "$1" "$2")" = served; }
metric() { na curl -s "http://$HEALTH/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# hold_then_probe WHAT ADDR KIND N: N idle connections held to ADDR; one more is reset;
# once they closed, a client is served.
hold_then_probe() {
  local what=$1 addr=$2 kind=$3 n=$4 holder
  na python3 "$PROBE" hold "$addr" "$n" 3 >"$TMP/hold.out" 2>&1 &
  holder=$!
  eventually 50 grep -q "^opened $n" "$TMP/hold.out"
  check "$what: connection $((n + 1)) past the cap of $n is reset" test "$(probe "$addr" "$kind")" = reset
  wait "$holder"
  check "$what: served again once the $n held ones closed" served_eventually "$addr" "$kind"
}

log "=== wg-netstack: caps, descriptors, UDP associations, escaped logs ==="
make_namespaces
(umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
# conf NAME PEER PORT ADDRESS ALLOWED ENDPOINT: $TMP/NAME.conf, with $TMP/NAME.key and
# the public key of $TMP/PEER.key.
conf() {
  printf '[Interface]\nPrivateKey = %s\nListenPort = %s\nAddress = %s\n\n' "$(cat "$TMP/$1.key")" "$3" "$4" >"$TMP/$1.conf"
  printf '[Peer]\nPublicKey = %s\nAllowedIPs = %s\nEndpoint = %s\n' "$(wg pubkey <"$TMP/$2.key")" "$5" "$6" >>"$TMP/$1.conf"
  chmod 600 "$TMP/$1.conf"
}
conf a b 51820 198.19.0.1/24 198.19.0.0/24 198.18.0.2:51821

log "--- 60 idle clients, 40 descriptors ---"
if start emfile --nofile=40:40 -- --handshake-timeout 60; then
  na python3 "$PROBE" hold "$SOCKS" 60 8 >"$TMP/hold60.out" 2>&1 &
  holder=$!
  eventually 100 grep -q '^opened' "$TMP/hold60.out"
  sleep 1  # the last connections reach the loop
  t0=$(cpu_ticks "$PID")
  sleep 3
  t1=$(cpu_ticks "$PID")
  ticks=$(getconf CLK_TCK)
  check "out of descriptors: $((t1 - t0)) ticks of CPU in 3 s (under 0.5 s)" test $((t1 - t0)) -lt $((ticks / 2))
  check "said once that it is out of descriptors ($(grep -c 'out of file descriptors' "$TMP/emfile.log") lines)" \
    test "$(grep -c 'SOCKS5 on 127.0.0.1:1080: out of file descriptors' "$TMP/emfile.log")" = 1
  wait "$holder"
  check "a well-behaved client is served once the idle ones left" served_eventually "$SOCKS" socks5
  check "and that was said too" grep -q 'SOCKS5 on 127.0.0.1:1080: file descriptors free again' "$TMP/emfile.log"
  check "still running" kill -0 "$PID"
else
  fail "wg-netstack with 40 descriptors did not start"
fi

log "--- connection caps ---"
if start caps "" -- --http "$HTTP" --max-connections 3 --health-max-connections 2 --handshake-timeout 60; then
  hold_then_probe "SOCKS5" "$SOCKS" socks5 3
  hold_then_probe "HTTP" "$HTTP" http 3
  hold_then_probe "health" "$HEALTH" health 2
  check "/metrics counts the resets (3 or more)" test "$(metric wgnet_proxy_connections_refused_total)" -ge 3
  check "the cap said once per stretch at it (2 lines for SOCKS5: reached, left)" \
    test "$(grep -c '^SOCKS5 on 127.0.0.1:1080: ' "$TMP/caps.log")" = 2
else
  fail "wg-netstack with caps did not start"
fi

log "--- UDP ASSOCIATE ---"
if start udp "" -- --http "$HTTP" --max-udp-associations 3 --max-udp-associations-per-client 2 \
  --udp-associate-timeout 1 --log-level verbose; then
  line=$(na timeout 30 python3 "$PROBE" udp-caps "$SOCKS" 2>&1)
  check "caps per client and per listener: '$line'" test "$line" = "ok ok refused ok refused ok"
  check "/metrics: 2 associations refused" test "$(metric wgnet_proxy_udp_associations_refused_total)" = 2
  check "and none left open" eventually 30 test "$(metric wgnet_proxy_udp_associations_active)" = 0
  line=$(na timeout 30 python3 "$PROBE" udp-idle "$SOCKS" 1 2>&1)
  idle=$(awk '{print $2}' <<<"$line")
  check "a silent association closed after 1-2 s, a busy one open: '$line'" \
    eval "awk -v t='$idle' 'BEGIN { exit !(t >= 0.9 && t <= 2.0) }' && test '${line##* }' = open"
  check "/metrics counts the idle one" test "$(metric wgnet_proxy_udp_associations_idle_total)" -ge 1

  log "--- client text in the log ---"
  # ESC [31m evil NUL LF INJECTED, as a SOCKS5 host name (it cannot resolve: no DNS=).
  na timeout 30 python3 "$PROBE" socks-name "$SOCKS" "$(printf '\033[31mevil\000\nINJECTED' | xxd -p | tr -d '\n')" >/dev/null
  # A request line with bytes past ASCII (HTTP allows no controls there): 400, logged.
  code=$(na timeout 30 python3 "$PROBE" http-raw "$HTTP" "$(printf 'GET /\x80\xff HTTP/1.1\r\nHost: h\r\n\r\n' | xxd -p | tr -d '\n')")
  check "a relative URI is answered 400 ($code)" test "$code" = 400
  sleep 0.5
  check "the SOCKS5 host name appears escaped" grep -qF 'socks5: \x1b[31mevil\x00\x0aINJECTED:80' "$TMP/udp.log"
  check "the HTTP request line appears escaped" grep -qF "http: 'GET /\\x80\\xff': 400" "$TMP/udp.log"
  check "no raw ESC, NUL or byte past ASCII in the log" \
    eval "LC_ALL=C tr -d '\\000\\033\\200-\\377' <'$TMP/udp.log' | cmp -s - '$TMP/udp.log'"
  check "no line begins with the injected text" eval "! grep -qa '^INJECTED' '$TMP/udp.log'"
else
  fail "wg-netstack for UDP ASSOCIATE did not start"
fi

log "--- --reverse tcp under --max-connections ---"
# B, a wg-netstack peer, forwards its 127.0.0.1:7200 to A's reverse listener
# 198.19.0.1:8081, which A relays to a local HTTP server that holds every connection.
conf b a 51821 198.19.0.2/24 198.19.0.1/32 198.18.0.1:51820
ip netns exec "$NS_A" python3 -m http.server --bind 127.0.0.1 18081 >"$TMP/http-local.log" 2>&1 &
PIDS+=($!)
ip netns exec "$NS_B" "$WGNET_BIN/wg-netstack" -c "$TMP/b.conf" --no-socks5 \
  --forward tcp:127.0.0.1:7200=198.19.0.1:8081 >"$TMP/b.log" 2>&1 &
PIDS+=($!)
if wait_listen "$NS_A" 127.0.0.1:18081 && wait_listen "$NS_B" 127.0.0.1:7200 &&
  start reverse "" -- --max-connections 2 --reverse tcp:198.19.0.1:8081=127.0.0.1:18081; then
  ip netns exec "$NS_B" python3 "$PROBE" hold 127.0.0.1:7200 2 10 >"$TMP/hold-rev.out" 2>&1 &
  holder=$!
  relayed() { test "$(metric wgnet_proxy_connections_active)" = "$1"; }
  check "two connections from B relayed to A's server" eventually 100 relayed 2
  out=$(ip netns exec "$NS_B" timeout 20 python3 "$PROBE" probe 127.0.0.1:7200 http)
  check "a third through the reverse listener is refused ($out)" eval 'test "$out" = reset || test "$out" = closed'
  check "/metrics counts it" test "$(metric wgnet_proxy_connections_refused_total)" = 1
  check "the cap said once" test "$(grep -c 'reverse tcp:198.19.0.1:8081=127.0.0.1:18081: 2 connections' "$TMP/reverse.log")" = 1
  wait "$holder"
  served_again() { test "$(ip netns exec "$NS_B" timeout 20 python3 "$PROBE" probe 127.0.0.1:7200 http)" = served; }
  check "served again once the two closed" eventually 50 served_again
else
  fail "wg-netstack with a reverse listener (or its peer, or the local server) did not start"
fi

finish "limits"
