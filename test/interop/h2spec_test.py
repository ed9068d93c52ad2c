#!/usr/bin/env python3
"""Runs h2spec (the HTTP/2 conformance tester) against a server and checks its results against the
list of expected outcomes kept in the repo.

    h2spec_test.py --h2spec PATH --expected FILE --port PORT [--timeout S]

Run through run_pair.py, which starts the server on PORT. Every h2spec case must pass, except
the ones FILE lists: `fail ID` (must fail), `skip ID` (h2spec must skip it) or `flaky ID` (may
pass or fail, by timing the list explains), where ID is
`<package>/<n>` as h2spec numbers them, e.g. `http2/5.1/8` for section 5.1, case 8 (`generic/2/3`
for the generic suite). An unlisted case that fails, or a listed one with another outcome (e.g.
an expected failure that now passes), fails the test, so the list stays honest. `#` starts a
comment. Prints one line per case that is not a plain pass, then a summary. Standard library.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def load_expected(path):
    expected = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or parts[0] not in ("fail", "skip", "flaky"):
                sys.exit("%s:%d: expected 'fail ID', 'skip ID' or 'flaky ID', got %r" %
                         (path, number, line))
            if parts[1] in expected:
                sys.exit("%s:%d: %s listed twice" % (path, number, parts[1]))
            expected[parts[1]] = parts[0]
    return expected


def run_h2spec(h2spec, port, timeout):
    """Returns {ID: (outcome, description)} from h2spec's JUnit report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "h2spec.xml")
        # Exit status 1 just means some case failed: the report says which.
        proc = subprocess.run(
            [h2spec, "--host", "127.0.0.1", "--port", str(port), "--timeout", str(timeout),
             "--junit-report", report],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not os.path.exists(report):
            print(proc.stdout)
            sys.exit("h2spec wrote no report (exit %d)" % proc.returncode)
        root = ET.parse(report).getroot()
    results = {}
    for suite in root.iter("testsuite"):
        for n, case in enumerate(suite.iter("testcase"), 1):
            if case.find("skipped") is not None:
                outcome = "skip"
            elif case.find("failure") is not None or case.find("error") is not None:
                outcome = "fail"
            else:
                outcome = "pass"
            results["%s/%d" % (suite.get("package"), n)] = (outcome, case.get("classname"))
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--h2spec", required=True)
    parser.add_argument("--expected", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--timeout", type=int, default=2, help="h2spec's per-case timeout (s)")
    args = parser.parse_args()

    expected = load_expected(args.expected)
    results = run_h2spec(args.h2spec, args.port, args.timeout)
    if not results:
        sys.exit("h2spec ran no case")

    problems = 0
    for case_id, want in sorted(expected.items()):
        if case_id not in results:
            print("FAIL %s: listed as %s, but h2spec has no such case" % (case_id, want))
            problems += 1
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for case_id, (got, desc) in results.items():
        counts[got] += 1
        want = expected.get(case_id, "pass")
        if want == "flaky" and got in ("pass", "fail"):
            if got == "fail":
                print("expected (flaky) fail %s: %s" % (case_id, desc))
            continue
        if got == want:
            if got != "pass":
                print("expected %s %s: %s" % (got, case_id, desc))
            continue
        problems += 1
        if want == "pass":
            print("FAIL %s: unexpected %s: %s" % (case_id, got, desc))
        else:
            print("FAIL %s: listed as %s, now %s: %s (update %s)" %
                  (case_id, want, got, desc, os.path.basename(args.expected)))
    print("h2spec: %d cases, %d passed, %d failed, %d skipped; %d not as expected" %
          (len(results), counts["pass"], counts["fail"], counts["skip"], problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
