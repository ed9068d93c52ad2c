#!/usr/bin/env python3
"""grpcio's side of ferry's rich error details test (test/rich_status_test.cc).

    PREFIX/venv/bin/python rich_status_peer.py --proto-dir PROTO --out-dir DIR call --port PORT
        Calls /ferry.testing.Errors/Fail (raw bytes, no stubs) on a ferry server and prints what the
        error carried: `CODE n`, `MESSAGE m`, `DETAILS <hex of the google.rpc.Status it parsed from
        grpc-status-details-bin, re-serialized>`.
    ... serve
        Serves /ferry.testing.Errors/Fail, answering every call with INVALID_ARGUMENT, a message and
        a google.rpc.Status in grpc-status-details-bin (as grpcio-status does); prints `PORT n`
        and exits after one call (or 30 s).
google.rpc.Status is compiled from ferry's proto/google/rpc/status.proto with grpc_tools.protoc.
"""

import argparse
import os
import sys
import threading
from concurrent import futures

import grpc

METHOD = "/ferry.testing.Errors/Fail"


def load_status_pb2(proto_dir, out_dir):
    import grpc_tools
    from grpc_tools import protoc

    os.makedirs(out_dir, exist_ok=True)
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main(["grpc_tools.protoc", "-I" + proto_dir, "-I" + well_known,
                      "--python_out=" + out_dir, "google/rpc/status.proto"])
    if rc != 0:
        raise RuntimeError("grpc_tools.protoc failed with exit code %d" % rc)
    sys.path.insert(0, out_dir)  # google/ is a namespace package: google.rpc joins google.protobuf
    from google.rpc import status_pb2
    return status_pb2


def call(status_pb2, port):
    with grpc.insecure_channel("127.0.0.1:%d" % port) as channel:
        fail = channel.unary_unary(METHOD)  # bytes in, bytes out
        try:
            fail(b"", timeout=10)
            print("UNEXPECTED OK")
            return 1
        except grpc.RpcError as e:
            print("CODE %d" % e.code().value[0])
            print("MESSAGE %s" % e.details())
            raw = dict(e.trailing_metadata() or ()).get("grpc-status-details-bin")
            if raw is None:
                print("DETAILS none")
                return 0
            status = status_pb2.Status()
            status.ParseFromString(raw)
            print("DETAILS %s" % status.SerializeToString().hex())
            return 0


def serve(status_pb2):
    done = threading.Event()

    def fail(request, context):
        status = status_pb2.Status(code=grpc.StatusCode.INVALID_ARGUMENT.value[0],
                                   message="from python")
        detail = status.details.add()
        detail.type_url = "type.googleapis.com/ferry.testing.EchoResponse"
        detail.value = b"\x0a\x0bpython says"  # EchoResponse{payload: "python says"}
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        done.set()
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "from python")

    handler = grpc.method_handlers_generic_handler(
        "ferry.testing.Errors", {"Fail": grpc.unary_unary_rpc_method_handler(fail)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("PORT %d" % port, flush=True)
    done.wait(30)
    server.stop(1).wait()
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("mode", choices=["call", "serve"])
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    status_pb2 = load_status_pb2(args.proto_dir, args.out_dir)
    return call(status_pb2, args.port) if args.mode == "call" else serve(status_pb2)


if __name__ == "__main__":
    sys.exit(main())
