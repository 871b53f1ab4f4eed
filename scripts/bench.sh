#!/usr/bin/env bash
# README's headline figures on this machine, each against the current reference in the
# same run (root; about 20 minutes; nothing else should run meanwhile):
#   tests/bench/netns_throughput.sh  wg-tun <-> wg-tun and WIREGUARD_GO <-> WIREGUARD_GO:
#                                    TCP x1 and x4, CPU per Gbit/s, ping
#   tests/bench/netns_loss.sh        wg-netstack and WIREPROXY (SOCKS5, against wg-tun),
#                                    download and upload at 0 % and 2 % loss each way
#   tests/bench/wg_run_bench.sh      wg-run (no root) against wg-tun (root)
#   tests/bench/peer_scale.sh        65,536 peers: wg setconf, memory per peer
#   tests/bench/netstack_conns.sh    10,000 idle SOCKS5 connections held by wg-netstack and
#                                    WIREPROXY (WIREGUARD_GO the peer): memory, CPU a minute
# Each harness's own output (every repetition) goes to OUT_DIR; the summary, in
# README's shape, to stdout and to OUT_DIR's file "summary".
#
# Usage: scripts/bench.sh --wireguard-go PATH --wireproxy PATH [--wireproxy-version V]
#                         [--bin BIN_DIR] [--reps N] [--out OUT_DIR]
#   PATH: wireguard-go v0.0.20250522 and wireproxy v1.1.3 built from their release tags
#   (docs/benchmarks.md says how). wireguard-go names its version itself; wireproxy's -v
#   does not name its release, so V (default v1.1.3) labels it. BIN_DIR: build/bin.
#   --summary-only: the summary of the outputs already in OUT_DIR (a harness re-run by
#   hand into its file there), nothing measured.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  echo "usage: $0 --wireguard-go PATH --wireproxy PATH [--wireproxy-version V] [--bin BIN_DIR] [--reps N]" \
    "[--out OUT_DIR] [--summary-only]" >&2
  exit 2
}
wg_go= wireproxy= wireproxy_version=v1.1.3 bin="$top/build/bin" reps=3 out= summary_only=false
while [ $# -gt 0 ]; do
  case $1 in
    --wireguard-go) wg_go=${2:-}; shift 2 || usage ;;
    --wireproxy) wireproxy=${2:-}; shift 2 || usage ;;
    --wireproxy-version) wireproxy_version=${2:-}; shift 2 || usage ;;
    --bin) bin=${2:-}; shift 2 || usage ;;
    --reps) reps=${2:-}; shift 2 || usage ;;
    --out) out=${2:-}; shift 2 || usage ;;
    --summary-only) summary_only=true; shift ;;
    *) usage ;;
  esac
done
[ -x "$wg_go" ] || { echo "--wireguard-go: no program at '$wg_go'" >&2; usage; }
[ -x "$wireproxy" ] || { echo "--wireproxy: no program at '$wireproxy'" >&2; usage; }
[[ $reps =~ ^[1-9][0-9]?$ ]] || { echo "--reps: 1..99" >&2; exit 2; }
wg_go=$(realpath "$wg_go")
wireproxy=$(realpath "$wireproxy")
if $summary_only; then
  [ -n "$out" ] && [ -d "$out" ] || { echo "--summary-only needs --out OUT_DIR of an earlier run" >&2; exit 2; }
else
  out=${out:-$(mktemp -d /tmp/wgnet-bench.XXXXXX)}
  mkdir -p "$out"
  echo "bench: outputs in $out"
  WIREGUARD_GO=$wg_go bash "$top/tests/bench/netns_throughput.sh" "$bin" --reps "$reps" --seconds 10 \
    --only wg-tun,wireguard-go | tee "$out/throughput.md"
  bash "$top/tests/bench/netns_loss.sh" "$bin" --reps "$reps" --seconds 8 --losses "0 2" --streams 1 \
    --wireproxy "$wireproxy" --configs wg-tun,wireproxy | tee "$out/loss.md"
  bash "$top/tests/bench/wg_run_bench.sh" "$bin" --reps "$reps" --only wg-tun,wg-run | tee "$out/wg-run.md"
  WIREGUARD_GO=$wg_go bash "$top/tests/bench/peer_scale.sh" "$bin" | tee "$out/peers.md"
  WIREGUARD_GO=$wg_go bash "$top/tests/bench/netstack_conns.sh" "$bin" --peer wireguard-go --phases idle \
    --idle-conns 10000 --wireproxy "$wireproxy" | tee "$out/idle.md"
fi

python3 - "$out" "$("$wg_go" --version | awk '/wireguard-go/ {print $2; exit}')" "$wireproxy_version" \
  <<'PY' | tee "$out/summary"
import os, re, sys
out, wg_go, wireproxy = sys.argv[1:4]

def rows(name):
    """The cells of every markdown table row of OUT/NAME, by first cell."""
    table = {}
    for line in open(f"{out}/{name}"):
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            table.setdefault(cells[0], []).append(cells)
    return table

t, l, r = rows("throughput.md"), rows("loss.md"), rows("wg-run.md")
# peer_scale.sh's columns: impl peers setconf_s dump_s rss_MB bytes/peer ping cpu
p = {f[0]: f for f in (line.split() for line in open(f"{out}/peers.md"))
     if len(f) == 8 and f[0] in ("wg-tun", "wireguard-go")}
def tp(label):  # wg-tun, wireguard-go, ratio
    c = t[label][0]
    return c[2], c[3], c[4]
print(f"| measure | wgnet | reference, same run |")
print("|---|---|---|")
for label, what in (("TCP, 1 stream (Gbit/s)", "TCP, 1 stream, wg-tun ↔ wg-tun (Gbit/s)"),
                    ("TCP, 4 streams (Gbit/s)", "TCP, 4 streams (Gbit/s)"),
                    ("CPU during TCP ×1, both daemons (% of a core per Gbit/s)",
                     "CPU of both daemons per Gbit/s of TCP (% of a core)"),
                    ("ping RTT, median (µs)", "ping through the tunnel, median (µs)")):
    ours, theirs, ratio = tp(label)
    print(f"| {what} | {ours} | wireguard-go {wg_go} {theirs} ({ratio}) |")
for loss in ("0", "2"):
    cells = {c[1]: c for c in l.get(loss, []) if len(c) == 6}
    if "download" in cells and "upload" in cells:
        d, u = cells["download"], cells["upload"]
        print(f"| wg-netstack SOCKS5 download / upload, {loss} % loss each way (Gbit/s) | {d[3]} / {u[3]} | "
              f"wireproxy {wireproxy} {d[4]} / {u[4]} ({d[5]} / {u[5]}) |")
if "wg-tun" in p and "wireguard-go" in p:
    ours, theirs = p["wg-tun"], p["wireguard-go"]
    print(f"| {ours[1]} peers: `wg setconf` (s), memory per peer (bytes) | {ours[2]}, {ours[5]} | "
          f"wireguard-go {wg_go} {theirs[2]}, {theirs[5]} |")
# netstack_conns.sh's idle rows: held, proxy, CPU s, wake-ups/s, VmRSS MiB, echo after
idle = {c[1]: c for c in (rows("idle.md").get("10000", []) if os.path.exists(f"{out}/idle.md") else [])
        if len(c) == 6}
if "wg-netstack" in idle and "wireproxy" in idle:
    ours, theirs = idle["wg-netstack"], idle["wireproxy"]
    print(f"| 10,000 idle SOCKS5 connections held: memory (MiB), CPU over 60 s (s) | {ours[4]}, {ours[2]} | "
          f"wireproxy {wireproxy} {theirs[4]}, {theirs[2]} |")
for label, cells in r.items():
    if label.startswith("TCP ×1 up") and len(cells[0]) >= 5:
        c = cells[0]
        print(f"| wg-run (no root), {label} | {c[1]} | wg-tun (root) {c[2]} ({c[4]}) |")
        break
PY
