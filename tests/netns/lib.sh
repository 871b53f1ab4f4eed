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
# finish [WHAT [LINES]]: a suite's verdict. With failures: their count, the last LINES
# (20) lines of every log, exit 1; otherwise "all WHAT checks passed".
finish() {
  local f
  if [ "$FAILURES" -ne 0 ]; then
    log "$FAILURES check(s) failed"
    for f in "$TMP"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -"${2:-20}" "$f"; }; done
    exit 1
  fi
  log "all ${1:+$1 }checks passed"
}
pass() { log "ok: $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
# wait_ss NS WHAT GREP_ARGS...: waits up to 10 s for a listening TCP socket in NS whose
# local address passes `grep -q GREP_ARGS...`; WHAT names it when none comes.
wait_ss() {
  local ns=$1 what=$2 _
  shift 2
  for _ in $(seq 100); do
    ip netns exec "$ns" ss -ltnH | awk '{print $4}' | grep -q "$@" && return 0
    sleep 0.1
  done
  log "nothing listens on tcp $what in $ns"
  return 1
}
# eventually TENTHS CMD...: CMD succeeds within TENTHS tenths of a second (polled every
# 0.1 s, and once more at the end): for a state that takes effect soon after an action,
# instead of a fixed sleep.
eventually() {
  local n=$1 _
  shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  "$@"
}
# wait_listen NS ADDR:PORT: a TCP socket listening at exactly ADDR:PORT.
wait_listen() { wait_ss "$1" "$2" -xF "$2"; }
# wait_tcp_port NS PORT: a TCP socket listening on PORT at any address (iperf3 -s -D
# returns before it listens).
wait_tcp_port() { wait_ss "$1" "port $2" -E ":$2\$"; }

# forget_pid PID: forgets a PID that has been waited for, so that cleanup never signals
# a reused PID.
forget_pid() {
  local keep=() p
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && [ "$p" != "$1" ] && keep+=("$p"); done
  PIDS=("${keep[@]:-}")
}

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
  # WGNET_KEEP_LOGS=DIR keeps the logs (daemons' included, with whatever a sanitizer
  # printed when they exited) in DIR.
  if [ -n "${WGNET_KEEP_LOGS:-}" ]; then mkdir -p "$WGNET_KEEP_LOGS" && cp -a "$TMP"/. "$WGNET_KEEP_LOGS"/; fi
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

# start_impl NS IFACE IMPL [ARG...]: starts a WireGuard daemon (wg-tun or wireguard-go)
# in NS in the foreground, remembering its PID; ARGs follow the interface name (wg-tun's
# offload flags). IMPL_LOG_LEVEL (default verbose) sets LOG_LEVEL; IMPL_ENV holds
# arguments for env(1) in front of it (e.g. "-u WG_TUN_DISABLE_TSO").
start_impl() {
  local ns=$1 iface=$2 impl=$3 bin
  shift 3
  case $impl in
    wg-tun) bin="$WGNET_BIN/wg-tun" ;;
    wg-tun-old) bin="$WGNET_OLD_BIN/wg-tun" ;;  # an earlier build, for before/after runs
    wireguard-go) bin=${WIREGUARD_GO:-wireguard-go} ;;  # WIREGUARD_GO: another build of it
  esac
  # shellcheck disable=SC2086  # IMPL_ENV is a list of words
  ip netns exec "$ns" env ${IMPL_ENV:-} LOG_LEVEL="${IMPL_LOG_LEVEL:-verbose}" "$bin" -f "$iface" "$@" \
    >"$TMP/$iface.log" 2>&1 &
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

# The version of the wireguard-go that start_impl runs: $WIREGUARD_GO's own (--version),
# or Debian's package version.
wireguard_go_version() {
  if [ -n "${WIREGUARD_GO:-}" ]; then
    "$WIREGUARD_GO" --version 2>/dev/null | awk '/wireguard-go/ {print $2; exit}'
  else
    dpkg-query -W -f '${Version}' wireguard-go 2>/dev/null || echo '?'
  fi
}

# Sets up the pair with implementations IMPL_A and IMPL_B. Keys in $TMP. ARGS_A and
# ARGS_B (words, default none) go to the daemons' command lines.
setup_pair() {
  local impl_a=$1 impl_b=$2
  make_namespaces
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  # shellcheck disable=SC2086
  start_impl "$NS_A" "$WG_A" "$impl_a" ${ARGS_A:-} || return 1
  # shellcheck disable=SC2086
  start_impl "$NS_B" "$WG_B" "$impl_b" ${ARGS_B:-} || return 1
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
  wait_tcp_port "$sns" 5201 || return 1
  local out
  out=$(ip netns exec "$cns" timeout $((secs + 10)) iperf3 -c "$addr" -t "$secs" -J "$@" 2>/dev/null)
  local rc=$?
  [ -f "$TMP/iperf.pid" ] && kill "$(cat "$TMP/iperf.pid")" 2>/dev/null
  rm -f "$TMP/iperf.pid"
  [ $rc -eq 0 ] || return 1
  echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f" % d["end"]["sum_received"]["bits_per_second"])'
}

# iperf_udp CLIENT_NS SERVER_NS SERVER_ADDR RATE SECONDS [extra]: an iperf3 UDP flow at
# a fixed RATE (1300-byte datagrams, so nothing is fragmented in a 1420 tunnel); prints
# "LOST PACKETS MBITS" as the receiving side counted them (the server, or the client with -R).
# The receiving iperf3 socket gets 2 MB (-w): with the kernel's default 208 KB, a few
# milliseconds without CPU for iperf3 on a 2-vCPU machine overflow it, and that loss is
# the tool's, not the tunnel's (seen: every lost datagram was a RcvbufErrors of iperf3's
# own socket, wg-tun's sockets dropped none).
iperf_udp() {
  local cns=$1 sns=$2 addr=$3 rate=$4 secs=$5; shift 5
  ip netns exec "$sns" iperf3 -s -1 -D -I "$TMP/iperf.pid" >/dev/null 2>&1
  wait_tcp_port "$sns" 5201 || return 1
  local out rc
  out=$(ip netns exec "$cns" timeout $((secs + 10)) iperf3 -c "$addr" -u -b "$rate" -l 1300 -w 2M \
    -t "$secs" -J "$@" 2>/dev/null)
  rc=$?
  [ -f "$TMP/iperf.pid" ] && kill "$(cat "$TMP/iperf.pid")" 2>/dev/null
  rm -f "$TMP/iperf.pid"
  [ $rc -eq 0 ] || return 1
  echo "$out" | python3 -c 'import json,sys; s=json.load(sys.stdin)["end"]["sum"]; print(s["lost_packets"], s["packets"], "%.0f" % (s["bits_per_second"] / 1e6))'
}

# Where datagrams were dropped in NS: "rcvbuf=N tun_tx_dropped=N" (UDP receive buffers
# overflowed in the namespace, and the TUN IFACE's queue from kernel to daemon). For
# failure messages: they tell the tunnel's loss from the tool's.
# With PORT, also the drops of the UDP sockets bound to PORT (the daemon's own).
drop_counters() { # NS IFACE [PORT]
  local rcvbuf tx sock=""
  rcvbuf=$(ip netns exec "$1" awk '/^Udp:/ {n++; if (n == 2) print $6}' /proc/net/snmp)
  tx=$(ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_dropped" 2>/dev/null)
  [ -n "${3:-}" ] && sock=" port_$3=$(udp_socket_drops "$1" "$3")"
  echo "rcvbuf=${rcvbuf:-?}$sock tun_tx_dropped=${tx:-?}"
}

# udp_socket_drops NS PORT: datagrams the kernel dropped at the UDP sockets bound to PORT
# in NS (receive buffer full, or a socket filter), summed over IPv4 and IPv6: the "drops"
# column, the last, of /proc/net/udp and /proc/net/udp6 (port in hex after the colon).
udp_socket_drops() {
  ip netns exec "$1" awk -v port="$(printf '%04X' "$2")" '
    FNR > 1 { n_fields = split($2, local_addr, ":"); if (local_addr[n_fields] == port) drops += $NF }
    END { print drops + 0 }' /proc/net/udp /proc/net/udp6
}

# --- wg-tun's offloads ---
# Each one has a flag and an environment switch ("1" or anything but "" and "0" turns it
# off): the names, in the order of wg-tun's verbose log line when its interface comes up
#   interface NAME: offloads: tun tso on uso on gro-tcp on gro-udp on csum on; udp gso on gro on
OFFLOADS=(tso uso tun-gro tun-csum udp-gso udp-gro)
offload_env() {
  case $1 in
    tso) echo WG_TUN_DISABLE_TSO ;;
    uso) echo WG_TUN_DISABLE_USO ;;
    tun-gro) echo WG_TUN_DISABLE_GRO ;;
    tun-csum) echo WG_TUN_DISABLE_CSUM ;;
    udp-gso) echo WG_DISABLE_UDP_GSO ;;
    udp-gro) echo WG_DISABLE_UDP_GRO ;;
  esac
}
# env(1) arguments that clear every switch (for checks of the defaults).
OFFLOAD_ENV_CLEAR="-u WG_TUN_DISABLE_TSO -u WG_TUN_DISABLE_USO -u WG_TUN_DISABLE_GRO -u WG_TUN_DISABLE_CSUM -u WG_DISABLE_UDP_GSO -u WG_DISABLE_UDP_GRO"

# The offloads this run's environment switches off (as wg-tun reads the variables).
offloads_off_by_env() {
  local o v
  for o in "${OFFLOADS[@]}"; do
    v=$(printenv "$(offload_env "$o")")
    [ -n "$v" ] && [ "$v" != 0 ] && echo "$o"
  done
}

# offloads_line OFF...: the offload part of the log line wg-tun writes when the named
# offloads are off and the kernel took the rest (Linux >= 6.2: USO). TUN GRO covers both
# kinds; GRO of UDP stays on without USO (wg-tun cannot tell then whether the kernel
# takes it, and tries).
offloads_line() {
  local off=" $* " tso=on uso=on gro=on csum=on gso=on ugro=on
  [[ $off == *" tso "* ]] && tso=off
  [[ $off == *" uso "* ]] && uso=off
  [[ $off == *" tun-gro "* ]] && gro=off
  [[ $off == *" tun-csum "* ]] && csum=off
  [[ $off == *" udp-gso "* ]] && gso=off
  [[ $off == *" udp-gro "* ]] && ugro=off
  echo "offloads: tun tso $tso uso $uso gro-tcp $gro gro-udp $gro csum $csum; udp gso $gso gro $ugro"
}

# offloads_logged IFACE OFF...: true when the last offload line in wg-tun's log for IFACE
# (verbose; written once the interface is up) says exactly that OFF... are off. Waits up
# to 3 s for the line.
offloads_logged() {
  local iface=$1; shift
  local want got i
  want=$(offloads_line "$@")
  for i in $(seq 30); do
    got=$(grep -o 'offloads: .*' "$TMP/$iface.log" | tail -1)
    [ -n "$got" ] && break
    sleep 0.1
  done
  [ "$got" = "$want" ] && return 0
  log "  $iface logged '${got:-nothing}', expected '$want'"
  return 1
}

# ethtool_feature NS IFACE FEATURE: "on" or "off" as `ethtool -k` shows it.
ethtool_feature() {
  ip netns exec "$1" ethtool -k "$2" 2>/dev/null | awk -v f="$3:" '$1 == f {print $2}'
}
