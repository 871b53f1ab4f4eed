#!/usr/bin/env python3
# Many transfers at once through wg-netstack's SOCKS5 or HTTP CONNECT proxy, each checked
# by length and SHA-256, and connections held across an outage of the peer
# (tests/netns/wg_netstack_stress_test.sh). Python's stdlib only, one thread per
# connection; every socket has a timeout, so nothing waits forever.
#
#   proxy_load.py server ADDR PORT
#       serves any number of connections; each starts with one line:
#         "down SEED BYTES"  the server sends BYTES bytes of stream SEED, then closes
#         "up SEED BYTES"    the server reads to EOF, answers "BYTES SHA256" of what it read
#         "echo"             the server echoes until EOF
#   proxy_load.py load socks5|http PROXY HOST PORT N BYTES
#       N uploads and N downloads of BYTES bytes at once (streams 1..2N, so bytes that
#       reach the wrong connection are caught too); prints
#         load OK FAILED SECONDS MBIT/S        (MBIT/S: all bytes moved, both ways)
#       and each failure on stderr; exits 1 unless all 2N passed.
#   proxy_load.py outage socks5|http PROXY HOST PORT N READY_FILE WAIT
#       opens N connections, a third each idle (proved by one echo), uploading and
#       downloading endless streams (proved by their first MiB: an upload's written, a
#       download's received and equal to the stream). Then writes "open N" (or "open K
#       FAILED" if some failed) to READY_FILE and waits, never closing one itself and
#       sending nothing more on the idle ones, until every connection has ended or WAIT
#       seconds have passed; prints
#         ended RESET EOF OTHER OPEN first FIRST last LAST
#       RESET: ended by a reset (or EPIPE); EOF: by an orderly close, which for these
#       endless streams and held echoes means a silent truncation; OTHER: anything else
#       (a corrupt byte, a timeout of the socket); OPEN: still open after WAIT. FIRST and
#       LAST: the wall-clock times (Unix seconds) of the first and last end, "-" if none.
#
# The streams: 64 KiB blocks at pseudo-random offsets (random.Random(SEED)) of one 1 MiB
# pool (random.Random(POOL_SEED)), the same in every process: cheap enough for gigabytes on
# two cores (random.randbytes alone makes 270 MB/s here), and a different stream per SEED.
import hashlib
import ipaddress
import random
import socket
import struct
import sys
import threading
import time

BLOCK = 64 * 1024
POOL_SEED = 0x77676E6574
POOL = memoryview(random.Random(POOL_SEED).randbytes((1 << 20) + BLOCK))
IDLE = 30.0          # seconds a socket may stay silent before its transfer fails
ENDLESS = 1 << 50    # BYTES of the outage's streams
PROOF = 1 << 20      # bytes that prove an outage stream flows


def blocks(seed, nbytes):
    """The stream SEED, cut at nbytes, as memoryview blocks of at most BLOCK bytes."""
    r = random.Random(seed)
    left = nbytes
    while left > 0:
        off = r.randrange(len(POOL) - BLOCK)
        n = min(BLOCK, left)
        yield POOL[off:off + n]
        left -= n


def digest_of(seed, nbytes):
    h = hashlib.sha256()
    for b in blocks(seed, nbytes):
        h.update(b)
    return h.hexdigest()


def recv_line(s, limit=256):
    line = b""
    while not line.endswith(b"\n"):
        c = s.recv(1)
        if not c:
            raise EOFError("closed before the end of a line")
        line += c
        if len(line) > limit:
            raise ValueError("line too long")
    return line.decode().strip()


# --- the server in the tunnel ---

def serve_one(c):
    with c:
        c.settimeout(IDLE)
        try:
            words = recv_line(c).split()
            if words[0] == "down":
                for b in blocks(int(words[1]), int(words[2])):
                    c.sendall(b)
                c.shutdown(socket.SHUT_WR)
                while c.recv(4096):  # the client closes once it has everything
                    pass
            elif words[0] == "up":
                h, total, buf = hashlib.sha256(), 0, bytearray(1 << 20)
                view = memoryview(buf)
                while True:
                    n = c.recv_into(buf)
                    if n == 0:
                        break
                    h.update(view[:n])
                    total += n
                c.sendall(f"{total} {h.hexdigest()}\n".encode())
            elif words[0] == "echo":
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    c.sendall(d)
        except (OSError, EOFError, ValueError, IndexError):
            pass  # the client sees what went wrong at its end


def server(addr, port):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    ls = socket.socket(family, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1024)
    print("listening", file=sys.stderr, flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve_one, args=(c,), daemon=True).start()


# --- clients through the proxy ---

def recvn(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise EOFError("proxy closed during the handshake")
        b += d
    return b


def dial(kind, proxy, host, port, timeout=IDLE):
    """A connection to HOST:PORT through the proxy, after its reply (SOCKS5 or HTTP 200).
    HOST is an IP address or a name for the proxy to resolve; every socket operation
    waits at most TIMEOUT seconds."""
    phost, pport = proxy.rsplit(":", 1)
    s = socket.create_connection((phost.strip("[]"), int(pport)), timeout=timeout)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if kind == "socks5":
            s.sendall(b"\x05\x01\x00")
            if recvn(s, 2) != b"\x05\x00":
                raise OSError("SOCKS5 method refused")
            try:
                ip = ipaddress.ip_address(host)
                target = (b"\x01" if ip.version == 4 else b"\x04") + ip.packed
            except ValueError:  # a name: ATYP 3, resolved by the proxy
                target = b"\x03" + bytes([len(host)]) + host.encode()
            s.sendall(b"\x05\x01\x00" + target + struct.pack(">H", port))
            head = recvn(s, 4)
            if head[1] != 0:
                raise OSError(f"SOCKS5 reply {head[1]}")
            recvn(s, {1: 4, 4: 16}.get(head[3], 0) + 2)
        else:
            target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = b""
            while not head.endswith(b"\r\n\r\n"):  # byte by byte: nothing of the tunnel is read
                head += recvn(s, 1)
                if len(head) > 16384:
                    raise OSError("HTTP proxy reply header too long")
            status = head.split(b" ", 2)[1]
            if status != b"200":
                raise OSError(f"HTTP proxy answered {status.decode(errors='replace')}")
        return s
    except BaseException:
        s.close()
        raise


def upload(kind, proxy, host, port, seed, nbytes):
    """None if the server read exactly the stream sent, else why not."""
    with dial(kind, proxy, host, port) as s:
        s.sendall(f"up {seed} {nbytes}\n".encode())
        h = hashlib.sha256()
        for b in blocks(seed, nbytes):
            h.update(b)
            s.sendall(b)
        s.shutdown(socket.SHUT_WR)
        answer = recv_line(s)
    want = f"{nbytes} {h.hexdigest()}"
    return None if answer == want else f"the server read '{answer}', sent '{want}'"


def download(kind, proxy, host, port, seed, nbytes):
    """None if exactly the stream arrived, else why not."""
    with dial(kind, proxy, host, port) as s:
        s.sendall(f"down {seed} {nbytes}\n".encode())
        h, total, buf = hashlib.sha256(), 0, bytearray(1 << 20)
        view = memoryview(buf)
        while True:
            n = s.recv_into(buf)
            if n == 0:
                break
            h.update(view[:n])
            total += n
    got, want = f"{total} {h.hexdigest()}", f"{nbytes} {digest_of(seed, nbytes)}"
    return None if got == want else f"received '{got}', the stream is '{want}'"


def load(kind, proxy, host, port, n, nbytes):
    results = {}

    def run(name, fn, seed):
        try:
            results[name] = fn(kind, proxy, host, port, seed, nbytes)
        except (OSError, EOFError, ValueError) as e:
            results[name] = f"{e.__class__.__name__}: {e}"

    threads = [threading.Thread(target=run, args=(f"up {i}", upload, i)) for i in range(1, n + 1)]
    threads += [threading.Thread(target=run, args=(f"down {i}", download, n + i)) for i in range(1, n + 1)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    failed = {k: v for k, v in results.items() if v is not None}
    for k, v in sorted(failed.items()):
        print(f"failed: {kind} {k}: {v}", file=sys.stderr, flush=True)
    ok = len(results) - len(failed)
    print(f"load {ok} {len(failed)} {secs:.1f} {2 * n * nbytes * 8 / secs / 1e6:.0f}", flush=True)
    return 0 if not failed and ok == 2 * n else 1


class Held:
    """One connection of the outage: how and when it ended."""

    def __init__(self, kind, i):
        self.kind, self.i = kind, i
        self.proved = threading.Event()
        self.failed = None   # why it could not be opened or proved
        self.end = None      # "reset", "eof" or "other: ..."
        self.when = None

    def ended(self, how):
        self.when = time.time()
        self.end = how


def hold_one(h, kind, proxy, host, port, wait):
    try:
        s = dial(kind, proxy, host, port)
    except (OSError, EOFError, ValueError) as e:
        h.failed = f"{e.__class__.__name__}: {e}"
        h.proved.set()
        return
    seed = 1000 + h.i
    s.settimeout(wait)  # from here on, only the proxy or the peer may end it
    try:
        with s:
            if h.kind == "idle":
                s.sendall(b"echo\n" + b"%016d" % h.i)
                if recvn(s, 16) != b"%016d" % h.i:
                    raise ValueError("echo differs")
                h.proved.set()
                d = s.recv(1)
                h.ended("eof" if not d else "other: bytes after the echo")
            elif h.kind == "up":
                s.sendall(f"up {seed} {ENDLESS}\n".encode())
                sent = 0
                for b in blocks(seed, ENDLESS):
                    s.sendall(b)
                    sent += len(b)
                    if sent >= PROOF:
                        h.proved.set()
            else:
                s.sendall(f"down {seed} {ENDLESS}\n".encode())
                expected = blocks(seed, ENDLESS)
                pending = memoryview(b"")
                got = 0
                while True:
                    d = s.recv(1 << 16)
                    if not d:
                        h.ended("eof")
                        break
                    view = memoryview(d)
                    while view:
                        if not pending:
                            pending = next(expected)
                        k = min(len(pending), len(view))
                        if view[:k] != pending[:k]:
                            raise ValueError(f"byte {got} differs from the stream")
                        view, pending, got = view[k:], pending[k:], got + k
                    if got >= PROOF:
                        h.proved.set()
    except (ConnectionResetError, BrokenPipeError):
        h.ended("reset")
    except (OSError, EOFError, ValueError) as e:  # socket.timeout is an OSError
        h.ended(f"other: {e.__class__.__name__}: {e}")
    if not h.proved.is_set():
        h.failed = f"ended before it was proved ({h.end})"
        h.proved.set()


def outage(kind, proxy, host, port, n, ready_file, wait):
    kinds = ("idle", "up", "down")
    held = [Held(kinds[i % 3], i) for i in range(n)]
    threads = [threading.Thread(target=hold_one, args=(h, kind, proxy, host, port, wait), daemon=True)
               for h in held]
    for t in threads:
        t.start()
    for h in held:
        h.proved.wait(IDLE + 5)
    failed = [h for h in held if h.failed or not h.proved.is_set()]
    for h in failed:
        print(f"failed to open: {h.kind} {h.i}: {h.failed or 'not proved in time'}", file=sys.stderr, flush=True)
    with open(ready_file, "w") as f:
        f.write(f"open {n - len(failed)}{' FAILED' if failed else ''}\n")
    deadline = time.monotonic() + wait
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    ends = [h for h in held if h.end is not None]
    reset = sum(h.end == "reset" for h in ends)
    eof = sum(h.end == "eof" for h in ends)
    for h in ends:
        if h.end not in ("reset", "eof"):
            print(f"ended: {h.kind} {h.i}: {h.end}", file=sys.stderr, flush=True)
    for h in held:
        if h.end is None:
            print(f"still open: {h.kind} {h.i}", file=sys.stderr, flush=True)
    times = sorted(h.when for h in ends)
    first = f"{times[0]:.2f}" if times else "-"
    last = f"{times[-1]:.2f}" if times else "-"
    print(f"ended {reset} {eof} {len(ends) - reset - eof} {n - len(ends)} first {first} last {last}", flush=True)
    return 0


def main():
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "server":
        server(a[1], int(a[2]))
    elif len(a) == 7 and a[0] == "load" and a[1] in ("socks5", "http"):
        return load(a[1], a[2], a[3], int(a[4]), int(a[5]), int(a[6]))
    elif len(a) == 8 and a[0] == "outage" and a[1] in ("socks5", "http"):
        return outage(a[1], a[2], a[3], int(a[4]), int(a[5]), a[6], float(a[7]))
    else:
        print("usage: proxy_load.py server ADDR PORT | load socks5|http PROXY HOST PORT N BYTES | "
              "outage socks5|http PROXY HOST PORT N READY_FILE WAIT (see the head of the file)",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
