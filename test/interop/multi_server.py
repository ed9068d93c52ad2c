#!/usr/bin/env python3
"""Runs one client against several copies of a gRPC server on 127.0.0.1, directly or through nghttpx.

    multi_server.py [--servers N] [--nghttpx] [--min-bytes-each B] [--check-server-exit] \\
        [--client-timeout S] [--server-timeout S] --server SERVER_CMD... --client CLIENT_CMD...

Starts N (default 2) servers, each on a free port substituted for `{port}` in SERVER_CMD (with
run_pair.py's start, stop and logging). In CLIENT_CMD, `{ipv4}` becomes a gRPC ipv4: target listing
every server ("ipv4:127.0.0.1:A,127.0.0.1:B"), and `{port}` the first server's port, or with
--nghttpx the port of one nghttpx (Debian's nghttp2-proxy, /usr/sbin/nghttpx) in front of all of
them, h2c on both sides. With --min-bytes-each, the client reaches each server through a byte
counting TCP relay of this script's, and each server must have received at least B bytes from
clients: the check that a load-balancing client used every server. Exits with the client's
status, or 1 if a server died, a check failed or (with --check-server-exit) a server did not
exit 0 on SIGTERM (a sanitizer's report at exit shows that way). Skips (exit 0, "SKIP") without nghttpx when
--nghttpx is given. Uses only the standard library.
"""

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_pair  # noqa: E402

NGHTTPX = "/usr/sbin/nghttpx"


def parse(argv):
    opts = {"servers": 2, "nghttpx": False, "min_bytes": None, "client_timeout": 60.0,
            "server_timeout": 120.0, "check_server_exit": False}
    try:
        s = argv.index("--server")
        c = argv.index("--client", s + 1)
    except ValueError:
        run_pair.usage("need --server CMD... --client CMD...")
    head, i = argv[:s], 0
    while i < len(head):
        a = head[i]
        if a in ("--nghttpx", "--check-server-exit"):
            opts[a[2:].replace("-", "_")] = True
            i += 1
        elif a in ("--servers", "--min-bytes-each", "--client-timeout", "--server-timeout") \
                and i + 1 < len(head):
            key = {"--servers": "servers", "--min-bytes-each": "min_bytes",
                   "--client-timeout": "client_timeout", "--server-timeout": "server_timeout"}[a]
            opts[key] = float(head[i + 1]) if "timeout" in key else int(head[i + 1])
            i += 2
        else:
            run_pair.usage("unknown option %r" % a)
    return opts, argv[s + 1:c], argv[c + 1:]


class Relay:
    """Accepts on a free port, relays each connection to 127.0.0.1:target, counts client bytes."""

    def __init__(self, target):
        self.target = target
        self.bytes_in = 0
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self.pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client, False), daemon=True).start()

    def pump(self, src, dst, count):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if count:
                    with self.lock:
                        self.bytes_in += len(data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def start_nghttpx(backends, log):
    port = run_pair.free_port()
    cmd = [NGHTTPX, "--conf=/dev/null", "--workers=1", "-f127.0.0.1,%d;no-tls" % port,
           "--errorlog-file=/dev/stderr", "--accesslog-file=/dev/null", "--log-level=ERROR"]
    for b in backends:
        cmd.append("-b127.0.0.1,%d;;proto=h2" % b)
    proc = subprocess.Popen(run_pair.bounded(cmd, 600), stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + run_pair.PORT_WAIT
    while time.monotonic() < deadline and proc.poll() is None:
        if run_pair.accepts(port):
            return proc, port
        time.sleep(0.05)
    run_pair.stop(proc)
    return None, None


def main():
    opts, server_cmd, client_cmd = parse(sys.argv[1:])
    if opts["nghttpx"] and not os.access(NGHTTPX, os.X_OK):
        print("SKIP: %s not installed (apt-get install nghttp2-proxy)" % NGHTTPX)
        return 0
    with tempfile.TemporaryFile() as log:
        log_path = "/proc/self/fd/%d" % log.fileno()
        servers, ports, failed = [], [], False
        for n in range(opts["servers"]):
            proc, port = run_pair.start_server(server_cmd, opts["server_timeout"], log)
            if proc is None:
                failed = True
                break
            servers.append(proc)
            ports.append(port)
            print("multi_server: server %d up on 127.0.0.1:%d" % (n, port), flush=True)
        proxy = None
        relays = []
        if not failed:
            reach = ports
            if opts["min_bytes"] is not None:
                relays = [Relay(p) for p in ports]
                reach = [r.port for r in relays]
            front = reach[0]
            if opts["nghttpx"]:
                proxy, front = start_nghttpx(reach, log)
                if proxy is None:
                    print("multi_server: FAIL: nghttpx did not start")
                    failed = True
        rc = 1
        if not failed:
            ipv4 = "ipv4:" + ",".join("127.0.0.1:%d" % p for p in reach)
            cmd = [a.replace("{ipv4}", ipv4).replace("{port}", str(front)) for a in client_cmd]
            print("multi_server: client: %s" % " ".join(cmd), flush=True)
            rc = subprocess.run(run_pair.bounded(cmd, opts["client_timeout"]),
                                stdin=subprocess.DEVNULL).returncode
            print("multi_server: client %s" % run_pair.describe_exit(rc), flush=True)
            for n, r in enumerate(relays):
                print("multi_server: server %d received %d bytes" % (n, r.bytes_in))
                if r.bytes_in < opts["min_bytes"]:
                    print("multi_server: FAIL: server %d received %d bytes, fewer than %d: "
                          "the client did not use it" % (n, r.bytes_in, opts["min_bytes"]))
                    failed = True
        if proxy is not None:
            run_pair.stop(proxy)
        for n, proc in enumerate(servers):
            if proc.poll() is not None:
                print("multi_server: FAIL: server %d died (%s)"
                      % (n, run_pair.describe_exit(proc.returncode)))
                failed = True
            rc_server = run_pair.stop(proc)
            if opts["check_server_exit"] and rc_server != 0:
                print("multi_server: FAIL: server %d did not exit cleanly on SIGTERM (%s)"
                      % (n, run_pair.describe_exit(rc_server)))
                failed = True
        if failed or rc != 0:
            log.flush()
            run_pair.show_log(log_path, "servers' output")
        if rc != 0:
            return rc if 0 < rc < 256 else 1
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
