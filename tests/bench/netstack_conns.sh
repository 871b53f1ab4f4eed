#!/usr/bin/env bash
# What a relayed connection costs wg-netstack: resident memory while N SOCKS5
# connections are held idle and after they close, latency under connection churn, and
# the throughput of one bulk transfer each way. Its own command (root), not part of
# ctest. Topology: tests/netns/netstack_conns_lib.sh (wg-netstack in A, a peer in B with
# echo/sink/source servers, every process at `ulimit -n 20000`).
#
# Usage: netstack_conns.sh BIN_DIR [--conns "500 10000"] [--rate R] [--seconds S]
#                          [--bytes N] [--peer wg-tun|wireguard-go] [--phases transfer,hold,churn]
#   transfer: N bytes (default 1 GiB) down (B → client) and up through SOCKS5, timed by
#             the receiver; wg-netstack's peak RSS (VmHWM) afterwards.
#   hold:     per N: VmRSS before, with N connections held (each proved by an echo; then
#             every one echoes once more), right after all closed, and 5 s later.
#   churn:    R new connections a second for S s (default 500 × 20), each SOCKS5
#             CONNECT + 64-byte request/echo + close: p50/p90/p99/max latency, and
#             wg-netstack's CPU over the run.
#   idle:     per N of --idle-conns (default "0 1000 10000"): N connections held (each
#             proved by an echo), then left idle for --idle-seconds (default 60): the
#             proxy's CPU time and wake-ups (context switches of all its threads) over
#             that time, then every connection echoes once more. With --wireproxy PATH
#             the same for that wireproxy, each N right after wg-netstack's; with
#             --idle-also "FLAGS" for a wg-netstack started with those flags too.
# The phases run in that order, each against a wg-netstack started for it (VmRSS
# "before" is after its first connection). Every client has a deadline.
# NETSTACK_LOG_LEVEL=verbose shows wg-netstack's memory trims.
set -u
usage() { echo "usage: $0 BIN_DIR [--conns LIST] [--rate R] [--seconds S] [--bytes N] [--peer IMPL] [--phases LIST] [--idle-conns LIST] [--idle-seconds S] [--wireproxy PATH] [--idle-also FLAGS]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BIN_SRC=$(cd "$1" 2>/dev/null && pwd) || { echo "no such BIN_DIR: $1" >&2; exit 2; }
shift
CONNS_LIST="500 10000"
RATE=500
SECS=20
BYTES=1073741824
PEER=wg-tun
PHASES=transfer,hold,churn
IDLE_LIST="0 1000 10000"
IDLE_SECS=60
WIREPROXY_SRC=
IDLE_ALSO=
while [ $# -gt 0 ]; do
  case $1 in
    --conns) CONNS_LIST=${2:-}; shift 2 || usage ;;
    --rate) RATE=${2:-}; shift 2 || usage ;;
    --seconds) SECS=${2:-}; shift 2 || usage ;;
    --bytes) BYTES=${2:-}; shift 2 || usage ;;
    --peer) PEER=${2:-}; shift 2 || usage ;;
    --phases) PHASES=${2:-}; shift 2 || usage ;;
    --idle-conns) IDLE_LIST=${2:-}; shift 2 || usage ;;
    --idle-seconds) IDLE_SECS=${2:-}; shift 2 || usage ;;
    --wireproxy) WIREPROXY_SRC=${2:-}; shift 2 || usage ;;
    --idle-also) IDLE_ALSO=${2:-}; shift 2 || usage ;;
    *) usage ;;
  esac
done
for n in $CONNS_LIST; do
  [[ $n =~ ^[1-9][0-9]*$ && $n -le 10000 ]] || { echo "--conns: 1..10000 each" >&2; exit 2; }
done
for n in $IDLE_LIST; do
  [[ $n =~ ^[0-9]+$ && $n -le 10000 ]] || { echo "--idle-conns: 0..10000 each" >&2; exit 2; }
done
[[ $IDLE_SECS =~ ^[1-9][0-9]*$ && $IDLE_SECS -le 600 ]] || { echo "--idle-seconds: 1..600" >&2; exit 2; }
[ -z "$WIREPROXY_SRC" ] || [ -x "$WIREPROXY_SRC" ] || { echo "--wireproxy: no program at $WIREPROXY_SRC" >&2; exit 2; }
[[ $RATE =~ ^[1-9][0-9]*$ && $RATE -le 2000 ]] || { echo "--rate: 1..2000" >&2; exit 2; }
[[ $SECS =~ ^[1-9][0-9]*$ && $SECS -le 120 ]] || { echo "--seconds: 1..120" >&2; exit 2; }
[[ $BYTES =~ ^[1-9][0-9]*$ && $BYTES -le 8589934592 ]] || { echo "--bytes: 1..8 GiB" >&2; exit 2; }
[[ $PEER == wg-tun || $PEER == wireguard-go ]] || { echo "--peer: wg-tun or wireguard-go" >&2; exit 2; }
[ -x "$BIN_SRC/wg-netstack" ] || { echo "$BIN_SRC/wg-netstack missing: build it first" >&2; exit 2; }

RUN_ID=${RUN_ID:-c$$}
umask 077
. "$(dirname "$0")/../netns/lib.sh"
require_root
for tool in wireguard-go wg python3 ss curl; do
  command -v "$tool" >/dev/null || { echo "$tool missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
trap cleanup EXIT
trap 'exit 130' INT TERM

# A copy of the binaries: a rebuild during the run must not mix two builds.
mkdir -p "$TMP/bin"
cp -p "$BIN_SRC/wg-netstack" "$TMP/bin/"
[ "$PEER" = wg-tun ] && cp -p "$BIN_SRC/wg-tun" "$TMP/bin/"
[ -n "$WIREPROXY_SRC" ] && cp -p "$WIREPROXY_SRC" "$TMP/bin/wireproxy"
WGNET_BIN="$TMP/bin"
PEER_IMPL=$PEER
. "$(dirname "$0")/../netns/netstack_conns_lib.sh"

# utime + stime of all threads of PID, in clock ticks.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
CLK_TCK=$(getconf CLK_TCK)
has_phase() { [[ ",$PHASES," == *",$1,"* ]]; }

hold_run() { # N
  local n=$1 before held after later line
  sleep 1
  before=$(rss_kb "$NETSTACK_PID")
  hold_start "$n"
  if ! line=$(wait_line "$TMP/hold.out" '^held ' 600); then
    log "hold $n: no result"; cat "$TMP/hold.err"; hold_end; return 1
  fi
  local ok failed secs
  read -r _ ok failed secs <<<"$line"
  sleep 1
  held=$(rss_kb "$NETSTACK_PID")
  local lwip
  lwip=$(metric wgnet_tcp_connections_active)
  hold_cmd echo
  line=$(wait_line "$TMP/hold.out" '^echo ' 300) || line="echo ? ? ?"
  local eok efailed
  read -r _ eok efailed _ <<<"$line"
  local t0 t1
  t0=$(date +%s.%N)
  hold_end
  wait_closed 60 || log "hold $n: proxy connections still open after 60 s"
  t1=$(date +%s.%N)
  after=$(rss_kb "$NETSTACK_PID")
  sleep 5
  later=$(rss_kb "$NETSTACK_PID")
  log "hold $n: $ok held, $failed failed (in $secs s); echo again: $eok ok, $efailed failed; netstack TCP $lwip"
  [ -s "$TMP/hold.err" ] && sed 's/^/    /' "$TMP/hold.err"
  log "hold $n: VmRSS before $((before / 1024)) MiB, held $((held / 1024)) MiB ($(( (held - before) * 1024 / n / 1024 )) KiB/conn, $(( (held - before) * 1024 / n )) B), closed $((after / 1024)) MiB ($(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s), 5 s later $((later / 1024)) MiB"
  grep -h 'memory:' "$TMP/wg-netstack.log" 2>/dev/null | sed 's/^/    wg-netstack: /'
  HOLD_ROWS+=("| $n | $ok | $failed | $((before / 1024)) | $((held / 1024)) | $(( (held - before) * 1024 / n )) | $((after / 1024)) | $((later / 1024)) |")
}

# "TID NAME SWITCHES CPU_NS" per live thread of PID: its wake-ups (context switches) and
# CPU time so far (schedstat: finer than the stat ticks).
thread_wakeups() {
  local t
  for t in /proc/"$1"/task/*; do
    echo "${t##*/} $(tr ' ' _ <"$t/comm" 2>/dev/null)" \
      "$(awk '/ctxt_switches:/ {n += $2} END {print n + 0}' "$t/status" 2>/dev/null)" \
      "$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null)"
  done
}
# column COL of a thread_wakeups file, summed (%.0f: mawk's %d stops at 2^31)
column_sum() { awk -v c="$2" '{n += $c} END {printf "%.0f\n", n}' "$1"; }

idle_run() { # N NAME
  local n=$1 name=$2 line c0 c1 w0 w1 t0 t1 eok=- efailed=- rss
  if [ "$n" -gt 0 ]; then
    hold_start "$n"
    if ! line=$(wait_line "$TMP/hold.out" '^held ' 600); then
      log "idle $name $n: no result"; cat "$TMP/hold.err"; hold_end; return 1
    fi
    read -r _ ok failed _ <<<"$line"
    [ "$ok" = "$n" ] || log "idle $name $n: only $ok held ($failed failed)"
  fi
  sleep 2  # the last echoes' ACKs
  thread_wakeups "$NETSTACK_PID" >"$TMP/threads0"; t0=$(date +%s%N)
  sleep "$IDLE_SECS"
  thread_wakeups "$NETSTACK_PID" >"$TMP/threads1"; t1=$(date +%s%N)
  w0=$(column_sum "$TMP/threads0" 3); c0=$(column_sum "$TMP/threads0" 4)
  w1=$(column_sum "$TMP/threads1" 3); c1=$(column_sum "$TMP/threads1" 4)
  rss=$(( $(rss_kb "$NETSTACK_PID") / 1024 ))
  if [ "$n" -gt 0 ]; then
    hold_cmd echo
    line=$(wait_line "$TMP/hold.out" '^echo ' 300) || line="echo ? ? ?"
    read -r _ eok efailed _ <<<"$line"
    hold_end
  fi
  local secs cpu rate
  secs=$(python3 -c "print('%.1f' % (($t1 - $t0) / 1e9))")
  cpu=$(python3 -c "print('%.3f' % (($c1 - $c0) / 1e9))")
  rate=$(python3 -c "print('%.1f' % (($w1 - $w0) / (($t1 - $t0) / 1e9)))")
  log "idle $name $n: CPU $cpu s in $secs s, $rate wake-ups/s, VmRSS $rss MiB; echo after: $eok ok, $efailed failed"
  # wake-ups per thread, the busiest first
  awk -v secs="$secs" 'NR == FNR {was[$1] = $3; cpu[$1] = $4; next}
    {d = $3 - was[$1]; if (d > 0) printf "    %s: %.1f/s, CPU %.1f ms\n", $2, d / secs, ($4 - cpu[$1]) / 1e6}' \
    "$TMP/threads0" "$TMP/threads1" | sort -t: -k2 -rn | head -8
  IDLE_ROWS+=("| $n | $name | $cpu | $rate | $rss | $eok |")
}

churn_run() {
  local c0 c1 t0 t1 line
  c0=$(cpu_ticks "$NETSTACK_PID"); t0=$(date +%s%N)
  line=$(na timeout -k 5 $((SECS + 60)) python3 "$CONNS_PY" churn "$SOCKS" "$TARGET" "$ECHO_PORT" "$RATE" "$SECS" 2>"$TMP/churn.err")
  c1=$(cpu_ticks "$NETSTACK_PID"); t1=$(date +%s%N)
  local cpu
  cpu=$(python3 -c "print('%.0f' % (100.0 * ($c1 - $c0) / $CLK_TCK / (($t1 - $t0) / 1e9)))")
  local ok failed p50 p90 p99 max
  read -r _ ok failed p50 p90 p99 max <<<"${line:-churn ? ? ? ? ? ?}"
  log "churn $RATE/s × $SECS s: $ok ok, $failed failed; latency p50 $p50 ms, p90 $p90 ms, p99 $p99 ms, max $max ms; wg-netstack CPU $cpu %"
  [ -s "$TMP/churn.err" ] && sed 's/^/    /' "$TMP/churn.err"
  log "after churn: VmRSS $(( $(rss_kb "$NETSTACK_PID") / 1024 )) MiB, netstack TCP $(metric wgnet_tcp_connections_active)"
  LINES+=("churn $RATE/s × $SECS s: $ok ok, $failed failed; p50 $p50 ms, p90 $p90 ms, p99 $p99 ms, max $max ms; wg-netstack CPU $cpu %")
}

transfer_run() { # download|upload
  local dir=$1 line c0 c1
  c0=$(cpu_ticks "$NETSTACK_PID")
  line=$(na timeout -k 5 600 python3 "$CONNS_PY" "$dir" "$SOCKS" "$TARGET" "$ECHO_PORT" "$BYTES" 2>"$TMP/$dir.err")
  c1=$(cpu_ticks "$NETSTACK_PID")
  local got secs mbit cpu
  read -r got secs mbit <<<"${line:-? ? ?}"
  # wg-netstack's CPU per GiB moved: less swayed by other load than the rate.
  cpu=$(python3 -c "print('%.2f' % (($c1 - $c0) / $CLK_TCK / ($BYTES / 2**30)))")
  log "$dir $BYTES bytes: received $got in $secs s: $mbit Mbit/s; wg-netstack CPU $cpu s/GiB"
  [ -s "$TMP/$dir.err" ] && sed 's/^/    /' "$TMP/$dir.err"
  LINES+=("$dir: $got bytes in $secs s, $mbit Mbit/s, wg-netstack CPU $cpu s/GiB")
}

HOLD_ROWS=()
IDLE_ROWS=()
LINES=()
log "netstack conns: peer $PEER, prefix $PREFIX, wg-netstack $(sha256sum "$WGNET_BIN/wg-netstack" | cut -c1-12)"
conns_setup || { log "setup failed"; for f in "$TMP"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }
# Every phase gets a wg-netstack of its own (the first one the one conns_setup started):
# memory another phase freed must not count for or against the next.
FRESH=1
fresh_netstack() {
  if [ "$FRESH" = 1 ]; then FRESH=0; return 0; fi
  netstack_stop
  netstack_start || { log "wg-netstack did not come back"; exit 1; }
}
log "wg-netstack after the first connection: VmRSS $(( $(rss_kb "$NETSTACK_PID") / 1024 )) MiB"
if has_phase transfer; then
  fresh_netstack
  transfer_run download
  transfer_run upload
  log "wg-netstack peak RSS (VmHWM) $(( $(awk '/^VmHWM:/ {print $2}' "/proc/$NETSTACK_PID/status") / 1024 )) MiB, now $(( $(rss_kb "$NETSTACK_PID") / 1024 )) MiB"
fi
if has_phase hold; then
  for n in $CONNS_LIST; do
    fresh_netstack
    hold_run "$n"
  done
fi
if has_phase churn; then
  fresh_netstack
  churn_run
fi
# idle_other N NAME VAR VALUE: idle_run with the proxy started with VAR=VALUE, then
# the usual wg-netstack back.
idle_other() {
  local var=$3 had=${!3+1} saved=${!3-}
  netstack_stop
  printf -v "$var" '%s' "$4"
  export "${var?}"
  netstack_start || { log "$2 did not start"; exit 1; }
  if [ -n "$had" ]; then printf -v "$var" '%s' "$saved"; else unset "$var"; fi
  idle_run "$1" "$2"
  netstack_stop
  FRESH=1
  netstack_start || { log "wg-netstack did not come back"; exit 1; }
}
if has_phase idle; then
  for n in $IDLE_LIST; do
    fresh_netstack
    idle_run "$n" wg-netstack
    if [ -n "$WIREPROXY_SRC" ]; then idle_other "$n" wireproxy WIREPROXY "$TMP/bin/wireproxy"; fi
    if [ -n "$IDLE_ALSO" ]; then
      idle_other "$n" "wg-netstack $IDLE_ALSO" NETSTACK_ARGS "${NETSTACK_ARGS:-} $IDLE_ALSO"
    fi
  done
fi

echo
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC') · kernel $(uname -r) · nproc $(nproc) · peer $PEER · load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#HOLD_ROWS[@]} -gt 0 ]; then
  echo "| held | ok | failed | VmRSS before (MiB) | held (MiB) | B per connection | closed (MiB) | 5 s later (MiB) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${HOLD_ROWS[@]}"
fi
if [ ${#IDLE_ROWS[@]} -gt 0 ]; then
  echo "| held idle | proxy | CPU over $IDLE_SECS s (s) | wake-ups/s | VmRSS (MiB) | echo after |"
  echo "|---:|---|---:|---:|---:|---:|"
  printf '%s\n' "${IDLE_ROWS[@]}"
fi
printf '%s\n' "${LINES[@]:-}"
