#!/usr/bin/env python3
"""Real gRPC tools against a ferry server that serves health checking and reflection.

    health_reflection_test.py --peers PREFIX --proto-dir DIR --out-dir DIR \\
        --service NAME --call METHOD JSON EXPECTED --server SERVER_CMD...

Starts SERVER_CMD (it takes `{port}`) with run_pair.py's helpers, then checks, each bounded by a
timeout:
  grpcurl (reflection only, no .proto):  `list` names NAME and both reflection services,
      `describe NAME` shows its rpcs, and METHOD called with request JSON answers with a JSON
      that contains EXPECTED
  grpc-health-probe:                     SERVING for "" and NAME, failure for an unknown service
  grpcio (stubs generated from DIR's grpc/health/v1/health.proto into --out-dir):
      Check for "", NAME (SERVING) and an unknown service (NOT_FOUND); Watch of NAME sees SERVING,
      then, once the server got SIGTERM, NOT_SERVING, then the end of the stream
and that the server exits 0. Run it with the peers' venv python (grpcio, grpcio-tools). Prints
`PASS what` / `FAIL what: why` per check and exits 0 only if every check passed.
"""

import argparse
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_pair  # noqa: E402  (start_server, stop, show_log)

TOOL_TIMEOUT = 30  # seconds for one tool run
RPC_TIMEOUT = 10   # seconds for one grpcio call or message


class CheckFailed(Exception):
    pass


def check(cond, why):
    if not cond:
        raise CheckFailed(why)


def run_tool(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise CheckFailed("%s did not finish within %ds" % (" ".join(cmd), TOOL_TIMEOUT))
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def grpcurl_checks(args, address):
    grpcurl = [os.path.join(args.peers, "bin", "grpcurl"), "-plaintext", "-max-time", "10"]

    def list_services():
        rc, out, err = run_tool(grpcurl + [address, "list"])
        check(rc == 0, "grpcurl list exited %d: %s" % (rc, err.strip()))
        names = out.split()
        for want in (args.service, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                     "grpc.reflection.v1alpha.ServerReflection"):
            check(want in names, "grpcurl list: %s missing from %s" % (want, names))

    def describe():
        rc, out, err = run_tool(grpcurl + [address, "describe", args.service])
        check(rc == 0, "grpcurl describe exited %d: %s" % (rc, err.strip()))
        check("is a service" in out and "rpc " in out, "grpcurl describe: %r" % out[:500])

    def call_without_proto():
        method, request, expected = args.call
        rc, out, err = run_tool(grpcurl + ["-d", request, address, method])
        check(rc == 0, "grpcurl %s exited %d: %s" % (method, rc, err.strip()))
        check(expected in json.dumps(json.loads(out)), "grpcurl %s answered %r" % (method, out))

    return [("grpcurl list (reflection)", list_services),
            ("grpcurl describe %s (reflection)" % args.service, describe),
            ("grpcurl %s without -proto" % args.call[0], call_without_proto)]


def probe_checks(args, address):
    probe = os.path.join(args.peers, "bin", "grpc-health-probe")

    def serving(service):
        def run():
            cmd = [probe, "-addr=" + address, "-connect-timeout=5s", "-rpc-timeout=5s"]
            if service:
                cmd.append("-service=" + service)
            rc, out, err = run_tool(cmd)
            check(rc == 0 and "SERVING" in out + err,
                  "grpc-health-probe %r exited %d: %s" % (service, rc, (out + err).strip()))
        return run

    def unknown():
        rc, out, err = run_tool([probe, "-addr=" + address, "-rpc-timeout=5s",
                                 "-service=no.such.Service"])
        check(rc != 0, "grpc-health-probe of an unknown service exited 0: %s" % (out + err))
        check("NotFound" in out + err or "NOT_FOUND" in out + err,
              "grpc-health-probe of an unknown service: %s" % (out + err).strip())

    if not os.path.exists(probe):
        print("SKIP grpc-health-probe: %s not installed" % probe)
        return []
    return [('grpc-health-probe ""', serving("")),
            ("grpc-health-probe %s" % args.service, serving(args.service)),
            ("grpc-health-probe unknown service", unknown)]


def load_health_stubs(proto_dir, out_dir):
    """Compiles grpc/health/v1/health.proto into out_dir; imports it as grpc.health.v1.*."""
    from grpc_tools import protoc
    os.makedirs(out_dir, exist_ok=True)
    rc = protoc.main(["grpc_tools.protoc", "-I" + proto_dir, "--python_out=" + out_dir,
                      "--grpc_python_out=" + out_dir,
                      os.path.join(proto_dir, "grpc/health/v1/health.proto")])
    if rc != 0:
        raise RuntimeError("grpc_tools.protoc failed with exit code %d" % rc)
    # The stubs' package grpc.health.v1 lives inside grpcio's own `grpc` package.
    gen_grpc = os.path.join(out_dir, "grpc")
    if gen_grpc not in grpc.__path__:
        grpc.__path__.append(gen_grpc)
    return (importlib.import_module("grpc.health.v1.health_pb2"),
            importlib.import_module("grpc.health.v1.health_pb2_grpc"))


def grpcio_checks(args, address, server):
    pb2, pb2_grpc = load_health_stubs(args.proto_dir, args.out_dir)
    channel = grpc.insecure_channel(address)
    stub = pb2_grpc.HealthStub(channel)
    serving = pb2.HealthCheckResponse.SERVING
    not_serving = pb2.HealthCheckResponse.NOT_SERVING

    def check_calls():
        for service in ("", args.service):
            r = stub.Check(pb2.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT)
            check(r.status == serving, "Check(%r): %s" % (service, r))
        try:
            stub.Check(pb2.HealthCheckRequest(service="no.such.Service"), timeout=RPC_TIMEOUT)
            raise CheckFailed("Check of an unknown service succeeded")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.NOT_FOUND, "Check(unknown): %s" % e.code())

    def watch_through_shutdown():
        call = stub.Watch(pb2.HealthCheckRequest(service=args.service), timeout=60)
        seen = queue.Queue()

        def read():
            try:
                for response in call:
                    seen.put(response.status)
                seen.put("end: OK")
            except grpc.RpcError as e:
                seen.put("end: %s" % e.code().name)

        threading.Thread(target=read, daemon=True).start()
        first = seen.get(timeout=RPC_TIMEOUT)
        check(first == serving, "Watch: first status %s, want SERVING" % first)
        server.send_signal(signal.SIGTERM)  # the server shuts down
        second = seen.get(timeout=RPC_TIMEOUT)
        check(second == not_serving, "Watch during shutdown: %s, want NOT_SERVING" % second)
        end = seen.get(timeout=RPC_TIMEOUT)
        check(isinstance(end, str), "Watch: another status %s after NOT_SERVING" % end)
        print("     (the watch then ended with %s)" % end[5:])
        server.wait(run_pair.STOP_WAIT)
        check(server.returncode == 0, "server %s after SIGTERM"
              % run_pair.describe_exit(server.returncode))

    return [("grpcio Check", check_calls),
            ("grpcio Watch: SERVING, then NOT_SERVING as the server shuts down",
             watch_through_shutdown)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--peers", required=True)
    p.add_argument("--proto-dir", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--service", required=True)
    p.add_argument("--call", nargs=3, required=True, metavar=("METHOD", "JSON", "EXPECTED"))
    p.add_argument("--server", nargs=argparse.REMAINDER, required=True)
    args = p.parse_args()

    log = tempfile.TemporaryFile()
    server, port = run_pair.start_server(args.server, 120, log)
    if server is None:
        print("FAIL server did not start")
        return 1
    address = "127.0.0.1:%d" % port
    failed = 0
    try:
        checks = grpcurl_checks(args, address) + probe_checks(args, address)
        checks += grpcio_checks(args, address, server)  # last: it stops the server
        for what, run in checks:
            try:
                run()
                print("PASS %s" % what)
            except (CheckFailed, queue.Empty, grpc.RpcError) as e:
                failed += 1
                print("FAIL %s: %s" % (what, e or "timed out"))
    finally:
        run_pair.stop(server)
        if failed:
            log.seek(0)
            print(log.read().decode("utf-8", "replace")[-4000:])
    print("health_reflection_test: %d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
