#!/usr/bin/env bash
# wg-netstack's [SNI] section (wireproxy's transparent TLS proxy) against wireguard-go:
# TLS clients reach an HTTPS server in B by the name in their ClientHello, bytes intact
# both ways; ClientHellos without a usable name, half ones and names that do not resolve
# are closed; /metrics counts them; [Resolve] ResolveStrategy picks the family. Then
# wireproxy 1.1.3's README sample config (its addresses in the test network): -n, and its listeners in a namespace
# that has nothing but lo.
#
#        namespace $NS_A                                  namespace $NS_B
#   ┌─────────────────────────────────┐            ┌───────────────────────────────────┐
#   │ wg-netstack -c sni.conf  :51820 │ WireGuard  │ $WG_B (wireguard-go) :51821       │
#   │   netstack 198.19.0.1           │ <════════> │   198.19.0.2/24, fd00:19::2/64    │
#   │            fd00:19::1           │            │   HTTPS :443 web.test (v4 and v6, │
#   │   [SNI] 127.0.0.1:8443          │            │     self-signed), /whoami         │
#   │   [SNI] 0.0.0.0:8444            │            │   DNS 198.19.0.2:53: web.test,    │
#   │   health 127.0.0.1:9095         │            │     own.test, dead.test           │
#   │ veth 198.18.0.1/24              │ <──veth──> │ veth 198.18.0.2/24                │
#   └─────────────────────────────────┘            └───────────────────────────────────┘
#   namespace $NS_C: lo only; wg-netstack -c wireproxy-1.1.3-sample.conf
#
# Topology: lib.sh. Usage: wg_netstack_sni_test.sh BIN_DIR   (exit 77 = skipped)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
NS_C="${PREFIX}c"
# /etc/netns/$NS_C/hosts stands in for /etc/hosts inside $NS_C (ip netns exec mounts it).
cleanup_sni() {
  exec 9>&-
  cleanup
  ip netns del "$NS_C" 2>/dev/null
  rm -rf "/etc/netns/$NS_C"
}
trap cleanup_sni EXIT
require_root
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
command -v curl >/dev/null || { echo "curl missing"; exit 1; }
command -v openssl >/dev/null || { echo "openssl missing (scripts/setup.sh installs it)"; exit 1; }
[ -x "$WGNET_BIN/wg-netstack" ] || { echo "$WGNET_BIN/wg-netstack missing: build it first"; exit 1; }
N=$WGNET_BIN/wg-netstack
HERE=$(cd "$(dirname "$0")" && pwd)
HEALTH=127.0.0.1:9095
SNI=127.0.0.1:8443
HANDSHAKE_TIMEOUT=3

bg() { # NS NAME CMD...
  local ns=$1 name=$2; shift 2
  ip netns exec "$ns" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}
metric() { na curl -s --max-time 5 "http://$HEALTH/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
sha() { sha256sum "$@" | cut -d' ' -f1; }
# stop PID: SIGTERM, wait, forget.
stop() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; forget_pid "$1"; }

log "=== [SNI] through wg-netstack, against wireguard-go ==="
make_namespaces
(umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
start_impl "$NS_B" "$WG_B" wireguard-go || { fail "wireguard-go"; finish "SNI"; }
configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
  198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1

# B: an HTTPS server for web.test on 198.19.0.2:443 and [fd00:19::2]:443 (self-signed; the
# clients trust that certificate alone): files, PUT answered with the body's SHA-256,
# /whoami with the client's address.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=web.test \
  -addext subjectAltName=DNS:web.test -keyout "$TMP/web.key" -out "$TMP/web.crt" 2>"$TMP/openssl.log" ||
  fail "openssl req: $(cat "$TMP/openssl.log")"
mkdir -p "$TMP/www"
echo "hello over SNI" >"$TMP/www/index.html"
head -c 4000000 /dev/urandom >"$TMP/www/big.bin"
head -c 1000000 /dev/urandom >"$TMP/www/mid.bin"
head -c 3000000 /dev/urandom >"$TMP/up.bin"
server='
import functools, hashlib, http.server, socket, ssl, sys
addr, www, crt, key = sys.argv[1:5]
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path != "/whoami":
            return super().do_GET()
        self.reply(self.client_address[0].encode())
    def do_PUT(self):
        self.reply(hashlib.sha256(self.rfile.read(int(self.headers["Content-Length"]))).hexdigest().encode())
    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(crt, key)
s = S((addr, 443), functools.partial(H, directory=www))
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()'
bg "$NS_B" https4 python3 -c "$server" 198.19.0.2 "$TMP/www" "$TMP/web.crt" "$TMP/web.key"
bg "$NS_B" https6 python3 -c "$server" fd00:19::2 "$TMP/www" "$TMP/web.crt" "$TMP/web.key"
# own.test is wg-netstack's own tunnel address; dead.test one that no peer routes.
bg "$NS_B" dns python3 "$HERE/../../scripts/dns_responder.py" --log "$TMP/dns-queries.log" 198.19.0.2 53 \
  web.test=198.19.0.2 web.test=fd00:19::2 own.test=198.19.0.1 dead.test=198.19.0.77
wait_listen "$NS_B" 198.19.0.2:443 && wait_listen "$NS_B" "[fd00:19::2]:443" || fail "the HTTPS servers"
eventually 100 eval "nb ss -lunH | grep -qF 198.19.0.2:53" || fail "the DNS server"

# conf [RESOLVE]: the WireGuard part and two [SNI] sections, one off loopback (no
# credentials: [SNI] needs none).
conf() {
  cat <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
Address = 198.19.0.1/32, fd00:19::1/128
DNS = 198.19.0.2
ListenPort = 51820

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32, fd00:19::2/128
Endpoint = 198.18.0.2:51821

[SNI]
BindAddress = $SNI

[SNI]
BindAddress = 0.0.0.0:8444
CONF
  [ -n "${1:-}" ] && printf '\n[Resolve]\nResolveStrategy = %s\n' "$1"
}
conf >"$TMP/sni.conf"
conf ipv4 >"$TMP/sni4.conf"
chmod 600 "$TMP"/*.conf

out=$("$N" -n -c "$TMP/sni.conf" 2>&1); rc=$?
check "-n on a file with [SNI] sections: Config OK ($out, rc $rc)" test "$out" = "Config OK" -a "$rc" -eq 0

bg "$NS_A" netstack "$N" -c "$TMP/sni.conf" -i "$HEALTH" --log-level verbose --handshake-timeout "$HANDSHAKE_TIMEOUT"
NETSTACK=${PIDS[-1]}
wait_listen "$NS_A" "$SNI" && wait_listen "$NS_A" 0.0.0.0:8444 && wait_listen "$NS_A" "$HEALTH" ||
  fail "wg-netstack did not listen: $(tail -5 "$TMP/netstack.log")"
check "no default SOCKS5 on 127.0.0.1:1080 (a file with [SNI] says what runs)" test -z "$(na ss -ltnH 'sport = :1080')"
check "the log names the SNI listeners" grep -q "SNI on $SNI, SNI on 0.0.0.0:8444" "$TMP/netstack.log"

tls=(--cacert "$TMP/web.crt" --resolve "web.test:8443:127.0.0.1" --max-time 30)
out=$(na curl -sS "${tls[@]}" https://web.test:8443/index.html 2>&1)
check "curl https://web.test:8443/ through [SNI] ($out)" test "$out" = "hello over SNI"
out=$(na curl -sS "${tls[@]}" https://web.test:8443/big.bin 2>&1 | sha)
check "4 MB down, SHA-256 intact" test "$out" = "$(sha "$TMP/www/big.bin")"
out=$(na curl -sS "${tls[@]}" -T "$TMP/up.bin" https://web.test:8443/up 2>&1)
check "3 MB up (PUT), SHA-256 intact at the server ($out)" test "$out" = "$(sha "$TMP/up.bin")"
out=$(na curl -sS "${tls[@]}" --tls-max 1.2 https://web.test:8443/index.html 2>&1)
check "a TLS 1.2 ClientHello ($out)" test "$out" = "hello over SNI"
out=$(na curl -sS "${tls[@]}" https://web.test:8443/index.html https://web.test:8443/mid.bin -o /dev/null -o "$TMP/mid.out" 2>&1; sha "$TMP/mid.out")
check "two requests on one relayed connection" test "$out" = "$(sha "$TMP/www/mid.bin")"
out=$(nb curl -sS --cacert "$TMP/web.crt" --resolve web.test:8444:198.18.0.1 --max-time 30 https://web.test:8444/index.html 2>&1)
check "[SNI] on 0.0.0.0:8444 serves B over the underlay, no credentials needed ($out)" test "$out" = "hello over SNI"
par=()
for i in $(seq 10); do
  na curl -sS "${tls[@]}" -o "$TMP/par$i.out" https://web.test:8443/mid.bin >"$TMP/par$i.log" 2>&1 &
  par+=($!)
done
wait "${par[@]}"
bad=0
for i in $(seq 10); do [ "$(sha "$TMP/par$i.out")" = "$(sha "$TMP/www/mid.bin")" ] || bad=$((bad + 1)); done
check "10 downloads of 1 MB at once, each intact ($bad bad)" test "$bad" -eq 0
out=$(na openssl s_client -connect "$SNI" -servername web.test -CAfile "$TMP/web.crt" -verify_return_error \
  </dev/null 2>&1 | grep -E '^Verify return code')
check "openssl s_client -servername web.test: the server's own certificate verifies ($out)" \
  test "$out" = "Verify return code: 0 (ok)"

# closed MODE: how the proxy ends a client that sends MODE's bytes: "closed SECONDS" when
# the connection is closed (or reset) after that many seconds, "handshake" when a TLS
# handshake completed, "open" when nothing happened for 15 s.
closed() {
  na timeout 30 python3 -c '
import socket, ssl, sys, time
mode = sys.argv[1]
c = socket.create_connection(("127.0.0.1", 8443))
c.settimeout(15)
t = time.monotonic()
try:
    if mode == "nosni":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.wrap_socket(c, server_hostname=None)  # sends no server_name
        print("handshake")
        sys.exit()
    if mode == "half":  # a ClientHello record of 307 bytes, of which 12 are sent
        c.sendall(bytes([22, 3, 1, 1, 0x33, 1, 0, 1, 0x2f, 3, 3, 0]))
    else:  # not TLS
        c.sendall(b"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n")
    print("closed" if c.recv(100) == b"" else "data", round(time.monotonic() - t))
except TimeoutError:
    print("open")
except OSError:
    print("closed", round(time.monotonic() - t))' "$1" 2>&1
}
out=$(closed nosni)
check "a ClientHello without server_name is closed at once ($out)" test "$out" = "closed 0"
check "  and logged at verbose level" grep -q "sni: a ClientHello without server_name: closed" "$TMP/netstack.log"
out=$(closed garbage)
check "an HTTP request is closed at once ($out)" test "$out" = "closed 0"
check "  and logged" grep -q "sni: not a TLS ClientHello, or a malformed one: closed" "$TMP/netstack.log"
out=$(closed half)
check "half a ClientHello is closed after --handshake-timeout ($HANDSHAKE_TIMEOUT s: $out)" \
  eval "[[ '$out' == 'closed $HANDSHAKE_TIMEOUT' || '$out' == 'closed $((HANDSHAKE_TIMEOUT + 1))' ]]"
check "  and logged" grep -q "sni: no complete ClientHello within the handshake timeout: closed" "$TMP/netstack.log"

# refused NAME: curl to NAME through [SNI]: "rc SECONDS" (it must fail, and soon).
refused() {
  local start rc
  start=$(date +%s)
  na curl -s --cacert "$TMP/web.crt" --resolve "$1:8443:127.0.0.1" --max-time 30 "https://$1:8443/" >/dev/null 2>&1
  rc=$?
  echo "$rc $(($(date +%s) - start))"
}
out=$(refused nowhere.test)
check "a name the tunnel's DNS does not know is closed (curl rc, seconds: $out)" eval "[[ '$out' =~ ^[1-9][0-9]*\ [0-5]$ ]]"
check "  and logged" grep -q "sni: nowhere.test:443: " "$TMP/netstack.log"
check "  it was asked of the tunnel's DNS" grep -q "nowhere.test" "$TMP/dns-queries.log"
out=$(refused own.test)
check "a name of wg-netstack's own tunnel address is refused ($out)" eval "[[ '$out' =~ ^[1-9][0-9]*\ [0-5]$ ]]"
check "  and logged" grep -q "sni: own.test:443: the proxy's own tunnel address" "$TMP/netstack.log"
out=$(refused dead.test)
check "a name of an address no peer routes is refused ($out)" eval "[[ '$out' =~ ^[1-9][0-9]*\ [0-5]$ ]]"
check "  and logged" grep -q "sni: dead.test:443: " "$TMP/netstack.log"
# RFC 6066 forbids IP literals as server names; openssl sends one when told to.
out=$(na timeout 20 openssl s_client -connect "$SNI" -servername 198.19.0.2 </dev/null 2>&1 | grep -c 'BEGIN CERTIFICATE')
check "an IP literal as server name is refused (certificates seen: $out)" test "$out" = 0
check "  and logged" grep -q "sni: 198.19.0.2: an IP address as server name (RFC 6066 forbids it): closed" "$TMP/netstack.log"

check "/metrics: one handshake timeout ($(metric wgnet_proxy_handshake_timeouts_total))" \
  test "$(metric wgnet_proxy_handshake_timeouts_total)" = 1
check "/metrics: four connections failed: nowhere, own, dead, the IP literal ($(metric wgnet_proxy_connections_failed_total))" \
  test "$(metric wgnet_proxy_connections_failed_total)" = 4
total=$(metric wgnet_proxy_connections_total)
check "/metrics: every connection counted (total $total, at least 24)" test "${total:-0}" -ge 24
check "/metrics: none active once they ended" eventually 50 eval 'test "$(metric wgnet_proxy_connections_active)" = 0'
out=$(na curl -sS "${tls[@]}" https://web.test:8443/index.html 2>&1)
check "still serving after all that ($out)" test "$out" = "hello over SNI"

log "--- [Resolve] ResolveStrategy ---"
out=$(na curl -sS "${tls[@]}" https://web.test:8443/whoami 2>&1)
check "auto: web.test dialed on an address of either family ($out)" eval "[[ '$out' == 198.19.0.1 || '$out' == fd00:19::1 ]]"
stop "$NETSTACK"
check "wg-netstack stopped: its listeners are gone" test -z "$(na ss -ltnH 'sport = :8443')"
bg "$NS_A" netstack4 "$N" -c "$TMP/sni4.conf" --log-level verbose
NETSTACK=${PIDS[-1]}
wait_listen "$NS_A" "$SNI" || fail "wg-netstack (ipv4) did not listen"
out=$(na curl -sS "${tls[@]}" https://web.test:8443/whoami 2>&1)
check "ipv4: web.test dialed on its A record: the server saw 198.19.0.1 ($out)" test "$out" = "198.19.0.1"
stop "$NETSTACK"

log "--- wireproxy 1.1.3's README sample ---"
SAMPLE=$HERE/wireproxy-1.1.3-sample.conf
out=$("$N" -n -c "$SAMPLE" 2>"$TMP/sample-n.err"); rc=$?
check "-n on the sample: Config OK, exit 0 ($out, rc $rc; $(head -c 300 "$TMP/sample-n.err"))" \
  test "$out" = "Config OK" -a "$rc" -eq 0
# A namespace with nothing but lo: nothing leaves it. Its /etc/hosts gives the sample's
# Endpoint name an underlay address (wg-netstack resolves endpoints at start, as wg(8)
# and wireproxy do), which lo cannot reach.
mkdir -p "/etc/netns/$NS_C"
echo "198.18.0.2 my.ddns.example.com" >"/etc/netns/$NS_C/hosts"
echo "nameserver 127.0.0.1" >"/etc/netns/$NS_C/resolv.conf"
ip netns add "$NS_C"
ip -n "$NS_C" link set lo up
# [STDIOTunnel] bridges stdin: a pipe this script holds open (fd 9) until the end.
mkfifo "$TMP/stdin"
ip netns exec "$NS_C" "$N" -c "$SAMPLE" --log-level verbose <"$TMP/stdin" >"$TMP/sample.out" 2>"$TMP/sample.log" &
SAMPLE_PID=$!
PIDS+=("$SAMPLE_PID")
exec 9>"$TMP/stdin"
connects() { ip netns exec "$NS_C" timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null; }
check "  its log: up, with SOCKS5, HTTP and SNI" \
  eventually 50 grep -q "up, UDP port .*SOCKS5 on 127.0.0.1:25344, HTTP on 127.0.0.1:25345, SNI on 0.0.0.0:443" "$TMP/sample.log"
# The peer is out of reach: [STDIOTunnel]'s dial (ssh.myserver.net through DNS
# 198.19.0.1, which no AllowedIPs route) fails at once. wireproxy logs that and goes on
# serving the other sections.
eventually 30 grep -q "stdio tunnel: ssh.myserver.net:22: " "$TMP/sample.log"
if kill -0 "$SAMPLE_PID" 2>/dev/null; then
  for l in 127.0.0.1:25565 127.0.0.1:25344 127.0.0.1:25345 0.0.0.0:443; do
    host=${l%:*}
    [ "$host" = 0.0.0.0 ] && host=127.0.0.1
    check "the sample's listener $l accepts connections" eventually 50 connects "$host" "${l##*:}"
  done
  check "wg-netstack still runs the sample" kill -0 "$SAMPLE_PID"
else
  fail "wg-netstack ended when [STDIOTunnel]'s dial failed (wireproxy goes on serving); its listeners went with it: $(tail -3 "$TMP/sample.log" | tr '\n' ' ')"
fi
stop "$SAMPLE_PID"
exec 9>&-

finish "SNI"
