#!/usr/bin/env bash
# Throughput, latency and CPU of plain veth, wg-tun <-> wg-tun and Debian's
# wireguard-go <-> wireguard-go, in the netns topology of tests/netns/lib.sh; prints
# one markdown table of medians. Its own command (root), not part of ctest.
#
#        namespace $NS_A (client, sends)           namespace $NS_B (server)
#   ┌──────────────────────────────┐          ┌──────────────────────────────┐
#   │ iperf3 -c / ping             │          │ iperf3 -s -1                 │
#   │ $WG_A 198.19.0.1/24 mtu 1420 │ <══wg══> │ $WG_B 198.19.0.2/24 mtu 1420 │  (b), (c)
#   │ veth  198.18.0.1/24          │ <─veth─> │ veth  198.18.0.2/24          │  (a)
#   └──────────────────────────────┘          └──────────────────────────────┘
#
# Usage: netns_throughput.sh BIN_DIR [--reps N] [--seconds S] [--old OLD_BIN_DIR]
#                             [--queues N] [--variant ARGS] [--only CONFIG,...]
#   --old: also an earlier build's wg-tun (configuration wg-tun-old), interleaved with
#   this one in every repetition: a before/after comparison in one run.
#   --queues: also this build with --queues N on both sides (configuration wg-tun-q),
#   interleaved the same way and compared with wg-tun.
#   --variant: also this build with ARGS on both sides (configuration wg-tun-v, e.g.
#   --no-sandbox), interleaved the same way and compared with wg-tun.
#   --only: run only these of veth, wg-tun, wireguard-go, wg-tun-old, wg-tun-q, wg-tun-v.
# Per repetition and configuration (fresh namespaces and daemons each time; the
# order of configurations rotates per repetition so none always runs first):
#   iperf3 TCP -P 1 (daemon CPU sampled from /proc/PID/stat), TCP -P 4,
#   UDP -b 1G (received rate, loss; with default and with 4 MB socket buffers), ping -c 50 -i 0.01 -s 56 (median RTT), and each
#   daemon's peak resident memory (VmHWM) over the four.
# Every iperf3/ping run has a time limit and an outer timeout.
set -u
usage() {
  echo "usage: $0 BIN_DIR [--reps N] [--seconds S] [--old OLD_BIN_DIR] [--queues N] [--variant ARGS] [--only CONFIG,...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
BIN_SRC=$(cd "$1" 2>/dev/null && pwd) || { echo "no such BIN_DIR: $1" >&2; exit 2; }
shift
REPS=3
SECS=5
OLD_SRC=
ONLY=
QUEUES=
VARIANT=
while [ $# -gt 0 ]; do
  case $1 in
    --reps) REPS=${2:-}; shift 2 || usage ;;
    --seconds) SECS=${2:-}; shift 2 || usage ;;
    --old) OLD_SRC=${2:-}; shift 2 || usage ;;
    --only) ONLY=${2:-}; shift 2 || usage ;;
    --queues) QUEUES=${2:-}; shift 2 || usage ;;
    --variant) VARIANT=${2:-}; shift 2 || usage ;;
    *) usage ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ && $REPS -le 50 ]] || { echo "--reps: 1..50" >&2; exit 2; }
[[ -z $QUEUES || ($QUEUES =~ ^[1-9][0-9]*$ && $QUEUES -le 16) ]] || { echo "--queues: 1..16" >&2; exit 2; }
[[ $SECS =~ ^[1-9][0-9]*$ && $SECS -le 120 ]] || { echo "--seconds: 1..120" >&2; exit 2; }
[ -x "$BIN_SRC/wg-tun" ] || { echo "$BIN_SRC/wg-tun missing (cmake --build build --target wg-tun)" >&2; exit 2; }
if [ -n "$OLD_SRC" ]; then
  OLD_SRC=$(cd "$OLD_SRC" 2>/dev/null && pwd) && [ -x "$OLD_SRC/wg-tun" ] ||
    { echo "--old: no wg-tun in $OLD_SRC" >&2; exit 2; }
fi
CONFIGS=(veth wg-tun wireguard-go)
[ -n "$OLD_SRC" ] && CONFIGS+=(wg-tun-old)
[ -n "$QUEUES" ] && CONFIGS+=(wg-tun-q)
[ -n "$VARIANT" ] && CONFIGS+=(wg-tun-v)
if [ -n "$ONLY" ]; then
  IFS=, read -r -a CONFIGS <<<"$ONLY"
  for c in "${CONFIGS[@]}"; do
    case $c in
      veth | wg-tun | wireguard-go) ;;
      wg-tun-old) [ -n "$OLD_SRC" ] || { echo "--only wg-tun-old needs --old" >&2; exit 2; } ;;
      wg-tun-q) [ -n "$QUEUES" ] || { echo "--only wg-tun-q needs --queues" >&2; exit 2; } ;;
      wg-tun-v) [ -n "$VARIANT" ] || { echo "--only wg-tun-v needs --variant" >&2; exit 2; } ;;
      *) echo "--only: unknown configuration $c" >&2; exit 2 ;;
    esac
  done
fi

RUN_ID=${RUN_ID:-b$$}
umask 077 # private keys and logs
IMPL_LOG_LEVEL=error # verbose logging is for the functional tests, not for timing
. "$(dirname "$0")/../netns/lib.sh"
require_root
for tool in iperf3 wireguard-go wg ping python3 ss; do
  command -v "$tool" >/dev/null || { echo "$tool missing (scripts/setup.sh installs it)" >&2; exit 1; }
done

SRV_PID=
bench_cleanup() {
  if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; fi
  cleanup
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

# A copy of the binary: a rebuild during the run must not mix two builds in one table.
mkdir -p "$TMP/bin"
cp -p "$BIN_SRC/wg-tun" "$TMP/bin/wg-tun"
BUILT=$(date -u -r "$TMP/bin/wg-tun" '+%Y-%m-%d %H:%M:%S UTC')
WGNET_BIN="$TMP/bin"
OLD_SHA=-
if [ -n "$OLD_SRC" ]; then
  mkdir -p "$TMP/old"
  cp -p "$OLD_SRC/wg-tun" "$TMP/old/wg-tun"
  WGNET_OLD_BIN="$TMP/old"
  OLD_SHA=$(sha256sum "$WGNET_OLD_BIN/wg-tun" | cut -c1-12)
fi
RESULTS="$TMP/results.tsv" # config <tab> metric <tab> value, one line per measurement
: >"$RESULTS"
CLK_TCK=$(getconf CLK_TCK)
TUN_MTU=1420 # both daemons' default TUN MTU; set explicitly so a changed default shows

record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RESULTS"; }

# utime + stime of all threads of PID, in clock ticks.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

start_server() {
  ip netns exec "$NS_B" timeout -k 2 $((SECS + 30)) iperf3 -s -1 >"$TMP/iperf-server.log" 2>&1 &
  SRV_PID=$!
  local i
  for i in $(seq 50); do
    nb ss -Hltn 'sport = :5201' 2>/dev/null | grep -q . && return 0
    sleep 0.1
  done
  log "iperf3 server did not start"; cat "$TMP/iperf-server.log"
  kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; SRV_PID=
  return 1
}

stop_server() {
  [ -n "$SRV_PID" ] || return 0
  timeout 3 tail --pid="$SRV_PID" -f /dev/null 2>/dev/null || kill "$SRV_PID" 2>/dev/null
  wait "$SRV_PID" 2>/dev/null
  SRV_PID=
}

# iperf CONFIG LABEL ADDR [iperf3 args...]: one client run from A to B, recorded as
# LABEL (Gbit/s received; for UDP also LABEL_loss in %). With CPU=1 in the
# environment, the daemons' CPU over the run is recorded too.
iperf() {
  local cfg=$1 label=$2 addr=$3; shift 3
  start_server || return 1
  local t0 t1 a0 b0 a1 b1 out rc
  if [ "${CPU:-0}" = 1 ]; then a0=$(cpu_ticks "${PIDS[0]}"); b0=$(cpu_ticks "${PIDS[1]}"); fi
  t0=$(date +%s%N)
  out=$(na timeout -k 2 $((SECS + 15)) iperf3 -c "$addr" -t "$SECS" -J "$@" 2>&1); rc=$?
  t1=$(date +%s%N)
  if [ "${CPU:-0}" = 1 ]; then a1=$(cpu_ticks "${PIDS[0]}"); b1=$(cpu_ticks "${PIDS[1]}"); fi
  stop_server
  local parsed
  parsed=$(printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if "error" in d: sys.exit(d["error"])
r = d["end"]["sum_received"]
print("%.6f %.4f" % (r["bits_per_second"] / 1e9, r.get("lost_percent", 0.0)))') \
    || { log "$cfg $label: iperf3 failed (rc $rc): $(printf '%s' "$out" | tail -c 300)"; return 1; }
  local gbps loss
  read -r gbps loss <<<"$parsed"
  record "$cfg" "$label" "$gbps"
  local extra=""
  if [[ " $* " == *" -u "* ]]; then
    record "$cfg" "${label}_loss" "$loss"
    extra=" (loss $loss %)"
  fi
  if [ "${CPU:-0}" = 1 ]; then
    local secs_ns=$((t1 - t0))
    local ca cb
    ca=$(python3 -c "print('%.1f' % (100.0 * ($a1 - $a0) / $CLK_TCK / ($secs_ns / 1e9)))")
    cb=$(python3 -c "print('%.1f' % (100.0 * ($b1 - $b0) / $CLK_TCK / ($secs_ns / 1e9)))")
    record "$cfg" cpu_tx "$ca"; record "$cfg" cpu_rx "$cb"
    extra="$extra, CPU sender $ca %, receiver $cb %"
  fi
  log "$cfg $label: $gbps Gbit/s$extra"
}

# ping_rtt CONFIG ADDR: median RTT in µs of 50 pings (avg of the summary if no lines).
ping_rtt() {
  local cfg=$1 addr=$2 out us
  out=$(na timeout -k 2 30 ping -n -c 50 -i 0.01 -s 56 -W 2 "$addr" 2>&1)
  us=$(printf '%s\n' "$out" | python3 -c '
import re, statistics, sys
text = sys.stdin.read()
rtts = [float(m) for m in re.findall(r"time=([0-9.]+) ms", text)]
if rtts:
    print("%.0f" % (statistics.median(rtts) * 1000))
else:
    m = re.search(r"= [0-9.]+/([0-9.]+)/", text)
    if not m: sys.exit(1)
    print("%.0f" % (float(m.group(1)) * 1000))') \
    || { log "$cfg ping: no replies"; return 1; }
  record "$cfg" rtt_us "$us"
  log "$cfg ping: median RTT $us µs"
}

measure() { # CONFIG ADDR
  local cfg=$1 addr=$2
  CPU=$([ "$cfg" = veth ] && echo 0 || echo 1) iperf "$cfg" tcp1 "$addr" -P 1
  sleep 1
  iperf "$cfg" tcp4 "$addr" -P 4
  sleep 1
  iperf "$cfg" udp "$addr" -u -b 1G
  sleep 1
  # The same with 4 MB socket buffers: at 1 Gbit/s the receiving iperf3's default
  # 208 KB buffer overflows whenever it waits for a CPU (UdpRcvbufErrors), tunnel or not.
  iperf "$cfg" udp_w4m "$addr" -u -b 1G -w 4M
  sleep 1
  ping_rtt "$cfg" "$addr"
  # Peak resident memory of each daemon over all of the above.
  if [ "$cfg" != veth ]; then
    local hwm_a hwm_b
    hwm_a=$(awk '/^VmHWM:/ {print $2}' "/proc/${PIDS[0]}/status" 2>/dev/null)
    hwm_b=$(awk '/^VmHWM:/ {print $2}' "/proc/${PIDS[1]}/status" 2>/dev/null)
    if [ -n "$hwm_a" ] && [ -n "$hwm_b" ]; then
      record "$cfg" rss_tx "$((hwm_a / 1024))"
      record "$cfg" rss_rx "$((hwm_b / 1024))"
      log "$cfg peak RSS: sender $((hwm_a / 1024)) MiB, receiver $((hwm_b / 1024)) MiB"
    fi
  fi
}

run_config() { # CONFIG
  local cfg=$1
  log "--- $cfg ---"
  if [ "$cfg" = veth ]; then
    make_namespaces
    ping_eventually "$NS_A" 198.18.0.2 || { log "veth: no connectivity"; teardown_pair; return; }
    measure veth 198.18.0.2
  else
    if [ "$cfg" = wg-tun-q ]; then
      ARGS_A="--queues $QUEUES" ARGS_B="--queues $QUEUES" setup_pair wg-tun wg-tun ||
        { log "$cfg: setup failed"; teardown_pair; return; }
    elif [ "$cfg" = wg-tun-v ]; then
      ARGS_A="$VARIANT" ARGS_B="$VARIANT" setup_pair wg-tun wg-tun ||
        { log "$cfg: setup failed"; teardown_pair; return; }
    else
      setup_pair "$cfg" "$cfg" || { log "$cfg: setup failed"; teardown_pair; return; }
    fi
    na ip link set dev "$WG_A" mtu "$TUN_MTU"
    nb ip link set dev "$WG_B" mtu "$TUN_MTU"
    ping_eventually "$NS_A" 198.19.0.2 || { log "$cfg: no handshake"; cat "$TMP"/*.log; teardown_pair; return; }
    measure "$cfg" 198.19.0.2
  fi
  teardown_pair
  sleep 1
}

START=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg) # other work on the machine skews every number
log "netns throughput: $REPS repetition(s) of $SECS s, prefix $PREFIX"
for rep in $(seq "$REPS"); do
  log "=== repetition $rep/$REPS ==="
  for i in "${!CONFIGS[@]}"; do
    run_config "${CONFIGS[$(((i + rep - 1) % ${#CONFIGS[@]}))]}"
  done
done

echo
python3 - "$RESULTS" "$START" "$REPS" "$SECS" "$TUN_MTU" \
  "$(uname -r)" "$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)" "$(nproc)" \
  "$(sha256sum "$WGNET_BIN/wg-tun" | cut -c1-12)" "$BUILT" \
  "$(wireguard_go_version)" \
  "$(iperf3 --version | head -1 | awk '{print $2}')" "$LOAD" "$(cut -d' ' -f1-3 /proc/loadavg)" "$OLD_SHA" "$QUEUES" "$VARIANT" <<'PY'
import statistics, sys
from collections import defaultdict
(path, start, reps, secs, mtu, kernel, cpu, nproc, sha, built, wggo, iperfv,
 load0, load1, old_sha, queues, variant) = sys.argv[1:18]
vals = defaultdict(list)
for line in open(path):
    cfg, metric, v = line.rstrip("\n").split("\t")
    vals[(cfg, metric)].append(float(v))
ran = {c for c, _ in vals}  # before the derived values below add empty entries
# Derived per repetition: daemons' CPU (both sides) per Gbit/s of single-stream TCP.
for cfg in ("wg-tun", "wireguard-go", "wg-tun-old", "wg-tun-q", "wg-tun-v"):
    t, a, b = vals[(cfg, "tcp1")], vals[(cfg, "cpu_tx")], vals[(cfg, "cpu_rx")]
    if len(t) == len(a) == len(b):
        vals[(cfg, "cpu_per_gbps")] = [(x + y) / g for x, y, g in zip(a, b, t) if g > 0]

def med(cfg, metric):
    v = vals.get((cfg, metric))
    return statistics.median(v) if v else None

rows = [  # metric, label, kind, format
    ("tcp1", "TCP, 1 stream (Gbit/s)", "tput", "%.3f"),
    ("tcp4", "TCP, 4 streams (Gbit/s)", "tput", "%.3f"),
    ("udp", "UDP, 1 Gbit/s offered: received (Gbit/s)", "tput", "%.3f"),
    ("udp_loss", "UDP, 1 Gbit/s offered: loss (%)", "plain", "%.2f"),
    ("udp_w4m", "UDP, 1 Gbit/s offered, 4 MB socket buffers: received (Gbit/s)", "tput", "%.3f"),
    ("udp_w4m_loss", "UDP, 1 Gbit/s offered, 4 MB socket buffers: loss (%)", "plain", "%.2f"),
    ("rtt_us", "ping RTT, median (µs)", "lat", "%.0f"),
    ("cpu_tx", "CPU during TCP ×1, sender daemon (% of one core)", "cpu", "%.0f"),
    ("cpu_rx", "CPU during TCP ×1, receiver daemon (% of one core)", "cpu", "%.0f"),
    ("cpu_per_gbps", "CPU during TCP ×1, both daemons (% of a core per Gbit/s)", "cpu", "%.0f"),
    ("rss_tx", "peak RSS over all runs, sender daemon (MiB)", "cpu", "%.0f"),
    ("rss_rx", "peak RSS over all runs, receiver daemon (MiB)", "cpu", "%.0f"),
]
print(f"date: {start} · kernel {kernel} · CPU {cpu} · nproc {nproc}")
print(f"wg-tun sha256 {sha}… built {built} · wireguard-go {wggo} · iperf3 {iperfv} · "
      f"TUN MTU {mtu}, veth MTU 1500 · {reps} reps × {secs} s, medians")
print(f"load average before: {load0} · after: {load1}")
print()
print("| metric | veth | wg-tun | wireguard-go | wg-tun / wireguard-go | wg-tun / veth |")
print("|---|---:|---:|---:|---:|---:|")
def cell(v, fmt, cfg=None):
    if cfg is not None and cfg not in ran:
        return "not run"
    return "fail" if v is None else fmt % v
for metric, label, kind, fmt in rows:
    v, w, g = (med(c, metric) for c in ("veth", "wg-tun", "wireguard-go"))
    vcell = "n/a" if kind == "cpu" else cell(v, fmt, "veth")
    ratio = pct = "—"
    if kind in ("tput", "lat", "cpu") and w is not None and g:
        ratio = "%.2f×" % (w / g)
    if kind == "tput" and w is not None and v:
        pct = "%.1f %%" % (100 * w / v)
    if kind == "lat" and w is not None and v:
        pct = "%.2f×" % (w / v)
    print(f"| {label} | {vcell} | {cell(w, fmt, 'wg-tun')} | {cell(g, fmt, 'wireguard-go')} | {ratio} | {pct} |")
print()
def versus(other, title):
    print(title)
    print()
    print(f"| metric | wg-tun | {other} | wg-tun / {other} |")
    print("|---|---:|---:|---:|")
    for metric, label, kind, fmt in rows:
        w, o = med("wg-tun", metric), med(other, metric)
        ratio = "%.3f×" % (w / o) if w is not None and o else "—"
        print(f"| {label} | {cell(w, fmt)} | {cell(o, fmt)} | {ratio} |")
    print()
if "wg-tun-old" in ran:
    versus("wg-tun-old", f"before/after: wg-tun-old sha256 {old_sha}…, interleaved with wg-tun in every repetition")
if "wg-tun-q" in ran:
    versus("wg-tun-q", f"wg-tun-q: this wg-tun with --queues {queues} on both sides, interleaved with wg-tun in every repetition")
if "wg-tun-v" in ran:
    versus("wg-tun-v", f"wg-tun-v: this wg-tun with `{variant}` on both sides, interleaved with wg-tun in every repetition")
print("per repetition (in run order):")
for metric, label, kind, fmt in rows:
    parts = []
    for c in ("veth", "wg-tun", "wireguard-go", "wg-tun-old", "wg-tun-q", "wg-tun-v"):
        v = vals.get((c, metric))
        if v:
            parts.append(f"{c} " + " ".join(fmt % x for x in v))
    print(f"  {metric}: " + "; ".join(parts))
PY
