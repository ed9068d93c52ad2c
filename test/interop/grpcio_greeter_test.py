#!/usr/bin/env python3
"""A Python grpcio client calling the greeter example's server (examples/greeter).

    grpcio_greeter_test.py --port P --proto-dir examples/greeter --out-dir DIR

Generates the greeter's Python stubs with grpc_tools.protoc into DIR, then checks, each bounded by
a deadline: SayHello; SayHello with gzip compression; SayHelloStreamReply with count 5; an empty
name (INVALID_ARGUMENT "name is empty"); a method the service lacks (UNIMPLEMENTED); a stream
cancelled after its first reply; and SayHello again (the server still serves). Prints PASS/FAIL
per check and exits 0 only if all passed. Meant to run as run_pair.py's client, in the peers' venv.
"""

import argparse
import os
import sys

import grpc
from grpc_tools import protoc

DEADLINE = 10.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()

    os.makedirs(args.out_dir, exist_ok=True)
    rc = protoc.main(["protoc", "-I" + args.proto_dir, "--python_out=" + args.out_dir,
                      "--grpc_python_out=" + args.out_dir,
                      os.path.join(args.proto_dir, "greeter.proto")])
    if rc != 0:
        print("FAIL protoc for greeter.proto: exit %d" % rc)
        return 1
    sys.path.insert(0, args.out_dir)
    import greeter_pb2
    import greeter_pb2_grpc

    failures = 0

    def check(what, cond, detail=""):
        nonlocal failures
        print("%s %s%s" % ("PASS" if cond else "FAIL", what, "" if cond else ": " + detail))
        if not cond:
            failures += 1

    def status_of(call):
        try:
            call()
        except grpc.RpcError as e:
            return e.code(), e.details()
        return grpc.StatusCode.OK, ""

    with grpc.insecure_channel("127.0.0.1:%d" % args.port) as channel:
        stub = greeter_pb2_grpc.GreeterStub(channel)

        reply = stub.SayHello(greeter_pb2.HelloRequest(name="grpcio"), timeout=DEADLINE)
        check("SayHello", reply.message == "Hello grpcio", repr(reply.message))

        reply = stub.SayHello(greeter_pb2.HelloRequest(name="gzip"), timeout=DEADLINE,
                              compression=grpc.Compression.Gzip)
        check("SayHello, gzip request", reply.message == "Hello gzip", repr(reply.message))

        replies = [r.message for r in stub.SayHelloStreamReply(
            greeter_pb2.HelloRequest(name="s", count=5), timeout=DEADLINE)]
        want = ["Hello s #%d" % i for i in range(1, 6)]
        check("SayHelloStreamReply count 5", replies == want, repr(replies))

        code, details = status_of(lambda: stub.SayHello(greeter_pb2.HelloRequest(),
                                                        timeout=DEADLINE))
        check("empty name -> INVALID_ARGUMENT",
              code == grpc.StatusCode.INVALID_ARGUMENT and details == "name is empty",
              "%s %r" % (code, details))

        missing = channel.unary_unary("/helloworld.Greeter/SayGoodbye",
                                      request_serializer=greeter_pb2.HelloRequest.SerializeToString,
                                      response_deserializer=greeter_pb2.HelloReply.FromString)
        code, details = status_of(lambda: missing(greeter_pb2.HelloRequest(name="x"),
                                                  timeout=DEADLINE))
        check("unknown method -> UNIMPLEMENTED", code == grpc.StatusCode.UNIMPLEMENTED,
              "%s %r" % (code, details))

        stream = stub.SayHelloStreamReply(greeter_pb2.HelloRequest(name="c", count=100000),
                                          timeout=DEADLINE)
        first = next(stream)
        stream.cancel()
        code, _ = status_of(lambda: list(stream))
        check("stream cancelled after the first reply",
              first.message == "Hello c #1" and code == grpc.StatusCode.CANCELLED,
              "%r %s" % (first.message, code))

        reply = stub.SayHello(greeter_pb2.HelloRequest(name="again"), timeout=DEADLINE)
        check("SayHello after all that", reply.message == "Hello again", repr(reply.message))

    print("%d checks failed" % failures if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
