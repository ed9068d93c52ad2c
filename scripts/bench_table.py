#!/usr/bin/env python3
"""scripts/bench_table.py: turns codec_bench's google-benchmark JSON into a markdown table, one row
per (operation, body size): each implementation's median time, ferry's ratios to the baselines, its
throughput and its allocations per operation. Python 3.11 standard library only.

Usage: python3 scripts/bench_table.py results.json [--time real|cpu]
"""

import argparse
import json
import re
import statistics
import sys

KNOWN_IMPLS = ["ferry", "naive", "grpcpp", "prealloc", "memcpy"]
OPS = ["Encode", "Decode"]
NAME_RE = re.compile(r"^(?P<op>[^/]+)/(?P<impl>[^/]+)/(?P<size>\d+)$")
NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load_runs(path, time_key):
    """Returns {run name: {"ns": median time, "bps": bytes/s, "allocs": allocs_per_op}}.

    Prefers the _median aggregates; a file written without repetitions has none, and then the
    median is taken over whatever plain runs there are, so the script works on any run.
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    medians, plain = {}, {}
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            continue
        name = b.get("run_name") or re.sub(r"_(mean|median|stddev|cv)$", "", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
        else:
            plain.setdefault(name, []).append(b)
    return {name: summarize(medians.get(name), plain.get(name, []), time_key)
            for name in medians.keys() | plain.keys()}


def summarize(median, runs, time_key):
    def get(b, key, scale=1.0):
        v = b.get(key)
        return None if v is None else float(v) * scale

    if median is not None:
        unit = NS_PER_UNIT[median.get("time_unit", "ns")]
        return {"ns": get(median, time_key, unit), "bps": get(median, "bytes_per_second"),
                "allocs": get(median, "allocs_per_op")}

    def med(key, unit_aware=False):
        vals = [get(b, key, NS_PER_UNIT[b.get("time_unit", "ns")] if unit_aware else 1.0)
                for b in runs]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    return {"ns": med(time_key, True), "bps": med("bytes_per_second"), "allocs": med("allocs_per_op")}


def fmt_size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def fmt_ns(ns):
    if ns is None:
        return "—"
    if ns >= 100:
        return f"{ns:,.0f}"
    return f"{ns:.1f}"


def fmt_ratio(num, den):
    if num is None or den is None or den == 0:
        return "—"
    return f"{num / den:.2f}×"


def fmt_num(v, digits):
    return "—" if v is None else f"{v:.{digits}f}"


def main(args):
    runs = load_runs(args.results, args.time + "_time")
    table = {}  # (op, size) -> {impl: summary}
    impls_seen = set()
    for name, summary in runs.items():
        m = NAME_RE.match(name)
        if not m:
            continue
        table.setdefault((m["op"], int(m["size"])), {})[m["impl"]] = summary
        impls_seen.add(m["impl"])
    if not table:
        sys.exit(f"{args.results}: no benchmarks named <op>/<impl>/<bytes>")

    impls = [i for i in KNOWN_IMPLS if i in impls_seen] + sorted(impls_seen - set(KNOWN_IMPLS))
    header = (["op", "body"] + [f"{i} ns" for i in impls] +
              ["ferry/prealloc", "ferry/memcpy", "naive/ferry", "grpcpp/ferry", "ferry GB/s",
               "ferry allocs/op"])
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---", "---:"] + ["---:"] * (len(header) - 2)) + "|")

    op_order = {op: i for i, op in enumerate(OPS)}
    for op, size in sorted(table, key=lambda k: (op_order.get(k[0], len(OPS)), k[0], k[1])):
        row = table[(op, size)]
        ns = {i: row[i]["ns"] if i in row else None for i in impls}
        ferry = row.get("ferry", {})
        bps = ferry.get("bps")
        cells = ([op, fmt_size(size)] + [fmt_ns(ns[i]) for i in impls] +
                 [fmt_ratio(ns.get("ferry"), ns.get("prealloc")),
                  fmt_ratio(ns.get("ferry"), ns.get("memcpy")),
                  fmt_ratio(ns.get("naive"), ns.get("ferry")),
                  fmt_ratio(ns.get("grpcpp"), ns.get("ferry")),
                  fmt_num(None if bps is None else bps / 1e9, 2),
                  fmt_num(ferry.get("allocs"), 2)])
        print("| " + " | ".join(cells) + " |")
    print(f"\nMedian {args.time} time per operation in ns; ratios above 1× in naive/ferry and "
          "grpcpp/ferry mean ferry is faster. GB/s is 10^9 wire bytes (prefix + payload) a second.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="google-benchmark JSON output")
    parser.add_argument("--time", choices=["real", "cpu"], default="real",
                        help="which time to report (default: real)")
    main(parser.parse_args())
