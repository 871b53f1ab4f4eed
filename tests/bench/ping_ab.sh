#!/usr/bin/env bash
# Ping through a wg-tun <-> wg-tun pair (the netns topology of tests/netns/lib.sh), two
# builds alternated round by round: what one change does to the round trip when nothing
# else runs. Its own command (root), not part of ctest.
#
# Usage: ping_ab.sh NEW_BIN_DIR OLD_BIN_DIR [ROUNDS]
# Prints per round and build: the median RTT of 300 pings 5 ms apart, and the context
# switches of both daemons since they started (setup and handshake included, the same
# for both builds).
set -u
[ $# -ge 2 ] || { echo "usage: $0 NEW_BIN_DIR OLD_BIN_DIR [ROUNDS]" >&2; exit 2; }
bin_dir() { # DIR: its absolute path if it holds an executable wg-tun
  local d
  d=$(cd "$1" 2>/dev/null && pwd) || return 1
  [ -x "$d/wg-tun" ] || return 1
  echo "$d"
}
NEW=$(bin_dir "$1") || { echo "no wg-tun in $1" >&2; exit 2; }
OLD=$(bin_dir "$2") || { echo "no wg-tun in $2" >&2; exit 2; }
ROUNDS=${3:-4}
RUN_ID=${RUN_ID:-p$$}
# shellcheck disable=SC2034  # read by lib.sh
IMPL_LOG_LEVEL=error
. "$(dirname "$0")/../netns/lib.sh"
require_root
trap cleanup EXIT
trap 'exit 130' INT TERM

daemon_switches() {
  local p sum=0 v
  for p in "${PIDS[@]}"; do
    v=$(cat /proc/"$p"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}')
    sum=$((sum + v))
  done
  echo "$sum"
}

for r in $(seq "$ROUNDS"); do
  for which in new old; do
    # shellcheck disable=SC2034  # read by lib.sh's start_impl
    if [ "$which" = new ]; then WGNET_BIN=$NEW; else WGNET_BIN=$OLD; fi
    setup_pair wg-tun wg-tun >/dev/null || { echo "setup failed" >&2; exit 1; }
    ping_eventually "$NS_A" 198.19.0.2 || { echo "tunnel did not come up" >&2; exit 1; }
    rtts=$(na timeout 30 ping -n -c 300 -i 0.005 -s 56 -W 2 198.19.0.2 |
      awk -F'time=' '/time=/ {split($2, a, " "); print a[1]}' | sort -n)
    n=$(printf '%s\n' "$rtts" | grep -c .)
    [ "$n" -gt 0 ] || { echo "round $r $which: no replies" >&2; exit 1; }
    med=$(printf '%s\n' "$rtts" | sed -n "$(((n + 1) / 2))p")
    log "round $r $which: median RTT $med ms over $n replies; context switches of both daemons $(daemon_switches)"
    teardown_pair
  done
done
