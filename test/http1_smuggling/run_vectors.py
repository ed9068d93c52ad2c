#!/usr/bin/env python3
"""Request smuggling and framing vectors (RFC 9112 §2, §5, §6, §7) against ferry's HTTP/1.1 server
and two strict references: Go's net/http server and Node's http server (go_server.go and
node_server.js beside this file; the Go one built by scripts/install_peers.sh with the peers,
http1_smuggling_go_server; both started here).

    run_vectors.py --ferry-server build/examples/greeter/greeter_server
                   --go-server build/peers/bin/http1_smuggling_go_server --node /usr/bin/node

Each vector is the bytes a client sends on one connection: the CL.TE, TE.CL and TE.TE families,
each framing rule, CONNECT and Upgrade with a body, each followed by a pipelined request. A
vector's `front` is how many requests a front door that frames by the rules sees in its bytes.
Every server gets every vector on a connection of its own (all at once, in threads). Asserted:
  - ferry refuses (a 4xx/5xx answer first, or no answer) every vector that Go or Node refuses;
  - ferry never answers more requests than the front door sent;
  - a valid request (the controls) is answered 200 by all three, so refusals mean something.
Standard library only; the Go server builds from the standard library alone (no module).
"""

import argparse
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from example_programs import Checks, start_server  # noqa: E402

PATH = "/helloworld.Greeter/SayHello"
JSON = "Content-Type: application/json\r\n"
B = '{"name":"x"}'  # a request the greeter answers 200 (12 bytes, c in hex)


def req(head="", body=B, method="POST", path=PATH, version="HTTP/1.1", host=True):
    """A request: the request line, Host, Content-Type, `head` (field lines, each ending CRLF),
    the blank line, then body as given (framing fields are the vector's business)."""
    return (f"{method} {path} {version}\r\n" + ("Host: x\r\n" if host else "") + JSON + head +
            "\r\n" + body)


def post(body=B):
    return req(f"Content-Length: {len(body)}\r\n", body)


NEXT = post()  # the pipelined request after each vector
HIDDEN = req("Content-Length: 12\r\n", B, path="/helloworld.Greeter/SayHello?hidden=1")


def chunked(body):
    return "%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


# (name, bytes, front, what it covers[, the index of the request under test: 0 unless a valid
# request comes first])
VECTORS = [
    # Controls: valid requests every server answers.
    ("control: content-length, pipelined", post() + NEXT, 2, "control"),
    ("control: chunked, pipelined", req("Transfer-Encoding: chunked\r\n", chunked(B)) + NEXT,
     2, "control"),
    ("control: chunked with extension and trailer",
     req("Transfer-Encoding: chunked\r\n", "c;ext=1\r\n" + B + "\r\n0\r\nx-t: 1\r\n\r\n") + NEXT, 2,
     "control"),
    ("control: three pipelined", post() + post() + NEXT, 3, "control"),
    ("control: HTAB before the value, CHUNKED in capitals",
     req("Transfer-Encoding:\tCHUNKED\r\n", chunked(B)) + NEXT, 2, "control"),

    # CL.TE: the front frames by Content-Length, a back end by chunked.
    ("CL.TE: both, hidden request after the last chunk",
     req("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len("0\r\n\r\n" + HIDDEN),
         "0\r\n\r\n" + HIDDEN) + NEXT, 2, "§6.1 CL+TE"),
    ("CL.TE: Transfer-Encoding first",
     req("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len("0\r\n\r\n" + HIDDEN),
         "0\r\n\r\n" + HIDDEN) + NEXT, 2, "§6.1 CL+TE"),
    # TE.CL: the front frames by chunked, a back end by Content-Length.
    ("TE.CL: hidden request inside a chunk",
     req("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", chunked(HIDDEN)) + NEXT, 2,
     "§6.1 CL+TE"),
    # TE.TE: an obfuscated Transfer-Encoding one side ignores.
    ("TE.TE: xchunked", req("Transfer-Encoding: xchunked\r\n", chunked(HIDDEN)) + NEXT, 1,
     "§6.1 unknown coding"),
    ("TE.TE: space before the colon",
     req("Transfer-Encoding : chunked\r\nContent-Length: 3\r\n", chunked(HIDDEN)) + NEXT, 1,
     "§5.1 whitespace before colon"),
    ("TE.TE: two fields, second bogus",
     req("Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n", chunked(HIDDEN)) + NEXT, 1,
     "§6.1 chunked not last"),
    ("TE.TE: two fields, both chunked",
     req("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", chunked(HIDDEN)) + NEXT,
     1, "§6.1 chunked twice"),
    ("TE.TE: chunked, identity", req("Transfer-Encoding: chunked, identity\r\n", chunked(HIDDEN))
     + NEXT, 1, "§6.3 chunked not last"),
    ("TE.TE: identity, chunked", req("Transfer-Encoding: identity, chunked\r\n", chunked(B))
     + NEXT, 2, "§6.1 coding not understood"),
    ("TE.TE: gzip alone", req("Transfer-Encoding: gzip\r\n", chunked(HIDDEN)) + NEXT, 1,
     "§6.3 chunked not last"),
    ("TE.TE: obs-fold", req("Transfer-Encoding:\r\n chunked\r\nContent-Length: 3\r\n",
                            chunked(HIDDEN)) + NEXT, 1, "§5.2 obs-fold"),
    ("TE.TE: vertical tab before chunked",
     req("Transfer-Encoding: \x0bchunked\r\n", chunked(HIDDEN)) + NEXT, 1, "§5.5 CTL in value"),
    ("TE.TE: bare LF before the field",
     req("X: y\nTransfer-Encoding: chunked\r\n", chunked(HIDDEN)) + NEXT, 1, "§2.2 bare LF"),
    ("TE in HTTP/1.0", req("Transfer-Encoding: chunked\r\n", chunked(B), version="HTTP/1.0")
     + NEXT, 1, "§6.1 TE in HTTP/1.0"),

    # Content-Length.
    ("CL: two equal fields", req("Content-Length: 12\r\nContent-Length: 12\r\n", B) + NEXT, 2,
     "§6.3 duplicate CL"),
    ("CL: two different fields",
     req("Content-Length: 12\r\nContent-Length: %d\r\n" % (12 + len(HIDDEN)), B + HIDDEN)
     + NEXT, 2, "§6.3 duplicate CL"),
    ("CL: a list", req("Content-Length: 12, 12\r\n", B) + NEXT, 2, "§6.3 CL list"),
    ("CL: a sign", req("Content-Length: +12\r\n", B) + NEXT, 2, "§6.3 CL syntax"),
    ("CL: hexadecimal", req("Content-Length: 0xc\r\n", B) + NEXT, 2, "§6.3 CL syntax"),
    ("CL: negative", req("Content-Length: -1\r\n", B) + NEXT, 1, "§6.3 CL syntax"),
    ("CL: space before the colon, hides the next request",
     req("Content-Length : %d\r\n" % len(HIDDEN), HIDDEN, method="GET") + NEXT, 1,
     "§5.1 whitespace before colon"),
    ("CL: space inside the name", req("Content Length: 12\r\n", B) + NEXT, 1,
     "§5.1 invalid token"),
    ("CL: NUL in the name", req("Content-Length\x00: 12\r\n", B) + NEXT, 1,
     "§5.1 invalid token"),
    ("GET with a body holding a request (framed: not smuggling)",
     req("Content-Length: %d\r\n" % len(HIDDEN), HIDDEN, method="GET") + NEXT, 2,
     "§6.3 GET body"),

    # Chunks.
    ("chunk: size 0x-prefixed", req("Transfer-Encoding: chunked\r\n",
                                    "0xc\r\n" + B + "\r\n0\r\n\r\n") + NEXT, 1, "§7.1 chunk-size"),
    ("chunk: space after the size", req("Transfer-Encoding: chunked\r\n",
                                        "c \r\n" + B + "\r\n0\r\n\r\n") + NEXT, 1, "§7.1 chunk-size"),
    ("chunk: negative size", req("Transfer-Encoding: chunked\r\n", "-c\r\n" + B + "\r\n0\r\n\r\n")
     + NEXT, 1, "§7.1 chunk-size"),
    ("chunk: size overflows 64 bits",
     req("Transfer-Encoding: chunked\r\n", "1000000000000000c\r\n" + B + "\r\n0\r\n\r\n") + NEXT, 1,
     "§7.1 chunk-size"),
    ("chunk: no size", req("Transfer-Encoding: chunked\r\n", "\r\n" + B + "\r\n0\r\n\r\n") + NEXT, 1,
     "§7.1 chunk-size"),
    ("chunk: data longer than its size (no CRLF after it)",
     req("Transfer-Encoding: chunked\r\n", "c\r\n" + B + "XX0\r\n\r\n") + NEXT, 1,
     "§7.1 chunk terminator"),
    ("chunk: bare LF after the data", req("Transfer-Encoding: chunked\r\n",
                                          "c\r\n" + B + "\n0\r\n\r\n") + NEXT, 1,
     "§7.1 chunk terminator"),
    ("chunk: bare LF after the size", req("Transfer-Encoding: chunked\r\n",
                                          "c\n" + B + "\r\n0\r\n\r\n") + NEXT, 1, "§2.2 bare LF"),
    ("chunk: bare CR in an extension", req("Transfer-Encoding: chunked\r\n",
                                           "c;a\rb\r\n" + B + "\r\n0\r\n\r\n") + NEXT, 1,
     "§2.2 bare CR"),
    ("chunk: obs-fold in the trailers", req("Transfer-Encoding: chunked\r\n",
                                            "c\r\n" + B + "\r\n0\r\nx: a\r\n b\r\n\r\n") + NEXT, 1,
     "§5.2 obs-fold"),

    # Line ends and fields.
    ("bare LF line ends", post().replace("\r\n", "\n") + NEXT, 1, "§2.2 bare LF"),
    ("bare CR in a field", req("X: a\rb\r\nContent-Length: 12\r\n", B) + NEXT, 1,
     "§2.2 bare CR"),
    ("obs-fold", req("X: a\r\n b\r\nContent-Length: 12\r\n", B) + NEXT, 1, "§5.2 obs-fold"),
    ("space before the first field", req(" X: a\r\nContent-Length: 12\r\n", B) + NEXT, 1,
     "§5.2 obs-fold"),
    ("invalid token in a name", req("X@Y: a\r\nContent-Length: 12\r\n", B) + NEXT, 1,
     "§5.1 invalid token"),
    ("DEL in a value", req("X: a\x7fb\r\nContent-Length: 12\r\n", B) + NEXT, 1,
     "§5.5 CTL in value"),
    ("no Host", req("Content-Length: 12\r\n", B, host=False) + NEXT, 1, "§3.2 Host"),
    ("two Hosts", req("Host: y\r\nContent-Length: 12\r\n", B) + NEXT, 1, "§3.2 Host"),
    ("HTTP/1.2", req("Content-Length: 12\r\n", B, version="HTTP/1.2") + NEXT, 1, "version"),
    ("HTTP/2.0 in a request line", req("Content-Length: 12\r\n", B, version="HTTP/2.0")
     + NEXT, 1, "version"),
    ("head of 64 KiB", req("X: %s\r\nContent-Length: 12\r\n" % ("a" * 65536)) + NEXT, 1,
     "limits"),

    # CONNECT and Upgrade: what follows their head is not HTTP/1.1; a body must not become a
    # request. CONNECT comes second on its connection: ferry's cleartext port tells HTTP/1.1 from
    # HTTP/2 by a first request's method, and CONNECT is not one it takes (that connection gets
    # HTTP/2's refusal); on a kept connection, or over TLS with ALPN http/1.1, it reaches the
    # HTTP/1.1 engine.
    ("CONNECT with a body holding a request",
     post() + req("Content-Length: %d\r\n" % len(HIDDEN), HIDDEN, method="CONNECT",
                  path="x:443") + NEXT, 3, "CONNECT", 1),
    ("CONNECT, then a request", post() + req("", "", method="CONNECT", path="x:443") + HIDDEN,
     2, "CONNECT", 1),
    ("Upgrade with a body holding a request",
     req("Connection: upgrade\r\nUpgrade: x\r\nContent-Length: %d\r\n" % len(HIDDEN), HIDDEN)
     + NEXT, 2, "Upgrade"),
    ("Upgrade without a body, then a request",
     req("Connection: upgrade\r\nUpgrade: x\r\nContent-Length: 0\r\n", "") + HIDDEN, 1,
     "Upgrade"),
]


def read_responses(data):
    """The statuses of the whole responses in data, in order (a response delimited by the end of
    the connection counts once the connection closed; the caller passes everything)."""
    statuses = []
    at = 0
    while True:
        end = data.find(b"\r\n\r\n", at)
        if end < 0:
            return statuses
        head = data[at:end].decode("latin-1").split("\r\n")
        parts = head[0].split(" ")
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            return statuses
        status = int(parts[1])
        fields = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip().lower()
        at = end + 4
        if 100 <= status < 200:
            continue
        statuses.append(status)
        if "content-length" in fields:
            at += int(fields["content-length"])
        elif fields.get("transfer-encoding") == "chunked":
            while True:
                line_end = data.find(b"\r\n", at)
                if line_end < 0:
                    return statuses
                size = int(data[at:line_end].split(b";")[0], 16)
                at = line_end + 2 + size + 2
                if size == 0:
                    break
        elif status not in (204, 304):
            return statuses  # to the end of the connection


def exchange(port, data, idle=0.5):
    """Sends data on a new connection and returns what came back before the server closed or
    went quiet for `idle` seconds."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(idle)
        try:
            s.sendall(data)
        except OSError:
            pass
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        return got


def outcome(port, data, probe):
    """(whether the request under test was refused, every answer's status)."""
    statuses = read_responses(exchange(port, data))
    refused = len(statuses) <= probe or statuses[probe] >= 400
    return refused, statuses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ferry-server", required=True)
    parser.add_argument("--go-server", required=True)
    parser.add_argument("--node", required=True)
    args = parser.parse_args()
    checks = Checks()
    here = os.path.dirname(os.path.abspath(__file__))

    go_binary = args.go_server

    servers = {}
    for name, cmd in (("ferry", [args.ferry_server, "--port=0"]), ("go", [go_binary]),
                      ("node", [args.node, os.path.join(here, "node_server.js")])):
        program, port = start_server(name, cmd)
        if not checks.check(port is not None, "%s listens" % name):
            return checks.exit()
        servers[name] = (program, port)

    results = {}
    lock = threading.Lock()

    def run(vector_index, name):
        vector = VECTORS[vector_index]
        probe = vector[4] if len(vector) > 4 else 0
        got = outcome(servers[name][1], vector[1].encode("latin-1"), probe)
        with lock:
            results[(vector_index, name)] = got

    threads = [threading.Thread(target=run, args=(i, name))
               for i in range(len(VECTORS)) for name in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    for i, (title, _, front, rule, *_) in enumerate(VECTORS):
        ferry_refused, ferry_statuses = results[(i, "ferry")]
        go_refused, go_statuses = results[(i, "go")]
        node_refused, node_statuses = results[(i, "node")]
        summary = "ferry %s, go %s, node %s" % (ferry_statuses, go_statuses, node_statuses)
        if rule == "control":
            checks.check(not ferry_refused and not go_refused and not node_refused and
                         len(ferry_statuses) == front and all(s == 200 for s in ferry_statuses),
                         "%s: all answer %d x 200 (%s)" % (title, front, summary))
            continue
        if go_refused or node_refused:
            checks.check(ferry_refused, "%s [%s]: ferry refuses as %s does (%s)" % (
                title, rule, "go" if go_refused else "node", summary))
        else:
            print("INFO %s [%s]: neither reference refuses (%s)" % (title, rule, summary))
        checks.check(len(ferry_statuses) <= front,
                     "%s: ferry answers at most the front door's %d (%s)" % (title, front,
                                                                            summary))
    for name, (program, _) in servers.items():
        program.stop()
    return checks.exit()


if __name__ == "__main__":
    sys.exit(main())
