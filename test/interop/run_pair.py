#!/usr/bin/env python3
"""Runs one interop client against one interop server on 127.0.0.1 and reports the client's result.

    run_pair.py [--client-timeout S] [--server-timeout S] [--check-server-exit] \\
        [--client-attempts N] --server SERVER_CMD... --client CLIENT_CMD...

Picks a free port and substitutes it for `{port}` in both commands, starts the server under
`timeout`, waits until the port accepts connections, runs the client under `timeout`, then stops the
server with SIGTERM (SIGKILL to its process group if it lingers). Exits with the client's status, or
1 when the client passed but the server died during the run or (with --check-server-exit) did not
exit 0 on SIGTERM. The server's output is shown when anything failed. Uses only the standard library.

--client-attempts N (default 1) reruns a failing client up to N times in all, against the same
server, and passes if one run passes: only for a peer's case that races with itself (each use
says why); every failed run is printed.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

PORT_WAIT = 20.0      # seconds for the server to accept connections
STOP_WAIT = 10.0      # seconds for the server to exit after SIGTERM
START_ATTEMPTS = 3    # a server that loses the port to another process is retried on a new one


def usage(why):
    print("run_pair.py: %s" % why, file=sys.stderr)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    sys.exit(2)


def parse(argv):
    opts = {"client_timeout": 30.0, "server_timeout": 60.0, "check_server_exit": False,
            "client_attempts": 1}
    try:
        s = argv.index("--server")
        c = argv.index("--client", s + 1)
    except ValueError:
        usage("need --server CMD... --client CMD...")
    i = 0
    head = argv[:s]
    while i < len(head):
        if head[i] == "--client-timeout" and i + 1 < len(head):
            opts["client_timeout"] = float(head[i + 1])
            i += 2
        elif head[i] == "--server-timeout" and i + 1 < len(head):
            opts["server_timeout"] = float(head[i + 1])
            i += 2
        elif head[i] == "--client-attempts" and i + 1 < len(head):
            opts["client_attempts"] = max(1, int(head[i + 1]))
            i += 2
        elif head[i] == "--check-server-exit":
            opts["check_server_exit"] = True
            i += 1
        else:
            usage("unknown option %r" % head[i])
    server, client = argv[s + 1:c], argv[c + 1:]
    if not server or not client:
        usage("empty server or client command")
    return opts, server, client


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def with_port(cmd, port):
    return [a.replace("{port}", str(port)) for a in cmd]


def bounded(cmd, seconds):
    # -k: SIGKILL if the command ignores timeout's SIGTERM.
    return ["timeout", "-k", "5", "%g" % seconds] + cmd


def show_log(path, title):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    lines = text.splitlines()
    print("---- %s (%d lines%s) ----" % (title, len(lines), ", last 200" if len(lines) > 200 else ""))
    for line in lines[-200:]:
        print(line)
    print("---- end of %s ----" % title)


def describe_exit(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        return "killed by %s" % signal.Signals(-rc).name
    if rc == 124:
        return "timed out (exit 124)"
    if rc > 128 and rc - 128 < signal.NSIG:
        try:
            return "exit %d (%s)" % (rc, signal.Signals(rc - 128).name)
        except ValueError:
            pass
    return "exit %d" % rc


def start_server(cmd, timeout_s, log):
    """Starts the server on a free port; returns (process, port) or (None, None)."""
    for attempt in range(START_ATTEMPTS):
        port = free_port()
        log.seek(0)
        log.truncate()
        proc = subprocess.Popen(bounded(with_port(cmd, port), timeout_s), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + PORT_WAIT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if accepts(port):
                return proc, port
            time.sleep(0.05)
        if proc.poll() is None:
            print("run_pair: server not accepting on port %d after %gs" % (port, PORT_WAIT))
            stop(proc)
            return None, None
        print("run_pair: server exited (%s) before accepting on port %d (attempt %d)"
              % (describe_exit(proc.returncode), port, attempt + 1))
    return None, None


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # timeout(1) passes it on to the server
        try:
            proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            print("run_pair: server still running %gs after SIGTERM; killing it" % STOP_WAIT)
            os.killpg(proc.pid, signal.SIGKILL)  # the session started for it alone
            proc.wait()
    return proc.returncode


def main():
    opts, server_cmd, client_cmd = parse(sys.argv[1:])
    with tempfile.TemporaryFile() as log:
        log_path = "/proc/self/fd/%d" % log.fileno()
        server, port = start_server(server_cmd, opts["server_timeout"], log)
        if server is None:
            log.flush()
            show_log(log_path, "server output")
            return 1
        print("run_pair: server up on 127.0.0.1:%d: %s" % (port, " ".join(with_port(server_cmd, port))),
              flush=True)

        for attempt in range(1, opts["client_attempts"] + 1):
            start = time.monotonic()
            client = subprocess.run(bounded(with_port(client_cmd, port), opts["client_timeout"]),
                                    stdin=subprocess.DEVNULL)
            elapsed = time.monotonic() - start
            rc = client.returncode
            print("run_pair: client %s after %.2fs (run %d of at most %d)"
                  % (describe_exit(rc), elapsed, attempt, opts["client_attempts"]), flush=True)
            if rc == 0 or server.poll() is not None:
                break

        died = server.poll() is not None
        server_rc = stop(server)
        failed = rc != 0
        if died:
            print("run_pair: FAIL: the server died during the run (%s)" % describe_exit(server_rc))
            failed = True
        elif opts["check_server_exit"] and server_rc != 0:
            print("run_pair: FAIL: the server did not exit cleanly on SIGTERM (%s)"
                  % describe_exit(server_rc))
            failed = True
        if failed:
            log.flush()
            show_log(log_path, "server output")
        if rc != 0:
            return rc if 0 < rc < 256 else 1
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
