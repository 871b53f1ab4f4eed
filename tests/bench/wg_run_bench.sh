#!/usr/bin/env bash
# wg-run against its references, in one run over the same veth to the same peer (wg-tun
# in B): a program under wg-run as an unprivileged user (nobody), the same program in
# wg-tun's namespace (root-mode kernel TUN), and wg-netstack's SOCKS5 proxy. Prints one
# markdown table of medians. Its own command (root, to prepare), not part of ctest.
#
#        namespace $NS_A (client, sends)                   namespace $NS_B (server)
#   ┌────────────────────────────────────────────┐      ┌──────────────────────────────┐
#   │ wg-run:  wg-run (nobody) :51820            │      │ wg-tun $WG_B :51821          │
#   │            └ iperf3 -c / ping / upload in  │      │   198.19.0.2/24 mtu 1420     │
#   │              its namespaces, wg0 198.19.0.1│ <══> │ iperf3 -s -1                 │
#   │ wg-tun:  $WG_A 198.19.0.1 mtu 1420,        │  wg  │ loss_tool.py sink            │
#   │            iperf3 -c / ping / upload in A  │      │                              │
#   │ wg-netstack (nobody) :51820, SOCKS5 :1080, │      │                              │
#   │            loss_tool.py socks-upload in A  │      │                              │
#   │ veth 198.18.0.1/24                         │ <──> │ veth 198.18.0.2/24           │
#   └────────────────────────────────────────────┘      └──────────────────────────────┘
#
# Usage: wg_run_bench.sh BIN_DIR [--reps N] [--seconds S] [--netstack-variant ARGS]
#                         [--only CONFIG,...]
#   --netstack-variant: also this wg-netstack with ARGS added (configuration
#   wg-netstack-v, e.g. --no-sandbox), interleaved in every repetition and compared.
#   --only: run only these of wg-tun, wg-run, wg-netstack, wg-netstack-v.
# Per repetition and configuration (fresh namespaces and daemons each time; the order
# rotates per repetition so none always runs first):
#   TCP ×1 up and down with iperf3 (wg-tun, wg-run; CPU of the A-side WireGuard process
#   sampled over the upload), TCP ×1 up with loss_tool.py (all three: plain connect, or
#   through the SOCKS5 proxy; bytes counted at the receiver; CPU of the A-side process
#   sampled), TCP ×1 down through SOCKS5 (wg-netstack, counted at the client), ping -c 50 -i 0.01 median
#   RTT (wg-tun, wg-run). Every run has a time limit and an outer timeout. /dev/net/tun is
#   made 0666 for the run (as Debian ships it) and its mode restored.
set -u
usage() {
  echo "usage: $0 BIN_DIR [--reps N] [--seconds S] [--netstack-variant ARGS] [--only CONFIG,...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
BIN_SRC=$(cd "$1" 2>/dev/null && pwd) || { echo "no such BIN_DIR: $1" >&2; exit 2; }
shift
REPS=3
SECS=5
NS_VARIANT=
ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --reps) REPS=${2:-}; shift 2 || usage ;;
    --seconds) SECS=${2:-}; shift 2 || usage ;;
    --netstack-variant) NS_VARIANT=${2:-}; shift 2 || usage ;;
    --only) ONLY=${2:-}; shift 2 || usage ;;
    *) usage ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ && $REPS -le 20 ]] || { echo "--reps: 1..20" >&2; exit 2; }
[[ $SECS =~ ^[1-9][0-9]*$ && $SECS -le 60 ]] || { echo "--seconds: 1..60" >&2; exit 2; }
for b in wg-tun wg-run wg-netstack; do
  [ -x "$BIN_SRC/$b" ] || { echo "$BIN_SRC/$b missing (cmake --build BUILD --target $b)" >&2; exit 2; }
done

RUN_ID=${RUN_ID:-r$$}
umask 077
# shellcheck disable=SC2034  # read by lib.sh's start_impl
IMPL_LOG_LEVEL=error
# shellcheck source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"
require_root
for tool in iperf3 wg ping setpriv ss; do
  command -v "$tool" >/dev/null || { echo "$tool missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
PY=/usr/bin/python3 # a Python the unprivileged user can run too
TOOL_SRC="$(cd "$(dirname "$0")" && pwd)/loss_tool.py"
TUN_MODE=$(stat -c %a /dev/net/tun)
SRV_PID=
bench_cleanup() {
  if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; fi
  chmod "$TUN_MODE" /dev/net/tun
  cleanup
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

# Copies of the binaries (a rebuild during the run must not mix two builds), readable
# by the unprivileged user, as the tool.
chmod 0711 "$TMP"
mkdir -p "$TMP/bin" "$TMP/user"
cp -p "$BIN_SRC/wg-tun" "$BIN_SRC/wg-run" "$BIN_SRC/wg-netstack" "$TMP/bin/"
cp "$TOOL_SRC" "$TMP/bin/loss_tool.py"
chmod 0755 "$TMP/bin" "$TMP/bin/"*
chown nobody:nogroup "$TMP/user"
WGNET_BIN="$TMP/bin"
TOOL="$TMP/bin/loss_tool.py"
BUILT=$(date -u -r "$TMP/bin/wg-run" '+%Y-%m-%d %H:%M:%S UTC')
RESULTS="$TMP/results.tsv"
: >"$RESULTS"
CLK_TCK=$(getconf CLK_TCK)
CONFIGS=(wg-tun wg-run wg-netstack)
[ -n "$NS_VARIANT" ] && CONFIGS+=(wg-netstack-v)
if [ -n "$ONLY" ]; then
  IFS=, read -r -a CONFIGS <<<"$ONLY"
  for c in "${CONFIGS[@]}"; do
    case $c in
      wg-tun | wg-run | wg-netstack) ;;
      wg-netstack-v) [ -n "$NS_VARIANT" ] || { echo "--only wg-netstack-v needs --netstack-variant" >&2; exit 2; } ;;
      *) echo "--only: unknown configuration $c" >&2; exit 2 ;;
    esac
  done
fi

record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RESULTS"; }
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
as_user() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# The A side's WireGuard process (its CPU is sampled) and how A's programs are run:
# RUN_IN_A is a command prefix that puts a program where the configuration's traffic
# comes from (wg-run: under wg-run, as nobody).
A_PID=
RUN_IN_A=()

# peer_b: wg-tun in B with the A-side's key as its peer.
peer_b() {
  make_namespaces
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  start_impl "$NS_B" "$WG_B" wg-tun || return 1
  nb wg set "$WG_B" private-key "$TMP/b.key" listen-port 51821 \
    peer "$(cat "$TMP/a.pub")" allowed-ips 198.19.0.1/32 endpoint 198.18.0.1:51820
  nb ip addr add 198.19.0.2/24 dev "$WG_B"
  nb ip link set dev "$WG_B" mtu 1420 up
}

user_conf() {
  cat >"$TMP/user/wg0.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
Address = 198.19.0.1/24
ListenPort = 51820
MTU = 1420

[Peer]
PublicKey = $(cat "$TMP/b.pub")
Endpoint = 198.18.0.2:51821
AllowedIPs = 198.19.0.0/24
CONF
  chown nobody:nogroup "$TMP/user/wg0.conf"
  chmod 0600 "$TMP/user/wg0.conf"
}

setup() { # CONFIG
  local cfg=$1 i
  A_PID=
  RUN_IN_A=()
  peer_b || return 1
  user_conf
  case $cfg in
    wg-tun)
      start_impl "$NS_A" "$WG_A" wg-tun || return 1
      A_PID=${PIDS[-1]}
      na wg setconf "$WG_A" <(grep -v -e '^Address' -e '^MTU' "$TMP/user/wg0.conf")
      na ip addr add 198.19.0.1/24 dev "$WG_A"
      na ip link set dev "$WG_A" mtu 1420 up
      RUN_IN_A=(ip netns exec "$NS_A")
      ;;
    wg-run)
      # A long-lived wg-run whose COMMAND waits; each measurement enters its namespaces
      # as the user (nsenter, the user namespace first), as a shell inside would run it.
      # From /: a working directory under /tmp (a clone there) is private inside, and refused.
      chmod 0666 /dev/net/tun
      (cd / && exec ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$WGNET_BIN/wg-run" -c "$TMP/user/wg0.conf" -- sleep "600.$$") >"$TMP/wg-run.log" 2>&1 &
      A_PID=$!
      PIDS+=("$A_PID")
      # COMMAND is not wg-run's child (a PID namespace's init stands between): found by
      # its command line, which is this run's own.
      local inner=""
      for i in $(seq 100); do
        inner=$(pgrep -x -f "sleep 600\.$$") && break
        sleep 0.1
      done
      [ -n "$inner" ] || { log "wg-run did not start: $(cat "$TMP/wg-run.log")"; return 1; }
      RUN_IN_A=(setpriv --reuid=nobody --regid=nogroup --clear-groups nsenter -t "$inner" -U -n -m
                --preserve-credentials)
      ;;
    wg-netstack | wg-netstack-v)
      local ns_args=()
      # shellcheck disable=SC2206  # ARGS are words
      [ "$cfg" = wg-netstack-v ] && ns_args=($NS_VARIANT)
      ip netns exec "$NS_A" setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$WGNET_BIN/wg-netstack" -c "$TMP/user/wg0.conf" --socks5 127.0.0.1:1080 --log-level error \
        "${ns_args[@]}" >"$TMP/wg-netstack.log" 2>&1 &
      A_PID=$!
      PIDS+=("$A_PID")
      wait_listen "$NS_A" 127.0.0.1:1080 || return 1
      RUN_IN_A=(ip netns exec "$NS_A")
      ;;
  esac
}

start_server() { # ARGS: iperf3 or loss_tool server in B
  ip netns exec "$NS_B" timeout -k 2 $((SECS + 40)) "$@" >"$TMP/server.out" 2>"$TMP/server.err" &
  SRV_PID=$!
}
stop_server() {
  [ -n "$SRV_PID" ] || return 0
  timeout 5 tail --pid="$SRV_PID" -f /dev/null 2>/dev/null || kill "$SRV_PID" 2>/dev/null
  wait "$SRV_PID" 2>/dev/null
  SRV_PID=
}

# iperf CONFIG LABEL [iperf3 args]: one TCP stream A → B (or B → A with -R), Gbit/s
# received; with CPU=1 the A-side WireGuard process's CPU over the run.
iperf() {
  local cfg=$1 label=$2; shift 2
  start_server iperf3 -s -1 -B 198.19.0.2
  wait_tcp_port "$NS_B" 5201 || { stop_server; return 1; }
  local c0 c1 t0 t1 out
  c0=$(cpu_ticks "$A_PID"); t0=$(date +%s%N)
  out=$(timeout -k 2 $((SECS + 20)) "${RUN_IN_A[@]}" iperf3 -c 198.19.0.2 -t "$SECS" -J "$@" 2>&1)
  c1=$(cpu_ticks "$A_PID"); t1=$(date +%s%N)
  stop_server
  local gbps
  gbps=$(printf '%s' "$out" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
if "error" in d: sys.exit(d["error"])
print("%.6f" % (d["end"]["sum_received"]["bits_per_second"] / 1e9))') ||
    { log "$cfg $label: iperf3 failed: $(printf '%s' "$out" | tail -c 300)"; return 1; }
  record "$cfg" "$label" "$gbps"
  local extra=""
  if [ "${CPU:-0}" = 1 ]; then
    local cpu
    cpu=$("$PY" -c "print('%.0f' % (100.0 * ($c1 - $c0) / $CLK_TCK / (($t1 - $t0) / 1e9)))")
    record "$cfg" cpu_a "$cpu"
    extra=", A-side WireGuard process $cpu % of a core"
  fi
  log "$cfg $label: $gbps Gbit/s$extra"
}

# upload CONFIG: loss_tool.py, one stream A → B, counted at the sink; through the SOCKS5
# proxy for wg-netstack; the A-side process's CPU over the run.
upload() {
  local cfg=$1 port=47001
  start_server "$PY" "$TOOL" sink "$port" --bind 198.19.0.2 --max-seconds $((SECS + 30))
  wait_listen "$NS_B" "198.19.0.2:$port" || { stop_server; return 1; }
  local client=(upload "198.19.0.2:$port")
  local SOCKS_NOTE=""
  is_netstack "$cfg" && client=(socks-upload 127.0.0.1:1080 "198.19.0.2:$port") SOCKS_NOTE=", through SOCKS5"
  local c0 c1 t0 t1
  c0=$(cpu_ticks "$A_PID"); t0=$(date +%s%N)
  timeout -k 2 $((SECS + 30)) "${RUN_IN_A[@]}" "$PY" "$TOOL" "${client[@]}" "$SECS" 1 >"$TMP/client.json" 2>"$TMP/client.err"
  c1=$(cpu_ticks "$A_PID"); t1=$(date +%s%N)
  stop_server
  local gbps
  gbps=$("$PY" -c '
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("%.6f" % d["gbps"])' "$TMP/server.out" 2>/dev/null) ||
    { log "$cfg upload: failed: $(tail -c 300 "$TMP/client.err") $(tail -c 300 "$TMP/server.err")"; return 1; }
  record "$cfg" py_up "$gbps"
  local cpu
  cpu=$("$PY" -c "print('%.0f' % (100.0 * ($c1 - $c0) / $CLK_TCK / (($t1 - $t0) / 1e9)))")
  record "$cfg" cpu_up "$cpu"
  log "$cfg upload (loss_tool.py${SOCKS_NOTE:-}): $gbps Gbit/s, A-side process $cpu % of a core"
}

# download CONFIG: loss_tool.py, one stream B → A through the SOCKS5 proxy, counted at
# the client in A; the A-side process's CPU over the run.
download() {
  local cfg=$1 port=47002
  start_server "$PY" "$TOOL" source "$port" --bind 198.19.0.2 --max-seconds $((SECS + 30))
  wait_listen "$NS_B" "198.19.0.2:$port" || { stop_server; return 1; }
  local c0 c1 t0 t1
  c0=$(cpu_ticks "$A_PID"); t0=$(date +%s%N)
  timeout -k 2 $((SECS + 30)) "${RUN_IN_A[@]}" "$PY" "$TOOL" socks-download 127.0.0.1:1080 "198.19.0.2:$port" \
    "$SECS" 1 >"$TMP/client.json" 2>"$TMP/client.err"
  c1=$(cpu_ticks "$A_PID"); t1=$(date +%s%N)
  stop_server
  local gbps
  gbps=$("$PY" -c '
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("%.6f" % d["gbps"])' "$TMP/client.json" 2>/dev/null) ||
    { log "$cfg download: failed: $(tail -c 300 "$TMP/client.err") $(tail -c 300 "$TMP/server.err")"; return 1; }
  record "$cfg" py_down "$gbps"
  local cpu
  cpu=$("$PY" -c "print('%.0f' % (100.0 * ($c1 - $c0) / $CLK_TCK / (($t1 - $t0) / 1e9)))")
  record "$cfg" cpu_down "$cpu"
  log "$cfg download (loss_tool.py, through SOCKS5): $gbps Gbit/s, A-side process $cpu % of a core"
}

is_netstack() { [ "$1" = wg-netstack ] || [ "$1" = wg-netstack-v ]; }

ping_rtt() { # CONFIG
  local cfg=$1 out us
  out=$(timeout -k 2 30 "${RUN_IN_A[@]}" ping -n -c 50 -i 0.01 -s 56 -W 2 198.19.0.2 2>&1)
  us=$(printf '%s\n' "$out" | "$PY" -c '
import re, statistics, sys
rtts = [float(m) for m in re.findall(r"time=([0-9.]+) ms", sys.stdin.read())]
if not rtts: sys.exit(1)
print("%.0f" % (statistics.median(rtts) * 1000))') || { log "$cfg ping: no replies: $(tail -2 <<<"$out")"; return 1; }
  record "$cfg" rtt_us "$us"
  log "$cfg ping: median RTT $us µs"
}

run_config() { # CONFIG
  local cfg=$1
  log "--- $cfg ---"
  if ! setup "$cfg"; then
    log "$cfg: setup failed"; tail -5 "$TMP"/*.log 2>/dev/null; teardown_pair; return
  fi
  if ! is_netstack "$cfg"; then
    local i ok=0
    for i in $(seq 10); do
      timeout 5 "${RUN_IN_A[@]}" ping -c 1 -W 1 198.19.0.2 >/dev/null 2>&1 && { ok=1; break; }
    done
    [ $ok = 1 ] || { log "$cfg: no handshake"; teardown_pair; return; }
    CPU=1 iperf "$cfg" tcp1 -P 1
    sleep 1
    iperf "$cfg" tcp1_down -P 1 -R
    sleep 1
  fi
  upload "$cfg"
  sleep 1
  if is_netstack "$cfg"; then
    download "$cfg"
    sleep 1
  else
    ping_rtt "$cfg"
  fi
  teardown_pair
  sleep 1
}

START=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
log "wg-run bench: $REPS repetition(s) of $SECS s, prefix $PREFIX"
for rep in $(seq "$REPS"); do
  log "=== repetition $rep/$REPS ==="
  for i in "${!CONFIGS[@]}"; do
    run_config "${CONFIGS[$(((i + rep - 1) % ${#CONFIGS[@]}))]}"
  done
done

echo
"$PY" - "$RESULTS" "$START" "$REPS" "$SECS" "$(uname -r)" "$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)" \
  "$(nproc)" "$(sha256sum "$WGNET_BIN/wg-run" | cut -c1-12)" "$BUILT" "$LOAD" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$NS_VARIANT" <<'PY'
import statistics, sys
from collections import defaultdict
path, start, reps, secs, kernel, cpu, nproc, sha, built, load0, load1, variant = sys.argv[1:13]
vals = defaultdict(list)
for line in open(path):
    cfg, metric, v = line.rstrip("\n").split("\t")
    vals[(cfg, metric)].append(float(v))
def med(cfg, metric):
    v = vals.get((cfg, metric))
    return statistics.median(v) if v else None
def cell(v, fmt):
    return "—" if v is None else fmt % v
print(f"date: {start} · kernel {kernel} · CPU {cpu} · nproc {nproc}")
print(f"wg-run sha256 {sha}… built {built} · peer wg-tun in B · TUN MTU 1420 · {reps} reps × {secs} s, medians")
print(f"load average before: {load0} · after: {load1}")
print()
rows = [
    ("tcp1", "TCP ×1 up, iperf3 (Gbit/s)", "%.3f"),
    ("tcp1_down", "TCP ×1 down, iperf3 -R (Gbit/s)", "%.3f"),
    ("py_up", "TCP ×1 up, loss_tool.py; wg-netstack via SOCKS5 (Gbit/s)", "%.3f"),
    ("py_down", "TCP ×1 down, loss_tool.py via SOCKS5 (Gbit/s)", "%.3f"),
    ("rtt_us", "ping RTT, median (µs)", "%.0f"),
    ("cpu_a", "CPU of A's WireGuard process during TCP ×1 up (% of a core)", "%.0f"),
    ("cpu_up", "CPU of A's WireGuard process during loss_tool.py up (% of a core)", "%.0f"),
    ("cpu_per_gbps", "same, per Gbit/s (% of a core)", "%.0f"),
    ("cpu_down", "CPU of A's WireGuard process during loss_tool.py down (% of a core)", "%.0f"),
    ("cpu_down_per_gbps", "same, per Gbit/s (% of a core)", "%.0f"),
]
for c in ("wg-run", "wg-tun", "wg-netstack", "wg-netstack-v"):
    for rate, cpu, per in (("py_up", "cpu_up", "cpu_per_gbps"), ("py_down", "cpu_down", "cpu_down_per_gbps")):
        t, u = vals.get((c, rate), []), vals.get((c, cpu), [])
        if t and len(t) == len(u):
            vals[(c, per)] = [x / g for x, g in zip(u, t) if g > 0]
print("| metric | wg-run (nobody) | wg-tun (root) | wg-netstack SOCKS5 (nobody) | wg-run / wg-tun | wg-run / wg-netstack |")
print("|---|---:|---:|---:|---:|---:|")
for metric, label, fmt in rows:
    r, t, n = med("wg-run", metric), med("wg-tun", metric), med("wg-netstack", metric)
    rt = "%.2f×" % (r / t) if r is not None and t else "—"
    rn = "%.2f×" % (r / n) if r is not None and n else "—"
    print(f"| {label} | {cell(r, fmt)} | {cell(t, fmt)} | {cell(n, fmt)} | {rt} | {rn} |")
print()
if vals.get(("wg-netstack-v", "py_up")):
    print(f"wg-netstack-v: this wg-netstack with `{variant}`, interleaved with wg-netstack in every repetition")
    print()
    print(f"| metric | wg-netstack | wg-netstack-v | wg-netstack / wg-netstack-v |")
    print("|---|---:|---:|---:|")
    for metric, label, fmt in rows:
        n, v = med("wg-netstack", metric), med("wg-netstack-v", metric)
        if n is None and v is None:
            continue
        r = "%.3f×" % (n / v) if n is not None and v else "—"
        print(f"| {label} | {cell(n, fmt)} | {cell(v, fmt)} | {r} |")
    print()
print("per repetition (in run order):")
for metric, label, fmt in rows:
    parts = []
    for c in ("wg-run", "wg-tun", "wg-netstack", "wg-netstack-v"):
        v = vals.get((c, metric))
        if v:
            parts.append(f"{c} " + " ".join(fmt % x for x in v))
    if parts:
        print(f"  {metric}: " + "; ".join(parts))
PY
