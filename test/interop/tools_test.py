#!/usr/bin/env python3
"""Real gRPC tools against a gRPC server on 127.0.0.1: grpcurl calls, a ghz load, bad input.

    tools_test.py grpcurl   --port P --spec SPEC --import-path DIR --peers PREFIX
    tools_test.py ghz       --port P --spec SPEC --import-path DIR --peers PREFIX
    tools_test.py bad-input --port P --spec SPEC --import-path DIR --peers PREFIX --case NAME

Meant to run as run_pair.py's client (run_pair starts the server, substitutes {port}, and fails the
test if the server dies). SPEC is a JSON file describing the server's service:

    "proto"       path of its .proto file under --import-path
    "calls"       [{"method": "pkg.Service/Method", "request": {...},
                    "responses": [{...}, ...],          # grpcurl's JSON of every response, in order
                    "status": {"code": N, "message": "..."}}]   # only when the call must fail
                  the first call must succeed: bad-input repeats it after each bad input
    "load"        {"method": ..., "request": {...}}     # ghz: 2000 calls, 8 workers, 2 connections
    "bad_input"   {"method": ...,                       # a unary or server-streaming method
                   "message_field": N,                  # number of a field of its request whose
                                                        # type is a message, so 0xff 0xff there
                                                        # cannot parse
                   "max_receive_bytes": 4194304}        # the server's limit (default 4 MiB)

grpcurl and ghz come from PREFIX/bin; bad input crafted as raw HTTP/2 needs the h2 package (the
peers' venv). Every tool run is bounded by a timeout. Prints `PASS what` / `FAIL what: why` per
check and exits 0 only if every check passed. Bad-input cases (gRPC status the server must answer):

    unknown_method           grpcurl, a method the service lacks           UNIMPLEMENTED
    unknown_service          grpcurl, a service the server lacks           UNIMPLEMENTED
    wrong_message_type       grpcurl, a request whose message_field holds
                             bytes that are no valid message               INTERNAL
    oversized_message        grpcurl, a request of max_receive_bytes + 1   RESOURCE_EXHAUSTED
    max_size_message         grpcurl, a request of exactly max_receive_bytes   OK
    garbage_message          raw, bytes with an invalid wire type          INTERNAL
    truncated_message        raw, length prefix 100, 2 bytes, end of stream    INTERNAL
    compressed_flag_without_encoding   raw, flag 1, no grpc-encoding       INTERNAL
    unsupported_encoding     raw, grpc-encoding x-ferry-unsupported        UNIMPLEMENTED
    gzip_garbage             raw, grpc-encoding gzip, flag 1, a gzip magic
                             number followed by garbage                    INTERNAL
    unary_two_requests       raw, two request messages on the method       UNIMPLEMENTED
                             (a cardinality violation, gRPC's doc/statuscodes.md)
After each one the first spec call must still succeed (the server still serves).
"""

import argparse
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

TOOL_TIMEOUT = 30      # seconds for one grpcurl run (it also gets -max-time 10)
GHZ_TIMEOUT = 60       # seconds for the whole ghz load
RAW_TIMEOUT = 10.0     # seconds for one raw HTTP/2 call

OK, INTERNAL, UNIMPLEMENTED, RESOURCE_EXHAUSTED = 0, 13, 12, 8
CODE_NAMES = {0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED",
              5: "NOT_FOUND", 6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED",
              9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED",
              13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 16: "UNAUTHENTICATED"}


class CheckFailed(Exception):
    pass


def check(cond, why):
    if not cond:
        raise CheckFailed(why)


def code_name(code):
    return CODE_NAMES.get(code, str(code))


class Target:
    """The server under test: where it listens, its spec, and the tools to reach it with."""

    def __init__(self, args):
        self.port = args.port
        self.address = "127.0.0.1:%d" % args.port
        with open(args.spec) as f:
            self.spec = json.load(f)
        self.import_path = args.import_path
        self.grpcurl = os.path.join(args.peers, "bin", "grpcurl")
        self.ghz = os.path.join(args.peers, "bin", "ghz")
        self.scratch = tempfile.mkdtemp(prefix="ferry-tools-")


# ------------------------------------------------------------------------------------------ grpcurl

def run_grpcurl(target, method, request_json, import_path=None, proto=None):
    """Runs one grpcurl call; returns (status code, [responses], error message).

    The request goes through stdin (`-d @`), so that it may be megabytes long. With -format-error,
    grpcurl exits 64 + code and prints the status as JSON on stderr when the call fails.
    """
    cmd = [target.grpcurl, "-plaintext", "-max-time", "10", "-format-error",
           "-import-path", import_path or target.import_path, "-proto", proto or target.spec["proto"],
           "-d", "@", target.address, method]
    try:
        r = subprocess.run(cmd, input=request_json.encode(), capture_output=True,
                           timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise CheckFailed("grpcurl %s did not finish within %ds" % (method, TOOL_TIMEOUT))
    out, err = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
    responses = parse_json_stream(out, "grpcurl output")
    if r.returncode == 0:
        return OK, responses, ""
    if r.returncode > 64:
        try:
            status = json.loads(err)
            return int(status.get("code", 0)), responses, status.get("message", "")
        except ValueError:
            pass
    raise CheckFailed("grpcurl %s exited %d: %s" % (method, r.returncode, (err or out).strip()[:500]))


def parse_json_stream(text, what):
    """Parses whitespace-separated JSON values (grpcurl prints one per response)."""
    decoder, values, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return values
        try:
            value, i = decoder.raw_decode(text, i)
        except ValueError as e:
            raise CheckFailed("%s is not JSON (%s): %r" % (what, e, text[i:i + 200]))
        values.append(value)


def check_call(target, call):
    """Runs a spec call with grpcurl and compares its responses and status with the spec."""
    method = call["method"]
    code, responses, message = run_grpcurl(target, method, json.dumps(call.get("request", {})))
    want = call.get("status", {"code": OK})
    check(code == want["code"], "%s: status %s (%r), want %s"
          % (method, code_name(code), message, code_name(want["code"])))
    if "message" in want:
        check(message == want["message"], "%s: status message %r, want %r"
              % (method, message, want["message"]))
    if "responses" in call:
        check(responses == call["responses"], "%s: responses %s, want %s"
              % (method, json.dumps(responses)[:500], json.dumps(call["responses"])[:500]))


def grpcurl_test(target):
    results = []
    for i, call in enumerate(target.spec["calls"]):
        results.append(run_check("call %d %s" % (i, call["method"]), lambda: check_call(target, call)))
    return all(results)


# ---------------------------------------------------------------------------------------------- ghz

def ghz_test(target):
    load = target.spec["load"]
    total = 2000
    cmd = ["timeout", "-k", "5", str(GHZ_TIMEOUT), target.ghz, "--insecure",
           "--proto", os.path.join(target.import_path, target.spec["proto"]),
           "--import-paths", target.import_path, "--call", load["method"],
           "-d", json.dumps(load.get("request", {})), "-n", str(total), "-c", "8",
           "--connections", "2", "--format", "json", target.address]

    def run():
        r = subprocess.run(cmd, capture_output=True)
        check(r.returncode == 0, "ghz exited %d: %s"
              % (r.returncode, r.stderr.decode("utf-8", "replace").strip()[:500]))
        try:
            report = json.loads(r.stdout)
        except ValueError as e:
            raise CheckFailed("ghz output is not JSON (%s): %r" % (e, r.stdout[:200]))
        count = report.get("count")
        codes = report.get("statusCodeDistribution") or {}
        errors = report.get("errorDistribution") or {}
        print("ghz: %s calls in %.2f s, %.0f calls/s, average %.2f ms, slowest %.2f ms, "
              "status codes %s" % (count, report.get("total", 0) / 1e9, report.get("rps", 0),
                                   report.get("average", 0) / 1e6, report.get("slowest", 0) / 1e6,
                                   codes), flush=True)
        check(not errors, "errors: %s" % json.dumps(errors)[:500])
        check(count == total, "%s calls made, want %d" % (count, total))
        check(codes == {"OK": total}, "status codes %s, want {'OK': %d}" % (codes, total))
        check(report.get("endReason") == "normal", "end reason %r" % report.get("endReason"))

    return run_check("ghz %s -n %d -c 8 --connections 2" % (load["method"], total), run)


# ---------------------------------------------------------------------------------------- bad input

def shadow_proto(target):
    """Writes a .proto whose service has the path of the spec's bad_input method, but whose request
    is ours: `bytes field = message_field` (no valid message in bad_input[message_field]) and a
    `bytes filler` at the highest field number (unknown to the server, so any size parses).
    Returns (import path, file name, package prefix, service, method)."""
    bad = target.spec["bad_input"]
    service_path, method = bad["method"].split("/")
    package, _, service = service_path.rpartition(".")
    text = ['syntax = "proto3";']
    if package:
        text.append("package %s;" % package)
    text += [
        "message FerryToolsRequest { bytes field = %d; bytes filler = 536870911; }"
        % bad["message_field"],
        "message FerryToolsResponse {}",
        "service %s {" % service,
        "  rpc %s(FerryToolsRequest) returns (FerryToolsResponse);" % method,
        "  rpc FerryToolsNoSuchMethod(FerryToolsRequest) returns (FerryToolsResponse);",
        "}",
        "service FerryToolsNoSuchService {",
        "  rpc %s(FerryToolsRequest) returns (FerryToolsResponse);" % method,
        "}",
    ]
    name = "ferry_tools_shadow.proto"
    with open(os.path.join(target.scratch, name), "w") as f:
        f.write("\n".join(text) + "\n")
    prefix = package + "." if package else ""
    return target.scratch, name, prefix, service, method


def varint_size(n):
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def filler_for(total):
    """Length of a `filler` bytes value that makes FerryToolsRequest exactly `total` bytes."""
    tag = varint_size((536870911 << 3) | 2)
    n = total - tag - 1
    while tag + varint_size(n) + n > total:
        n -= 1
    check(tag + varint_size(n) + n == total, "cannot build a %d-byte request" % total)
    return n


def expect_grpcurl_status(target, method, request, want, proto=None):
    import_path, name = proto if proto else (None, None)
    code, _, message = run_grpcurl(target, method, json.dumps(request), import_path, name)
    print("  %s -> %s %r" % (method, code_name(code), message[:200]), flush=True)
    check(code == want, "%s: status %s (%r), want %s"
          % (method, code_name(code), message, code_name(want)))


def grpcurl_case(name):
    def run(target):
        import_path, proto, prefix, service, method = shadow_proto(target)
        shadow = (import_path, proto)
        limit = int(target.spec["bad_input"].get("max_receive_bytes", 4 << 20))
        path = "%s%s/%s" % (prefix, service, method)
        if name == "unknown_method":
            expect_grpcurl_status(target, "%s%s/FerryToolsNoSuchMethod" % (prefix, service), {},
                                  UNIMPLEMENTED, shadow)
        elif name == "unknown_service":
            expect_grpcurl_status(target, "%sFerryToolsNoSuchService/%s" % (prefix, method), {},
                                  UNIMPLEMENTED, shadow)
        elif name == "wrong_message_type":
            expect_grpcurl_status(target, path, {"field": base64.b64encode(b"\xff\xff").decode()},
                                  INTERNAL, shadow)
        elif name == "oversized_message":
            filler = bytes(filler_for(limit + 1))
            expect_grpcurl_status(target, path, {"filler": base64.b64encode(filler).decode()},
                                  RESOURCE_EXHAUSTED, shadow)
        elif name == "max_size_message":
            filler = bytes(filler_for(limit))
            expect_grpcurl_status(target, path, {"filler": base64.b64encode(filler).decode()},
                                  OK, shadow)
    return run


def raw_call(target, path, body, headers=()):
    """One gRPC call over a fresh HTTP/2 connection, hand-built with h2: sends HEADERS and one DATA
    frame with END_STREAM, returns (grpc-status, grpc-message) from the trailers (or the
    trailers-only response). Fails the check on RST_STREAM, GOAWAY, a closed connection or a
    missing grpc-status."""
    import h2.config
    import h2.connection
    import h2.events

    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    deadline = time.monotonic() + RAW_TIMEOUT
    with socket.create_connection(("127.0.0.1", target.port), timeout=RAW_TIMEOUT) as sock:
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, [
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", target.address), ("content-type", "application/grpc"),
            ("te", "trailers")] + list(headers))
        conn.send_data(stream, body, end_stream=True)
        sock.sendall(conn.data_to_send())
        status = {}
        while True:
            remaining = deadline - time.monotonic()
            check(remaining > 0, "no response within %gs" % RAW_TIMEOUT)
            sock.settimeout(remaining)
            try:
                data = sock.recv(65536)
            except socket.timeout:
                raise CheckFailed("no response within %gs" % RAW_TIMEOUT)
            check(data, "the server closed the connection without answering")
            for event in conn.receive_data(data):
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    for k, v in event.headers:
                        if k in (":status", "grpc-status", "grpc-message"):
                            status[k] = v
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamReset):
                    raise CheckFailed("the server reset the stream (error code %s) instead of "
                                      "answering with a status" % event.error_code)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    raise CheckFailed("the server sent GOAWAY (error code %s)" % event.error_code)
                elif isinstance(event, h2.events.StreamEnded):
                    check(status.get(":status") == "200", "HTTP status %r" % status.get(":status"))
                    check("grpc-status" in status, "the response has no grpc-status")
                    return int(status["grpc-status"]), status.get("grpc-message", "")
            sock.sendall(conn.data_to_send())


def framed(message, flag=0, length=None):
    return struct.pack(">BI", flag, len(message) if length is None else length) + message


RAW_CASES = {
    # name: (body, extra headers, expected grpc-status)
    "garbage_message": (framed(b"\x0f"), (), INTERNAL),                 # field 1, wire type 7
    "truncated_message": (framed(b"\x08\x01", length=100), (), INTERNAL),
    "compressed_flag_without_encoding": (framed(b"\x08\x01", flag=1), (), INTERNAL),
    "unsupported_encoding": (framed(b"\x08\x01", flag=1), (("grpc-encoding", "x-ferry-unsupported"),),
                             UNIMPLEMENTED),
    "gzip_garbage": (framed(b"\x1f\x8b\x08\x00" + b"garbage, not deflate" * 4, flag=1),
                     (("grpc-encoding", "gzip"),), INTERNAL),
    "unary_two_requests": (framed(b"") + framed(b""), (), UNIMPLEMENTED),
}


def raw_case(name):
    body, headers, want = RAW_CASES[name]

    def run(target):
        path = "/" + target.spec["bad_input"]["method"]
        code, message = raw_call(target, path, body, headers)
        print("  raw %s -> %s %r" % (path, code_name(code), message[:200]), flush=True)
        check(code == want, "status %s (%r), want %s" % (code_name(code), message, code_name(want)))
    return run


BAD_INPUT_CASES = {name: grpcurl_case(name) for name in
                   ("unknown_method", "unknown_service", "wrong_message_type", "oversized_message",
                    "max_size_message")}
BAD_INPUT_CASES.update({name: raw_case(name) for name in RAW_CASES})


def bad_input_test(target, case):
    first = target.spec["calls"][0]
    ok = run_check("bad input %s" % case, lambda: BAD_INPUT_CASES[case](target))
    ok &= run_check("then %s still served" % first["method"], lambda: check_call(target, first))
    return ok


# --------------------------------------------------------------------------------------------- main

def run_check(what, fn):
    start = time.monotonic()
    try:
        fn()
    except CheckFailed as e:
        print("FAIL %s: %s (%.2fs)" % (what, e, time.monotonic() - start), flush=True)
        return False
    print("PASS %s (%.2fs)" % (what, time.monotonic() - start), flush=True)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tool", choices=("grpcurl", "ghz", "bad-input"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--spec", required=True, help="JSON description of the server's service")
    ap.add_argument("--import-path", required=True, help="root of the spec's proto")
    ap.add_argument("--peers", required=True, help="prefix of scripts/install_peers.sh")
    ap.add_argument("--case", choices=sorted(BAD_INPUT_CASES), help="the bad-input case")
    args = ap.parse_args()
    if args.tool == "bad-input" and not args.case:
        ap.error("bad-input needs --case")

    target = Target(args)
    try:
        if args.tool == "grpcurl":
            ok = grpcurl_test(target)
        elif args.tool == "ghz":
            ok = ghz_test(target)
        else:
            ok = bad_input_test(target, args.case)
    finally:
        for name in os.listdir(target.scratch):
            os.unlink(os.path.join(target.scratch, name))
        os.rmdir(target.scratch)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
