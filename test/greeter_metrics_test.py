#!/usr/bin/env python3
"""The greeter example's /metrics endpoint (ferry::metrics), scraped with curl after known calls.

    greeter_metrics_test.py --server PATH/greeter_server --client PATH/greeter_client

Starts greeter_server on free ports (--port=0 --metrics_port=0), runs greeter_client once (one
SayHello, one SayHelloStreamReply of 4 replies), then `curl http://.../metrics` and checks the
started counters, the completed calls by status, the streamed message count and the bytes
histogram's count. Exits 0 on success.
"""

import argparse
import re
import signal
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    args = parser.parse_args()

    server = subprocess.Popen([args.server, "--port=0", "--metrics_port=0", "--threads=1"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = metrics_port = None
        deadline = time.time() + 20
        while (port is None or metrics_port is None) and time.time() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on [\d.]+:(\d+)", line)
            if m:
                port = int(m.group(1))
            m = re.search(r"metrics on http://([\d.]+:\d+)/metrics", line)
            if m:
                metrics_port = m.group(1)
        if port is None or metrics_port is None:
            print("FAIL: the server did not report its ports")
            return 1
        client = subprocess.run([args.client, "--target=127.0.0.1:%d" % port, "--name=metrics",
                                 "--count=4"], capture_output=True, text=True, timeout=30)
        if client.returncode != 0:
            print("FAIL: greeter_client: %s %s" % (client.stdout, client.stderr))
            return 1
        scrape = subprocess.run(["curl", "-sS", "--max-time", "10",
                                 "http://%s/metrics" % metrics_port],
                                capture_output=True, text=True, timeout=20)
        text = scrape.stdout
        expected = [
            'grpc_server_call_started_total{grpc_method="helloworld.Greeter/SayHello"} 1',
            'grpc_server_call_started_total{grpc_method="helloworld.Greeter/SayHelloStreamReply"} 1',
            'grpc_server_call_duration_seconds_count{grpc_method="helloworld.Greeter/SayHello",'
            'grpc_status="OK"} 1',
            'grpc_server_call_sent_messages_total{grpc_method="helloworld.Greeter/'
            'SayHelloStreamReply"} 4',
            'grpc_server_call_rcvd_total_compressed_message_size_bytes_count{'
            'grpc_method="helloworld.Greeter/SayHello",grpc_status="OK"} 1',
        ]
        lines = set(text.splitlines())
        missing = [e for e in expected if e not in lines]
        for e in expected:
            print("%s %s" % ("FAIL" if e in missing else "PASS", e))
        if missing:
            print(text)
            return 1
        return 0
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
