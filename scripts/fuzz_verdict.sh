#!/usr/bin/env bash
# The verdict on one libFuzzer run, for scripts/test.sh's fuzz stage: it fails when the
# fuzzer exited non-zero, left any artifact (crash-, leak-, timeout-, oom-, slow-unit-,
# also under a prefix of its own), or did not run a single input.
# Usage: fuzz_verdict.sh NAME EXIT_STATUS ARTIFACT_DIR LOG
#   ARTIFACT_DIR: the -artifact_prefix directory; LOG: the fuzzer's output (with
#   -print_final_stats=1). Prints one line; exit 0 when clean, 1 otherwise.
set -uo pipefail
name=${1:?usage: $0 NAME EXIT_STATUS ARTIFACT_DIR LOG} status=${2:?} dir=${3:?} log=${4:?}

problems=()
[ "$status" -eq 0 ] || problems+=("exit status $status")
artifacts=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
  -o -name 'oom-*' -o -name 'slow-unit-*' -o -name 'minimized-from-*' \) -printf '%f ' 2>/dev/null)
[ -z "$artifacts" ] || problems+=("artifacts: ${artifacts% }")
runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" 2>/dev/null | tail -1)
[ "${runs:-0}" -gt 0 ] || problems+=("no input executed (stat::number_of_executed_units ${runs:-missing})")

if [ ${#problems[@]} -eq 0 ]; then
  echo "fuzz: $name: clean, $runs inputs"
  exit 0
fi
echo "fuzz: $name FAILED: $(IFS=';'; echo "${problems[*]}" | sed 's/;/; /g')"
grep -E "ERROR|SUMMARY|==[0-9]+==" "$log" 2>/dev/null | head -20 | sed 's/^/  /'
exit 1
