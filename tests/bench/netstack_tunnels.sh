#!/usr/bin/env bash
# Several tunnels in one process (one lwIP thread for all their Stacks) against one
# tunnel in each of several processes, interleaved: for each repetition, netstack_tunnels
# with --tunnels 1, with --tunnels N, and N processes of --tunnels 1 at once. No root.
# Usage: tests/bench/netstack_tunnels.sh BIN_DIR [--tunnels N] [--reps R] [--seconds S]
set -euo pipefail
bin=${1:?usage: $0 BIN_DIR [--tunnels N] [--reps R] [--seconds S]}
shift
n=2 reps=3 secs=5
while [ $# -gt 0 ]; do
  case $1 in
    --tunnels) n=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
tool="$bin/netstack_tunnels"
[ -x "$tool" ] || { echo "no $tool (build with -DWGNET_BENCH=ON)" >&2; exit 1; }
out=$(mktemp -d /tmp/wgnet-tunnels.XXXXXX)
trap 'rm -rf "$out"' EXIT
total() { sed -n 's/.*total \([0-9]*\) Mbit.*/\1/p' "$@" | awk '{s += $1} END {print s}'; }
for r in $(seq "$reps"); do
  "$tool" --tunnels 1 --seconds "$secs" >"$out/one" || exit 1
  "$tool" --tunnels "$n" --seconds "$secs" >"$out/shared" || exit 1
  pids=()
  for p in $(seq "$n"); do "$tool" --tunnels 1 --seconds "$secs" >"$out/proc$p" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || exit 1; done
  echo "rep $r: 1 tunnel $(total "$out/one") Mbit/s; $n tunnels in one process $(total "$out/shared") Mbit/s" \
       "($(sed -n 's/.*; \(lwIP.*\)/\1/p' "$out/shared")); $n processes $(total "$out"/proc*) Mbit/s"
done
