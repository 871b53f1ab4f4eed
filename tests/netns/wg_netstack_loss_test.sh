#!/usr/bin/env bash
# Data integrity through wg-netstack's SOCKS5 proxy under packet loss: wg-netstack in
# namespace A, wg-tun in B (topology and loss: netstack_peer_lib.sh), 2 % of the
# WireGuard datagrams dropped at random each way (nft, input hook of each namespace).
#   - upload: a deterministic pseudo-random stream of BYTES bytes from A through SOCKS5
#     to a receiver on 198.19.0.2 in B;
#   - download: the same length (another seed) from a server on 198.19.0.2 in B to a
#     client in A through SOCKS5.
# The stream is generated and hashed on the fly (loss_tool.py, nothing on disk); its
# expected SHA-256 is computed separately, without the network, and what arrived must
# match it in length and digest. Each transfer must complete within
# WGNET_LOSS_TEST_TIMEOUT seconds (default 600) with no 180-second stretch without
# progress. The applied loss is read back from the counting rule and must be near the
# rate asked for.
#
# Usage: wg_netstack_loss_test.sh BIN_DIR   (exit 77 = skipped: not root)
# Environment:
#   WGNET_LOSS_TEST_BYTES    stream length (default 1073741824 = 1 GiB)
#   WGNET_LOSS_TEST_PERCENT  loss each way in % (default 2; 0 = count only)
#   WGNET_LOSS_TEST_TIMEOUT  seconds per transfer (default 600)
#   WGNET_LOSS_TEST_FAULT    short|corrupt: the senders send one byte too few or one
#                            flipped bit, to check that the test fails (it must)
# shellcheck source-path=SCRIPTDIR
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=netstack_peer_lib.sh
. "$HERE/netstack_peer_lib.sh"
trap cleanup EXIT # also removes lib.sh's temporary directory when skipped
trap 'exit 130' INT TERM
require_root
for tool in wg nft ethtool python3 ss ping; do
  command -v "$tool" >/dev/null || { echo "$tool missing (scripts/setup.sh installs it)"; exit 1; }
done
for b in wg-tun wg-netstack; do
  [ -x "$WGNET_BIN/$b" ] || { echo "$WGNET_BIN/$b missing: build it first"; exit 1; }
done
TOOL="$HERE/../bench/loss_tool.py"
BYTES=${WGNET_LOSS_TEST_BYTES:-1073741824}
PERCENT=${WGNET_LOSS_TEST_PERCENT:-2}
LIMIT=${WGNET_LOSS_TEST_TIMEOUT:-600}
FAULT=${WGNET_LOSS_TEST_FAULT:-}
IDLE=180
[[ $BYTES =~ ^[1-9][0-9]*$ ]] || { echo "WGNET_LOSS_TEST_BYTES: a positive byte count"; exit 1; }
[[ $LIMIT =~ ^[1-9][0-9]*$ && $LIMIT -le 3600 ]] || { echo "WGNET_LOSS_TEST_TIMEOUT: 1..3600 s"; exit 1; }
case $FAULT in "" | short | corrupt) ;; *) echo "WGNET_LOSS_TEST_FAULT: short or corrupt"; exit 1 ;; esac
N=$(permyriad "$PERCENT") || { echo "WGNET_LOSS_TEST_PERCENT: a percentage 0..100"; exit 1; }

# transfer upload|download SEED PORT: one stream through the proxy, A → B or B → A, to
# or from a server on 198.19.0.2:PORT; checks that what arrived is the stream of SEED,
# whole.
transfer() {
  local what=$1 seed=$2 port=$3
  local expected
  expected=$(python3 "$TOOL" digest "$BYTES" "$seed") || { fail "$what: digest"; return; }
  local server client rx tx
  if [ "$what" = upload ]; then
    server=(recv-hash "$port")
    client=(socks-send "$SOCKS" "198.19.0.2:$port" "$BYTES" "$seed" ${FAULT:+--fault "$FAULT"})
    rx=server tx=client
  else
    server=(serve-stream "$port" "$BYTES" "$seed" ${FAULT:+--fault "$FAULT"})
    client=(socks-recv "$SOCKS" "198.19.0.2:$port")
    rx=client tx=server
  fi
  rm -f "$TMP"/server.* "$TMP"/client.*
  # The server's bounds are 10 s longer than the client's, which decide.
  ip netns exec "$NS_B" timeout -k 5 $((LIMIT + 40)) python3 "$TOOL" "${server[@]}" --bind 198.19.0.2 \
    --deadline $((LIMIT + 10)) --idle $((LIMIT + 10)) >"$TMP/server.out" 2>"$TMP/server.err" &
  local spid=$!
  PIDS+=("$spid")
  if ! wait_listen "$NS_B" "198.19.0.2:$port"; then
    kill "$spid" 2>/dev/null; wait "$spid"; forget_pid "$spid"
    fail "$what: the server did not start: $(tail -2 "$TMP/server.err")"
    return
  fi
  local t0 t1 crc src
  t0=$(date +%s.%N)
  na timeout -k 5 $((LIMIT + 30)) python3 "$TOOL" "${client[@]}" --deadline "$LIMIT" --idle "$IDLE" \
    >"$TMP/client.out" 2>"$TMP/client.err"
  crc=$?
  if [ $crc -ne 0 ]; then
    # The server would wait on: SIGTERM makes it report how far it got.
    kill "$spid" 2>/dev/null
  fi
  wait "$spid"; src=$?
  forget_pid "$spid"
  t1=$(date +%s.%N)
  local got sent took
  got=$(cat "$TMP/$rx.out" 2>/dev/null) sent=$(cat "$TMP/$tx.out" 2>/dev/null)
  took=$(awk -v a="$t0" -v b="$t1" -v n="$BYTES" -v ok=$((crc == 0 && src == 0)) \
    'BEGIN {printf "%.1f s", b - a; if (ok) printf ", %.1f Mbit/s", n * 8 / (b - a) / 1e6}')
  log "$what: expected '$expected', sent '${sent:-nothing}', received '${got:-nothing}' ($took)"
  if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
    fail "$what: TRANSFER DID NOT COMPLETE (client exit $crc, server exit $src; limit $LIMIT s, idle $IDLE s; a sender counts what its socket took, a receiver what arrived)"
    sed 's/^/  client: /' "$TMP/client.err" | tail -5
    sed 's/^/  server: /' "$TMP/server.err" | tail -5
    return
  fi
  check "$what: the sender sent the expected stream" test "$sent" = "$expected"
  if [ "$got" = "$expected" ]; then
    pass "$what: $BYTES bytes arrived intact through SOCKS5 at $PERCENT % loss ($took)"
  elif [ "${got%% *}" != "$BYTES" ]; then
    fail "$what: LENGTH MISMATCH: ${got%% *} bytes arrived, $BYTES sent"
  else
    fail "$what: SHA-256 MISMATCH: arrived ${got#* }, sent ${expected#* }"
  fi
}

# loss_applied: the counting rules saw traffic both ways, and the share dropped is the
# rate asked for (within a factor of 2 once there are 2000 datagrams; exactly 0 at 0 %).
loss_applied() {
  local side ns seen bytes dropped ok=0
  for side in A B; do
    if [ $side = A ]; then ns=$NS_A; else ns=$NS_B; fi
    read -r seen bytes dropped <<<"$(loss_counters "$ns")"
    log "into $side: $dropped of $seen datagrams dropped ($(awk -v d="$dropped" -v s="$seen" \
      'BEGIN {printf "%.3f", s ? 100 * d / s : 0}') %, asked $PERCENT %; mean $(( seen ? bytes / seen : 0 )) B)"
    if [ "$seen" -eq 0 ]; then
      ok=1
    elif [ "$N" -eq 0 ]; then
      [ "$dropped" -eq 0 ] || ok=1
    elif [ "$seen" -ge 2000 ]; then
      # dropped / seen within [N/2, 2N] per 10000
      if [ $((dropped * 10000 * 2)) -lt $((seen * N)) ] || [ $((dropped * 10000)) -gt $((seen * N * 2)) ]; then
        ok=1
      fi
    fi
  done
  return $ok
}

log "=== wg-netstack (A) <-> wg-tun (B), $PERCENT % loss each way, $BYTES bytes each way ==="
[ -n "$FAULT" ] && log "fault injection '$FAULT': this run must FAIL"
if setup_netstack_pair wg-tun; then
  loss_both "$N" || fail "nft loss rules"
  transfer upload 11 45001
  transfer download 12 45002
  check "loss was applied as asked (nft counters)" loss_applied
  check "wg-netstack still running" kill -0 "$NETSTACK_PID"
  check "wg-tun still running" kill -0 "${PIDS[0]}"
else
  fail "setup"
fi

finish "wg-netstack loss"
