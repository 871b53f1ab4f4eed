#!/usr/bin/env bash
# Data integrity and UDP loss through wg-tun, in network namespaces (topology: lib.sh),
# for wg-tun <-> wg-tun and wg-tun <-> Debian's wireguard-go, in both directions:
#   - 1 GiB of a deterministic pseudo-random TCP stream (stream.py: generated and hashed
#     on the fly, nothing on disk) A→B over IPv4 and B→A over IPv6 in the tunnel; the
#     SHA-256 and length of what arrived must equal what was sent, and the receiver's
#     WireGuard counter must have grown by at least that much;
#   - an iperf3 UDP flow at a fixed rate A→B and B→A (-R) for 5 s: no datagram lost
#     between wg-tun's (in their sockets, TUN queues or pipelines; a datagram that
#     arrived and overflowed iperf3's own receiving socket is the tool's loss, counted
#     and shown, not failed); with Debian's wireguard-go, every lost datagram must be one that
#     wireguard-go's own queues dropped (its UDP socket's full buffer as the receiver,
#     its TUN queue as the sender: the reference's loss, not wg-tun's), and any loss
#     beyond that fails. A flow with 1 % dropped by nftables before that socket shows
#     that such loss is caught.
# The wireguard-go pair runs twice: wg-tun as it starts by default, then with --queues 2.
# Usage: wg_tun_integrity_test.sh BIN_DIR   (exit 77 = skipped: not root)
# WGNET_INTEGRITY_BYTES changes the stream length (default 1 GiB).
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
trap cleanup EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
STREAM=$(cd "$(dirname "$0")" && pwd)/stream.py
BYTES=${WGNET_INTEGRITY_BYTES:-1073741824}

# UDP rates, chosen on this project's 2-vCPU CI machine class (and checked by 5 runs in a
# row of this script): wg-tun <-> wg-tun carried 400 Mbit/s both ways with no loss in
# every trial, so 200 Mbit/s leaves a margin of 2 for a loaded machine. Debian's 2022
# wireguard-go receives into a socket with the kernel's default 208 KB buffer (newer
# wireguard-go asks for 7 MB) and one datagram per read: at 100 Mbit/s it dropped a few
# dozen datagrams in that socket now and then (/proc/net/udp "drops" of its port; wg-tun's
# sockets dropped none), so toward it the rate is 50 Mbit/s. Even there a loaded machine
# made it drop 1,820 of 24,035: udp_flow counts the drops of its socket and accepts loss
# up to them, and as the sender the drops of its TUN queue (kernel → wireguard-go; 15,514
# of them during the TCP transfers of one CI run). Between wg-tun's, and in wg-tun's own
# queues, no loss is accepted. wg-tun's TUN queue holds 1,024 packets (Tun::Options::
# queue_len): with the kernel's 500, one CI run lost 20 of 96,142 datagrams there (the
# sending wg-tun's reader descheduled for over 26 ms), and two busy loops beside this
# flow made it lose 77; with 1,024 the same loaded runs lost none there.
# A CI run beside two compilers and a fuzz build lost 276 of 96,117 there even so: the
# reader descheduled for over 60 ms, the machine's load and not wg-tun's pipeline. So for
# the UDP flows a sending wg-tun's queue holds UDP_TUN_QUEUE packets (0.5 s at 200 Mbit/s):
# descheduling is absorbed, while a reader slower than the rate would still overflow it
# within the 5 s, and every loss is still counted.
UDP_TUN_QUEUE=8192
UDP_RATE_SELF=200M
UDP_RATE_WGGO=50M
UDP_SECONDS=5

# transfer WHAT SENDER_NS RECEIVER_NS RECEIVER_WG RECEIVER_ADDR SEED
transfer() {
  local what=$1 sns=$2 rns=$3 rwg=$4 addr=$5 seed=$6
  local limit=300  # seconds for the whole transfer: 1 GiB at >= 30 Mbit/s
  rm -f "$TMP/recv.out" "$TMP/recv.err" "$TMP/send.out" "$TMP/send.err"
  local rx0
  rx0=$(ip netns exec "$rns" wg show "$rwg" transfer | awk '{print $2}')
  ip netns exec "$rns" timeout "$limit" python3 "$STREAM" recv "$addr" 45000 >"$TMP/recv.out" 2>"$TMP/recv.err" &
  local rpid=$! i
  PIDS+=("$rpid")
  for i in $(seq 50); do grep -q listening "$TMP/recv.err" 2>/dev/null && break; sleep 0.1; done
  local t0 t1 src rrc
  t0=$(date +%s.%N)
  ip netns exec "$sns" timeout "$limit" python3 "$STREAM" send "$addr" 45000 "$BYTES" "$seed" \
    >"$TMP/send.out" 2>"$TMP/send.err"
  src=$?
  wait "$rpid"; rrc=$?
  forget_pid "$rpid"
  t1=$(date +%s.%N)
  local sent got rx1 took
  sent=$(cat "$TMP/send.out" 2>/dev/null) got=$(cat "$TMP/recv.out" 2>/dev/null)
  rx1=$(ip netns exec "$rns" wg show "$rwg" transfer | awk '{print $2}')
  took=$(awk -v a="$t0" -v b="$t1" -v n="$BYTES" 'BEGIN {printf "%.1f s, %.0f Mbit/s", b - a, n * 8 / (b - a) / 1e6}')
  check "$what: $BYTES bytes arrive intact ($took; sent ${sent:-?}, received ${got:-?})" \
    test "$src" -eq 0 -a "$rrc" -eq 0 -a -n "$sent" -a "$sent" = "$got" -a "${sent%% *}" = "$BYTES"
  [ "$src" -eq 0 ] || sed 's/^/  sender: /' "$TMP/send.err"
  [ "$rrc" -eq 0 ] || sed 's/^/  receiver: /' "$TMP/recv.err"
  check "$what: it went through WireGuard (receiver's rx grew by $((rx1 - rx0)) bytes)" \
    test "$((rx1 - rx0))" -ge "$BYTES"
}

# ref_drops: what the reference daemon's own queues in B dropped so far: datagrams its
# UDP socket on :51821 could not take (full receive buffer) plus packets the kernel could
# not queue to its TUN $WG_B (it read them too slowly).
ref_drops() {
  local sock tun
  sock=$(udp_socket_drops "$NS_B" 51821)
  tun=$(nb cat "/sys/class/net/$WG_B/statistics/tx_dropped" 2>/dev/null)
  echo $((sock + ${tun:-0}))
}

# tool_drops NS PORT: datagrams dropped for a full receive buffer at UDP sockets in NS
# other than the daemon's on PORT: iperf3's own socket as the receiver (after the tunnel
# delivered them: the tool's loss). Udp and Udp6 RcvbufErrors of the namespace, less the
# drops of the daemon's sockets.
tool_drops() {
  local all
  all=$(ip netns exec "$1" awk '/^Udp:/ {n++; if (n == 2) v4 = $6} END {print v4 + 0}' /proc/net/snmp)
  all=$((all + $(ip netns exec "$1" awk '$1 == "Udp6RcvbufErrors" {print $2}' /proc/net/snmp6)))
  echo $((all - $(udp_socket_drops "$1" "$2")))
}

# udp_flow WHAT RATE REF [-R]: A is the iperf3 client, B the server (-R: B sends).
# REF: "-", or "ref" when B runs the reference (wireguard-go): then loss up to what its
# own queues dropped during the flow (ref_drops) is the reference's, and only loss
# beyond that fails; wg-tun's side stays at zero loss either way. Loss at iperf3's own
# receiving socket (tool_drops) is the tool's in both cases.
udp_flow() {
  local what=$1 rate=$2 ref=$3; shift 3
  local r lost packets mbits drops_a drops_b ref0=0 ref1=0 tool0 tool1
  local rns=$NS_B rport=51821
  [ "${1:-}" = -R ] && rns=$NS_A rport=51820
  na ip link set dev "$WG_A" txqueuelen "$UDP_TUN_QUEUE"
  [ "$ref" = ref ] || nb ip link set dev "$WG_B" txqueuelen "$UDP_TUN_QUEUE"
  drops_a=$(drop_counters "$NS_A" "$WG_A" 51820) drops_b=$(drop_counters "$NS_B" "$WG_B" 51821)
  [ "$ref" = ref ] && ref0=$(ref_drops)
  tool0=$(tool_drops "$rns" "$rport")
  r=$(iperf_udp "$NS_A" "$NS_B" 198.19.0.2 "$rate" "$UDP_SECONDS" "$@")
  tool1=$(tool_drops "$rns" "$rport")
  [ "$ref" = ref ] && ref1=$(ref_drops)
  read -r lost packets mbits <<<"$r"
  # The flow must have run at its rate (not just lost nothing): iperf3 counts the packets
  # it sent, lost or not, so 90 % of rate x time is a floor that CPU contention on the
  # sending side could miss but the tunnel cannot fake.
  local rate_bits=$(( ${rate%M} * 1000000 ))
  local expected=$(( rate_bits / 8 / 1300 * UDP_SECONDS ))
  local explained=$((ref1 - ref0 + tool1 - tool0)) note="; iperf3's socket dropped $((tool1 - tool0))"
  [ "$ref" = ref ] && note="$note, wireguard-go's own socket and TUN queue $((ref1 - ref0))"
  # Drop counters of both namespaces before → after, to tell where any loss happened.
  check "$what: UDP at $rate for ${UDP_SECONDS} s: ${lost:-?} of ${packets:-?} datagrams lost$note, ${mbits:-?} Mbit/s (drops A: $drops_a → $(drop_counters "$NS_A" "$WG_A" 51820); B: $drops_b → $(drop_counters "$NS_B" "$WG_B" 51821))" \
    test -n "$r" -a "${lost:-1}" -le "$explained" -a "${packets:-0}" -ge $((expected * 9 / 10))
}

# The accounting catches loss that is not the reference's socket's: 1 % of the datagrams
# to wireguard-go's port dropped by nftables in B's input hook (before any socket) must
# show up as loss beyond the socket's drops. UDP_RATE_WGGO for 3 s: ~140 such drops.
# Only datagrams longer than 512 bytes (iperf3's 1300-byte data) are dropped: iperf3
# sends its UDP "connect" datagram once and waits for the answer without retrying, so
# losing that one would hang the tool, not test the accounting.
accounting_catches_loss() {
  local r lost packets ref0 ref1
  nb nft -f - <<NFT
table inet wgnet_integrity {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 51821 udp length > 512 numgen random mod 100 < 1 drop
  }
}
NFT
  ref0=$(ref_drops)
  r=$(iperf_udp "$NS_A" "$NS_B" 198.19.0.2 "$UDP_RATE_WGGO" 3)
  ref1=$(ref_drops)
  nb nft delete table inet wgnet_integrity
  read -r lost packets _ <<<"$r"
  check "wg-tun→wireguard-go with 1 % dropped before its socket: ${lost:-?} of ${packets:-?} lost, wireguard-go's queues dropped $((ref1 - ref0)): the check above would fail" \
    test -n "$r" -a "${lost:-0}" -gt $((ref1 - ref0))
}

pair() { # IMPL_B UDP_RATE SEED
  local b=$1 rate=$2 seed=$3
  log "=== wg-tun${ARGS_A:+ $ARGS_A} <-> $b ==="
  setup_pair wg-tun "$b" || { fail "wg-tun/$b setup"; teardown_pair; return; }
  check "wg-tun→$b tunnel up" ping_eventually "$NS_A" 198.19.0.2
  check "$b→wg-tun tunnel up over IPv6" ping_eventually "$NS_B" fd00:19::1
  if [ -n "${ARGS_A:-}" ]; then
    local n=${ARGS_A#--queues }
    check "wg-tun runs $n TUN queues and $n UDP sockets per family (its log says so: both families here)" \
      grep -q "$n TUN queues and $((2 * n)) UDP sockets" "$TMP/$WG_A.log"
  fi
  transfer "wg-tun→$b TCP over IPv4" "$NS_A" "$NS_B" "$WG_B" 198.19.0.2 "$seed"
  transfer "$b→wg-tun TCP over IPv6" "$NS_B" "$NS_A" "$WG_A" fd00:19::1 $((seed + 1))
  local ref=-
  [ "$b" = wireguard-go ] && ref=ref
  udp_flow "wg-tun→$b" "$rate" "$ref"
  [ "$b" = wireguard-go ] && accounting_catches_loss
  udp_flow "$b→wg-tun" "$rate" "$ref" -R
  check "wg-tun daemon alive" kill -0 "${PIDS[0]}"
  teardown_pair
}

pair wg-tun "$UDP_RATE_SELF" 1
pair wireguard-go "$UDP_RATE_WGGO" 3
# Several queues (--queues 2: two TUN queues with a reader each, two UDP sockets per
# family with a receiver each) against the reference: the same checks, and the log line
# that says the interface runs them.
ARGS_A="--queues 2" pair wireguard-go "$UDP_RATE_WGGO" 5

finish "integrity"
