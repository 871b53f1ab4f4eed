#!/usr/bin/env bash
# Checks that the comments of the repository's own sources state contracts, not history:
# C++ comments (// and /* */ in *.cpp, *.hpp, *.h) and # comments (*.sh, *.py,
# CMakeLists.txt, *.cmake) under bind netstack tun tunlinux wg wgnet examples tests
# scripts cmake, our lwIP options and glue, and the top CMakeLists.txt (not lwIP's own
# sources, build dirs, fuzz corpora or test vectors) carry no
#   - date (year-month-day, day.month.year, a month's name with a year);
#   - commit-hash-like token (7-40 lowercase hex digits with a digit and a letter);
#   - history phrase (HISTORY below: a past habit, a round of work, the fix's before
#     and after, a year that something lasted until);
#   - issue reference (the word issue or PR with a number, or a hash sign and digits);
#   - reference to notes outside the repository (the shared folder, a Markdown file
#     that is not in the repository).
# String literals are not comments. Files whose path starts with a prefix listed in
# scripts/check_comments.exclude are skipped; a line "!PATH" there keeps PATH checked.
# Each problem is printed as FILE:LINE: message; the exit status is 1 if there is any.
# Usage: check_comments.sh [REPOSITORY_ROOT]   (default: the repository holding this script)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
exec python3 - "$root" <<'PY'
import io
import os
import re
import sys
import tokenize

root = os.path.realpath(sys.argv[1])
DIRS = ["bind", "netstack", "tun", "tunlinux", "wg", "wgnet", "examples", "tests", "scripts", "cmake",
        "third_party/lwip"]
SKIP_DIRS = {"tests/fuzz/corpus", "tests/vectors", "third_party/lwip/src"}
CXX = (".cpp", ".hpp", ".h")
HASH = (".sh", ".py", ".cmake")
# Hex words that are not commit hashes and may appear in comments. Keep it short.
ALLOWED_HEX = set()


def read_exclusions():
    skip, keep = [], []
    path = os.path.join(root, "scripts", "check_comments.exclude")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("!"):
                    keep.append(line[1:])
                else:
                    skip.append(line)
    return skip, keep


SKIP, KEEP = read_exclusions()


def excluded(rel):
    if any(rel == k or rel.startswith(k.rstrip("/") + "/") for k in KEEP):
        return False
    return any(rel.startswith(s) for s in SKIP)


def sources():
    found = []
    if os.path.isfile(os.path.join(root, "CMakeLists.txt")):
        found.append("CMakeLists.txt")
    for top in DIRS:
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for here, dirs, names in os.walk(base):
            rel_here = os.path.relpath(here, root)
            dirs[:] = sorted(d for d in dirs if not d.startswith(("build", "."))
                             and os.path.join(rel_here, d) not in SKIP_DIRS)
            for name in sorted(names):
                if name.endswith(CXX + HASH) or name == "CMakeLists.txt":
                    found.append(os.path.join(rel_here, name))
    return [rel for rel in found if not excluded(rel)]


def cxx_comments(text):
    """(line number, text) of every line of every // and /* */ comment."""
    out = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 2:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end + 2
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if j < n and text[j] == '"' and word in ("R", "u8R", "uR", "UR", "LR"):
                m = re.compile(r'"([^()\\\s]{0,16})\(').match(text, j)
                if m:
                    close = text.find(")" + m.group(1) + '"', m.end())
                    close = n if close < 0 else close + len(m.group(1)) + 2
                    line += text.count("\n", i, close)
                    i = close
                    continue
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "_.'" or
                             (text[j] in "+-" and text[j - 1] in "eEpP")):
                j += 1
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1 if j < n and text[j] == c else j
        else:
            i += 1
    return out


def hash_comments_heuristic(text, quotes):
    """(line number, text) of every # comment: a # that starts a word outside a quote
    opened on the same line (good enough for shell, CMake and embedded Python)."""
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        quote, i = None, 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 1
                elif c == quote:
                    quote = None
            elif c == "\\":
                i += 1
            elif c in quotes:
                quote = c
            elif c == "#" and (i == 0 or line[i - 1] in " \t;(|&"):
                out.append((number, line[i + 1:]))
                break
            i += 1
    return out


def python_comments(text):
    try:
        return [(tok.start[0], tok.string[1:])
                for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return hash_comments_heuristic(text, "\"'")


MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|"
          r"Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
DATES = [
    re.compile(r"\b(?:19|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])\b"),
    re.compile(r"\b(?:0?[1-9]|[12]\d|3[01])[./](?:0?[1-9]|1[0-2])[./](?:19|20)\d\d\b"),
    re.compile(r"\b(?:\d{1,2}(?:st|nd|rd|th)?\s+)?" + MONTHS + r"\.?\s+(?:\d{1,2},?\s+)?(?:19|20)\d\d\b"),
]
HEX = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
HISTORY = re.compile(
    r"(?i)(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bbeing )(?<!\bwas )(?<!\bwere )"
    r"\bused to\b"
    r"|\b(?:previously|formerly|(?:this|last) round"
    r"|(?:before|after) the fix|until (?:19|20)\d\d)\b")
ISSUE = [
    re.compile(r"(?i)\bissues?\s+#?\d+"),
    re.compile(r"\bPRs?\s+#?\d+"),
    re.compile(r"(?i)\bpull\s+requests?\s+#?\d+"),
    re.compile(r"(?<![\w&/(#])#\d+\b"),
]
SHARED = re.compile(r"(?:\.\./|/work/)shared\b|\bPITFALLS\b(?!\.md)")
MARKDOWN = re.compile(r"(?<![\w./-])([\w./-]*\w\.md)\b")

markdown_names = set()
for here, dirs, names in os.walk(root):
    dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "third_party"]
    markdown_names.update(n for n in names if n.endswith(".md"))


def markdown_exists(rel, target):
    if target.startswith("/"):
        return os.path.isfile(target)
    if os.path.exists(os.path.normpath(os.path.join(root, os.path.dirname(rel), target))):
        return True
    if os.path.exists(os.path.normpath(os.path.join(root, target))):
        return True
    return "/" not in target and target in markdown_names


problems = []
files = sources()
for rel in files:
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        continue
    if rel.endswith(CXX):
        comments = cxx_comments(text)
    elif rel.endswith(".py"):
        comments = python_comments(text)
    elif rel.endswith(".sh"):
        comments = hash_comments_heuristic(text, "\"'")
    else:
        comments = hash_comments_heuristic(text, '"')

    def report(number, message):
        problems.append(f"{rel}:{number}: {message}")

    for number, comment in comments:
        for pattern in DATES:
            for m in pattern.finditer(comment):
                report(number, f"date '{m.group(0)}' in a comment: history goes in git, not the code")
        for word in HEX.findall(comment):
            if (re.search(r"[0-9]", word) and re.search(r"[a-f]", word)
                    and word not in ALLOWED_HEX):
                report(number, f"'{word}' looks like a commit hash: history goes in git, not the code")
        for m in HISTORY.finditer(comment):
            report(number, f"'{m.group(0)}' tells history: state the contract as it is now")
        for pattern in ISSUE:
            for m in pattern.finditer(comment):
                report(number, f"'{m.group(0)}' refers to an issue: say what the code does instead")
        for m in SHARED.finditer(comment):
            report(number, f"'{m.group(0)}' points outside the repository")
        for m in MARKDOWN.finditer(comment):
            if not markdown_exists(rel, m.group(1)):
                report(number, f"'{m.group(1)}' is not in the repository")

for p in problems:
    print(p)
if problems:
    print(f"check_comments: {len(problems)} problem(s) in {len(files)} file(s)")
    sys.exit(1)
print(f"check_comments: {len(files)} files clean")
PY
