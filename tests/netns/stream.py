#!/usr/bin/env python3
# A TCP stream of deterministic pseudo-random bytes, hashed at both ends, for checking
# that a large transfer through the tunnel arrives intact (nothing is written to disk).
#
#   stream.py recv ADDR PORT                 accepts one connection, reads to EOF
#   stream.py send ADDR PORT BYTES SEED      connects, sends BYTES bytes of the stream
#
# Each prints one line "BYTES SHA256" of what it sent or received, and exits 1 (with the
# reason on stderr) if the peer is silent for IDLE seconds (30, or $STREAM_IDLE: a stalled
# tunnel) or the
# connection fails. The bytes come from random.Random(SEED).randbytes in 1 MiB chunks:
# the same SEED and BYTES always give the same stream, so the sender's digest is what
# the receiver must reproduce.
import hashlib
import os
import random
import socket
import sys

CHUNK = 1 << 20
IDLE = float(os.environ.get("STREAM_IDLE", "30"))  # seconds without progress before giving up


def recv(addr, port):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as ls:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, port))
        ls.listen(1)
        ls.settimeout(IDLE)
        print("listening", file=sys.stderr, flush=True)
        conn, _ = ls.accept()
    with conn:
        conn.settimeout(IDLE)
        digest = hashlib.sha256()
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        total = 0
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            digest.update(view[:n])
            total += n
    print(total, digest.hexdigest(), flush=True)


def send(addr, port, nbytes, seed):
    rnd = random.Random(seed)
    digest = hashlib.sha256()
    with socket.create_connection((addr, port), timeout=IDLE) as s:
        left = nbytes
        while left > 0:
            chunk = rnd.randbytes(min(CHUNK, left))
            digest.update(chunk)
            s.sendall(chunk)
            left -= len(chunk)
        s.shutdown(socket.SHUT_WR)
        # The receiver closes once it has read everything: wait for that, so a reset
        # on the way is reported here too.
        while s.recv(4096):
            pass
    print(nbytes, digest.hexdigest(), flush=True)


def main():
    try:
        if len(sys.argv) == 4 and sys.argv[1] == "recv":
            recv(sys.argv[2], int(sys.argv[3]))
        elif len(sys.argv) == 6 and sys.argv[1] == "send":
            send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        else:
            print("usage: stream.py recv ADDR PORT | send ADDR PORT BYTES SEED", file=sys.stderr)
            return 2
    except OSError as e:  # socket.timeout is an OSError
        print(f"stream.py {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
