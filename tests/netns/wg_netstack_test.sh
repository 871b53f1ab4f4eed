#!/usr/bin/env bash
# wg-netstack (no TUN, lwIP in the process) in namespace A against Debian's wireguard-go
# (kernel TUN) in namespace B, every proxy and forward of wg-netstack carrying real
# traffic to real servers in B.
#
#        namespace $NS_A                                  namespace $NS_B
#   ┌───────────────────────────────┐              ┌──────────────────────────────────┐
#   │ wg-netstack  UDP :51820       │  WireGuard   │ $WG_B (wireguard-go) :51821      │
#   │   netstack 198.19.0.1         │ <══════════> │   198.19.0.2/24, fd00:19::2/64   │
#   │            fd00:19::1         │              │   HTTP :8000 (v4 and v6)         │
#   │   SOCKS5 127.0.0.1:1080       │              │   DNS  198.19.0.2:53 (web.test)  │
#   │   HTTP   127.0.0.1:3128       │              │   UDP echo :7007                 │
#   │   health 127.0.0.1:9090       │              │   TCP :9 closed                  │
#   │   --forward tcp :18000, udp :17007          │                                  │
#   │   --reverse 198.19.0.1:8080 → 127.0.0.1:18080 (local HTTP server)              │
#   │   --reverse udp 198.19.0.1:7070 → :17070 (local UDP echo)                      │
#   │ veth 198.18.0.1/24            │ <───veth───> │ veth 198.18.0.2/24               │
#   └───────────────────────────────┘              └──────────────────────────────────┘
#
# Usage: wg_netstack_test.sh BIN_DIR   (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
trap cleanup EXIT  # also removes lib.sh's temporary directory when skipped
require_root
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
command -v curl >/dev/null || { echo "curl missing"; exit 1; }
[ -x "$WGNET_BIN/wg-netstack" ] || { echo "$WGNET_BIN/wg-netstack missing: build it first"; exit 1; }

# 1,000 slowloris connections and the proxy's own: more than the default 1,024 files.
ulimit -n 4096 || { echo "cannot raise the file limit to 4096"; exit 1; }

SOCKS=127.0.0.1:1080
HTTP_PROXY_ADDR=127.0.0.1:3128
HEALTH=127.0.0.1:9090
NETSTACK_PID=
PROBE="$(dirname "$0")/proxy_probe.py"
HANDSHAKE_TIMEOUT=4 # --handshake-timeout of this run's wg-netstack (default 10 s)

# bg NS LOGNAME CMD...: runs CMD in namespace NS in the background, remembered for cleanup.
bg() {
  local ns=$1 name=$2; shift 2
  ip netns exec "$ns" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}

# wait_listen NS PROTO ADDR:PORT: waits up to 10 s for a socket listening there.
wait_listen() {
  local ns=$1 proto=$2 addr=$3 i flag=-ltnH
  [ "$proto" = udp ] && flag=-lunH
  for i in $(seq 100); do
    ip netns exec "$ns" ss $flag | awk '{print $4}' | grep -qxF "$addr" && return 0
    sleep 0.1
  done
  log "nothing listens on $proto $addr in $ns"
  return 1
}

write_helpers() {
  # An HTTP/1.1 origin that answers every method with what it got, as JSON: method,
  # target, body length and SHA-256, header fields. /eof/N answers N bytes without a
  # length and closes; /chunked/N sends N bytes in chunks.
  cat >"$TMP/http_echo.py" <<'PY'
import hashlib, json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))
    def answer(self):
        data = self.body()
        if self.path.startswith("/eof/"):
            n = int(self.path[5:])
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"e" * n)
            self.close_connection = True
            return
        if self.path.startswith("/chunked/"):
            n = int(self.path[9:])
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, n, 1000):
                piece = b"c" * min(1000, n - i)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        out = json.dumps({"method": self.command, "target": self.path, "length": len(data),
                          "sha256": hashlib.sha256(data).hexdigest(),
                          "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)
    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = answer

ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Echo).serve_forever()
PY
  # UDP echo on both families.
  cat >"$TMP/udp_echo.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1])))
while True:
    d, a = s.recvfrom(65535)
    s.sendto(d, a)
PY
  # A SOCKS5 client (RFC 1928) for what curl cannot show: the reply code of a CONNECT,
  # and UDP ASSOCIATE. Prints the reply code, or the echoed payload.
  cat >"$TMP/socks.py" <<'PY'
import ipaddress, socket, struct, sys

def recvn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("SOCKS server closed")
        b += c
    return b

def address(host, port):
    try:
        ip = ipaddress.ip_address(host)
        atyp = b"\x01" if ip.version == 4 else b"\x04"
        return atyp + ip.packed + struct.pack(">H", port)
    except ValueError:
        return b"\x03" + bytes([len(host)]) + host.encode() + struct.pack(">H", port)

def read_address(s):
    atyp = recvn(s, 1)[0]
    n = {1: 4, 4: 16}.get(atyp) or recvn(s, 1)[0]
    raw = recvn(s, n)
    port = struct.unpack(">H", recvn(s, 2))[0]
    return (ipaddress.ip_address(raw).compressed if atyp in (1, 4) else raw.decode()), port

def request(proxy, cmd, host, port):
    h, p = proxy.rsplit(":", 1)
    s = socket.create_connection((h, int(p)), timeout=15)
    s.sendall(b"\x05\x01\x00")
    assert recvn(s, 2) == b"\x05\x00", "method refused"
    s.sendall(bytes([5, cmd, 0]) + address(host, port))
    ver, rep, _ = recvn(s, 3)
    bound = read_address(s) if rep == 0 else None
    return s, rep, bound

def parse_udp(d):
    assert d[:3] == b"\0\0\0"
    atyp = d[3]
    if atyp == 1:
        return ipaddress.ip_address(d[4:8]).compressed, struct.unpack(">H", d[8:10])[0], d[10:]
    if atyp == 4:
        return ipaddress.ip_address(d[4:20]).compressed, struct.unpack(">H", d[20:22])[0], d[22:]
    raise ValueError("unexpected ATYP %d" % atyp)

cmd, proxy, host, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if cmd == "connect":
    s, rep, _ = request(proxy, 1, host, port)
    print(rep)
elif cmd == "udp":
    # udp PROXY HOST PORT PAYLOAD [FIRST...]: one datagram to each FIRST address (same
    # port) on the association before those to HOST.
    payload = sys.argv[5].encode()
    ctrl, rep, relay = request(proxy, 3, "0.0.0.0", 0)
    assert rep == 0, "UDP ASSOCIATE refused: %d" % rep
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(2)
    for first in sys.argv[6:]:
        u.sendto(b"\0\0\0" + address(first, port) + payload, relay)
    for attempt in range(5):
        u.sendto(b"\0\0\0" + address(host, port) + payload, relay)
        try:
            d, _ = u.recvfrom(65535)
        except socket.timeout:
            continue
        src, sport, data = parse_udp(d)
        print("%s %d %s" % (src, sport, data.decode()))
        break
    else:
        print("no reply")
PY
  # A UDP client for --forward udp: sends, prints the reply.
  cat >"$TMP/udp_client.py" <<'PY'
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
for attempt in range(5):
    u.sendto(sys.argv[3].encode(), (sys.argv[1], int(sys.argv[2])))
    try:
        print(u.recvfrom(65535)[0].decode())
        break
    except socket.timeout:
        pass
else:
    print("no reply")
PY
}

setup() {
  make_namespaces
  wg genkey >"$TMP/a.key"; wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
  wg genkey >"$TMP/b.key"; wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
  chmod 600 "$TMP"/*.key

  # B: wireguard-go and the servers.
  start_impl "$NS_B" "$WG_B" wireguard-go || return 1
  configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
  mkdir -p "$TMP/www" "$TMP/local"
  echo "hello from B over wireguard-go" >"$TMP/www/index.html"
  head -c 50000000 /dev/urandom >"$TMP/www/big.bin"
  echo "hello from A's loopback" >"$TMP/local/local.txt"
  write_helpers
  bg "$NS_B" http4 python3 -m http.server --bind 198.19.0.2 --directory "$TMP/www" 8000
  bg "$NS_B" http6 python3 -m http.server --bind fd00:19::2 --directory "$TMP/www" 8000
  bg "$NS_B" http-echo python3 "$TMP/http_echo.py" 198.19.0.2 8001
  bg "$NS_B" dns python3 "$(dirname "$0")/../../scripts/dns_responder.py" --log "$TMP/dns-queries.log" 198.19.0.2 53 web.test=198.19.0.2 web.test=fd00:19::2 web6.test=fd00:19::2
  bg "$NS_B" udp-echo python3 "$TMP/udp_echo.py" 7007
  wait_listen "$NS_B" tcp 198.19.0.2:8000 && wait_listen "$NS_B" tcp "[fd00:19::2]:8000" &&
    wait_listen "$NS_B" tcp 198.19.0.2:8001 &&
    wait_listen "$NS_B" udp 198.19.0.2:53 && wait_listen "$NS_B" udp "*:7007" || return 1

  # A: a local HTTP server and a local UDP echo for --reverse, and wg-netstack.
  bg "$NS_A" http-local python3 -m http.server --bind 127.0.0.1 --directory "$TMP/local" 18080
  bg "$NS_A" udp-echo-local python3 "$TMP/udp_echo.py" 17070
  # B's AllowedIPs: one IPv4 address (198.19.0.99 stays outside, "host unreachable"), and
  # the whole IPv6 tunnel prefix, which covers wg-netstack's own fd00:19::1 too.
  cat >"$TMP/a.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
ListenPort = 51820
Address = 198.19.0.1/24, fd00:19::1/64
DNS = 198.19.0.2

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32, fd00:19::/64
Endpoint = 198.18.0.2:51821
CONF
  chmod 600 "$TMP/a.conf"
  # --health-max-connections: the slowloris check holds 200 half requests to the health
  # listener, past its default cap of 64 (wg_netstack_limits_test.sh tests the cap).
  bg "$NS_A" wg-netstack "$WGNET_BIN/wg-netstack" -c "$TMP/a.conf" --log-level verbose \
    --socks5 "$SOCKS" --http "$HTTP_PROXY_ADDR" --health "$HEALTH" --handshake-timeout "$HANDSHAKE_TIMEOUT" \
    --health-max-connections 256 \
    --forward tcp:127.0.0.1:18000=web.test:8000 --forward udp:127.0.0.1:17007=198.19.0.2:7007 \
    --reverse tcp:198.19.0.1:8080=127.0.0.1:18080 --reverse udp:198.19.0.1:7070=127.0.0.1:17070
  NETSTACK_PID=${PIDS[-1]}
  wait_listen "$NS_A" tcp 127.0.0.1:18080 && wait_listen "$NS_A" udp "*:17070" && wait_listen "$NS_A" tcp "$SOCKS" &&
    wait_listen "$NS_A" tcp "$HEALTH" && wait_listen "$NS_A" udp 127.0.0.1:17007 || return 1
}

http_status() { # URL: the status code of a GET from namespace A
  na curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$1"
}

socks_get() { # URL [curl args]: GET through the SOCKS proxy, host names resolved by it
  local url=$1; shift
  na curl -sS --max-time 60 --socks5-hostname "$SOCKS" "$@" "$url"
}

# curl_socks_error URL CODE: curl through the proxy fails with CURLE_PROXY (97) and names
# the SOCKS reply code: "Can't complete SOCKS5 connection to 198.19.0.2. (5)".
curl_socks_error() {
  local rc
  na curl -sS --max-time 20 --socks5-hostname "$SOCKS" "$1" >/dev/null 2>"$TMP/curl.err"
  rc=$?
  log "curl $1: rc $rc: $(head -c 120 "$TMP/curl.err")"
  [ $rc -eq 97 ] && grep -qF "($2)" "$TMP/curl.err"
}

run_checks() {
  # Nothing has crossed the tunnel yet, but wg-netstack starts a handshake with each peer
  # that has an endpoint: ready without traffic (wg_netstack_readyz_test.sh: the rest).
  readyz_is() { [ "$(http_status "http://$HEALTH/readyz")" = "$1" ]; }
  check "/readyz is 200 before any traffic (the handshake wg-netstack starts itself)" eventually 50 readyz_is 200

  local up="forward tcp 127.0.0.1:18000 to web.test:8000, forward udp 127.0.0.1:17007 to 198.19.0.2:7007, "
  up+="reverse tcp 198.19.0.1:8080 to 127.0.0.1:18080, reverse udp 198.19.0.1:7070 to 127.0.0.1:17070"
  check "the up line names every listener, the forwards and reverses among them" \
    eventually 20 grep -qF "$up" "$TMP/wg-netstack.log"
  local body
  body=$(socks_get http://web.test:8000/index.html)
  check "SOCKS5: page fetched by name (web.test) through the tunnel ($body)" \
    test "$body" = "hello from B over wireguard-go"
  check "DNS: web.test was asked of 198.19.0.2 from the tunnel address 198.19.0.1" \
    grep -q '^198.19.0.1 web.test 1$' "$TMP/dns-queries.log"
  check "/readyz is 200 after the handshake" test "$(http_status "http://$HEALTH/readyz")" = 200

  local start end
  start=$(date +%s.%N)
  socks_get http://web.test:8000/big.bin -o "$TMP/big.got"
  end=$(date +%s.%N)
  local want got
  want=$(sha256sum <"$TMP/www/big.bin" | cut -d' ' -f1)
  got=$(sha256sum <"$TMP/big.got" 2>/dev/null | cut -d' ' -f1)
  check "SOCKS5: 50 MB arrive intact (sha256 ${got:0:16}…, $(python3 -c "print('%.0f' % (400 / ($end - $start)))") Mbit/s)" \
    test "$want" = "$got"

  body=$(socks_get "http://[fd00:19::2]:8000/index.html")
  check "SOCKS5: IPv6 literal target ($body)" test "$body" = "hello from B over wireguard-go"
  body=$(socks_get http://web6.test:8000/index.html)
  check "SOCKS5: IPv6 target by name (AAAA only)" test "$body" = "hello from B over wireguard-go"

  local out
  out=$(na timeout 20 python3 "$TMP/socks.py" udp "$SOCKS" 198.19.0.2 7007 "udp via socks")
  check "SOCKS5 UDP ASSOCIATE round trip ($out)" test "$out" = "198.19.0.2 7007 udp via socks"
  out=$(na timeout 20 python3 "$TMP/socks.py" udp "$SOCKS" web.test 7007 "udp by name")
  check "SOCKS5 UDP ASSOCIATE to a name resolved in the tunnel ($out)" test "$out" = "198.19.0.2 7007 udp by name"
  out=$(na timeout 20 python3 "$TMP/socks.py" udp "$SOCKS" fd00:19::2 7007 "udp6 via socks")
  check "SOCKS5 UDP ASSOCIATE round trip over IPv6 ($out)" test "$out" = "fd00:19::2 7007 udp6 via socks"
  # Datagrams to the proxy's own addresses stay in the proxy: fd00:19::1 lies inside B's
  # AllowedIPs, so one that left would reach B's interface, where a counter waits for it.
  # (prerouting: B does not forward, so the packet would go no further.)
  nb nft add table inet own_udp
  nb nft add chain inet own_udp arriving "{ type filter hook prerouting priority 0; }"
  nb nft add rule inet own_udp arriving iifname "$WG_B" udp dport 7007 ip6 daddr fd00:19::1 counter
  nb nft add rule inet own_udp arriving iifname "$WG_B" udp dport 7007 ip6 daddr fd00:19::2 counter
  out=$(na timeout 20 python3 "$TMP/socks.py" udp "$SOCKS" fd00:19::2 7007 "after own" fd00:19::1 198.19.0.1)
  check "SOCKS5 UDP ASSOCIATE: the association works after datagrams to its own addresses ($out)" \
    test "$out" = "fd00:19::2 7007 after own"
  # The counter's rule sees what it should: the datagram to fd00:19::2 passed it.
  check "SOCKS5 UDP ASSOCIATE: a datagram to the proxy's own fd00:19::1 never reached the tunnel ($(nb nft list table inet own_udp | grep -o 'daddr [^ ]* counter packets [0-9]*' | tr '\n' ' '))" \
    own_udp_counts_are 0 nonzero
  nb nft delete table inet own_udp

  # Error replies (RFC 1928 REP): 5 = connection refused, 4 = host unreachable.
  out=$(na timeout 20 python3 "$TMP/socks.py" connect "$SOCKS" 198.19.0.2 9)
  check "SOCKS5: closed port → reply 5, connection refused (got $out)" test "$out" = 5
  check "curl: closed port fails with SOCKS error 5 (rc 97)" curl_socks_error http://198.19.0.2:9/ 5
  check "curl: 198.19.0.99 fails with SOCKS error 4 (rc 97)" curl_socks_error http://198.19.0.99/ 4
  out=$(na timeout 20 python3 "$TMP/socks.py" connect "$SOCKS" 198.19.0.99 80)
  check "SOCKS5: 198.19.0.99 outside AllowedIPs → reply 4, host unreachable (got $out)" test "$out" = 4
  out=$(na timeout 20 python3 "$TMP/socks.py" connect "$SOCKS" nowhere.test 80)
  check "SOCKS5: NXDOMAIN → reply 4, host unreachable (got $out)" test "$out" = 4

  body=$(na curl -sS --max-time 30 http://127.0.0.1:18000/index.html)
  check "--forward tcp: 127.0.0.1:18000 → web.test:8000 ($body)" test "$body" = "hello from B over wireguard-go"
  out=$(na timeout 20 python3 "$TMP/udp_client.py" 127.0.0.1 17007 "udp via forward")
  check "--forward udp: 127.0.0.1:17007 → 198.19.0.2:7007 ($out)" test "$out" = "udp via forward"
  body=$(nb curl -sS --max-time 30 http://198.19.0.1:8080/local.txt)
  check "--reverse tcp: B fetches 198.19.0.1:8080 → A's 127.0.0.1:18080 ($body)" \
    test "$body" = "hello from A's loopback"
  out=$(nb timeout 20 python3 "$TMP/udp_client.py" 198.19.0.1 7070 "udp via reverse")
  check "--reverse udp: B sends to 198.19.0.1:7070 → A's 127.0.0.1:17070 and back ($out)" test "$out" = "udp via reverse"
  body=$(na curl -sS --max-time 30 -p -x "http://$HTTP_PROXY_ADDR" http://web.test:8000/index.html)
  check "--http: CONNECT proxy fetches web.test ($body)" test "$body" = "hello from B over wireguard-go"
  body=$(na curl -sS --max-time 30 -p -x "http://$HTTP_PROXY_ADDR" "http://[fd00:19::2]:8000/index.html")
  check "--http: CONNECT to an IPv6 target ($body)" test "$body" = "hello from B over wireguard-go"

  http_forward_checks
  hostile_checks

  na curl -sS --max-time 5 "http://$HEALTH/metrics" >"$TMP/metrics.txt"
  check "/metrics counts the slowloris connections closed by the handshake timeout" \
    grep -qE '^wgnet_proxy_handshake_timeouts_total ([1-9][0-9]{3,})$' "$TMP/metrics.txt"
  check "/metrics has wgnet_ lines" grep -q '^wgnet_' "$TMP/metrics.txt"
  check "/metrics counts the handshake" grep -qE '^wgnet_handshakes_total [1-9]' "$TMP/metrics.txt"
  local key leaked=0
  for key in "$TMP"/a.key "$TMP"/a.pub "$TMP"/b.key "$TMP"/b.pub; do
    grep -qF "$(cat "$key")" "$TMP/metrics.txt" && leaked=1
  done
  check "/metrics holds no key material (neither key of either side)" test $leaked -eq 0
  check "/metrics holds nothing shaped like a base64 key" \
    bash -c "! grep -qE '[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=' '$TMP/metrics.txt'"
  check "wg-netstack still running" kill -0 "$NETSTACK_PID"
}

# probe_answers WHAT WANT MAX_SECONDS PROBE_ARGS...: proxy_probe.py's answer is the code
# WANT within MAX_SECONDS, followed by an orderly close (FIN: not a reset, which can cost
# a client the answer, nor a connection left open).
probe_answers() {
  local what=$1 want=$2 max=$3 out code secs end
  shift 3
  out=$(na timeout 40 python3 "$PROBE" "$@" 2>&1 | tail -1)
  read -r code secs end <<<"$out"
  check "$what (got '$out')" \
    python3 -c 'import sys; c, w, s, m, e = sys.argv[1:]; sys.exit(not (c == w and float(s) <= float(m) and e == "fin"))' \
    "$code" "$want" "${secs:-1e9}" "$max" "${end:-none}"
}

# own_udp_counts_are A B: the packets counted toward fd00:19::1 are A (a number) and those
# toward fd00:19::2 are B (a number, or "nonzero").
own_udp_counts_are() {
  local c
  c=($(nb nft list table inet own_udp | grep -o 'counter packets [0-9]*' | awk '{print $3}'))
  [ "${#c[@]}" -eq 2 ] && [ "${c[0]}" -eq "$1" ] && { [ "$2" = nonzero ] && [ "${c[1]}" -gt 0 ] || [ "${c[1]}" = "$2" ]; }
}

# echo_field JSON KEY: a top-level field of the echo server's answer ("-" if none);
# echo_header JSON NAME: a header field it received ("-" if none).
echo_field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], "-"))' "$1" "$2" 2>/dev/null || echo -; }
echo_header() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])["headers"].get(sys.argv[2], "-"))' "$1" "$2" 2>/dev/null || echo -; }
proxy_connections() { na curl -s --max-time 5 "http://$HEALTH/metrics" | awk '/^wgnet_proxy_connections_total / {print $2}'; }

# --http forwards plain requests of every method (RFC 9112 absolute-form), bodies intact.
http_forward_checks() {
  local out m sum code
  body=$(na curl -sS --max-time 30 -x "http://$HTTP_PROXY_ADDR" http://web.test:8000/index.html)
  check "--http: plain GET http://web.test:8000/ forwarded (no CONNECT) ($body)" test "$body" = "hello from B over wireguard-go"
  body=$(na curl -sS --max-time 30 -x "http://$HTTP_PROXY_ADDR" "http://[fd00:19::2]:8000/index.html")
  check "--http: plain GET to an IPv6 literal ($body)" test "$body" = "hello from B over wireguard-go"
  head -c 3000000 /dev/urandom >"$TMP/upload.bin"
  sum=$(sha256sum <"$TMP/upload.bin" | cut -d' ' -f1)
  for m in POST PUT PATCH; do
    out=$(na curl -sS --max-time 60 -x "http://$HTTP_PROXY_ADDR" -X "$m" --data-binary "@$TMP/upload.bin" \
      "http://web.test:8001/up?m=$m")
    check "--http: $m with a 3 MB body (Expect: 100-continue): method, target and body intact" \
      test "$(echo_field "$out" method) $(echo_field "$out" target) $(echo_field "$out" sha256)" = "$m /up?m=$m $sum"
  done
  out=$(na curl -sS --max-time 60 -x "http://$HTTP_PROXY_ADDR" -H "Transfer-Encoding: chunked" \
    --data-binary "@$TMP/upload.bin" http://web.test:8001/chunked-up)
  check "--http: a chunked upload arrives whole ($(echo_field "$out" length) bytes)" test "$(echo_field "$out" sha256)" = "$sum"
  for m in DELETE OPTIONS; do
    out=$(na curl -sS --max-time 30 -x "http://$HTTP_PROXY_ADDR" -X "$m" "http://web.test:8001/thing")
    check "--http: $m forwarded ($(echo_field "$out" method) $(echo_field "$out" target))" \
      test "$(echo_field "$out" method) $(echo_field "$out" target)" = "$m /thing"
  done
  code=$(na curl -sS --max-time 30 -o "$TMP/head.out" -w '%{http_code} %{size_download}' -x "http://$HTTP_PROXY_ADDR" -I \
    http://web.test:8001/h)
  check "--http: HEAD gets the header and no body ($code)" test "$code" = "200 0"
  out=$(na curl -sS --max-time 30 -x "http://$HTTP_PROXY_ADDR" -H "Connection: X-Secret" -H "X-Secret: 1" \
    -H "Keep-Alive: timeout=5" -H "Proxy-Authorization: Basic dTpw" -H "X-End: 2" http://web.test:8001/hdr)
  check "--http: hop-by-hop fields dropped (Connection-listed, Keep-Alive, Proxy-Authorization), end-to-end kept" \
    test "$(echo_header "$out" x-secret) $(echo_header "$out" keep-alive) $(echo_header "$out" proxy-authorization) $(echo_header "$out" x-end)" = "- - - 2"
  check "--http: Via added, Host from the URI ($(echo_header "$out" via), $(echo_header "$out" host))" \
    test "$(echo_header "$out" via)|$(echo_header "$out" host)" = "1.1 wg-netstack|web.test:8001"
  out=$(na curl -sS --max-time 30 -x "http://$HTTP_PROXY_ADDR" http://web.test:8001/eof/300000 | wc -c)
  check "--http: a response that ends at the origin's close arrives whole ($out of 300000 bytes)" test "$out" -eq 300000
  out=$(na curl -sS -0 --max-time 30 -x "http://$HTTP_PROXY_ADDR" http://web.test:8001/eof/300000 | wc -c)
  check "--http: the same to an HTTP/1.0 client ($out of 300000 bytes)" test "$out" -eq 300000
  out=$(na curl -sS --max-time 30 -x "http://$HTTP_PROXY_ADDR" http://web.test:8001/chunked/250000 | wc -c)
  check "--http: a chunked response arrives whole ($out of 250000 bytes)" test "$out" -eq 250000
  # Keep-alive: three requests to two origins on one client connection.
  local before after
  before=$(proxy_connections)
  out=$(na curl -sS --max-time 30 -x "http://$HTTP_PROXY_ADDR" -w '\n%{http_code}\n' \
    http://web.test:8001/k1 http://198.19.0.2:8000/index.html http://web.test:8001/k2 | grep -c '^200$')
  after=$(proxy_connections)
  check "--http: three requests to two origins on one kept-alive client connection ($out of 3 answered 200; connections $before → $after)" \
    test "$out" -eq 3 -a "$((after - before))" -eq 1
  code=$(na curl -s --max-time 30 -o /dev/null -w '%{http_code}' -x "http://$HTTP_PROXY_ADDR" http://198.19.0.99/)
  check "--http: a plain request outside AllowedIPs → 502 ($code)" test "$code" = 502
  code=$(na curl -s --max-time 30 -o /dev/null -w '%{http_code}' -x "http://$HTTP_PROXY_ADDR" http://198.19.0.1:8000/)
  check "--http: a plain request to the proxy's own address → 403 ($code)" test "$code" = 403
  code=$(printf 'GET /index.html HTTP/1.1\r\nHost: web.test:8000\r\n\r\n' |
    na timeout 10 python3 -c 'import socket, sys; s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5); s.sendall(sys.stdin.buffer.read()); print(s.recv(100).split()[1].decode())' "${HTTP_PROXY_ADDR##*:}")
  check "--http: an origin-form request (not for a proxy) → 400 ($code)" test "$code" = 400
}

# Clients that send what they should not, or not enough: each gets its protocol's answer.
hostile_checks() {
  # RFC 1928 §5-6: an address type it does not define gets REP 08; a host name of length 0
  # names no host (04), as Dante and Go's x/net/proxy servers answer. The bytes after the
  # bad ATYP stay unread: the proxy must answer before its close, not reset.
  probe_answers "SOCKS5: ATYP 0x02 → reply 8, address type not supported" 8 5 \
    socks-raw "$SOCKS" 0501000201020304005000000000
  probe_answers "SOCKS5: ATYP 0xff → reply 8" 8 5 socks-raw "$SOCKS" 050100ff0102030400500000
  probe_answers "SOCKS5: a host name of length 0 → reply 4, host unreachable" 4 5 \
    socks-raw "$SOCKS" 05010003000050
  # The proxy's own tunnel address: refused at once, not after the dial timeout. The SYN
  # to fd00:19::1 (inside B's AllowedIPs) would go to B and time out ("TTL expired"
  # after 18 s); 198.19.0.1 (outside them) got "host unreachable".
  probe_answers "SOCKS5: CONNECT to the proxy's own 198.19.0.1 → reply 2, not allowed, within 2 s" 2 2 \
    socks-raw "$SOCKS" 05010001c61300010050
  probe_answers "SOCKS5: CONNECT to the proxy's own fd00:19::1 → reply 2 within 2 s" 2 2 \
    socks-raw "$SOCKS" 05010004fd0000190000000000000000000000011f40
  local start code body target
  for target in 198.19.0.1:8000 "[fd00:19::1]:8000"; do
    start=$(date +%s.%N)
    code=$(na curl -s -o /dev/null --max-time 30 -w '%{http_connect}' -p -x "http://$HTTP_PROXY_ADDR" \
      "http://$target/")
    check "--http: CONNECT to the proxy's own $target → 403 within 2 s (got $code)" \
      python3 -c 'import sys, time; sys.exit(not (sys.argv[1] == "403" and time.time() - float(sys.argv[2]) <= 2))' \
      "$code" "$start"
  done
  body=$(printf 'CONNECT 198.19.0.1:8000 HTTP/1.1\r\nHost: 198.19.0.1:8000\r\n\r\n' |
    na timeout 10 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(sys.stdin.buffer.read())
answer = b""
while len(answer) < 65536:
    chunk = s.recv(4096)
    if not chunk:
        break
    answer += chunk
print(answer.decode(errors="replace").split("\r\n\r\n", 1)[-1].strip())' "${HTTP_PROXY_ADDR##*:}")
  check "--http: the 403's body says why ($body)" grep -qF "own tunnel address" <<<"$body"
  # A 1 MB header: 431, read by a client still writing it (not a reset).
  probe_answers "--http: a 1 MB request header → 431" 431 10 http-header "$HTTP_PROXY_ADDR" 1000000
  probe_answers "--http: a 20 KB request header → 431" 431 5 http-header "$HTTP_PROXY_ADDR" 20000
  slowloris_check
}

# 1,000 clients that send half a greeting or half a request, then nothing (a fifth of
# them to the health port, /metrics): the proxy closes every one of them after
# --handshake-timeout (not before), and serves real requests through SOCKS5 and HTTP
# CONNECT while they are held.
slowloris_check() {
  local n=1000 ready="$TMP/slowloris.ready" pid i body out first last closed
  rm -f "$ready"
  na python3 "$PROBE" slowloris "$SOCKS" "$HTTP_PROXY_ADDR" $n "$HANDSHAKE_TIMEOUT" "$ready" "$HEALTH" \
    >"$TMP/slowloris.out" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for i in $(seq 200); do
    [ -s "$ready" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  check "slowloris: $n half-open connections opened" grep -qx "held $n" "$ready"
  body=$(socks_get http://web.test:8000/index.html)
  check "slowloris: SOCKS5 still serves while they are held ($body)" \
    test "$body" = "hello from B over wireguard-go"
  body=$(na curl -sS --max-time 30 -p -x "http://$HTTP_PROXY_ADDR" http://web.test:8000/index.html)
  check "slowloris: HTTP CONNECT still serves while they are held ($body)" \
    test "$body" = "hello from B over wireguard-go"
  timeout $((HANDSHAKE_TIMEOUT + 30)) tail --pid="$pid" -f /dev/null
  wait "$pid" 2>/dev/null
  forget_pid "$pid"
  out=$(tail -1 "$TMP/slowloris.out")
  read -r _ closed _ _ _ first _ last <<<"$out"
  check "slowloris: the proxy closed all $n ($out)" test "${closed:-0}" = "$n"
  # Each connection's deadline starts when the proxy accepts it, after the client's connect.
  check "slowloris: each closed after the timeout (0.1 s of clock slack), none later than the timeout + 5 s" \
    python3 -c 'import sys; f, l, t = map(float, sys.argv[1:]); sys.exit(not (f >= t - 0.1 and l <= t + 5))' \
    "${first:--1}" "${last:-1e9}" "$HANDSHAKE_TIMEOUT"
}

shutdown_check() {
  local pid=$NETSTACK_PID
  kill -TERM "$pid"
  local i
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  check "SIGTERM: wg-netstack exits within 5 s" bash -c "! kill -0 $pid 2>/dev/null"
}

log "=== wg-netstack (A) <-> wireguard-go (B) ==="
if setup; then
  run_checks
  shutdown_check
else
  fail "setup"
fi

finish "wg-netstack netns"
