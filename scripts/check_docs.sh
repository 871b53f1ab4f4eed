#!/usr/bin/env bash
# Checks the user documentation (README.md and docs/*.md; docs/man/ is not Markdown):
#   - README.md has at most 300 lines;
#   - every relative link [x](path), [x](path#anchor) and [x](#anchor) resolves to a file
#     inside the repository, and its anchor to a heading of that Markdown file;
#   - outside fenced code blocks, no commit-hash-like token (a word of 7-40 lowercase hex
#     digits with at least one digit and one letter) and no issue reference (the word
#     issue or PR followed by a number, or a hash sign followed by digits).
# Each problem is printed as FILE:LINE: message; the exit status is 1 if there is any.
# Usage: check_docs.sh [REPOSITORY_ROOT]   (default: the repository holding this script)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
exec python3 - "$root" <<'PY'
import os
import re
import sys

MAX_README_LINES = 300
# Hex words that are not commit hashes and must appear in the docs. Keep it short.
ALLOWED_HEX = set()

root = os.path.realpath(sys.argv[1])
files = []
if os.path.isfile(os.path.join(root, "README.md")):
    files.append("README.md")
docs = os.path.join(root, "docs")
if os.path.isdir(docs):
    files += sorted("docs/" + f for f in os.listdir(docs)
                    if f.endswith(".md") and os.path.isfile(os.path.join(docs, f)))
problems = []


def report(path, line, message):
    problems.append(f"{path}:{line}: {message}")


FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def prose_lines(text):
    """(line number, line) of every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is None:
            yield number, line


def slug(heading):
    """The anchor GitHub gives a heading."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        for _, line in prose_lines(text):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            for a in re.findall(r"""<a\s+(?:name|id)=["']([^"']+)["']""", line):
                found.add(a)
        anchor_cache[path] = found
    return anchor_cache[path]


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HEX = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
ISSUE = [
    re.compile(r"(?i)\bissues?\s+#?\d+"),
    re.compile(r"\bPRs?\s+#?\d+"),
    re.compile(r"(?i)\bpull\s+requests?\s+#?\d+"),
    re.compile(r"(?<![\w&/(#])#\d+\b"),
]


def check_link(rel, number, target):
    path, _, anchor = target.partition("#")
    here = os.path.join(root, rel)
    if not path:
        dest = here
    elif path.startswith("/"):
        report(rel, number, f"absolute link '{target}': use a path relative to the file")
        return
    else:
        dest = os.path.normpath(os.path.join(os.path.dirname(here), path))
        real = os.path.realpath(dest)
        if os.path.commonpath([root, real]) != root:
            report(rel, number, f"link '{target}' points outside the repository")
            return
        if not os.path.exists(real):
            report(rel, number, f"broken link '{target}': {os.path.relpath(dest, root)} does not exist")
            return
        dest = real
    if anchor:
        if not (os.path.isfile(dest) and dest.endswith(".md")):
            report(rel, number, f"link '{target}': an anchor needs a Markdown file")
        elif anchor not in anchors(dest):
            report(rel, number, f"broken anchor '{target}': no heading '#{anchor}' in "
                   f"{os.path.relpath(dest, root)}")


for rel in files:
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    if rel == "README.md":
        count = len(text.splitlines())
        if count > MAX_README_LINES:
            report(rel, MAX_README_LINES + 1,
                   f"README.md has {count} lines, more than {MAX_README_LINES}: move details to docs/")
    for number, line in prose_lines(text):
        for word in HEX.findall(line):
            if (re.search(r"[0-9]", word) and re.search(r"[a-f]", word)
                    and word not in ALLOWED_HEX):
                report(rel, number, f"'{word}' looks like a commit hash: history goes in CHANGELOG.md, "
                       "without hashes")
        for pattern in ISSUE:
            for m in pattern.finditer(line):
                report(rel, number, f"'{m.group(0)}' refers to an issue: say what changed instead")
        code_free = re.sub(r"(`+).*?\1", "", line)  # a link inside `code` is not a link
        for m in LINK.finditer(code_free):
            target = m.group(1)
            if target and not SCHEME.match(target):
                check_link(rel, number, target)

for p in problems:
    print(p)
if problems:
    print(f"check_docs: {len(problems)} problem(s) in {len(files)} file(s)")
    sys.exit(1)
print(f"check_docs: {len(files)} files clean")
PY
