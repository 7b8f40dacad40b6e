#!/usr/bin/python3
"""Percentiles of pab's own handling time from its replay log (bench/README.md).

    logstats.py LOG LABEL REP

Each line of `pab replay --log` has "ms": the time from the request reaching the proxy's
handler to its answer being ready (reading the request body and the lookup; not TLS, not
sending). Prints one JSON record (kind "handler") with the count and p50/p99/p99.9 in ms.
"""
import json
import sys


def main():
    path, label, rep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ms = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                ms.append(float(json.loads(line)["ms"]))
    ms.sort()

    def pct(q):
        if not ms:
            return 0.0
        i = max(0, min(len(ms) - 1, int(q * len(ms) + 0.5) - 1))
        return ms[i]

    print(json.dumps({"kind": "handler", "label": label, "rep": rep, "requests": len(ms),
                      "p50_ms": pct(0.50), "p99_ms": pct(0.99), "p999_ms": pct(0.999)}))


if __name__ == "__main__":
    main()
