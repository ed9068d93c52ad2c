#!/usr/bin/env python3
"""The route_guide example (examples/route_guide): its client's four calls against its server.

    route_guide_test.py --server PATH/route_guide_server --client PATH/route_guide_client

Runs the client twice against one server and checks each call kind's results: the features
found or not, the features listed in the rectangle, the route's summary (points, features and
the haversine distance, computed here independently), the notes RouteChat returns (the second
client also gets the first one's, as the server keeps them across calls), exit statuses, and the
server's clean exit on SIGTERM.
"""

import argparse
import math

from example_programs import Checks, run, start_server

# The route the client records: every built-in feature in order, then a point with none.
ROUTE = [(407838351, -746143763), (408122808, -743999179), (413628156, -749015468),
         (419999544, -740371136), (414008389, -743951297), (419611318, -746524769),
         (409146138, -746188906), (406109563, -742186778), (412950425, -741077389),
         (416802456, -742370183), (410000000, -740000000)]


def haversine(a, b):
    lat1, lat2 = math.radians(a[0] / 1e7), math.radians(b[0] / 1e7)
    dlat, dlon = lat2 - lat1, math.radians((b[1] - a[1]) / 1e7)
    h = math.sin(dlat / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin(dlon / 2) ** 2
    return 6371000 * 2 * math.atan2(math.sqrt(h), math.sqrt(1 - h))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    args = parser.parse_args()
    checks = Checks()

    server, port = start_server("route_guide_server", [args.server, "--port=0", "--threads=2"])
    if not checks.check(port is not None, "the server reported its port"):
        checks.exit()
    target = "--target=127.0.0.1:%d" % port
    distance = int(sum(haversine(ROUTE[i], ROUTE[i + 1]) for i in range(len(ROUTE) - 1)))

    first = run("route_guide_client (1st)", [args.client, target])
    checks.check(first.proc.returncode == 0, "the first client exited 0")
    for line in [
            'GetFeature: "Berkshire Valley Management Area Trail, Jefferson, NJ, USA" at '
            '40.9146, -74.6189',
            "GetFeature: no feature at 0.0000, 0.0000",
            'ListFeatures: "U.S. 6, Shohola, PA 18458, USA" at 41.3628, -74.9015',
            'ListFeatures: "352 South Mountain Road, Wallkill, NY 12589, USA" at 41.6802, -74.2370',
            "ListFeatures: 6 features",
            "RecordRoute: sent 11 points",
            'RouteChat: sent "Fourth message" at 0.0000, 0.0000',
            'RouteChat: got "First message" at 0.0000, 0.0000',
            "RouteChat: 1 notes received",
            "route_guide_client: 4 calls OK"]:
        checks.has_line(first, line)
    listed = [l for l in first.lines() if l.startswith('ListFeatures: "')]
    checks.check(len(listed) == 6, "6 features listed (got %d)" % len(listed))
    summary = [l for l in first.lines() if l.startswith("RecordRoute: 11 points, 10 features, ")]
    checks.check(len(summary) == 1 and (" %d meters," % distance) in summary[0],
                 "RecordRoute's summary: 11 points, 10 features, %d meters (got %s)"
                 % (distance, summary))

    # The first client left "First" and "Fourth" at (0, 0) and one note at each other point, so
    # at (0, 0) the second one's "First" gets those two and its "Fourth" those and its "First".
    second = run("route_guide_client (2nd)", [args.client, target])
    checks.check(second.proc.returncode == 0, "the second client exited 0")
    got = [l for l in second.lines() if l.startswith("RouteChat: got ")]
    checks.check(got.count('RouteChat: got "First message" at 0.0000, 0.0000') == 3 and
                 got.count('RouteChat: got "Fourth message" at 0.0000, 0.0000') == 2 and
                 got.count('RouteChat: got "Second message" at 0.0000, 1.0000') == 1 and
                 got.count('RouteChat: got "Third message" at 1.0000, 0.0000') == 1,
                 "the second RouteChat got the first one's notes at its points (got %s)" % got)
    checks.has_line(second, "RouteChat: 7 notes received")

    checks.check(server.stop() == 0, "the server exited 0 on SIGTERM")
    checks.has_line(server, "route_guide_server: stopped")
    checks.exit()


if __name__ == "__main__":
    main()
