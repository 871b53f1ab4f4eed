#!/usr/bin/env bash
# Hostile clients of wg-tun's UAPI socket (/var/run/wireguard/IFACE.sock): malformed and
# over-long requests, binary junk, a set=1 that never ends, 1,000 connections that send
# nothing, and a daemon run at a low descriptor limit. Every request gets its errno reply
# (the same as Debian's wireguard-go gives where wg-tun matches it), `wg show` keeps
# working throughout, and afterwards the daemon holds as many descriptors and threads as
# before and its RSS is back within RSS_BOUND_KB of where it started.
#
#   namespace $NS_A                                        namespace $NS_B
#   wg-tun $WG_A  <══ tunnel, pinged between phases ══>   wireguard-go $WG_B (reference
#   wg-tun $WG_L  (ulimit -n 40, no peer)                  for the errno replies)
#        ^
#        └── tests/netns/uapi_abuse.py (requests, junk, endless-set, idle)
#
# Topology: see lib.sh. Usage: wg_tun_uapi_abuse_test.sh BIN_DIR   (exit 77 = skipped)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
WG_L="wl${RUN_ID}"
trap 'cleanup; rm -f "/var/run/wireguard/$WG_L.sock"' EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
ABUSE=(python3 "$(dirname "$0")/uapi_abuse.py")

# What the daemon may keep after the abuse: glibc caches the stacks of ended threads and
# keeps some freed heap; the bound is several times what a run keeps (1,000 idle
# connections, 256 served at once).
RSS_BOUND_KB=${RSS_BOUND_KB:-4096}
# wg::uapi::kMaxConnections; a few more threads may still be ending after being closed to
# make room (the bound is what matters: not one thread per connection).
MAX_CONNECTIONS=256

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
fd_count() { ls "/proc/$1/fd" | wc -l; }
thread_count() { awk '/^Threads:/ {print $2}' "/proc/$1/status"; }
# CPU time in clock ticks (utime + stime; fields 14 and 15, the name has no spaces).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# show_ok IFACE [PEER]: `wg show IFACE` answers within 5 s (and lists PEER).
show_ok() {
  local out
  out=$(timeout 5 ip netns exec "$NS_A" wg show "$1" 2>&1) || { log "  wg show $1: ${out:-timed out}"; return 1; }
  [ -z "${2:-}" ] || grep -qF "peer: $2" <<<"$out" || { log "  wg show $1 lacks the peer"; return 1; }
}
# shows_ok N IFACE [PEER]: N of them in a row.
shows_ok() {
  local n=$1 i
  shift
  for i in $(seq "$n"); do show_ok "$@" || return 1; done
}
# fds_back PID N: the daemon's descriptor count comes back to N (a connection's thread
# closes its descriptor as it ends, so this takes milliseconds; up to 3 s allowed).
fds_back() {
  local i
  for i in $(seq 30); do [ "$(fd_count "$1")" -eq "$2" ] && return 0; sleep 0.1; done
  log "  descriptors: $(fd_count "$1"), before: $2"
  return 1
}
# wait_line FILE TEXT: waits up to 30 s for a line starting with TEXT in FILE.
wait_line() {
  local i
  for i in $(seq 300); do grep -q "^$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

log "=== wg-tun ($WG_A) against wireguard-go ($WG_B) ==="
setup_pair wg-tun wireguard-go || { fail "setup"; finish "UAPI abuse"; }
PID=${PIDS[0]}
SOCK="/var/run/wireguard/$WG_A.sock"
PEER_B=$(cat "$TMP/b.pub")
check "tunnel up" ping_eventually "$NS_A" 198.19.0.2
shows_ok 20 "$WG_A" "$PEER_B" # warm up what a dump allocates before the baseline
BASE_RSS=$(rss_kb "$PID")
BASE_FDS=$(fd_count "$PID")
BASE_THREADS=$(thread_count "$PID")
CONF_BEFORE=$(na wg showconf "$WG_A")
log "baseline: RSS $BASE_RSS KB, $BASE_FDS descriptors, $BASE_THREADS threads"

log "--- malformed requests, each also sent to wireguard-go ---"
check "malformed requests: errno replies as wireguard-go's" \
  "${ABUSE[@]}" requests "$SOCK" "/var/run/wireguard/$WG_B.sock"
log "--- binary junk ---"
check "junk: 400 random requests each answered errno=-N or closed" "${ABUSE[@]}" junk "$SOCK" 400 20261201
check "configuration unchanged by the rejected requests" test "$(na wg showconf "$WG_A")" = "$CONF_BEFORE"
check "no descriptor left open by them" fds_back "$PID" "$BASE_FDS"
check "wg show works after them" show_ok "$WG_A" "$PEER_B"

log "--- a set=1 that never ends (8 s), wg show meanwhile ---"
"${ABUSE[@]}" endless-set "$SOCK" 8 >"$TMP/endless.out" 2>&1 &
ENDLESS=$!
sleep 0.5
check "endless set: 20 wg show meanwhile" shows_ok 20 "$WG_A" "$PEER_B"
check "endless set: tunnel works meanwhile" ping_ok "$NS_A" 198.19.0.2
wait "$ENDLESS"
check "endless set: the client ran to its end" test $? -eq 0
check "endless set: nothing of it applied (listen port, one peer)" \
  test "$(na wg show "$WG_A" listen-port)" = 51820 -a "$(na wg show "$WG_A" peers | wc -l)" -eq 1
check "endless set: descriptors back" fds_back "$PID" "$BASE_FDS"

log "--- 1,000 connections that send nothing, for 10 s ---"
"${ABUSE[@]}" idle "$SOCK" 1000 10 >"$TMP/idle.out" 2>&1 &
IDLE=$!
if wait_line "$TMP/idle.out" held; then
  check "idle: 10 wg show while they are open" shows_ok 10 "$WG_A" "$PEER_B"
  check "idle: at most $MAX_CONNECTIONS served at once (threads $(thread_count "$PID"))" \
    test "$(thread_count "$PID")" -le $((BASE_THREADS + MAX_CONNECTIONS + 16))
  check "idle: tunnel works meanwhile" ping_ok "$NS_A" 198.19.0.2
else
  fail "idle: the 1,000 connections were not all accepted"
fi
wait "$IDLE"
check "idle: the client ran to its end ($(tail -1 "$TMP/idle.out"))" test $? -eq 0
check "idle: wg show after" show_ok "$WG_A" "$PEER_B"
check "idle: descriptors back to $BASE_FDS" fds_back "$PID" "$BASE_FDS"
# A connection's thread closes its descriptor just before it ends: up to 3 s for the rest.
threads_are() { [ "$(thread_count "$1")" -eq "$2" ]; }
check "idle: threads back to $BASE_THREADS" eventually 30 threads_are "$PID" "$BASE_THREADS"

RSS=$(rss_kb "$PID")
log "RSS after the abuse: $RSS KB (baseline $BASE_RSS KB, bound +$RSS_BOUND_KB KB)"
check "RSS within $RSS_BOUND_KB KB of the baseline ($BASE_RSS -> $RSS KB)" test "$RSS" -le $((BASE_RSS + RSS_BOUND_KB))
check "tunnel still works" ping_ok "$NS_A" 198.19.0.2
check "daemon alive" kill -0 "$PID"

log "=== wg-tun ($WG_L) at a descriptor limit of 40 ==="
(ulimit -n 40 && exec ip netns exec "$NS_A" env LOG_LEVEL=verbose "$WGNET_BIN/wg-tun" -f "$WG_L") \
  >"$TMP/$WG_L.log" 2>&1 &
LPID=$!
PIDS+=("$LPID")
for _ in $(seq 50); do [ -S "/var/run/wireguard/$WG_L.sock" ] && break; sleep 0.1; done
na wg set "$WG_L" private-key "$TMP/a.key" listen-port 51830
na ip link set "$WG_L" up
check "limited: daemon started" show_ok "$WG_L"
# The interface comes up asynchronously: count descriptors once its two UDP sockets exist.
for _ in $(seq 50); do
  [ "$(na ss -uanpH | grep -c "pid=$LPID,")" -ge 2 ] && break
  sleep 0.1
done
check "limited: UDP sockets open" test "$(na ss -uanpH | grep -c "pid=$LPID,")" -ge 2
L_FDS=$(fd_count "$LPID")
log "limited: $L_FDS descriptors open, limit $(awk '/open files/ {print $4}' "/proc/$LPID/limits")"
"${ABUSE[@]}" idle "/var/run/wireguard/$WG_L.sock" 200 8 >"$TMP/idle_l.out" 2>&1 &
IDLE=$!
if wait_line "$TMP/idle_l.out" held; then
  T0=$(cpu_ticks "$LPID")
  sleep 2
  T1=$(cpu_ticks "$LPID")
  # An acceptor that retries a failing accept() without pause spends a CPU on it.
  check "limited: no busy loop at the limit ($((T1 - T0)) ticks in 2 s)" test $((T1 - T0)) -lt 40
  check "limited: wg show works at the limit" shows_ok 5 "$WG_L"
  check "limited: malformed requests still answered at the limit" \
    "${ABUSE[@]}" requests "/var/run/wireguard/$WG_L.sock"
  check "limited: wg set works at the limit" na wg set "$WG_L" listen-port 51831
else
  fail "limited: the 200 connections were not all accepted"
fi
wait "$IDLE"
check "limited: the client ran to its end ($(tail -1 "$TMP/idle_l.out"))" test $? -eq 0
check "limited: daemon alive" kill -0 "$LPID"
check "limited: wg show after" show_ok "$WG_L"
check "limited: descriptors back to $L_FDS" fds_back "$LPID" "$L_FDS"
check "limited: listen port as last set" test "$(na wg show "$WG_L" listen-port)" = 51831

finish "UAPI abuse"
