#!/usr/bin/env bash
# Where the work goes with wg-tun --queues N: CPU time of each daemon thread (utime +
# stime from /proc/PID/task, in clock ticks) during iperf3 TCP with 4 streams A→B, in the
# netns topology of tests/netns/lib.sh. Shows whether flows spread over the TUN readers
# (sender) and whether datagrams spread over the UDP receivers (one peer: one socket).
# Its own command (root), not part of ctest.
# Usage: queue_threads.sh BIN_DIR [QUEUES (default 2)] [SECONDS (default 6)]
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR [QUEUES] [SECONDS]}" && pwd)
QUEUES=${2:-2}
SECS=${3:-6}
[[ $QUEUES =~ ^[1-9][0-9]*$ && $QUEUES -le 16 && $SECS =~ ^[1-9][0-9]*$ && $SECS -le 60 ]] ||
  { echo "QUEUES 1..16, SECONDS 1..60" >&2; exit 2; }
. "$(dirname "$0")/../netns/lib.sh"
require_root
trap cleanup EXIT
ARGS_A="--queues $QUEUES" ARGS_B="--queues $QUEUES" setup_pair wg-tun wg-tun || exit 1
ping_eventually "$NS_A" 198.19.0.2 || exit 1
# "NAME TID TICKS" per thread of PID.
snap() {
  local t
  for t in /proc/"$1"/task/*; do
    echo "$(cat "$t/comm") ${t##*/} $(awk '{print $14 + $15}' "$t/stat")"
  done
}
nb timeout $((SECS + 15)) iperf3 -s -1 >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
before_a=$(snap "${PIDS[0]}") before_b=$(snap "${PIDS[1]}")
na timeout $((SECS + 10)) iperf3 -c 198.19.0.2 -P 4 -t "$SECS" | grep -E 'SUM.*receiver'
after_a=$(snap "${PIDS[0]}") after_b=$(snap "${PIDS[1]}")
delta() { # BEFORE AFTER: threads that used CPU, by thread id
  awk 'NR == FNR {t[$2] = $3; next} ($2 in t) && $3 > t[$2] {print "  " $1 " (" $2 "): " $3 - t[$2] " ticks"}' \
    <(echo "$1") <(echo "$2")
}
echo "sender A, --queues $QUEUES, $SECS s ($(getconf CLK_TCK) ticks/s):"
delta "$before_a" "$after_a"
echo "receiver B:"
delta "$before_b" "$after_b"
teardown_pair
