#!/usr/bin/env bash
# Page-load time of a real task in Chromium from the launch of `pab replay`: the command
# is launched, Chromium (internal/browser's flags) is started on its proxy once it prints
# its address, and the task's start page (the first line of its recording's pages.jsonl) is
# loaded once; the number is the time from the launch to the load event (bench/pageload
# -start). Cold is an empty PAB_CACHE, warm the cache of the previous start. With
# PAGESTART_BASE_PAB (a pab binary built from an older commit), every run also times that
# binary, interleaved in the same loop, so the ratio between the two is measured under the
# same load. Results: docs/performance.md (issue 20 follow-up, "Page load from the launch").
#
#   bench/pageload/start.sh                            books-sapiens-price, 7 runs
#   PAGESTART_BASE_PAB=/tmp/pab-old PAGESTART_RUNS=9 bench/pageload/start.sh
#
# Environment: PAGESTART_DIR (scratch directory, default /tmp/pab-pagestart),
# PAGESTART_TASK (a task of this repository, default books-sapiens-price), PAGESTART_RUNS
# (7), PAGESTART_PAB (a pab binary to time instead of building ./cmd/pab),
# PAGESTART_BASE_PAB. Raw results go to $PAGESTART_DIR/pagestart.jsonl. Loopback only:
# the replay answers everything, and Chromium is given no other proxy.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$(dirname "$HERE")")
S=${PAGESTART_DIR:-/tmp/pab-pagestart}
TASK=${PAGESTART_TASK:-books-sapiens-price}
RUNS=${PAGESTART_RUNS:-7}
BIN=$S/bin
mkdir -p "$BIN"
if [ -n "${PAGESTART_PAB:-}" ]; then
  cp "$PAGESTART_PAB" "$BIN/pab"
else
  (cd "$ROOT" && go build -o "$BIN/pab" ./cmd/pab)
fi
(cd "$ROOT" && go build -o "$BIN/pageload" ./bench/pageload)
VARIANTS="new"
if [ -n "${PAGESTART_BASE_PAB:-}" ]; then
  cp "$PAGESTART_BASE_PAB" "$BIN/pab-base"
  VARIANTS="base new"
fi
pabbin() { if [ "$1" = base ]; then echo "$BIN/pab-base"; else echo "$BIN/pab"; fi; }

# a copy of the task and the sites' rules, so the runs do not depend on the working tree
rm -rf "$S/repo" && mkdir -p "$S/repo/tasks"
cp -r "$ROOT/sites" "$S/repo/sites"
cp -r "$ROOT/tasks/$TASK" "$S/repo/tasks/$TASK"
URL=$(head -1 "$S/repo/tasks/$TASK/recording/pages.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["url"])')
export PAB_CA_DIR=$S/ca
CA=$(PAB_CACHE=$S/ca-cache "$BIN/pab" --repo "$S/repo" ca)

: >"$S/pagestart.jsonl"
for rep in $(seq "$RUNS"); do
  for v in $VARIANTS; do
    rm -rf "$S/cache"
    for mode in cold warm; do
      "$BIN/pageload" -start -ca "$CA" -url "$URL" -label "$v" -mode "$mode" -rep "$rep" -- \
        env PAB_CACHE="$S/cache" "$(pabbin "$v")" --repo "$S/repo" replay "$TASK" --listen 127.0.0.1:0 --clock off \
        >>"$S/pagestart.jsonl"
    done
  done
done

echo "task $TASK, start page $URL, $RUNS runs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| pab | start | launch to load event, median ms (min–max) | address, median ms | Chromium up, median ms | page load, median ms |"
echo "|---|---|---|---|---|---|"
python3 - "$S/pagestart.jsonl" <<'PY'
import json, statistics, sys
by = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    by.setdefault((r["label"], r["mode"]), []).append(r)
med = {}
for (v, mode), rs in sorted(by.items()):
    t = [r["total_ms"] for r in rs]
    med[(v, mode)] = statistics.median(t)
    m = lambda k: statistics.median(r[k] for r in rs)
    print(f"| {v} | {mode} | {statistics.median(t):.0f} ({min(t):.0f}–{max(t):.0f}) | {m('listen_ms'):.0f} | {m('browser_ms'):.0f} | {m('load_ms'):.0f} |")
for (v, mode), x in sorted(med.items()):
    if v == "new" and ("base", mode) in med:
        print(f"\nnew ÷ base, {mode}, median: {x / med[('base', mode)]:.2f}×", end="")
print()
PY
