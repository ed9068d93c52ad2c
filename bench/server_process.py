"""What the memory benchmarks (idle_connections.py, stalled_streams.py) share: a server command
started on a free loopback port and waited for, and its resident memory from /proc."""

import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(cmd):
    """Runs cmd + ['--port=N'] on a free port N; returns (process, N) once the port accepts a
    connection, or after 5 s of trying."""
    port = free_port()
    server = subprocess.Popen(cmd + [f"--port={port}"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
    except BaseException:
        server.terminate()
        raise
    return server, port


def rss_kib(pid):
    """The process's resident memory (VmRSS), KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")
