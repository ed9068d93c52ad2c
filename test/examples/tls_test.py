#!/usr/bin/env python3
"""The tls example (examples/tls): mutual TLS with certificates made at test time.

    tls_test.py --make-certs PATH/make_certs.sh --server PATH/tls_server --client PATH/tls_client
                --policy PATH/policy.json

Makes a CA, a server and a client certificate with make_certs.sh (openssl) in a scratch
directory, starts tls_server, then checks that:
  - the client with its certificate is greeted with that certificate's subject, through
    "localhost" (the DNS name) and "127.0.0.1" (the IP address) in the server's certificate;
  - a client that presents no certificate is refused: UNAVAILABLE from a failed handshake, and
    the server says why;
  - a client that expects another server name refuses the server's certificate;
  - only the two good calls reached the handler, and the server exits 0 on SIGTERM;
  - a server enforcing the example's authorization policy greets the client, denies its call
    with an x-robot header (PERMISSION_DENIED, no handler, an audit line naming the deny rule).
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
    parser.add_argument("--policy", required=True)
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

        authz, port = start_server("tls_server --policy", [args.server, "--certs=" + certs,
                                                           "--port=0", "--policy=" + args.policy])
        if not checks.check(port is not None, "the server with a policy reported its port"):
            checks.exit()
        checks.check(authz.wait_for(r'enforcing authorization policy "tls_example"', 10),
                     "it enforces the example's policy")
        target = "--target=127.0.0.1:%d" % port
        allowed = run("tls_client (policy)", client + [target])
        checks.check(allowed.proc.returncode == 0, "the policy lets the example's client in")
        checks.has_line(allowed, "SayHello: Hello tls, your certificate says " + SUBJECT)
        robot = run("tls_client --header=x-robot:yes", client + [target, "--header=x-robot:yes"])
        checks.check(robot.proc.returncode == 1, "the client sending x-robot exited 1")
        checks.check(robot.wait_for(r"SayHello failed: PERMISSION_DENIED: authz: unauthorized "
                                    r"RPC request rejected", 0),
                     "its call was denied: PERMISSION_DENIED")
        checks.check(authz.wait_for(r'"grpc_audit_log":\{"rpc_method":"/helloworld.Greeter/'
                                    r'SayHello","principal":"spiffe://example.ferry/client",'
                                    r'"policy_name":"tls_example","matched_rule":'
                                    r'"tls_example_no_robots","authorized":false', 10),
                     "the server's audit log names the deny rule")
        checks.check(authz.stop() == 0, "the server with a policy exited 0 on SIGTERM")
        greeted = [l for l in authz.lines() if l.startswith("tls_server: SayHello from ")]
        checks.check(len(greeted) == 1, "its handler ran for the allowed call only (got %s)"
                     % greeted)
    finally:
        shutil.rmtree(certs, ignore_errors=True)
    checks.exit()


if __name__ == "__main__":
    main()
