#!/usr/bin/env python3
"""Python grpcio client interop test against a grpc.testing.TestService server.

    PREFIX/venv/bin/python test/interop/grpcio_client_test.py --port PORT \
        --proto-dir /usr/share/grpc-proto --out-dir DIR

Generates the grpc.testing stubs into DIR with grpc_tools.protoc, runs the interop cases (modelled on
the descriptions in grpc's interop-test-descriptions and grpc-go's interop client) and prints one line
per check, `PASS name` or `FAIL name: why`, then `N passed, M failed`. Exits 0 only if nothing failed.
Every RPC carries a deadline (10 s unless the case says otherwise), so a silent server cannot hang it.
"""

import argparse
import importlib
import os
import queue
import sys
import threading
import time
import traceback

import grpc

DEADLINE = 10.0  # seconds, per RPC

# Filled in by load_stubs().
empty_pb2 = messages_pb2 = test_pb2_grpc = None


def load_stubs(proto_dir, out_dir):
    """Compiles the testing protos into out_dir and imports them as grpc.testing.*.

    protoc names the modules after the proto package, grpc/testing/*_pb2.py, and the generated code
    imports them as `grpc.testing.*`, which lives inside grpcio's own `grpc` package. Extending
    grpc.__path__ with out_dir/grpc makes `grpc.testing` resolve to the generated directory.
    """
    global empty_pb2, messages_pb2, test_pb2_grpc
    import grpc_tools
    from grpc_tools import protoc

    os.makedirs(out_dir, exist_ok=True)
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    protos = ["grpc/testing/empty.proto", "grpc/testing/messages.proto", "grpc/testing/test.proto"]
    rc = protoc.main(["grpc_tools.protoc", "-I" + proto_dir, "-I" + well_known,
                      "--python_out=" + out_dir, "--grpc_python_out=" + out_dir] + protos)
    if rc != 0:
        raise RuntimeError("grpc_tools.protoc failed with exit code %d" % rc)

    gen_grpc = os.path.join(os.path.abspath(out_dir), "grpc")
    if gen_grpc not in grpc.__path__:
        grpc.__path__.append(gen_grpc)
    # A namespace package over the generated dir, or grpcio-testing's package if that is installed.
    testing = importlib.import_module("grpc.testing")
    gen_testing = os.path.join(gen_grpc, "testing")
    if gen_testing not in list(testing.__path__):
        testing.__path__.append(gen_testing)

    empty_pb2 = importlib.import_module("grpc.testing.empty_pb2")
    messages_pb2 = importlib.import_module("grpc.testing.messages_pb2")
    test_pb2_grpc = importlib.import_module("grpc.testing.test_pb2_grpc")


# ----------------------------------------------------------------------------------------- helpers

class CheckFailed(Exception):
    pass


def check(cond, why):
    if not cond:
        raise CheckFailed(why)


def payload(size):
    return messages_pb2.Payload(type=messages_pb2.COMPRESSABLE, body=bytes(size))


def check_payload(p, size, what="payload"):
    check(p.type == messages_pb2.COMPRESSABLE,
          "%s type %d, want COMPRESSABLE (0)" % (what, p.type))
    check(len(p.body) == size, "%s length %d, want %d" % (what, len(p.body), size))
    check(p.body == bytes(size), "%s body is not all zero bytes" % what)


def expect_rpc_error(fn, code, details=None):
    """Runs fn(), which must raise grpc.RpcError with `code` (and exactly `details` if given)."""
    try:
        fn()
    except grpc.RpcError as e:
        check(e.code() == code, "got %s (%r), want %s" % (e.code(), e.details(), code))
        if details is not None:
            check(e.details() == details, "details %r, want %r" % (e.details(), details))
        return e
    raise CheckFailed("RPC succeeded, want %s" % code)


class RequestQueue:
    """A request iterator fed one message at a time; close() half-closes the stream."""
    _END = object()

    def __init__(self):
        self._q = queue.Queue()

    def put(self, msg):
        self._q.put(msg)

    def close(self):
        self._q.put(self._END)

    def __iter__(self):
        return self

    def __next__(self):
        msg = self._q.get()
        if msg is self._END:
            raise StopIteration
        return msg


def metadata_values(md, key):
    return [v for k, v in (md or ()) if k == key]


ECHO_INITIAL = ("x-grpc-test-echo-initial", "test_initial_metadata_value")
ECHO_TRAILING = ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab")


def check_echoed_metadata(initial, trailing, where):
    got = metadata_values(initial, ECHO_INITIAL[0])
    check(got == [ECHO_INITIAL[1]],
          "%s initial metadata %s = %r, want [%r]" % (where, ECHO_INITIAL[0], got, ECHO_INITIAL[1]))
    got = metadata_values(trailing, ECHO_TRAILING[0])
    check(got == [ECHO_TRAILING[1]],
          "%s trailing metadata %s = %r, want [%r]" % (where, ECHO_TRAILING[0], got, ECHO_TRAILING[1]))


# ------------------------------------------------------------------------------------------- cases

def empty_unary(stub, channel):
    resp = stub.EmptyCall(empty_pb2.Empty(), timeout=DEADLINE)
    check(isinstance(resp, empty_pb2.Empty), "response is %r, want grpc.testing.Empty" % type(resp))
    check(resp.ByteSize() == 0, "response is %d bytes, want 0" % resp.ByteSize())


def large_unary(stub, channel):
    req = messages_pb2.SimpleRequest(response_type=messages_pb2.COMPRESSABLE, response_size=314159,
                                     payload=payload(271828))
    resp = stub.UnaryCall(req, timeout=DEADLINE)
    check_payload(resp.payload, 314159, "response payload")


CLIENT_STREAM_SIZES = [27182, 8, 1828, 45904]
SERVER_STREAM_SIZES = [31415, 9, 2653, 58979]


def client_streaming(stub, channel):
    reqs = [messages_pb2.StreamingInputCallRequest(payload=payload(n)) for n in CLIENT_STREAM_SIZES]
    resp = stub.StreamingInputCall(iter(reqs), timeout=DEADLINE)
    check(resp.aggregated_payload_size == 74922,
          "aggregated_payload_size %d, want 74922" % resp.aggregated_payload_size)


def server_streaming(stub, channel):
    req = messages_pb2.StreamingOutputCallRequest(
        response_type=messages_pb2.COMPRESSABLE,
        response_parameters=[messages_pb2.ResponseParameters(size=n) for n in SERVER_STREAM_SIZES])
    call = stub.StreamingOutputCall(req, timeout=DEADLINE)
    got = []
    for i, resp in enumerate(call):
        check(i < len(SERVER_STREAM_SIZES), "more than %d responses" % len(SERVER_STREAM_SIZES))
        check_payload(resp.payload, SERVER_STREAM_SIZES[i], "response %d payload" % i)
        got.append(len(resp.payload.body))
    check(got == SERVER_STREAM_SIZES, "response sizes %r, want %r" % (got, SERVER_STREAM_SIZES))
    check(call.code() == grpc.StatusCode.OK, "status %s, want OK" % call.code())


def ping_pong(stub, channel):
    reqs = RequestQueue()
    call = stub.FullDuplexCall(reqs, timeout=DEADLINE)
    try:
        for i, (out_size, in_size) in enumerate(zip(SERVER_STREAM_SIZES, CLIENT_STREAM_SIZES)):
            reqs.put(messages_pb2.StreamingOutputCallRequest(
                response_type=messages_pb2.COMPRESSABLE,
                response_parameters=[messages_pb2.ResponseParameters(size=out_size)],
                payload=payload(in_size)))
            resp = next(call, None)
            check(resp is not None, "stream ended before response %d" % i)
            check_payload(resp.payload, out_size, "response %d payload" % i)
    finally:
        reqs.close()
    extra = next(call, None)
    check(extra is None, "got a response after the last request")
    check(call.code() == grpc.StatusCode.OK, "status %s, want OK" % call.code())


def empty_stream(stub, channel):
    call = stub.FullDuplexCall(iter([]), timeout=DEADLINE)
    got = list(call)
    check(got == [], "got %d responses, want none" % len(got))
    check(call.code() == grpc.StatusCode.OK, "status %s, want OK" % call.code())


def custom_metadata(stub, channel):
    md = [ECHO_INITIAL, ECHO_TRAILING]
    # Unary.
    req = messages_pb2.SimpleRequest(response_type=messages_pb2.COMPRESSABLE, response_size=1,
                                     payload=payload(1))
    resp, call = stub.UnaryCall.with_call(req, metadata=md, timeout=DEADLINE)
    check_payload(resp.payload, 1, "unary response payload")
    check_echoed_metadata(call.initial_metadata(), call.trailing_metadata(), "unary")
    # Full duplex.
    reqs = RequestQueue()
    call = stub.FullDuplexCall(reqs, metadata=md, timeout=DEADLINE)
    try:
        reqs.put(messages_pb2.StreamingOutputCallRequest(
            response_type=messages_pb2.COMPRESSABLE,
            response_parameters=[messages_pb2.ResponseParameters(size=1)], payload=payload(1)))
        initial = call.initial_metadata()
        resp = next(call, None)
        check(resp is not None, "stream ended without a response")
        check_payload(resp.payload, 1, "stream response payload")
    finally:
        reqs.close()
    check(next(call, None) is None, "got a second stream response")
    check(call.code() == grpc.StatusCode.OK, "stream status %s, want OK" % call.code())
    check_echoed_metadata(initial, call.trailing_metadata(), "stream")


def _echo_status(stub, message):
    status = messages_pb2.EchoStatus(code=2, message=message)
    # Unary.
    expect_rpc_error(
        lambda: stub.UnaryCall(messages_pb2.SimpleRequest(response_status=status), timeout=DEADLINE),
        grpc.StatusCode.UNKNOWN, message)


def status_code_and_message(stub, channel):
    msg = "test status message"
    _echo_status(stub, msg)
    # Full duplex: the status is carried by the first request.
    req = messages_pb2.StreamingOutputCallRequest(
        response_status=messages_pb2.EchoStatus(code=2, message=msg))
    expect_rpc_error(lambda: list(stub.FullDuplexCall(iter([req]), timeout=DEADLINE)),
                     grpc.StatusCode.UNKNOWN, msg)


def special_status_message(stub, channel):
    _echo_status(stub, "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n")


def unimplemented_method(stub, channel):
    expect_rpc_error(lambda: stub.UnimplementedCall(empty_pb2.Empty(), timeout=DEADLINE),
                     grpc.StatusCode.UNIMPLEMENTED)


def unimplemented_service(stub, channel):
    other = test_pb2_grpc.UnimplementedServiceStub(channel)
    expect_rpc_error(lambda: other.UnimplementedCall(empty_pb2.Empty(), timeout=DEADLINE),
                     grpc.StatusCode.UNIMPLEMENTED)


def cancel_after_begin(stub, channel):
    release = threading.Event()

    def nothing():  # a request stream that never sends anything until released
        release.wait(DEADLINE)
        return
        yield  # noqa: unreachable; makes this a generator

    fut = stub.StreamingInputCall.future(nothing(), timeout=DEADLINE)
    try:
        time.sleep(0.05)  # let the call actually begin (HEADERS on the wire)
        check(fut.cancel(), "cancel() returned False (call already finished: %s)" % fut.code())
        check(fut.cancelled(), "future not cancelled after cancel()")
        check(fut.code() == grpc.StatusCode.CANCELLED, "status %s, want CANCELLED" % fut.code())
    finally:
        release.set()


def timeout_on_sleeping_server(stub, channel):
    req = messages_pb2.StreamingOutputCallRequest(response_type=messages_pb2.COMPRESSABLE,
                                                  payload=payload(27182))
    # Keep the request stream open (no half-close), as grpc-go's client does: a server that has
    # read the request and waits for more must be cut off by the 1 ms deadline, not by end-of-stream.
    reqs = RequestQueue()
    reqs.put(req)
    start = time.monotonic()
    try:
        list(stub.FullDuplexCall(reqs, timeout=0.001))
    except grpc.RpcError as e:
        elapsed = time.monotonic() - start
        code, details = e.code(), e.details() or ""
    else:
        raise CheckFailed("RPC succeeded, want DEADLINE_EXCEEDED")
    finally:
        reqs.close()
    # A server whose own copy of the deadline expires resets the stream with RST_STREAM(CANCEL)
    # (grpc-go does). If that reaches grpc-core before its own deadline timer fires, grpcio reports
    # CANCELLED (~1 run in 6 against grpc-go). grpc-go's client maps such a reset to
    # DEADLINE_EXCEEDED once the deadline has passed; accept the same, and nothing else.
    if (code == grpc.StatusCode.CANCELLED and elapsed >= 0.001
            and "RST_STREAM with error code 8" in details):
        print("note: timeout_on_sleeping_server: server RST_STREAM(CANCEL) after the deadline "
              "(%.1f ms) reported as CANCELLED by grpcio; counted as DEADLINE_EXCEEDED"
              % (elapsed * 1e3), file=sys.stderr)
        return
    check(code == grpc.StatusCode.DEADLINE_EXCEEDED,
          "got %s (%r), want DEADLINE_EXCEEDED" % (code, details))


def many_concurrent(stub, channel):
    n = 200
    req = messages_pb2.SimpleRequest(response_type=messages_pb2.COMPRESSABLE, response_size=1024,
                                     payload=payload(64))
    futs = [stub.UnaryCall.future(req, timeout=DEADLINE) for _ in range(n)]
    bad = []
    for i, f in enumerate(futs):
        try:
            check_payload(f.result().payload, 1024, "call %d payload" % i)
        except grpc.RpcError as e:
            bad.append("call %d: %s %r" % (i, e.code(), e.details()))
        except CheckFailed as e:
            bad.append(str(e))
    check(not bad, "%d/%d calls failed, first: %s" % (len(bad), n, bad[0] if bad else ""))


def deadline_propagates(stub, channel):
    req = messages_pb2.SimpleRequest(response_type=messages_pb2.COMPRESSABLE, response_size=10,
                                     payload=payload(10))
    resp, call = stub.UnaryCall.with_call(req, timeout=5.0)
    check_payload(resp.payload, 10, "response payload")
    check(call.code() == grpc.StatusCode.OK, "status %s, want OK" % call.code())


CASES = [
    empty_unary, large_unary, client_streaming, server_streaming, ping_pong, empty_stream,
    custom_metadata, status_code_and_message, special_status_message, unimplemented_method,
    unimplemented_service, cancel_after_begin, timeout_on_sleeping_server, many_concurrent,
    deadline_propagates,
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--proto-dir", default="/usr/share/grpc-proto")
    ap.add_argument("--out-dir", required=True, help="where the generated stubs go")
    ap.add_argument("--case", action="append", help="run only these cases (repeatable)")
    args = ap.parse_args()

    try:
        load_stubs(args.proto_dir, args.out_dir)
    except Exception as e:
        print("FAIL load_stubs: %s: %s" % (type(e).__name__, e))
        print("0 passed, 1 failed")
        return 1
    cases = CASES
    if args.case:
        known = {c.__name__: c for c in CASES}
        unknown = [c for c in args.case if c not in known]
        if unknown:
            ap.error("unknown case(s): %s" % ", ".join(unknown))
        cases = [known[c] for c in args.case]

    # Loopback only: never route through an http_proxy from the environment.
    options = [("grpc.enable_http_proxy", 0)]
    passed = failed = 0
    with grpc.insecure_channel("%s:%d" % (args.host, args.port), options=options) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=DEADLINE)
        except grpc.FutureTimeoutError:
            print("note: channel to %s:%d not ready after %gs" % (args.host, args.port, DEADLINE),
                  file=sys.stderr)
        stub = test_pb2_grpc.TestServiceStub(channel)
        for case in cases:
            name = case.__name__
            try:
                case(stub, channel)
            except CheckFailed as e:
                failed += 1
                print("FAIL %s: %s" % (name, e), flush=True)
            except grpc.RpcError as e:
                failed += 1
                print("FAIL %s: RPC failed: %s %r" % (name, e.code(), e.details()), flush=True)
            except Exception as e:  # a bug in the case itself, still a failure
                failed += 1
                where = traceback.extract_tb(e.__traceback__)[-1]
                print("FAIL %s: %s: %s (line %d)" % (name, type(e).__name__, e, where.lineno),
                      flush=True)
            else:
                passed += 1
                print("PASS %s" % name, flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
