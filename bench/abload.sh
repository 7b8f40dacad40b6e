#!/usr/bin/env bash
# Throughput, latency, CPU per request and peak RSS of two pab binaries serving the same
# bench recording through HTTPS with 16 connections (bench/load), interleaved in one loop
# so that their ratio is measured under the same load: "base" (an older pab, on the
# recording its own bench/gen wrote) and "new" (this tree's pab). Each run starts the proxy
# warm (a first start fills the cache), serves the URL cycle for AB_DURATION after a warmup,
# and stops it. See bench/README.md ("Files").
#
#   STARTUP_BASE_PAB=/tmp/pab-old STARTUP_BASE_GEN=/tmp/gen-old bench/abload.sh
#
# Environment: STARTUP_DIR (the recordings of bench/startup.sh, default /tmp/pab-startup:
# r75MB for new, base-r75MB for base; run bench/startup.sh first), AB_SIZE (75MB),
# AB_RUNS (5), AB_DURATION (10s), AB_CONNS (16), AB_PROFILE=1 (also write a CPU profile of
# each new run, PAB_CPUPROFILE, to $STARTUP_DIR/ab-new-N.prof). Raw results go to
# $STARTUP_DIR/abload.jsonl.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
S=${STARTUP_DIR:-/tmp/pab-startup}
SIZE=${AB_SIZE:-75MB}
RUNS=${AB_RUNS:-5}
DUR=${AB_DURATION:-10s}
CONNS=${AB_CONNS:-16}
BIN=$S/bin
[ -x "$BIN/pab" ] && [ -x "$BIN/load" ] || { echo "abload: run bench/startup.sh first (it builds $BIN/pab and $BIN/load)" >&2; exit 2; }
VARIANTS="new"
[ -x "$BIN/pab-base" ] && VARIANTS="base new"
export PAB_CA_DIR=$S/ca
CA=$(PAB_CACHE=$S/ca-cache "$BIN/pab" --repo "$S/r$SIZE/repo" ca)
PORT=18090

: >"$S/abload.jsonl"
for rep in $(seq "$RUNS"); do
  for v in $VARIANTS; do
    R=$S/r$SIZE
    P=$BIN/pab
    if [ "$v" = base ]; then R=$S/base-r$SIZE; P=$BIN/pab-base; fi
    prof=()
    if [ "$v" = new ] && [ "${AB_PROFILE:-0}" = 1 ]; then prof=(PAB_CPUPROFILE="$S/ab-new-$rep.prof"); fi
    : >"$S/ab-$v.err" # emptied before the launch: the wait below must not see the last run's line
    env PAB_CACHE="$S/ab-cache-$v" ${prof[@]+"${prof[@]}"} "$P" --repo "$R/repo" replay bench \
      --listen 127.0.0.1:$PORT --clock off 2>"$S/ab-$v.err" &
    pid=$!
    for _ in $(seq 600); do
      grep -q "on http://" "$S/ab-$v.err" 2>/dev/null && break
      sleep 0.1
    done
    "$BIN/load" -proxy 127.0.0.1:$PORT -ca "$CA" -cycle "$R/cycle/cycle.tsv" -c "$CONNS" -d "$DUR" \
      -label "$v" -rep "$rep" -watch "$pid" >>"$S/abload.jsonl"
    kill -INT "$pid"
    wait "$pid" || true
  done
done

python3 - "$S/abload.jsonl" <<'EOF'
import json, statistics, sys
by = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    by.setdefault(r["label"], []).append(r)
print("| pab | runs | rps, median | p50 ms | p99 ms | CPU ms per request | peak RSS MB, median | errors |")
print("|---|---|---|---|---|---|---|---|")
med = {}
for v, rs in by.items():
    m = {k: statistics.median(r.get(k, 0) for r in rs) for k in ("rps", "p50_ms", "p99_ms", "cpu_ms_per_req", "peak_rss_mb")}
    med[v] = m
    errs = sum(r["errors"] + r["mismatches"] for r in rs)
    print(f"| {v} | {len(rs)} | {m['rps']:.0f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | {m['cpu_ms_per_req']:.3f} | {m['peak_rss_mb']:.0f} | {errs} |")
if "base" in med and "new" in med:
    for k in ("rps", "cpu_ms_per_req", "peak_rss_mb"):
        print(f"new ÷ base, {k}: {med['new'][k] / med['base'][k]:.2f}×")
EOF
