#!/usr/bin/env bash
# After a ctest run, for scripts/test.sh: prints how many tests were skipped and which,
# and under CI=true fails when one of them must run there: a root case (label root), a
# network-namespace suite (label netns) or the golden handshake's independent check
# (label vectors). A skip is never a pass, and in CI it is not allowed for those.
# Usage: ctest_skips.sh CTEST_OUTPUT BUILD_DIR    (exit 0, or 1 under CI=true)
set -uo pipefail
out=${1:?usage: $0 CTEST_OUTPUT BUILD_DIR} build=${2:?usage: $0 CTEST_OUTPUT BUILD_DIR}

# ctest lists them at the end: "The following tests did not run:" then
# "<tab>  12 - NAME (Skipped)" (or "(Disabled)").
mapfile -t skipped < <(sed -n '/^The following tests did not run:/,/^[^[:space:]]/p' "$out" |
  sed -nE 's/^[[:space:]]+[0-9]+ - (.*) \((Skipped|Disabled)\)$/\1/p')
echo "skipped: ${#skipped[@]} test(s)"
[ ${#skipped[@]} -eq 0 ] && exit 0
printf '  skipped: %s\n' "${skipped[@]}"
[ "${CI:-}" = true ] || exit 0

mapfile -t required < <(ctest --test-dir "$build" -N -L '^(root|netns|vectors)$' |
  sed -nE 's/^[[:space:]]*Test +#[0-9]+: (.*)$/\1/p')
bad=0
for s in "${skipped[@]}"; do
  for r in "${required[@]}"; do
    if [ "$s" = "$r" ]; then
      echo "CI: '$s' was skipped; in CI it must run (root, namespaces, python3-cryptography)"
      bad=1
    fi
  done
done
exit $bad
