# Setup shared by wg_netstack_conns_test.sh and tests/bench/netstack_conns.sh: wg-netstack
# in namespace A, a WireGuard peer in B running socks_conns.py's servers. Source it after
# lib.sh; set WGNET_BIN, and PEER_IMPL (wg-tun or wireguard-go, default wireguard-go).
#
#        namespace $NS_A                               namespace $NS_B
#   ┌───────────────────────────────┐            ┌───────────────────────────────────┐
#   │ socks_conns.py hold/churn/... │            │ socks_conns.py server 198.19.0.2  │
#   │   │ 127.0.0.1:1080            │            │   :7000 echo, :7001 sink,         │
#   │   ▼                           │            │   :7002 source                    │
#   │ wg-netstack  UDP :51820       │ WireGuard  │ $WG_B ($PEER_IMPL) :51821         │
#   │   netstack 198.19.0.1         │ <════════> │   198.19.0.2/24                   │
#   │   health 127.0.0.1:9090       │            │                                   │
#   │ veth 198.18.0.1/24            │ <──veth──> │ veth 198.18.0.2/24                │
#   └───────────────────────────────┘            └───────────────────────────────────┘
#
# Both ends hold 10,000 connections and more: every process here inherits
# `ulimit -n 20000` (the hard limit of this machine class), set by conns_setup.

CONNS_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/socks_conns.py
SOCKS=127.0.0.1:1080
HEALTH=127.0.0.1:9090
TARGET=198.19.0.2
ECHO_PORT=7000
NETSTACK_PID=
PEER_IMPL=${PEER_IMPL:-wireguard-go}

# bg NS LOGNAME CMD...: runs CMD in namespace NS in the background, remembered for cleanup.
bg() {
  local ns=$1 name=$2; shift 2
  ip netns exec "$ns" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}

# wait_line FILE REGEX SECONDS: waits for a line matching REGEX in FILE, prints it.
wait_line() {
  local file=$1 re=$2 secs=$3 i
  for i in $(seq $((secs * 10))); do
    if grep -qE "$re" "$file" 2>/dev/null; then grep -E "$re" "$file" | tail -1; return 0; fi
    sleep 0.1
  done
  return 1
}

# rss_kb PID: VmRSS of PID in KiB.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }

# metric NAME: the value of an unlabelled metric of wg-netstack's /metrics.
metric() {
  ip netns exec "$NS_A" curl -s --max-time 5 "http://$HEALTH/metrics" | awk -v m="$1" '$1 == m {print $2}'
}

# wait_closed SECONDS: waits until wg-netstack has no proxied connection open.
wait_closed() {
  local i
  for i in $(seq $(($1 * 10))); do
    [ "$(metric wgnet_proxy_connections_active)" = 0 ] && return 0
    sleep 0.1
  done
  return 1
}

conns_setup() {
  ulimit -n 20000 || { log "cannot raise the file limit to 20000"; return 1; }
  make_namespaces
  # Client ports toward the proxy: 10,000 held plus the TIME_WAIT of earlier runs.
  na sysctl -qw net.ipv4.ip_local_port_range="10000 65000"
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  IMPL_LOG_LEVEL=error start_impl "$NS_B" "$WG_B" "$PEER_IMPL" || return 1
  configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
  bg "$NS_B" server python3 "$CONNS_PY" server "$TARGET" "$ECHO_PORT"
  wait_listen "$NS_B" "$TARGET:$ECHO_PORT" || return 1

  (umask 077; cat >"$TMP/a.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
ListenPort = 51820
Address = 198.19.0.1/24, fd00:19::1/64

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32, fd00:19::2/128
Endpoint = 198.18.0.2:51821
CONF
  )
  netstack_start
}

# netstack_start: starts wg-netstack in A (NETSTACK_PID) and waits until one connection
# gets through the tunnel (the first one waits for the handshake). Its connection cap is
# raised to the descriptor limit: 10,000 held are past the default.
# NETSTACK_ARGS: more wg-netstack flags. With WIREPROXY (a path), that wireproxy runs
# instead (same file, its [Socks5] section; no health endpoint).
netstack_start() {
  if [ -n "${WIREPROXY:-}" ]; then
    { cat "$TMP/a.conf"; printf '\n[Socks5]\nBindAddress = %s\n' "$SOCKS"; } >"$TMP/wireproxy.conf"
    bg "$NS_A" wireproxy "$WIREPROXY" -s -c "$TMP/wireproxy.conf"
    NETSTACK_PID=${PIDS[-1]}
    wait_listen "$NS_A" "$SOCKS" || return 1
  else
    # shellcheck disable=SC2086  # NETSTACK_ARGS: more flags, split on spaces
    bg "$NS_A" wg-netstack "$WGNET_BIN/wg-netstack" -c "$TMP/a.conf" --log-level "${NETSTACK_LOG_LEVEL:-error}" \
      --socks5 "$SOCKS" --health "$HEALTH" --max-connections 20000 ${NETSTACK_ARGS:-}
    NETSTACK_PID=${PIDS[-1]}
    wait_listen "$NS_A" "$SOCKS" && wait_listen "$NS_A" "$HEALTH" || return 1
  fi
  echo close | na timeout 30 python3 "$CONNS_PY" hold "$SOCKS" "$TARGET" "$ECHO_PORT" 1 \
    >"$TMP/warmup.out" 2>&1
  grep -q '^held 1 0 ' "$TMP/warmup.out" || { log "no connection through the tunnel:"; cat "$TMP/warmup.out"; return 1; }
}

# netstack_stop: stops that wg-netstack (SIGTERM, then waits up to 10 s).
netstack_stop() {
  [ -n "$NETSTACK_PID" ] || return 0
  kill "$NETSTACK_PID" 2>/dev/null
  timeout 10 tail --pid="$NETSTACK_PID" -f /dev/null
  wait "$NETSTACK_PID" 2>/dev/null
  forget_pid "$NETSTACK_PID"
  NETSTACK_PID=
}

# hold_start N: starts socks_conns.py hold with N connections in the background, its
# stdin on fd HOLD_CTL; hold_cmd CMD sends it a command; hold_end closes and waits.
HOLD_PID=
HOLD_CTL=
hold_start() {
  rm -f "$TMP/hold.ctl" "$TMP/hold.out" "$TMP/hold.err"
  mkfifo "$TMP/hold.ctl"
  na timeout -k 5 900 python3 "$CONNS_PY" hold "$SOCKS" "$TARGET" "$ECHO_PORT" "$1" \
    <"$TMP/hold.ctl" >"$TMP/hold.out" 2>"$TMP/hold.err" &
  HOLD_PID=$!
  PIDS+=("$HOLD_PID")
  exec {HOLD_CTL}>"$TMP/hold.ctl"
}
hold_cmd() { echo "$1" >&"$HOLD_CTL"; }
hold_end() {
  hold_cmd close
  exec {HOLD_CTL}>&-
  timeout 60 tail --pid="$HOLD_PID" -f /dev/null
  wait "$HOLD_PID" 2>/dev/null
  forget_pid "$HOLD_PID"
  HOLD_PID=
}
