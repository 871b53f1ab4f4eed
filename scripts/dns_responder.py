#!/usr/bin/env python3
"""A tiny authoritative DNS responder for tests and the demo (UDP only).

Usage: dns_responder.py [--log FILE] ADDR PORT NAME=IP [NAME=IP ...]
Answers A/AAAA queries for the given names (IPv4 → A, IPv6 → AAAA) and NXDOMAIN for
anything else. With --log, every query is appended to FILE as "SOURCE NAME QTYPE", so a
test can see where it came from. Runs until killed (callers kill it by PID).
"""
import ipaddress
import socket
import struct
import sys


def parse_question(msg):
    labels, off = [], 12
    while off < len(msg) and msg[off] != 0:
        n = msg[off]
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    qtype, qclass = struct.unpack("!HH", msg[off + 1:off + 5])
    return ".".join(labels).lower(), qtype, msg[12:off + 5]


def answer(msg, table):
    if len(msg) < 17:
        return None
    qid, flags = struct.unpack("!HH", msg[:4])
    name, qtype, question = parse_question(msg)
    records = [ip for ip in table.get(name, []) if (qtype == 1 and ip.version == 4) or (qtype == 28 and ip.version == 6)]
    rcode = 0 if name in table else 3
    header = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, len(records), 0, 0)
    body = b"".join(struct.pack("!HHHIH", 0xC00C, qtype, 1, 60, len(ip.packed)) + ip.packed for ip in records)
    return header + question + body


def main():
    args = sys.argv[1:]
    log = None
    if args[:1] == ["--log"]:
        log = open(args[1], "a", buffering=1)
        args = args[2:]
    addr, port = args[0], int(args[1])
    table = {}
    for item in args[2:]:
        name, ip = item.split("=", 1)
        table.setdefault(name.lower(), []).append(ipaddress.ip_address(ip))
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((addr, port))
    print("ready", flush=True)
    while True:
        msg, peer = s.recvfrom(4096)
        try:
            reply = answer(msg, table)
            if log:
                name, qtype, _ = parse_question(msg)
                log.write(f"{peer[0]} {name} {qtype}\n")
        except (struct.error, IndexError):
            reply = None
        if reply:
            s.sendto(reply, peer)


if __name__ == "__main__":
    main()
