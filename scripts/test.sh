#!/usr/bin/env bash
# The whole test suite, as CI runs it: every test on the default build, the unit tests
# again under ASan+UBSan, and the device tests under TSan.
# Usage: scripts/test.sh [--quick]   (--quick: default build only)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc)

"$top/scripts/setup.sh"

step() { printf '\n=== %s ===\n' "$*"; }

step "default build"
cmake --preset default >/dev/null
cmake --build build -j"$jobs"
step "all tests (default build)"
ctest --test-dir build --output-on-failure -j"$jobs"

[ "${1:-}" = "--quick" ] && exit 0

step "asan build: unit tests under ASan + UBSan"
cmake --preset asan >/dev/null
cmake --build build-asan -j"$jobs" --target wgnet_tests netstack_tests lwip_tcp_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit

step "tsan build: device tests under TSan"
cmake --preset tsan >/dev/null
cmake --build build-tsan -j"$jobs" --target wgnet_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -R '^device' 

step "fuzz: each libFuzzer target for a short bounded time (clang-14)"
cmake --preset fuzz >/dev/null
fuzzers=(gro_fuzz gso_fuzz control_fuzz dns_message_fuzz lwip_tcp_fuzz)
cmake --build build-fuzz -j"$jobs" --target "${fuzzers[@]}"
for f in "${fuzzers[@]}"; do
  corpus="tests/fuzz/corpus/${f%_fuzz}"
  work=$(mktemp -d /tmp/wgnet-fuzz.XXXXXX)
  # New inputs go to a scratch copy; the repository's seed corpus stays as it is.
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "--- $f (${WGNET_FUZZ_SECONDS:-20} s)"
  ./build-fuzz/bin/"$f" -max_total_time="${WGNET_FUZZ_SECONDS:-20}" -print_final_stats=1 \
    -artifact_prefix="$work/" "$work" 2>&1 | grep -E "^(stat::number_of_executed_units|#[0-9]+ +DONE)|ERROR|SUMMARY" || true
  if ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* >/dev/null 2>&1; then
    echo "fuzz: $f found a failing input:"; ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null
    exit 1
  fi
  rm -rf "$work"
done

step "all passed"
