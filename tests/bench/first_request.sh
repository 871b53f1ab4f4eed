#!/usr/bin/env bash
# The first request after a start, as a user makes it: a client proxy and a server-side
# wg-netstack started together on loopback (the client first, the server LATE ms
# later), then one `curl --socks5-hostname` by a name only the tunnel's DNS knows, sent
# as soon as the client's SOCKS5 port accepts. Each start is fresh (new processes); the
# clients take turns. Prints one markdown table: per client, the starts answered 200,
# and the median and maximum time of the request. Its own command, no root; not part
# of ctest.
#
#   client (wg-netstack or wireproxy)          server: wg-netstack :51902
#     198.19.0.1, DNS 198.19.0.2,    <══wg══>    198.19.0.2
#     PersistentKeepalive 25,                    reverse tcp :80 → web server (python3)
#     SOCKS5 127.0.0.1:11080                     reverse udp :53 → scripts/dns_responder.py
#
# Usage: first_request.sh BIN_DIR [--starts N] [--late MS] [--wireproxy PATH]
#   --starts: fresh starts per client (default 10); --late: the server's delay (300);
#   --wireproxy: a wireproxy binary to measure beside wg-netstack (the same config file
#   serves both: wireproxy's format).
set -u
usage() { echo "usage: $0 BIN_DIR [--starts N] [--late MS] [--wireproxy PATH]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BIN=$(cd "$1" 2>/dev/null && pwd) || { echo "no such BIN_DIR: $1" >&2; exit 2; }
shift
STARTS=10
LATE=300
WIREPROXY=
while [ $# -gt 0 ]; do
  case $1 in
    --starts) STARTS=$2; shift 2 ;;
    --late) LATE=$2; shift 2 ;;
    --wireproxy) WIREPROXY=$2; shift 2 ;;
    *) usage ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/wgnet-first.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
KA=$(wg genkey) KB=$(wg genkey)
PA=$(echo "$KA" | wg pubkey) PB=$(echo "$KB" | wg pubkey)
(
  umask 077
  printf '[Interface]\nPrivateKey = %s\nAddress = 198.19.0.1/32\nDNS = 198.19.0.2\n\n[Peer]\nPublicKey = %s\nEndpoint = 127.0.0.1:51902\nAllowedIPs = 198.19.0.0/24\nPersistentKeepalive = 25\n\n[Socks5]\nBindAddress = 127.0.0.1:11080\n' \
    "$KA" "$PB" >"$TMP/client.conf"
  printf '[Interface]\nPrivateKey = %s\nAddress = 198.19.0.2/32\nListenPort = 51902\n\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.0.1/32\n' \
    "$KB" "$PA" >"$TMP/server.conf"
)
mkdir -p "$TMP/www" && echo hello >"$TMP/www/index.html"
python3 -m http.server --bind 127.0.0.1 --directory "$TMP/www" 18080 >/dev/null 2>&1 &
PIDS+=($!)
python3 "$HERE/../../scripts/dns_responder.py" 127.0.0.1 15353 web.test=198.19.0.2 >/dev/null &
PIDS+=($!)
sleep 0.5

CLIENTS=(wg-netstack)
[ -n "$WIREPROXY" ] && CLIENTS+=(wireproxy)
late_s=$(python3 -c "print($LATE / 1000)")
for i in $(seq "$STARTS"); do
  for client in "${CLIENTS[@]}"; do
    if [ "$client" = wireproxy ]; then
      "$WIREPROXY" -c "$TMP/client.conf" >"$TMP/client.log" 2>&1 &
    else
      "$BIN/wg-netstack" -c "$TMP/client.conf" --log-level silent >"$TMP/client.log" 2>&1 &
    fi
    c=$!
    sleep "$late_s"
    "$BIN/wg-netstack" -c "$TMP/server.conf" --no-socks5 --log-level silent \
      --reverse tcp:198.19.0.2:80=127.0.0.1:18080 --reverse udp:198.19.0.2:53=127.0.0.1:15353 &
    s=$!
    for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/11080) 2>/dev/null && break; sleep 0.01; done
    out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 \
      --socks5-hostname 127.0.0.1:11080 http://web.test/)
    echo "$client ${out:-000 10}" >>"$TMP/results"
    kill "$c" "$s" 2>/dev/null
    wait "$c" "$s" 2>/dev/null
  done
done
python3 - "$TMP/results" "$STARTS" "$LATE" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    client, code, t = line.split()
    rows.setdefault(client, []).append((code, float(t)))
print(f"| client | starts | answered 200 | median | max | (server {sys.argv[3]} ms late) |")
print("|---|---:|---:|---:|---:|---|")
for client, r in rows.items():
    times = [t for _, t in r]
    ok = sum(1 for c, _ in r if c == "200")
    print(f"| {client} | {len(r)} | {ok} | {statistics.median(times):.3f} s | {max(times):.3f} s | |")
PY
