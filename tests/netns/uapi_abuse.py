#!/usr/bin/env python3
"""Hostile clients of a UAPI socket, for wg_tun_uapi_abuse_test.sh.

  uapi_abuse.py requests SOCK [REFERENCE_SOCK]  malformed requests; prints one line per case
                                                  with the reply (and the reference daemon's)
  uapi_abuse.py junk SOCK COUNT SEED            random bytes as requests: each one must end
                                                  with an errno reply or the connection closed
  uapi_abuse.py endless-set SOCK SECONDS        a set=1 that sends a line every 50 ms and
                                                  never its blank line, then hangs up
  uapi_abuse.py idle SOCK COUNT SECONDS         COUNT connections that send nothing, held
                                                  SECONDS (prints "held N" once all connected)
  uapi_abuse.py storm SECONDS THREADS SOCK...   THREADS clients for SECONDS, each sending
                                                  get=1 or a malformed request that changes
                                                  nothing, one after another, to random SOCKs

Every socket operation has a timeout, so a daemon that stops answering fails the case
instead of hanging the suite. Exit status 0 unless a case broke its rule.
"""
import random
import socket
import sys
import threading
import time


def connect(path, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # A blocking connect: with a timeout Python's connect() fails with EAGAIN when the
    # listen backlog is momentarily full instead of waiting for the acceptor.
    s.connect(path)
    s.settimeout(timeout)
    return s


def ask(path, request, half_close=False, timeout=5.0, until_eof=False):
    """Sends request (from a thread: the daemon may answer and hang up before it has read
    it all) and reads until the reply's blank line or EOF (with until_eof, until EOF only:
    a request may hold several, and the daemon's later replies can come after a pause).
    Returns (reply, note)."""
    s = connect(path, timeout)
    note = ""

    def writer():
        nonlocal note
        try:
            for i in range(0, len(request), 65536):
                s.sendall(request[i:i + 65536])
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError as e:  # the daemon hung up first: expected for over-long input
            note = type(e).__name__

    t = threading.Thread(target=writer)
    t.start()
    data = b""
    try:
        while until_eof or not data.endswith(b"\n\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        note = "timeout"
    except OSError as e:
        note = note or type(e).__name__
    t.join(timeout)
    s.close()
    return data, note


PEER = "11" * 32  # a public key no real peer has


def requests(path, reference):
    # (name, request, what wg-tun must answer, must wireguard-go answer the same (None: do
    # not send it there)). Each request is followed by a half-close, as `nc -N` does.
    cases = [
        ("unknown device key", b"set=1\nbogus_key=1\n\n", b"errno=-22\n\n", True),
        ("unknown peer key", f"set=1\npublic_key={PEER}\nbogus=1\n\n".encode(), b"errno=-22\n\n", True),
        ("private key not hex", b"set=1\nprivate_key=" + b"zz" * 32 + b"\n\n", b"errno=-22\n\n", True),
        ("private key too short", b"set=1\nprivate_key=abcd\n\n", b"errno=-22\n\n", True),
        ("public key not hex", b"set=1\npublic_key=" + b"g" * 64 + b"\n\n", b"errno=-22\n\n", True),
        ("preshared key of 63 digits", f"set=1\npublic_key={PEER}\npreshared_key={'a' * 63}\n\n".encode(),
         b"errno=-22\n\n", True),
        ("line without '='", b"set=1\ngarbage\n\n", b"errno=-71\n\n", True),
        ("binary key and value", b"set=1\n" + bytes(range(1, 10)) + bytes(range(11, 256)) + b"=\x00\xff\n\n",
         b"errno=-22\n\n", True),
        # wireguard-go applies what it read (so it is not asked: it would change its port).
        ("a set cut short by EOF", b"set=1\nlisten_port=4444", b"errno=-71\n\n", None),
        ("NUL in a key", b"set=1\nlisten_port\x00=1\n\n", b"errno=-22\n\n", True),
        ("listen port 65536", b"set=1\nlisten_port=65536\n\n", b"errno=-22\n\n", True),
        ("1 MB line in a set", b"set=1\n" + b"a" * (1 << 20) + b"\n\n", b"errno=-5\n\n", True),
        ("1 MB value in a set", b"set=1\nprivate_key=" + b"a" * (1 << 20) + b"\n\n", b"errno=-5\n\n", True),
        ("get with trailing bytes", b"get=1\nX\n", b"errno=-22\n\n", True),
        # wireguard-go hangs up without an answer on these; wg-tun answers, then hangs up.
        ("unknown operation", b"nonsense=1\n\n", b"errno=-22\n\n", False),
        ("1 MB operation line", b"a" * (1 << 20) + b"\n\n", b"errno=-22\n\n", False),
        ("binary operation line", bytes(range(256)) * 4 + b"\n\n", b"errno=-22\n\n", False),
    ]
    ok = True
    for name, request, want, same in cases:
        got, note = ask(path, request, half_close=True)
        line = f"{name}: {got!r}"
        good = got == want
        if reference and same is not None:
            ref, _ = ask(reference, request, half_close=True)
            line += f" (wireguard-go: {ref!r})"
            if same and ref != got:
                good = False
                line += " DIFFERS"
        if note:
            line += f" [{note}]"
        print(("ok   " if good else "BAD  ") + line)
        ok = ok and good
    # The peer the "unknown peer key" case created (as wireguard-go does) goes again.
    for p in [path] + ([reference] if reference else []):
        ask(p, f"set=1\npublic_key={PEER}\nremove=true\n\n".encode())
    return ok


def junk(path, count, seed):
    """Random requests: printable and binary noise, with and without newlines, some after a
    valid operation line. Each one is sent and the write side closed; the daemon must end
    the exchange with an errno=-N reply (N > 0) or by closing, never errno=0, never hang."""
    rnd = random.Random(seed)
    ok = True
    replies = 0
    for i in range(count):
        size = rnd.choice([1, 2, 7, 64, 1000, 4096, 70000])
        body = bytes(rnd.randrange(256) for _ in range(size)) if size < 5000 else rnd.randbytes(size)
        if rnd.random() < 0.5:
            body = body.replace(b"\n", b"")  # a "line" that only EOF ends
        head = rnd.choice([b"", b"", b"set=1\n", b"get=1\n", b"set=1\npublic_key=" + PEER.encode() + b"\n"])
        # Until EOF: a body that starts with a blank line completes a get=1, and a read
        # that stopped at that reply's end would miss the error that follows it.
        got, note = ask(path, head + body, half_close=True, until_eof=True)
        if got:
            replies += 1
        # The last answer must be an error; a body that happens to start with a blank
        # line completes a get=1 first (its dump and errno=0 come before).
        last = got.rsplit(b"errno=", 1)[-1] if got else b""
        if note == "timeout" or (got and (not last.startswith(b"-") or not got.endswith(b"\n\n"))):
            print(f"BAD  junk case {i}: {len(head + body)} bytes -> {got[-60:]!r} [{note}]")
            ok = False
    print(f"junk: {count} requests, {replies} answered with errno=-N, the rest closed")
    ask(path, f"set=1\npublic_key={PEER}\nremove=true\n\n".encode())
    return ok


def endless_set(path, seconds):
    s = connect(path)
    s.sendall(b"set=1\nlisten_port=4444\n")
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        n += 1
        s.sendall(f"public_key={n:064x}\nallowed_ip=198.19.1.{n % 250}/32\n".encode())
        time.sleep(0.05)
    s.close()  # EOF without the blank line: nothing of it may be applied
    print(f"endless set: {n} peers sent, no blank line")
    return True


def idle(path, count, seconds):
    socks = []
    for _ in range(count):
        socks.append(connect(path))
    print(f"held {len(socks)}", flush=True)
    time.sleep(seconds)
    # How many the daemon closed to make room (it reads EOF on those).
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    print(f"idle: {count} connections, {closed} closed by the daemon")
    return True


# Malformed requests that are refused at their first line, so nothing of them is applied.
STORM_BAD = [
    b"set=1\nbogus_key=1\n\n",
    b"set=1\ngarbage\n\n",
    b"get=1\nX\n",
    b"nonsense=1\n\n",
    b"a" * 65536 + b"\n\n",
    bytes(range(1, 10)) + bytes(range(11, 61)) + b"\n\n",
]


def storm(seconds, threads, paths):
    """A get=1 must end with errno=0, a malformed request with errno=-N or the connection
    closed, each within 5 s."""
    lock = threading.Lock()
    counts = {"get": 0, "bad": 0, "wrong": 0, "slowest": 0.0}
    end = time.time() + seconds

    def client(seed):
        rnd = random.Random(seed)
        while time.time() < end:
            path = rnd.choice(paths)
            get = rnd.random() < 0.5
            t = time.time()
            try:
                got, note = ask(path, b"get=1\n\n" if get else rnd.choice(STORM_BAD), half_close=not get)
            except OSError as e:
                got, note = b"", type(e).__name__
            took = time.time() - t
            if get:
                good = got.endswith(b"\nerrno=0\n\n") and not note
            else:
                last = got.rsplit(b"errno=", 1)[-1] if got else b""
                good = note != "timeout" and (not got or (last.startswith(b"-") and got.endswith(b"\n\n")))
            with lock:
                counts["get" if get else "bad"] += 1
                if get:
                    counts["slowest"] = max(counts["slowest"], took)
                if not good:
                    counts["wrong"] += 1
                    print(f"BAD  storm: {path} {'get=1' if get else 'malformed'} -> {got[-60:]!r} [{note}]")

    ts = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(f"storm: {counts['get'] + counts['bad']} requests ({counts['get']} get=1, {counts['bad']} malformed) "
          f"to {len(paths)} sockets, {counts['wrong']} wrong replies, slowest get=1 {counts['slowest']:.3f} s")
    return counts["wrong"] == 0


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "storm":
        sys.exit(0 if storm(float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]) else 1)
    if mode == "requests":
        ok = requests(path, sys.argv[3] if len(sys.argv) > 3 else None)
    elif mode == "junk":
        ok = junk(path, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "endless-set":
        ok = endless_set(path, float(sys.argv[3]))
    elif mode == "idle":
        ok = idle(path, int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(f"unknown mode {mode}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
