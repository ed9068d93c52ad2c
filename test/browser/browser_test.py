#!/usr/bin/env python3
"""The greeter called from a real browser: connect-web's Connect and gRPC-Web transports in
headless Chromium, across origins (CORS). test/browser/README.md says what it does and why.

    browser_test.py --greeter-server BIN --protoc BIN --proto-dir DIR --node BIN \\
        --node-modules DIR --chromium PATH --work-dir DIR [--no-cors]

1. builds the page into WORK_DIR/site: greeter_pb.js generated from PROTO_DIR/greeter.proto by
   protoc with protoc-gen-es, page.js bundled with it by esbuild (both from NODE_MODULES), and
   index.html;
2. serves WORK_DIR/site on 127.0.0.1 from this process (http.server), and starts two greeter
   servers on other ports: one that allows the page's origin (--cors_origin), one that allows none;
3. loads the page in headless Chromium (drive.cjs, puppeteer-core), once against each server, and
   checks the replies shown: against the first, each of the four calls (SayHello and
   SayHelloStreamReply, Connect and gRPC-Web) shows exactly its greetings; against the second, each
   shows an error and the console says the browser blocked them by CORS policy (so the page
   really is on another origin, and the first run passed through CORS);
4. stops the servers with SIGTERM; each must exit 0.

--no-cors starts the first server without --cors_origin too (the test must then fail). Prints
`PASS what` / `FAIL what: why` per check and each step's time; exits 0 only if every check passed.
Prints `SKIP: ...` and exits 0 when CHROMIUM is missing (ctest's SKIP_REGULAR_EXPRESSION).
Standard library only.
"""

import argparse
import functools
import http.server
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_TIMEOUT = 60     # seconds for protoc, and for esbuild
SERVER_WAIT = 20.0     # seconds for a greeter server to say where it listens
STOP_WAIT = 10.0       # seconds for a greeter server to exit after SIGTERM
PAGE_TIMEOUT_MS = 20000  # for the browser to start, and for each page to finish its calls
DRIVER_TIMEOUT = 90    # seconds for the whole browser run

NAMES = {"connect": "Connect ✓", "grpc-web": "gRPC-Web ✓"}  # as page.js sends them


def expected_results():
    out = {}
    for transport, name in NAMES.items():
        out[transport + "-unary"] = ["Hello " + name]
        out[transport + "-stream"] = ["Hello %s #%d" % (name, i) for i in (1, 2, 3)]
    return out


class Failed(Exception):
    pass


def run(what, cmd, env=None):
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failed("%s: %s" % (what, e))
    if done.returncode != 0:
        raise Failed("%s exited %d:\n%s%s" % (what, done.returncode, done.stdout, done.stderr))


def build_page(args, node_env):
    """Generates greeter_pb.js, bundles page.js with it, and returns the site's folder."""
    src = os.path.join(args.work_dir, "src")
    site = os.path.join(args.work_dir, "site")
    for d in (src, site):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    os.makedirs(os.path.join(src, "gen"))
    shutil.copy(os.path.join(HERE, "page.js"), src)
    bin_dir = os.path.join(args.node_modules, ".bin")
    run("protoc (protoc-gen-es)",
        [args.protoc, "--plugin=protoc-gen-es=" + os.path.join(bin_dir, "protoc-gen-es"),
         "--es_out=" + os.path.join(src, "gen"), "--es_opt=target=js", "-I", args.proto_dir,
         os.path.join(args.proto_dir, "greeter.proto")], env=node_env)
    # esbuild finds the npm packages through NODE_PATH: the sources are outside node_modules' tree.
    run("esbuild",
        [os.path.join(bin_dir, "esbuild"), os.path.join(src, "page.js"), "--bundle",
         "--format=esm", "--target=es2020", "--log-level=warning",
         "--outfile=" + os.path.join(site, "page.js")], env=node_env)
    shutil.copy(os.path.join(HERE, "index.html"), site)
    return site


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_site(site):
    """Serves SITE on 127.0.0.1 from a thread; returns the server and its origin."""
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=site))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, "http://127.0.0.1:%d" % httpd.server_address[1]


class Greeter:
    """A greeter_server on a free port of 127.0.0.1, its output kept for a failure's report."""

    def __init__(self, binary, cors_origin):
        cmd = [binary, "--host=127.0.0.1", "--port=0", "--threads=1"]
        if cors_origin:
            cmd.append("--cors_origin=" + cors_origin)
        self.what = "greeter_server" + (" --cors_origin=" + cors_origin if cors_origin else "")
        self.output = ""
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.port = self._wait_for_port()

    def _wait_for_port(self):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + SERVER_WAIT
        while time.monotonic() < deadline:
            if not sel.select(timeout=deadline - time.monotonic()):
                break
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output += line
            if "listening on " in line:
                return int(line.rsplit(":", 1)[1])
        self.proc.kill()
        raise Failed("%s did not start:\n%s" % (self.what, self.output))

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self):
        """SIGTERM; returns why the server failed, or None when it exited 0 in time."""
        if self.proc.poll() is not None:
            why = "%s died during the run (status %d)" % (self.what, self.proc.returncode)
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                status = self.proc.wait(timeout=STOP_WAIT)
                why = None if status == 0 else "%s exited %d on SIGTERM" % (self.what, status)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                why = "%s did not exit within %.0f s of SIGTERM" % (self.what, STOP_WAIT)
        self.output += self.proc.stdout.read()
        return why and "%s; its output:\n%s" % (why, self.output)


def drive(args, node_env, urls):
    cmd = [args.node, os.path.join(HERE, "drive.cjs"), args.chromium, str(PAGE_TIMEOUT_MS)] + urls
    try:
        done = subprocess.run(cmd, env=node_env, capture_output=True, text=True,
                              timeout=DRIVER_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failed("drive.cjs: %s" % e)
    if done.returncode != 0:
        raise Failed("drive.cjs exited %d:\n%s%s" % (done.returncode, done.stdout, done.stderr))
    return json.loads(done.stdout)


def check_page(what, page, expect_errors):
    """Prints a PASS or FAIL line per call of one page load; returns how many failed."""
    failures = 0
    for result, want in expected_results().items():
        got = page["results"].get(result)
        if expect_errors:
            ok = got is not None and len(got) == 1 and got[0].startswith("error: ")
            why = "%r, but a refused cross-origin response shows one error" % (got,)
            if ok and not any("blocked by CORS policy" in line for line in page["console"]):
                ok, why = False, "%r, but the console names no CORS refusal" % (got,)
        else:
            ok = got == want
            why = "%r, want %r" % (got, want)
        if ok:
            print("PASS %s: %s shows %r" % (what, result, got))
        else:
            print("FAIL %s: %s shows %s" % (what, result, why))
            failures += 1
    if failures:
        print("  the page's console:\n    " + "\n    ".join(page["console"] or ["(nothing)"]))
        print("  failed requests:\n    " + "\n    ".join(page["failed_requests"] or ["(none)"]))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--greeter-server", required=True)
    ap.add_argument("--protoc", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--node-modules", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--no-cors", action="store_true",
                    help="start the first server without CORS too (the test must fail)")
    args = ap.parse_args()
    if not os.access(args.chromium, os.X_OK):
        print("SKIP: %s not found (Debian's chromium: scripts/test.sh installs it)" % args.chromium)
        return 0
    # protoc-gen-es is a node script (#!/usr/bin/env node): the same node first on its PATH.
    node_env = dict(os.environ, NODE_PATH=args.node_modules,
                    PATH=os.path.dirname(os.path.abspath(args.node)) + os.pathsep +
                    os.environ.get("PATH", ""))

    start = time.monotonic()
    lap_start = start

    def lap(what):
        nonlocal lap_start
        now = time.monotonic()
        print("time: %-40s %5.1f s" % (what, now - lap_start))
        lap_start = now

    failures = 0
    servers = []
    httpd = None
    try:
        site = build_page(args, node_env)
        lap("page built (protoc-gen-es, esbuild)")
        httpd, origin = serve_site(site)
        allowed = Greeter(args.greeter_server, None if args.no_cors else origin)
        servers.append(allowed)
        refused = Greeter(args.greeter_server, None)
        servers.append(refused)
        print("page on %s; greeter servers on %s (%s) and %s (no CORS)" %
              (origin, allowed.url(), "no CORS" if args.no_cors else "CORS for the page's origin",
               refused.url()))
        lap("servers started")
        pages = [origin + "/index.html?server=" + server.url() for server in (allowed, refused)]
        loaded = drive(args, node_env, pages)
        lap("headless Chromium loaded both")
        failures += check_page("with CORS", loaded[pages[0]], expect_errors=False)
        failures += check_page("without CORS", loaded[pages[1]], expect_errors=True)
    except Failed as e:
        print("FAIL %s" % e)
        failures += 1
    finally:
        for server in servers:
            why = server.stop()
            if why:
                print("FAIL %s" % why)
                failures += 1
        if httpd:
            httpd.shutdown()
    print("time: %-40s %5.1f s" % ("total", time.monotonic() - start))
    print("browser: %s" % ("FAILED (%d)" % failures if failures else "every check passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
