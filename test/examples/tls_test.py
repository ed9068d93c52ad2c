#!/usr/bin/env python3
"""The tls example (examples/tls): mutual TLS with certificates made at test time.

    tls_test.py --make-certs PATH/make_certs.sh --server PATH/tls_server --client PATH/tls_client

Makes a CA, a server and a client certificate with make_certs.sh (openssl) in a scratch
directory, starts tls_server, then checks that:
  - the client with its certificate is greeted with that certificate's subject, through
    "localhost" (the DNS name) and "127.0.0.1" (the IP address) in the server's certificate;
  - a client that presents no certificate is refused: UNAVAILABLE from a failed handshake, and
    the server says why;
  - a client that expects another server name refuses the server's certificate;
  - only the two good calls reached the handler, and the server exits 0 on SIGTERM.
The scratch directory (with the private keys) is removed at the end.
"""

import argparse
import shutil
import subprocess
import tempfile

from example_programs import Checks, run, start_server

SUBJECT = "CN=ferry example client,O=ferry example"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--make-certs", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    args = parser.parse_args()
    checks = Checks()

    certs = tempfile.mkdtemp(prefix="ferry-tls-example-")
    try:
        made = subprocess.run(["bash", args.make_certs, certs], capture_output=True, text=True,
                              timeout=60)
        if not checks.check(made.returncode == 0, "make_certs.sh made the certificates"):
            print(made.stdout + made.stderr)
            checks.exit()

        server, port = start_server("tls_server", [args.server, "--certs=" + certs, "--port=0"])
        if not checks.check(port is not None, "the server reported its port"):
            checks.exit()
        client = [args.client, "--certs=" + certs]

        for host in ["localhost", "127.0.0.1"]:
            good = run("tls_client (%s)" % host, client + ["--target=%s:%d" % (host, port)])
            checks.check(good.proc.returncode == 0, "the client with a certificate, via %s, "
                         "exited 0" % host)
            checks.has_line(good, "SayHello: Hello tls, your certificate says " + SUBJECT)

        bare = run("tls_client --no_client_cert",
                   client + ["--target=127.0.0.1:%d" % port, "--no_client_cert"])
        checks.check(bare.proc.returncode == 1, "the client without a certificate exited 1")
        checks.check(bare.wait_for(r"SayHello failed: UNAVAILABLE: TLS handshake failed", 0),
                     "its call failed with UNAVAILABLE: TLS handshake failed")
        checks.check(server.wait_for(r"TLS handshake failed: .*did not return a certificate",
                                     10), "the server refused it: no certificate")

        mismatch = run("tls_client --server_name=wrong.example",
                       client + ["--target=127.0.0.1:%d" % port, "--server_name=wrong.example"])
        checks.check(mismatch.proc.returncode == 1, "the client expecting another name exited 1")
        checks.check(mismatch.wait_for(r"UNAVAILABLE: TLS handshake failed: certificate verify "
                                       r"failed.*hostname mismatch", 0),
                     "it refused the server's certificate: hostname mismatch")

        checks.check(server.stop() == 0, "the server exited 0 on SIGTERM")
        calls = [l for l in server.lines() if l.startswith("tls_server: SayHello from ")]
        theirs = [l for l in calls if l.startswith("tls_server: SayHello from %s (" % SUBJECT)]
        checks.check(len(calls) == 2 and len(theirs) == 2,
                     "the handler ran for the two good calls only, with the client's subject "
                     "(got %s)" % calls)
    finally:
        shutil.rmtree(certs, ignore_errors=True)
    checks.exit()


if __name__ == "__main__":
    main()
