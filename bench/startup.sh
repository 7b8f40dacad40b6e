#!/usr/bin/env bash
# Start time of pab replay: from launching `pab replay` to the first correct HTTPS answer
# through the proxy (bench/load -mode start), cold (empty PAB_CACHE) and warm (the cache of
# the previous start kept), for the 75 MB and 500 MB bench recordings; prints the median,
# min and max of several runs per cell, the time to the proxy's address, the first
# request's own latency, and the cache's disk use after the warm start. See
# bench/README.md ("Start time").
#
#   bench/startup.sh                         75 MB and 500 MB, 7 runs per cell
#   STARTUP_SIZES=75MB STARTUP_RUNS=5 bench/startup.sh
#   STARTUP_BASE_PAB=/tmp/pab-old STARTUP_BASE_GEN=/tmp/gen-old bench/startup.sh
#
# With STARTUP_BASE_PAB (a pab binary built from an older commit) and STARTUP_BASE_GEN
# (bench/gen built from the same commit), every run also times that binary on a recording
# its own gen wrote (so in its own published format), interleaved with this tree's pab in
# the same loop, so that the ratio between the two is measured under the same load.
#
# Environment: STARTUP_DIR (scratch directory with the recordings, default
# /tmp/pab-startup; reused when bench/gen already wrote them there), STARTUP_SIZES,
# STARTUP_RUNS, STARTUP_PAB (a pab binary to time instead of building ./cmd/pab),
# STARTUP_MIGRATE=1 (run `pab recording migrate bench` on each recording first: for
# recordings written by an older pab), STARTUP_BASE_PAB, STARTUP_BASE_GEN. Raw results go
# to $STARTUP_DIR/startup.jsonl.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
S=${STARTUP_DIR:-/tmp/pab-startup}
SIZES=${STARTUP_SIZES:-"75MB 500MB"}
RUNS=${STARTUP_RUNS:-7}
BIN=$S/bin
mkdir -p "$BIN"

if [ -n "${STARTUP_PAB:-}" ]; then
  cp "$STARTUP_PAB" "$BIN/pab"
else
  (cd "$ROOT" && go build -o "$BIN/pab" ./cmd/pab)
fi
(cd "$ROOT" && go build -o "$BIN/load" ./bench/load && go build -o "$BIN/gen" ./bench/gen)
VARIANTS="new"
if [ -n "${STARTUP_BASE_PAB:-}" ]; then
  [ -n "${STARTUP_BASE_GEN:-}" ] || { echo "startup: STARTUP_BASE_PAB needs STARTUP_BASE_GEN" >&2; exit 2; }
  cp "$STARTUP_BASE_PAB" "$BIN/pab-base"
  VARIANTS="base new"
fi

# recdir VARIANT SIZE: the generated recording's directory of that variant
recdir() { if [ "$1" = base ]; then echo "$S/base-r$2"; else echo "$S/r$2"; fi; }
pabbin() { if [ "$1" = base ]; then echo "$BIN/pab-base"; else echo "$BIN/pab"; fi; }

for size in $SIZES; do
  for v in $VARIANTS; do
    R=$(recdir "$v" "$size")
    if [ ! -d "$R/repo/tasks/bench" ]; then
      echo "startup: generating the $size recording ($v)" >&2
      g=$BIN/gen
      [ "$v" = base ] && g=$STARTUP_BASE_GEN
      "$g" -out "$R" -n 20000 -size "$size" -cycle 500 >&2
      # a recording changed within the last 3 s gets no saved index yet (task/stamp.go,
      # stampRacyAge): without this wait the first run's warm starts would all be cold
      sleep 4
    fi
    if [ "$v" = new ] && [ "${STARTUP_MIGRATE:-0}" = 1 ]; then
      "$BIN/pab" --repo "$R/repo" recording migrate bench >&2
    fi
    echo "startup: $v $size recording: $(du -sb "$R/repo/tasks/bench/recording" | cut -f1) bytes" >&2
  done
done

# the CA lives in the cache by default; keep it out of the timed cache so that a cold
# start does not also make a CA
export PAB_CA_DIR=$S/ca
first=$(recdir new "${SIZES%% *}")
PAB_CACHE=$S/ca-cache "$BIN/pab" --repo "$first/repo" ca >/dev/null
CA=$(PAB_CACHE=$S/ca-cache "$BIN/pab" --repo "$first/repo" ca)

: >"$S/startup.jsonl"
: >"$S/cache-du.txt"
for rep in $(seq "$RUNS"); do
  for size in $SIZES; do
    for v in $VARIANTS; do
      R=$(recdir "$v" "$size")
      URL=$(head -1 "$R/cycle/cycle.tsv" | cut -f1)
      SHA=$(head -1 "$R/cycle/cycle.tsv" | cut -f5)
      rm -rf "$S/cache"
      for mode in cold warm; do
        "$BIN/load" -mode start -label "$v $size $mode" -rep "$rep" -ca "$CA" -url "$URL" -sha256 "$SHA" -- \
          env PAB_CACHE="$S/cache" "$(pabbin "$v")" --repo "$R/repo" replay bench --listen 127.0.0.1:0 --clock off \
          >>"$S/startup.jsonl"
      done
      echo "$v $size $(du -sb "$S/cache" 2>/dev/null | cut -f1)" >>"$S/cache-du.txt"
    done
  done
done

echo "| pab | recording | start | median s | min s | max s | to address, median s | first request, median ms | runs |"
echo "|---|---|---|---|---|---|---|---|---|"
python3 - "$S/startup.jsonl" "$S/cache-du.txt" <<'EOF'
import json, statistics, sys
by = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    by.setdefault(r["label"], []).append(r)
med = {}
for label, rs in by.items():
    v, size, mode = label.split()
    xs = [r["seconds"] for r in rs]
    ls = [r.get("listen_seconds", 0) for r in rs]
    fs = [r.get("first_request_seconds", 0) * 1000 for r in rs]
    med[(v, size, mode)] = statistics.median(xs)
    print(f"| {v} | {size} | {mode} | {statistics.median(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} | {statistics.median(ls):.3f} | {statistics.median(fs):.1f} | {len(xs)} |")
for (v, size, mode), x in sorted(med.items()):
    if v == "new" and ("base", size, mode) in med:
        print(f"\nnew ÷ base, {size} {mode}, median: {x / med[('base', size, mode)]:.2f}×", end="")
print()
du = {}
for line in open(sys.argv[2]):
    f = line.split()
    du.setdefault((f[0], f[1]), []).append(int(f[2]) if len(f) > 2 else 0)
for (v, size), xs in sorted(du.items()):
    print(f"cache after the warm start, {v} {size}: {statistics.median(xs)} bytes")
EOF
