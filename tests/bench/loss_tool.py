#!/usr/bin/env python3
# Traffic ends for the loss harness (netns_loss.sh) and the loss test
# (tests/netns/wg_netstack_loss_test.sh): TCP clients that connect directly or through a
# SOCKS5 proxy (RFC 1928, no authentication), and the servers they talk to. Python's
# standard library only.
#
# Goodput, counted at the receiver (one JSON line on stdout):
#   sink PORT [--bind ADDR] [--max-seconds N]       receives; counts bytes per second
#   source PORT [--bind ADDR] [--max-seconds N]     sends as fast as it can
#   socks-upload SOCKS TARGET SECONDS STREAMS       STREAMS connections to a sink
#   socks-download SOCKS TARGET SECONDS STREAMS     STREAMS connections to a source; counts
#   upload TARGET SECONDS STREAMS                   the same without a proxy
#   download TARGET SECONDS STREAMS
# SOCKS and TARGET are HOST:PORT ([V6]:PORT for IPv6). A measurement: the client opens
# its STREAMS connections, and once all are up (a barrier) takes t0 = CLOCK_MONOTONIC,
# the same clock in every network namespace, and sends a 24-byte header (MAGIC, t0,
# SECONDS, STREAMS) on each. The receiver (the sink for an upload, the client for a
# download) counts the data bytes that arrive in [t0, t0 + SECONDS) in 1-second
# intervals; an interval with none is a stalled second. Bytes a proxy still delivers
# after the window are reported as "late" and not counted. The sender stops at
# t0 + SECONDS (upload) or when the client closes (download).
#
# Integrity, a deterministic pseudo-random stream (random.Random(SEED).randbytes in
# 1 MiB chunks, as tests/netns/stream.py), one line "BYTES SHA256" on stdout:
#   digest BYTES SEED                               the stream's digest, no network
#   recv-hash PORT [--bind ADDR]                    accepts one connection, hashes to EOF
#   serve-stream PORT BYTES SEED [--bind ADDR] [--fault short|corrupt]
#                                                   accepts one connection, sends the stream
#   socks-send SOCKS TARGET BYTES SEED [--fault short|corrupt]
#   socks-recv SOCKS TARGET                         hashes to EOF
# with [--deadline S] (whole transfer, default 600) and [--idle S] (no progress, default
# 180): past either, or on SIGTERM, the reason and the bytes so far (for a sender: the
# bytes its socket took) go to stderr, exit status 3.
# --fault makes the sender send one byte too few (short) or flip one bit in the middle
# (corrupt) while printing the digest of the intact stream: a check that the test
# catches a damaged transfer. Progress goes to stderr every 30 s.
import argparse
import hashlib
import ipaddress
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time

MAGIC = b"WGNL"
HEADER = struct.Struct("<4sddI")  # magic, t0 (monotonic s), seconds, streams: 24 bytes
BUF = 256 * 1024                  # per send / recv_into
CHUNK = 1 << 20                   # stream chunk of the integrity modes
SETUP_TIMEOUT = 40.0              # connect + SOCKS handshake of every stream
PROGRESS_EVERY = 30.0


class Timeout(Exception):
    pass


def now():
    return time.monotonic()


def split_hostport(s):
    host, _, port = s.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit():
        raise ValueError(f"not HOST:PORT: {s}")
    return host, int(port)


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def recvn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("connection closed during the handshake")
        b += c
    return b


def socks_address(host, port):
    try:
        ip = ipaddress.ip_address(host)
        return (b"\x01" if ip.version == 4 else b"\x04") + ip.packed + struct.pack(">H", port)
    except ValueError:
        return b"\x03" + bytes([len(host)]) + host.encode() + struct.pack(">H", port)


def connect(socks, target, timeout):
    """A connected TCP socket to TARGET, through the SOCKS5 proxy SOCKS if given."""
    if socks is None:
        s = socket.create_connection(split_hostport(target), timeout=timeout)
        # LOSS_TOOL_CC=cubic: this connection's congestion control (the harness's
        # like-for-like reference; a namespace may only pick the "allowed" ones, a
        # socket with CAP_NET_ADMIN any available one)
        cc = os.environ.get("LOSS_TOOL_CC")
        if cc:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    else:
        s = socket.create_connection(split_hostport(socks), timeout=timeout)
        try:
            s.sendall(b"\x05\x01\x00")
            if recvn(s, 2) != b"\x05\x00":
                raise ConnectionError("SOCKS5: no-authentication method refused")
            s.sendall(b"\x05\x01\x00" + socks_address(*split_hostport(target)))
            ver, rep, _, atyp = recvn(s, 4)
            if ver != 5 or rep != 0:
                raise ConnectionError(f"SOCKS5 CONNECT {target}: reply {rep}")
            n = {1: 4, 4: 16}.get(atyp)
            recvn(s, (n if n is not None else recvn(s, 1)[0]) + 2)
        except BaseException:
            s.close()
            raise
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def listener(bind, port):
    ls = socket.socket(family_of(bind), socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((bind, port))
    ls.listen(64)
    print("listening", file=sys.stderr, flush=True)
    return ls


def emit(obj):
    print(json.dumps(obj), flush=True)


class Window:
    """Data bytes per 1-second interval of [t0, t0 + seconds); later ones are late."""

    def __init__(self, t0, seconds):
        self.t0, self.seconds = t0, seconds
        self.per_second = [0] * int(seconds)
        self.late = 0

    def add(self, t, n):
        i = int(t - self.t0)
        if i < 0:
            i = 0
        if i < len(self.per_second):
            self.per_second[i] += n
        else:
            self.late += n

    def report(self, mode, **extra):
        total = sum(self.per_second)
        return dict(mode=mode, bytes=total, seconds=self.seconds,
                    gbps=total * 8 / self.seconds / 1e9, per_second=self.per_second,
                    stalled=sum(1 for b in self.per_second if b == 0), late=self.late, **extra)


# --- clients (goodput) ---

def open_streams(socks, target, streams):
    """Opens all streams in parallel (a lost SYN costs one stream seconds, not all)."""
    socks_list, errors = [None] * streams, []

    def one(i):
        try:
            socks_list[i] = connect(socks, target, SETUP_TIMEOUT)
        except Exception as e:  # noqa: BLE001 (reported)
            errors.append(f"stream {i}: {type(e).__name__}: {e}")

    t = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for x in t:
        x.start()
    for x in t:
        x.join()
    if errors:
        for s in socks_list:
            if s:
                s.close()
        raise ConnectionError("; ".join(errors))
    return socks_list


def client_upload(socks, target, seconds, streams, mode):
    t_setup = now()
    conns = open_streams(socks, target, streams)
    t0 = now()
    setup = t0 - t_setup
    end = t0 + seconds
    header = HEADER.pack(MAGIC, t0, seconds, streams)
    sent = [0] * streams
    errors = []
    data = memoryview(bytearray(BUF))

    def pump(i, s):
        try:
            s.settimeout(SETUP_TIMEOUT)
            s.sendall(header)
            while True:
                left = end - now()
                if left <= 0:
                    break
                s.settimeout(left)
                try:
                    sent[i] += s.send(data)
                except socket.timeout:
                    break
        except OSError as e:
            errors.append(f"stream {i}: {e}")

    t = [threading.Thread(target=pump, args=(i, s)) for i, s in enumerate(conns)]
    for x in t:
        x.start()
    for x in t:
        x.join()
    for s in conns:
        s.close()
    emit(dict(mode=mode, sent=sum(sent), t0=t0, setup_seconds=round(setup, 3),
              streams=streams, errors=errors))


def client_download(socks, target, seconds, streams, mode):
    t_setup = now()
    conns = open_streams(socks, target, streams)
    t0 = now()
    setup = t0 - t_setup
    win = Window(t0, seconds)
    header = HEADER.pack(MAGIC, t0, seconds, streams)
    sel = selectors.DefaultSelector()
    for s in conns:
        s.settimeout(SETUP_TIMEOUT)
        s.sendall(header)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    buf = bytearray(BUF)
    end = t0 + seconds
    errors, open_ = [], len(conns)
    while open_ and now() < end:
        for key, _ in sel.select(timeout=max(0.0, end - now())):
            s = key.fileobj
            try:
                n = s.recv_into(buf)
            except BlockingIOError:
                continue
            except OSError as e:
                errors.append(str(e))
                n = 0
            if n == 0:
                sel.unregister(s)
                open_ -= 1
                continue
            win.add(now(), n)
    for s in conns:
        s.close()
    emit(win.report(mode, t0=t0, setup_seconds=round(setup, 3), streams=streams,
                    closed_early=len(conns) - open_, errors=errors))


# --- servers (goodput) ---

def read_header(s, deadline):
    b = b""
    while len(b) < HEADER.size:
        s.settimeout(max(0.1, deadline - now()))
        c = s.recv(HEADER.size - len(b))
        if not c:
            raise EOFError("closed before the header")
        b += c
    magic, t0, seconds, streams = HEADER.unpack(b)
    if magic != MAGIC:
        raise ValueError("bad header")
    return t0, seconds, streams


def sink(bind, port, max_seconds):
    ls = listener(bind, port)
    ls.setblocking(False)
    hard = now() + max_seconds
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    buf = bytearray(BUF)
    win, streams, conns, errors = None, 0, 0, []
    pending = {}  # socket -> header bytes so far
    while True:
        t = now()
        if t >= hard:
            errors.append(f"hard time limit of {max_seconds} s")
            break
        if win is not None and t >= win.t0 + win.seconds + 0.5:
            break
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            if s is ls:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, "conn")
                pending[c] = b""
                conns += 1
                continue
            try:
                n = s.recv_into(buf)
            except BlockingIOError:
                continue
            except OSError as e:
                errors.append(str(e))
                n = 0
            if n == 0:
                sel.unregister(s)
                s.close()
                pending.pop(s, None)
                continue
            t = now()
            if s in pending:  # the header first, then data
                head = pending[s] + bytes(buf[:n])
                if len(head) < HEADER.size:
                    pending[s] = head
                    continue
                del pending[s]
                magic, t0, seconds, streams = HEADER.unpack(head[:HEADER.size])
                if magic != MAGIC:
                    errors.append("bad header")
                    sel.unregister(s)
                    s.close()
                    continue
                if win is None:
                    win = Window(t0, seconds)
                n = len(head) - HEADER.size
            if n:
                win.add(t, n)
    if win is None:
        emit(dict(mode="sink", bytes=0, error="no measurement arrived", connections=conns,
                  errors=errors))
        return 1
    emit(win.report("sink", t0=win.t0, streams=streams, connections=conns, errors=errors))
    return 0


def source(bind, port, max_seconds):
    ls = listener(bind, port)
    hard = now() + max_seconds
    threads, state = [], dict(sent=0, end=None, errors=[], streams=0)
    lock = threading.Lock()
    data = memoryview(bytearray(BUF))

    def serve(c):
        n = 0
        try:
            t0, seconds, streams = read_header(c, hard)
            end = min(hard, t0 + seconds + 2.0)  # the client closes at t0 + seconds
            with lock:
                state["end"], state["streams"] = end, streams
            while now() < end:
                c.settimeout(max(0.05, end - now()))
                try:
                    n += c.send(data)
                except socket.timeout:
                    continue
        except (OSError, EOFError, ValueError) as e:
            # The client closing at the end of its window resets the connection.
            with lock:
                state["errors"].append(type(e).__name__)
        finally:
            c.close()
            with lock:
                state["sent"] += n

    ls.settimeout(0.2)
    while now() < hard:
        with lock:
            end = state["end"]
        if end is not None and now() >= end and not any(t.is_alive() for t in threads):
            break
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        th = threading.Thread(target=serve, args=(c,), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(timeout=max(0.0, hard - now()))
    emit(dict(mode="source", sent=state["sent"], connections=len(threads),
              streams=state["streams"], errors=sorted(set(state["errors"]))))
    return 0


# --- integrity ---

def stream_chunks(nbytes, seed):
    rnd = random.Random(seed)
    left = nbytes
    while left > 0:
        chunk = rnd.randbytes(min(CHUNK, left))
        left -= len(chunk)
        yield chunk


class Progress:
    def __init__(self, what, deadline, idle, total=None):
        self.what, self.total = what, total
        self.start = now()
        self.deadline, self.idle = self.start + deadline, idle
        self.done, self.last_change, self.next_print = 0, self.start, self.start + PROGRESS_EVERY

    def add(self, n):
        t = now()
        self.done += n
        if n:
            self.last_change = t
        if t >= self.next_print:
            self.next_print = t + PROGRESS_EVERY
            print(f"{self.what}: {self.done} bytes after {t - self.start:.0f} s", file=sys.stderr,
                  flush=True)

    def timeout(self):
        """Seconds to wait for the next progress; raises Timeout when none is left."""
        t = now()
        if t >= self.deadline:
            raise Timeout(f"deadline of {self.deadline - self.start:.0f} s")
        if t - self.last_change >= self.idle:
            raise Timeout(f"no progress for {self.idle:.0f} s")
        return max(0.05, min(self.deadline - t, self.last_change + self.idle - t))

    def describe(self):
        of = f" of {self.total}" if self.total is not None else ""
        return f"{self.done}{of} bytes in {now() - self.start:.1f} s"


def send_stream(s, nbytes, seed, fault, prog):
    digest = hashlib.sha256()
    sent = 0
    for chunk in stream_chunks(nbytes, seed):
        digest.update(chunk)
        if fault == "short" and sent + len(chunk) == nbytes:
            chunk = chunk[:-1]
        if fault == "corrupt" and sent <= nbytes // 2 < sent + len(chunk):
            b = bytearray(chunk)
            b[nbytes // 2 - sent] ^= 0x01
            chunk = bytes(b)
        view = memoryview(chunk)
        while view:
            s.settimeout(prog.timeout())
            try:
                n = s.send(view)
            except socket.timeout:
                continue
            view = view[n:]
            prog.add(n)
        sent += len(chunk)
    s.shutdown(socket.SHUT_WR)
    # The receiver closes once it has read everything: wait for that, so that an abort
    # on the way is reported here too.
    while True:
        s.settimeout(prog.timeout())
        try:
            if not s.recv(4096):
                break
        except socket.timeout:
            continue
    return digest.hexdigest()


def recv_stream(s, prog):
    digest = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while True:
        s.settimeout(prog.timeout())
        try:
            n = s.recv_into(buf)
        except socket.timeout:
            continue
        if n == 0:
            break
        digest.update(view[:n])
        prog.add(n)
    return digest.hexdigest()


def accept_one(ls, prog):
    while True:
        ls.settimeout(prog.timeout())
        try:
            c, _ = ls.accept()
            return c
        except socket.timeout:
            continue


def integrity(args):
    mode = args.mode
    total = args.bytes if mode in ("serve-stream", "socks-send") else None
    prog = Progress(mode, args.deadline, args.idle, total)

    def terminated(signum, frame):
        raise Timeout("terminated")

    signal.signal(signal.SIGTERM, terminated)
    try:
        if mode == "serve-stream":
            with listener(args.bind, args.port) as ls:
                c = accept_one(ls, prog)
            with c:
                digest = send_stream(c, args.bytes, args.seed, args.fault, prog)
        elif mode == "recv-hash":
            with listener(args.bind, args.port) as ls:
                c = accept_one(ls, prog)
            with c:
                digest = recv_stream(c, prog)
        elif mode == "socks-send":
            with connect(args.socks, args.target, min(SETUP_TIMEOUT, args.deadline)) as c:
                digest = send_stream(c, args.bytes, args.seed, args.fault, prog)
        else:  # socks-recv
            with connect(args.socks, args.target, min(SETUP_TIMEOUT, args.deadline)) as c:
                digest = recv_stream(c, prog)
    except Timeout as e:
        print(f"{mode}: {e}: {prog.describe()}", file=sys.stderr, flush=True)
        return 3
    except (OSError, EOFError, ConnectionError) as e:
        print(f"{mode}: {type(e).__name__}: {e}: {prog.describe()}", file=sys.stderr, flush=True)
        return 1
    # serve-stream and socks-send print the digest of the stream they were to send.
    done = args.bytes if total is not None else prog.done
    print(done, digest, flush=True)
    print(f"{mode}: done, {prog.describe()}", file=sys.stderr, flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description="traffic ends for the loss harness and test")
    sub = p.add_subparsers(dest="mode", required=True)
    for m in ("sink", "source"):
        q = sub.add_parser(m)
        q.add_argument("port", type=int)
        q.add_argument("--bind", default="0.0.0.0")
        q.add_argument("--max-seconds", type=float, default=120)
    for m in ("socks-upload", "socks-download", "upload", "download"):
        q = sub.add_parser(m)
        if m.startswith("socks-"):
            q.add_argument("socks")
        q.add_argument("target")
        q.add_argument("seconds", type=int)
        q.add_argument("streams", type=int)
    q = sub.add_parser("digest")
    q.add_argument("bytes", type=int)
    q.add_argument("seed", type=int)
    for m in ("recv-hash", "serve-stream", "socks-send", "socks-recv"):
        q = sub.add_parser(m)
        if m.startswith("socks-"):
            q.add_argument("socks")
            q.add_argument("target")
        else:
            q.add_argument("port", type=int)
            q.add_argument("--bind", default="0.0.0.0")
        if m in ("serve-stream", "socks-send"):
            q.add_argument("bytes", type=int)
            q.add_argument("seed", type=int)
        if m in ("serve-stream", "socks-send"):
            q.add_argument("--fault", choices=("short", "corrupt"))
        q.add_argument("--deadline", type=float, default=600)
        q.add_argument("--idle", type=float, default=180)
    a = p.parse_args()

    if a.mode == "sink":
        return sink(a.bind, a.port, a.max_seconds)
    if a.mode == "source":
        return source(a.bind, a.port, a.max_seconds)
    if a.mode in ("socks-upload", "socks-download", "upload", "download"):
        if not (1 <= a.seconds <= 600 and 1 <= a.streams <= 64):
            p.error("SECONDS 1..600, STREAMS 1..64")
        socks = getattr(a, "socks", None)
        try:
            if a.mode.endswith("upload"):
                client_upload(socks, a.target, a.seconds, a.streams, a.mode)
            else:
                client_download(socks, a.target, a.seconds, a.streams, a.mode)
        except (OSError, EOFError, ConnectionError) as e:
            emit(dict(mode=a.mode, bytes=0, error=f"{type(e).__name__}: {e}"))
            return 1
        return 0
    if a.mode == "digest":
        d = hashlib.sha256()
        for chunk in stream_chunks(a.bytes, a.seed):
            d.update(chunk)
        print(a.bytes, d.hexdigest(), flush=True)
        return 0
    return integrity(a)


if __name__ == "__main__":
    sys.exit(main())
