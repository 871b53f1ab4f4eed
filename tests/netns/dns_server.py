# A DNS server over UDP on 198.19.0.2:53 for the netns suites: web.test (A 198.19.0.2 and
# AAAA fd00:19::2) and web6.test (AAAA only), NXDOMAIN otherwise. Every query is logged
# to LOG_FILE with its source, so a test can see it came through the tunnel.
# Usage: dns_server.py LOG_FILE
import socket, struct, sys
A = {"web.test": ["198.19.0.2"]}
AAAA = {"web.test": ["fd00:19::2"], "web6.test": ["fd00:19::2"]}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.19.0.2", 53))
log = open(sys.argv[1], "a", buffering=1)
while True:
    q, addr = s.recvfrom(4096)
    try:
        qid, flags, qdcount = struct.unpack(">HHH", q[:6])
        if qdcount != 1 or flags & 0x8000:
            continue
        off, labels = 12, []
        while q[off] != 0:
            n = q[off]
            labels.append(q[off + 1:off + 1 + n].decode().lower())
            off += 1 + n
        qtype, _ = struct.unpack(">HH", q[off + 1:off + 5])
    except (IndexError, struct.error, UnicodeDecodeError):
        continue
    name = ".".join(labels)
    log.write(f"{addr[0]} {name} {qtype}\n")
    records = []
    if qtype == 1:
        records = [socket.inet_pton(socket.AF_INET, a) for a in A.get(name, [])]
    elif qtype == 28:
        records = [socket.inet_pton(socket.AF_INET6, a) for a in AAAA.get(name, [])]
    rcode = 0 if name in A or name in AAAA else 3
    head = struct.pack(">HHHHHH", qid, 0x8480 | (flags & 0x0100) | rcode, 1, len(records), 0, 0)
    body = b"".join(struct.pack(">HHHIH", 0xC00C, qtype, 1, 60, len(r)) + r for r in records)
    s.sendto(head + q[12:off + 5] + body, addr)
