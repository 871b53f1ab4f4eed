#!/usr/bin/env python3
"""A strict parser of the Prometheus text exposition format (0.0.4), for the tests.

  prom_text.py < metrics.txt    exit 0 and one JSON object on stdout:
                                {"types": {FAMILY: TYPE}, "samples": {"NAME{K=\"V\",...}": VALUE}}
                                (labels sorted by name); exit 1 with one line per
                                problem (line number first) on stderr
  prom_text.py --self-test      exit 0 when every planted defect below is refused and
                                a valid text is accepted

The format's own rules: metric and label names, label values with only the escapes \\\\,
\\" and \\n, values that Go's ParseFloat takes (NaN, +Inf, -Inf included), an optional
integer timestamp, HELP with only \\\\ and \\n escaped, at most one HELP and one TYPE per
family, TYPE before the family's first sample, a family's lines all together (never
split by another family's), no two samples with the same name and labels, every line
ending in a newline. Stricter than the format, as wgnet writes it: every family has HELP
and TYPE before its samples, no other comments, no blank lines, no trailing comma in a
label set, no reserved "__" label names, counters named *_total with values >= 0.
"""
import json
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
NAME_RE = re.compile(NAME + r"\Z")
HELP_RE = re.compile(r"# HELP (" + NAME + r") (.*)\Z")
TYPE_RE = re.compile(r"# TYPE (" + NAME + r") (counter|gauge|histogram|summary|untyped)\Z")
SAMPLE_RE = re.compile(r"(" + NAME + r")(\{.*\})? (\S+)(?: (-?[0-9]+))?\Z")
PAIR_RE = re.compile(r"(" + LABEL + r')="((?:[^"\\\n]|\\[\\"n])*)"')
FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}


def parse_float(s):
    if s in ("NaN", "+Inf", "-Inf", "Inf", "+inf", "-inf", "inf", "nan"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not FLOAT_RE.match(s):
        raise ValueError(s)
    return float(s)


def parse_labels(text):
    """'{a="1",b="2"}' -> [("a", "1"), ("b", "2")]; ValueError on anything else."""
    inner, pairs, pos = text[1:-1], [], 0
    if inner == "":
        return pairs
    while True:
        m = PAIR_RE.match(inner, pos)
        if not m:
            raise ValueError("bad label at '%s'" % inner[pos:])
        pairs.append((m.group(1), m.group(2)))
        pos = m.end()
        if pos == len(inner):
            return pairs
        if inner[pos] != ",":
            raise ValueError("expected ',' at '%s'" % inner[pos:])
        pos += 1
        if pos == len(inner):
            raise ValueError("trailing comma")


def family_of(name, types):
    """The family a sample name belongs to: itself, or a histogram's/summary's base."""
    if name in types and types[name] not in SUFFIXES:
        return name
    for base, kind in types.items():
        if kind in SUFFIXES and any(name == base + s for s in SUFFIXES[kind]):
            return base
    return name


def parse(text):
    """(types, samples, problems) of one exposition."""
    problems, types, helps, samples = [], {}, {}, {}
    closed = set()  # families whose block has ended
    current = None

    def enter(family, lineno):
        nonlocal current
        if family == current:
            return
        if family in closed:
            problems.append("%d: family %s split (its lines are not together)" % (lineno, family))
        if current is not None:
            closed.add(current)
        current = family

    if text and not text.endswith("\n"):
        problems.append("end: the last line has no newline")
    for lineno, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        if line == "":
            problems.append("%d: blank line" % lineno)
            continue
        if line.startswith("#"):
            m = HELP_RE.match(line)
            if m:
                name, doc = m.groups()
                if not re.fullmatch(r"(?:[^\\]|\\[\\n])*", doc):
                    problems.append("%d: HELP of %s has an escape other than \\\\ and \\n" % (lineno, name))
                if name in helps:
                    problems.append("%d: a second HELP for %s" % (lineno, name))
                helps[name] = doc
                enter(name, lineno)
                continue
            m = TYPE_RE.match(line)
            if m:
                name, kind = m.groups()
                if name in types:
                    problems.append("%d: a second TYPE for %s" % (lineno, name))
                if any(family_of(s.split("{")[0], {name: kind}) == name for s in samples):
                    problems.append("%d: TYPE of %s after its samples" % (lineno, name))
                types[name] = kind
                enter(name, lineno)
                continue
            problems.append("%d: not a HELP or TYPE line: %r" % (lineno, line))
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            problems.append("%d: not a sample line: %r" % (lineno, line))
            continue
        name, label_text, value_text, _timestamp = m.groups()
        try:
            labels = parse_labels(label_text) if label_text else []
        except ValueError as e:
            problems.append("%d: labels of %s: %s" % (lineno, name, e))
            continue
        names = [k for k, _ in labels]
        if len(set(names)) != len(names):
            problems.append("%d: a label twice in %s" % (lineno, line))
        if any(k.startswith("__") for k in names):
            problems.append("%d: reserved label name in %s" % (lineno, line))
        try:
            value = parse_float(value_text)
        except ValueError:
            problems.append("%d: value %r of %s is not a float" % (lineno, value_text, name))
            continue
        family = family_of(name, types)
        if family not in types:
            problems.append("%d: %s has no TYPE before it" % (lineno, name))
        if family not in helps:
            problems.append("%d: %s has no HELP before it" % (lineno, name))
        enter(family, lineno)
        if types.get(family) == "counter":
            if not family.endswith("_total"):
                problems.append("%d: counter %s does not end in _total" % (lineno, family))
            if math.isnan(value) or value < 0:
                problems.append("%d: counter %s has value %s" % (lineno, name, value_text))
        key = name + "{" + ",".join('%s="%s"' % kv for kv in sorted(labels)) + "}"
        if key in samples:
            problems.append("%d: %s appears twice" % (lineno, key))
        samples[key] = value
    for name in helps:
        if name not in types:
            problems.append("end: %s has HELP but no TYPE" % name)
    return types, samples, problems


GOOD = """# HELP a_total Things, with a \\\\ and a \\n.
# TYPE a_total counter
a_total{peer="0"} 1
a_total{peer="1",reason="x \\" y"} 2e3
# HELP b A gauge.
# TYPE b gauge
b -1.5
b{x="NaN"} NaN
# HELP h A histogram.
# TYPE h histogram
h_bucket{le="+Inf"} 3 1700000000000
h_sum 4.5
h_count 3
"""

# Each planted defect: (what, a text that must be refused).
BAD = [
    ("no newline at the end", GOOD.rstrip("\n")),
    ("a split family", GOOD + "a_total{peer=\"2\"} 3\n"),
    ("a second TYPE", GOOD + "# TYPE b gauge\n"),
    ("a second HELP", GOOD.replace("# TYPE b gauge", "# HELP b again\n# TYPE b gauge")),
    ("a sample without TYPE", GOOD + "# HELP c C.\nc 1\n"),
    ("a sample without HELP", GOOD + "# TYPE c gauge\nc 1\n"),
    ("TYPE after the samples", "# HELP c C.\nc 1\n# TYPE c gauge\n"),
    ("a counter without _total", GOOD + "# HELP c C.\n# TYPE c counter\nc 1\n"),
    ("a negative counter", GOOD.replace('a_total{peer="0"} 1', 'a_total{peer="0"} -1')),
    ("a value that is no float", GOOD.replace("b -1.5", "b 1,5")),
    ("a hex value", GOOD.replace("b -1.5", "b 0x10")),
    ("a bad metric name", GOOD + "# HELP 1c C.\n# TYPE 1c gauge\n1c 1\n"),
    ("a bad label name", GOOD.replace('{peer="0"}', '{pe-er="0"}')),
    ("an unquoted label value", GOOD.replace('{peer="0"}', "{peer=0}")),
    ("a bad escape in a label value", GOOD.replace('{peer="0"}', '{peer="\\t"}')),
    ("a trailing comma", GOOD.replace('{peer="0"}', '{peer="0",}')),
    ("a label twice", GOOD.replace('{peer="0"}', '{peer="0",peer="1"}')),
    ("a reserved label", GOOD.replace('{peer="0"}', '{__name__="0"}')),
    ("the same series twice", GOOD.replace('a_total{peer="1",reason="x \\" y"} 2e3', 'a_total{peer="0"} 2')),
    ("a blank line", GOOD.replace("# HELP b", "\n# HELP b")),
    ("a comment", GOOD + "# just a comment\n"),
    ("an unknown type", GOOD + "# HELP c C.\n# TYPE c countr\nc 1\n"),
    ("a bad HELP escape", GOOD.replace("A gauge.", "A \\t gauge.")),
    ("two spaces before the value", GOOD.replace("b -1.5", "b  -1.5")),
]


def self_test():
    ok = True
    _, samples, problems = parse(GOOD)
    if problems or len(samples) != 7:
        print("FAIL: the valid text was refused: %s" % problems)
        ok = False
    for what, text in BAD:
        _, _, problems = parse(text)
        if not problems:
            print("FAIL: %s was accepted" % what)
            ok = False
    if ok:
        print("the valid text is accepted and all %d planted defects are refused" % len(BAD))
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    types, samples, problems = parse(sys.stdin.read())
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    json.dump({"types": types, "samples": samples}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
