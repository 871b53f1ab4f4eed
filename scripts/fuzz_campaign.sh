#!/usr/bin/env bash
# A long fuzz campaign of one target, by hand (not in CI): builds it in
# build-fuzz-campaign (preset fuzz-campaign: ASan + UBSan like CI's fuzz stage, and
# WGNET_FUZZ_CHEAP_DH, a hash in place of X25519, so that the targets that make keys and
# handshakes run 10-20x more inputs per second; see wg/crypto.cpp), runs it at nice 19
# until RUNS inputs or SECONDS, and appends one line to the ledger:
#   date  commit  target  preset  inputs  seconds  verdict
# The corpus grows across campaigns in $WGNET_CAMPAIGN_DIR/TARGET/corpus (seeded from
# tests/fuzz/corpus/TARGET, which stays as it is); artifacts go to .../TARGET/art, where
# scripts/fuzz_verdict.sh looks for them. A campaign stopped by a signal (SIGTERM to the
# fuzzer, which prints its final stats) is recorded with what it ran. Stop one by
# SIGTERM to the fuzzer's PID, not SIGSTOP: an input held stopped becomes a slow-unit.
#
# Usage: scripts/fuzz_campaign.sh TARGET [RUNS (10000000)] [SECONDS (36000)] [--real-dh]
#   --real-dh: the fuzz preset (real X25519, build-fuzz) instead.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
target=${1:?usage: $0 TARGET [RUNS] [SECONDS] [--real-dh]}
runs=${2:-10000000} seconds=${3:-36000} preset=fuzz-campaign build=build-fuzz-campaign
[ "${4:-}" = "--real-dh" ] && preset=fuzz build=build-fuzz
[ -f "$top/tests/fuzz/$target.cpp" ] || { echo "no target tests/fuzz/$target.cpp" >&2; exit 2; }
dir=${WGNET_CAMPAIGN_DIR:-/var/tmp/wgnet-campaign}/$target
ledger=${WGNET_CAMPAIGN_DIR:-/var/tmp/wgnet-campaign}/ledger.txt

cd "$top" || exit 2
cmake --preset "$preset" >/dev/null || exit 2
nice -n 19 cmake --build "$build" -j2 --target "$target" >/dev/null || { echo "build failed" >&2; exit 2; }
mkdir -p "$dir/corpus" "$dir/art"
[ -d "tests/fuzz/corpus/${target%_fuzz}" ] && cp -rn "tests/fuzz/corpus/${target%_fuzz}"/. "$dir/corpus"/
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo +changes)
log="$dir/log.$(date -u +%Y%m%dT%H%M%S)"
start=$(date +%s)
rc=0
# ASan's quarantine of freed memory at 32 MB instead of 256: an input frees well under
# that, so a use after free within an input is still caught, and LeakSanitizer's scan
# (libFuzzer runs it after an input that allocated more than it freed) walks a heap a
# tenth the size: receive_fuzz 2,100 instead of 1,460 inputs/s.
ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=32} nice -n 19 "./$build/bin/$target" -runs="$runs" -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$dir/art/" "$dir/corpus" >"$log" 2>&1 || rc=$?
# A campaign ended by SIGTERM or SIGINT (libFuzzer says "run interrupted" and exits 72,
# its -interrupted_exitcode) is cut short, not failed: its verdict is on its artifacts
# and the inputs it ran.
[ "$rc" -eq 72 ] && grep -q "libFuzzer: run interrupted" "$log" && rc=0
verdict=$("$top/scripts/fuzz_verdict.sh" "$target" "$rc" "$dir/art" "$log")
status=$?
inputs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
printf '%s  %s  %s  %s  %s  %s  %s\n' "$(date -u +%FT%TZ)" "$commit" "$target" "$preset" "${inputs:-0}" \
  "$(( $(date +%s) - start ))" "$verdict" >>"$ledger"
echo "$verdict (log: $log, ledger: $ledger)"
exit $status
