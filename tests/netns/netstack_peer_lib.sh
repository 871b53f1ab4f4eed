# shellcheck shell=bash
# Shared setup of wg-netstack against a kernel-TUN peer, and of loss injection, for
# tests/bench/netns_loss.sh and tests/netns/wg_netstack_loss_test.sh. Source it after
# lib.sh (WGNET_BIN set).
#
#        namespace $NS_A                               namespace $NS_B
#   ┌──────────────────────────────┐              ┌─────────────────────────────────┐
#   │ wg-netstack  UDP :51820      │  WireGuard   │ $WG_B (wg-tun or wireguard-go)  │
#   │   netstack 198.19.0.1        │ <══════════> │   :51821, 198.19.0.2/24         │
#   │   SOCKS5 127.0.0.1:1080      │              │   servers of the caller         │
#   │ veth 198.18.0.1/24           │ <───veth───> │ veth 198.18.0.2/24              │
#   │ nft input: udp dport 51820   │              │ nft input: udp dport 51821      │
#   │   count, drop N/10000        │              │   count, drop N/10000           │
#   └──────────────────────────────┘              └─────────────────────────────────┘
#
# Loss (nftables; the machine has no netem): each namespace drops in its
# input hook a random N in 10000 of the datagrams to its WireGuard port, after a rule that
# counts them all, so both directions lose independently and the rate actually applied
# can be read back. tx-udp-segmentation is switched off on both veths, so that a UDP-GSO
# batch is split into datagrams before it reaches the rule.

SOCKS=127.0.0.1:1080
NETSTACK_PID=
PORT_A=51820 # wg-netstack (or A's wg-tun in setup_pair)
PORT_B=51821
LOSS_TABLE=wgnet_loss

# run_bg NS LOGNAME CMD...: runs CMD in namespace NS in the background, remembered for
# cleanup; its PID is ${PIDS[-1]}.
run_bg() {
  local ns=$1 name=$2; shift 2
  ip netns exec "$ns" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}

# Starts wg-netstack in A (SOCKS5 on $SOCKS) against a peer at 198.18.0.2:$PORT_B.
# Keys in $TMP/a.key, $TMP/b.pub. NETSTACK_LOG_LEVEL: default error. NETSTACK_ARGS:
# more flags for wg-netstack, split on spaces (e.g. "--tcp-congestion cubic").
# With WIREPROXY (a path), that wireproxy runs instead, with the same file and its
# [Socks5] section (which wg-netstack reads the same way).
start_netstack() {
  cat >"$TMP/a.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
ListenPort = $PORT_A
Address = 198.19.0.1/24

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32
Endpoint = 198.18.0.2:$PORT_B
CONF
  chmod 600 "$TMP/a.conf"
  if [ -n "${WIREPROXY:-}" ]; then
    printf '\n[Socks5]\nBindAddress = %s\n' "$SOCKS" >>"$TMP/a.conf"
    run_bg "$NS_A" wg-netstack "$WIREPROXY" -s -c "$TMP/a.conf"
  else
    # shellcheck disable=SC2086  # NETSTACK_ARGS is a list of flags
    run_bg "$NS_A" wg-netstack "$WGNET_BIN/wg-netstack" -c "$TMP/a.conf" \
      --log-level "${NETSTACK_LOG_LEVEL:-error}" --socks5 "$SOCKS" ${NETSTACK_ARGS:-}
  fi
  # shellcheck disable=SC2034  # read by the scripts that source this file
  NETSTACK_PID=${PIDS[-1]}
  wait_listen "$NS_A" "$SOCKS"
}

# setup_netstack_pair IMPL_B: fresh namespaces, wg-netstack (or WIREPROXY) in A, IMPL_B
# (wg-tun or wireguard-go) in B, tx-udp-segmentation off, and a first handshake (ping from B),
# all before any loss is switched on.
setup_netstack_pair() {
  local impl_b=$1
  make_namespaces
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  veth_udp_segmentation_off || return 1
  start_impl "$NS_B" "$WG_B" "$impl_b" || return 1
  configure "$NS_B" "$WG_B" "$TMP/b.key" "$PORT_B" "$(cat "$TMP/a.pub")" "198.18.0.1:$PORT_A" \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
  start_netstack || { log "wg-netstack did not start:"; cat "$TMP/wg-netstack.log"; return 1; }
  ping_eventually "$NS_B" 198.19.0.1 || { log "no handshake between $impl_b and wg-netstack"; return 1; }
}

# Switches tx-udp-segmentation off on both veths and checks that it is off.
veth_udp_segmentation_off() {
  local ns dev state
  for ns in "$NS_A" "$NS_B"; do
    dev="${PREFIX}v${ns: -1}"
    ip netns exec "$ns" ethtool -K "$dev" tx-udp-segmentation off 2>"$TMP/ethtool.err"
    state=$(ethtool_feature "$ns" "$dev" tx-udp-segmentation)
    if [ "$state" != off ]; then
      log "tx-udp-segmentation on $dev is '${state:-?}' after ethtool -K: $(cat "$TMP/ethtool.err")"
      return 1
    fi
  done
}

# loss_on NS PORT PERMYRIAD: in NS, count every UDP datagram to PORT in the input hook,
# then drop PERMYRIAD in 10000 of them at random (0: count only).
loss_on() {
  local ns=$1 port=$2 n=$3
  ip netns exec "$ns" nft -f - <<NFT
table inet $LOSS_TABLE {
  counter seen {}
  counter dropped {}
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport $port counter name "seen"
    udp dport $port numgen random mod 10000 < $n counter name "dropped" drop
  }
}
NFT
}

# loss_both PERMYRIAD: loss_on in A (to wg-netstack's or wg-tun's $PORT_A) and in B.
loss_both() {
  loss_on "$NS_A" "$PORT_A" "$1" && loss_on "$NS_B" "$PORT_B" "$1"
}

# loss_counters NS → "SEEN_PACKETS SEEN_BYTES DROPPED_PACKETS" of NS's input rules.
loss_counters() {
  ip netns exec "$1" nft -j list counters table inet "$LOSS_TABLE" 2>/dev/null | python3 -c '
import json, sys
c = {}
for o in json.load(sys.stdin)["nftables"]:
    if "counter" in o:
        c[o["counter"]["name"]] = o["counter"]
s, d = c.get("seen", {}), c.get("dropped", {})
print(s.get("packets", 0), s.get("bytes", 0), d.get("packets", 0))' || echo "0 0 0"
}

# permyriad PERCENT → N of "numgen random mod 10000 < N" (0.5 → 50), or nothing if
# PERCENT is not a number in 0..100.
permyriad() {
  python3 -c '
import sys
try:
    p = float(sys.argv[1])
except ValueError:
    sys.exit(1)
if not 0 <= p <= 100:
    sys.exit(1)
print(round(p * 100))' "$1"
}
