#!/usr/bin/env python3
"""pprofsum.py: where pab replay's CPU per request goes (bench/README.md "Profile").

    go tool pprof -traces PAB_BINARY PROFILE | pprofsum.py REQUESTS

Reads the sample stacks that `go tool pprof -traces` prints and sorts every sample into
one category by the first rule (top to bottom) that matches a frame of its stack, so the
categories add up to the whole profile. REQUESTS is how many requests the profiled load
answered; the table gives microseconds of CPU per request and the share of each category.
Writes a Markdown table to standard output.
"""
import re
import sys

# (category, regular expression matched against any frame of the stack), first match wins.
RULES = [
    ("start-up (open the bundle, build the index)", r"^main\.openServing|^main\.openSession|replay\.NewIndex"),
    ("log writer (batched writes of replay.jsonl)", r"replay\.\(\*logWriter\)\.run"),
    ("TLS handshakes", r"crypto/tls\.\(\*Conn\)\.(serverHandshake|HandshakeContext)|mitm\.\(\*Server\)\.tunnel"),
    ("TLS encryption and socket writes", r"crypto/tls\.\(\*Conn\)\.Write"),
    ("TLS decryption and socket reads", r"crypto/tls\.\(\*Conn\)\.Read"),
    ("replay: payload read from the WARC (pread)", r"replay\.\(\*headCache\)\.smallBody|io\.\(\*SectionReader\)\.Read"),
    ("replay: lookup (key, route, exact/search/fuzzy)", r"replay\.\(\*Index\)\.lookup"),
    ("replay: log line (encode, tail ring)", r"replay\.\(\*Server\)\.finish"),
    ("garbage collection", r"runtime\.gcBgMarkWorker|runtime\.gcDrain|runtime\.gcAssist"),
]
# The rest goes by the innermost frame of pab's own code or of net/http (bufio and
# textproto count as net/http's): the rest of the handler is pab's (URL normalization,
# request type, body, answer), what net/http does around it (request parsing, response
# head and framing, keep-alive) is net/http's, and the baseline does that too.
PAB = ("replay: rest of the handler (URL, request type, body, answer)", r"^github\.com/pab-dev/pab/")
NETHTTP = ("net/http: request parsing, response head and framing, keep-alive", r"^net/http\.|^bufio\.|^net/textproto\.")
RUNTIME = "scheduler, network poller, other runtime"
OTHER = "other"


def parse(lines):
    """Yields (milliseconds, [frames]) for each sample stack."""
    value, frames = None, []
    for line in lines:
        if line.startswith("-----------+"):
            if value is not None:
                yield value, frames
            value, frames = None, []
            continue
        if value is None:
            m = re.match(r"\s*([0-9.]+)(ms|s|us|µs|ns)\s+(\S.*)$", line)
            if not m:
                continue
            n, unit = float(m.group(1)), m.group(2)
            value = n * {"s": 1000, "ms": 1, "us": 0.001, "µs": 0.001, "ns": 1e-6}[unit]
            frames = [m.group(3).strip()]
        else:
            f = line.strip()
            if f:
                frames.append(f)
    if value is not None:
        yield value, frames


def main():
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    totals = {}
    for ms, frames in parse(sys.stdin):
        cat = None
        for name, rx in RULES:
            r = re.compile(rx)
            if any(r.search(f) for f in frames):
                cat = name
                break
        if cat is None:
            for f in frames:  # leaf first
                if re.search(PAB[1], f):
                    cat = PAB[0]
                    break
                if re.search(NETHTTP[1], f):
                    cat = NETHTTP[0]
                    break
        if cat is None:
            cat = RUNTIME if frames and re.match(r"runtime\.|internal/", frames[0]) else OTHER
        totals[cat] = totals.get(cat, 0) + ms
    all_ms = sum(totals.values())
    serving = all_ms - totals.get(RULES[0][0], 0)
    print("| where the CPU goes | CPU ms | share of serving | µs per request |")
    print("|---|---|---|---|")
    order = [name for name, _ in RULES] + [PAB[0], NETHTTP[0], RUNTIME, OTHER]
    for name in order:
        ms = totals.get(name, 0)
        if ms == 0:
            continue
        share = "" if name == RULES[0][0] or serving == 0 else "%.1f%%" % (100 * ms / serving)
        per = "" if name == RULES[0][0] or not requests else "%.2f" % (1000 * ms / requests)
        print("| %s | %.0f | %s | %s |" % (name, ms, share, per))
    if requests:
        print("| **serving, in all** | %.0f | 100%% | **%.2f** |" % (serving, 1000 * serving / requests))


if __name__ == "__main__":
    main()
