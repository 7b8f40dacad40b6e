#!/usr/bin/python3
"""Build a mitmproxy flow file from bench/gen's cycle.tsv, with mitmproxy's own modules.

    mkflows.py CYCLE_DIR OUT.flows

Every exchange of the cycle is written twice, as https and as http (mitmproxy's server
replay matches on scheme, host, port, path and query), with the same status, Content-Type
and body bytes that pab serves from the recording.
"""
import os
import sys
import time

from mitmproxy import http, io


def main():
    cycle_dir, out = sys.argv[1], sys.argv[2]
    now = time.time()
    n = 0
    with open(os.path.join(cycle_dir, "cycle.tsv")) as f, open(out, "wb") as fo:
        w = io.FlowWriter(fo)
        for line in f:
            url, status, ctype, rel, _sha, size = line.rstrip("\n").split("\t")
            with open(os.path.join(cycle_dir, rel), "rb") as bf:
                body = bf.read()
            if len(body) != int(size):
                sys.exit(f"{rel}: {len(body)} bytes, cycle.tsv says {size}")
            for scheme in ("https", "http"):
                u = scheme + "://" + url.split("://", 1)[1]
                req = http.Request.make("GET", u)
                req.timestamp_start = req.timestamp_end = now
                resp = http.Response.make(int(status), body, {"Content-Type": ctype, "Cache-Control": "max-age=3600"})
                resp.timestamp_start = resp.timestamp_end = now
                flow = http.HTTPFlow(None, None)
                flow.request, flow.response = req, resp
                w.add(flow)
                n += 1
    print(f"mkflows: {n} flows in {out}")


if __name__ == "__main__":
    main()
