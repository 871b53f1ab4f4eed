#!/usr/bin/env python3
# The verdict of the soak suite (soak_test.sh) from the events of soak_load.py and the
# harness's fault log; prints a summary and every broken rule, exits 1 if any.
#
#   soak_report.py FAULTS EVENTS...
#
# FAULTS has one line per fault: "KIND START END AFFECTED" (Unix seconds; AFFECTED: the
# path groups it takes down, comma-separated, e.g. "AB,N1", or "-" for a fault that must
# not disturb any path: a reload, a UAPI storm). A path's name starts with its group and a
# dot. For each request path P of an affected group, the fault's window on P runs from
# START to the answer of the first request on P started after END that succeeded; for
# transfers, to the latest of those over the group's request paths. The rules:
#   1. no transfer completes with other bytes than sent (client or server saw it);
#   2. every request outside P's windows is answered within BOUND s;
#   3. no gap over BOUND s in a transfer outside its group's windows;
#   4. no transfer fails outside its group's windows;
#   5. every affected request path answers again within RECOVER s of the fault's END.
import json
import sys
from collections import defaultdict

BOUND = 1.0
RECOVER = 30.0
REQ_TIMEOUT = 3.0  # soak_load.py's: how long a failed request may have been in flight


def group(path):
    return path.split(".", 1)[0]


def overlaps(a0, a1, spans):
    return any(a0 < s1 and a1 > s0 for s0, s1 in spans)


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    faults = []
    with open(sys.argv[1]) as f:
        for line in f:
            kind, start, end, affected = line.split()
            faults.append((kind, float(start), float(end), [] if affected == "-" else affected.split(",")))
    reqs, xfers, stalls, corrupt = defaultdict(list), [], [], []
    for name in sys.argv[2:]:
        with open(name) as f:
            for line in f:
                e = json.loads(line)
                if e["ev"] == "req":
                    reqs[e["path"]].append(e)
                elif e["ev"] == "xfer":
                    xfers.append(e)
                elif e["ev"] == "stall":
                    stalls.append(e)
                elif e["ev"] == "corrupt":
                    corrupt.append(e)
    for r in reqs.values():
        r.sort(key=lambda e: e["start"])
    problems = []

    # Windows per request path, then per group.
    windows = defaultdict(list)
    gwindows = defaultdict(list)
    recovery = defaultdict(list)  # kind -> seconds from END to the group's recovery
    for kind, start, end, groups in faults:
        for g in groups:
            last = end
            for path, rs in reqs.items():
                if group(path) != g:
                    continue
                first = next((e for e in rs if e["start"] >= end and e["lat"] is not None), None)
                if first is None or first["start"] + first["lat"] > end + RECOVER:
                    problems.append(f"{path}: no answer within {RECOVER:.0f} s after {kind} ended at {end:.1f}")
                    back = end + RECOVER
                else:
                    back = first["start"] + first["lat"]
                windows[path].append((start, back))
                last = max(last, back)
            gwindows[g].append((start, last))
            recovery[kind].append(last - end)

    # 2. requests
    lat_in, lat_by_kind = [], defaultdict(list)
    n_all = n_out = n_win_failed = 0
    for path, rs in sorted(reqs.items()):
        bad = []
        for e in rs:
            n_all += 1
            end = e["start"] + (e["lat"] if e["lat"] is not None else REQ_TIMEOUT)
            if overlaps(e["start"], end, windows[path]):
                n_win_failed += e["lat"] is None
                continue
            n_out += 1
            if e["lat"] is None or e["lat"] > BOUND:
                bad.append(e)
            else:
                lat_in.append(e["lat"])
                lat_by_kind[e["kind"]].append(e["lat"])
        for e in bad[:5]:
            what = f"failed ({e.get('err')})" if e["lat"] is None else f"took {e['lat']:.3f} s"
            problems.append(f"{path}: request at {e['start']:.2f}, outside any fault window, {what}")
        if len(bad) > 5:
            problems.append(f"{path}: {len(bad) - 5} more such requests")

    # 1, 4. transfers
    done = [x for x in xfers if x["result"] == "ok"]
    interrupted = [x for x in xfers if x["result"] == "interrupted"]
    bad_bytes = [x for x in xfers if x["result"] == "corrupt"]
    for x in bad_bytes:
        problems.append(f"{x['path']} {x['dir']} of {x['bytes']} bytes to {x['host']} at {x['start']:.2f}: "
                        f"OTHER BYTES: {x['err']}")
    for c in corrupt:
        problems.append(f"{c['path']} upload of stream {c['seed']}: the server read a wrong byte at "
                        f"offset {c['offset']} ({c['at']:.2f})")
    outside = [x for x in interrupted if not overlaps(x["start"], x["end"], gwindows[group(x["path"])])]
    for x in outside[:10]:
        problems.append(f"{x['path']} {x['dir']} at {x['start']:.2f}-{x['end']:.2f}, outside any fault "
                        f"window, failed: {x['err']}")

    # 3. stalls
    longest_out, longest_in = (0.0, None), (0.0, None)
    for s in stalls:
        gap = s["end"] - s["start"]
        if overlaps(s["start"], s["end"], gwindows[group(s["path"])]):
            longest_in = max(longest_in, (gap, s), key=lambda t: t[0])
        else:
            longest_out = max(longest_out, (gap, s), key=lambda t: t[0])
            if gap > BOUND:
                problems.append(f"{s['path']} {s['dir']}: {gap:.2f} s without a byte at "
                                f"{s['start']:.2f}, outside any fault window")

    # Summary
    kinds = defaultdict(int)
    for kind, *_ in faults:
        kinds[kind] += 1
    print("faults: " + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())))
    for k, v in sorted(recovery.items()):
        print(f"  {k}: every affected path answered again {max(v):.2f} s after the fault at most "
              f"(median {pct(v, 0.5):.2f} s)")
    print(f"requests: {n_all}, {n_out} outside fault windows ({n_all - n_out} inside, "
          f"{n_win_failed} of them unanswered)")
    print(f"  latency outside windows: p50 {pct(lat_in, 0.5) * 1e3:.1f} ms, p99 {pct(lat_in, 0.99) * 1e3:.1f} ms, "
          f"max {max(lat_in, default=float('nan')) * 1e3:.1f} ms")
    for k, v in sorted(lat_by_kind.items()):
        print(f"    {k:7s} {len(v):6d} requests, p99 {pct(v, 0.99) * 1e3:7.1f} ms, max {max(v) * 1e3:7.1f} ms")
    moved = sum(x["bytes"] for x in done)
    print(f"transfers: {len(xfers)}, {len(done)} completed with every byte checked ({moved / 1e6:.0f} MB), "
          f"{len(interrupted)} interrupted ({len(interrupted) - len(outside)} in fault windows), "
          f"{len(bad_bytes) + len(corrupt)} with other bytes")
    by_path = defaultdict(lambda: [0, 0])
    for x in xfers:
        by_path[x["path"]][0 if x["result"] == "ok" else 1] += 1
    print("  " + ", ".join(f"{p} {ok}/{ok + n}" for p, (ok, n) in sorted(by_path.items())))
    lo, so = longest_out
    li, si = longest_in
    print(f"stalls: longest outside fault windows {lo:.2f} s" +
          (f" ({so['path']} {so['dir']})" if so else "") +
          f"; longest inside {li:.2f} s" + (f" ({si['path']} {si['dir']})" if si else ""))
    if not done:
        problems.append("no transfer completed")
    for p in problems:
        print("PROBLEM: " + p)
    print(f"verdict: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
