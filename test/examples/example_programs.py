"""What the example tests share: start an example's program, wait for a line it prints, feed it
stdin, stop it, and report checks. Standard library only.

A test waits for conditions, never for fixed times: a server prints "listening on HOST:PORT" once
it accepts calls, and Program.wait_for blocks until such a line came (or its deadline passed, or
the program exited). Every program is started in a session of its own and killed at exit if
still running, so that a failed test leaves nothing behind.
"""

import atexit
import re
import signal
import subprocess
import sys
import threading
import time

_started = []


class Program:
    """A running program whose output (stdout and stderr together) is collected line by line."""

    def __init__(self, name, cmd, stdin=False):
        self.name = name
        self.cmd = cmd
        self._lines = []
        self._eof = False
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     bufsize=1, start_new_session=True)
        _started.append(self)
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        for line in self.proc.stdout:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_for(self, pattern, timeout):
        """The match of the first line (from the start) that matches pattern; None when the
        program's output ended or timeout seconds passed first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self._lines[seen:]:
                    m = regex.search(line)
                    if m:
                        return m
                seen = len(self._lines)
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    return None
                self._cond.wait(left)

    def write_line(self, text):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def wait(self, timeout):
        """The exit status once the program exited (and its output was read in full); None when
        it is still running after timeout seconds."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        with self._cond:
            self._cond.wait_for(lambda: self._eof, timeout)
        return rc

    def stop(self, timeout=10):
        """SIGTERM, then the exit status; SIGKILL (and None) when it lingers."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait(timeout)
        if rc is None:
            self.kill()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def lines(self):
        with self._cond:
            return list(self._lines)

    def output(self):
        return "\n".join(self.lines())


def _kill_all():
    for program in _started:
        program.kill()


atexit.register(_kill_all)


def start_server(name, cmd, timeout=20):
    """Starts a server that prints "listening on HOST:PORT" and returns (program, port); port is
    None when no such line came within timeout seconds."""
    server = Program(name, cmd)
    m = server.wait_for(r"listening on \S+:(\d+)$", timeout)
    return server, (int(m.group(1)) if m else None)


def run(name, cmd, timeout=30):
    """Runs a program to its end and returns it, its exit status in .proc.returncode (-9 when it
    was still running after timeout seconds and killed)."""
    program = Program(name, cmd)
    if program.wait(timeout) is None:
        program.kill()
    return program


class Checks:
    """PASS/FAIL lines, and on any failure every program's output; exit() gives the status."""

    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        print("%s %s" % ("PASS" if ok else "FAIL", what))
        if not ok:
            self.failed += 1
        return ok

    def has_line(self, program, line):
        return self.check(line in program.lines(), "%s printed %r" % (program.name, line))

    def exit(self):
        if self.failed:
            for program in _started:
                print("---- %s: %s (exit %s) ----" % (program.name, " ".join(program.cmd),
                                                    program.proc.poll()))
                print(program.output())
            print("%d check(s) failed" % self.failed)
        sys.exit(1 if self.failed else 0)
