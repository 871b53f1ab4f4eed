#!/usr/bin/env bash
# By hand, not in CI (Debian's chromium is some 100 MB of packages): a headless Chromium
# in namespace A, started with --proxy-server=http://127.0.0.1:PORT (wg-netstack's HTTP
# proxy), loads a plain http:// page from a server in the tunnel, and a page by name
# through the tunnel's DNS. Needs root and `apt-get install --no-install-recommends chromium`.
#
#   namespace A: wg-netstack --http 127.0.0.1:28080, chromium   <══ WireGuard ══>   namespace B: wireguard-go,
#                                                                                      HTTP 198.19.0.2:8000, DNS
# Usage: tests/manual/chromium_http_proxy.sh BIN_DIR
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../netns/lib.sh"
require_root
trap cleanup EXIT
command -v chromium >/dev/null || { echo "chromium missing: apt-get install --no-install-recommends chromium"; exit 1; }

make_namespaces
(umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
start_impl "$NS_B" "$WG_B" wireguard-go || { fail "wireguard-go"; finish chromium; }
configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
  198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
mkdir -p "$TMP/www"
echo '<html><head><title>wgnet</title></head><body><p id="m">hello chromium, from B</p></body></html>' >"$TMP/www/index.html"
ip netns exec "$NS_B" python3 -m http.server --bind 198.19.0.2 --directory "$TMP/www" 8000 >"$TMP/http.log" 2>&1 &
PIDS+=($!)
ip netns exec "$NS_B" python3 "$here/../../scripts/dns_responder.py" 198.19.0.2 53 web.test=198.19.0.2 >"$TMP/dns.log" 2>&1 &
PIDS+=($!)
cat >"$TMP/a.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
ListenPort = 51820
Address = 198.19.0.1/24
DNS = 198.19.0.2

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32
Endpoint = 198.18.0.2:51821
CONF
chmod 600 "$TMP/a.conf"
ip netns exec "$NS_A" "$WGNET_BIN/wg-netstack" -c "$TMP/a.conf" --no-socks5 --http 127.0.0.1:28080 \
  >"$TMP/wg-netstack.log" 2>&1 &
PIDS+=($!)
wait_listen "$NS_B" 198.19.0.2:8000 && wait_listen "$NS_A" 127.0.0.1:28080 || fail "servers"

for url in http://198.19.0.2:8000/ http://web.test:8000/; do
  out=$(na timeout 60 chromium --headless=new --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$TMP/chromium-profile" --proxy-server=http://127.0.0.1:28080 --dump-dom "$url" 2>"$TMP/chromium.log")
  check "headless Chromium through --proxy-server=http://127.0.0.1:28080 loads $url ($(grep -o 'hello chromium[^<]*' <<<"$out"))" \
    grep -q 'hello chromium, from B' <<<"$out"
done
finish "chromium"
