#!/usr/bin/env bash
# The daemons confined as they run in production, read from /proc and shown to act:
#   - wg-netstack (sandbox on by default): Seccomp 2 and NoNewPrivs 1 in /proc/PID/status,
#     traffic through SOCKS5, `wg show` over its UAPI; a SIGHUP whose config names a
#     WGConfig beside the first one is applied, one whose WGConfig lies in another
#     directory fails with the sandbox's reason and changes nothing while traffic goes
#     on; SIGTERM still removes the UAPI socket. With --no-sandbox the same reload is
#     applied; on a kernel without Landlock (tests/support/no_landlock.cpp) it says it
#     could not confine its files and works, its system calls still filtered.
#
#        namespace $NS_A                                 namespace $NS_B
#   wg-netstack --interface $WG_N   <══ WireGuard ══>   wireguard-go $WG_B, 198.19.0.2
#     SOCKS5 127.0.0.1:1080                              HTTP :8000 (a 2 MB file)
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
main_conf "$TMP/conf/wg2.conf"
kill -HUP "$NETSTACK_PID"
check "a WGConfig beside the first one is applied: two peers" eventually 50 peers_are 2
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

finish sandbox
