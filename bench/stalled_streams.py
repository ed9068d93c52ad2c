#!/usr/bin/env python3
"""Server memory around a burst of stalled streams: one client connection opens N
server-streaming calls (grpc.testing.TestService/StreamingOutputCall, each asking for M responses
of S bytes) and then reads nothing: it advertises a 64 KiB window and never sends WINDOW_UPDATE,
so everything the server produces beyond that waits in the server. Reports the server's resident
memory before, at its peak while the calls are stalled, and some seconds after the client closed
the connection (when a server gives memory back, it shows there).

Works against any gRPC interop server that takes --port (ferry's, grpc-go's). Usage:

  bench/stalled_streams.py [--streams 200] [--responses 8] [--size 1048576] [--after 15] \
      -- SERVER_BINARY [ARGS...]
"""
import argparse
import socket
import struct
import sys
import time

from server_process import rss_kib, start_server

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):
    # HPACK literal without indexing, new name (RFC 7541 6.2.2); lengths below 127.
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def request(responses, size):
    param = b"\x08" + varint(size)                     # ResponseParameters.size
    msg = (b"\x12" + varint(len(param)) + param) * responses  # response_parameters
    return b"\x00" + struct.pack(">I", len(msg)) + msg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--responses", type=int, default=8)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--after", type=float, default=15, help="seconds to watch after closing")
    ap.add_argument("server", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = [a for a in args.server if a != "--"]
    server, port = start_server(cmd)
    try:
        time.sleep(0.5)
        before = rss_kib(server.pid)
        c = socket.create_connection(("127.0.0.1", port))
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        headers = b"".join(literal(n, v) for n, v in [
            (b":method", b"POST"), (b":scheme", b"http"),
            (b":path", b"/grpc.testing.TestService/StreamingOutputCall"),
            (b":authority", b"stalled"), (b"content-type", b"application/grpc"), (b"te", b"trailers")])
        body = request(args.responses, args.size)
        out = PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 65535)) + frame(4, 1, 0)
        for i in range(args.streams):
            sid = 2 * i + 1
            out += frame(1, 4, sid, headers) + frame(0, 1, sid, body)
        c.sendall(out)
        peak = before
        quiet_since = time.time()
        while time.time() - quiet_since < 3:  # until the peak holds for 3 s
            time.sleep(0.2)
            now = rss_kib(server.pid)
            if now > peak + 1024:
                peak = now
                quiet_since = time.time()
        c.close()
        samples = []
        start = time.time()
        while time.time() - start < args.after:
            time.sleep(1)
            samples.append(rss_kib(server.pid))
        alive = server.poll() is None
        queued = args.streams * args.responses * args.size
        print(f"server: {cmd[0]}")
        print(f"{args.streams} stalled streams x {args.responses} responses x {args.size} B "
              f"({queued / 2**20:.0f} MiB asked for), client window 64 KiB, never read")
        print(f"RSS before: {before / 1024:.1f} MiB, peak: {peak / 1024:.1f} MiB, "
              f"{args.after:.0f} s after close: {samples[-1] / 1024:.1f} MiB "
              f"(lowest {min(samples) / 1024:.1f}); server alive: {alive}")
        return 0 if alive else 1
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
