#!/usr/bin/env bash
# The manuals and --help agree: for wg-netstack, wg-tun and wg-run, the flags,
# environment variables and signals of `PROG --help` are those of docs/man/PROG.8.scd,
# every flag is in the program's own reference under docs/ too and every flag of that
# reference's option tables in --help, the page's version is the program's, and the page
# scdoc makes lints clean (mandoc, man).
#
#   man_test.sh BIN_DIR SOURCE_DIR
#
# What is compared, on each side:
#   flags        --help: every -x / --long-name in the whole output;
#                page: the same in its OPTIONS, ENVIRONMENT and SIGNALS sections
#                (a word's inner hyphen, as in wg-quick, is not a flag).
#   environment  --help: the names ([A-Z][A-Z0-9_]{3,}) in the terms of the
#                "Environment:" block, the lines indented by two spaces, up to two spaces;
#                page: the names in the term lines (starting with '*') of ENVIRONMENT.
#   signals      every SIG... in the "Signals:" block and in SIGNALS.
# Exit 77 (skipped) when scdoc or mandoc is missing, except under CI=true (then 1).
set -euo pipefail

bin=${1:?usage: man_test.sh BIN_DIR SOURCE_DIR}
src=${2:?usage: man_test.sh BIN_DIR SOURCE_DIR}

for tool in scdoc mandoc; do
  if ! command -v "$tool" >/dev/null; then
    if [ "${CI:-}" = true ]; then
      echo "man_test: $tool is missing (scripts/setup.sh installs it)" >&2
      exit 1
    fi
    echo "man_test: $tool is missing: skipped"
    exit 77
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The lines of the "NAME:" block of a --help text: up to the next "Header:" line.
help_block() { awk -v h="$1:" '$0 == h { on = 1; next } on && /^[A-Z][A-Za-z ]*:$/ { on = 0 } on'; }
# The lines of "# NAME" in an scdoc page, up to the next section.
page_section() { awk -v h="# $1" '$0 == h { on = 1; next } on && /^# / { on = 0 } on'; }

flags() { grep -oP '(?<![\w-])(?:--[a-z][a-z0-9]*(?:-[a-z0-9]+)*|-[A-Za-z])(?![\w-])' | sort -u || true; }
signals() { grep -oE 'SIG[A-Z]+[0-9]*' | sort -u || true; }
help_env() { grep -E '^  [^ ]' | sed -E 's/^  //; s/  .*//' | grep -oE '[A-Z][A-Z0-9_]{3,}' | sort -u || true; }
page_env() { grep -E '^\*' | grep -oE '[A-Z][A-Z0-9_]{3,}' | sort -u || true; }

# compare PROG WHAT HELP_LIST PAGE_LIST: one failure per item on one side only.
compare() {
  local prog=$1 what=$2
  local item
  while read -r item; do fail "$prog: $what $item is in --help, not in the manual"; done < <(comm -23 "$3" "$4")
  while read -r item; do fail "$prog: $what $item is in the manual, not in --help"; done < <(comm -13 "$3" "$4")
}

for prog in wg-netstack wg-tun wg-run; do
  failures_before=$failures
  page="$src/docs/man/$prog.8.scd"
  if [ ! -x "$bin/$prog" ]; then fail "$prog: no program at $bin/$prog"; continue; fi
  if [ ! -f "$page" ]; then fail "$prog: no manual at $page"; continue; fi
  if ! "$bin/$prog" --help > "$tmp/$prog.help" 2>&1; then fail "$prog: --help did not exit 0"; fi

  flags < "$tmp/$prog.help" > "$tmp/help.flags"
  help_block Environment < "$tmp/$prog.help" | help_env > "$tmp/help.env"
  help_block Signals < "$tmp/$prog.help" | signals > "$tmp/help.signals"
  for s in OPTIONS ENVIRONMENT SIGNALS; do page_section "$s" < "$page"; done | flags > "$tmp/page.flags"
  page_section ENVIRONMENT < "$page" | page_env > "$tmp/page.env"
  page_section SIGNALS < "$page" | signals > "$tmp/page.signals"
  for kind in flags env signals; do
    case $kind in flags) what=flag ;; env) what="environment variable" ;; signals) what=signal ;; esac
    [ -s "$tmp/help.$kind" ] || fail "$prog: --help names no $what"
    compare "$prog" "$what" "$tmp/help.$kind" "$tmp/page.$kind"
  done

  # Every flag of --help is in the program's reference in docs/ too, and every flag its
  # option tables name (the rows' first cells) is in --help.
  while read -r flag; do
    grep -qF -- "$flag" "$src/docs/$prog.md" || fail "$prog: flag $flag is in --help, not in docs/$prog.md"
  done < "$tmp/help.flags"
  grep -E '^\| *`-' "$src/docs/$prog.md" | cut -d'|' -f2 | flags > "$tmp/doc.flags"
  [ -s "$tmp/doc.flags" ] || fail "$prog: docs/$prog.md has no option table"
  while read -r flag; do
    fail "$prog: flag $flag is in docs/$prog.md's option table, not in --help"
  done < <(comm -13 "$tmp/help.flags" "$tmp/doc.flags")

  version=$("$bin/$prog" --version | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1 || true)
  head -1 "$page" | grep -qF "\"wgnet $version\"" ||
    fail "$prog: the manual's header ($(head -1 "$page")) does not name version $version of --version"

  if ! scdoc < "$page" | awk -f "$src/docs/man/tidy.awk" > "$tmp/$prog.8"; then
    fail "$prog: scdoc rejects $page"
    continue
  fi
  lint=$(mandoc -T lint -W warning "$tmp/$prog.8" 2>&1 || true)
  [ -z "$lint" ] || fail "$prog: mandoc -T lint -W warning:"$'\n'"$lint"
  if command -v man >/dev/null; then
    warnings=$(MANPAGER=cat MANWIDTH=80 man --warnings -l "$tmp/$prog.8" 2>&1 >/dev/null || true)
    [ -z "$warnings" ] || fail "$prog: man --warnings:"$'\n'"$warnings"
  fi
  [ "$failures" -gt "$failures_before" ] ||
    echo "$prog: $(wc -l < "$tmp/help.flags") flags, $(wc -l < "$tmp/help.env") environment variables and" \
         "$(wc -l < "$tmp/help.signals") signals agree; the page lints clean"
done

if [ "$failures" -gt 0 ]; then
  echo "man_test: $failures failures"
  exit 1
fi
echo "man_test: the manuals and --help agree"
