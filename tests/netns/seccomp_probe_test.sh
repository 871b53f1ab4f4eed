#!/usr/bin/env bash
# The daemons' seccomp filters as they run, proven call by call: wg-netstack and wg-tun
# carry traffic with their sandbox on (and wg-run's own process runs a command), then
# tests/support/seccomp_probe reads each one's filter (PTRACE_SECCOMP_GET_FILTER),
# loads it into children of its own and tries what the daemon's table refuses
# (namespaces, foreign socket families, unused ioctls, file creation and writing, other
# processes, exec) and what the daemon needs. Twice: with the build's denial (SIGSYS under WGNET_SANDBOX_KILL, else EPERM), and with --sandbox-log
# (EPERM). The daemons keep carrying traffic after being probed and never report a
# denied call.
#
#        namespace $NS_A                                 namespace $NS_B
#   wg-netstack, netstack 198.19.0.1   <══ WireGuard ══>   wg-tun $WG_B, 198.19.0.2
#     SOCKS5 127.0.0.1:1080, UDP :51820                      UDP :51821
#                                                            HTTP :8000 (a 1 MB file)
#
# Topology: lib.sh. Usage: seccomp_probe_test.sh BIN_DIR (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netstack_peer_lib.sh"
require_root
trap cleanup EXIT
for b in wg-netstack wg-tun seccomp_probe; do
  [ -x "$WGNET_BIN/$b" ] || { echo "$WGNET_BIN/$b missing: build it first"; exit 1; }
done

# fetch_ok: the file through wg-netstack's SOCKS5 and wg-tun arrives intact.
fetch_ok() {
  na curl -sS --max-time 20 --socks5 "$SOCKS" -o "$TMP/got" http://198.19.0.2:8000/file 2>>"$TMP/curl.log" &&
    [ "$(sha256sum <"$TMP/got")" = "$(sha256sum <"$TMP/www/file")" ]
}
# probe NAME PROGRAM PID [--refusal R]: seccomp_probe on PID, its lines in $TMP/NAME.log.
probe() {
  local name=$1 program=$2 pid=$3
  shift 3
  mkdir -p "$TMP/scratch-$name"
  "$WGNET_BIN/seccomp_probe" --program "$program" --scratch "$TMP/scratch-$name" "$@" "$pid" >"$TMP/$name.log" 2>&1
  local rc=$?
  sed 's/^/    /' "$TMP/$name.log"
  return "$rc"
}
# no_denial LOG: the daemon's log has no line of a denied system call.
no_denial() { ! grep -q 'not on the allow-list' "$1"; }

make_namespaces
(umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
mkdir -p "$TMP/www"
head -c 1000000 /dev/urandom >"$TMP/www/file"
# On every address of B: wg-tun's interface (and 198.19.0.2) comes and goes with each round.
run_bg "$NS_B" http python3 -m http.server 8000 --bind 0.0.0.0 --directory "$TMP/www"

# round LABEL SANDBOX_FLAG... : both daemons with the flags given, traffic, both probed.
round() {
  local label=$1
  shift
  log "=== $label ==="
  start_impl "$NS_B" "$WG_B" wg-tun "$@" || { fail "$label: wg-tun did not start"; return; }
  local tun_pid=${PIDS[-1]}
  configure "$NS_B" "$WG_B" "$TMP/b.key" "$PORT_B" "$(cat "$TMP/a.pub")" "" \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
  wait_tcp_port "$NS_B" 8000 || fail "HTTP server in B"
  NETSTACK_ARGS="$*" start_netstack || { fail "$label: wg-netstack did not start"; return; }
  local netstack_pid=$NETSTACK_PID
  check "$label: traffic through wg-netstack and wg-tun, sha256 intact" eventually 50 fetch_ok

  local refusal=()
  [ "$*" = --sandbox-log ] && refusal=(--refusal eperm)
  check "$label: wg-netstack's filter refuses and allows as its table says" \
    probe "probe-netstack-$label" wg-netstack "$netstack_pid" "${refusal[@]}"
  check "$label: wg-tun's filter refuses and allows as its table says" \
    probe "probe-tun-$label" wg-tun "$tun_pid" "${refusal[@]}"

  check "$label: after the probes, traffic still flows" fetch_ok
  check "$label: both daemons still run" kill -0 "$netstack_pid" "$tun_pid"
  check "$label: wg-netstack reported no denied call" no_denial "$TMP/wg-netstack.log"
  check "$label: wg-tun reported no denied call" no_denial "$TMP/$WG_B.log"
  kill -TERM "$netstack_pid" "$tun_pid"
  wait "$netstack_pid"
  check "$label: wg-netstack exits 0 on SIGTERM" test $? = 0
  wait "$tun_pid"
  check "$label: wg-tun exits 0 on SIGTERM" test $? = 0
  forget_pid "$netstack_pid"
  forget_pid "$tun_pid"
  check "$label: the UAPI socket is removed" test ! -e "/var/run/wireguard/$WG_B.sock"
}

round default
round sandbox-log --sandbox-log

log "=== wg-run's own process ==="
printf '[Interface]\nPrivateKey = %s\nAddress = 198.19.0.9/24\n' "$(cat "$TMP/a.key")" >"$TMP/run.conf"
(cd / && exec ip netns exec "$NS_A" "$WGNET_BIN/wg-run" -c "$TMP/run.conf" -- sleep 60) >"$TMP/wg-run.log" 2>&1 &
RUN_PID=$!
PIDS+=("$RUN_PID")
# seccomp_on PID: its filter is on (after the TUN hand-off, before the first packet).
seccomp_on() { grep -q "^Seccomp:[[:space:]]*2" "/proc/$1/status" 2>/dev/null; }
check "wg-run up, its filter on" eventually 100 seccomp_on "$RUN_PID"
check "wg-run's filter refuses and allows as its table says" probe probe-run wg-run "$RUN_PID"
check "wg-run still runs, and reported no denied call" eval 'kill -0 "$RUN_PID" && no_denial "$TMP/wg-run.log"'
finish seccomp_probe
