#!/usr/bin/env bash
# scripts/check_docs.sh on the tree (must pass), on a copy with things it must accept (a
# sha256, a hash inside a code block) and on copies with one defect planted each (a
# broken link, a broken anchor, a link out of the repository, a commit hash, an issue
# reference, a README of 301 lines): each must fail and name the planted line.
# Usage: docs_test.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: $0 SOURCE_DIR}
check="$src/scripts/check_docs.sh"
tmp=$(mktemp -d /tmp/wgnet-docs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0

if out=$("$check" "$src" 2>&1); then
  echo "ok: the tree passes: $out"
else
  echo "FAIL: the tree's documentation has problems:"; echo "$out" | sed 's/^/  /'
  failures=$((failures + 1))
fi

# A fresh copy of the tree's sources (the targets of relative links included).
fresh() {
  rm -rf "${tmp:?}/tree"
  mkdir -p "$tmp/tree"
  tar -C "$src" --exclude='./build*' --exclude=./.git --exclude=./third_party/lwip/src \
    --exclude='./third_party/lwip/*.tar.*' --exclude=./out -cf - . | tar -C "$tmp/tree" -xf -
}

# accept NAME FILE TEXT: FILE with TEXT appended must still pass.
accept() {
  local name=$1 file=$2 text=$3
  fresh
  printf '%s\n' "$text" >>"$tmp/tree/$file"
  if out=$("$check" "$tmp/tree" 2>&1); then
    echo "ok: $name is accepted"
  else
    echo "FAIL: $name is refused:"; echo "$out" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
}

# refuse NAME FILE TEXT PATTERN: FILE with TEXT appended must fail, naming FILE, the
# appended line and PATTERN.
refuse() {
  local name=$1 file=$2 text=$3 pattern=$4 line
  fresh
  line=$(($(wc -l <"$tmp/tree/$file") + 1))
  printf '%s\n' "$text" >>"$tmp/tree/$file"
  expect "$name" "$file:$line: .*$pattern"
}

expect() {
  local name=$1 want=$2
  if out=$("$check" "$tmp/tree" 2>&1); then
    echo "FAIL: $name passed"
    failures=$((failures + 1))
  elif grep -q "^$want" <<<"$out"; then
    echo "ok: $name is refused: $(grep "^$want" <<<"$out" | head -1)"
  else
    echo "FAIL: $name failed without naming it (wanted '$want'):"; echo "$out" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
}

accept "a full sha256 in prose" docs/building.md \
  'Checked against 83729c274c499d3348e9fbbe043a3113f3fa8953e7efddc7c21c7fcbb1f2b7b1 here.'
accept "a hash inside a fenced code block" docs/testing.md \
  "$(printf '```sh\ngit show 1a2b3c4d\n```')"
accept "an external link and an anchor link" docs/wg-tun.md \
  'See [the kernel](https://www.kernel.org/) and [offloads](#offloads).'

refuse "a broken link" docs/wg-tun.md 'See [nothing](no-such-file.md).' "broken link"
refuse "a broken anchor" docs/embedding.md 'See [x](wg-tun.md#no-such-heading).' "broken anchor"
refuse "a link out of the repository" README.md 'See [design](../shared/DESIGN.md).' "outside the repository"
refuse "a commit hash" README.md 'Fixed in 9b0dfb7 last week.' "commit hash"
refuse "a commit hash in inline code" docs/benchmarks.md 'Measured at `be3781f`.' "commit hash"
refuse "an issue reference" docs/testing.md 'This closes issue 14.' "issue"
refuse "a #N issue reference" docs/architecture.md 'See #14 for the story.' "issue"

fresh
for _ in $(seq 1 301); do echo "line"; done >"$tmp/tree/README.md"
expect "a README of 301 lines" "README.md:301: .*301 lines"

[ $failures = 0 ] && echo "docs: all checks passed" || echo "docs: $failures check(s) failed"
exit $((failures > 0))
