#!/usr/bin/env python3
# Hostile and odd clients of wg-netstack's SOCKS5 and HTTP proxies, for what curl cannot
# send (tests/netns/wg_netstack_test.sh). Python's stdlib only; every wait has a deadline.
#
#   proxy_probe.py socks-raw PROXY HEX
#       SOCKS5 greeting (no auth), then the request bytes HEX as they are; prints the
#       reply code, the seconds it took and how the proxy closed after it ("8 0.01 fin",
#       "... reset", "... open"), or "reset", "closed" or "timeout" instead of a reply.
#   proxy_probe.py http-header PROXY BYTES
#       a CONNECT request whose header carries BYTES bytes of one extra field, read while
#       it is written; prints the status line's code, the seconds and the close
#       ("431 0.05 fin"), or "reset", "closed" or "timeout".
#   proxy_probe.py slowloris SOCKS HTTP N TIMEOUT READY_FILE [HEALTH]
#       opens N connections, a quarter each (a fifth with HEALTH): half a SOCKS5 greeting,
#       a whole greeting and half a request, half an HTTP request line, a request line and
#       half a header (and half a GET of HEALTH's /metrics); then
#       writes "held N" to READY_FILE and waits up to TIMEOUT + 15 s for the proxy to
#       close them (FIN or reset), never closing one itself; prints
#         closed CLOSED OF N first FIRST last LAST
#       (the shortest and longest time from a connection's opening to its close, seconds)
import os
import resource
import selectors
import socket
import sys
import threading
import time


def connect(proxy):
    host, port = proxy.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def recv_some(s, n):
    """Up to n bytes; b"" on EOF; None on a reset; b"timeout" when nothing came."""
    try:
        return s.recv(n)
    except ConnectionResetError:
        return None
    except socket.timeout:
        return b"timeout"


def ending(s):
    """How the proxy ends the connection after its answer: reads to EOF, returns "fin" (an
    orderly close), "reset" (a client that has not read the answer yet may lose it), or
    "open" (nothing within 10 s)."""
    s.settimeout(10)
    for _ in range(100000):
        data = recv_some(s, 65536)
        if data is None:
            return "reset"
        if data == b"timeout":
            return "open"
        if not data:
            return "fin"
    return "open"


def socks_raw(proxy, hexbytes):
    s = connect(proxy)
    s.sendall(b"\x05\x01\x00")
    if recv_some(s, 2) != b"\x05\x00":
        return "method refused"
    start = time.monotonic()
    try:
        s.sendall(bytes.fromhex(hexbytes))
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    s.settimeout(30)
    head = recv_some(s, 2)
    if head is None:
        return "reset"
    if head == b"timeout":
        return "timeout"
    if len(head) < 2:
        return "closed"
    took = time.monotonic() - start
    return "%d %.2f %s" % (head[1], took, ending(s))


def http_header(proxy, size):
    s = connect(proxy)
    request = (b"CONNECT web.test:8000 HTTP/1.1\r\nHost: web.test:8000\r\nX-Big: "
               + b"a" * size + b"\r\n\r\n")
    start = time.monotonic()
    failed = []

    def write():
        try:
            s.sendall(request)
        except OSError as e:  # the proxy may stop reading once it has answered
            failed.append(e)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    s.settimeout(30)
    data = b""
    while b"\r\n" not in data:
        chunk = recv_some(s, 4096)
        if chunk is None:
            return "reset"
        if chunk == b"timeout":
            return "timeout"
        if not chunk:
            return "closed"
        data += chunk
    took = time.monotonic() - start
    code = data.split(b" ", 2)[1].decode()
    end = ending(s)
    writer.join(10)
    return "%s %.2f %s" % (code, took, end)


HALVES = [
    ("socks", b"\x05"),                          # half a greeting
    ("socks", b"\x05\x01\x00\x05\x01\x00\x01\xc6"),  # a greeting and half a request
    ("http", b"CONNECT web.test:8000 HT"),        # half a request line
    ("http", b"CONNECT web.test:8000 HTTP/1.1\r\nHost: web"),  # half a header
]


# With a health address, every fifth connection holds half a request to /metrics there.
HEALTH_HALF = ("health", b"GET /metrics HTTP/1.1\r\nHo")


def slowloris(socks_proxy, http_proxy, n, timeout, ready_file, health=None):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))
    sel = selectors.DefaultSelector()
    halves = HALVES + [HEALTH_HALF] if health else HALVES
    target = {"socks": socks_proxy, "http": http_proxy, "health": health}
    for i in range(n):
        kind, half = halves[i % len(halves)]
        s = connect(target[kind])
        s.sendall(half)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, data=time.monotonic())
    opened = time.monotonic()
    with open(ready_file, "w") as f:
        f.write("held %d\n" % n)
    closed, first, last = 0, None, None
    deadline = opened + timeout + 15
    while closed < n and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                data = b""
            # The SOCKS5 method reply comes first for a whole greeting: read on.
            if data:
                continue
            sel.unregister(s)
            s.close()
            closed += 1
            t = time.monotonic() - key.data  # since this connection was opened
            first = t if first is None else min(first, t)
            last = t if last is None else max(last, t)
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return "closed %d of %d first %.1f last %.1f" % (closed, n, first or -1, last or -1)


def main():
    cmd = sys.argv[1]
    if cmd == "socks-raw":
        print(socks_raw(sys.argv[2], sys.argv[3]))
    elif cmd == "http-header":
        print(http_header(sys.argv[2], int(sys.argv[3])))
    elif cmd == "slowloris":
        print(slowloris(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6],
                        sys.argv[7] if len(sys.argv) > 7 else None))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
