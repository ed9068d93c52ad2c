#!/usr/bin/env python3
"""Head-to-head: ferry against grpc++ on the same unary echo, loaded by h2load.

Three servers answer ferry.testing.Echo/Echo (proto/ferry/testing/echo.proto: the response
carries a copy of the request's `bytes payload = 1`), each on one core:
  ferry          h2h_ferry_server: ferry::Server, ServerOptions::num_threads = 1 (one I/O thread
                 does everything; the main thread only waits for SIGTERM).
  grpc++ cb      h2h_grpc_callback_server: grpc++ 1.51 callback API (CallbackService,
                 DefaultReactor). grpc++ has no knob for the callback API's threads: its event
                 engine runs its own pollers and executor threads.
  grpc++ async   h2h_grpc_async_server: grpc++ async API, ONE completion queue drained by ONE
                 thread (grpc++ still keeps a few internal timer/executor threads).
Each server process is pinned to core 0 (taskset -c 0, all its threads), h2load to core 1.
Both run under the real-time round-robin policy (chrt -r 50) when the system allows it (root,
chrt present; --priority normal turns it off): on a shared machine, a server with one thread
otherwise gets a smaller share of a contended core than one with ten, and every wake-up waits
behind whatever else runs there, so calls/s would measure the neighbours and the thread count
as much as the servers. Real-time threads are woken at once and are not preempted by ordinary
processes; among themselves they take turns, so a multi-threaded server's threads are scheduled
as usual.

For every scenario the servers take turns, round by round, so slow drift on a shared machine
hits all of them alike. Per run: calls/s (h2load's req/s; every request must have succeeded
with HTTP 200), server CPU per call (the server's threads' CPU time from
/proc/<pid>/task/*/schedstat, or utime + stime from /proc/<pid>/stat when threads came or went),
minor page faults per call (/proc/<pid>/stat) and server core busy % (CPU time / h2load's wall
time); h2load's own busy % and CPU per call (its process time, start-up included, so inflated
only in --smoke's tiny run) show when the load generator, not the server, is the limit: no
server is served faster than h2load's core makes calls.
h2load cannot see grpc-status (a failed call still has HTTP status 200), so before loading
every server is checked once per body size with nghttp (same package as h2load): the response
body must equal the request (an echo) and grpc-status must be 0. These checks also warm the
grpc++ servers, and that matters: the first 1 MiB message a grpc++ server frees is an mmap'd
chunk, and freeing it raises glibc's trim threshold to 2 MiB; until then each of grpc++'s
per-thread malloc arenas gives memory back after every 64 KiB call (madvise) and faults it in
again, which slows grpc++ at 64 KiB a lot (docs/design/head_to_head.md has the figures). A
long-running server will have seen a large message, so every run checks every body size first
(also with --only) and measures that steady state.

Prints one Markdown table of medians (ratios: medians of the per-round ferry/grpc++ ratios) and
writes it to --out. Each run makes the scenario's count of calls, or fewer when a warm-up run
shows they would take more than RUN_SECONDS; FERRY_H2H_SCALE (default 1) multiplies both
bounds, FERRY_H2H_ROUNDS (default 3) sets the rounds; --only LABEL_PART runs the scenarios whose
label has it. --smoke: one tiny scenario, one round,
ferry against grpc++ async; exits 77 (ctest's skip code) when h2load is missing, where a full
run reports it and exits 0.
Exits 1 when a check or a run fails.
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

SERVERS = [
    # (key, column label, binary name)
    ("ferry", "ferry", "h2h_ferry_server"),
    ("cb", "grpc++ cb", "h2h_grpc_callback_server"),
    ("async", "grpc++ async", "h2h_grpc_async_server"),
]

# (label, body bytes, connections, streams in flight per connection, calls at scale 1)
SCENARIOS = [
    ("16 B x 1, 1 conn", 16, 1, 1, 5000),
    ("16 B x 64, 1 conn", 16, 1, 64, 20000),
    ("16 B x 64, 4 conns", 16, 4, 64, 20000),
    ("64 KiB x 8, 1 conn", 64 << 10, 1, 8, 4000),
    ("1 MiB x 2, 1 conn", 1 << 20, 1, 2, 400),
]

METHOD_PATH = "/ferry.testing.Echo/Echo"
GRPC_HEADERS = ["-H", "content-type: application/grpc", "-H", "te: trailers"]
SERVER_CORE, CLIENT_CORE = "0", "1"
RUN_SECONDS = 2.0  # the most a measured run should take at scale 1 (see main)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def grpc_request(body_size):
    """The h2load request body: the 5-byte gRPC prefix, then EchoRequest{payload=body}."""
    payload = b"x" * body_size
    length, varint = body_size, b""
    while True:
        byte = length & 0x7F
        length >>= 7
        varint += bytes([byte | (0x80 if length else 0)])
        if not length:
            break
    message = b"\x0a" + varint + payload  # field 1, wire type 2 (length-delimited)
    return b"\x00" + struct.pack(">I", len(message)) + message


def proc_stat(pid):
    """(CPU seconds = utime + stime, minor faults) of the process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): minflt is field 10, utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, int(fields[7])


def task_cpu(pid):
    """{thread id: CPU seconds} from /proc/<pid>/task/*/schedstat (nanoseconds, unlike stat's
    clock ticks), or None where schedstat is missing."""
    cpu = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu[tid] = int(f.read().split()[0]) / 1e9
    except (FileNotFoundError, ProcessLookupError):
        return None
    return cpu


def cpu_between(stat_before, stat_after, tasks_before, tasks_after):
    """Server CPU seconds of a run: the per-thread schedstat sum when the same threads lived
    throughout (precise), else the utime + stime ticks (which also count exited threads)."""
    if tasks_before is not None and tasks_after is not None and \
            tasks_before.keys() == tasks_after.keys():
        return sum(tasks_after.values()) - sum(tasks_before.values())
    return stat_after - stat_before


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Server:
    """One server process, pinned to the server core, on a port it picked."""

    def __init__(self, key, label, binary, pin, priority):
        self.key, self.label = key, label
        command = priority + ([binary, "0"] if not pin else
                              ["taskset", "-c", SERVER_CORE, binary, "0"])
        # taskset execs the server, so the child's pid is the server's.
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"listening on (\d+)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"{binary} did not start: {line!r}")
        self.port = int(match.group(1))
        self.url = f"http://127.0.0.1:{self.port}{METHOD_PATH}"

    def threads(self):
        return len(os.listdir(f"/proc/{self.process.pid}/task"))

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def check_echo(server, request_file, expected):
    """One call through nghttp: the body must come back unchanged and grpc-status must be 0."""
    base = ["nghttp", "-d", request_file] + GRPC_HEADERS + [server.url]
    plain = subprocess.run(base, capture_output=True, timeout=30)
    verbose = subprocess.run(base[:1] + ["-v"] + base[1:], capture_output=True, timeout=30)
    statuses = [s.decode() for s in
                re.findall(rb"recv \(stream_id=\d+\) grpc-status: (\d+)", verbose.stdout)]
    problems = []
    if plain.returncode != 0 or plain.stdout != expected:
        problems.append(f"response body differs from the request ({len(plain.stdout)} bytes "
                        f"for {len(expected)})")
    if statuses != ["0"]:
        problems.append(f"grpc-status {statuses or 'missing'}")
    return problems


def realtime_prefix():
    """The command prefix that runs a process under SCHED_RR, or [] where that is refused."""
    prefix = ["chrt", "-r", "50"]
    if shutil.which("chrt") is None:
        return []
    try:
        ok = subprocess.run(prefix + ["true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return prefix if ok else []


def run_h2load(server, scenario, count, request_file, pin, run_timeout, priority):
    """One measured run; returns a dict of figures, or a string saying what went wrong."""
    _, _, conns, streams, _ = scenario
    command = ["h2load", "-n", str(count), "-c", str(conns), "-m", str(streams), "-t", "1",
               "-d", request_file] + GRPC_HEADERS + [server.url]
    if pin:
        command = ["taskset", "-c", CLIENT_CORE] + command
    command = priority + command
    if server.process.poll() is not None:
        return f"the server exited ({server.process.returncode})"
    tasks0 = task_cpu(server.process.pid)
    cpu0, faults0 = proc_stat(server.process.pid)
    client0 = children_cpu()
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=run_timeout).stdout
    except subprocess.TimeoutExpired:
        return f"h2load did not finish within {run_timeout} s"
    if server.process.poll() is not None:
        return f"the server exited ({server.process.returncode})"
    client1 = children_cpu()
    cpu1, faults1 = proc_stat(server.process.pid)
    tasks1 = task_cpu(server.process.pid)
    cpu = cpu_between(cpu0, cpu1, tasks0, tasks1)
    requests = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded", out)
    codes = re.search(r"status codes: (\d+) 2xx", out)
    finished = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
    if not (requests and codes and finished):
        return "unreadable h2load output:\n" + out
    total, succeeded = int(requests.group(1)), int(requests.group(3))
    ok_codes = int(codes.group(1))
    if succeeded != total or ok_codes != total:
        return f"{succeeded} of {total} calls succeeded, {ok_codes} with HTTP 200"
    seconds = float(finished.group(1)) / (1000 if finished.group(2) == "ms" else 1)
    return {
        "calls_s": float(finished.group(3)),
        "cpu_us": cpu * 1e6 / total,
        "faults": (faults1 - faults0) / total,
        "busy": 100 * cpu / seconds if seconds > 0 else 0.0,
        "client_busy": 100 * (client1 - client0) / seconds if seconds > 0 else 0.0,
        "client_us": (client1 - client0) * 1e6 / total,
    }


def fmt(value, digits):
    return "-" if value is None else f"{value:,.{digits}f}"


def median(values):
    return statistics.median(values) if values else None


def table(scenarios, servers, results):
    """results[(scenario label, server key)] = list of per-round dicts (None for failed runs)."""
    keys = [s.key for s in servers]
    labels = {s.key: s.label for s in servers}
    others = [k for k in keys if k != "ferry"]

    def med(label, key, field):
        return median([r[field] for r in results[(label, key)] if r])

    def ratio(label, other, field):
        pairs = zip(results[(label, "ferry")], results[(label, other)])
        return median([a[field] / b[field] for a, b in pairs if a and b and b[field] > 0])

    head = ["scenario"]
    head += [f"calls/s {labels[k]}" for k in keys]
    head += [f"ferry / {labels[k]} calls/s" for k in others]
    head += [f"CPU µs/call {labels[k]}" for k in keys]
    head += [f"ferry / {labels[k]} CPU" for k in others]
    head += ["faults/call " + " / ".join(labels[k] for k in keys)]
    head += ["server busy % " + " / ".join(labels[k] for k in keys)]
    head += ["h2load busy % " + " / ".join(labels[k] for k in keys)]
    head += ["h2load CPU µs/call " + " / ".join(labels[k] for k in keys)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for scenario in scenarios:
        label = scenario[0]
        row = [label]
        row += [fmt(med(label, k, "calls_s"), 0) for k in keys]
        row += [fmt(ratio(label, k, "calls_s"), 2) for k in others]
        row += [fmt(med(label, k, "cpu_us"), 1) for k in keys]
        row += [fmt(ratio(label, k, "cpu_us"), 2) for k in others]
        row += [" / ".join(fmt(med(label, k, "faults"), 2) for k in keys)]
        row += [" / ".join(fmt(med(label, k, "busy"), 0) for k in keys)]
        row += [" / ".join(fmt(med(label, k, "client_busy"), 0) for k in keys)]
        row += [" / ".join(fmt(med(label, k, "client_us"), 1) for k in keys)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--out", default=None, help="default: <build-dir>/results/head_to_head.md")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--run-timeout", type=float, default=60.0, help="seconds per h2load run")
    parser.add_argument("--priority", choices=("realtime", "normal"), default="realtime",
                        help="realtime (default): servers and h2load under chrt -r 50 when "
                             "allowed; normal: as started")
    parser.add_argument("--only", default="",
                        help="run only the scenarios whose label has this (the echo checks "
                             "still cover every body size)")
    args = parser.parse_args()
    missing_code = 77 if args.smoke else 0

    for tool in ("h2load", "nghttp"):
        if shutil.which(tool) is None:
            print(f"head_to_head: {tool} not found (Debian package nghttp2-client); skipped")
            return missing_code

    scale = float(os.environ.get("FERRY_H2H_SCALE", "1"))
    rounds = int(os.environ.get("FERRY_H2H_ROUNDS", "3"))
    scenarios, wanted = [s for s in SCENARIOS if args.only in s[0]], list(SERVERS)
    checked_sizes = {s[1] for s in SCENARIOS}
    if args.smoke:
        scenarios = [("16 B x 8, 1 conn", 16, 1, 8, 300)]
        wanted = [s for s in SERVERS if s[0] in ("ferry", "async")]
        scale, rounds = 1.0, 1
        checked_sizes = {s[1] for s in scenarios}
    if not scenarios:
        print(f"head_to_head: no scenario label has {args.only!r}")
        return 1

    bin_dir = os.path.join(args.build_dir, "bench", "head_to_head")
    present = [s for s in wanted if os.access(os.path.join(bin_dir, s[2]), os.X_OK)]
    for s in wanted:
        if s not in present:
            print(f"head_to_head: {s[2]} not built (needs grpc++); its column is left out")
    if not present or present[0][0] != "ferry" or len(present) < 2:
        print("head_to_head: needs ferry's server and at least one grpc++ server; skipped")
        return missing_code

    affinity = os.sched_getaffinity(0)
    pin = int(SERVER_CORE) in affinity and int(CLIENT_CORE) in affinity
    if not pin:
        print("head_to_head: cores 0 and 1 are not both available; running unpinned")

    priority = realtime_prefix() if args.priority == "realtime" else []
    if args.priority == "realtime" and not priority:
        print("head_to_head: real-time scheduling refused (needs root and chrt); "
              "running at normal priority")

    servers, failures = [], []
    tmp = tempfile.TemporaryDirectory(prefix="ferry_h2h_")
    try:
        for key, label, binary in present:
            servers.append(Server(key, label, os.path.join(bin_dir, binary), pin, priority))
        request_files = {}
        # Every body size is checked, also with --only: the 1 MiB check is the first large
        # message a grpc++ server sees, and it changes how glibc serves grpc++ afterwards (see
        # the module comment), so a scenario's figures must not depend on which others ran.
        for size in sorted(checked_sizes):
            path = os.path.join(tmp.name, f"request_{size}.bin")
            with open(path, "wb") as f:
                f.write(grpc_request(size))
            request_files[size] = path
            for server in servers:
                for problem in check_echo(server, path, grpc_request(size)):
                    failures.append(f"{server.label}, {size} B check: {problem}")
        if failures:
            print("\n".join("head_to_head: FAILED " + f for f in failures))
            return 1

        def in_flight(scenario):
            return scenario[2] * scenario[3]

        # Each run makes the scenario's count (times the scale) or as many calls as fit in
        # RUN_SECONDS (times the scale) at the rate of an unmeasured warm-up run, whichever is
        # fewer: a loaded machine shortens the runs rather than stretching the benchmark.
        counts = {}
        started = time.monotonic()
        for scenario in scenarios:
            for server in servers:
                most = max(in_flight(scenario), int(scenario[4] * scale))
                if args.smoke:
                    counts[(scenario[0], server.key)] = most
                    continue
                warm = run_h2load(server, scenario, max(in_flight(scenario), most // 10),
                                  request_files[scenario[1]], pin, args.run_timeout, priority)
                fit = int(warm["calls_s"] * RUN_SECONDS * scale) if isinstance(warm, dict) else 0
                counts[(scenario[0], server.key)] = max(in_flight(scenario) * 4, min(most, fit))
        results = {(s[0], server.key): [] for s in scenarios for server in servers}
        for round_index in range(rounds):
            for scenario in scenarios:
                for server in servers:
                    figures = run_h2load(server, scenario, counts[(scenario[0], server.key)],
                                         request_files[scenario[1]], pin, args.run_timeout, priority)
                    if isinstance(figures, str):
                        failures.append(f"{server.label}, {scenario[0]}, round "
                                        f"{round_index + 1}: {figures}")
                        figures = None
                    results[(scenario[0], server.key)].append(figures)
        elapsed = time.monotonic() - started
        threads = ", ".join(f"{s.label} {s.threads()}" for s in servers)
    finally:
        for server in servers:
            server.stop()
        tmp.cleanup()

    text = table(scenarios, servers, results)
    notes = (f"\nMedians of {rounds} round(s), servers interleaved per round; count scale "
             f"{scale:g}; {elapsed:.0f} s of load. Server on core {SERVER_CORE}, h2load on core "
             f"{CLIENT_CORE}{'' if pin else ' (NOT pinned)'}, "
             f"{'real-time round-robin (chrt -r 50)' if priority else 'normal priority'}. "
             f"Server threads: {threads}. Load average at the end: "
             f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}.\n"
             "Ratios: medians of the per-round ferry/grpc++ ratios (calls/s: > 1 means ferry "
             "serves more; CPU: < 1 means ferry spends less per call).")
    notes += "\nCalls per run (" + " / ".join(s.label for s in servers) + "): " + "; ".join(
        sc[0] + " " + " / ".join(str(counts[(sc[0], s.key)]) for s in servers)
        for sc in scenarios) + "."
    print(text)
    print(notes)
    out = args.out or os.path.join(args.build_dir, "results", "head_to_head.md")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        f.write(text + "\n" + notes + "\n")
    if failures:
        print("\n".join("head_to_head: FAILED " + f for f in failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
