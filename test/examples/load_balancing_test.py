#!/usr/bin/env python3
"""The load_balancing example (examples/load_balancing): three servers, one round_robin
channel, one server stopped mid-run, no call lost.

    load_balancing_test.py [--kill] --server PATH/load_balancing_server \
        --client PATH/load_balancing_client

Starts three servers (server-1..3) and the client over all three. Once the client has made its
first calls and every server answered, stops server-2 while calls are in flight: SIGTERM (a
graceful shutdown: GOAWAY, the calls in flight finish), or with --kill SIGKILL (its connection
breaks under its calls, which the client's retry policy makes again elsewhere). Waits for it to
exit and tells the client (a line on its stdin), which makes 300 more calls. Checks:
  - the client exits 0 and reports no failed call;
  - every server got calls before the stop; after it, server-2 got none and the other two some;
  - each server that reports its count (all three when stopped gracefully, the other two when
    server-2 is killed) served exactly as many calls as the client got answers from it: no
    answer was lost on the way back and no call was processed twice;
  - the servers stopped with SIGTERM exit 0.
"""

import argparse
import re

from example_programs import Checks, Program, start_server

NAMES = ["server-1", "server-2", "server-3"]
STOPPED = "server-2"


def served(server):
    """The count a stopped server reported, or None."""
    m = server.wait_for(r"stopped after (\d+) calls$", 0)
    return int(m.group(1)) if m else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    args = parser.parse_args()
    checks = Checks()

    servers, ports = {}, []
    for name in NAMES:
        servers[name], port = start_server(name, [args.server, "--name=" + name, "--port=0"])
        if not checks.check(port is not None, "%s reported its port" % name):
            checks.exit()
        ports.append(port)
    target = "--target=ipv4:" + ",".join("127.0.0.1:%d" % p for p in ports)
    client = Program("load_balancing_client", [args.client, target, "--servers=3",
                                               "--calls_after=300"], stdin=True)

    if not checks.check(client.wait_for(r"stop one server now", 30) is not None,
                        "the client saw all three servers answer"):
        checks.exit()
    if args.kill:
        servers[STOPPED].kill()
        checks.check(servers[STOPPED].proc.returncode == -9, "%s was killed" % STOPPED)
    else:
        checks.check(servers[STOPPED].stop() == 0, "%s stopped (SIGTERM) and exited 0" % STOPPED)
    client.write_line("")
    checks.check(client.wait(60) == 0, "the client exited 0")
    checks.has_line(client, "load_balancing_client: OK: no call failed; every server got calls "
                    "before the stop, %s none after it" % STOPPED)

    counts = {}
    for line in client.lines():
        m = re.fullmatch(r"load_balancing_client: (\S+): (\d+) before, (\d+) during, (\d+) after "
                         r"the stop", line)
        if m:
            counts[m.group(1)] = [int(g) for g in m.groups()[1:]]
    m = client.wait_for(r"load_balancing_client: (\d+) calls OK, (\d+) failed$", 0)
    failed = int(m.group(2)) if m else None
    checks.check(failed == 0, "no call failed (%s)" % failed)
    checks.check(sorted(counts) == NAMES, "answers came from exactly %s (got %s)"
                 % (NAMES, sorted(counts)))
    for name in NAMES:
        before, _, after = counts.get(name, [0, 0, 0])
        checks.check(before > 0, "%s got calls before the stop (%d)" % (name, before))
        if name == STOPPED:
            checks.check(after == 0, "%s got no call after the stop (%d)" % (name, after))
        else:
            checks.check(after > 0, "%s got calls after the stop (%d)" % (name, after))

    for name in NAMES:  # SIGTERM to all first: their shutdowns overlap
        if servers[name].proc.poll() is None:
            servers[name].proc.terminate()
    for name in NAMES:
        if name == STOPPED and args.kill:
            continue
        if name != STOPPED:
            checks.check(servers[name].stop() == 0, "%s exited 0 on SIGTERM" % name)
        answers = sum(counts.get(name, []))
        checks.check(served(servers[name]) == answers,
                     "%s served as many calls as the client got answers from it (%s, %d)"
                     % (name, served(servers[name]), answers))
    checks.exit()


if __name__ == "__main__":
    main()
