#!/usr/bin/python3
"""Reads pynfs's results (the pickle testserver.py --outfile writes) and
judges them against a list of expected failures. Run by tests/pynfs/run.sh
with the built pynfs tree's nfs4.1 directory as the working directory (the
pickle names pynfs's own classes). See docs/pynfs.md.

    verdict.py --results PICKLE --expected FILE --label TEXT --out DIR

Writes DIR/summary.txt (counts, the failing and skipped codes) and
DIR/outcomes.tsv (every asked test: code, outcome, pynfs's message), prints
the report, and exits 0 only when every asked test's outcome agrees with
the list: a listed test must not pass (fail or skip), an unlisted one must
pass (or warn). An interrupted run (a test never run) fails.
"""

import argparse
import os
import pickle
import re
import sys

# pynfs's tree: use_local puts ../xdr and .. on sys.path (as testserver.py).
sys.path.insert(0, os.getcwd())
import use_local  # noqa: E402,F401
import testmod  # noqa: E402

# A code as pynfs spells it (testmod's test code pattern: letters, digits,
# then an optional suffix).
CODE_RE = re.compile(r"^[A-Za-z]+[0-9]*[A-Za-z0-9_]*$")
# A reason must name the RFC section the behaviour is judged by.
RFC_RE = re.compile(r"\bRFC ?[0-9]{4}\b")


def outcome(t):
    """The test's outcome as one word, or None when it was not asked."""
    r = t.result
    if r == testmod.TEST_OMIT and r.default:
        return None  # not asked (filtered out by the command line)
    if r == testmod.TEST_PASS:
        return "pass"
    if r in (testmod.TEST_WARN, testmod.TEST_NOTSUP):
        # pynfs counts both as warnings: a pass, with a note.
        return "warn"
    if r == testmod.TEST_FAIL:
        return "fail"
    if r in (testmod.TEST_OMIT, testmod.TEST_WAIT):
        return "skip"  # a dependency failed or was unsupported
    return "notrun"  # interrupted (the time bound) or still running


def read_expected(path, known):
    """CODE -> reason; every line `CODE  reason (RFC NNNN section)`."""
    exp = {}
    errors = []
    if path is None:
        return exp, errors
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            code = parts[0]
            reason = parts[1].strip() if len(parts) > 1 else ""
            where = "%s:%d" % (path, n)
            if not CODE_RE.match(code):
                errors.append("%s: %r is not a test code" % (where, code))
            elif code not in known:
                errors.append("%s: %s is no test of this pynfs" % (where, code))
            elif code in exp:
                errors.append("%s: %s is listed twice" % (where, code))
            elif not RFC_RE.search(reason):
                errors.append("%s: %s needs a reason naming its RFC section" % (where, code))
            else:
                exp[code] = reason
    return exp, errors


def natural(code):
    """SEQ2 before SEQ10: letters, then the number, then the rest."""
    m = re.match(r"^([A-Za-z]+)([0-9]*)(.*)$", code)
    if not m:
        return (code, 0, "")
    return (m.group(1), int(m.group(2) or 0), m.group(3))


def first_line(msg):
    msg = " ".join(str(msg).split())
    return msg[:200]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--expected")
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=int, default=None)
    a = ap.parse_args()

    with open(a.results, "rb") as f:
        tests = pickle.load(f)
    known = {t.code for t in tests}
    expected, errors = read_expected(a.expected, known)

    asked = []
    for t in sorted(tests, key=lambda t: natural(t.code)):
        o = outcome(t)
        if o is not None:
            asked.append((t.code, t.name, o, first_line(t.result.msg)))
    count = {k: 0 for k in ("pass", "warn", "fail", "skip", "notrun")}
    for _, _, o, _ in asked:
        count[o] += 1

    unexpected = [x for x in asked if x[2] in ("fail", "skip") and x[0] not in expected]
    stale = [x for x in asked if x[2] in ("pass", "warn") and x[0] in expected]
    held = [x for x in asked if x[2] in ("fail", "skip") and x[0] in expected]
    notrun = [x for x in asked if x[2] == "notrun"]

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "outcomes.tsv"), "w") as f:
        f.write("code\tname\toutcome\tmessage\n")
        for code, name, o, msg in asked:
            f.write("%s\t%s\t%s\t%s\n" % (code, name, o, msg))

    took = "" if a.seconds is None else " in %d s" % a.seconds
    if count["notrun"]:
        scope = "interrupted, %d of %d tests reached" % (len(asked) - count["notrun"], len(tests))
    else:
        scope = "%d of %d tests asked" % (len(asked), len(tests))
    head = "pynfs %s: %s: %d passed, %d warned, %d failed, %d skipped, %d not run%s" % (
        a.label, scope, count["pass"], count["warn"], count["fail"], count["skip"],
        count["notrun"], took)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(head + "\n")
        for code, name, o, msg in asked:
            if o not in ("pass",):
                f.write("%s %s %s: %s\n" % (o, code, name, msg))

    print(head)
    for code, name, o, msg in asked:
        if o == "warn":
            print("  warned   %-8s %s: %s" % (code, name, msg))
    for e in errors:
        print("LIST ERROR %s" % e)
    for code, name, o, msg in held:
        print("  expected %-8s %s (%s): %s" % (code, name, o, expected[code]))
    for code, name, o, msg in unexpected:
        print("UNEXPECTED %-8s %s %s: %s" % (code, name, "FAILED" if o == "fail" else "SKIPPED", msg))
    for code, name, o, msg in stale:
        print("NOW PASSES %-8s %s: listed as expected to fail (%s); take it off the list" % (
            code, name, expected[code]))
    if notrun:
        # Tests not yet reached are indistinguishable from unasked ones here.
        print("NOT RUN    %d tests: the run was interrupted (--timeout, or the server stopped answering); first: %s" % (
            len(notrun), " ".join(x[0] for x in notrun[:10])))
    if unexpected:
        print("# to accept a failure, add `CODE  reason (RFC NNNN section)` to %s" % (
            a.expected or "an expected-failures list"))
    disagree = len(unexpected) + len(stale) + len(notrun)
    print("# expected failures listed: %d, failing as listed: %d, now passing: %d" % (
        len(expected), len(held), len(stale)))
    # The closing line counts tests whose outcome agrees with the list (a
    # listed failure that fails agrees); a broken list line counts failed.
    print("# the line below: tests whose outcome agrees with the list, and not")
    print("pynfs: %d passed, %d failed" % (len(asked) - disagree, disagree + len(errors)))
    return 0 if disagree == 0 and not errors and asked else 1


if __name__ == "__main__":
    sys.exit(main())
