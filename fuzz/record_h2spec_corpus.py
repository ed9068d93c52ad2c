#!/usr/bin/env python3
"""Records h2spec's traffic against a ferry server as seeds of the HTTP/2 frame parser's fuzzers.

    python3 fuzz/record_h2spec_corpus.py H2SPEC GREETER_SERVER

Starts GREETER_SERVER (examples/greeter's greeter_server) on a free port, puts a relay in front of
it that records each connection's bytes, runs every h2spec case through the relay, and writes
each connection's client bytes to fuzz/corpus/h2_frame_server_fuzzer/h2spec_NNN and its server
bytes to fuzz/corpus/h2_frame_client_fuzzer/h2spec_NNN, each behind the targets' two input bytes
(0, 0: ferry's default limits, the bytes as they came; fuzz/README.md). Connections that carried
nothing are skipped; identical recordings are written once. Standard library only.
"""

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pump(src, dst, sink):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            sink.append(data)
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst,):
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main():
    h2spec, server = sys.argv[1], sys.argv[2]
    backend, front = free_port(), free_port()
    proc = subprocess.Popen([server, "--port=%d" % backend], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    recordings = []
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", backend), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", front))
        listener.listen(64)

        def accept_loop():
            while True:
                try:
                    client, _ = listener.accept()
                except OSError:
                    return
                upstream = socket.create_connection(("127.0.0.1", backend))
                sent, received = [], []
                recordings.append((sent, received))
                for a, b, sink in ((client, upstream, sent), (upstream, client, received)):
                    threading.Thread(target=pump, args=(a, b, sink), daemon=True).start()

        threading.Thread(target=accept_loop, daemon=True).start()
        subprocess.run([h2spec, "--host", "127.0.0.1", "--port", str(front), "--timeout", "1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        listener.close()
    finally:
        proc.terminate()
        proc.wait()
    seen = set()
    n = 0
    for sent, received in recordings:
        for target, data in (("h2_frame_server_fuzzer", b"".join(sent)),
                             ("h2_frame_client_fuzzer", b"".join(received))):
            if not data:
                continue
            digest = hashlib.sha1(target.encode() + data).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            d = os.path.join(HERE, "corpus", target)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "h2spec_%03d" % n), "wb") as f:
                f.write(bytes([0, 0]) + data)
        n += 1
    print("recorded %d connections" % n)


if __name__ == "__main__":
    main()
