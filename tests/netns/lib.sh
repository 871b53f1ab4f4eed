# Shared helpers for the netns integration tests. Source it; set WGNET_BIN first.
#
#        namespace $NS_A                               namespace $NS_B
#   ┌──────────────────────────┐                ┌──────────────────────────┐
#   │ $WG_A  198.19.0.1/24     │   WireGuard    │ $WG_B  198.19.0.2/24     │
#   │        fd00:19::1/64     │ <════════════> │        fd00:19::2/64     │
#   │ veth a 198.18.0.1/24     │ <────veth────> │ veth b 198.18.0.2/24     │
#   │        fd00:18::1/64     │                │        fd00:18::2/64     │
#   └──────────────────────────┘                └──────────────────────────┘
#
# Every name carries a per-run prefix; leftovers of the prefix are removed first and
# everything is removed on exit, pass or fail.

set -u
RUN_ID=${RUN_ID:-$$}
PREFIX="wgn${RUN_ID}"
NS_A="${PREFIX}a"
NS_B="${PREFIX}b"
WG_A="wa${RUN_ID}"
WG_B="wb${RUN_ID}"
PIDS=()
FAILURES=0
TMP=$(mktemp -d /tmp/wgnet-netns.XXXXXX)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() { log "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pass() { log "ok: $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

na() { ip netns exec "$NS_A" "$@"; }
nb() { ip netns exec "$NS_B" "$@"; }

require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIPPED: netns tests need root (network namespaces, TUN devices)"
    exit 77
  fi
}

cleanup() {
  local pid
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null
  done
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
  rm -f "/var/run/wireguard/$WG_A.sock" "/var/run/wireguard/$WG_B.sock"
  rm -rf "$TMP"
}

make_namespaces() {
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "${PREFIX}va" netns "$NS_A" type veth peer name "${PREFIX}vb" netns "$NS_B"
  na ip link set lo up
  nb ip link set lo up
  na ip addr add 198.18.0.1/24 dev "${PREFIX}va"
  nb ip addr add 198.18.0.2/24 dev "${PREFIX}vb"
  na ip addr add fd00:18::1/64 dev "${PREFIX}va" nodad
  nb ip addr add fd00:18::2/64 dev "${PREFIX}vb" nodad
  na ip link set "${PREFIX}va" up
  nb ip link set "${PREFIX}vb" up
}

# start_impl NS IFACE IMPL: starts a WireGuard daemon (wg-tun or wireguard-go) in NS in
# the foreground, remembering its PID. IMPL_LOG_LEVEL (default verbose) sets LOG_LEVEL.
start_impl() {
  local ns=$1 iface=$2 impl=$3 bin
  case $impl in
    wg-tun) bin="$WGNET_BIN/wg-tun" ;;
    wireguard-go) bin=wireguard-go ;;
  esac
  ip netns exec "$ns" env LOG_LEVEL="${IMPL_LOG_LEVEL:-verbose}" "$bin" -f "$iface" >"$TMP/$iface.log" 2>&1 &
  PIDS+=($!)
  local i
  for i in $(seq 50); do
    [ -S "/var/run/wireguard/$iface.sock" ] && ip netns exec "$ns" ip link show "$iface" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  log "daemon $impl for $iface did not start:"; cat "$TMP/$iface.log"
  return 1
}

# configure NS IFACE PRIVFILE PORT PEERPUB ENDPOINT|"" ADDR4 ADDR6 PEER4 PEER6
configure() {
  local ns=$1 iface=$2 priv=$3 port=$4 peer=$5 endpoint=$6 a4=$7 a6=$8 p4=$9 p6=${10}
  ip netns exec "$ns" wg set "$iface" private-key "$priv" listen-port "$port" \
    peer "$peer" allowed-ips "$p4/32,$p6/128" ${endpoint:+endpoint "$endpoint"}
  ip netns exec "$ns" ip addr add "$a4/24" dev "$iface"
  ip netns exec "$ns" ip addr add "$a6/64" dev "$iface" nodad
  ip netns exec "$ns" ip link set "$iface" up
}

# Sets up the pair with implementations IMPL_A and IMPL_B. Keys in $TMP.
setup_pair() {
  local impl_a=$1 impl_b=$2
  make_namespaces
  wg genkey >"$TMP/a.key"; wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg genkey >"$TMP/b.key"; wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  chmod 600 "$TMP"/*.key
  start_impl "$NS_A" "$WG_A" "$impl_a" || return 1
  start_impl "$NS_B" "$WG_B" "$impl_b" || return 1
  configure "$NS_A" "$WG_A" "$TMP/a.key" 51820 "$(cat "$TMP/b.pub")" 198.18.0.2:51821 \
    198.19.0.1 fd00:19::1 198.19.0.2 fd00:19::2
  configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
}

teardown_pair() {
  local pid
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null; done
  PIDS=()
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
  rm -f "/var/run/wireguard/$WG_A.sock" "/var/run/wireguard/$WG_B.sock"
}

ping_ok() { # NS ADDR
  ip netns exec "$1" ping -c 2 -i 0.2 -W 3 "$2" >/dev/null 2>&1
}

# Waits up to 8 s for a first ping to get through (a handshake may be under way).
ping_eventually() { # NS ADDR
  local i
  for i in $(seq 8); do
    ip netns exec "$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1 && return 0
  done
  return 1
}

# wg show NS IFACE FIELD → value for the single peer
wg_field() { ip netns exec "$1" wg show "$2" "$3" | awk '{print $2" "$3}' | head -1; }

iperf_tcp() { # CLIENT_NS SERVER_NS SERVER_ADDR SECONDS [extra]
  local cns=$1 sns=$2 addr=$3 secs=$4; shift 4
  ip netns exec "$sns" iperf3 -s -1 -D -I "$TMP/iperf.pid" >/dev/null 2>&1
  sleep 0.3
  local out
  out=$(ip netns exec "$cns" timeout $((secs + 10)) iperf3 -c "$addr" -t "$secs" -J "$@" 2>/dev/null)
  local rc=$?
  [ -f "$TMP/iperf.pid" ] && kill "$(cat "$TMP/iperf.pid")" 2>/dev/null
  rm -f "$TMP/iperf.pid"
  [ $rc -eq 0 ] || return 1
  echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f" % d["end"]["sum_received"]["bits_per_second"])'
}
