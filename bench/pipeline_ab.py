#!/usr/bin/env python3
"""A/B of ferry's write policy: servers side by side under h2load and ferry's own client.

Runs the head-to-head scenarios (bench/head_to_head/run.py, whose helpers it uses) against any
set of echo servers given as LABEL=BINARY (a ferry build's h2h_ferry_server, the same from a
baseline build, h2h_grpc_async_server, grpcxx's echo server ...), plus ferry's own client
(bench/echo_client, 64 calls in flight on one connection, and 1 in flight for latency) against
the ferry servers. Each server is pinned to core 0 and its load generator to core 1; servers
take turns within each round, so drift on a shared machine hits them alike. Prints a table of
medians over the rounds: calls/s, server CPU µs per call (/proc), server core busy %, the load
generator's busy %; for ferry's client also its p50 latency.

  bench/pipeline_ab.py --server new=build/bench/head_to_head/h2h_ferry_server \\
      --server main=/tmp/base/h2h_ferry_server --server 'grpc++ async=...' \\
      --server 'grpcxx=/path/echo_server,path=/echo.Echo/Echo,port=50077' \\
      --client new=build/bench/echo_client --client main=/tmp/base/echo_client [--rounds 3]

A --client runs against the --server of the same label. FERRY_H2H_SCALE scales the calls.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "head_to_head"))
import run as h2h  # noqa: E402

# (label, body bytes, connections, streams per connection, calls at scale 1)
H2LOAD = [
    ("h2load 16 B x 1, 1 conn", 16, 1, 1, 10000),
    ("h2load 16 B x 64, 1 conn", 16, 1, 64, 200000),
    ("h2load 16 B x 64, 4 conns", 16, 4, 64, 200000),
    ("h2load 16 B x 16, 4 conns", 16, 4, 16, 200000),
    ("h2load 64 KiB x 8, 1 conn", 64 << 10, 1, 8, 8000),
    ("h2load 1 MiB x 2, 1 conn", 1 << 20, 1, 2, 200),
]
# (label, body bytes, in flight, calls at scale 1)
CLIENT = [
    ("ferry client 16 B x 64, 1 conn", 16, 64, 200000),
    ("ferry client 16 B x 1, 1 conn", 16, 1, 20000),
]


class Server(h2h.Server):
    """A server binary; options after the binary: path=/svc/Method, port=N or auto (for servers
    that need one given; else 0 and the port is read from its 'listening on N' line),
    maxbody=BYTES (scenarios with larger bodies are skipped: grpcxx answers requests of ~99 KB
    and more with an empty message)."""

    def __init__(self, label, spec, priority):
        parts = spec.split(",")
        binary, opts = parts[0], dict(p.split("=", 1) for p in parts[1:])
        self.key = self.label = label
        self.maxbody = int(opts.get("maxbody", 1 << 40))
        port = opts.get("port")
        if port == "auto":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = str(s.getsockname()[1])
        command = priority + ["taskset", "-c", h2h.SERVER_CORE, binary, port or "0"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"listening on (?:[\d.]+:)?(\d+)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"{binary} did not start: {line!r}")
        self.port = int(match.group(1))
        time.sleep(0.2)
        self.url = f"http://127.0.0.1:{self.port}{opts.get('path', h2h.METHOD_PATH)}"


def run_client(server, binary, scenario, scale, priority):
    _, size, in_flight, calls = scenario
    calls = int(calls * scale)
    command = priority + ["taskset", "-c", h2h.CLIENT_CORE, binary, f"127.0.0.1:{server.port}", str(calls),
               str(in_flight), str(size)]
    tasks0 = h2h.task_cpu(server.process.pid)
    cpu0, faults0 = h2h.proc_stat(server.process.pid)
    out = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    cpu1, faults1 = h2h.proc_stat(server.process.pid)
    tasks1 = h2h.task_cpu(server.process.pid)
    m = re.search(r"calls (\d+) seconds ([\d.]+) calls_per_s (\d+) client_cpu_us_per_call "
                  r"([\d.]+) p50_us ([\d.]+)", out)
    if not m:
        return f"unreadable echo_client output: {out!r}"
    # The client warms up (calls / 10) inside its process, after the sample above: its calls
    # count in the server's CPU too.
    total = int(m.group(1)) + max(in_flight * 4, int(m.group(1)) // 10)
    cpu = h2h.cpu_between(cpu0, cpu1, tasks0, tasks1)
    seconds = float(m.group(2))
    return {
        "calls_s": float(m.group(3)),
        "cpu_us": cpu * 1e6 / total,
        "faults": (faults1 - faults0) / total,
        "busy": 100 * cpu / (seconds * total / int(m.group(1))),
        "client_busy": 100 * float(m.group(4)) * 1e-6 * float(m.group(3)),
        "p50": float(m.group(5)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", action="append", default=[], help="LABEL=BINARY[,opts]")
    parser.add_argument("--client", action="append", default=[], help="LABEL=BINARY")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="run only scenarios whose label has this")
    parser.add_argument("--priority", choices=("realtime", "normal"), default="realtime",
                        help="as bench/head_to_head/run.py's --priority")
    args = parser.parse_args()
    scale = float(os.environ.get("FERRY_H2H_SCALE", "1"))
    priority = h2h.realtime_prefix() if args.priority == "realtime" else []
    servers = [Server(*s.split("=", 1), priority) for s in args.server]
    clients = dict(c.split("=", 1) for c in args.client)
    results, failures = {}, []
    tmp = tempfile.TemporaryDirectory(prefix="ferry_ab_")
    try:
        files = {}
        for size in sorted({s[1] for s in H2LOAD}):
            files[size] = os.path.join(tmp.name, f"req_{size}.bin")
            with open(files[size], "wb") as f:
                f.write(h2h.grpc_request(size))
        h2_scen = [s for s in H2LOAD if args.only in s[0]]
        cl_scen = [s for s in CLIENT if args.only in s[0]]
        for server in servers:  # warm-up: pools, arenas, heap
            for s in h2_scen:
                if s[1] > server.maxbody:
                    continue
                h2h.run_h2load(server, s, max(s[2] * s[3] * 4, int(s[4] * scale) // 10),
                               files[s[1]], True, 120, priority)
        for r in range(args.rounds):
            for s in h2_scen:
                for server in servers:
                    if s[1] > server.maxbody:
                        continue
                    fig = h2h.run_h2load(server, s, max(s[2] * s[3] * 4, int(s[4] * scale)),
                                         files[s[1]], True, 120, priority)
                    if isinstance(fig, str):
                        failures.append(f"{server.label} {s[0]} round {r + 1}: {fig}")
                        fig = None
                    results.setdefault((s[0], server.label), []).append(fig)
            for s in cl_scen:
                for server in servers:
                    if server.label not in clients:
                        continue
                    fig = run_client(server, clients[server.label], s, scale, priority)
                    if isinstance(fig, str):
                        failures.append(f"{server.label} {s[0]} round {r + 1}: {fig}")
                        fig = None
                    results.setdefault((s[0], server.label), []).append(fig)
            print(f"round {r + 1} done", file=sys.stderr)
    finally:
        for server in servers:
            server.stop()
        tmp.cleanup()

    def med(key, field):
        vals = [x[field] for x in results.get(key, []) if x and field in x]
        return statistics.median(vals) if vals else None

    base = servers[1].label if len(servers) > 1 else None
    print("| scenario | server | calls/s | vs " + str(base) + " | server CPU µs/call | "
          "server busy % | load generator busy % | p50 µs (ferry client) |")
    print("|---|---|---|---|---|---|---|---|")
    for s in h2_scen + cl_scen:
        for server in servers:
            key = (s[0], server.label)
            if key not in results:
                continue
            pairs = zip(results[key], results.get((s[0], base), []))
            ratios = [a["calls_s"] / b["calls_s"] for a, b in pairs if a and b]
            row = [s[0], server.label, h2h.fmt(med(key, "calls_s"), 0),
                   h2h.fmt(statistics.median(ratios) if ratios else None, 2),
                   h2h.fmt(med(key, "cpu_us"), 2), h2h.fmt(med(key, "busy"), 0),
                   h2h.fmt(med(key, "client_busy"), 0), h2h.fmt(med(key, "p50"), 1)]
            print("| " + " | ".join(row) + " |")
    print(f"\nMedians of {args.rounds} interleaved rounds; ratios: medians of per-round ratios.")
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
