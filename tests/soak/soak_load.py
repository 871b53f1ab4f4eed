#!/usr/bin/env python3
# The load of the soak suite (soak_test.sh): servers at the tunnel's ends, and clients
# that move checksummed streams and time small requests, each writing one JSON line per
# event for soak_report.py. Python's stdlib only; every socket has a timeout.
#
#   soak_load.py server TCP_PORT UDP_PORT EVENTS
#       TCP on [::]:TCP_PORT (IPv4 too); each connection starts with one line:
#         "down SEED BYTES RATE PATH"  sends stream SEED cut at BYTES, paced at RATE B/s
#         "up SEED BYTES PATH"         reads to EOF, comparing every byte with stream SEED
#                                      as it arrives; answers "BYTES SHA256 ok|bad"
#         "echo"                       echoes until EOF
#         "GET /get/SEED/LEN HTTP/1.1" (a request through an HTTP proxy) answers LEN bytes
#                                      of stream SEED and closes
#       and UDP echo on [::]:UDP_PORT. Events: a gap over STALL_LOG s in an upload
#       ("stall"), a byte of an upload that differs from its stream ("corrupt").
#   soak_load.py clients CONFIG SECONDS EVENTS
#       runs CONFIG's request paths (one request every "interval" s each) and transfer
#       paths (an upload loop and a download loop each) for SECONDS, then waits for the
#       transfers under way. Events: "req" (start, latency or null, error), "xfer"
#       (result ok, interrupted or corrupt), "stall" (a gap over STALL_LOG s in a
#       download, or from its last byte to its failure).
#
# CONFIG (JSON): {"interval": S, "rate": B/s, "min_bytes": N, "max_bytes": N, "seed": N,
#   "requests":  [{"path", "kind": udp|tcp|socks5|http|get, "host", "port", "proxy"?}],
#   "transfers": [{"path", "kind": tcp|socks5|http, "hosts": [...], "port", "proxy"?}]}
# Streams are proxy_load.py's (tests/netns); every transfer uses its own SEED, so bytes
# that reach the wrong connection are caught as well as altered ones.
import hashlib
import json
import os
import random
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "netns"))
import proxy_load  # noqa: E402  (its stream, line reader and proxy dialer)

STALL_LOG = 0.25      # gaps logged, in seconds; the report applies the bound
XFER_TIMEOUT = 20.0   # a transfer without progress this long fails
REQ_TIMEOUT = 3.0     # a request unanswered this long fails


class Events:
    """One JSON object per line, from any thread, flushed at once."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, **ev):
        line = json.dumps(ev, separators=(",", ":"))
        with self.lock:
            self.f.write(line + "\n")


def stream_bytes(seed, n):
    return b"".join(bytes(b) for b in proxy_load.blocks(seed, n))


class Checker:
    """Compares received bytes with stream SEED as they come; bad is the offset of the
    first byte that differs (or lies past its end), None while all match."""

    def __init__(self, seed, nbytes):
        self.expected = proxy_load.blocks(seed, nbytes)
        self.pending = memoryview(b"")
        self.got = 0
        self.bad = None
        self.sha = hashlib.sha256()

    def feed(self, view):
        self.sha.update(view)
        while view and self.bad is None:
            if not self.pending:
                self.pending = next(self.expected, None)
                if self.pending is None:
                    self.bad = self.got
                    break
            k = min(len(self.pending), len(view))
            if view[:k] != self.pending[:k]:
                self.bad = self.got + next(i for i in range(k) if view[i] != self.pending[i])
                break
            view, self.pending, self.got = view[k:], self.pending[k:], self.got + k


# --- servers ---

def serve_one(c, ev):
    with c:
        c.settimeout(XFER_TIMEOUT)
        try:
            line = proxy_load.recv_line(c, limit=1024)
            words = line.split()
            if words[0] == "down":
                seed, nbytes, rate, path = int(words[1]), int(words[2]), float(words[3]), words[4]
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                due = time.monotonic()
                for b in proxy_load.blocks(seed, nbytes):
                    c.sendall(b)
                    due += len(b) / rate
                    now = time.monotonic()
                    if due > now:
                        time.sleep(due - now)
                    elif now - due > 0.5:
                        due = now  # no burst to catch up after a pause of the path
                c.shutdown(socket.SHUT_WR)
                while c.recv(4096):
                    pass
            elif words[0] == "up":
                seed, nbytes, path = int(words[1]), int(words[2]), words[3]
                check = Checker(seed, nbytes)
                buf = bytearray(1 << 18)
                view = memoryview(buf)
                last = time.time()
                reported = False
                while True:
                    try:
                        n = c.recv_into(buf)
                    except OSError:  # the time from the last byte to the failure is a gap too
                        if time.time() - last > STALL_LOG:
                            ev.write(ev="stall", path=path, dir="up", start=last, end=time.time())
                        raise
                    now = time.time()
                    if now - last > STALL_LOG:
                        ev.write(ev="stall", path=path, dir="up", start=last, end=now)
                    last = now
                    if n == 0:
                        break
                    check.feed(view[:n])
                    if check.bad is not None and not reported:
                        ev.write(ev="corrupt", path=path, dir="up", seed=seed, offset=check.bad, at=now)
                        reported = True
                total = check.got if check.bad is None else -1
                ok = check.bad is None and check.got == nbytes
                c.sendall(f"{total} {check.sha.hexdigest()} {'ok' if ok else 'bad'}\n".encode())
            elif words[0] == "echo":
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    c.sendall(d)
            elif words[0] == "GET":
                _, _, seed, length = words[1].split("/")
                while proxy_load.recv_line(c, limit=8192):  # the header, to its blank line
                    pass
                body = stream_bytes(int(seed), int(length))
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        except (OSError, EOFError, ValueError, IndexError, StopIteration):
            pass  # the client sees what went wrong at its end


def udp_echo(port):
    u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    u.bind(("::", port))
    while True:
        m, a = u.recvfrom(2048)
        u.sendto(m, a)


def server(tcp_port, udp_port, events):
    ev = Events(events)
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    ls.bind(("::", tcp_port))
    ls.listen(1024)
    threading.Thread(target=udp_echo, args=(udp_port,), daemon=True).start()
    print("listening", file=sys.stderr, flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve_one, args=(c, ev), daemon=True).start()


# --- clients ---

def connect(kind, host, port, proxy, timeout):
    if kind in ("socks5", "http"):
        return proxy_load.dial(kind, proxy, host, port, timeout)
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request_once(r, state):
    """One request on path r; raises on a wrong or missing answer."""
    payload = os.urandom(16).hex().encode()
    if r["kind"] == "udp":
        u = state.get("udp")
        if u is None:
            fam = socket.AF_INET6 if ":" in r["host"] else socket.AF_INET
            u = state["udp"] = socket.socket(fam, socket.SOCK_DGRAM)
        state["seq"] = state.get("seq", 0) + 1
        msg = b"%d " % state["seq"] + payload
        u.sendto(msg, (r["host"], r["port"]))
        deadline = time.monotonic() + REQ_TIMEOUT
        while True:  # late answers to earlier requests are skipped
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer")
            u.settimeout(left)
            try:
                d, _ = u.recvfrom(2048)
            except ConnectionRefusedError:
                continue
            if d == msg:
                return
    if r["kind"] == "get":
        target = f"{r['host']}:{r['port']}"
        n = 1000 + random.randrange(3000)
        seed = random.randrange(1 << 30)
        phost, pport = r["proxy"].rsplit(":", 1)
        with connect("tcp", phost, int(pport), None, REQ_TIMEOUT) as s:
            s.sendall(f"GET http://{target}/get/{seed}/{n} HTTP/1.1\r\nHost: {target}\r\n"
                      "Connection: close\r\n\r\n".encode())
            status = proxy_load.recv_line(s, limit=8192)
            if status.split()[1:2] != ["200"]:
                raise OSError(f"status '{status}'")
            length = None
            while True:
                h = proxy_load.recv_line(s, limit=8192)
                if not h:
                    break
                if h.lower().startswith("content-length:"):
                    length = int(h.split(":", 1)[1])
            if length != n:
                raise OSError(f"Content-Length {length}, expected {n}")
            if proxy_load.recvn(s, n) != stream_bytes(seed, n):
                raise ValueError("GET body differs from its stream")
        return
    with connect(r["kind"], r["host"], r["port"], r.get("proxy"), REQ_TIMEOUT) as s:
        s.sendall(b"echo\n" + payload)
        if proxy_load.recvn(s, len(payload)) != payload:
            raise ValueError("echo differs")


def request_loop(r, interval, deadline, ev):
    state = {}
    due = time.monotonic()
    while time.time() < deadline:
        t = time.time()
        try:
            request_once(r, state)
            ev.write(ev="req", path=r["path"], kind=r["kind"], start=t, lat=time.time() - t)
        except (OSError, EOFError, ValueError) as e:  # socket.timeout is an OSError
            ev.write(ev="req", path=r["path"], kind=r["kind"], start=t, lat=None,
                     err=f"{e.__class__.__name__}: {e}"[:200])
        due += interval
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        else:
            due = now


class Progress:
    """The gaps between the moments a transfer moved bytes."""

    def __init__(self, ev, path, direction):
        self.ev, self.path, self.dir = ev, path, direction
        self.last = time.time()
        self.maxgap = 0.0

    def tick(self):
        now = time.time()
        gap = now - self.last
        if gap > STALL_LOG:
            self.ev.write(ev="stall", path=self.path, dir=self.dir, start=self.last, end=now)
        self.maxgap = max(self.maxgap, gap)
        self.last = now


def download(t, host, seed, nbytes, rate, ev):
    with connect(t["kind"], host, t["port"], t.get("proxy"), XFER_TIMEOUT) as s:
        s.sendall(f"down {seed} {nbytes} {rate} {t['path']}\n".encode())
        check, prog = Checker(seed, nbytes), Progress(ev, t["path"], "down")
        buf = bytearray(1 << 18)
        view = memoryview(buf)
        try:
            while True:
                n = s.recv_into(buf)
                prog.tick()
                if n == 0:
                    break
                check.feed(view[:n])
                if check.bad is not None:
                    return "corrupt", f"byte {check.bad} differs from the stream", check.got, prog
        except OSError:
            prog.tick()  # the time from the last byte to the failure is a gap too
            raise
    if check.got != nbytes:
        return "interrupted", f"closed after {check.got} of {nbytes} bytes", check.got, prog
    if check.sha.hexdigest() != proxy_load.digest_of(seed, nbytes):
        return "corrupt", "SHA-256 differs", check.got, prog
    return "ok", "", check.got, prog


def upload(t, host, seed, nbytes, rate, ev):
    sha = hashlib.sha256()  # an upload's gaps are the server's to see: it logs them
    with connect(t["kind"], host, t["port"], t.get("proxy"), XFER_TIMEOUT) as s:
        s.sendall(f"up {seed} {nbytes} {t['path']}\n".encode())
        due = time.monotonic()
        sent = 0
        for b in proxy_load.blocks(seed, nbytes):
            sha.update(b)
            s.sendall(b)
            sent += len(b)
            due += len(b) / rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            elif now - due > 0.5:
                due = now
        s.shutdown(socket.SHUT_WR)
        try:
            answer = proxy_load.recv_line(s)
        except EOFError:
            return "interrupted", "closed before the server's answer", sent, None
    # Any other answer is a completed upload with other bytes: the client sent them all,
    # and the server saw its end of the stream (a truncation passed off as EOF, too).
    want = f"{nbytes} {sha.hexdigest()} ok"
    if answer == want:
        return "ok", "", nbytes, None
    return "corrupt", f"the server read '{answer}', sent '{want}'", nbytes, None


def transfer_loop(t, direction, cfg, deadline, ev, rnd):
    n = 0
    while time.time() < deadline:
        n += 1
        host = t["hosts"][n % len(t["hosts"])]
        seed = rnd.randrange(1 << 40)
        nbytes = rnd.randrange(cfg["min_bytes"], cfg["max_bytes"])
        start = time.time()
        fn = upload if direction == "up" else download
        try:
            result, why, moved, prog = fn(t, host, seed, nbytes, cfg["rate"], ev)
            maxgap = prog.maxgap if prog else None
        except (OSError, EOFError, ValueError) as e:
            result, why, moved, maxgap = "interrupted", f"{e.__class__.__name__}: {e}"[:200], None, None
        ev.write(ev="xfer", path=t["path"], dir=direction, host=host, start=start, end=time.time(),
                 bytes=nbytes, moved=moved, result=result, err=why, maxgap=maxgap)
        time.sleep(0.5 if result != "ok" else rnd.random() * 0.3)


def clients(config, seconds, events):
    with open(config) as f:
        cfg = json.load(f)
    ev = Events(events)
    deadline = time.time() + seconds
    rnd = random.Random(cfg["seed"])
    threads = [threading.Thread(target=request_loop, args=(r, cfg["interval"], deadline, ev))
               for r in cfg["requests"]]
    for t in cfg["transfers"]:
        for d in ("up", "down"):
            threads.append(threading.Thread(target=transfer_loop,
                                            args=(t, d, cfg, deadline, ev, random.Random(rnd.random()))))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return 0


def main():
    a = sys.argv[1:]
    if len(a) == 4 and a[0] == "server":
        server(int(a[1]), int(a[2]), a[3])
    elif len(a) == 4 and a[0] == "clients":
        return clients(a[1], float(a[2]), a[3])
    else:
        print("usage: soak_load.py server TCP_PORT UDP_PORT EVENTS | clients CONFIG SECONDS EVENTS",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
