#!/usr/bin/env python3
"""UDP and TCP echo on ADDR:PORT (both), until killed. Usage: echo_server.py ADDR PORT"""
import socket
import sys
import threading

addr, port = sys.argv[1], int(sys.argv[2])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((addr, port))
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((addr, port))
t.listen(16)


def udp():
    while True:
        m, a = u.recvfrom(2048)
        u.sendto(m, a)


def serve(c):
    with c:
        while True:
            d = c.recv(2048)
            if not d:
                return
            c.sendall(d)


threading.Thread(target=udp, daemon=True).start()
print("ready", flush=True)
while True:
    c, _ = t.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
