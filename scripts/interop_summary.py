#!/usr/bin/env python3
"""Summarizes one ctest label from a run's JUnit file: a line per test and `N passed, M failed`.

    scripts/interop_summary.py BUILD_DIR JUNIT_FILE [--label interop]

Runs after `ctest --output-junit JUNIT_FILE` in BUILD_DIR, so the tests run once. The tests of the
label and their order come from `ctest --show-only=json-v1` (which runs nothing); their results and
times from the JUnit file (which has no labels). Prints `PASS name  1.23s` or `FAIL name  1.23s
(first failure line of its output)` per test, then `LABEL: N passed, M failed`. A test of the label
that the JUnit file lacks or marks anything but passed (failed, timed out, not run) counts as
failed. Exits 1 if any failed or the label has no tests, 2 if the inputs cannot be read.
Standard library only.
"""

import argparse
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

# Lines of a test's output that say why it failed, in the formats of run_pair.py, the interop
# clients (ferry, grpc-go, grpcio, tools_test.py), grpc-java and connectconformance.
WHY = re.compile(r"^(FAIL\b|FAILED: |run_pair: FAIL|Exception in thread|.*\bpanic:|.*Sanitizer)")


def label_tests(build_dir, label):
    out = subprocess.run(["ctest", "--show-only=json-v1", "-L", label], cwd=build_dir,
                         capture_output=True, check=True, timeout=120).stdout
    return [t["name"] for t in json.loads(out)["tests"]]


def junit_results(path):
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        results[case.get("name")] = (case.get("status"), float(case.get("time") or 0),
                                     case.findtext("system-out") or "")
    return results


def why_failed(output):
    for line in output.splitlines():
        if WHY.match(line.strip()):
            return line.strip()[:200]
    lines = [l for l in output.splitlines() if l.strip()]
    return lines[-1].strip()[:200] if lines else "no output"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir")
    ap.add_argument("junit")
    ap.add_argument("--label", default="interop")
    args = ap.parse_args()
    try:
        names = label_tests(args.build_dir, args.label)
        results = junit_results(args.junit)
    except (OSError, subprocess.SubprocessError, ValueError, ET.ParseError) as e:
        print("interop_summary: cannot read the results: %s" % e, file=sys.stderr)
        return 2

    passed = failed = 0
    width = max((len(n) for n in names), default=0)
    for name in names:
        status, seconds, output = results.get(name, ("not in the JUnit file", 0.0, ""))
        if status == "run":
            passed += 1
            print("PASS %-*s %7.2fs" % (width, name, seconds))
        else:
            failed += 1
            why = why_failed(output) if status == "fail" else status
            print("FAIL %-*s %7.2fs  (%s)" % (width, name, seconds, why))
    print("%s: %d passed, %d failed" % (args.label, passed, failed))
    if not names:
        print("interop_summary: no tests have the label %r" % args.label, file=sys.stderr)
        return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
