#!/usr/bin/env python3
"""The greeter example exporting its metrics and spans to the OpenTelemetry Collector (--otlp).

    greeter_otlp_test.py --server PATH/greeter_server --client PATH/greeter_client
                         --collector PATH/otelcol_ferry

Starts otelcol_ferry (scripts/install_peers.sh: the OTLP receiver and the file exporter) on a
free port, then greeter_server --otlp pointing at it (OTEL_SERVICE_NAME=greeter, a push interval
longer than the test, so the push checked is the final one on SIGTERM), runs greeter_client --otlp
once (one SayHello, one SayHelloStreamReply of 4 replies), stops the server and reads what the
Collector wrote (OTLP JSON): in the last metrics batch, gRFC A66's names, units and attributes
with the calls counted; in the spans, gRFC A72's: per call Sent (the client's), Attempt (its
child) and Recv (the server's, the attempt's child), one trace id, kinds, OK statuses, the
attempt's attributes and the message events with their sequence numbers.
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


def all_spans(path, want, deadline):
    """Every span in the Collector's file (as (resource attributes, span)), once `want` are."""
    spans = []
    while time.time() < deadline:
        spans = []
        if os.path.exists(path):
            for line in open(path, encoding="utf-8"):
                try:
                    batch = json.loads(line)
                except ValueError:
                    continue
                for resource in batch.get("resourceSpans", []):
                    names = attributes(resource.get("resource", {}).get("attributes", []))
                    for scope in resource.get("scopeSpans", []):
                        for span in scope.get("spans", []):
                            spans.append((names, span))
        if len(spans) >= want:
            return spans
        time.sleep(0.1)
    return spans


def any_value(value):
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        return int(value["intValue"])
    return None


def span_attributes(kvs):
    return {kv["key"]: any_value(kv["value"]) for kv in kvs}


def check_trace(check, spans, method, replies):
    """The A72 spans of one call of helloworld.Greeter/<method>, with `replies` responses."""
    name = "helloworld.Greeter." + method
    by_name = {}
    for resource, span in spans:
        if span["name"].endswith("." + name):
            by_name.setdefault(span["name"], []).append((resource, span))
    for kind in ("Sent", "Attempt", "Recv"):
        check("one %s.%s span" % (kind, name), len(by_name.get(kind + "." + name, [])) == 1)
    if any(len(by_name.get(k + "." + name, [])) != 1 for k in ("Sent", "Attempt", "Recv")):
        return
    (client, sent), = by_name["Sent." + name]
    (_, attempt), = by_name["Attempt." + name]
    (server, recv), = by_name["Recv." + name]
    check("%s: one trace id" % method,
          len(sent["traceId"]) == 32 and sent["traceId"] == attempt["traceId"] == recv["traceId"])
    check("%s: Sent is a root" % method, not sent.get("parentSpanId"))
    check("%s: Attempt is Sent's child" % method, attempt.get("parentSpanId") == sent["spanId"])
    check("%s: Recv is Attempt's child" % method, recv.get("parentSpanId") == attempt["spanId"])
    check("%s: kinds client, internal, server" % method,
          (sent.get("kind"), attempt.get("kind"), recv.get("kind")) == (3, 1, 2))
    check("%s: status OK on each" % method,
          all(s.get("status", {}).get("code") in (1, "STATUS_CODE_OK")
              for s in (sent, attempt, recv)))
    check("%s: the client's spans come from greeter_client" % method,
          client.get("service.name") == "greeter_client")
    check("%s: the server's from greeter (OTEL_SERVICE_NAME)" % method,
          server.get("service.name") == "greeter")
    attrs = span_attributes(attempt.get("attributes", []))
    check("%s: Attempt has previous-rpc-attempts 0, transparent-retry false" % method,
          attrs.get("previous-rpc-attempts") == 0 and attrs.get("transparent-retry") is False)

    def events(span, name):
        return [span_attributes(e.get("attributes", [])) for e in span.get("events", [])
                if e.get("name") == name]

    def sequence(evs):
        return [e.get("sequence-number") for e in evs]

    check("%s: Attempt sent 1 message, received %d, numbered" % (method, replies),
          sequence(events(attempt, "Outbound message")) == [0]
          and sequence(events(attempt, "Inbound message")) == list(range(replies)))
    check("%s: Recv received 1 message, sent %d, numbered" % (method, replies),
          sequence(events(recv, "Inbound message")) == [0]
          and sequence(events(recv, "Outbound message")) == list(range(replies)))
    check("%s: each message event has its size" % method,
          all(e.get("message-size", 0) > 0 for e in events(recv, "Outbound message")))


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
                    "      exporters: [file]\n"
                    "    traces:\n      receivers: [otlp]\n"
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
                                     "--name=otlp", "--count=4",
                                     "--otlp=http://127.0.0.1:%d" % otlp_port],
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

            spans = all_spans(output, 6, time.time() + 15)
            check("6 spans written (2 calls x Sent, Attempt, Recv)", len(spans) == 6)
            check_trace(check, spans, "SayHello", 1)
            check_trace(check, spans, "SayHelloStreamReply", 4)
            check("two calls, two traces", len({s["traceId"] for _, s in spans}) == 2)
            if failures:
                print(json.dumps(batch, indent=1)[:4000])
                print(json.dumps([s for _, s in spans], indent=1)[:8000])
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
