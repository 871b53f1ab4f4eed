#!/usr/bin/env bash
# The checks scripts/test.sh relies on, fed planted inputs: fuzz_verdict.sh must fail on
# every artifact kind, a non-zero exit and a run of no inputs, and pass a clean run;
# ctest_skips.sh must count skips and, under CI=true, fail on a skipped root case,
# namespace suite or golden check but not on another skip.
# Usage: ci_checks_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=${1:?usage: $0 SOURCE_DIR BUILD_DIR} build=${2:?usage: $0 SOURCE_DIR BUILD_DIR}
verdict="$src/scripts/fuzz_verdict.sh" skips="$src/scripts/ctest_skips.sh"
tmp=$(mktemp -d /tmp/wgnet-ci-checks.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0 checks=0

# expect WANT(pass|fail) WHAT CMD...
expect() {
  local want=$1 what=$2 got
  shift 2
  checks=$((checks + 1))
  if "$@" >"$tmp/out" 2>&1; then got=pass; else got=fail; fi
  if [ "$got" = "$want" ]; then
    echo "ok: $what ($want): $(head -1 "$tmp/out")"
  else
    echo "FAIL: $what: expected $want, got $got"; sed 's/^/  /' "$tmp/out"
    failures=$((failures + 1))
  fi
}

# A fuzzer's directory: a log with its final stats, RUNS inputs run.
fuzz_dir() { # NAME RUNS
  rm -rf "${tmp:?}/$1"
  mkdir -p "$tmp/$1/corpus"
  printf '#%s\tDONE   cov: 10 ft: 20 corp: 3/30b\nstat::number_of_executed_units: %s\n' "$2" "$2" >"$tmp/$1/log"
}

fuzz_dir clean 123456
expect pass "fuzz: a clean run" "$verdict" x 0 "$tmp/clean" "$tmp/clean/log"
for kind in crash leak timeout oom slow-unit; do
  fuzz_dir "$kind" 1000
  echo planted >"$tmp/$kind/$kind-da39a3ee5e6b4b0d3255bfef95601890afd80709"
  expect fail "fuzz: a planted $kind- artifact, exit status 0" "$verdict" x 0 "$tmp/$kind" "$tmp/$kind/log"
done
fuzz_dir status 1000
expect fail "fuzz: exit status 1, no artifact" "$verdict" x 1 "$tmp/status" "$tmp/status/log"
fuzz_dir none 0
expect fail "fuzz: no input executed" "$verdict" x 0 "$tmp/none" "$tmp/none/log"
fuzz_dir nolog 1
: >"$tmp/nolog/log"
expect fail "fuzz: no final stats in the log" "$verdict" x 0 "$tmp/nolog" "$tmp/nolog/log"
fuzz_dir inputs 1000
echo "an input the fuzzer kept" >"$tmp/inputs/corpus/0123abcd"
expect pass "fuzz: new corpus inputs are no artifact" "$verdict" x 0 "$tmp/inputs" "$tmp/inputs/log"

# ctest's closing lines for the skipped NAMEs.
ctest_output() {
  printf '100%% tests passed, 0 tests failed out of 3\n\nThe following tests did not run:\n'
  local i=1 n
  for n in "$@"; do printf '\t%3d - %s (Skipped)\n' $i "$n"; i=$((i + 1)); done
}
root_case=$(ctest --test-dir "$build" -N -L '^root$' | sed -nE 's/^[[:space:]]*Test +#[0-9]+: (.*)$/\1/p' | head -1)
unit_case=$(ctest --test-dir "$build" -N -L '^unit$' -LE '^root$' | sed -nE 's/^[[:space:]]*Test +#[0-9]+: (.*)$/\1/p' | head -1)
if [ -z "$root_case" ] || [ -z "$unit_case" ]; then
  echo "FAIL: no root or unit case listed by ctest in $build"
  exit 1
fi
printf '100%% tests passed, 0 tests failed out of 3\n' >"$tmp/none.txt"
expect pass "skips: none, CI=true" env CI=true "$skips" "$tmp/none.txt" "$build"
ctest_output "$root_case" netns_wg_netstack >"$tmp/root.txt"
expect pass "skips: a root case and a netns suite, outside CI" env -u CI "$skips" "$tmp/root.txt" "$build"
expect fail "skips: a root case ($root_case), CI=true" env CI=true "$skips" "$tmp/root.txt" "$build"
ctest_output golden_handshake_check >"$tmp/golden.txt"
expect fail "skips: the golden check, CI=true" env CI=true "$skips" "$tmp/golden.txt" "$build"
ctest_output "$unit_case" >"$tmp/unit.txt"
expect pass "skips: a unit case that may skip ($unit_case), CI=true" env CI=true "$skips" "$tmp/unit.txt" "$build"
env -u CI "$skips" "$tmp/root.txt" "$build" >"$tmp/count.txt" 2>&1
expect pass "skips: the count is printed (2)" grep -qx 'skipped: 2 test(s)' "$tmp/count.txt"

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]
