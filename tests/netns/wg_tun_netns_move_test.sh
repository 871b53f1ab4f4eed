#!/usr/bin/env bash
# wg-tun keeps working when its interface moves to another network namespace, as the
# kernel's netns.sh arranges it: the daemon and its UDP socket stay in A, the interface
# lives in C. The old namespace gets RTM_DELLINK for a move exactly as for a deletion;
# only a real deletion may end the daemon, and up/down/MTU in the new namespace must
# still reach it.
#
#   namespace $NS_C            namespace $NS_A                 namespace $NS_B
#  ┌──────────────────┐      ┌────────────────────────┐      ┌──────────────────────┐
#  │ $WG_A 198.19.0.1 │ fd   │ wg-tun (UDP :51820)    │      │ wireguard-go $WG_B   │
#  │  (moved from A)  │<────>│ veth a 198.18.0.1      │<────>│ 198.19.0.2           │
#  └──────────────────┘      └────────────────────────┘ veth │ veth b 198.18.0.2    │
#                                                             └──────────────────────┘
# Usage: wg_tun_netns_move_test.sh BIN_DIR   (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
NS_C="${PREFIX}c"
trap 'ip netns del "$NS_C" 2>/dev/null; cleanup' EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }

nc_() { ip netns exec "$NS_C" "$@"; }

# seen PATTERN: how many lines of wg-tun's log match PATTERN.
seen() { grep -cE "$1" "$TMP/$WG_A.log"; }
# logged PATTERN N: waits up to 3 s for more than N lines of wg-tun's log to match PATTERN.
logged() {
  local i
  for i in $(seq 30); do
    [ "$(seen "$1")" -gt "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

# udp_listening NS PORT: a UDP socket is bound to PORT in NS.
udp_listening() { ip netns exec "$1" ss -ulnH | awk '{print $4}' | grep -qE "[:.]$2\$"; }

# wait_for SECONDS CMD...: polls CMD every 0.1 s.
wait_for() {
  local secs=$1 i; shift
  for i in $(seq $((secs * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}

ip netns del "$NS_C" 2>/dev/null
make_namespaces
ip netns add "$NS_C"
nc_ ip link set lo up
(umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
start_impl "$NS_A" "$WG_A" wg-tun || exit 1
pid=${PIDS[0]}
start_impl "$NS_B" "$WG_B" wireguard-go || exit 1
configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
  198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
na wg set "$WG_A" private-key "$TMP/a.key" listen-port 51820 \
  peer "$(cat "$TMP/b.pub")" allowed-ips 198.19.0.2/32,fd00:19::2/128 endpoint 198.18.0.2:51821

log "=== move $WG_A from A to C; the daemon stays in A ==="
na ip link set "$WG_A" netns "$NS_C"
check "move: the interface is in C" bash -c "ip netns exec $NS_C ip link show $WG_A >/dev/null"
sleep 0.5
check "move: the daemon is still running" kill -0 "$pid"
check "move: not taken for a deletion" bash -c "! grep -q 'deleted' '$TMP/$WG_A.log'"
nc_ ip addr add 198.19.0.1/24 dev "$WG_A"
nc_ ip addr add fd00:19::1/64 dev "$WG_A" nodad
ups=$(seen "interface $WG_A is up")
nc_ ip link set "$WG_A" up
check "move: C's up reaches the daemon" logged "interface $WG_A is up" "$ups"
check "move: its UDP socket is in A" wait_for 3 udp_listening "$NS_A" 51820
check "move: and not in C" bash -c "! ip netns exec $NS_C ss -ulnH | grep -q ':51820'"
check "move: ping from C through the tunnel to B" ping_eventually "$NS_C" 198.19.0.2
check "move: IPv6 too" ping_ok "$NS_C" fd00:19::2
check "move: and from B back into C" ping_ok "$NS_B" 198.19.0.1

log "=== events in the new namespace ==="
nc_ ip link set "$WG_A" mtu 1300
check "events: C's MTU change reaches the daemon" logged "interface $WG_A: MTU 1300" 0
downs=$(seen "interface $WG_A is down")
nc_ ip link set "$WG_A" down
check "events: C's down reaches the daemon" logged "interface $WG_A is down" "$downs"
check "events: down closes the UDP socket in A" wait_for 3 bash -c "! ip netns exec $NS_A ss -ulnH | grep -q ':51820'"
nc_ ip link set "$WG_A" up
check "events: up again opens it in A" wait_for 3 udp_listening "$NS_A" 51820
check "events: traffic after down/up" ping_eventually "$NS_C" 198.19.0.2

log "=== a second move, back to A ==="
nc_ ip link set "$WG_A" netns "$NS_A"
sleep 0.5
check "move back: the daemon is still running" kill -0 "$pid"
na ip addr add 198.19.0.1/24 dev "$WG_A"
na ip link set "$WG_A" up
check "move back: ping from A" ping_eventually "$NS_A" 198.19.0.2
na ip link set "$WG_A" netns "$NS_C"
sleep 0.5
check "move again: the daemon is still running" kill -0 "$pid"

log "=== deletion in the new namespace ends the daemon ==="
nc_ ip link del "$WG_A"
timeout 5 tail --pid="$pid" -f /dev/null
check "delete: the daemon exited" bash -c "! kill -0 $pid 2>/dev/null"
check "delete: logged as a deletion" grep -q "interface $WG_A: deleted, shutting down" "$TMP/$WG_A.log"
check "delete: socket file removed" test ! -e "/var/run/wireguard/$WG_A.sock"
wait "$pid" 2>/dev/null
forget_pid "$pid"

finish "" 30
