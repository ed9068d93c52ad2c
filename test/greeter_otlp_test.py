#!/usr/bin/env python3
"""The greeter example pushing its metrics to the OpenTelemetry Collector (greeter_server --otlp).

    greeter_otlp_test.py --server PATH/greeter_server --client PATH/greeter_client
                         --collector PATH/otelcol_ferry

Starts otelcol_ferry (scripts/install_peers.sh: the OTLP receiver and the file exporter) on a
free port, then greeter_server --otlp pointing at it (OTEL_SERVICE_NAME=greeter, a push interval
longer than the test, so the push checked is the final one on SIGTERM), runs greeter_client once
(one SayHello, one SayHelloStreamReply of 4 replies), stops the server and reads the last batch
the Collector wrote (OTLP JSON): gRFC A66's names, units and attributes with the calls counted.
Exits 0 on success.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

METHOD = "helloworld.Greeter/SayHello"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, deadline):
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def attributes(kvs):
    return {kv["key"]: kv["value"].get("stringValue") for kv in kvs}


def last_batch(path, deadline):
    """The last batch in the Collector's file that has grpc.server.call.started."""
    while time.time() < deadline:
        found = None
        if os.path.exists(path):
            for line in open(path, encoding="utf-8"):
                try:
                    batch = json.loads(line)
                except ValueError:
                    continue
                if '"grpc.server.call.started"' in line:
                    found = batch
        if found is not None:
            return found
        time.sleep(0.1)
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--collector", required=True)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="greeter_otlp_") as tmp:
        otlp_port = free_port()
        output = os.path.join(tmp, "metrics.json")
        config = os.path.join(tmp, "config.yaml")
        with open(config, "w") as f:
            f.write("receivers:\n  otlp:\n    protocols:\n      grpc:\n"
                    "        endpoint: 127.0.0.1:%d\n"
                    "exporters:\n  file:\n    path: %s\n    flush_interval: 50ms\n"
                    "service:\n  telemetry:\n    metrics:\n      level: none\n"
                    "    logs:\n      level: warn\n"
                    "  pipelines:\n    metrics:\n      receivers: [otlp]\n"
                    "      exporters: [file]\n" % (otlp_port, output))
        collector = subprocess.Popen([args.collector, "--config", config])
        server = None
        try:
            if not wait_listening(otlp_port, time.time() + 20):
                print("FAIL: the Collector did not listen on %d" % otlp_port)
                return 1
            env = dict(os.environ, OTEL_SERVICE_NAME="greeter",
                       OTEL_METRIC_EXPORT_INTERVAL="600000")
            server = subprocess.Popen([args.server, "--port=0", "--threads=1",
                                       "--otlp=http://127.0.0.1:%d" % otlp_port],
                                      stdout=subprocess.PIPE, text=True, env=env)
            port = None
            deadline = time.time() + 20
            while port is None and time.time() < deadline:
                line = server.stdout.readline()
                if not line:
                    break
                m = re.search(r"listening on [\d.]+:(\d+)", line)
                if m:
                    port = int(m.group(1))
            if port is None:
                print("FAIL: the server did not report its port")
                return 1
            client = subprocess.run([args.client, "--target=127.0.0.1:%d" % port,
                                     "--name=otlp", "--count=4"],
                                    capture_output=True, text=True, timeout=30)
            if client.returncode != 0:
                print("FAIL: greeter_client: %s %s" % (client.stdout, client.stderr))
                return 1
            server.send_signal(signal.SIGTERM)  # the final push
            server.wait(timeout=20)
            if server.returncode != 0:
                print("FAIL: greeter_server exited %d" % server.returncode)
                return 1

            batch = last_batch(output, time.time() + 15)
            if batch is None:
                print("FAIL: the Collector wrote no grpc.server.call.started to %s" % output)
                return 1
            resource = batch["resourceMetrics"][0]
            metrics = {m["name"]: m for scope in resource["scopeMetrics"]
                       for m in scope.get("metrics", [])}
            failures = []

            def check(what, ok):
                print("%s %s" % ("PASS" if ok else "FAIL", what))
                if not ok:
                    failures.append(what)

            check("service.name is greeter",
                  attributes(resource["resource"]["attributes"]).get("service.name") == "greeter")
            started = metrics.get("grpc.server.call.started", {})
            check("grpc.server.call.started in {call}", started.get("unit") == "{call}")
            points = {attributes(p["attributes"]).get("grpc.method"): p
                      for p in started.get("sum", {}).get("dataPoints", [])}
            check("one SayHello started", points.get(METHOD, {}).get("asDouble") == 1)
            check("cumulative, monotonic",
                  started.get("sum", {}).get("aggregationTemporality") in
                  (2, "AGGREGATION_TEMPORALITY_CUMULATIVE")
                  and started.get("sum", {}).get("isMonotonic") is True)
            duration = metrics.get("grpc.server.call.duration", {})
            check("grpc.server.call.duration in s", duration.get("unit") == "s")
            ok_points = [p for p in duration.get("histogram", {}).get("dataPoints", [])
                         if attributes(p["attributes"]) == {"grpc.method": METHOD,
                                                            "grpc.status": "OK"}]
            check("SayHello's duration: one OK call, A66's 41 bounds",
                  len(ok_points) == 1 and str(ok_points[0].get("count")) == "1"
                  and len(ok_points[0].get("explicitBounds", [])) == 41)
            size = metrics.get("grpc.server.call.rcvd_total_compressed_message_size", {})
            check("received sizes in By", size.get("unit") == "By")
            if failures:
                print(json.dumps(batch, indent=1)[:4000])
                return 1
            return 0
        finally:
            if server is not None and server.poll() is None:
                server.kill()
            collector.send_signal(signal.SIGTERM)
            try:
                collector.wait(timeout=15)
            except subprocess.TimeoutExpired:
                collector.kill()


if __name__ == "__main__":
    sys.exit(main())
