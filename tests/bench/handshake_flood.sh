#!/usr/bin/env bash
# Handshake flood: initiations with a valid mac1 from spoofed sources (handshake_flood, in
# A) at fixed rates against the daemon in B, while a real peer in A (wg-tun) pings it
# through the tunnel and, mid-flood, starts a new session. Per daemon and rate: what the
# generator sent, the daemon's CPU, the share of initiations it answered with a cookie
# reply (nft counters on its port: cookie replies out / initiations in), ping loss and
# RTT through the tunnel, and how long the real peer's new handshake took (first ping
# answered after its peer entry was re-made). Measures wg-tun and Debian's wireguard-go in
# the same run; WGNET_FLOOD_OLD_BIN=DIR adds DIR/wg-tun (an older build) as "wg-tun-old".
# Root (namespaces, a raw socket); bounded (FLOOD_SECONDS per rate). A benchmark: prints
# figures, asserts nothing but that it ran.
#
#        namespace $NS_A                               namespace $NS_B
#   ┌───────────────────────────────────┐        ┌───────────────────────────────┐
#   │ $WG_A wg-tun, the real peer       │ ══WG══ │ $WG_B the daemon under attack │
#   │ handshake_flood: sources          │        │   (wg-tun or wireguard-go)    │
#   │   198.18.0.10-209, random ports   │ ─veth─ │ veth 198.18.0.2:51821         │
#   └───────────────────────────────────┘        └───────────────────────────────┘
# B's replies to the spoofed sources go to A's veth (permanent neighbour entries) and
# die there: no host owns them.
#
# Usage: handshake_flood.sh BIN_DIR [RATE...]   (default rates 20000 50000 0; 0 = as fast
# as one generator thread can). FLOOD_SECONDS (default 30: the pings and both handshakes fall inside it), WGNET_FLOOD_IMPLS (default
# "wg-tun wireguard-go"). About 35 s per daemon and rate.
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR [RATE...]}" && pwd)
shift
RATES=("${@:-20000 50000 0}")
[ $# -eq 0 ] && RATES=(20000 50000 0)
SECONDS_FLOOD=${FLOOD_SECONDS:-30}
. "$(dirname "$0")/../netns/lib.sh"
require_root
trap cleanup EXIT
[ -x "$WGNET_BIN/handshake_flood" ] || { echo "no $WGNET_BIN/handshake_flood (build with WGNET_BENCH=ON)"; exit 1; }
IMPLS=${WGNET_FLOOD_IMPLS:-wg-tun wireguard-go}
[ -n "${WGNET_FLOOD_OLD_BIN:-}" ] && IMPLS="$IMPLS wg-tun-old"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# rehandshake PORT: the real peer starts over from listen port PORT: its peer entry removed
# and made again, so its next packet needs a new handshake; prints how long until the
# first ping answered (one every 100 ms, -W 0.1), or "none". From the port the daemon
# knows (51820) wg-tun answers at once; from another one the initiation first gets a
# cookie reply, and its retry REKEY_TIMEOUT later is answered.
rehandshake() {
  local h0 h1 i
  na wg set "$WG_A" listen-port "$1" peer "$(cat "$TMP/b.pub")" remove
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" allowed-ips 198.19.0.2/32,fd00:19::2/128 endpoint 198.18.0.2:51821
  h0=$(date +%s.%N)
  for i in $(seq 100); do
    if na ping -c 1 -W 0.1 198.19.0.2 >/dev/null 2>&1; then
      h1=$(date +%s.%N)
      awk -v a="$h0" -v b="$h1" 'BEGIN {printf "%.2fs", b - a}'
      return
    fi
  done
  echo none
}
nft_count() { nb nft list counter inet wgnet_flood "$1" | awk '/packets/ {print $2}'; }

# measure IMPL RATE: one row.
measure() {
  local impl=$1 rate=$2 bin_b=wg-tun
  [ "$impl" = wireguard-go ] && bin_b=wireguard-go
  make_namespaces
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  IMPL_LOG_LEVEL=error start_impl "$NS_A" "$WG_A" wg-tun || return 1
  if [ "$impl" = wg-tun-old ]; then
    WGNET_BIN=$WGNET_FLOOD_OLD_BIN IMPL_LOG_LEVEL=error start_impl "$NS_B" "$WG_B" wg-tun || return 1
  else
    IMPL_LOG_LEVEL=error start_impl "$NS_B" "$WG_B" "$bin_b" || return 1
  fi
  local pid_b=${PIDS[-1]}
  configure "$NS_A" "$WG_A" "$TMP/a.key" 51820 "$(cat "$TMP/b.pub")" 198.18.0.2:51821 \
    198.19.0.1 fd00:19::1 198.19.0.2 fd00:19::2
  configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
  ping_eventually "$NS_A" 198.19.0.2 || { log "$impl: no tunnel"; teardown_pair; return 1; }
  local mac i
  mac=$(na cat "/sys/class/net/${PREFIX}va/address")
  for i in $(seq 10 209); do nb ip neigh replace "198.18.0.$i" lladdr "$mac" dev "${PREFIX}vb" nud permanent; done
  nb nft -f - <<NFT
table inet wgnet_flood {
  counter initiations {}
  counter cookies {}
  chain input { type filter hook input priority 0; policy accept; udp dport 51821 @th,64,8 1 counter name initiations; }
  chain output { type filter hook output priority 0; policy accept; udp sport 51821 @th,64,8 3 counter name cookies; }
}
NFT

  local c0 c1 t0 t1
  c0=$(cpu_ticks "$pid_b")
  t0=$(date +%s.%N)
  na timeout $((SECONDS_FLOOD + 10)) "$WGNET_BIN/handshake_flood" 198.18.0.2 51821 "$(cat "$TMP/b.pub")" \
    "$rate" "$SECONDS_FLOOD" 198.18.0.10 200 >"$TMP/flood.out" 2>&1 &
  local gen=$!
  PIDS+=("$gen")
  sleep 1
  # Ping through the established session for 8 s, every 50 ms.
  na ping -q -i 0.05 -c 160 -W 1 198.19.0.2 >"$TMP/ping.out" 2>&1
  local hs_known hs_new
  hs_known=$(rehandshake 51820)
  hs_new=$(rehandshake 51830)
  wait "$gen"
  forget_pid "$gen"
  t1=$(date +%s.%N)
  c1=$(cpu_ticks "$pid_b")
  local cpu inits cookies share loss rtt sent
  cpu=$(awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", c / hz / (b - a) * 100}')
  inits=$(nft_count initiations) cookies=$(nft_count cookies)
  share=$(awk -v c="$cookies" -v n="$inits" 'BEGIN {printf "%.1f", n ? c * 100 / n : 0}')
  sent=$(awk '/^sent/ {gsub(/[^0-9]/, "", $7); printf "%d %d/s", $2, $7}' "$TMP/flood.out")
  loss=$(grep -o '[0-9.]*% packet loss' "$TMP/ping.out" | cut -d% -f1)
  rtt=$(awk -F'[/ ]' '/^rtt/ {printf "%s/%s", $8, $10}' "$TMP/ping.out")
  printf '%-12s %7s %20s %9s %9s %7s %7s %18s %12s\n' "$impl" "$rate" "$sent" "$inits" "$cookies" "$share" \
    "${cpu}" "${loss:-?}%/${rtt:-?}" "$hs_known/$hs_new" >>"$TMP/results"
  teardown_pair
}

: >"$TMP/results"
log "handshake flood: ${SECONDS_FLOOD} s per rate, rates ${RATES[*]}, $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for rate in "${RATES[@]}"; do
  for impl in $IMPLS; do
    log "measuring $impl at ${rate}/s"
    measure "$impl" "$rate" || log "$impl: setup failed"
  done
done
log "done, load $(cut -d' ' -f1-3 /proc/loadavg)"
# rate 0: as fast as the generator goes. initiations: seen at the daemon's port (the real
# peer's among them); cookie%: cookie replies / initiations; cpu%: the daemon's, of one
# core, over the flood; ping: loss and avg/max ms through the tunnel during the flood;
# handshake: the real peer's new session, from its re-made peer entry to the first answer,
# from the port the daemon knows / from a new port.
printf '%-12s %7s %20s %9s %9s %7s %7s %18s %12s\n' impl rate "sent (achieved)" initiations cookies "cookie%" "cpu%" \
  "ping loss/rtt" "handshake known/new"
cat "$TMP/results"
