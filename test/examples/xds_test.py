#!/usr/bin/env python3
"""The xds example (examples/xds): three greeter servers, a control plane serving a snapshot
file, and a client whose xds:/// channel learns the servers from it.

    xds_test.py --server PATH/xds_greeter_server --client PATH/xds_greeter_client \
        --control-plane PATH/xds_control_plane_go --example-dir examples/xds

Starts three servers on free ports, writes the example's snapshot.json with their addresses in
place of the README's fixed ports and bootstrap.json with the control plane's port, starts the
control plane with -snapshot, and runs the client with GRPC_XDS_BOOTSTRAP. Checks:
  - the client exits 0 and reports 300 calls OK, none failed;
  - each of the three servers answered a fair share of the calls (round robin: 100 each, within
    a few while connections come up);
  - each server's own count, reported when it stops, equals the client's count for it.
"""

import argparse
import json
import os
import re
import shutil
import tempfile

from example_programs import Checks, Program, run, start_server

NAMES = ["server-1", "server-2", "server-3"]
CALLS = 300


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--control-plane", required=True)
    parser.add_argument("--example-dir", required=True)
    args = parser.parse_args()
    checks = Checks()

    servers, ports = {}, []
    for name in NAMES:
        servers[name], port = start_server(name, [args.server, "--name=" + name, "--port=0"])
        if not checks.check(port is not None, "%s reported its port" % name):
            checks.exit()
        ports.append(port)

    work = tempfile.mkdtemp(prefix="ferry_xds_example_")
    with open(os.path.join(args.example_dir, "snapshot.json"), encoding="utf-8") as f:
        snapshot = json.load(f)
    addresses = snapshot["endpoints"][0]["localities"][0]["addresses"]
    checks.check(len(addresses) == 3, "the example's snapshot lists three endpoints")
    snapshot["endpoints"][0]["localities"][0]["addresses"] = ["127.0.0.1:%d" % p for p in ports]
    snapshot_path = os.path.join(work, "snapshot.json")
    with open(snapshot_path, "w", encoding="utf-8") as f:
        json.dump(snapshot, f)

    control_plane = Program("xds_control_plane_go", [args.control_plane, "-port", "0",
                                                     "-snapshot", snapshot_path])
    m = control_plane.wait_for(r"^port (\d+)$", 30)
    if not checks.check(m is not None, "the control plane reported its port"):
        checks.exit()
    with open(os.path.join(args.example_dir, "bootstrap.json"), encoding="utf-8") as f:
        bootstrap = json.load(f)
    bootstrap["xds_servers"][0]["server_uri"] = "127.0.0.1:%s" % m.group(1)
    bootstrap_path = os.path.join(work, "bootstrap.json")
    with open(bootstrap_path, "w", encoding="utf-8") as f:
        json.dump(bootstrap, f)

    os.environ["GRPC_XDS_BOOTSTRAP"] = bootstrap_path
    client = run("xds_greeter_client", [args.client, "--calls=%d" % CALLS], timeout=60)
    checks.check(client.proc.returncode == 0, "the client exited 0 (%s)" % client.proc.returncode)
    checks.has_line(client, "xds_greeter_client: %d calls OK, 0 failed" % CALLS)
    counts = {}
    for line in client.lines():
        m = re.fullmatch(r"xds_greeter_client: (\S+): (\d+) calls", line)
        if m:
            counts[m.group(1)] = int(m.group(2))
    checks.check(sorted(counts) == NAMES, "answers came from exactly %s (got %s)"
                 % (NAMES, sorted(counts)))
    for name in NAMES:
        # Round robin over three: 100 each once every connection is up; the first calls go to
        # the connections ready first.
        checks.check(counts.get(name, 0) >= CALLS // 3 - 30,
                     "%s answered its share of the calls (%d)" % (name, counts.get(name, 0)))

    checks.check(control_plane.stop() == 0, "the control plane exited 0 on SIGTERM")
    for name in NAMES:
        if servers[name].proc.poll() is None:
            servers[name].proc.terminate()
    for name in NAMES:
        checks.check(servers[name].stop() == 0, "%s exited 0 on SIGTERM" % name)
        m = servers[name].wait_for(r"stopped after (\d+) calls$", 0)
        served = int(m.group(1)) if m else None
        checks.check(served == counts.get(name), "%s served as many calls as the client counted "
                     "(%s, %s)" % (name, served, counts.get(name)))
    shutil.rmtree(work, ignore_errors=True)
    checks.exit()


if __name__ == "__main__":
    main()
