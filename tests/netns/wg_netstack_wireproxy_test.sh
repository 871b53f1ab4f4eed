#!/usr/bin/env bash
# wg-netstack runs a wireproxy configuration unchanged, against wireguard-go:
#   [Interface] with CheckAlive, [Peer]; [Socks5] with Username/Password (the password a
#   $ENV reference); [http], plain and with CertFile/KeyFile (an HTTPS proxy); two
#   [TCPClientTunnel]; a [TCPServerTunnel] reached from the
#   peer; a [UDPProxyTunnel]; the same WireGuard part through WGConfig = a wg-quick file;
#   -n on good and bad files (one line, file and line); [STDIOTunnel] as ssh's
#   ProxyCommand runs it (stdin/stdout bridged to a TCP server in B).
#
#        namespace $NS_A                                 namespace $NS_B
#   wg-netstack -c wireproxy.conf  <══ WireGuard ══>   wireguard-go $WG_B, 198.19.0.2
#     SOCKS5 127.0.0.1:25344 (user/pass)                 HTTP :8000, UDP echo :7007
#     HTTP 127.0.0.1:25345                               (fetches 198.19.0.1:3422)
#     HTTPS 127.0.0.1:25346 (TLS to the proxy)
#     TCPClientTunnel 127.0.0.1:25565, :25566 → B:8000
#     TCPServerTunnel 3422 → 127.0.0.1:25545 (HTTP in A)
#     UDPProxyTunnel 127.0.0.1:25600 → B:7007
#
# Topology: lib.sh. Usage: wg_netstack_wireproxy_test.sh BIN_DIR   (exit 77 = skipped)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
trap cleanup EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
command -v curl >/dev/null || { echo "curl missing"; exit 1; }
command -v openssl >/dev/null || { echo "openssl missing (scripts/setup.sh installs it)"; exit 1; }
N=$WGNET_BIN/wg-netstack
HEALTH=127.0.0.1:9093

bg() { # NS NAME CMD...
  local ns=$1 name=$2; shift 2
  ip netns exec "$ns" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}
# one_line_exit1 WHAT PATTERN CMD...: exit 1, one line on stderr matching PATTERN.
one_line_exit1() {
  local what=$1 pattern=$2 out rc
  shift 2
  out=$("$@" 2>"$TMP/cli.err"); rc=$?
  check "$what: exit 1, one line ($(head -c 200 "$TMP/cli.err"); rc $rc)" \
    test "$rc" -eq 1 -a -z "$out" -a "$(wc -l <"$TMP/cli.err")" -eq 1 -a -n "$(grep -E "$pattern" "$TMP/cli.err")"
}

log "=== a wireproxy config through wg-netstack, against wireguard-go ==="
make_namespaces
(umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
wg pubkey <"$TMP/a.key" >"$TMP/a.pub"
wg pubkey <"$TMP/b.key" >"$TMP/b.pub"
start_impl "$NS_B" "$WG_B" wireguard-go || { fail "wireguard-go"; finish "wireproxy"; }
configure "$NS_B" "$WG_B" "$TMP/b.key" 51821 "$(cat "$TMP/a.pub")" 198.18.0.1:51820 \
  198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
mkdir -p "$TMP/www" "$TMP/local"
echo "hello from B" >"$TMP/www/index.html"
head -c 3000000 /dev/urandom >"$TMP/www/big.bin"
# The HTTPS proxy's certificate: self-signed for 127.0.0.1, the client trusts it alone.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/proxy.key" -out "$TMP/proxy.crt" 2>"$TMP/openssl.log" ||
  fail "openssl req: $(cat "$TMP/openssl.log")"
echo "hello from A's side" >"$TMP/local/index.html"
bg "$NS_B" http python3 -m http.server --bind 198.19.0.2 --directory "$TMP/www" 8000
# B's HTTP/1.1 servers: the sha256 of a PUT's body; GET and POST answer "kept"; a kept
# connection idle for 0.5 s is closed (timeout), as origins close idle connections: on
# port 8002 with a FIN, on port 8003 with a reset (SO_LINGER 0), as some origins and load
# balancers end them (the proxy's next write on it then fails at once).
origin='
import hashlib, http.server, socket, struct, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 0.5
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"kept\n")
    do_POST = do_GET
    def do_PUT(self):
        d = self.rfile.read(int(self.headers["Content-Length"]))
        out = hashlib.sha256(d).hexdigest().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
class S(http.server.ThreadingHTTPServer):
    def shutdown_request(self, request):
        if sys.argv[2] == "reset":
            request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            request.close()
        else:
            super().shutdown_request(request)
S(("198.19.0.2", int(sys.argv[1])), H).serve_forever()'
bg "$NS_B" upload python3 -c "$origin" 8002 fin
bg "$NS_B" reset-origin python3 -c "$origin" 8003 reset
bg "$NS_A" local-http python3 -m http.server --bind 127.0.0.1 --directory "$TMP/local" 25545
bg "$NS_B" udp-echo python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.19.0.2", 7007))
while True:
    d, a = s.recvfrom(65535)
    s.sendto(b"echo %d " % a[1] + d, a)'
wait_listen "$NS_B" 198.19.0.2:8000 && wait_listen "$NS_B" 198.19.0.2:8002 && wait_listen "$NS_B" 198.19.0.2:8003 && wait_listen "$NS_A" 127.0.0.1:25545 || fail "servers"

# The WireGuard part, as a wg-quick file (for WGConfig) and inline.
cat >"$TMP/wg0.conf" <<CONF
[Interface]
Address = 198.19.0.1/32 # the subnet should be /32, says wireproxy's sample
PrivateKey = $(cat "$TMP/a.key")
ListenPort = 51820
CheckAlive = 198.19.0.2
CheckAliveInterval = 2
PostUp = echo ignored by wg-netstack

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32
Endpoint = 198.18.0.2:51821
CONF
proxies() {
  cat <<CONF
[TCPClientTunnel]
BindAddress = 127.0.0.1:25565
Target = 198.19.0.2:8000

[TCPClientTunnel]
BindAddress = 127.0.0.1:25566
Target = 198.19.0.2:8000

[TCPServerTunnel]
ListenPort = 3422
Target = localhost:25545

[UDPProxyTunnel]
BindAddress = 127.0.0.1:25600
Target = 198.19.0.2:7007
InactivityTimeout = 2

[Socks5]
BindAddress = 127.0.0.1:25344
Username = wpuser
# Avoid using spaces in the password field
Password = \$WP_SOCKS_PASSWORD

[http]
BindAddress = 127.0.0.1:25345

[http]
BindAddress = 127.0.0.1:25346
CertFile = $TMP/proxy.crt
KeyFile = $TMP/proxy.key
CONF
}
{ cat "$TMP/wg0.conf"; echo; proxies; } >"$TMP/inline.conf"
{ echo "WGConfig = $TMP/wg0.conf"; echo; proxies; } >"$TMP/wgconfig.conf"
chmod 600 "$TMP"/*.conf

# run_checks WHAT CONF: wg-netstack on CONF, every section carrying traffic.
run_checks() {
  local what=$1 conf=$2 pid out
  ip netns exec "$NS_A" env WP_SOCKS_PASSWORD='s3cret;#x' "$N" -c "$conf" -i "$HEALTH" --log-level verbose \
    --handshake-timeout 3 \
    >"$TMP/netstack-$what.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_listen "$NS_A" 127.0.0.1:25344 && wait_listen "$NS_A" 127.0.0.1:25345 && wait_listen "$NS_A" "$HEALTH" ||
    { fail "$what: wg-netstack did not listen"; cat "$TMP/netstack-$what.log"; return; }
  check "$what: no default SOCKS5 on 127.0.0.1:1080 (the file says what runs)" \
    test -z "$(na ss -ltnH 'sport = :1080')"
  out=$(na curl -sS --max-time 20 --socks5-hostname 127.0.0.1:25344 --proxy-user 'wpuser:s3cret;#x' http://198.19.0.2:8000/index.html)
  check "$what: [Socks5] with Username and a \$ENV Password ($out)" test "$out" = "hello from B"
  out=$(na curl -s --max-time 20 --socks5-hostname 127.0.0.1:25344 --proxy-user 'wpuser:wrong' http://198.19.0.2:8000/index.html; echo "rc $?")
  check "$what: [Socks5] refuses a wrong password ($out)" test "$out" = "rc 97"
  out=$(na curl -sS --max-time 20 -x http://127.0.0.1:25345 http://198.19.0.2:8000/index.html)
  check "$what: [http], a plain GET ($out)" test "$out" = "hello from B"
  # Requests on one connection to the proxy, 1.5 s apart (its idle limit here: 3 s): the
  # origin has closed the kept connection in between (8002: with a FIN, so the request
  # goes out and meets a reset; 8003: with a reset, so writing it fails). The GET goes
  # again on a new one; a POST (not idempotent) may have been acted on, so it gets 502
  # rather than a second try ("none": the proxy closed without an answer).
  local port
  for port in 8002 8003; do
    out=$(na timeout 30 python3 -c '
import socket, sys, time
port = sys.argv[1]
c = socket.create_connection(("127.0.0.1", 25345))
c.settimeout(10)
def ask(method):
    c.sendall(("%s http://198.19.0.2:%s/k HTTP/1.1\r\nHost: 198.19.0.2:%s\r\nContent-Length: 0\r\n\r\n" % (method, port, port)).encode())
    r = b""
    while b"\r\n\r\n" not in r or not (r.endswith(b"kept\n") or b" 502 " in r):
        d = c.recv(4096)
        if not d:
            break
        r += d
    return r.split(b" ")[1].decode() if r else "none"
a = ask("GET"); time.sleep(1.5); b = ask("GET"); time.sleep(1.5); p = ask("POST")
print(a, b, p)' "$port" 2>&1)
    check "$what: [http] a GET after the origin (:$port) closed the kept connection goes again, a POST gets 502 ($out)" \
      test "$out" = "200 200 502"
  done
  wait_listen "$NS_A" 127.0.0.1:25346 || fail "$what: the HTTPS proxy does not listen"
  local tls=(-x https://127.0.0.1:25346 --proxy-cacert "$TMP/proxy.crt")
  out=$(na curl -sS --max-time 20 "${tls[@]}" http://198.19.0.2:8000/index.html http://198.19.0.2:8000/index.html 2>&1)
  check "$what: [http] with CertFile/KeyFile: two GETs on one TLS connection to the proxy ($out)" \
    test "$out" = "$(printf 'hello from B\nhello from B')"
  out=$(na curl -sS --max-time 30 "${tls[@]}" --proxytunnel http://198.19.0.2:8000/big.bin 2>&1 | sha256sum | cut -d' ' -f1)
  check "$what: [http] TLS: CONNECT, 3 MB down intact" test "$out" = "$(sha256sum <"$TMP/www/big.bin" | cut -d' ' -f1)"
  out=$(na curl -sS --max-time 30 "${tls[@]}" -T "$TMP/www/big.bin" http://198.19.0.2:8002/upload 2>&1)
  check "$what: [http] TLS: a 3 MB PUT reaches the origin intact" test "$out" = "$(sha256sum <"$TMP/www/big.bin" | cut -d' ' -f1)"
  out=$(na curl -s --max-time 10 -x http://127.0.0.1:25346 http://198.19.0.2:8000/index.html; echo "rc $?")
  check "$what: [http] TLS: a client speaking plain HTTP to it gets no page ($out)" eval "[[ '$out' != *hello* ]]"
  # Half a ClientHello, then nothing: closed after --handshake-timeout (3 s), as a plain
  # client that stops mid-request would be.
  out=$(na timeout 20 python3 -c '
import socket, time
c = socket.create_connection(("127.0.0.1", 25346))
c.sendall(bytes([22, 3, 1, 0, 200]))
t = time.monotonic()
c.settimeout(15)
try:
    r = c.recv(100)
    print("closed" if r == b"" else "data", round(time.monotonic() - t))
except ConnectionResetError:
    print("closed", round(time.monotonic() - t))
except socket.timeout:
    print("open")')
  check "$what: [http] TLS: half a ClientHello is closed after the handshake timeout ($out)" \
    eval "[[ '$out' == 'closed 3' || '$out' == 'closed 4' ]]"
  out=$(na curl -s --max-time 20 "${tls[@]}" http://198.19.0.2:8000/index.html)
  check "$what: [http] TLS: still serving after that ($out)" test "$out" = "hello from B"
  for port in 25565 25566; do
    out=$(na curl -sS --max-time 20 "http://127.0.0.1:$port/index.html")
    check "$what: [TCPClientTunnel] 127.0.0.1:$port → 198.19.0.2:8000 ($out)" test "$out" = "hello from B"
  done
  out=$(nb curl -sS --max-time 20 http://198.19.0.1:3422/index.html)
  check "$what: [TCPServerTunnel] B fetches 198.19.0.1:3422 → A's localhost:25545 ($out)" test "$out" = "hello from A's side"
  # The echo names the source port it saw: the same flow within InactivityTimeout (2 s),
  # a new one (a new tunnel socket) after 3.5 s of silence.
  out=$(na timeout 30 python3 -c '
import socket, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
def ask(what):
    for _ in range(5):
        u.sendto(what, ("127.0.0.1", 25600))
        try:
            return u.recvfrom(100)[0].decode().split()
        except socket.timeout:
            pass
    return ["none", "0", "none"]
a = ask(b"ping"); b = ask(b"again"); time.sleep(3.5); c = ask(b"later")
print(a[0], a[2], "same" if a[1] == b[1] else "new", "new" if c[1] != b[1] else "same")')
  check "$what: [UDPProxyTunnel] 127.0.0.1:25600 → 198.19.0.2:7007, one flow until InactivityTimeout ($out)" \
    test "$out" = "echo ping same new"
  out=$(na curl -s --max-time 5 -w ' %{http_code}' "http://$HEALTH/readyz")
  check "$what: CheckAlive drives /readyz ($out)" eval "[[ '$out' == '{\"198.19.0.2\":'*'} 200' ]]"
  check "$what: the wg-quick key PostUp is warned about, not an error" \
    grep -q "PostUp is a wg-quick key and is ignored" "$TMP/netstack-$what.log"
  kill "$pid"
  wait "$pid" 2>/dev/null
  forget_pid "$pid"
  check "$what: wg-netstack stopped" test -z "$(na ss -ltnH 'sport = :25344')"
}

# The password may be logged nowhere.
run_checks inline "$TMP/inline.conf"
run_checks wgconfig "$TMP/wgconfig.conf"
check "the SOCKS5 password appears in no log" bash -c "! grep -qF 's3cret' '$TMP'/netstack-*.log"

log "--- [Resolve] ResolveStrategy: the family a name is dialed on ---"
# web.test has A 198.19.0.2 and AAAA fd00:19::2 (scripts/dns_responder.py); B serves a different page
# on each, so the page says which address was dialed. web6.test has AAAA only.
mkdir -p "$TMP/www6"
echo "hello from B over IPv6" >"$TMP/www6/index.html"
bg "$NS_B" http6 python3 -m http.server --bind fd00:19::2 --directory "$TMP/www6" 8000
bg "$NS_B" dns python3 "$(dirname "$0")/../../scripts/dns_responder.py" --log "$TMP/dns-queries.log" 198.19.0.2 53 web.test=198.19.0.2 web.test=fd00:19::2 web6.test=fd00:19::2
wait_listen "$NS_B" "[fd00:19::2]:8000" || fail "the IPv6 server"
eventually 100 eval "nb ss -lunH | grep -qF 198.19.0.2:53" || fail "the DNS server"
for strategy in ipv4 ipv6 auto; do
  { sed -e 's|^Address = .*|Address = 198.19.0.1/32, fd00:19::1/128\nDNS = 198.19.0.2|' \
      -e 's|^AllowedIPs = .*|AllowedIPs = 198.19.0.2/32, fd00:19::2/128|' -e '/^CheckAlive/d' -e '/^PostUp/d' "$TMP/wg0.conf"
    printf '\n[http]\nBindAddress = 127.0.0.1:25347\n\n[Resolve]\nResolveStrategy = %s\n' "$strategy"
  } >"$TMP/resolve.conf"
  chmod 600 "$TMP/resolve.conf"
  bg "$NS_A" "resolve-$strategy" "$N" -c "$TMP/resolve.conf" --log-level verbose
  rpid=${PIDS[-1]}
  wait_listen "$NS_A" 127.0.0.1:25347 || fail "ResolveStrategy = $strategy: no listener"
  web=$(na curl -sS --max-time 20 -x http://127.0.0.1:25347 http://web.test:8000/index.html 2>&1)
  web6=$(na curl -s --max-time 20 -x http://127.0.0.1:25347 -o /dev/null -w '%{http_code}' http://web6.test:8000/index.html)
  literal=$(na curl -sS --max-time 20 -x http://127.0.0.1:25347 "http://[fd00:19::2]:8000/index.html" 2>&1)
  case $strategy in
    ipv4) check "ResolveStrategy = ipv4: web.test dialed on 198.19.0.2 ($web)" test "$web" = "hello from B"
          check "ResolveStrategy = ipv4: web6.test (AAAA only) is not found: 502 ($web6)" test "$web6" = "502" ;;
    ipv6) check "ResolveStrategy = ipv6: web.test dialed on fd00:19::2 ($web)" test "$web" = "hello from B over IPv6"
          check "ResolveStrategy = ipv6: web6.test ($web6)" test "$web6" = "200" ;;
    auto) check "ResolveStrategy = auto: web.test dialed on an address of either family ($web)" \
            eval "[[ '$web' == 'hello from B' || '$web' == 'hello from B over IPv6' ]]"
          check "ResolveStrategy = auto: web6.test ($web6)" test "$web6" = "200" ;;
  esac
  check "ResolveStrategy = $strategy: an address literal is dialed whatever its family ($literal)" \
    test "$literal" = "hello from B over IPv6"
  kill "$rpid"; wait "$rpid" 2>/dev/null; forget_pid "$rpid"
done

log "--- the embedding API's one-call set-up (examples/embed: wgnet::Tunnel, a dial by name) ---"
sed -e 's|^Address = .*|Address = 198.19.0.1/32, fd00:19::1/128\nDNS = 198.19.0.2|' \
  -e 's|^AllowedIPs = .*|AllowedIPs = 198.19.0.2/32, fd00:19::2/128|' -e '/^CheckAlive/d' -e '/^PostUp/d' \
  "$TMP/wg0.conf" >"$TMP/embed.conf"
chmod 600 "$TMP/embed.conf"
out=$(na timeout 30 "$WGNET_BIN/wgnet-embed" "$TMP/embed.conf" http://web.test:8000/index.html 2>&1); rc=$?
check "wgnet-embed fetches http://web.test:8000/ through wgnet::Tunnel, IPv6 first (rc $rc, $(tail -n1 <<<"$out"))" \
  test "$rc" -eq 0 -a "$(tail -n1 <<<"$out")" = "hello from B over IPv6"
out=$(na timeout 30 "$WGNET_BIN/wgnet-embed" "$TMP/embed.conf" http://nowhere.test:8000/ 2>&1); rc=$?
check "wgnet-embed: a name the tunnel's DNS does not know: exit 1, one line ($out)" \
  test "$rc" -eq 1 -a "$(wc -l <<<"$out")" -eq 1
printf '[Interface]\nPrivateKey = nonsense\n' >"$TMP/bad-embed.conf"
chmod 600 "$TMP/bad-embed.conf"
out=$(na timeout 30 "$WGNET_BIN/wgnet-embed" "$TMP/bad-embed.conf" http://web.test:8000/ 2>&1); rc=$?
check "wgnet-embed: a bad config: exit 1, the file and line ($out)" \
  eval "[[ $rc -eq 1 && '$out' == *'bad-embed.conf: line 2'* ]]"

log "--- -n and refusals ---"
out=$(env WP_SOCKS_PASSWORD=x "$N" -n -c "$TMP/inline.conf" 2>/dev/null); rc=$?
check "-n on the wireproxy file: Config OK ($out, rc $rc)" test "$out" = "Config OK" -a "$rc" -eq 0
one_line_exit1 "-n with the \$ENV password unset" "inline.conf: line [0-9]+: .*WP_SOCKS_PASSWORD" \
  env -u WP_SOCKS_PASSWORD "$N" -n -c "$TMP/inline.conf"
{ cat "$TMP/inline.conf"; printf '\n[Socks5]\nBindAdress = 127.0.0.1:1\n'; } >"$TMP/typo.conf"
one_line_exit1 "-n with a misspelt key" "typo.conf: line [0-9]+: unknown key 'BindAdress'" \
  env WP_SOCKS_PASSWORD=x "$N" -n -c "$TMP/typo.conf"
{ cat "$TMP/inline.conf"; printf '\n[Socks6]\n'; } >"$TMP/section.conf"
one_line_exit1 "-n with an unknown section" "section.conf: line [0-9]+: unknown section" \
  env WP_SOCKS_PASSWORD=x "$N" -n -c "$TMP/section.conf"
{ grep -v PostUp "$TMP/inline.conf"; printf '\n[TCPClientTunnel]\nBindAddress = 127.0.0.1:25599\nTarget = 198.19.0.2:8000\nBindAddress = 127.0.0.1:25598\n'; } >"$TMP/twice.conf"
chmod 600 "$TMP"/*.conf
one_line_exit1 "-n with a key twice in a section" "twice.conf: line [0-9]+: .*BindAddress" \
  env WP_SOCKS_PASSWORD=x "$N" -n -c "$TMP/twice.conf"

grep -v PostUp "$TMP/inline.conf" | sed -e "s|^KeyFile = .*|KeyFile = $TMP/none.key|" >"$TMP/nokey.conf"
chmod 600 "$TMP/nokey.conf"
one_line_exit1 "-n with a KeyFile that does not exist" "KeyFile $TMP/none.key: " \
  env WP_SOCKS_PASSWORD=x "$N" -n -c "$TMP/nokey.conf"

log "--- [STDIOTunnel], as ssh's ProxyCommand uses it ---"
# B: a server that greets as sshd would, answers one line, and closes.
bg "$NS_B" stdio-server python3 -c '
import socket
l = socket.create_server(("198.19.0.2", 2222))
while True:
    c, _ = l.accept()
    c.sendall(b"SSH-2.0-wgnet-test\r\n")
    f = c.makefile("rb")
    c.sendall(b"echo: " + f.readline())
    f.close(); c.close()'
wait_listen "$NS_B" 198.19.0.2:2222 || fail "stdio server"
{ grep -v PostUp "$TMP/wg0.conf"; printf '\n[STDIOTunnel]\nTarget = 198.19.0.2:2222\n'; } >"$TMP/stdio.conf"
chmod 600 "$TMP/stdio.conf"
# Another process holds 127.0.0.1:1080 (a second ssh's wg-netstack, say): a file with
# [STDIOTunnel] runs no default SOCKS5 listener, so this one must not need the port.
bg "$NS_A" port-1080 python3 -c '
import socket, time
s = socket.create_server(("127.0.0.1", 1080)); time.sleep(600)'
wait_listen "$NS_A" 127.0.0.1:1080 || fail "a listener on 127.0.0.1:1080"
out=$(printf 'hello over stdio\n' | na timeout 30 "$N" -c "$TMP/stdio.conf" 2>"$TMP/stdio.err"); rc=$?
check "[STDIOTunnel]: stdin and stdout bridged to 198.19.0.2:2222 while 127.0.0.1:1080 is taken, exit 0 when it closes (rc $rc; $(tr '\r\n' '  ' <<<"$out"); stderr: $(head -c 300 "$TMP/stdio.err"))" \
  test "$rc" -eq 0 -a "$out" = "$(printf 'SSH-2.0-wgnet-test\r\necho: hello over stdio')"
check "[STDIOTunnel]: nothing on stderr by default (it is the user's terminal): $(head -c 300 "$TMP/stdio.err")" \
  test ! -s "$TMP/stdio.err"
out=$(printf 'hello again\n' | na timeout 30 "$N" --log-level verbose -c "$TMP/stdio.conf" 2>"$TMP/stdio.err"); rc=$?
check "[STDIOTunnel] with --log-level verbose: the stream on stdout, the log on stderr (rc $rc)" \
  test "$rc" -eq 0 -a "$out" = "$(printf 'SSH-2.0-wgnet-test\r\necho: hello again')"
check "[STDIOTunnel] with --log-level verbose: its log lines on stderr" grep -q "wg-netstack: up" "$TMP/stdio.err"
one_line_exit1 "-d with [STDIOTunnel]" "exclude each other" na "$N" -d -c "$TMP/stdio.conf"
# A dial that fails with nothing else to serve ends the program with status 1, so that
# ssh reports it (nothing listens on B's port 2223: refused).
{ grep -v PostUp "$TMP/wg0.conf"; printf '\n[STDIOTunnel]\nTarget = 198.19.0.2:2223\n'; } >"$TMP/stdio-refused.conf"
chmod 600 "$TMP/stdio-refused.conf"
out=$(printf 'hello\n' | na timeout 30 "$N" -c "$TMP/stdio-refused.conf" 2>"$TMP/stdio.err"); rc=$?
check "[STDIOTunnel] to a refused port alone: exit 1 (rc $rc), nothing on stdout" test "$rc" -eq 1 -a -z "$out"

finish "wireproxy config"
