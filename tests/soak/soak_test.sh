#!/usr/bin/env bash
# A long, hostile run of two wg-tun and two wg-netstack: checksummed transfers and timed
# requests flow all the time (soak_load.py) while the harness injects a fault every
# SOAK_SLOT s, in turn:
#   storm    8 UAPI clients (get=1, malformed requests) and `wg show` loops on all four
#            daemons for 5 s                                  (no window: must not disturb)
#   sighup   N1 and N2 reload their files, a dummy peer added or removed
#                                                             (no window: must not disturb)
#   restart  N2 killed with SIGKILL and started again          (window on N2's paths)
#   loss     2 % of the datagrams to every WireGuard port dropped for 6 s (nftables
#            numgen in the input hooks, GSO off on the veths)  (window on every path)
#   rotate   a new private key on B's wg-tun; A's wg-tun and N1 told by `wg set`
#                                                              (window on AB, BA, N1)
#   move     A's interface moved to namespace C (up, a ping through it) and back
#                                                              (window on AB, BA, N2)
# soak_report.py then holds the events to its rules (no completed transfer with other
# bytes; outside fault windows every request answered within 1 s, no gap over 1 s in a
# transfer, no transfer failed), and this script each daemon's RSS and descriptors to
# their values at the start: RSS within +max(10 MiB, 20 %), descriptors equal.
#
#   namespace $NS_A                                        namespace $NS_B
#   ┌────────────────────────────────────┐               ┌────────────────────────────────────┐
#   │ clients (AB.*, N1.*)   servers     │               │ servers   clients (BA.*, N2.*)     │
#   │   │  :7100 tcp, :7200 udp, dns :53 │               │ :7100, :7200, dns :53    │         │
#   │   ▼                                │               │                          ▼         │
#   │ wg-tun $WG_A 198.19.0.1 :51820 ════╪══ WireGuard ══╪═ wg-tun $WG_B 198.19.0.2 :51821     │
#   │   fd00:19::1    (moved to C, back) │               │   fd00:19::2      (key rotated)    │
#   │ N1 wg-netstack 198.19.0.11 :51830 ═╪══ to $WG_B    │                                    │
#   │   SOCKS5 :1080 HTTP :3128          │   to $WG_A  ══╪═ N2 wg-netstack 198.19.0.12 :51831 │
#   │   udp fwd :7201, DNS 198.19.0.2    │               │   same ports, DNS 198.19.0.1       │
#   │ veth 198.18.0.1                    │ <───veth────> │ veth 198.18.0.2   (N2 restarted)   │
#   └────────────────────────────────────┘               └────────────────────────────────────┘
#   namespace $NS_C: empty, receives $WG_A for a moment.
#
# Paths (group.name): AB.* from A through wg-tun to B; N1.* from A through N1 to B (by
# name: b.soak); BA.* and N2.* the same from B (a.soak). Each group has UDP echo, a TCP
# echo per connection (direct, SOCKS5, HTTP CONNECT) and a GET through the HTTP proxy
# where it has one, and an upload and a download loop per transfer path.
#
# SOAK_SECONDS (default 600) is the length of the run, after an 8 s warm-up whose end
# sets the daemons' starting RSS and descriptors (pools and threads made once are in it).
# Usage: soak_test.sh BIN_DIR   (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
NETNS=$HERE/../netns
. "$NETNS/lib.sh"
. "$NETNS/netstack_peer_lib.sh"
require_root
SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_SLOT=${SOAK_SLOT:-12}   # seconds from one fault's start to the next one's
WARMUP=8
LOSS_PERMYRIAD=200           # 2 %
LOSS_SECONDS=6
TAIL=15                      # seconds without a new fault at the end, to recover in
NS_C="${PREFIX}c"
WN1="n1${RUN_ID}"
WN2="n2${RUN_ID}"
LOAD=$HERE/soak_load.py
ABUSE=$NETNS/uapi_abuse.py
FAULTS=$TMP/faults.txt
for b in wg-tun wg-netstack; do
  [ -x "$WGNET_BIN/$b" ] || { echo "$WGNET_BIN/$b missing: build it first"; exit 1; }
done
trap 'ip netns del "$NS_C" 2>/dev/null; cleanup; rm -f /var/run/wireguard/$WN1.sock /var/run/wireguard/$WN2.sock' EXIT

nc_() { ip netns exec "$NS_C" "$@"; }
now() { date +%s.%N; }
pub() { wg pubkey <"$TMP/$1.key"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

# write_netstack_conf N: N1's or N2's config file, written in place (the sandbox lets a
# reload read only the file it started with). Its peer is B's (N1) or A's (N2) wg-tun;
# DUMMY_PEER=1 adds a peer that never answers.
DUMMY_PEER=0
DUMMY_PUB=$(wg genkey | wg pubkey)
write_netstack_conf() {
  local n=$1 port addr dns peer endpoint allowed
  if [ "$n" = n1 ]; then
    port=51830 addr=198.19.0.11 dns=198.19.0.2 peer=$(pub b) endpoint=198.18.0.2:51821 allowed=198.19.0.2/32
  else
    port=51831 addr=198.19.0.12 dns=198.19.0.1 peer=$(pub a) endpoint=198.18.0.1:51820 allowed=198.19.0.1/32
  fi
  {
    printf '[Interface]\nPrivateKey = %s\nListenPort = %s\nAddress = %s/24\nDNS = %s\n\n' \
      "$(cat "$TMP/$n.key")" "$port" "$addr" "$dns"
    printf '[Peer]\nPublicKey = %s\nAllowedIPs = %s\nEndpoint = %s\n' "$peer" "$allowed" "$endpoint"
    [ "$DUMMY_PEER" = 1 ] && printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.0.250/32\n' "$DUMMY_PUB"
  } >"$TMP/$n.conf"
  chmod 600 "$TMP/$n.conf"
}

# start_netstack_n N NS IFACE: wg-netstack N in NS with SOCKS5, HTTP, a UDP forward to
# the far end's echo, /metrics and a UAPI socket; sets PID_<N>.
start_netstack_n() {
  local n=$1 ns=$2 iface=$3 far=198.19.0.2
  [ "$n" = n2 ] && far=198.19.0.1
  ip netns exec "$ns" "$WGNET_BIN/wg-netstack" -c "$TMP/$n.conf" --socks5 127.0.0.1:1080 \
    --http 127.0.0.1:3128 --forward "udp:127.0.0.1:7201=$far:7200" --health 127.0.0.1:9090 \
    --interface "$iface" >>"$TMP/$n.log" 2>&1 &
  PIDS+=($!)
  printf -v "PID_${n^^}" '%s' "$!"
  wait_listen "$ns" 127.0.0.1:1080 && wait_listen "$ns" 127.0.0.1:3128 && wait_listen "$ns" 127.0.0.1:9090
}

# The clients' paths in a namespace: GROUP_TUN (AB or BA) to FAR through wg-tun, GROUP_NS
# (N1 or N2) through the local wg-netstack to NAME.
clients_conf() {
  local gt=$1 gn=$2 far=$3 far6=$4 name=$5 seed=$6
  cat <<JSON
{"interval": 0.2, "rate": 4000000, "min_bytes": 262144, "max_bytes": 12000000, "seed": $seed,
 "requests": [
  {"path": "$gt.udp4", "kind": "udp", "host": "$far", "port": 7200},
  {"path": "$gt.udp6", "kind": "udp", "host": "$far6", "port": 7200},
  {"path": "$gt.tcp", "kind": "tcp", "host": "$far", "port": 7100},
  {"path": "$gn.socks", "kind": "socks5", "proxy": "127.0.0.1:1080", "host": "$name", "port": 7100},
  {"path": "$gn.http", "kind": "http", "proxy": "127.0.0.1:3128", "host": "$name", "port": 7100},
  {"path": "$gn.get", "kind": "get", "proxy": "127.0.0.1:3128", "host": "$name", "port": 7100},
  {"path": "$gn.udp", "kind": "udp", "host": "127.0.0.1", "port": 7201}],
 "transfers": [
  {"path": "$gt.xfer", "kind": "tcp", "hosts": ["$far", "$far6"], "port": 7100},
  {"path": "$gn.socks.xfer", "kind": "socks5", "proxy": "127.0.0.1:1080", "hosts": ["$name"], "port": 7100},
  {"path": "$gn.http.xfer", "kind": "http", "proxy": "127.0.0.1:3128", "hosts": ["$name"], "port": 7100}]}
JSON
}

setup() {
  make_namespaces
  ip netns del "$NS_C" 2>/dev/null
  ip netns add "$NS_C"
  nc_ ip link set lo up
  local k
  for k in a b n1 n2; do (umask 077; wg genkey >"$TMP/$k.key"); done
  veth_udp_segmentation_off || return 1
  start_impl "$NS_A" "$WG_A" wg-tun || return 1
  PID_WGA=${PIDS[-1]}
  start_impl "$NS_B" "$WG_B" wg-tun || return 1
  PID_WGB=${PIDS[-1]}
  na wg set "$WG_A" private-key "$TMP/a.key" listen-port 51820 \
    peer "$(pub b)" allowed-ips 198.19.0.2/32,fd00:19::2/128 endpoint 198.18.0.2:51821 \
    peer "$(pub n2)" allowed-ips 198.19.0.12/32 endpoint 198.18.0.2:51831
  nb wg set "$WG_B" private-key "$TMP/b.key" listen-port 51821 \
    peer "$(pub a)" allowed-ips 198.19.0.1/32,fd00:19::1/128 endpoint 198.18.0.1:51820 \
    peer "$(pub n1)" allowed-ips 198.19.0.11/32 endpoint 198.18.0.1:51830
  address_wg_a "$NS_A"
  nb ip addr add 198.19.0.2/24 dev "$WG_B"
  nb ip addr add fd00:19::2/64 dev "$WG_B" nodad
  nb ip link set "$WG_B" up
  run_bg "$NS_A" server_a python3 "$LOAD" server 7100 7200 "$TMP/events.server_a"
  run_bg "$NS_B" server_b python3 "$LOAD" server 7100 7200 "$TMP/events.server_b"
  run_bg "$NS_A" dns_a python3 "$HERE/../../scripts/dns_responder.py" 0.0.0.0 53 a.soak=198.19.0.1
  run_bg "$NS_B" dns_b python3 "$HERE/../../scripts/dns_responder.py" 0.0.0.0 53 b.soak=198.19.0.2
  write_netstack_conf n1
  write_netstack_conf n2
  start_netstack_n n1 "$NS_A" "$WN1" || return 1
  start_netstack_n n2 "$NS_B" "$WN2" || return 1
  wait_tcp_port "$NS_A" 7100 && wait_tcp_port "$NS_B" 7100 || return 1
  ping_eventually "$NS_A" 198.19.0.2 && ping_eventually "$NS_B" 198.19.0.11 &&
    ping_eventually "$NS_A" 198.19.0.12 || { log "no handshake on every tunnel"; return 1; }
  clients_conf AB N1 198.19.0.2 fd00:19::2 b.soak 1 >"$TMP/clients_a.json"
  clients_conf BA N2 198.19.0.1 fd00:19::1 a.soak 2 >"$TMP/clients_b.json"
}

# address_wg_a NS: A's interface addressed and up in NS (a move drops its addresses).
address_wg_a() {
  ip netns exec "$1" ip addr add 198.19.0.1/24 dev "$WG_A"
  ip netns exec "$1" ip addr add fd00:19::1/64 dev "$WG_A" nodad
  ip netns exec "$1" ip link set "$WG_A" up
}

# run_clients SECONDS: both namespaces' clients, in the background; CLIENT_PIDS.
run_clients() {
  CLIENT_PIDS=()
  run_bg "$NS_A" clients_a timeout $(($1 + 60)) python3 "$LOAD" clients "$TMP/clients_a.json" "$1" "$TMP/events.a"
  CLIENT_PIDS+=("${PIDS[-1]}")
  run_bg "$NS_B" clients_b timeout $(($1 + 60)) python3 "$LOAD" clients "$TMP/clients_b.json" "$1" "$TMP/events.b"
  CLIENT_PIDS+=("${PIDS[-1]}")
}
wait_clients() {
  local p rc=0
  for p in "${CLIENT_PIDS[@]}"; do wait "$p" || rc=1; forget_pid "$p"; done
  return $rc
}

# fault KIND START AFFECTED: one line of the fault log, ended now.
fault() { echo "$1 $2 $(now) $3" >>"$FAULTS"; }

fault_storm() {
  local t0 i out rc pids=() wrong=0
  t0=$(now)
  python3 "$ABUSE" storm 5 8 "/var/run/wireguard/$WG_A.sock" "/var/run/wireguard/$WG_B.sock" \
    "/var/run/wireguard/$WN1.sock" "/var/run/wireguard/$WN2.sock" >"$TMP/storm.out" 2>&1 &
  pids+=($!)
  for i in "$NS_A $WG_A" "$NS_B $WG_B" "$NS_A $WN1" "$NS_B $WN2"; do
    # shellcheck disable=SC2086  # "NS IFACE"
    (set -- $i; end=$((SECONDS + 5)); n=0
     while [ $SECONDS -lt $end ]; do ip netns exec "$1" wg show "$2" >/dev/null || n=$((n + 1)); done
     exit $((n > 0))) &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || wrong=$((wrong + 1)); done
  out=$(tail -1 "$TMP/storm.out")
  STORM_REQUESTS=$((STORM_REQUESTS + $(awk '{print $2}' <<<"$out")))
  check "storm: every UAPI request answered as it should, every wg show worked ($out)" test "$wrong" -eq 0
  [ "$wrong" -eq 0 ] || grep BAD "$TMP/storm.out" | head -5
  fault storm "$t0" -
}

fault_sighup() {
  local t0 want
  t0=$(now)
  DUMMY_PEER=$((1 - DUMMY_PEER))
  write_netstack_conf n1
  write_netstack_conf n2
  kill -HUP "$PID_N1" "$PID_N2"
  want=$((1 + DUMMY_PEER))
  check "sighup: N1 and N2 reloaded ($want peers each)" eventually 50 \
    eval "test \"\$(na wg show $WN1 peers | wc -l) \$(nb wg show $WN2 peers | wc -l)\" = '$want $want'"
  fault sighup "$t0" -
}

fault_restart() {
  local t0
  t0=$(now)
  disown "$PID_N2" 2>/dev/null
  kill -KILL "$PID_N2"
  timeout 5 tail --pid="$PID_N2" -f /dev/null
  forget_pid "$PID_N2"
  sleep 1
  check "restart: N2 up again" start_netstack_n n2 "$NS_B" "$WN2"
  fault restart "$t0" N2
}

loss_start() {
  local ns ports
  for ns in "$NS_A:51820, 51830" "$NS_B:51821, 51831"; do
    ports=${ns#*:}
    ip netns exec "${ns%%:*}" nft -f - <<NFT
table inet soak_loss {
  counter seen {}
  counter dropped {}
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport { $ports } counter name "seen"
    udp dport { $ports } numgen random mod 10000 < $LOSS_PERMYRIAD counter name "dropped" drop
  }
}
NFT
  done
}
fault_loss() {
  local t0 ns c
  t0=$(now)
  loss_start
  sleep "$LOSS_SECONDS"
  for ns in "$NS_A" "$NS_B"; do
    c=$(ip netns exec "$ns" nft -j list counters table inet soak_loss | python3 -c '
import json, sys
c = {o["counter"]["name"]: o["counter"]["packets"] for o in json.load(sys.stdin)["nftables"] if "counter" in o}
print(c.get("seen", 0), c.get("dropped", 0))')
    LOSS_SEEN=$((LOSS_SEEN + ${c% *}))
    LOSS_DROPPED=$((LOSS_DROPPED + ${c#* }))
    ip netns exec "$ns" nft delete table inet soak_loss
  done
  fault loss "$t0" AB,BA,N1,N2
}

fault_rotate() {
  local t0 old new
  t0=$(now)
  old=$(pub b)
  (umask 077; wg genkey >"$TMP/b.key")
  new=$(pub b)
  # The peers learn the new key first, as an administrator does it: B's first initiation
  # under the new key then meets peers that know it. In the other order, A's and B's
  # initiations can cross (each side consumes the other's, which discards its own, so
  # both responses are dropped): the tunnel then waits for REKEY_TIMEOUT, 5 s, or a
  # multiple when the retries cross again (wireguard-go does the same).
  na wg set "$WG_A" peer "$old" remove \
    peer "$new" allowed-ips 198.19.0.2/32,fd00:19::2/128 endpoint 198.18.0.2:51821
  na wg set "$WN1" peer "$old" remove peer "$new" allowed-ips 198.19.0.2/32 endpoint 198.18.0.2:51821
  write_netstack_conf n1
  nb wg set "$WG_B" private-key "$TMP/b.key"
  check "rotate: A's wg-tun and N1 know B's new key, not the old one" \
    test "$(na wg show "$WG_A" peers | grep -c -e "$new" -e "$old") $(na wg show "$WN1" peers | grep -c -e "$new" -e "$old")" = "1 1"
  fault rotate "$t0" AB,BA,N1
}

fault_move() {
  local t0
  t0=$(now)
  na ip link set "$WG_A" netns "$NS_C"
  address_wg_a "$NS_C"
  check "move: a ping through $WG_A from C" ping_eventually "$NS_C" 198.19.0.2
  nc_ ip link set "$WG_A" netns "$NS_A"
  address_wg_a "$NS_A"
  check "move: $WG_A back in A, its daemon running" kill -0 "$PID_WGA"
  fault move "$t0" AB,BA,N2
}

# resources: "RSS_KB FDS" of each daemon, in the order of DAEMONS.
DAEMONS=(wg-tun-A wg-tun-B N1 N2)
log_of() {
  case $1 in wg-tun-A) echo "$WG_A.log" ;; wg-tun-B) echo "$WG_B.log" ;; N1) echo n1.log ;; N2) echo n2.log ;; esac
}
daemon_pid() {
  case $1 in wg-tun-A) echo "$PID_WGA" ;; wg-tun-B) echo "$PID_WGB" ;; N1) echo "$PID_N1" ;; N2) echo "$PID_N2" ;; esac
}

log "=== soak: two wg-tun, two wg-netstack, ${SOAK_SECONDS} s, a fault every ${SOAK_SLOT} s ==="
setup || { fail "setup"; finish soak; }

log "--- warm-up, $WARMUP s ---"
run_clients "$WARMUP"
wait_clients || fail "warm-up clients"
sleep 3
declare -A RSS0 FDS0
for d in "${DAEMONS[@]}"; do
  RSS0[$d]=$(rss_kb "$(daemon_pid "$d")")
  FDS0[$d]=$(fds "$(daemon_pid "$d")")
done
log "at the start: $(for d in "${DAEMONS[@]}"; do printf '%s %s KiB %s fds; ' "$d" "${RSS0[$d]}" "${FDS0[$d]}"; done)"

# sample_rss: every 10 s, one line "SECONDS RSS..." (KiB, in the order of DAEMONS) to rss.txt.
LAST_SAMPLE=-10
sample_rss() {
  [ $((SECONDS - LAST_SAMPLE)) -ge 10 ] || return 0
  LAST_SAMPLE=$SECONDS
  local d line=$((SECONDS - T0))
  for d in "${DAEMONS[@]}"; do line+=" $(rss_kb "$(daemon_pid "$d")")"; done
  echo "$line" >>"$TMP/rss.txt"
}

log "--- load for $SOAK_SECONDS s, faults every $SOAK_SLOT s ---"
: >"$FAULTS"
STORM_REQUESTS=0 LOSS_SEEN=0 LOSS_DROPPED=0
FAULT_KINDS=(storm sighup restart loss rotate move)
T0=$SECONDS
run_clients "$SOAK_SECONDS"
i=0
next=5
while [ $((next + TAIL)) -le "$SOAK_SECONDS" ]; do
  while [ $((SECONDS - T0)) -lt "$next" ]; do sample_rss; sleep 0.2; done
  kind=${FAULT_KINDS[$((i % ${#FAULT_KINDS[@]}))]}
  log "fault $((i + 1)): $kind at $((SECONDS - T0)) s"
  "fault_$kind"
  i=$((i + 1))
  next=$((next + SOAK_SLOT))
done
while [ $((SECONDS - T0)) -lt "$SOAK_SECONDS" ]; do sample_rss; sleep 0.5; done
wait_clients || fail "clients exited with an error (see clients_*.log)"
log "--- $i faults; the clients have left ---"

log "--- verdict on $(cat "$TMP"/events.* | wc -l) events ---"
python3 "$HERE/soak_report.py" "$FAULTS" "$TMP"/events.* | tee "$TMP/report.txt"
check "soak rules (transfers intact, requests within 1 s, no stall, no failure outside fault windows)" \
  test "${PIPESTATUS[0]}" -eq 0
log "loss: $LOSS_DROPPED of $LOSS_SEEN datagrams to the WireGuard ports dropped in the loss windows" \
  "($(python3 -c "print('%.2f' % (100 * $LOSS_DROPPED / max(1, $LOSS_SEEN)))") %); UAPI storm: $STORM_REQUESTS requests"
check "loss: the drop rate applied was 1-3 %" \
  python3 -c "import sys; sys.exit(not 0.01 <= $LOSS_DROPPED / max(1, $LOSS_SEEN) <= 0.03)"

# Resources: descriptors back to their count at the start (proxied connections may take a
# moment to close), then RSS after the allocators' trims (wg-netstack's runs every second).
for d in "${DAEMONS[@]}"; do
  check "$d still running" kill -0 "$(daemon_pid "$d")"
done
for d in "${DAEMONS[@]}"; do
  eventually 300 test "$(fds "$(daemon_pid "$d")")" = "${FDS0[$d]}"
done
for d in "$NS_A N1" "$NS_B N2"; do
  log "${d#* } after the load: $(ip netns exec "${d% *}" curl -s --max-time 5 http://127.0.0.1:9090/metrics |
    awk '/^wgnet_(tcp|proxy)_connections_active/ {printf "%s %s ", $1, $2}')"
done
# RSS every 10 s of the run (KiB): the peak, and where it stood at the end of the load.
python3 - "$TMP/rss.txt" "${DAEMONS[@]}" <<'PY'
import sys
names = sys.argv[2:]
rows = [list(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
for i, n in enumerate(names, 1):
    col = [r[i] for r in rows if len(r) > i]
    print(f"[rss] {n}: {len(col)} samples, peak {max(col)} KiB, at the end of the load {col[-1]} KiB; "
          "every 10 s: " + " ".join(str(v // 1024) for v in col) + " MiB")
PY
# rss_near D: D's RSS within the bound (the allocators trim within a second or two).
declare -A BOUND
rss_near() { test "$(rss_kb "$(daemon_pid "$1")")" -le "${BOUND[$1]}"; }
for d in "${DAEMONS[@]}"; do
  BOUND[$d]=$(( RSS0[$d] / 5 > 10240 ? RSS0[$d] * 6 / 5 : RSS0[$d] + 10240 ))
  eventually 100 rss_near "$d"
done
for d in "${DAEMONS[@]}"; do
  p=$(daemon_pid "$d")
  rss=$(rss_kb "$p") fd=$(fds "$p") bound=${BOUND[$d]}
  log "$d: RSS ${RSS0[$d]} -> $rss KiB (bound $bound), descriptors ${FDS0[$d]} -> $fd"
  check "$d: RSS back near its start ($rss KiB <= $bound KiB)" test "${rss:-999999999}" -le "$bound"
  check "$d: descriptors back to their start (${FDS0[$d]} -> $fd)" test "$fd" = "${FDS0[$d]}"
done
# Each daemon stops on SIGTERM with status 0 (a heap damaged during the run often shows
# only when it is freed at exit).
for d in "${DAEMONS[@]}"; do
  p=$(daemon_pid "$d")
  kill -TERM "$p"
  timeout 10 tail --pid="$p" -f /dev/null
  wait "$p"
  rc=$?
  forget_pid "$p"
  check "$d: exits with status 0 on SIGTERM (got $rc$(tail -1 "$TMP/$(log_of "$d")" | grep -o 'free().*\|corrupt.*\|Assertion.*' | head -1 | sed 's/^/: /'))" \
    test "$rc" -eq 0
done
[ "$FAILURES" -eq 0 ] || ls -l "$TMP"/*.log
finish soak 30
