#!/usr/bin/env python3
"""The README's curl call, exactly as the README shows it: the greeter server is started, the
`$ curl ...` command under "A greeter" is read from README.md (its port replaced by the server's),
run, and its output compared with the line the README prints after it. JSON over HTTP/1.1
(the Connect protocol), no gRPC client involved.

    greeter_curl_test.py --server build/examples/greeter/greeter_server --readme README.md
"""

import argparse
import re
import shlex
import subprocess
import sys

from example_programs import Checks, start_server


def readme_call(readme):
    """(the curl command's argv, the output the README shows) from the first `$ curl` block."""
    lines = open(readme, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("$ curl"):
            command = line.strip()[2:]
            j = i
            while command.endswith("\\"):
                j += 1
                command = command[:-1] + " " + lines[j].strip()
            return shlex.split(command), lines[j + 1].strip()
    return None, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--readme", required=True)
    args = parser.parse_args()
    checks = Checks()
    argv, expected = readme_call(args.readme)
    if not checks.check(argv is not None, "README.md shows a curl call"):
        return checks.exit()
    server, port = start_server("greeter_server", [args.server, "--port=0"])
    if not checks.check(port is not None, "greeter_server listens"):
        return checks.exit()
    argv = [re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:%d" % port, a) for a in argv]
    result = subprocess.run(argv + ["--silent", "--show-error", "--max-time", "10"],
                            capture_output=True, text=True)
    checks.check(result.returncode == 0, "curl exited 0 (%s)" % result.stderr.strip())
    checks.check(result.stdout.strip() == expected,
                 "curl printed the README's %r (got %r)" % (expected, result.stdout.strip()))
    checks.check(server.stop() == 0, "greeter_server stopped cleanly")
    return checks.exit()


if __name__ == "__main__":
    sys.exit(main())
