#!/usr/bin/env python3
"""Checks that every ctest test of a build carries exactly one tier label, and counts them.

    scripts/test_tiers.py BUILD_DIR

The tiers are unit, integration and interop (test/CMakeLists.txt says which test goes where);
scripts/test.sh runs them by label, so a test without a tier would silently never run in
`--quick`, and one with two would run twice. Reads `ctest --show-only=json-v1` (which runs
nothing; after the build, so googletest's cases are discovered). Prints `tiers: N unit, ...`;
exits 1 naming each test with no tier or several, 2 if ctest cannot be read. Standard library only.
"""

import json
import subprocess
import sys

TIERS = ("unit", "integration", "interop")


def main():
    if len(sys.argv) != 2:
        print("usage: scripts/test_tiers.py BUILD_DIR", file=sys.stderr)
        return 2
    try:
        out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=sys.argv[1],
                             capture_output=True, check=True, timeout=120).stdout
        tests = json.loads(out)["tests"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        print("test_tiers: cannot list the tests: %s" % e, file=sys.stderr)
        return 2

    counts = dict.fromkeys(TIERS, 0)
    bad = []
    for test in tests:
        labels = next((p["value"] for p in test.get("properties", []) if p["name"] == "LABELS"), [])
        tiers = [l for l in labels if l in TIERS]
        if len(tiers) == 1:
            counts[tiers[0]] += 1
        else:
            bad.append("%s (labels: %s)" % (test["name"], ", ".join(labels) or "none"))
    print("tiers: " + ", ".join("%d %s" % (counts[t], t) for t in TIERS))
    for line in bad:
        print("test_tiers: not exactly one tier: " + line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
