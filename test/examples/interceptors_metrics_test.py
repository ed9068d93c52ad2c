#!/usr/bin/env python3
"""The interceptors_metrics example (examples/interceptors_metrics): both sides' logging
interceptors, and with --metrics the server's Prometheus /metrics.

    interceptors_metrics_test.py [--metrics] --server PATH/interceptors_server \\
        --client PATH/interceptors_client

Runs the client once (3 SayHello, 1 SayHelloStreamReply of 4 replies, 1 SayHello that fails with
INVALID_ARGUMENT) and checks that each call is logged by the client's interceptor with its
status, message counts and request id, and that the server's interceptor saw that id (in the
metadata), logged the same outcome and returned the id (in the trailers). With --metrics it then
fetches /metrics and checks the calls started and completed per method and status, and the
messages the stream sent.
"""

import argparse
import re
import urllib.request

from example_programs import Checks, run, start_server

SAY_HELLO = "/helloworld.Greeter/SayHello"
STREAM = "/helloworld.Greeter/SayHelloStreamReply"
# (request id, method, status, messages the client sent, messages it received)
CALLS = [("client-1", SAY_HELLO, "OK", 1, 1), ("client-2", SAY_HELLO, "OK", 1, 1),
         ("client-3", SAY_HELLO, "OK", 1, 1), ("client-4", STREAM, "OK", 1, 4),
         ("client-5", SAY_HELLO, "INVALID_ARGUMENT: name is empty", 1, 0)]


def logged(program, pattern, timeout=0):
    """Whether some line of program's output matches pattern as a whole, within timeout seconds:
    a line the server printed before the client's call ended may still be on its way through the
    pipe to the thread that collects it."""
    return program.wait_for(r"^(?:%s)$" % pattern, timeout) is not None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    args = parser.parse_args()
    checks = Checks()

    server, port = start_server("interceptors_server",
                                [args.server, "--port=0", "--metrics_port=0"])
    if not checks.check(port is not None, "the server reported its port"):
        checks.exit()
    metrics_url = None
    if args.metrics:
        m = server.wait_for(r"metrics on (http://\S+/metrics)$", 0)
        if not checks.check(m is not None, "the server reported its /metrics address"):
            checks.exit()
        metrics_url = m.group(1)

    client = run("interceptors_client", [args.client, "--target=127.0.0.1:%d" % port,
                                         "--count=3", "--replies=4"])
    checks.check(client.proc.returncode == 0, "the client exited 0")
    checks.has_line(client, "interceptors_client: OK")
    checks.has_line(client, "SayHelloStreamReply: Hello stream #4")
    ms = r"[\d.]+ ms"
    for rid, method, status, sent, received in CALLS:
        m, s = re.escape(method), re.escape(status)
        checks.check(logged(client, r"\[client\] %s: %s in %s, %d sent, %d received \(request %s, "
                            r"server echoed %s\)" % (m, s, ms, sent, received, rid, rid)),
                     "the client's interceptor logged %s %s: %s, %d sent, %d received, the id "
                     "echoed" % (rid, method, status, sent, received))
        checks.check(logged(server, r"\[server\] %s from ipv4:127\.0\.0\.1:\d+: started "
                            r"\(request %s\)" % (m, rid), 10),
                     "the server's interceptor logged %s's start with its id" % rid)
        checks.check(logged(server, r"\[server\] %s: %s in %s, %d received, %d sent \(request "
                            r"%s\)" % (m, s, ms, sent, received, rid), 10),
                     "the server's interceptor logged %s's end: %s" % (rid, status))

    if metrics_url:
        try:
            text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        except OSError as e:
            text = ""
            checks.check(False, "GET %s: %s" % (metrics_url, e))
        lines = set(text.splitlines())
        for line in [
                'grpc_server_call_started_total{grpc_method="helloworld.Greeter/SayHello"} 4',
                'grpc_server_call_started_total{grpc_method="helloworld.Greeter/'
                'SayHelloStreamReply"} 1',
                'grpc_server_call_duration_seconds_count{grpc_method="helloworld.Greeter/SayHello",'
                'grpc_status="OK"} 3',
                'grpc_server_call_duration_seconds_count{grpc_method="helloworld.Greeter/SayHello",'
                'grpc_status="INVALID_ARGUMENT"} 1',
                'grpc_server_call_sent_messages_total{grpc_method="helloworld.Greeter/'
                'SayHelloStreamReply"} 4']:
            checks.check(line in lines, "/metrics has %s" % line)

    checks.check(server.stop() == 0, "the server exited 0 on SIGTERM")
    checks.exit()


if __name__ == "__main__":
    main()
