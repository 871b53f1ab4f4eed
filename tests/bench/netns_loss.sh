#!/usr/bin/env bash
# TCP goodput through wg-netstack's SOCKS5 proxy under random packet loss, against a
# kernel-TUN peer that is wg-tun and then Debian's wireguard-go, uploads and downloads,
# 1 and 8 streams; the references at the same loss are Linux's own TCP through wg-tun <->
# wg-tun over the same veth, once with the system's default congestion control (bbr on
# Debian's cloud kernels) and once with CUBIC, the algorithm our lwIP patches use.
# Prints one markdown table of medians. Its own command (root), not part of ctest.
#
#     namespace $NS_A                                 namespace $NS_B
#  ┌──────────────────────────────┐              ┌──────────────────────────────────┐
#  │ loss_tool.py socks-upload /  │              │ loss_tool.py sink / source       │
#  │   socks-download → SOCKS5    │              │   on 198.19.0.2                  │
#  │ wg-netstack :51820           │  WireGuard   │ $WG_B wg-tun | wireguard-go      │
#  │   198.19.0.1, 127.0.0.1:1080 │ <══════════> │   :51821 198.19.0.2/24           │
#  ├ reference: ──────────────────┤              │                                  │
#  │ loss_tool.py upload, no proxy│              │                                  │
#  │ $WG_A wg-tun :51820          │              │ $WG_B wg-tun                     │
#  │ veth 198.18.0.1/24           │ <───veth───> │ veth 198.18.0.2/24               │
#  └──────────────────────────────┘              └──────────────────────────────────┘
#  nft input hook of each namespace, on its WireGuard port: count, then drop
#  LOSS % at random (numgen random mod 10000 < LOSS × 100); both ways independently.
#  tx-udp-segmentation off on both veths (checked), so single datagrams are dropped.
#
# Usage: netns_loss.sh BIN_DIR [--reps N] [--seconds S] [--losses "0 0.5 2 5"]
#                      [--streams "1 8"] [--wireproxy PATH] [--configs CFG,...]
#   --wireproxy: also that wireproxy in A instead of wg-netstack, against wg-tun, with the
#   same file (configuration wireproxy); the table then gives wg-netstack / wireproxy.
#   --configs: only these of linux-tcp, linux-cubic, wg-tun, wireguard-go, wireproxy.
#   WIREGUARD_GO=PATH runs that wireguard-go as the peer instead of Debian's.
# Per repetition, loss rate and configuration (fresh namespaces and daemons each time;
# the order of the three configurations rotates per repetition), one bounded transfer
# of S seconds per direction and stream count. Bytes are counted at the receiver (the
# sink in B for an upload, the client in A for a download) in 1-second intervals from
# the moment all streams are connected; an interval with no byte is a stalled second.
# Loss is switched on after the first handshake. Medians over the repetitions; the
# ratio is to the reference's upload with the same number of streams at the same loss.
# shellcheck source-path=SCRIPTDIR
set -u
usage() {
  echo "usage: $0 BIN_DIR [--reps N] [--seconds S] [--losses \"0 0.5 2 5\"] [--streams \"1 8\"]" \
    "[--wireproxy PATH] [--configs CFG,...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
BIN_SRC=$(cd "$1" 2>/dev/null && pwd) || { echo "no such BIN_DIR: $1" >&2; exit 2; }
shift
REPS=3
SECS=8
LOSSES="0 0.5 2 5"
STREAMS="1 8"
WIREPROXY_SRC=
ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --reps) REPS=${2:-}; shift 2 || usage ;;
    --seconds) SECS=${2:-}; shift 2 || usage ;;
    --losses) LOSSES=${2:-}; shift 2 || usage ;;
    --streams) STREAMS=${2:-}; shift 2 || usage ;;
    --wireproxy) WIREPROXY_SRC=${2:-}; shift 2 || usage ;;
    --configs) ONLY=${2:-}; shift 2 || usage ;;
    *) usage ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ && $REPS -le 20 ]] || { echo "--reps: 1..20" >&2; exit 2; }
[[ $SECS =~ ^[1-9][0-9]*$ && $SECS -le 60 ]] || { echo "--seconds: 1..60" >&2; exit 2; }
read -r -a LOSS_LIST <<<"$LOSSES"
read -r -a STREAM_LIST <<<"$STREAMS"
if [ "${#LOSS_LIST[@]}" -lt 1 ] || [ "${#LOSS_LIST[@]}" -gt 8 ]; then echo "--losses: 1..8 rates" >&2; exit 2; fi
if [ "${#STREAM_LIST[@]}" -lt 1 ] || [ "${#STREAM_LIST[@]}" -gt 4 ]; then echo "--streams: 1..4 counts" >&2; exit 2; fi
for s in "${STREAM_LIST[@]}"; do
  [[ $s =~ ^[1-9][0-9]*$ && $s -le 64 ]] || { echo "--streams: counts 1..64" >&2; exit 2; }
done
for x in "${LOSS_LIST[@]}"; do
  if ! [[ $x =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! python3 -c 'import sys; sys.exit(float(sys.argv[1]) > 100)' "$x"; then
    echo "--losses: percentages 0..100, got '$x'" >&2; exit 2
  fi
done
for tool in wireguard-go wg nft ethtool python3 ss ping; do
  command -v "$tool" >/dev/null || { echo "$tool missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
for b in wg-tun wg-netstack; do
  [ -x "$BIN_SRC/$b" ] || { echo "$BIN_SRC/$b missing (cmake --build build --target $b)" >&2; exit 2; }
done
if [ -n "$WIREPROXY_SRC" ] && [ ! -x "$WIREPROXY_SRC" ]; then echo "--wireproxy: no program at $WIREPROXY_SRC" >&2; exit 2; fi

RUN_ID=${RUN_ID:-l$$}
umask 077 # private keys and logs
IMPL_LOG_LEVEL=error # verbose logging is for the functional tests, not for timing
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL="$HERE/loss_tool.py"
# shellcheck source=../netns/lib.sh
. "$HERE/../netns/lib.sh"
# shellcheck source=../netns/netstack_peer_lib.sh
. "$HERE/../netns/netstack_peer_lib.sh"
trap cleanup EXIT # also removes lib.sh's temporary directory when skipped
trap 'exit 130' INT TERM
require_root

# Copies of the binaries: a rebuild during the run must not mix two builds in one table.
mkdir -p "$TMP/bin"
cp -p "$BIN_SRC/wg-tun" "$BIN_SRC/wg-netstack" "$TMP/bin/"
WGNET_BIN="$TMP/bin"
WIREPROXY_VERSION=-
if [ -n "$WIREPROXY_SRC" ]; then
  cp -p "$WIREPROXY_SRC" "$TMP/bin/wireproxy"
  # Its -v prints the version its build was tagged with in main.go, not the release's.
  WIREPROXY_VERSION="$(basename "$WIREPROXY_SRC") sha256 $(sha256sum "$WIREPROXY_SRC" | cut -c1-12)"
fi
BUILT=$(date -u -r "$TMP/bin/wg-netstack" '+%Y-%m-%d %H:%M:%S UTC')
RESULTS="$TMP/results.tsv" # cfg loss dir streams rep gbps stalled per_second late setup note
DROPS="$TMP/drops.tsv"     # cfg loss rep side seen_packets seen_bytes dropped rcvbuf_errors tun_tx_dropped
: >"$RESULTS"
: >"$DROPS"
PORT_SEQ=0

# measure CFG LOSS DIR STREAMS REP: one transfer from A (DIR up) or to A (down), counted
# at the receiver. CFG linux-tcp and linux-cubic connect directly, the others through
# the SOCKS5 proxy.
measure() {
  local cfg=$1 loss=$2 dir=$3 streams=$4 rep=$5
  PORT_SEQ=$((PORT_SEQ + 1))
  local port=$((46000 + PORT_SEQ % 2000)) server cmode
  local target="198.19.0.2:$port"
  if [ "$dir" = up ]; then server=sink cmode=upload; else server=source cmode=download; fi
  local client=("$cmode" "$target")
  case $cfg in linux-*) ;; *) client=("socks-$cmode" "$SOCKS" "$target") ;; esac
  rm -f "$TMP/server.json" "$TMP/client.json"
  ip netns exec "$NS_B" timeout -k 2 $((SECS + 70)) python3 "$TOOL" "$server" "$port" \
    --bind 198.19.0.2 --max-seconds $((SECS + 60)) >"$TMP/server.json" 2>"$TMP/server.err" &
  local spid=$!
  PIDS+=("$spid")
  if ! wait_listen "$NS_B" "$target"; then
    kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; forget_pid "$spid"
    printf '%s\t%s\t%s\t%s\t%s\t0\t%s\t-\t0\t0\tno_server\n' "$cfg" "$loss" "$dir" "$streams" "$rep" "$SECS" >>"$RESULTS"
    return 1
  fi
  # linux-cubic: the reference again with CUBIC, lwIP's algorithm, on the sending
  # sockets (linux-tcp keeps the system's default)
  local cc=
  [ "$cfg" = linux-cubic ] && cc=cubic
  na env LOSS_TOOL_CC="$cc" timeout -k 2 $((SECS + 60)) python3 "$TOOL" "${client[@]}" "$SECS" "$streams" \
    >"$TMP/client.json" 2>"$TMP/client.err"
  wait "$spid"
  forget_pid "$spid"
  local rx="$TMP/server.json" line
  [ "$dir" = down ] && rx="$TMP/client.json"
  # gbps stalled per_second(comma, bytes) late setup note; per_second "-" when failed
  line=$(python3 - "$rx" "$TMP/client.json" "$SECS" <<'PY'
import json, sys
def load(p):
    try:
        with open(p) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return {}
rx, cl, secs = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
err = rx.get("error") or cl.get("error")
if err or "per_second" not in rx:
    print("0 %d - 0 0 %s" % (secs, (err or "no result").replace(" ", "_").replace("\t", "_")[:120]))
else:
    notes = sorted(set(rx.get("errors", []) + cl.get("errors", [])))
    print("%.6f %d %s %d %.3f %s" % (rx["gbps"], rx["stalled"], ",".join(map(str, rx["per_second"])),
          rx.get("late", 0), cl.get("setup_seconds", 0), ";".join(notes)[:120].replace(" ", "_") or "-"))
PY
)
  local gbps stalled per late setup note
  read -r gbps stalled per late setup note <<<"$line"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cfg" "$loss" "$dir" "$streams" "$rep" \
    "$gbps" "$stalled" "$per" "$late" "$setup" "$note" >>"$RESULTS"
  local mbits
  mbits=$(python3 -c '
import sys
m = [int(b) * 8 / 1e6 for b in sys.argv[1].split(",")] if sys.argv[1] != "-" else []
print(" ".join("%.0f" % x if x >= 10 or x == 0 else "%.2f" % x for x in m) or "-")' "$per")
  log "  $dir x$streams: $gbps Gbit/s, $stalled stalled s (Mbit/s per second: $mbits; setup ${setup} s) ${note/#-/}"
  if [ "$per" = - ]; then
    sed 's/^/    server: /' "$TMP/server.err" | tail -3
    sed 's/^/    client: /' "$TMP/client.err" | tail -3
  fi
}

# run_config CFG LOSS REP: fresh namespaces, loss on, the transfers, the drop counters.
run_config() {
  local cfg=$1 loss=$2 rep=$3 n
  n=$(permyriad "$loss")
  log "--- loss $loss % ($n/10000 each way), $cfg ---"
  if [ "${cfg#linux-}" != "$cfg" ]; then
    if ! { setup_pair wg-tun wg-tun && veth_udp_segmentation_off && ping_eventually "$NS_A" 198.19.0.2; }; then
      log "$cfg: setup failed"; cat "$TMP"/*.log 2>/dev/null | tail -20; teardown_pair; return
    fi
  elif [ "$cfg" = wireproxy ]; then
    WIREPROXY="$TMP/bin/wireproxy" setup_netstack_pair wg-tun ||
      { log "$cfg: setup failed"; cat "$TMP"/*.log 2>/dev/null | tail -20; teardown_pair; return; }
  else
    setup_netstack_pair "$cfg" ||
      { log "$cfg: setup failed"; cat "$TMP"/*.log 2>/dev/null | tail -20; teardown_pair; return; }
  fi
  loss_both "$n" || { log "$cfg: nft rules failed"; teardown_pair; return; }
  local dirs=(up down) dir s
  [ "${cfg#linux-}" != "$cfg" ] && dirs=(up)
  for dir in "${dirs[@]}"; do
    for s in "${STREAM_LIST[@]}"; do
      measure "$cfg" "$loss" "$dir" "$s" "$rep"
      sleep 1
    done
  done
  if [ "${cfg#linux-}" = "$cfg" ] && ! kill -0 "$NETSTACK_PID" 2>/dev/null; then
    log "$cfg: wg-netstack died:"; tail -20 "$TMP/wg-netstack.log"
  fi
  # Loss that nft did not cause: UDP receive buffers that overflowed in the namespace
  # (/proc/net/snmp RcvbufErrors; the namespaces are new, so the counts are this run's)
  # and datagrams the kernel could not queue to the TUN interface's daemon.
  local side ns iface c rcvbuf tundrop
  for side in A B; do
    if [ $side = A ]; then ns=$NS_A iface=$WG_A; else ns=$NS_B iface=$WG_B; fi
    c=$(loss_counters "$ns")
    # shellcheck disable=SC2016  # awk fields
    rcvbuf=$(ip netns exec "$ns" awk '/^Udp:/ {n++; if (n == 2) print $6}' /proc/net/snmp)
    tundrop=$(ip netns exec "$ns" cat "/sys/class/net/$iface/statistics/tx_dropped" 2>/dev/null)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cfg" "$loss" "$rep" "$side" "${c// /$'\t'}" \
      "${rcvbuf:-0}" "${tundrop:-0}" >>"$DROPS"
  done
  teardown_pair
  sleep 1
}

CONFIGS=(linux-tcp linux-cubic wg-tun wireguard-go)
[ -n "$WIREPROXY_SRC" ] && CONFIGS+=(wireproxy)
if [ -n "$ONLY" ]; then
  for c in ${ONLY//,/ }; do
    [[ " ${CONFIGS[*]} " == *" $c "* ]] || { echo "--configs: '$c' is not one of ${CONFIGS[*]}" >&2; exit 2; }
  done
  kept=()
  for c in "${CONFIGS[@]}"; do [[ ",$ONLY," == *",$c,"* ]] && kept+=("$c"); done
  CONFIGS=("${kept[@]}")
fi
NCFG=${#CONFIGS[@]}
PER_LOSS=0 # transfers per loss rate and repetition: uploads only for the Linux references
for c in "${CONFIGS[@]}"; do
  case $c in linux-*) PER_LOSS=$((PER_LOSS + ${#STREAM_LIST[@]})) ;; *) PER_LOSS=$((PER_LOSS + 2 * ${#STREAM_LIST[@]})) ;; esac
done
DEFAULT_CC=$(sysctl -n net.ipv4.tcp_congestion_control)
TOTAL=$((REPS * ${#LOSS_LIST[@]} * PER_LOSS))
START=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg) # other work on the machine skews every number
log "netns loss: $REPS repetition(s), losses (%) ${LOSS_LIST[*]}, streams ${STREAM_LIST[*]}, $SECS s per transfer, prefix $PREFIX"
# Each transfer: S s plus about 3 (start, connects, the pause after); each configuration
# about 4 s to set up. Bounds: a transfer's client and server are killed after S + 70 s,
# a setup gives up within about 40 s.
NSETUP=$((REPS * ${#LOSS_LIST[@]} * NCFG))
log "$TOTAL transfers: about $(((TOTAL * (SECS + 3) + NSETUP * 4 + 59) / 60)) min, at most $(((TOTAL * (SECS + 75) + NSETUP * 40 + 59) / 60)) min"
for rep in $(seq "$REPS"); do
  log "=== repetition $rep/$REPS ==="
  for loss in "${LOSS_LIST[@]}"; do
    for i in $(seq 0 $((NCFG - 1))); do
      run_config "${CONFIGS[$(((i + rep - 1) % NCFG))]}" "$loss" "$rep"
    done
  done
done

echo
python3 - "$RESULTS" "$DROPS" "$START" "$REPS" "$SECS" "$(uname -r)" \
  "$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)" "$(nproc)" \
  "$(sha256sum "$WGNET_BIN/wg-netstack" | cut -c1-12)" "$(sha256sum "$WGNET_BIN/wg-tun" | cut -c1-12)" \
  "$BUILT" "$(wireguard_go_version)" \
  "$LOAD" "$(cut -d' ' -f1-3 /proc/loadavg)" "${LOSS_LIST[*]}" "${STREAM_LIST[*]}" "$DEFAULT_CC" \
  "$WIREPROXY_VERSION" <<'PY'
import statistics, sys
from collections import defaultdict
(res, drops, start, reps, secs, kernel, cpu, nproc, sha_ns, sha_tun, built, wggo,
 load0, load1, losses, streams, default_cc, wireproxy) = sys.argv[1:19]
losses, streams = losses.split(), [int(s) for s in streams.split()]
runs = defaultdict(list)  # (cfg, loss, dir, streams) -> [(gbps, stalled, per, late, setup, note)]
for line in open(res):
    cfg, loss, d, st, rep, gbps, stalled, per, late, setup, note = line.rstrip("\n").split("\t")
    runs[(cfg, loss, d, int(st))].append((float(gbps), int(stalled), per, int(late), float(setup), note))

def mbit(nbytes):  # one second's bytes as Mbit/s, small rates with 2 decimals
    m = nbytes * 8 / 1e6
    return "%.0f" % m if m >= 10 or m == 0 else "%.2f" % m

def med(key, i=0):
    v = [r[i] for r in runs.get(key, [])]
    return statistics.median(v) if v else None

print(f"date: {start} · kernel {kernel} · CPU {cpu} · nproc {nproc}")
print(f"wg-netstack sha256 {sha_ns}… wg-tun {sha_tun}… built {built} · wireguard-go {wggo} · "
      f"wireproxy {wireproxy} · {reps} reps × {secs} s per transfer, medians; counted at the receiver")
print(f"load average before: {load0} · after: {load1}")
print()
print(f"references: Linux TCP through wg-tun ↔ wg-tun with the system's default congestion control"
      f" ({default_cc}; the peer's kernel also sends wg-netstack's downloads with it), and with CUBIC")
print()
print(f"| loss % | direction | streams | peer | Gbit/s | stalled s (median, max) | ratio to Linux {default_cc} | ratio to Linux CUBIC |")
print("|---:|---|---:|---|---:|---:|---:|---:|")
rows = [("linux-tcp", "up", f"Linux TCP ({default_cc}), wg-tun ↔ wg-tun"),
        ("linux-cubic", "up", "Linux TCP (CUBIC), wg-tun ↔ wg-tun")]
rows += [(p, d, f"wg-netstack ↔ {p}") for d in ("up", "down") for p in ("wg-tun", "wireguard-go")]
rows += [("wireproxy", d, "wireproxy ↔ wg-tun") for d in ("up", "down")]
ran = {k[0] for k in runs}
for loss in losses:
    for cfg, d, label in rows:
        if cfg not in ran:
            continue
        for st in streams:
            key = (cfg, loss, d, st)
            g = med(key)
            ref = med(("linux-tcp", loss, "up", st))
            ref_cubic = med(("linux-cubic", loss, "up", st))
            if g is None:
                print(f"| {loss} | {d} | {st} | {label} | fail | — | — | — |")
                continue
            stal = [r[1] for r in runs[key]]
            ratio = "%.3f" % (g / ref) if ref else "—"
            ratio_cubic = "%.3f" % (g / ref_cubic) if ref_cubic else "—"
            if cfg == "linux-tcp":
                ratio = "1 (reference)"
            if cfg == "linux-cubic":
                ratio_cubic = "1 (reference)"
            fails = sum(1 for r in runs[key] if r[2] == "-")
            fl = f" ({fails} failed)" if fails else ""
            print(f"| {loss} | {'upload' if d == 'up' else 'download'} | {st} | {label} | "
                  f"{g:.4f}{fl} | {statistics.median(stal):g}, {max(stal)} | {ratio} | {ratio_cubic} |")

if any(k[0] == "wireproxy" for k in runs):
    print()
    print("| loss % | direction | streams | wg-netstack ↔ wg-tun | wireproxy ↔ wg-tun | wg-netstack / wireproxy |")
    print("|---:|---|---:|---:|---:|---:|")
    for loss in losses:
        for d in ("up", "down"):
            for st in streams:
                ours, theirs = med(("wg-tun", loss, d, st)), med(("wireproxy", loss, d, st))
                if ours is None or theirs is None:
                    continue
                ratio = "%.2f×" % (ours / theirs) if theirs else "—"
                print(f"| {loss} | {'upload' if d == 'up' else 'download'} | {st} | {ours:.4f} | {theirs:.4f} | {ratio} |")

print()
print("drops applied (nft input counters; A→B = datagrams into B, B→A = into A; avg = mean datagram size;"
      " rcvbuf overflows and TUN tx_dropped are loss besides nft's, in the namespace receiving):")
tot = defaultdict(lambda: [0, 0, 0, 0, 0])
for line in open(drops):
    cfg, loss, rep, side, *counts = line.rstrip("\n").split("\t")
    for k in ((loss, side), (loss, side, cfg)):
        for i, v in enumerate(counts):
            tot[k][i] += int(v)
def fmt(t):
    if not t[0]:
        return "no datagrams"
    other = ""
    if t[3] or t[4]:
        # datagrams that passed the rule and were then lost in a full socket buffer
        passed = max(1, t[0] - t[2])
        other = (f"; besides: {t[3]} UDP rcvbuf overflows = {100 * t[3] / passed:.2f} % more"
                 f", {t[4]} TUN tx_dropped")
    return "%.3f %% of %d (avg %d B%s%s)" % (100 * t[2] / t[0], t[0], t[1] / t[0],
                                            ", GSO batches reached the rule!" if t[1] / t[0] > 1500 else "",
                                            other)
for loss in losses:
    print(f"  loss {loss} %: A→B {fmt(tot[(loss, 'B')])}; B→A {fmt(tot[(loss, 'A')])}")
    for cfg in ("linux-tcp", "linux-cubic", "wg-tun", "wireguard-go", "wireproxy"):
        if (loss, "B", cfg) in tot:
            print(f"      {cfg}: A→B {fmt(tot[(loss, 'B', cfg)])}; B→A {fmt(tot[(loss, 'A', cfg)])}")

print()
print("per repetition (in repetition order): Gbit/s [stalled s] Mbit/s in each second; setup = time to connect"
      " all streams; late = received in the 0.5 s after the window (not counted)")
for loss in losses:
    for cfg, d, label in rows:
        for st in streams:
            for g, stalled, per, late, setup, note in runs.get((cfg, loss, d, st), []):
                ps = "-" if per == "-" else " ".join(mbit(int(b)) for b in per.split(","))
                extra = "" if note == "-" else f" {note}"
                print(f"  {loss} % {d} x{st} {cfg}: {g:.4f} [{stalled}] {ps} · setup {setup:.1f} s"
                      f" · late {late / 1e6:.1f} MB{extra}")
PY
