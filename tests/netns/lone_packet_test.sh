#!/usr/bin/env bash
# A lone packet into an idle tunnel is delivered at once, never held for the next one:
# one UDP datagram, and one TCP connection (its SYN), echoed, in each direction, with
# wg-netstack in A against wg-netstack, wg-tun and wireguard-go in B.
#
#        namespace $NS_A                               namespace $NS_B
#   ┌──────────────────────────────┐              ┌─────────────────────────────────┐
#   │ wg-netstack :51820           │  WireGuard   │ wg-netstack, wg-tun or          │
#   │   198.19.0.1, keepalive 25 s │ <══════════> │   wireguard-go :51821           │
#   │   forward 127.0.0.1:7000 →   │              │   198.19.0.2                    │
#   │     198.19.0.2:7             │              │   (wg-netstack: forward         │
#   │   reverse 198.19.0.1:7 →     │              │    127.0.0.1:7100 → 198.19.0.1:7│
#   │     echo 127.0.0.1:7         │              │    reverse :7 → echo)           │
#   │ veth 198.18.0.1/24           │ <───veth───> │ echo 0.0.0.0:7, veth 198.18.0.2 │
#   └──────────────────────────────┘              └─────────────────────────────────┘
#
# Fresh start, A the initiator: A comes up first and its first initiation
# (PersistentKeepalive) meets a closed port; B comes up 300 ms later, as when a client
# and its server start together. The first requests must not wait for REKEY_TIMEOUT
# (5 s): each must be echoed within 2 s. Then 11 s of silence (past the 10 s keepalive:
# nothing in flight, the session older), and the lone requests again, B's direction
# first, each echoed within 1 s (each one alone: nothing else is in flight when it is
# sent). Then the same with B the initiator: only B knows the other's endpoint, and B's
# lone datagram starts the handshake. The round trips are printed.
# wireguard-go is the reference release, when the machine has one (REFERENCE_WG_GO
# below), else the one on PATH; WIREGUARD_GO picks another.
#
# Topology: lib.sh. Usage: lone_packet_test.sh BIN_DIR   (exit 77 = skipped)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
trap cleanup EXIT
require_root
HERE=$(cd "$(dirname "$0")" && pwd)
REFERENCE_WG_GO=$HERE/../../../shared/reference/bin/wireguard-go
if [ -z "${WIREGUARD_GO:-}" ] && [ -x "$REFERENCE_WG_GO" ]; then WIREGUARD_GO=$REFERENCE_WG_GO; fi
WIREGUARD_GO=${WIREGUARD_GO:-$(command -v wireguard-go)}
[ -x "$WIREGUARD_GO" ] || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
[ -x "$WGNET_BIN/wg-netstack" ] || { echo "$WGNET_BIN/wg-netstack missing: build it first"; exit 1; }
PORT_A=51820
PORT_B=51821

# run_bg NS NAME CMD...: CMD in NS in the background, its output in $TMP/NAME.log.
run_bg() {
  local ns=$1 name=$2
  shift 2
  ip netns exec "$ns" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}

# netstack_conf FILE KEY ADDR PORT PEERPUB PEERADDR [ENDPOINT]: a wg-netstack config.
netstack_conf() {
  {
    printf '[Interface]\nPrivateKey = %s\nAddress = %s/24\nListenPort = %s\n' "$(cat "$2")" "$3" "$4"
    printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = %s/32\n' "$5" "$6"
    if [ -n "${7:-}" ]; then printf 'Endpoint = %s\nPersistentKeepalive = 25\n' "$7"; fi
  } >"$1"
  chmod 600 "$1"
}

# probe NS KIND HOST PORT LIMIT WHAT: one lone request from NS, echoed within LIMIT s.
probe() {
  local out
  if out=$(ip netns exec "$1" "$HERE/lone_probe.py" "$2" "$3" "$4" "$5"); then
    pass "$6: $out ms"
  else
    fail "$6: ${out:-no output} (limit $5 s)"
  fi
}

# stop_all: ends this scenario's processes; the next make_namespaces starts afresh.
stop_all() {
  local pid
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null; done
  PIDS=()
  rm -f "/var/run/wireguard/$WG_B.sock"
}

# scenario IMPL INITIATOR: wg-netstack in A against IMPL in B; INITIATOR (a or b) alone
# knows the other's endpoint.
scenario() {
  local impl=$1 initiator=$2 to_a_host to_a_port a_endpoint= b_endpoint= name
  name="$impl, $initiator initiates"
  log "--- wg-netstack against $name"
  if [ "$initiator" = a ]; then a_endpoint=198.18.0.2:$PORT_B; else b_endpoint=198.18.0.1:$PORT_A; fi
  make_namespaces
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  run_bg "$NS_A" echo-a "$HERE/echo_server.py" 127.0.0.1 7
  run_bg "$NS_B" echo-b "$HERE/echo_server.py" 0.0.0.0 7
  netstack_conf "$TMP/a.conf" "$TMP/a.key" 198.19.0.1 "$PORT_A" "$(cat "$TMP/b.pub")" 198.19.0.2 "$a_endpoint"
  run_bg "$NS_A" "netstack-a-$impl" "$WGNET_BIN/wg-netstack" -c "$TMP/a.conf" --no-socks5 \
    --forward udp:127.0.0.1:7000=198.19.0.2:7 --forward tcp:127.0.0.1:7000=198.19.0.2:7 \
    --reverse udp:198.19.0.1:7=127.0.0.1:7 --reverse tcp:198.19.0.1:7=127.0.0.1:7
  wait_listen "$NS_A" 127.0.0.1:7000 || { fail "$impl: wg-netstack in A did not start"; stop_all; return; }
  wait_listen "$NS_B" 0.0.0.0:7 || { fail "$impl: no echo server in B"; stop_all; return; }
  sleep 0.3  # with A the initiator: B starts after its first initiation was refused
  if [ "$impl" = wg-netstack ]; then
    netstack_conf "$TMP/b.conf" "$TMP/b.key" 198.19.0.2 "$PORT_B" "$(cat "$TMP/a.pub")" 198.19.0.1 "$b_endpoint"
    run_bg "$NS_B" netstack-b "$WGNET_BIN/wg-netstack" -c "$TMP/b.conf" --no-socks5 \
      --forward udp:127.0.0.1:7100=198.19.0.1:7 --forward tcp:127.0.0.1:7100=198.19.0.1:7 \
      --reverse udp:198.19.0.2:7=127.0.0.1:7 --reverse tcp:198.19.0.2:7=127.0.0.1:7
    wait_listen "$NS_B" 127.0.0.1:7100 || { fail "$impl: wg-netstack in B did not start"; stop_all; return; }
    to_a_host=127.0.0.1 to_a_port=7100
  else
    start_impl "$NS_B" "$WG_B" "$impl" || { fail "$impl did not start"; stop_all; return; }
    ip netns exec "$NS_B" wg set "$WG_B" private-key "$TMP/b.key" listen-port "$PORT_B" \
      peer "$(cat "$TMP/a.pub")" allowed-ips 198.19.0.1/32 \
      ${b_endpoint:+endpoint "$b_endpoint" persistent-keepalive 25}
    ip netns exec "$NS_B" ip addr add 198.19.0.2/24 dev "$WG_B"
    ip netns exec "$NS_B" ip link set "$WG_B" up
    to_a_host=198.19.0.1 to_a_port=7
  fi
  if [ "$initiator" = a ]; then
    probe "$NS_A" udp 127.0.0.1 7000 2 "$name: fresh start, A→B datagram"
    probe "$NS_B" udp "$to_a_host" "$to_a_port" 2 "$name: fresh start, B→A datagram"
  else  # A cannot send until B's handshake: B's datagram first
    probe "$NS_B" udp "$to_a_host" "$to_a_port" 2 "$name: fresh start, B→A datagram"
    probe "$NS_A" udp 127.0.0.1 7000 2 "$name: fresh start, A→B datagram"
  fi
  probe "$NS_A" tcp 127.0.0.1 7000 2 "$name: fresh start, A→B connection"
  probe "$NS_B" tcp "$to_a_host" "$to_a_port" 2 "$name: fresh start, B→A connection"
  sleep 11  # silence: keepalives done, nothing in flight
  probe "$NS_B" udp "$to_a_host" "$to_a_port" 1 "$name: idle session, B→A datagram"
  probe "$NS_A" udp 127.0.0.1 7000 1 "$name: idle session, A→B datagram"
  probe "$NS_A" tcp 127.0.0.1 7000 1 "$name: idle session, A→B connection"
  probe "$NS_B" tcp "$to_a_host" "$to_a_port" 1 "$name: idle session, B→A connection"
  stop_all
}

log "wireguard-go: $WIREGUARD_GO ($("$WIREGUARD_GO" --version 2>&1 | head -1))"
for initiator in a b; do
  for impl in wg-netstack wg-tun wireguard-go; do scenario "$impl" "$initiator"; done
done
finish "lone packet"
