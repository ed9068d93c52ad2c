#!/usr/bin/env python3
"""TLS, mutual TLS and Unix sockets against real peers: grpcio (Python) and grpcurl clients
calling ferry_interop_server.

    tls_peers_test.py --mode MODE --server BIN --certs DIR --proto-dir DIR --peers DIR
                      [--out-dir DIR]

MODE: grpcio-tls (ssl_channel_credentials, host name override), grpcio-mtls (client certificate;
a client without one is refused), grpcio-unix (unix: target), grpcurl-tls (-cacert, and refused
without it), grpcurl-unix (-unix). Starts the server itself (on a free port, or a Unix socket in a
temporary directory), runs the mode's checks, stops the server; exit 0 when all passed. grpcio
modes need the peers' venv python (they import grpcio_client_test.py beside this file).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

HOST_OVERRIDE = "foo.test.google.fr"  # a name in test/certs/server.pem, as gRPC's interop uses


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, extra):
    proc = subprocess.Popen([args.server, "--host=127.0.0.1"] + extra, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    if "listening" not in line:
        proc.kill()
        raise SystemExit("server did not start: " + line + proc.stdout.read())
    return proc


def stop_server(proc):
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def check(cond, why):
    if not cond:
        raise AssertionError(why)


def grpcio_modes(args, mode, target, certs):
    import grpc
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import grpcio_client_test as cases
    out_dir = args.out_dir or tempfile.mkdtemp()
    cases.load_stubs(args.proto_dir, out_dir)
    from grpc.testing import test_pb2_grpc, empty_pb2

    def read(name):
        with open(os.path.join(certs, name), "rb") as f:
            return f.read()

    override = [("grpc.ssl_target_name_override", HOST_OVERRIDE)]
    if mode == "grpcio-unix":
        channel = grpc.insecure_channel(target)
    elif mode == "grpcio-tls":
        channel = grpc.secure_channel(
            target, grpc.ssl_channel_credentials(read("ca.pem")), options=override)
    else:
        creds = grpc.ssl_channel_credentials(read("ca.pem"), read("client.key"),
                                             read("client.pem"))
        channel = grpc.secure_channel(target, creds, options=override)
    with channel:
        stub = test_pb2_grpc.TestServiceStub(channel)
        for case in (cases.empty_unary, cases.large_unary, cases.client_streaming,
                     cases.server_streaming, cases.ping_pong, cases.custom_metadata):
            case(stub, channel)
            print("ok  %s %s" % (mode, case.__name__))
    if mode == "grpcio-mtls":  # no client certificate: refused before any handler
        anonymous = grpc.secure_channel(
            target, grpc.ssl_channel_credentials(read("ca.pem")), options=override)
        with anonymous:
            try:
                test_pb2_grpc.TestServiceStub(anonymous).EmptyCall(empty_pb2.Empty(), timeout=10)
                raise AssertionError("a client without a certificate got an answer")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.UNAVAILABLE, "refusal: %s" % e)
        print("ok  %s refused without a client certificate" % mode)


def grpcurl_modes(args, mode, address, certs):
    grpcurl = os.path.join(args.peers, "bin", "grpcurl")
    base = [grpcurl, "-max-time", "10", "-import-path", args.proto_dir,
            "-proto", "grpc/testing/test.proto", "-d", '{"response_size": 7}']
    method = "grpc.testing.TestService/UnaryCall"
    if mode == "grpcurl-unix":
        runs = [(base + ["-plaintext", "-unix", address, method], True)]
    else:
        tls = ["-servername", HOST_OVERRIDE]
        runs = [(base + ["-cacert", os.path.join(certs, "ca.pem")] + tls + [address, method], True),
                (base + tls + [address, method], False)]  # system roots: must not verify
    for cmd, should_pass in runs:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if should_pass:
            check(r.returncode == 0 and '"AAAAAAAAAA=="' in r.stdout,
                  "grpcurl failed: %s %s" % (r.stdout, r.stderr))
        else:
            check(r.returncode != 0 and "certificate" in r.stderr,
                  "grpcurl without the CA should fail verification: %s %s" % (r.stdout, r.stderr))
        print("ok  %s %s" % (mode, "call" if should_pass else "refused without -cacert"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["grpcio-tls", "grpcio-mtls", "grpcio-unix",
                                                     "grpcurl-tls", "grpcurl-unix"])
    p.add_argument("--server", required=True)
    p.add_argument("--certs", required=True)
    p.add_argument("--proto-dir", required=True)
    p.add_argument("--peers", required=True)
    p.add_argument("--out-dir")
    args = p.parse_args()

    tmp = tempfile.mkdtemp()
    certs = args.certs
    if args.mode.endswith("unix"):
        path = os.path.join(tmp, "ferry.sock")
        extra = ["--unix_socket=" + path]
        target = "unix:" + path
        address = path
    else:
        port = free_port()
        extra = ["--port=%d" % port, "--use_tls"]
        if args.mode == "grpcio-mtls":
            extra.append("--tls_client_ca_file=" + os.path.join(certs, "ca.pem"))
        target = address = "127.0.0.1:%d" % port
    proc = start_server(args, extra)
    ok = False
    try:
        if args.mode.startswith("grpcio"):
            grpcio_modes(args, args.mode, target, certs)
        else:
            grpcurl_modes(args, args.mode, address, certs)
        ok = True
    finally:
        out = stop_server(proc)
        if not ok or proc.returncode != 0:
            print("server output:\n" + out)
    if proc.returncode != 0:
        print("server exited with %d" % proc.returncode)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
