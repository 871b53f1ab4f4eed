#!/usr/bin/env bash
# The Quick start demo: two wg-netstack processes on loopback, no root features, no
# outside network.
#
#   curl ──SOCKS5──▶ wg-netstack A ══ WireGuard over 127.0.0.1 UDP ══▶ wg-netstack B ──▶ local HTTP server
#                    198.19.0.1 (lwIP)                                  198.19.0.2 (lwIP)   + DNS responder
#
# B exposes a local web server and a DNS responder into the tunnel with --reverse; curl
# asks A's SOCKS5 proxy for http://web.demo/, whose name A resolves through the tunnel.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/setup.sh"
cmake --preset default >/dev/null
cmake --build build -j"$(nproc)" --target wg-netstack >/dev/null

work=$(mktemp -d /tmp/wgnet-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

base=$((20000 + $$ % 20000))
port_a=$base port_b=$((base + 1)) socks=$((base + 2)) web=$((base + 3)) dns=$((base + 4))
key_a=$(wg genkey) key_b=$(wg genkey)
umask 077
cat >"$work/a.conf" <<CONF
[Interface]
PrivateKey = $key_a
ListenPort = $port_a
Address = 198.19.0.1/24, fd00:19::1/64
DNS = 198.19.0.2

[Peer]
PublicKey = $(wg pubkey <<<"$key_b")
Endpoint = 127.0.0.1:$port_b
AllowedIPs = 198.19.0.2/32, fd00:19::2/128
CONF
cat >"$work/b.conf" <<CONF
[Interface]
PrivateKey = $key_b
ListenPort = $port_b
Address = 198.19.0.2/24, fd00:19::2/64

[Peer]
PublicKey = $(wg pubkey <<<"$key_a")
AllowedIPs = 198.19.0.1/32, fd00:19::1/128
CONF
umask 022

mkdir -p "$work/www"
echo "<h1>Hello from behind the tunnel</h1>" >"$work/www/index.html"
head -c 32000000 /dev/urandom >"$work/www/blob.bin"
(cd "$work/www" && exec python3 -m http.server "$web" --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)
python3 scripts/dns_responder.py 127.0.0.1 "$dns" web.demo=198.19.0.2 web.demo=fd00:19::2 </dev/null >/dev/null 2>&1 &
pids+=($!)

echo "demo: starting wg-netstack B (198.19.0.2): --reverse tcp:198.19.0.2:80 → 127.0.0.1:$web, udp:198.19.0.2:53 → DNS"
./build/bin/wg-netstack -c "$work/b.conf" --no-socks5 \
  --reverse "tcp:198.19.0.2:80=127.0.0.1:$web" --reverse "udp:198.19.0.2:53=127.0.0.1:$dns" 2>"$work/b.log" &
pids+=($!)
echo "demo: starting wg-netstack A (198.19.0.1): SOCKS5 on 127.0.0.1:$socks"
./build/bin/wg-netstack -c "$work/a.conf" --socks5 "127.0.0.1:$socks" 2>"$work/a.log" &
pids+=($!)
for i in $(seq 50); do
  curl -s -o /dev/null "http://127.0.0.1:$web/" && (exec 3<>"/dev/tcp/127.0.0.1/$socks") 2>/dev/null && break
  sleep 0.1
done

echo "demo: curl --socks5-hostname 127.0.0.1:$socks http://web.demo/   (name resolved through the tunnel)"
curl -sS -m 20 --socks5-hostname "127.0.0.1:$socks" http://web.demo/ | sed 's/^/    /'
start=$(date +%s.%N)
curl -sS -m 60 --socks5-hostname "127.0.0.1:$socks" http://web.demo/blob.bin -o "$work/got.bin"
end=$(date +%s.%N)
want=$(sha256sum <"$work/www/blob.bin" | cut -d' ' -f1)
got=$(sha256sum <"$work/got.bin" | cut -d' ' -f1)
size=$(stat -c %s "$work/got.bin")
python3 - "$start" "$end" "$size" <<'PY'
import sys
s, e, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print(f"demo: fetched {n/1e6:.1f} MB through WireGuard in {e-s:.2f} s: {n*8/(e-s)/1e6:.0f} Mbit/s")
PY
echo "demo: the handshakes, as the two processes logged them:"
sed 's/^/    A: /' "$work/a.log"
sed 's/^/    B: /' "$work/b.log"
if [ "$want" = "$got" ]; then
  echo "demo: sha256 matches: the file arrived intact"
else
  echo "demo: FAILED: sha256 mismatch"
  exit 1
fi
