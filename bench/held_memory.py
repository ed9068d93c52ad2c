#!/usr/bin/env python3
"""The memory a peer can make a gRPC process hold (issue #42), in resident memory: each vector of
the issue played by hand against the greeter example (its server, or its client facing a server
played here), and the process's VmRSS growth per byte of message body sent (base64 characters
for gRPC-Web text) while the call is held, then again after the connection closed.

Server vectors (against SERVER_BINARY, e.g. build/examples/greeter/greeter_server):
  text_h2        gRPC-Web text, a message declared at 4,000,000 bytes, as DATA frames of 4
                 base64 characters (one decoded group each)
  text_h1        the same over HTTP/1.1, one chunk of 4 characters each
  grpc_trickle   plain gRPC, the same message one byte per DATA frame, each frame its own read
  connect_h2     Connect unary (application/proto), one byte per DATA frame, each its own read
  connect_h1     Connect unary over HTTP/1.1, one byte per chunk, each its own read
  health_names   grpc.health.v1.Health/Watch streams on one connection with large service names
  health_many    many Watch streams with 1 KiB names on one connection
Client vector (CLIENT_BINARY, e.g. build/examples/greeter/greeter_client, whose first call is a
unary SayHello with a 5 s deadline):
  client_trickle a response message declared at 4 MiB sent one byte per DATA frame

Usage:
  bench/held_memory.py [--vectors a,b] [--scale 1.0] --server SERVER_BINARY --client CLIENT_BINARY
"""
import argparse
import base64
import socket
import struct
import subprocess
import sys
import threading
import time

from server_process import rss_kib, start_server

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, ACK, END_HEADERS = 1, 1, 4
SAY_HELLO = b"/helloworld.Greeter/SayHello"
WATCH = b"/grpc.health.v1.Health/Watch"
DECLARED = 4_000_000


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack_int(n, prefix_bits):
    limit = (1 << prefix_bits) - 1
    if n < limit:
        return bytes([n])
    out, n = bytes([limit]), n - limit
    while n >= 128:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def literal(name, value):
    # HPACK literal without indexing, new name (RFC 7541 6.2.2), no Huffman.
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def grpc_prefix(length):
    return b"\x00" + struct.pack(">I", length)


def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def settle(pid, seconds=0.6):
    """VmRSS once it stops moving (the same twice 100 ms apart), or after `seconds`."""
    last, until = rss_kib(pid), time.time() + seconds
    while time.time() < until:
        time.sleep(0.1)
        now = rss_kib(pid)
        if now == last:
            break
        last = now
    return last


class H2Client:
    """A client connection by hand that follows the server's flow control (a reader thread
    answers SETTINGS and PING and counts WINDOW_UPDATE credit)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Condition()
        self.conn_window, self.initial, self.stream_windows = 65535, 65535, {}
        self.settled, self.closed, self.events = False, False, []
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 1 << 30)))
        self.sock.sendall(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 30) - 65535)))
        threading.Thread(target=self._read, daemon=True).start()
        with self.lock:
            self.lock.wait_for(lambda: self.settled or self.closed, 5)

    def _read(self):
        buf = b""
        try:
            while True:
                more = self.sock.recv(65536)
                if not more:
                    break
                buf += more
                while len(buf) >= 9:
                    n = int.from_bytes(buf[:3], "big")
                    if len(buf) < 9 + n:
                        break
                    t, fl, sid, p = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9 : 9 + n]
                    buf = buf[9 + n :]
                    self._frame(t, fl, sid, p)
        except OSError:
            pass
        with self.lock:
            self.closed = True
            self.lock.notify_all()

    def _frame(self, t, fl, sid, p):
        with self.lock:
            if t == SETTINGS and not fl & ACK:
                for i in range(0, len(p), 6):
                    key, value = struct.unpack(">HI", p[i : i + 6])
                    if key == 4:
                        for s in self.stream_windows:
                            self.stream_windows[s] += value - self.initial
                        self.initial = value
                self.sock.sendall(frame(SETTINGS, ACK, 0))
                self.settled = True
            elif t == PING and not fl & ACK:
                self.sock.sendall(frame(PING, ACK, 0, p))
            elif t == WINDOW_UPDATE:
                inc = int.from_bytes(p, "big") & 0x7FFFFFFF
                if sid == 0:
                    self.conn_window += inc
                elif sid in self.stream_windows:
                    self.stream_windows[sid] += inc
            elif t in (RST, GOAWAY) or (t == HEADERS and fl & END_STREAM):
                self.events.append((t, sid, p))
                self.stream_windows.pop(sid, None)
            self.lock.notify_all()

    def open(self, sid, path, content_type, grpc=True):
        block = (literal(b":method", b"POST") + literal(b":scheme", b"http") + literal(b":path", path)
                 + literal(b":authority", b"127.0.0.1") + literal(b"content-type", content_type))
        if grpc:
            block += literal(b"te", b"trailers")
        with self.lock:
            self.stream_windows[sid] = self.initial
        self.sock.sendall(frame(HEADERS, END_HEADERS, sid, block))

    def data(self, sid, payload, piece, pause=0.0, end=False):
        """payload in DATA frames of `piece` bytes; each its own send after `pause` when nonzero,
        else as many together as the windows allow."""
        at = 0
        while at < len(payload):
            batch = []
            with self.lock:
                while at < len(payload):
                    chunk = payload[at : at + piece]
                    if len(chunk) > min(self.conn_window, self.stream_windows.get(sid, 0)):
                        break
                    self.conn_window -= len(chunk)
                    self.stream_windows[sid] -= len(chunk)
                    last = end and at + piece >= len(payload)
                    batch.append(frame(DATA, END_STREAM if last else 0, sid, chunk))
                    at += len(chunk)
                    if pause or len(batch) >= 4096:
                        break
                if not batch:
                    if self.closed or sid not in self.stream_windows:
                        return False
                    self.lock.wait(1)
                    continue
            try:
                self.sock.sendall(b"".join(batch))
            except OSError:
                return False
            if pause:
                time.sleep(pause)
        return True

    def refused(self):
        with self.lock:
                return sum(1 for e in self.events if e[0] in (RST, HEADERS)), any(e[0] == GOAWAY for e in self.events)

    def close(self):
        self.sock.close()


def text_body(n_groups):
    raw = grpc_prefix(DECLARED) + b"x" * (3 * n_groups - 5)
    return base64.b64encode(raw)


def h1_request(port, content_type):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(b"POST " + SAY_HELLO + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + content_type
                 + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    return sock


def h1_chunks(sock, body, piece, pause):
    chunks = [b"%x\r\n" % len(body[i : i + piece]) + body[i : i + piece] + b"\r\n" for i in range(0, len(body), piece)]
    if pause:
        for c in chunks:
            sock.sendall(c)
            time.sleep(pause)
    else:
        sock.sendall(b"".join(chunks))


def server_vector(name, port, pid, scale):
    """Plays one vector; returns (bytes sent, RSS before KiB, RSS held KiB, connection) with the
    connection still open."""
    time.sleep(0.2)
    if name in ("text_h2", "grpc_trickle", "connect_h2"):
        c = H2Client(port)
        if name == "text_h2":
            c.open(1, SAY_HELLO, b"application/grpc-web-text")
            body, piece, pause, head = text_body(int(60000 * scale)), 4, 0.0, 8
        elif name == "grpc_trickle":
            c.open(1, SAY_HELLO, b"application/grpc")
            body, piece, pause, head = grpc_prefix(DECLARED) + b"x" * int(20000 * scale), 1, 0.0002, 5
        else:
            c.open(1, SAY_HELLO, b"application/proto", grpc=False)
            body, piece, pause, head = b"\x0a" + varint(DECLARED) + b"x" * int(20000 * scale), 1, 0.0002, 5
        c.data(1, body[:head], head)
        before = settle(pid)
        c.data(1, body[head:], piece, pause)
        return len(body) - head, before, settle(pid, 2), c
    if name in ("text_h1", "connect_h1"):
        if name == "text_h1":
            body, piece, pause, ctype = text_body(int(60000 * scale)), 4, 0.0, b"application/grpc-web-text"
        else:
            body, piece, pause, ctype = b"\x0a" + varint(DECLARED) + b"x" * int(20000 * scale), 1, 0.0002, b"application/proto"
        sock = h1_request(port, ctype)
        head = 8 if name == "text_h1" else 6
        h1_chunks(sock, body[:head], head, 0)
        before = settle(pid)
        h1_chunks(sock, body[head:], piece, pause)
        return len(body) - head, before, settle(pid, 2), sock
    if name in ("health_names", "health_many"):
        c = H2Client(port)
        streams, size = (40, int(2_000_000 * scale)) if name == "health_names" else (int(1000 * scale), 1024)
        before = settle(pid)
        sent = 0
        for i in range(streams):
            sid = 1 + 2 * i
            msg = b"\x0a" + varint(size) + b"s" * size
            c.open(sid, WATCH, b"application/grpc")
            c.data(sid, grpc_prefix(len(msg)) + msg, 16384, end=True)
            sent += len(msg) + 5
        held = settle(pid, 3)
        refused, goaway = c.refused()
        print(f"    ({streams} streams of {size}-byte names: {refused} ended by the server, goaway={goaway})")
        return sent, before, held, c
    raise SystemExit(f"unknown vector {name}")


def client_vector(client_binary, scale):
    """A server played here answers the greeter client's SayHello with a message declared at 4 MiB
    and sends it one byte per DATA frame; the client's VmRSS growth per byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    client = subprocess.Popen([client_binary, f"--target=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        listener.settimeout(5)
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(frame(SETTINGS, 0, 0))
        buf, stream = b"", 0
        while not stream:
            buf += sock.recv(65536)
            if buf.startswith(PREFACE):
                buf = buf[len(PREFACE) :]
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n = int.from_bytes(buf[:3], "big")
                if buf[3] == HEADERS:
                    stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                buf = buf[9 + n :]
        block = literal(b":status", b"200") + literal(b"content-type", b"application/grpc")
        sock.sendall(frame(SETTINGS, ACK, 0) + frame(HEADERS, END_HEADERS, stream, block)
                     + frame(DATA, 0, stream, grpc_prefix(4 << 20) + b"y" * 64))
        before = settle(client.pid)
        n = int(8000 * scale)
        for _ in range(n):
            sock.sendall(frame(DATA, 0, stream, b"z"))
            time.sleep(0.0002)
        held = settle(client.pid, 0.5)
        sock.close()
        client.wait(10)
        return n, before, held
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        listener.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--client")
    ap.add_argument("--vectors", default="text_h2,text_h1,grpc_trickle,connect_h2,connect_h1,health_names,health_many,client_trickle")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies each vector's size")
    args = ap.parse_args()
    print(f"{'vector':<15} {'bytes':>10} {'RSS before':>11} {'held':>9} {'after close':>12} {'growth/byte':>12}")
    for name in args.vectors.split(","):
        if name == "client_trickle":
            if not args.client:
                continue
            n, before, held = client_vector(args.client, args.scale)
            print(f"{name:<15} {n:>10} {before:>8} KiB {held:>5} KiB {'-':>12} {(held - before) * 1024 / n:>12.2f}")
            continue
        server, port = start_server([args.server, "--threads=1"])
        try:
            n, before, held, conn = server_vector(name, port, server.pid, args.scale)
            conn.close()
            after = settle(server.pid, 3)
            print(f"{name:<15} {n:>10} {before:>8} KiB {held:>5} KiB {after:>8} KiB {(held - before) * 1024 / n:>12.2f}")
        finally:
            server.terminate()
            server.wait()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
