#!/usr/bin/env bash
# scripts/check_comments.sh on the tree (must pass), on a copy with things it must accept
# (a phrase or a date inside a string literal, a hex constant, a purpose's "is used to")
# and on copies with one comment planted each (a date, a commit hash, a history phrase,
# an issue reference, a note outside the repository), in C++, shell, Python and CMake:
# each must fail and name the planted line. Excluded paths are skipped, "!" keeps one.
# Usage: comments_test.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: $0 SOURCE_DIR}
check="$src/scripts/check_comments.sh"
tmp=$(mktemp -d /tmp/wgnet-comments.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0

if out=$("$check" "$src" 2>&1); then
  echo "ok: the tree passes: $out"
else
  echo "FAIL: the tree's comments have problems:"; echo "$out" | sed 's/^/  /'
  failures=$((failures + 1))
fi

# One copy of the checked sources with the tree's exclusions, made once; fresh FILE
# puts back FILE and the exclusion list as the source has them (FILE is created if
# missing), so each case starts from the tree plus its own change.
fresh() {
  local f
  if [ ! -d "$tmp/tree" ]; then
    mkdir -p "$tmp/tree"
    tar -C "$src" --exclude='./build*' --exclude=./.git --exclude=./third_party \
      --exclude=./out -cf - . | tar -C "$tmp/tree" -xf -
  fi
  for f in "$1" scripts/check_comments.exclude; do
    if [ -e "$src/$f" ]; then cp "$src/$f" "$tmp/tree/$f"; else rm -f "$tmp/tree/$f"; fi
  done
}

# accept NAME FILE TEXT [EXCLUDE]: FILE with TEXT appended (and EXCLUDE added to the
# copy's exclusions) must still pass.
accept() {
  local name=$1 file=$2 text=$3
  fresh "$file"
  [ -n "${4:-}" ] && printf '%s\n' "$4" >>"$tmp/tree/scripts/check_comments.exclude"
  printf '%s\n' "$text" >>"$tmp/tree/$file"
  if out=$("$check" "$tmp/tree" 2>&1); then
    echo "ok: $name is accepted"
  else
    echo "FAIL: $name is refused:"; echo "$out" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
}

# refuse NAME FILE TEXT PATTERN [EXCLUDE]: FILE with TEXT appended (and the lines of
# EXCLUDE added to the copy's exclusions) must fail, naming FILE, the appended line and
# PATTERN.
refuse() {
  local name=$1 file=$2 text=$3 pattern=$4 line
  fresh "$file"
  [ -n "${5:-}" ] && printf '%s\n' "$5" >>"$tmp/tree/scripts/check_comments.exclude"
  line=$(($(wc -l <"$tmp/tree/$file") + 1))
  printf '%s\n' "$text" >>"$tmp/tree/$file"
  if out=$("$check" "$tmp/tree" 2>&1); then
    echo "FAIL: $name passed"
    failures=$((failures + 1))
  elif grep -q "^$file:$line: .*$pattern" <<<"$out"; then
    echo "ok: $name is refused: $(grep "^$file:$line: .*$pattern" <<<"$out" | head -1)"
  else
    echo "FAIL: $name failed without naming it (wanted '$file:$line: .*$pattern'):"
    echo "$out" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
}

accept "a phrase in a C++ string" wg/peer.cpp \
  'static const char* kText = "it used to fail until 2026-12-03, see issue 14 // and #14";'
accept "a raw string with a comment in it" wg/peer.cpp \
  'static const char* kRaw = R"x(// it used to fail until 2026-12-03)x";'
accept "a phrase in a shell string" scripts/setup.sh \
  'echo "# it used to fail until 2026-12-03" >/dev/null # a comment that is fine'
accept "a hex constant and a digit separator" wg/peer.cpp \
  "static const unsigned kMask = 0x6a09e667'0u;  // 0x6a09e667 is SHA-256's first word"
accept "a purpose's 'is used to'" wg/peer.cpp '// The key is used to seal the reply.'
accept "a Markdown file that exists" wg/peer.cpp '// See docs/benchmarks.md and README.md.'
accept "an excluded path" examples/embed/main.cpp '// it used to fail (issue 14)' examples/embed/

refuse "a date in a C++ comment" wg/peer.cpp '// Measured on 2026-12-03.' "date"
refuse "a month and a year" wg/peer.cpp '// Measured in December 2026.' "date"
refuse "a date in a block comment" wg/peer.cpp "$(printf '/* Since 2026-12-03,\n   fast. */')" "date"
refuse "a commit hash" wg/peer.cpp '// Fixed in 9b0dfb7.' "commit hash"
refuse "a history phrase" wg/peer.cpp '// The loop used to sleep here.' "history"
refuse "a history phrase after code" wg/peer.cpp 'static int kX = 1;  // before the fix: 2' "history"
refuse "a round of work" wg/peer.cpp '// Faster this round.' "history"
refuse "an issue reference" wg/peer.cpp '// See issue 14.' "issue"
refuse "a #N issue reference" wg/peer.cpp '// Closes #14.' "issue"
refuse "a missing Markdown file" wg/peer.cpp '// Why: PITFALLS.md.' "not in the repository"
refuse "a bare PITFALLS" wg/peer.cpp '// Why: see PITFALLS.' "outside the repository"
refuse "the shared folder" wg/peer.cpp '// See ../shared/DESIGN.md.' "outside the repository"
refuse "a shell comment" scripts/setup.sh 'true  # previously false' "history"
refuse "a date in a Python comment" scripts/dns_responder.py '# Checked 2026-12-03.' "date"
refuse "a CMake comment" CMakeLists.txt '# Closes issue 14.' "issue"
refuse "the test script kept by '!'" tests/comments_test.sh '# Fixed in 9b0dfb7.' "commit hash" \
  "$(printf 'tests/\n!tests/comments_test.sh')"

[ $failures = 0 ] && echo "comments: all checks passed" || echo "comments: $failures check(s) failed"
exit $((failures > 0))
