#!/usr/bin/env python3
"""Another process's memory, as a test reads it.

  proc_mem.py reads PID        exit 0 when this process can read PID's memory (the first
                               readable mapping, through /proc/PID/mem), 1 when refused
  proc_mem.py count PID KEY    prints how often the WireGuard key KEY (base64) occurs in
                               PID's readable memory: as its 32 bytes, and as its text
"""
import base64
import sys


def regions(pid):
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5] if len(fields) > 5 else ""
            if fields[1][0] == "r" and path != "[vvar]":
                yield start, end


def chunks(pid):
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for start, end in regions(pid):
            try:
                mem.seek(start)
                yield mem.read(end - start)
            except OSError:  # a mapping that went away, or a guard page
                continue


def main():
    mode, pid = sys.argv[1], sys.argv[2]
    if mode == "reads":
        try:
            for chunk in chunks(pid):
                if chunk:
                    return 0
        except PermissionError:
            return 1
        return 1
    if mode == "count":
        text = sys.argv[3].encode()
        raw = base64.b64decode(text)
        if len(raw) != 32:
            print("not a key", file=sys.stderr)
            return 2
        found = sum(c.count(raw) + c.count(text) for c in chunks(pid))
        print(found)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
