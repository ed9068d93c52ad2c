#!/usr/bin/env python3
"""Server memory per idle HTTP/2 connection: what a server pays for clients that connect,
finish the HTTP/2 handshake and then open no stream (the usual state of most connections a
gRPC server holds).

Starts the server, measures its resident memory (RSS from /proc), opens N connections that each
send the client preface and SETTINGS and acknowledge the server's SETTINGS, measures again, and
reports the difference per connection. Any server that takes --port works (ferry's interop or
echo server, grpc-go's interop server...). Usage:

  bench/idle_connections.py [--connections 1000] [--wait S] -- SERVER_BINARY [ARGS...]

The server is started with --port=<free port> appended; its stdout is ignored.
"""
import argparse
import os
import socket
import sys
import time

from server_process import rss_kib, start_server

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"       # empty SETTINGS
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"


def settle(pid, seconds=1.0):
    """RSS once it stops moving (the server finishes its handshakes asynchronously)."""
    last = rss_kib(pid)
    deadline = time.time() + 10
    while time.time() < deadline:
        time.sleep(seconds)
        now = rss_kib(pid)
        if abs(now - last) < 64:
            return now
        last = now
    return last


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(PREFACE + SETTINGS + SETTINGS_ACK)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--wait", type=float, default=0,
                    help="seconds to hold the connections before measuring (servers that "
                         "release memory of idle connections after a delay)")
    ap.add_argument("server", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = [a for a in args.server if a != "--"]
    if not cmd:
        ap.error("give the server command after --")
    server, port = start_server(cmd)
    try:
        # One connection first so that lazily made per-thread state is not counted per connection.
        warm = connect(port)
        before = settle(server.pid)
        conns = [connect(port) for _ in range(args.connections)]
        # Read what the server sent (its SETTINGS, ACK) so every handshake is complete.
        for s in conns:
            s.settimeout(5)
            s.recv(4096)
        time.sleep(args.wait)
        after = settle(server.pid)
        alive = server.poll() is None
        per = (after - before) * 1024 / args.connections
        print(f"server: {os.path.basename(cmd[0])}")
        print(f"idle connections: {args.connections}, all held: {alive}")
        print(f"RSS before: {before} KiB, after: {after} KiB")
        print(f"bytes per idle connection: {per:.0f}")
        for s in conns + [warm]:
            s.close()
        return 0 if alive else 1
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
