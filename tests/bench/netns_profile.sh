#!/usr/bin/env bash
# Where a wg-tun <-> wg-tun tunnel spends its time, in the netns topology of
# tests/netns/lib.sh (the pair of netns_throughput.sh): a system-wide `perf record`
# during one iperf3 TCP stream, and the wake-ups a ping round trip costs. Its own
# command (root), not part of ctest.
#
# Usage: netns_profile.sh BIN_DIR [--seconds S] [--out DIR]
#   --seconds: length of the TCP stream (default 10; perf samples its middle S-4 s)
#   --out: keep perf.data and the reports there (default: a temporary folder, removed)
# Prints: the stream's rate; the share of all samples per thread and library, the top
# symbols of the whole machine (perf report, share of all samples); context switches and system calls
# of both daemons per GB moved and per ping round trip (perf stat over 200 pings
# 10 ms apart), and the median RTT.
set -u
usage() { echo "usage: $0 BIN_DIR [--seconds S] [--out DIR]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BIN_SRC=$(cd "$1" 2>/dev/null && pwd) || { echo "no such BIN_DIR: $1" >&2; exit 2; }
shift
SECS=10
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECS=${2:-}; shift 2 || usage ;;
    --out) OUT=${2:-}; shift 2 || usage ;;
    *) usage ;;
  esac
done
[[ $SECS =~ ^[1-9][0-9]*$ && $SECS -ge 6 && $SECS -le 120 ]] || { echo "--seconds: 6..120" >&2; exit 2; }
[ -x "$BIN_SRC/wg-tun" ] || { echo "$BIN_SRC/wg-tun missing" >&2; exit 2; }

RUN_ID=${RUN_ID:-p$$}
umask 077
IMPL_LOG_LEVEL=error
. "$(dirname "$0")/../netns/lib.sh"
require_root
for tool in iperf3 wg ping perf python3 ss; do
  command -v "$tool" >/dev/null || { echo "$tool missing" >&2; exit 1; }
done
trap cleanup EXIT
trap 'exit 130' INT TERM
[ -n "$OUT" ] || OUT="$TMP/profile"
mkdir -p "$OUT"
mkdir -p "$TMP/bin" && cp "$BIN_SRC/wg-tun" "$TMP/bin/" && WGNET_BIN="$TMP/bin"

setup_pair wg-tun wg-tun || exit 1
ping_eventually "$NS_A" 198.19.0.2 || { echo "tunnel did not come up" >&2; exit 1; }
DAEMONS=$(IFS=,; echo "${PIDS[*]}")

# 1. The stream, perf sampling its middle.
nb iperf3 -s -1 -D -I "$TMP/iperf.pid" >/dev/null 2>&1
wait_tcp_port "$NS_B" 5201 || exit 1
na timeout $((SECS + 10)) iperf3 -c 198.19.0.2 -t "$SECS" -J >"$TMP/iperf.json" 2>/dev/null &
IPERF=$!
sleep 2
perf stat -e context-switches,raw_syscalls:sys_enter -p "$DAEMONS" -x, -o "$OUT/stream.stat" \
  -- sleep $((SECS - 4)) 2>/dev/null &
STAT=$!
perf record -a -g -F 999 -o "$OUT/perf.data" -- sleep $((SECS - 4)) >/dev/null 2>&1
wait "$STAT"
wait "$IPERF" || { echo "iperf3 failed" >&2; exit 1; }
[ -f "$TMP/iperf.pid" ] && kill "$(cat "$TMP/iperf.pid")" 2>/dev/null
BPS=$(python3 -c 'import json,sys; print("%.0f" % json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"])' "$TMP/iperf.json")
awk -v b="$BPS" 'BEGIN { printf "TCP x1: %.3f Gbit/s\n", b / 1e9 }'
per_gb() { # STATFILE EVENT BYTES
  awk -F, -v ev="$2" -v bytes="$3" '$3 == ev { printf "%.0f", $1 / (bytes / 1e9) }' "$1"
}
MOVED=$(awk -v b="$BPS" -v s="$SECS" 'BEGIN { printf "%.0f", b / 8 * (s - 4) }')
echo "both daemons per GB moved: $(per_gb "$OUT/stream.stat" context-switches "$MOVED") context switches," \
  "$(per_gb "$OUT/stream.stat" raw_syscalls:sys_enter "$MOVED") system calls"

perf report -i "$OUT/perf.data" --no-children --sort comm,dso -g none --percent-limit 1 --stdio 2>/dev/null |
  grep '%' >"$OUT/threads.txt"
perf report -i "$OUT/perf.data" --no-children --sort dso,sym -g none --percent-limit 0.5 --stdio 2>/dev/null |
  grep '%' | head -40 >"$OUT/top.txt"
echo "threads and libraries, whole machine (share of all samples):"
cat "$OUT/threads.txt"
echo "top symbols (libcrypto's assembly has no symbols: one entry per address):"
cat "$OUT/top.txt"

# 2. Ping: wake-ups per round trip.
perf stat -e context-switches,raw_syscalls:sys_enter -p "$DAEMONS" -x, -o "$OUT/ping.stat" -- \
  ip netns exec "$NS_A" ping -c 200 -i 0.01 -s 56 -q 198.19.0.2 >"$TMP/ping.txt" 2>/dev/null
RTT=$(awk -F'[/ ]' '/rtt/ {print $8}' "$TMP/ping.txt")
echo "ping: mean RTT ${RTT} ms; both daemons per round trip:" \
  "$(awk -F, '$3 == "context-switches" { printf "%.1f", $1 / 200 }' "$OUT/ping.stat") context switches," \
  "$(awk -F, '$3 == "raw_syscalls:sys_enter" { printf "%.1f", $1 / 200 }' "$OUT/ping.stat") system calls"
