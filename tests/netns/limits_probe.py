#!/usr/bin/env python3
# Clients of wg-netstack's listeners for its caps and time limits
# (tests/netns/wg_netstack_limits_test.sh). Python's stdlib only; every wait has a deadline.
#
#   limits_probe.py hold ADDR N SECONDS
#       opens N TCP connections to ADDR that send nothing, prints "opened N" (those whose
#       connect succeeded), keeps them SECONDS, closes them and prints "closed".
#   limits_probe.py probe ADDR socks5|http|health
#       one well-behaved client: a SOCKS5 greeting, an HTTP request (a relative URI: the
#       proxy answers 400 without the tunnel) or a GET /readyz; prints "served" when an
#       answer comes within 5 s, else "reset",
#       "closed" or "timeout".
#   limits_probe.py udp-caps SOCKS
#       UDP ASSOCIATE requests from 127.0.0.1 and 127.0.0.2 against a listener run with
#       --max-udp-associations 3 --max-udp-associations-per-client 2, printing the reply
#       of each in turn ("ok" or "refused"): two from .1, a third from .1 (its cap), one
#       from .2, a second from .2 (the listener's cap), then one from .1 after another of
#       its own ended. Expected: "ok ok refused ok refused ok".
#   limits_probe.py udp-idle SOCKS TIMEOUT
#       two associations: one silent, one sending a datagram every TIMEOUT/4; prints
#       "idle CLOSED_AFTER busy open|closed": the seconds after which the proxy closed the
#       silent one's control connection, and whether the busy one was still open at
#       2.5 x TIMEOUT.
#   limits_probe.py socks-name SOCKS HEX_NAME
#       a CONNECT to the host name HEX_NAME (hex) port 80; prints the reply code.
#   limits_probe.py http-raw ADDR HEX_REQUEST
#       sends the request bytes as they are; prints the status code, or "reset"/"closed".
import socket
import struct
import sys
import time


def addr_of(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def connect(addr, source=None, timeout=5):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect(addr_of(addr))
    return s


def answer(s, n):
    """Up to n bytes, or "reset" / "closed" / "timeout"."""
    try:
        data = s.recv(n)
    except ConnectionResetError:
        return "reset"
    except socket.timeout:
        return "timeout"
    return data if data else "closed"


def hold(addr, n, seconds):
    held = []
    for _ in range(n):
        try:
            held.append(connect(addr))
        except OSError:
            pass
    print("opened", len(held), flush=True)
    time.sleep(seconds)
    for s in held:
        s.close()
    print("closed", flush=True)


def probe(addr, kind):
    try:
        s = connect(addr)
        if kind == "socks5":
            s.sendall(b"\x05\x01\x00")
        elif kind == "http":
            s.sendall(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")  # answered 400 at once
        else:
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        a = answer(s, 64)
    except ConnectionResetError:
        a = "reset"
    except OSError as e:
        a = "error " + str(e)
    print("served" if isinstance(a, bytes) else a)


def associate(socks, source):
    """(control connection, relay address) with the association made, or None when refused."""
    s = connect(socks, source)
    s.sendall(b"\x05\x01\x00")
    if answer(s, 2) != b"\x05\x00":
        raise SystemExit("no greeting answer")
    s.sendall(b"\x05\x03\x00\x01" + socket.inet_aton("0.0.0.0") + struct.pack(">H", 0))
    r = answer(s, 10)
    if not isinstance(r, bytes) or len(r) < 2:
        raise SystemExit("no UDP ASSOCIATE reply: %r" % (r,))
    if r[1] == 0 and len(r) == 10:
        return s, (socket.inet_ntoa(r[4:8]), struct.unpack(">H", r[8:10])[0])
    s.close()
    return None


def udp_caps(socks):
    out, held = [], []
    for source in ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"]:
        a = associate(socks, source)
        out.append("ok" if a else "refused")
        if a:
            held.append(a[0])
    held.pop(0).close()  # one of 127.0.0.1's
    a = None
    for _ in range(50):  # the proxy sees the close a moment later
        time.sleep(0.1)
        a = associate(socks, "127.0.0.1")
        if a:
            break
    out.append("ok" if a else "refused")
    print(" ".join(out))


def udp_idle(socks, timeout):
    silent = associate(socks, "127.0.0.1")
    busy = associate(socks, "127.0.0.1")
    if not silent or not busy:
        raise SystemExit("association refused")
    start = time.monotonic()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    silent[0].settimeout(0.05)
    closed_after = None
    datagram = b"\x00\x00\x00\x01" + socket.inet_aton("198.19.0.2") + struct.pack(">H", 9) + b"x"
    next_send = start
    while time.monotonic() - start < 2.5 * timeout:
        now = time.monotonic()
        if now >= next_send:
            u.sendto(datagram, busy[1])
            next_send = now + timeout / 4
        if closed_after is None:
            a = answer(silent[0], 1)
            if a in ("closed", "reset"):
                closed_after = time.monotonic() - start
        else:
            time.sleep(0.05)
    busy[0].settimeout(0.2)
    state = answer(busy[0], 1)
    print("idle %s busy %s" % ("never" if closed_after is None else "%.2f" % closed_after,
                               "open" if state == "timeout" else "closed"))


def socks_name(socks, name):
    s = connect(socks, timeout=20)
    s.sendall(b"\x05\x01\x00")
    if answer(s, 2) != b"\x05\x00":
        raise SystemExit("no greeting answer")
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack(">H", 80))
    r = answer(s, 10)
    print(r[1] if isinstance(r, bytes) and len(r) >= 2 else r)


def http_raw(addr, request):
    s = connect(addr, timeout=20)
    s.sendall(request)
    r = answer(s, 64)
    print(r.split(b" ")[1].decode() if isinstance(r, bytes) else r)


def main():
    cmd = sys.argv[1]
    if cmd == "hold":
        hold(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif cmd == "probe":
        probe(sys.argv[2], sys.argv[3])
    elif cmd == "udp-caps":
        udp_caps(sys.argv[2])
    elif cmd == "udp-idle":
        udp_idle(sys.argv[2], float(sys.argv[3]))
    elif cmd == "socks-name":
        socks_name(sys.argv[2], bytes.fromhex(sys.argv[3]))
    elif cmd == "http-raw":
        http_raw(sys.argv[2], bytes.fromhex(sys.argv[3]))
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main()
