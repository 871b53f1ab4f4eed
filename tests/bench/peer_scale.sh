#!/usr/bin/env bash
# Peer scale: `wg setconf` with N random peers (one /128 each under fd00:19::/64) plus one
# real peer, then `wg show dump`, memory per peer, a ping through the real peer, and the
# CPU the daemon spends after clients abandoned dumps half-way. Measures wg-tun and Debian's
# wireguard-go in the same run and prints both. Root (namespaces); bounded (every command
# under a timeout, N fixed). A benchmark: prints figures, asserts nothing but that it ran.
#
#        namespace $NS_A                              namespace $NS_B
#   ┌───────────────────────────────┐            ┌───────────────────────────┐
#   │ $WG_A (wg-tun or wireguard-go)│ WireGuard  │ $WG_B (wireguard-go)      │
#   │   198.19.0.1, N + 1 peers     │ <════════> │   198.19.0.2, one peer    │
#   │ veth 198.18.0.1               │ <──veth──> │ veth 198.18.0.2           │
#   └───────────────────────────────┘            └───────────────────────────┘
#
# Usage: peer_scale.sh BIN_DIR [PEERS]   (PEERS default 65535; WGNET_SCALE_IMPLS picks the
# implementations, default "wg-tun wireguard-go"). About a minute; wireguard-go needs ~0.7 GB.
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR [PEERS]}" && pwd)
PEERS=${2:-65535}
. "$(dirname "$0")/../netns/lib.sh"
require_root
trap cleanup EXIT
if ! command -v wireguard-go >/dev/null || ! command -v wg >/dev/null; then
  apt-get install -y --no-install-recommends wireguard-go wireguard-tools >/dev/null || exit 1
fi

# The random peers' configuration, shared by both implementations (same keys, same order).
python3 - "$PEERS" >"$TMP/peers.conf" <<'PY'
import base64, os, sys
n = int(sys.argv[1])
seen = set()
out = []
while len(out) < n:
    host = os.urandom(8)
    if host in seen or host == b"\0" * 7 + b"\1" or host == b"\0" * 7 + b"\2":
        continue
    seen.add(host)
    addr = "fd00:19::" + ":".join(host[i:i + 2].hex() for i in range(0, 8, 2))
    out.append("[Peer]\nPublicKey = %s\nAllowedIPs = %s/128\n" % (base64.b64encode(os.urandom(32)).decode(), addr))
sys.stdout.write("\n".join(out))
PY

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# now_s: seconds since the epoch with ms.
now_s() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }

# measure IMPL: one row of figures for IMPL on $WG_A.
measure() {
  local impl=$1
  make_namespaces
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  IMPL_LOG_LEVEL=error start_impl "$NS_A" "$WG_A" "$impl" || return 1
  local pid=${PIDS[-1]}
  IMPL_LOG_LEVEL=error start_impl "$NS_B" "$WG_B" wireguard-go || return 1
  configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
  na ip addr add 198.19.0.1/24 dev "$WG_A"
  na ip addr add fd00:19::1/64 dev "$WG_A" nodad
  na ip link set "$WG_A" up
  {
    printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\n\n' "$(cat "$TMP/a.key")"
    printf '[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.0.2/32, fd00:19::2/128\nEndpoint = 198.18.0.2:51821\n\n' \
      "$(cat "$TMP/b.pub")"
    cat "$TMP/peers.conf"
  } >"$TMP/a.conf"
  chmod 600 "$TMP/a.conf"

  local rss0 t0 t1 set_s dump_s="" lines rss1 ping_ok=no
  sleep 0.5
  rss0=$(rss_kb "$pid")
  t0=$(now_s)
  if ! na timeout 300 wg setconf "$WG_A" "$TMP/a.conf"; then
    log "$impl: wg setconf failed or took over 300 s"
    set_s=">300"
  else
    t1=$(now_s); set_s=$(elapsed "$t0" "$t1")
  fi
  # The best of three dumps: the machine is shared, and the least a dump took is what it costs.
  local run d
  for run in 1 2 3; do
    t0=$(now_s)
    lines=$(na timeout 120 wg show "$WG_A" dump | wc -l)
    t1=$(now_s); d=$(elapsed "$t0" "$t1")
    if [ "$lines" -lt $((PEERS + 2)) ]; then dump_s=">120 ($lines lines)"; break; fi
    if [ -z "${dump_s:-}" ] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$d" "$dump_s"; then
      dump_s=$d
    fi
  done
  rss1=$(rss_kb "$pid")
  ping_eventually "$NS_A" 198.19.0.2 && ping_ok=yes

  # Abandoned dumps: five clients that give up after 50 ms; then the CPU of the next 3 s.
  local i c0 c1
  for i in 1 2 3 4 5; do na timeout -s KILL 0.05 wg show "$WG_A" dump >/dev/null 2>&1; done
  sleep 0.2
  c0=$(cpu_ticks "$pid"); sleep 3; c1=$(cpu_ticks "$pid")
  local cpu_pct=$(( (c1 - c0) * 100 / $(getconf CLK_TCK) / 3 ))

  local per_peer=$(( (rss1 - rss0) * 1024 / (PEERS + 1) ))
  printf '%-13s %7d %10s %9s %10s %12s %6s %14s\n' "$impl" "$((PEERS + 1))" "$set_s" "$dump_s" \
    "$((rss1 / 1024))" "$per_peer" "$ping_ok" "$cpu_pct" >>"$TMP/results"
  teardown_pair
}

: >"$TMP/results"
log "peer scale: $PEERS random peers + 1 real peer, $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for impl in ${WGNET_SCALE_IMPLS:-wg-tun wireguard-go}; do
  log "measuring $impl"
  measure "$impl" || log "$impl: setup failed"
done
log "done, load $(cut -d' ' -f1-3 /proc/loadavg)"
# dump_s: best of 3; bytes/peer: RSS growth over setconf / peers; cpu%_abandoned: the
# daemon's CPU in the 3 s after five clients gave up on a dump after 50 ms each.
printf '%-13s %7s %10s %9s %10s %12s %6s %14s\n' impl peers setconf_s dump_s rss_MB bytes/peer ping \
  "cpu%_abandoned"
cat "$TMP/results"
