#!/usr/bin/env python3
"""One lone request through an idle tunnel, timed.

Usage: lone_probe.py udp|tcp HOST PORT TIMEOUT_S
udp: one datagram, waits for its echo. tcp: connect (the lone SYN), one line, its echo.
Prints the round trip in ms, or "timeout"; exit 0 only when the echo came back intact.
"""
import socket
import sys
import time

kind, host, port, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
payload = b"lone %d\n" % time.monotonic_ns()
start = time.monotonic()
try:
    if kind == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(limit)
        s.sendto(payload, (host, port))
        got = s.recv(2048)
    else:
        s = socket.create_connection((host, port), timeout=limit)
        s.settimeout(max(0.01, limit - (time.monotonic() - start)))
        s.sendall(payload)
        got = b""
        while not got.endswith(b"\n"):
            chunk = s.recv(2048)
            if not chunk:
                break
            got += chunk
except OSError:
    print("timeout")
    sys.exit(1)
ms = (time.monotonic() - start) * 1000
print("%.1f" % ms)
sys.exit(0 if got == payload else 1)
