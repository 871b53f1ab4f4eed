#!/usr/bin/env bash
# The whole test suite, as CI runs it: every test on the default build (the golden
# handshake's independent check among them; the /readyz suite beside the sanitizer
# builds), the Debian packages (built, lintian, installed, used, removed), the unit
# tests again under ASan+UBSan, the concurrency cases under TSan, and each fuzz target
# briefly. Each ctest run prints how many tests were skipped; with CI=true (.ci/run) a
# skipped root case, namespace suite or golden check fails the run.
# Usage: scripts/test.sh [--quick | --fuzz | --package]   (--quick: default build only;
# --fuzz: only the fuzz stage; --package: only the Debian packages, tests/package_test.sh)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc)
mode=${1:-}

"$top/scripts/setup.sh"

# step NAME: a stage starts (and the one before it ends); stage_times prints each stage's
# minutes and seconds, at the end of every run, passed or failed.
stage_names=() stage_starts=()
step() {
  printf '\n=== %s ===\n' "$*"
  stage_names+=("${*%%:*}")
  stage_starts+=("$SECONDS")
}
stage_times() {
  local i end
  [ ${#stage_names[@]} -gt 0 ] || return 0
  printf '\n=== stage times ===\n'
  for i in "${!stage_names[@]}"; do
    end=${stage_starts[i + 1]:-$SECONDS}
    printf '%6s  %s\n' "$(((end - stage_starts[i]) / 60))m$(((end - stage_starts[i]) % 60))s" "${stage_names[i]}"
  done
  printf '%6s  total\n' "$((SECONDS / 60))m$((SECONDS % 60))s"
}

# run_ctest BUILD_DIR ARGS...: ctest with ARGS, then its skipped tests (ctest_skips.sh).
run_ctest() {
  local dir=$1 log
  shift
  log=$(mktemp /tmp/wgnet-ctest.XXXXXX)
  ctest --test-dir "$dir" "$@" 2>&1 | tee "$log"
  "$top/scripts/ctest_skips.sh" "$log" "$dir" || { rm -f "$log"; return 1; }
  rm -f "$log"
}

# default_stage [CTEST_ARGS...]: the default build and its tests (all, unless the
# arguments exclude some).
default_stage() {
  step "default build"
  cmake --preset default >/dev/null
  cmake --build build -j"$jobs"
  step "all tests (default build)"
  run_ctest build --output-on-failure -j"$jobs" "$@"
}

# The /readyz suite mostly waits (200 s of an idle tunnel): in a full run it goes in the
# background beside the compile-bound sanitizer builds. Its checks allow seconds, not
# milliseconds, and it shares no namespace, port or table with them.
readyz=netns_wg_netstack_readyz
readyz_log=$(mktemp /tmp/wgnet-readyz.XXXXXX)
readyz_pid=
trap '[ -z "$readyz_pid" ] || wait "$readyz_pid"; rm -f "$readyz_log"; stage_times' EXIT
readyz_start() {
  step "$readyz (in the background)"
  run_ctest build --output-on-failure --no-tests=error -R "^$readyz\$" >"$readyz_log" 2>&1 &
  readyz_pid=$!
}
readyz_wait() {
  local rc=0
  wait "$readyz_pid" || rc=$?
  readyz_pid=
  step "$readyz (its output)"
  cat "$readyz_log"
  return "$rc"
}

sanitizer_stages() {
  step "asan build: unit tests under ASan + UBSan"
  cmake --preset asan >/dev/null
  cmake --build build-asan -j"$jobs" --target wgnet_tests netstack_tests netstack_lifetime_tests netstack_multi_tests \
    lwip_tcp_tests
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest build-asan --output-on-failure -j"$jobs" -L unit

  step "tsan build: device, device-clock, buffer-pool, seam-fault, timer-list, work-queue, UAPI server, TUN echo, read_now and multi-queue, dialer cancellation, lifetime and several-Stack tests under TSan"
  cmake --preset tsan >/dev/null
  cmake --build build-tsan -j"$jobs" --target wgnet_tests netstack_tests netstack_lifetime_tests netstack_multi_tests
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    run_ctest build-tsan --output-on-failure \
    -R '^(device|device clock|pool|seams|timer list|work queue|uapi server|netstack cancel|netstack lifetime|netstack multi|dial_order):|^netstack: (async_dial_tcp by name|a dead address|a dial by name|async_dial_udp by name)|^tun: (the core answers|read_now takes|the core reads a multi-queue)'
}

# The Debian packages: built, lintian-clean, installed, used and removed (root).
package_stage() {
  step "packages: build (Release, build-pkg/), lintian, install, use, remove"
  local rc=0
  bash "$top/tests/package_test.sh" "$top" "$top/build-pkg" || rc=$?
  if [ "$rc" -eq 77 ] && [ "${CI:-}" != true ]; then
    echo "packages: skipped (not root)"
    return 0
  fi
  return "$rc"
}

# Each target from a scratch copy of its seed corpus (the repository's stays as it is),
# artifacts beside it; fuzz_verdict.sh fails on a non-zero exit, any artifact (crash-,
# leak-, timeout-, oom-, slow-unit-) or no input run.
fuzz_stage() {
  step "fuzz: each libFuzzer target for a short bounded time (clang-14)"
  cmake --preset fuzz >/dev/null
  local fuzzers=(gro_fuzz gso_fuzz control_fuzz dns_message_fuzz lwip_tcp_fuzz receive_fuzz uapi_fuzz config_fuzz
                 socks5_fuzz http_proxy_fuzz proxy_config_fuzz client_hello_fuzz) failed=() f corpus work rc
  cmake --build build-fuzz -j"$jobs" --target "${fuzzers[@]}"
  for f in "${fuzzers[@]}"; do
    corpus="tests/fuzz/corpus/${f%_fuzz}"
    work=$(mktemp -d /tmp/wgnet-fuzz.XXXXXX)
    mkdir "$work/corpus"
    [ -d "$corpus" ] && cp -r "$corpus"/. "$work/corpus"/
    echo "--- $f (${WGNET_FUZZ_SECONDS:-20} s)"
    rc=0
    ./build-fuzz/bin/"$f" -max_total_time="${WGNET_FUZZ_SECONDS:-20}" -print_final_stats=1 \
      -artifact_prefix="$work/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
    grep -E "^(stat::number_of_executed_units|#[0-9]+ +DONE)" "$work/log" || true  # display only
    if "$top/scripts/fuzz_verdict.sh" "$f" "$rc" "$work" "$work/log"; then
      rm -rf "$work"
    else
      echo "  (its log and artifacts stay in $work)"
      failed+=("$f")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: failed: ${failed[*]}"
    return 1
  fi
}

case $mode in
  --quick) default_stage ;;
  --fuzz) fuzz_stage ;;
  --package) package_stage ;;
  "")  # one after another, not joined by &&: errexit does not apply inside an && list
    default_stage -E "^$readyz\$"
    package_stage
    readyz_start
    sanitizer_stages
    readyz_wait
    fuzz_stage
    ;;
  *) echo "usage: $0 [--quick | --fuzz | --package]" >&2; exit 2 ;;
esac

step "all passed"
