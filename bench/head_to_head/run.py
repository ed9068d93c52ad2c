#!/usr/bin/env python3
"""Head-to-head: ferry against grpc++, connect-go, tonic and grpc-go, loaded by h2load.

Four servers answer ferry.testing.Echo/Echo (proto/ferry/testing/echo.proto: the response
carries a copy of the request's `bytes payload = 1`), each on one core:
  ferry          h2h_ferry_server: ferry::Server, ServerOptions::num_threads = 1 (one I/O thread
                 does everything; the main thread only waits for SIGTERM).
  grpc++ cb      h2h_grpc_callback_server: grpc++ 1.51 callback API (CallbackService,
                 DefaultReactor). grpc++ has no knob for the callback API's threads: its event
                 engine runs its own pollers and executor threads.
  grpc++ async   h2h_grpc_async_server: grpc++ async API, ONE completion queue drained by ONE
                 thread (grpc++ still keeps a few internal timer/executor threads).
  connect-go     connect_echo_server_go (bench/head_to_head/connect_go, which
                 scripts/install_peers.sh builds into the peers dir): connect-go serving Connect,
                 gRPC and gRPC-Web over HTTP/1.1 and cleartext HTTP/2 on one port, run with
                 GOMAXPROCS=1.
A third table is grpc_bench's complex_proto scenario (proto/grpc_bench/helloworld.proto:
helloworld.Greeter/SayHello with a nested Hello of strings, floats, integers, a oneof and a
repeated message, 78 bytes), served by ferry's server and grpc++ async (both above: each serves
the echo and the greeter), and by tonic (bench/head_to_head/tonic, a current-thread tokio runtime)
and grpc-go (bench/head_to_head/grpc_go, GOMAXPROCS=1), which `scripts/install_peers.sh PREFIX
tonic_greeter grpc_go_greeter` builds; at 50 connections x 20 streams (grpc_bench's load) and 1 x
64. Beside it, per load: ferry's own 16 B echo at the same load in the same rounds (what the
message adds), h2h_protobuf_floor (what protobuf alone costs for the message: parse, copy,
serialize), ferry's CPU per call over tonic's, and ferry's allocations per call (its server counts
them: bench/alloc_counter.cc, read through SIGUSR1 before and after each run).
A fourth table runs complex_proto's two loads over TLS 1.3 with AES-128-GCM (h2load offers only
that suite; every run's h2load output must show it), ferry against grpc-go and grpc++ async, each
with its own TLS stack and the test PKI's server certificate (test/certs), and 64 KiB server
streaming (ferry.testing.Echo/Expand: 64 responses of 64 KiB per call): per server, the bytes it
sent per second of its CPU over what `openssl speed -evp aes-128-gcm` encrypts per second on the
same core (16 KiB blocks, TLS's largest record; measured once per round), the most any server
could reach if encrypting were all it did; and beside that ferry's own cleartext stream at the
same load, whose cost per byte plus the cipher's is the tighter ceiling of ferry's TLS stream.
The other two tables: ferry against the grpc++ servers over gRPC, and ferry against connect-go over the
Connect protocol (unary, the bare message as the body: proto over HTTP/2, and JSON over
HTTP/1.1 keep-alive, one call in flight per connection, beside proto over HTTP/1.1 to tell
JSON's cost from HTTP/1.1's) with both servers' gRPC beside it, so that ferry's Connect CPU per
call is also a ratio to its own gRPC's in the same run.
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
with HTTP 2xx, which for Connect unary also means the call succeeded), server CPU per call (the
server's threads' CPU time from /proc/<pid>/task/*/schedstat, or utime + stime from
/proc/<pid>/stat when threads came or went), minor page faults per call (/proc/<pid>/stat) and
server core busy % (CPU time / h2load's wall time); h2load's own busy % and CPU per call (its
process time, start-up included, so inflated only in --smoke's tiny run) show when the load
generator, not the server, is the limit: no server is served faster than h2load's core makes
calls.
h2load cannot see grpc-status (a failed call still has HTTP status 200), so before loading
every server is checked once per body size with nghttp (same package as h2load): the response
body must equal the request (an echo) and grpc-status must be 0; in the Connect table, once per
protocol, a Connect call must answer 200 with the content type asked for, no content-encoding,
and a body that decodes (proto or JSON) to the request's payload. These checks also warm the
grpc++ servers, and that matters: the first 1 MiB message a grpc++ server frees is an mmap'd
chunk, and freeing it raises glibc's trim threshold to 2 MiB; until then each of grpc++'s
per-thread malloc arenas gives memory back after every 64 KiB call (madvise) and faults it in
again, which slows grpc++ at 64 KiB a lot (docs/design/head_to_head.md has the figures). A
long-running server will have seen a large message, so every run checks every body size first
(also with --only) and measures that steady state.

Prints the Markdown tables of medians (ratios: medians of the per-round ferry/other ratios) and
writes them to --out; --suite NAME (grpc++, connect, complex_proto, tls) makes one. Each run makes the
scenario's count of calls, or fewer when a warm-up run shows they would take more than
RUN_SECONDS; FERRY_H2H_SCALE (default 1) multiplies both bounds, FERRY_H2H_ROUNDS (default 3)
sets the rounds; --only LABEL_PART runs the scenarios whose label has it. --smoke: one tiny
scenario, one round, ferry against grpc++ async (also over TLS: complex_proto and a 64 KiB
stream; and a tiny one of each Connect protocol, ferry against connect-go, when that peer is
installed); exits 77 (ctest's skip code) when h2load is
missing, where a full run reports it and exits 0.
Exits 1 when a check or a run fails.
"""

import argparse
import base64
import http.client
import json
import os
import re
import resource
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

SERVERS = [
    # (key, column label, binary name, where: the build's bench/head_to_head or the peers' bin)
    ("ferry", "ferry", "h2h_ferry_server", "build"),
    ("cb", "grpc++ cb", "h2h_grpc_callback_server", "build"),
    ("async", "grpc++ async", "h2h_grpc_async_server", "build"),
    ("connect-go", "connect-go", "connect_echo_server_go", "peers"),
    ("tonic", "tonic", "tonic_greeter_server", "peers"),
    ("grpc-go", "grpc-go", "grpc_go_greeter_server", "peers"),
]
# How a missing peer is installed, for the line that says its column is left out.
PEER_INSTALL = {"connect-go": "connect_echo_go", "tonic": "tonic_greeter",
                "grpc-go": "grpc_go_greeter"}
# Environment a server starts with, beside the caller's: Go's scheduler on one core, as the
# process is (taskset), instead of one P per core of the machine.
SERVER_ENV = {"connect-go": {"GOMAXPROCS": "1"}, "grpc-go": {"GOMAXPROCS": "1"}}

# (label, body bytes, connections, streams in flight per connection, calls at scale 1)
SCENARIOS = [
    ("16 B x 1, 1 conn", 16, 1, 1, 5000),
    ("16 B x 64, 1 conn", 16, 1, 64, 20000),
    ("16 B x 64, 4 conns", 16, 4, 64, 20000),
    ("64 KiB x 8, 1 conn", 64 << 10, 1, 8, 4000),
    ("1 MiB x 2, 1 conn", 1 << 20, 1, 2, 400),
]

# The Connect table: (label, body bytes, connections, streams in flight per connection, calls at
# scale 1, protocol). HTTP/1.1 has one call in flight per connection (keep-alive, no pipelining,
# as HTTP/1.1 clients and browsers do), so its in-flight count is its connection count.
CONNECT_SCENARIOS = [
    ("gRPC, HTTP/2, 16 B x 64, 1 conn", 16, 1, 64, 20000, "grpc"),
    ("Connect proto, HTTP/2, 16 B x 64, 1 conn", 16, 1, 64, 20000, "connect-proto"),
    ("gRPC, HTTP/2, 16 B x 64, 4 conns", 16, 4, 64, 20000, "grpc"),
    ("Connect proto, HTTP/2, 16 B x 64, 4 conns", 16, 4, 64, 20000, "connect-proto"),
    ("Connect JSON, HTTP/1.1, 16 B x 1, 1 conn", 16, 1, 1, 5000, "connect-json"),
    ("Connect JSON, HTTP/1.1, 16 B x 1, 64 conns", 16, 64, 1, 20000, "connect-json"),
    # The same in proto: what of the row above is JSON's cost and what HTTP/1.1's.
    ("Connect proto, HTTP/1.1, 16 B x 1, 64 conns", 16, 64, 1, 20000, "connect-proto-h1"),
]

# grpc_bench's complex_proto (bench/head_to_head/proto/grpc_bench/helloworld.proto): SayHello with
# the nested Hello below, 78 bytes on the wire, at grpc_bench's own load shape (50 connections x 20
# streams) and at one connection x 64. The body size field is the request's size.
GREETER_PATH = "/helloworld.Greeter/SayHello"
COMPLEX_SCENARIOS = [
    ("complex_proto, 50 conns x 20", 78, 50, 20, 60000, "greeter"),
    ("complex_proto, 1 conn x 64", 78, 1, 64, 40000, "greeter"),
]
# ferry's own 16 B echo at each of those loads, run by ferry alone in the same rounds: what the
# realistic message adds to ferry's CPU per call is the difference.
ECHO_TWINS = {s[0]: (f"ferry's 16 B echo, {s[2]} conn{'s' if s[2] > 1 else ''} x {s[3]}", 16,
                     s[2], s[3], s[4], "grpc") for s in COMPLEX_SCENARIOS}

# The TLS table: complex_proto's two loads over TLS 1.3 with AES-128-GCM (h2load offers no other
# cipher suite), each server with its own TLS stack (ferry: OpenSSL through its own BIO; grpc++:
# its OpenSSL-based security connector; grpc-go: Go's crypto/tls), and 64 KiB server streaming:
# ferry.testing.Echo/Expand, each call STREAM_MESSAGES responses of the body size (4 MiB), whose
# bytes per server CPU-second are compared with what `openssl speed -evp aes-128-gcm` encrypts in
# a CPU-second on the server core (the ceiling the cipher sets), measured in every round.
STREAM_MESSAGES = 64
TLS_SCENARIOS = [
    ("TLS complex_proto, 50 conns x 20", 78, 50, 20, 60000, "greeter-tls"),
    ("TLS complex_proto, 1 conn x 64", 78, 1, 64, 40000, "greeter-tls"),
    (f"TLS 64 KiB x {STREAM_MESSAGES} streamed, 1 conn x 2", 64 << 10, 1, 2, 600, "expand-tls"),
]
# ferry's cleartext stream at the same load, run by ferry alone in the same rounds: a server's
# cost per byte over TLS is at least its cleartext cost plus the cipher's, the tighter ceiling.
STREAM_TWIN = (f"ferry's cleartext 64 KiB x {STREAM_MESSAGES} stream, 1 conn x 2", 64 << 10, 1, 2,
               600, "expand")
TLS_CIPHER = "TLS_AES_128_GCM_SHA256"
CERTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "test", "certs")
# The scenarios run by ferry alone, beside another row of their table.
TWIN_LABELS = {t[0] for t in ECHO_TWINS.values()} | {STREAM_TWIN[0]}

# (name, server keys, scenarios): the tables, each ferry (first) against the others.
SUITES = [
    ("grpc++", ["ferry", "cb", "async"], SCENARIOS),
    ("connect", ["ferry", "connect-go"], CONNECT_SCENARIOS),
    ("complex_proto", ["ferry", "tonic", "grpc-go", "async"],
     COMPLEX_SCENARIOS + list(ECHO_TWINS.values())),
    ("tls", ["ferry", "grpc-go", "async"], TLS_SCENARIOS + [STREAM_TWIN]),
]
# The tables whose peers serve only some methods: each server is checked on what it is loaded with.
CHECKED_AS_LOADED = ("complex_proto", "tls")

# What each protocol sends: h2load's headers, whether over HTTP/1.1, and the request body.
# h2load sends no accept-encoding, so no server compresses its responses.
PROTOCOLS = {
    "grpc": {"headers": ["-H", "content-type: application/grpc", "-H", "te: trailers"],
             "h1": False, "encoding": "grpc"},
    "connect-proto": {"headers": ["-H", "content-type: application/proto"], "h1": False,
                      "encoding": "proto"},
    "connect-proto-h1": {"headers": ["-H", "content-type: application/proto"], "h1": True,
                         "encoding": "proto"},
    "connect-json": {"headers": ["-H", "content-type: application/json"], "h1": True,
                     "encoding": "json"},
    "greeter": {"headers": ["-H", "content-type: application/grpc", "-H", "te: trailers"],
                "h1": False, "encoding": "greeter", "path": GREETER_PATH},
    "greeter-tls": {"headers": ["-H", "content-type: application/grpc", "-H", "te: trailers"],
                    "h1": False, "encoding": "greeter", "path": GREETER_PATH, "tls": True},
    "expand": {"headers": ["-H", "content-type: application/grpc", "-H", "te: trailers"],
               "h1": False, "encoding": "expand", "path": "/ferry.testing.Echo/Expand"},
    "expand-tls": {"headers": ["-H", "content-type: application/grpc", "-H", "te: trailers"],
                   "h1": False, "encoding": "expand", "path": "/ferry.testing.Echo/Expand",
                   "tls": True},
}

METHOD_PATH = "/ferry.testing.Echo/Echo"
GRPC_HEADERS = PROTOCOLS["grpc"]["headers"]
SERVER_CORE, CLIENT_CORE = "0", "1"
RUN_SECONDS = 2.0  # the most a measured run should take at scale 1 (see main)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def uses_tls(scenario_or_protocol):
    """Whether a scenario (or a protocol, by name) runs over TLS."""
    protocol = scenario_or_protocol if isinstance(scenario_or_protocol, str) \
        else protocol_of(scenario_or_protocol)
    return PROTOCOLS[protocol].get("tls", False)


def runners(scenario, keys):
    """The servers a scenario is run on: ferry alone for an echo twin, else the table's."""
    return ["ferry"] if scenario[0] in TWIN_LABELS else keys


def protocol_of(scenario):
    """The scenario's protocol: its sixth field, gRPC when it has five (the grpc++ table's)."""
    return scenario[5] if len(scenario) > 5 else "grpc"


def payload_of(body_size):
    return b"x" * body_size


def varint(value):
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def proto_message(body_size):
    """EchoRequest{payload=body}, serialized; EchoResponse{payload=body} has the same bytes."""
    return b"\x0a" + varint(body_size) + payload_of(body_size)  # field 1, length-delimited


def grpc_request(body_size):
    """The h2load request body: the 5-byte gRPC prefix, then EchoRequest{payload=body}."""
    message = proto_message(body_size)
    return b"\x00" + struct.pack(">I", len(message)) + message


def json_request(body_size):
    """EchoRequest{payload=body} in protobuf's JSON mapping (bytes as base64)."""
    return json.dumps({"payload": base64.b64encode(payload_of(body_size)).decode()}).encode()


def proto_field(number, wire_type, value):
    """One protobuf field: its key, then the value, length-prefixed when it is bytes."""
    key = varint(number << 3 | wire_type)
    if wire_type == 2:
        return key + varint(len(value)) + value
    return key + value


def greeter_message():
    """grpc_bench's complex_proto request (its scenarios/complex_proto/payload, in JSON there),
    serialized in field order: HelloRequest{request: Hello{name, d, f, b, n, l, c1, pets}}."""
    def pet(name, color):  # Hello.Pet{name, color}; BLUE = 2, RED = 3
        return proto_field(1, 2, name.encode()) + proto_field(2, 0, varint(color))
    hello = (proto_field(1, 2, b"a name") + proto_field(2, 1, struct.pack("<d", 4.55332)) +
             proto_field(3, 5, struct.pack("<f", 232.3)) + proto_field(4, 0, varint(1)) +
             proto_field(5, 0, varint(32)) + proto_field(6, 0, varint(444325235223)) +
             proto_field(7, 2, b"ofcouse") + proto_field(9, 2, pet("Bof the dog", 2)) +
             proto_field(9, 2, pet("Kim the cat", 3)))
    return proto_field(1, 2, hello)


def expand_request(body_size):
    """The h2load request body of the TLS table's stream: the gRPC prefix, then
    EchoRequest{response_size=body, response_count=STREAM_MESSAGES}."""
    message = proto_field(2, 0, varint(body_size)) + proto_field(3, 0, varint(STREAM_MESSAGES))
    return b"\x00" + struct.pack(">I", len(message)) + message


def greeter_request(_body_size):
    """The h2load request body of the complex_proto table: the gRPC prefix, then the request."""
    message = greeter_message()
    return b"\x00" + struct.pack(">I", len(message)) + message


# Which fields of the greeter's messages are messages themselves: HelloRequest.request and
# HelloReply.response (1) hold a Hello, whose pets (9) hold a Pet.
GREETER_SCHEMA = {1: {9: {}}}


def read_varint(data, position):
    """(value, next position) of the varint at position; raises ValueError when truncated."""
    value, shift = 0, 0
    while True:
        if position >= len(data):
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def decode_message(data, schema):
    """A message's fields as a tuple of (number, value), sorted by number (a repeated field's
    values keep their order): what two encodings of the same message share, whatever order their
    serializer wrote the fields in (protobuf-go writes a oneof's field last, C++ and prost in
    number order). Values are ints (varints), bytes, or, for the schema's message fields, their
    own decoding. Raises ValueError on malformed input."""
    fields, position = [], 0
    while position < len(data):
        key, position = read_varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = read_varint(data, position)
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            value, position = data[position:position + width], position + width
        elif wire_type == 2:
            length, position = read_varint(data, position)
            value, position = data[position:position + length], position + length
            if number in schema:
                value = decode_message(value, schema[number])
        else:
            raise ValueError(f"wire type {wire_type}")
        if position > len(data):
            raise ValueError("truncated field")
        fields.append((number, value))
    return tuple(sorted(fields, key=lambda field: field[0]))


def request_body(protocol, body_size):
    """What h2load sends for the protocol: gRPC's framed message, Connect's bare one."""
    return {"grpc": grpc_request, "proto": proto_message, "json": json_request,
            "greeter": greeter_request, "expand": expand_request}[PROTOCOLS[protocol]["encoding"]](body_size)


def decode_proto_payload(data):
    """The payload (field 1) of a serialized EchoResponse, or a string saying what is wrong."""
    position, payload = 0, b""
    while position < len(data):
        try:
            key, position = read_varint(data, position)
        except ValueError:
            return "truncated key"
        if key != 0x0A:
            return f"unexpected field key {key:#x}"
        try:
            length, position = read_varint(data, position)
        except ValueError:
            return "truncated length"
        if position + length > len(data):
            return "truncated payload"
        payload = data[position:position + length]
        position += length
    return payload


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
    """One server process, pinned to the server core, on a port it picked; over TLS with the
    test PKI's server certificate (test/certs) when tls is set."""

    def __init__(self, key, label, binary, pin, priority, env=None, tls=False):
        self.key, self.label, self.tls = key, label, tls
        arguments = [binary, "0"] + ([os.path.join(CERTS_DIR, "server.pem"),
                                      os.path.join(CERTS_DIR, "server.key")] if tls else [])
        command = priority + (arguments if not pin else ["taskset", "-c", SERVER_CORE] + arguments)
        # taskset execs the server, so the child's pid is the server's.
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                        env=dict(os.environ, **(env or {})))
        line = self.process.stdout.readline()
        match = re.search(r"listening on (\d+)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"{binary} did not start: {line!r}")
        self.port = int(match.group(1))
        self.url = f"http://127.0.0.1:{self.port}{METHOD_PATH}"

    def url_for(self, protocol):
        """The URL h2load calls for the protocol: the echo's, the greeter's or the stream's."""
        scheme = "https" if uses_tls(protocol) else "http"
        return f"{scheme}://127.0.0.1:{self.port}{PROTOCOLS[protocol].get('path', METHOD_PATH)}"

    def allocations(self):
        """The allocations the server has made since it started, which ferry's server prints on
        SIGUSR1 (when built with the allocation counter), or None."""
        if self.key != "ferry":
            return None
        self.process.send_signal(signal.SIGUSR1)
        ready, _, _ = select.select([self.process.stdout], [], [], 5.0)
        line = self.process.stdout.readline() if ready else ""
        match = re.match(r"allocations (\d+)", line)
        return int(match.group(1)) if match else None

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


def grpc_call(server, request_file, protocol):
    """One gRPC call through nghttp, made twice: plainly for the body, verbosely for the
    trailers. Returns (the finished process, with the body as stdout; the grpc-status values)."""
    base = ["nghttp", "-d", request_file] + GRPC_HEADERS + [server.url_for(protocol)]
    plain = subprocess.run(base, capture_output=True, timeout=30)
    verbose = subprocess.run(base[:1] + ["-v"] + base[1:], capture_output=True, timeout=30)
    statuses = [s.decode() for s in
                re.findall(rb"recv \(stream_id=\d+\) grpc-status: (\d+)", verbose.stdout)]
    return plain, statuses


def check_echo(server, request_file, expected, protocol="grpc"):
    """One call through nghttp: the body must come back unchanged and grpc-status must be 0; for
    the greeter, the response's Hello must decode to the request's (decode_message)."""
    plain, statuses = grpc_call(server, request_file, protocol)
    problems = []
    if PROTOCOLS[protocol]["encoding"] == "greeter":
        body = plain.stdout
        try:
            if len(body) < 5 or body[0] != 0 or struct.unpack(">I", body[1:5])[0] != len(body) - 5:
                raise ValueError("not one uncompressed gRPC message")
            same = decode_message(body[5:], GREETER_SCHEMA) == \
                decode_message(expected[5:], GREETER_SCHEMA)
            if not same:
                problems.append("the reply's Hello is not the request's")
        except ValueError as error:
            problems.append(f"undecodable reply ({error})")
    elif plain.returncode != 0 or plain.stdout != expected:
        problems.append(f"response body differs from the request ({len(plain.stdout)} bytes "
                        f"for {len(expected)})")
    if statuses != ["0"]:
        problems.append(f"grpc-status {statuses or 'missing'}")
    return problems


def check_expand(server, request_file, body_size, protocol):
    """One streaming call through nghttp: STREAM_MESSAGES uncompressed gRPC messages, the i-th an
    EchoResponse{payload = body_size bytes, index = i}, and grpc-status 0."""
    plain, statuses = grpc_call(server, request_file, protocol)
    body = plain.stdout
    problems, position, index = [], 0, 0
    try:
        while position < len(body):
            if body[position] != 0 or position + 5 > len(body):
                raise ValueError("not an uncompressed gRPC message")
            length = struct.unpack(">I", body[position + 1:position + 5])[0]
            fields = dict(decode_message(body[position + 5:position + 5 + length], {}))
            position += 5 + length
            if fields.get(1) != payload_of(body_size) or fields.get(2, 0) != index:
                raise ValueError(f"message {index} is not {body_size} B with index {index}")
            index += 1
        if index != STREAM_MESSAGES:
            problems.append(f"{index} messages, not {STREAM_MESSAGES}")
    except ValueError as error:
        problems.append(f"undecodable stream ({error})")
    if statuses != ["0"]:
        problems.append(f"grpc-status {statuses or 'missing'}")
    return problems


def check_connect(server, protocol, body_size):
    """One Connect unary call as h2load makes it (nghttp for HTTP/2, http.client for HTTP/1.1):
    HTTP 200, the content type asked for, no content-encoding, and a body that decodes to the
    request's payload."""
    expected = payload_of(body_size)
    encoding = PROTOCOLS[protocol]["encoding"]
    content_type = f"application/{encoding}"
    problems = []
    if PROTOCOLS[protocol]["h1"]:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            connection.request("POST", METHOD_PATH, body=request_body(protocol, body_size),
                               headers={"content-type": content_type})
            response = connection.getresponse()
            status, body = response.status, response.read()
            headers = {k.lower(): v for k, v in response.getheaders()}
        except (http.client.HTTPException, OSError) as error:
            return [f"no HTTP/1.1 response ({type(error).__name__}: {str(error)[:80]!r})"]
        finally:
            connection.close()
    else:
        with tempfile.NamedTemporaryFile(prefix="ferry_h2h_check_") as f:
            f.write(request_body(protocol, body_size))
            f.flush()
            # nghttp asks for gzip unless told otherwise; h2load asks for nothing.
            command = ["nghttp", "-v", "-d", f.name, "-H", f"content-type: {content_type}",
                       "-H", "accept-encoding: identity", server.url]
            verbose = subprocess.run(command, capture_output=True, timeout=30).stdout
            plain = subprocess.run(command[:1] + command[2:], capture_output=True, timeout=30)
        found = re.findall(rb"recv \(stream_id=\d+\) ([:\w-]+): (.*)", verbose)
        headers = {k.decode(): v.decode().strip() for k, v in found}
        status, body = int(headers.get(":status", "0")), plain.stdout
    if status != 200:
        problems.append(f"HTTP status {status}")
    if headers.get("content-type") != content_type:
        problems.append(f"content-type {headers.get('content-type')!r}")
    if headers.get("content-encoding", "identity") != "identity":
        problems.append(f"content-encoding {headers['content-encoding']!r}")
    if encoding == "proto":
        payload = decode_proto_payload(body)
    else:
        try:
            payload = base64.b64decode(json.loads(body).get("payload", ""), validate=True)
        except (ValueError, AttributeError) as error:
            payload = f"undecodable JSON ({error})"
    if isinstance(payload, str):
        problems.append(f"response body: {payload}")
    elif payload != expected:
        problems.append(f"payload of {len(payload)} bytes differs from the request's "
                        f"{len(expected)}")
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
    conns, streams = scenario[2], scenario[3]
    protocol = PROTOCOLS[protocol_of(scenario)]
    command = ["h2load", "-n", str(count), "-c", str(conns), "-m", str(streams), "-t", "1",
               "-d", request_file] + (["--h1"] if protocol["h1"] else []) + \
        ([f"--tls13-ciphers={TLS_CIPHER}"] if protocol.get("tls") else []) + \
        protocol["headers"] + [server.url_for(protocol_of(scenario))]
    if pin:
        command = ["taskset", "-c", CLIENT_CORE] + command
    command = priority + command
    if server.process.poll() is not None:
        return f"the server exited ({server.process.returncode})"
    allocations0 = server.allocations()
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
    allocations1 = server.allocations()
    cpu = cpu_between(cpu0, cpu1, tasks0, tasks1)
    requests = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded", out)
    codes = re.search(r"status codes: (\d+) 2xx", out)
    finished = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
    if not (requests and codes and finished):
        return "unreadable h2load output:\n" + out
    total, succeeded = int(requests.group(1)), int(requests.group(3))
    ok_codes = int(codes.group(1))
    if succeeded != total or ok_codes != total:
        statuses = re.search(r"status codes: .*", out)
        return (f"{succeeded} of {total} calls succeeded, {ok_codes} with HTTP 2xx "
                f"({statuses.group(0) if statuses else 'no status line'})")
    if protocol.get("tls") and not re.search(
            rf"^TLS Protocol: TLSv1\.3$\s+^Cipher: {TLS_CIPHER}$", out, re.M):
        return f"not TLS 1.3 with {TLS_CIPHER}:\n" + out
    traffic = re.search(r"traffic: \S+ \((\d+)\) total", out)
    seconds = float(finished.group(1)) / (1000 if finished.group(2) == "ms" else 1)
    return {
        # What h2load received (HTTP/2 frames: what the server encrypted, over TLS) per second
        # of the server's CPU.
        "bytes_per_cpu_s": int(traffic.group(1)) / cpu if traffic and cpu > 0 else None,
        "bytes_s": int(traffic.group(1)) / seconds if traffic and seconds > 0 else None,
        "calls_s": float(finished.group(3)),
        "cpu_us": cpu * 1e6 / total,
        "faults": (faults1 - faults0) / total,
        "busy": 100 * cpu / seconds if seconds > 0 else 0.0,
        "client_busy": 100 * (client1 - client0) / seconds if seconds > 0 else 0.0,
        "client_us": (client1 - client0) * 1e6 / total,
        "allocations": (allocations1 - allocations0) / total
        if allocations0 is not None and allocations1 is not None else None,
    }


def fmt(value, digits):
    return "-" if value is None else f"{value:,.{digits}f}"


def median(values):
    return statistics.median(values) if values else None


def grpc_twin(scenario, scenarios):
    """The gRPC scenario of the same table with the same body and load as a Connect proto one
    over HTTP/2 (the row its CPU per call is compared with), or None."""
    if protocol_of(scenario) != "connect-proto":
        return None
    for other in scenarios:
        if protocol_of(other) == "grpc" and other[1:4] == scenario[1:4]:
            return other
    return None


def table(scenarios, servers, results):
    """results[(scenario label, server key)] = list of per-round dicts (None for failed runs).
    A table with Connect proto rows over HTTP/2 and their gRPC twins also gets a column of
    ferry's Connect CPU per call over its gRPC CPU per call, per round."""
    keys = [s.key for s in servers]
    labels = {s.key: s.label for s in servers}
    others = [k for k in keys if k != "ferry"]
    twins = {s[0]: grpc_twin(s, scenarios) for s in scenarios}

    def med(label, key, field):
        return median([r[field] for r in results[(label, key)] if r])

    def ratio(label, other, field, other_label=None):
        pairs = zip(results[(label, "ferry")], results[(other_label or label, other)])
        return median([a[field] / b[field] for a, b in pairs if a and b and b[field] > 0])

    head = ["scenario"]
    head += [f"calls/s {labels[k]}" for k in keys]
    head += [f"ferry / {labels[k]} calls/s" for k in others]
    head += [f"CPU µs/call {labels[k]}" for k in keys]
    head += [f"ferry / {labels[k]} CPU" for k in others]
    if any(twins.values()):
        head += ["ferry Connect / ferry gRPC CPU"]
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
        if any(twins.values()):
            twin = twins[label]
            row += [fmt(ratio(label, "ferry", "cpu_us", twin[0]), 2) if twin else ""]
        row += [" / ".join(fmt(med(label, k, "faults"), 2) for k in keys)]
        row += [" / ".join(fmt(med(label, k, "busy"), 0) for k in keys)]
        row += [" / ".join(fmt(med(label, k, "client_busy"), 0) for k in keys)]
        row += [" / ".join(fmt(med(label, k, "client_us"), 1) for k in keys)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def measure_floor(build_dir, tmp_dir, pin, priority):
    """h2h_protobuf_floor's two figures (µs per parse + copy + serialize of the complex_proto
    request: messages reused, and an arena per call) on the server core, or None without it."""
    binary = os.path.join(build_dir, "bench", "head_to_head", "h2h_protobuf_floor")
    if not os.access(binary, os.X_OK):
        return None
    path = os.path.join(tmp_dir, "greeter_message.bin")
    with open(path, "wb") as f:
        f.write(greeter_message())
    command = priority + (["taskset", "-c", SERVER_CORE] if pin else []) + [binary, path]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    figures = dict(re.findall(r"^(floor_\w+_us) ([\d.]+)$", out, re.M))
    if len(figures) != 2:
        return None
    return {k: float(v) for k, v in figures.items()}


def complex_summary(rows, keys, results, floor):
    """The complex_proto table's second part: per load, what the message adds to ferry's CPU per
    call over its own 16 B echo in the same rounds, against protobuf's own cost of the message,
    ferry's CPU per call over tonic's, and ferry's allocations per call."""
    def per_round(label_a, key_a, label_b, key_b, combine):
        pairs = zip(results[(label_a, key_a)], results[(label_b, key_b)])
        return median([combine(a["cpu_us"], b["cpu_us"]) for a, b in pairs if a and b])

    head = ["load", "ferry CPU µs/call", "ferry 16 B echo CPU µs/call", "excess µs",
            "protobuf floor µs (messages reused / arena per call)",
            "excess / floor (reused; goal ≤ 1.5)", "ferry / tonic CPU (goal ≤ 0.25)",
            "ferry allocations/call"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for scenario in rows:
        label, twin = scenario[0], ECHO_TWINS[scenario[0]][0]
        ferry = median([r["cpu_us"] for r in results[(label, "ferry")] if r])
        echo = median([r["cpu_us"] for r in results[(twin, "ferry")] if r])
        excess = per_round(label, "ferry", twin, "ferry", lambda a, b: a - b)
        reused = floor["floor_reused_us"] if floor else None
        tonic = per_round(label, "ferry", label, "tonic", lambda a, b: a / b) \
            if "tonic" in keys else None
        allocations = median([r["allocations"] for r in results[(label, "ferry")]
                              if r and r["allocations"] is not None])
        lines.append("| " + " | ".join([
            label.split(", ", 1)[1], fmt(ferry, 2), fmt(echo, 2), fmt(excess, 2),
            f"{fmt(reused, 2)} / {fmt(floor['floor_arena_us'] if floor else None, 2)}",
            fmt(excess / reused if excess is not None and reused else None, 2),
            fmt(tonic, 2), fmt(allocations, 2)]) + " |")
    return "\n".join(lines) + (
        "\n\nexcess: ferry's CPU per call on complex_proto less its CPU per call on a 16 B echo at "
        "the same load (medians of per-round differences); floor: h2h_protobuf_floor, protobuf's "
        "parse of the request, copy of its Hello into the reply and serialization of the reply, "
        "in a tight loop on the server core" + ("" if floor else " (not built: no floor)") + ".")


def measure_cipher(pin, priority):
    """Bytes per second `openssl speed` encrypts with AES-128-GCM in 16 KiB blocks (TLS's largest
    record) on the server core, or None where openssl is missing or says nothing readable."""
    if shutil.which("openssl") is None:
        return None
    command = priority + (["taskset", "-c", SERVER_CORE] if pin else []) + [
        "openssl", "speed", "-evp", "aes-128-gcm", "-bytes", "16384", "-seconds", "2", "-mr"]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    except subprocess.TimeoutExpired:
        return None
    match = re.search(r"^\+F:\d+:AES-128-GCM:([\d.]+)$", out, re.M)
    return float(match.group(1)) if match else None


def tls_summary(rows, keys, labels, results, ceilings):
    """The TLS table's second part: ferry's CPU per small call against the best peer's (per
    round, the peer that spent least), what TLS adds to ferry's cleartext complex_proto when that
    table ran too, and for the stream, each server's bytes per CPU-second against the cipher's."""
    def figures(label, key):
        return results.get((label, key), [])

    peers = [k for k in keys if k != "ferry"]
    head = ["load", "ferry CPU µs/call", "best peer CPU µs/call",
            "ferry / best peer CPU (goal ≤ 0.5)", "ferry TLS / cleartext CPU"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    stream = None
    for scenario in rows:
        label = scenario[0]
        if PROTOCOLS[protocol_of(scenario)]["encoding"] == "expand":
            stream = label
            continue
        # Per round: ferry's figures, and the least CPU per call of the peers that ran.
        rounds = [(f, min(p["cpu_us"] for p in others if p))
                  for f, *others in zip(figures(label, "ferry"), *(figures(label, k) for k in peers))
                  if any(others)]
        best = [b for _, b in rounds]
        ratios = [f["cpu_us"] / b for f, b in rounds if f]
        clear = label.removeprefix("TLS ")
        over_clear = [a["cpu_us"] / b["cpu_us"]
                      for a, b in zip(figures(label, "ferry"), figures(clear, "ferry")) if a and b]
        lines.append("| " + " | ".join([
            label.split(", ", 1)[1], fmt(median([f["cpu_us"] for f in figures(label, "ferry")
                                                 if f]), 2),
            fmt(median(best), 2), fmt(median(ratios), 2), fmt(median(over_clear), 2)]) + " |")
    text = "\n".join(lines)
    if stream is not None:
        ceiling = median([c for c in ceilings if c])

        def per_cpu(label, key):
            return median([f["bytes_per_cpu_s"] for f in figures(label, key)
                           if f and f["bytes_per_cpu_s"]])

        head = ["server", "MB/s (wall)", "server busy %", "MB per server CPU-second",
                "fraction of the cipher's ceiling (goal ≥ 0.85 for ferry)"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for key in keys:
            runs = [f for f in figures(stream, key) if f]
            sent = per_cpu(stream, key)
            lines.append("| " + " | ".join([
                labels[key], fmt(median([f["bytes_s"] / 1e6 for f in runs if f["bytes_s"]]), 0),
                fmt(median([f["busy"] for f in runs]), 0), fmt(sent / 1e6 if sent else None, 0),
                fmt(sent / ceiling if sent and ceiling else None, 2)]) + " |")
        # A server that spends c ns per byte in cleartext spends at least c + the cipher's ns
        # per byte over TLS.
        clear = per_cpu(STREAM_TWIN[0], "ferry")
        both = 1 / (1 / clear + 1 / ceiling) if clear and ceiling else None
        ferry = per_cpu(stream, "ferry")
        text += f"\n\n{stream}:\n\n" + "\n".join(lines) + (
            "\n\nMB: 10^6 bytes of HTTP/2 frames h2load received (what the server encrypted) "
            f"per second. The cipher's ceiling: `openssl speed -evp aes-128-gcm`, 16 KiB blocks, "
            f"on the server core: {fmt(ceiling / 1e6 if ceiling else None, 0)} MB/s (median of "
            "one measurement per round" + ("" if ceiling else "; openssl not found") + "). "
            f"ferry's own cleartext stream at the same load: {fmt(clear / 1e6 if clear else None, 0)}"
            " MB per CPU-second; with the cipher's cost per byte added, at most "
            f"{fmt(both / 1e6 if both else None, 0)}, of which ferry's TLS stream reaches "
            f"{fmt(ferry / both if ferry and both else None, 2)}.")
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--peers-dir", default=None,
                        help="where scripts/install_peers.sh put connect-go's server "
                             "(default: <build-dir>/peers)")
    parser.add_argument("--out", default=None, help="default: <build-dir>/results/head_to_head.md")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--run-timeout", type=float, default=60.0, help="seconds per h2load run")
    parser.add_argument("--priority", choices=("realtime", "normal"), default="realtime",
                        help="realtime (default): servers and h2load under chrt -r 50 when "
                             "allowed; normal: as started")
    parser.add_argument("--suite", choices=("all",) + tuple(s[0] for s in SUITES), default="all",
                        help="the tables to make: ferry against grpc++ (gRPC), against "
                             "connect-go (Connect, with gRPC beside it), or both (default)")
    parser.add_argument("--only", default="",
                        help="run only the scenarios whose label has this (the echo checks "
                             "still cover every body size)")
    args = parser.parse_args()
    missing_code = 77 if args.smoke else 0
    # A SIGTERM (a timeout, a kill) unwinds like an exception, so that the servers are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    for tool in ("h2load", "nghttp"):
        if shutil.which(tool) is None:
            print(f"head_to_head: {tool} not found (Debian package nghttp2-client); skipped")
            return missing_code

    scale = float(os.environ.get("FERRY_H2H_SCALE", "1"))
    rounds = int(os.environ.get("FERRY_H2H_ROUNDS", "3"))
    # (name, server keys, scenarios, body sizes to check)
    suites = [(name, keys, [s for s in scenarios if args.only in s[0]],
               {s[1] for s in scenarios})
              for name, keys, scenarios in SUITES if args.suite in ("all", name)]
    if args.smoke:
        suites = [("grpc++", ["ferry", "async"], [("16 B x 8, 1 conn", 16, 1, 8, 300)], {16}),
                  ("tls", ["ferry", "async"],
                   [("TLS complex_proto, 1 conn x 8", 78, 1, 8, 300, "greeter-tls"),
                    ("TLS 64 KiB x 64 streamed, 1 conn x 1", 64 << 10, 1, 1, 4, "expand-tls")],
                   {78, 64 << 10}),
                  ("connect", ["ferry", "connect-go"],
                   [("Connect proto, HTTP/2, 16 B x 8, 1 conn", 16, 1, 8, 300, "connect-proto"),
                    ("Connect JSON, HTTP/1.1, 16 B x 1, 4 conns", 16, 4, 1, 300,
                     "connect-json")], {16})]
        scale, rounds = 1.0, 1
    suites = [s for s in suites if s[2]]
    if not suites:
        print(f"head_to_head: no scenario label has {args.only!r}")
        return 1

    dirs = {"build": os.path.join(args.build_dir, "bench", "head_to_head"),
            "peers": os.path.join(args.peers_dir or os.path.join(args.build_dir, "peers"), "bin")}
    where = {key: os.path.join(dirs[place], binary) for key, _, binary, place in SERVERS}
    present = {key for key in where if os.access(where[key], os.X_OK)}
    kept = []
    for name, keys, scenarios, sizes in suites:
        for key in keys:
            if key not in present:
                hint = (f"scripts/install_peers.sh PREFIX {PEER_INSTALL[key]}"
                        if key in PEER_INSTALL else "needs grpc++")
                print(f"head_to_head: {where[key]} not there ({hint}); its column is left out")
        keys = [k for k in keys if k in present]
        if keys[:1] != ["ferry"] or len(keys) < 2:
            print(f"head_to_head: the {name} table needs ferry's server and another; skipped")
            continue
        kept.append((name, keys, scenarios, sizes))
    suites = kept
    if not suites or (args.smoke and suites[0][0] != "grpc++"):
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

    servers, failures = {}, []
    tmp = tempfile.TemporaryDirectory(prefix="ferry_h2h_")
    try:
        # A server per key and transport (cleartext, TLS), for the tables that need it.
        for key, label, _, _ in SERVERS:
            for tls in (False, True):
                if any(key in runners(s, keys) and uses_tls(s) == tls
                       for _, keys, scenarios, _ in suites for s in scenarios):
                    servers[(key, tls)] = Server(key, label, where[key], pin, priority,
                                                 SERVER_ENV.get(key), tls)
        request_files = {}

        def request_file(protocol, size):
            if (protocol, size) not in request_files:
                path = os.path.join(tmp.name, f"request_{protocol}_{size}.bin")
                with open(path, "wb") as f:
                    f.write(request_body(protocol, size))
                request_files[(protocol, size)] = path
            return request_files[(protocol, size)]

        # Every body size of a table is checked, also with --only: the 1 MiB check is the first
        # large message a grpc++ server sees, and it changes how glibc serves grpc++ afterwards
        # (see the module comment), so a scenario's figures must not depend on which others ran.
        checked = set()
        for name, keys, scenarios, sizes in suites:
            if name in CHECKED_AS_LOADED:
                wanted = {(k, protocol_of(s), s[1]) for s in scenarios for k in runners(s, keys)}
            else:  # every body size, and the echo over gRPC too beside Connect
                protocols = {protocol_of(s) for s in scenarios} | {"grpc"}
                wanted = {(k, p, size) for size in sizes for k in keys for p in protocols}
            for key, protocol, size in sorted(wanted - checked):
                checked.add((key, protocol, size))
                server = servers[(key, uses_tls(protocol))]
                encoding = PROTOCOLS[protocol]["encoding"]
                if encoding == "expand":
                    problems = check_expand(server, request_file(protocol, size), size, protocol)
                elif encoding in ("grpc", "greeter"):
                    problems = check_echo(server, request_file(protocol, size),
                                          request_body(protocol, size), protocol)
                else:
                    problems = check_connect(server, protocol, size)
                for problem in problems:
                    failures.append(f"{server.label}, {protocol} {size} B check: {problem}")
        if failures:
            print("\n".join("head_to_head: FAILED " + f for f in failures))
            return 1

        def in_flight(scenario):
            return scenario[2] * scenario[3]

        def run(key, scenario, count):
            return run_h2load(servers[(key, uses_tls(scenario))], scenario, count,
                              request_file(protocol_of(scenario), scenario[1]), pin,
                              args.run_timeout, priority)

        # Each run makes the scenario's count (times the scale) or as many calls as fit in
        # RUN_SECONDS (times the scale) at the rate of an unmeasured warm-up run, whichever is
        # fewer: a loaded machine shortens the runs rather than stretching the benchmark.
        counts = {}
        started = time.monotonic()
        for name, keys, scenarios, _ in suites:
            for scenario in scenarios:
                for key in runners(scenario, keys):
                    most = max(in_flight(scenario), int(scenario[4] * scale))
                    if args.smoke:
                        counts[(scenario[0], key)] = most
                        continue
                    warm = run(key, scenario, max(in_flight(scenario), most // 10))
                    fit = int(warm["calls_s"] * RUN_SECONDS * scale) if isinstance(warm, dict) \
                        else 0
                    counts[(scenario[0], key)] = max(in_flight(scenario) * 4, min(most, fit))
        results = {(s[0], key): [] for _, keys, scenarios, _ in suites
                   for s in scenarios for key in runners(s, keys)}
        ceilings = []  # bytes/s AES-128-GCM encrypts on the server core, per round
        for round_index in range(rounds):
            for name, keys, scenarios, _ in suites:
                for scenario in scenarios:
                    for key in runners(scenario, keys):
                        figures = run(key, scenario, counts[(scenario[0], key)])
                        if isinstance(figures, str):
                            failures.append(f"{servers[(key, uses_tls(scenario))].label}, "
                                            f"{scenario[0]}, round "
                                            f"{round_index + 1}: {figures}")
                            figures = None
                        results[(scenario[0], key)].append(figures)
                if name == "tls":  # the cipher's ceiling, in every round beside the servers'
                    ceilings.append(measure_cipher(pin, priority))
        elapsed = time.monotonic() - started
        threads = ", ".join(f"{s.label}{' TLS' if s.tls else ''} {s.threads()}"
                            for s in servers.values())
        floor = measure_floor(args.build_dir, tmp.name, pin, priority) \
            if any(name == "complex_proto" for name, _, _, _ in suites) else None
    finally:
        for server in servers.values():
            server.stop()
        tmp.cleanup()

    texts = []
    for name, keys, scenarios, _ in suites:
        columns = [servers[(k, uses_tls(scenarios[0]))] for k in keys]
        rows = [sc for sc in scenarios if sc[0] not in TWIN_LABELS]
        notes = "Calls per run (" + " / ".join(s.label for s in columns) + "): " + "; ".join(
            sc[0] + " " + " / ".join(str(counts[(sc[0], s.key)]) for s in columns)
            for sc in rows) + "."
        text = table(rows, columns, results) + "\n\n" + notes
        if name == "complex_proto":
            text += "\n\n" + complex_summary(rows, keys, results, floor)
        if name == "tls":
            text += "\n\n" + tls_summary(rows, keys, {c.key: c.label for c in columns}, results,
                                           ceilings)
        texts.append(text)
    notes = (f"Medians of {rounds} round(s), servers interleaved per round; count scale "
             f"{scale:g}; {elapsed:.0f} s of load. Server on core {SERVER_CORE}, h2load on core "
             f"{CLIENT_CORE}{'' if pin else ' (NOT pinned)'}, "
             f"{'real-time round-robin (chrt -r 50)' if priority else 'normal priority'}. "
             f"Server threads: {threads}. Load average at the end: "
             f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}.\n"
             "Ratios: medians of the per-round ferry/other ratios (calls/s: > 1 means ferry "
             "serves more; CPU: < 1 means ferry spends less per call).")
    text = "\n\n".join(texts) + "\n\n" + notes
    print(text)
    out = args.out or os.path.join(args.build_dir, "results", "head_to_head.md")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        f.write(text + "\n")
    if failures:
        print("\n".join("head_to_head: FAILED " + f for f in failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
