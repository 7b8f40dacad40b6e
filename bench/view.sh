#!/usr/bin/env bash
# Cost of recording the run view (issue 30): pab run --browser --mcp of archive-org-jobs by
# the scripted MCP agent (cmd/pab/testdata/stepagent: 10 browser_navigate calls over
# recorded pages), with the view recorded (steps.jsonl, a CDP screenshot per step,
# view.html) and with --view=false, interleaved in the same loop so both see the same
# load. Prints, per variant, the median, min and max of the agent's time (run.json
# duration_ms: the tool calls, each waiting for its step's screenshot) and of the whole
# pab run (replay, Chromium and @playwright/mcp start, grading, view.html), and the ratios
# of the medians. See docs/performance.md ("Recording the run view").
#
#   bench/view.sh                 7 pairs
#   VIEW_RUNS=3 bench/view.sh
#
# Needs chromium, node and tools/playwright-mcp (npm ci --prefix tools/playwright-mcp).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
RUNS=${VIEW_RUNS:-7}
S=$(mktemp -d /tmp/pab-viewbench.XXXXXX)
trap 'rm -rf "$S"' EXIT
(cd "$ROOT" && go build -o "$S/pab" ./cmd/pab && cd cmd/pab && go build -o "$S/stepagent" ./testdata/stepagent)
pages="index.php about/about.php details/texts about/jobs.php details/movies about/credits.php details/audio about/faqs.php details/software about/contributors.php"
STEPAGENT_PLAN=""
for p in $pages; do
  STEPAGENT_PLAN+="browser_navigate {\"url\":\"http://www.archive.org/$p\"}"$'\n'
done
export STEPAGENT_PLAN
export STEPAGENT_ANSWER="$(cat "$ROOT/docs/examples/archive-org-jobs/right/answer.txt")"
export PAB_CACHE=$S/cache
: > "$S/results.tsv"
for i in $(seq 1 "$RUNS"); do
  for variant in view noview; do
    flag=--view=true
    [ "$variant" = noview ] && flag=--view=false
    out=$S/$variant-$i
    t0=$(date +%s%N)
    (cd "$ROOT" && "$S/pab" run --out "$out" --browser --mcp "$flag" --proxy-env=false --timeout 3m \
      --agent "$S/stepagent" --judge cli --judge-cmd docs/examples/judge.sh archive-org-jobs >/dev/null)
    t1=$(date +%s%N)
    agent=$(sed -n 's/.*"duration_ms": *\([0-9]*\).*/\1/p' "$out/archive-org-jobs/1/run.json" | head -1)
    status=$(sed -n 's/.*"status": *"\([a-z_]*\)".*/\1/p' "$out/archive-org-jobs/1/run.json" | head -1)
    steps=0; [ -f "$out/archive-org-jobs/1/steps.jsonl" ] && steps=$(wc -l < "$out/archive-org-jobs/1/steps.jsonl")
    view=0; [ -f "$out/archive-org-jobs/1/view.html" ] && view=$(stat -c %s "$out/archive-org-jobs/1/view.html")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$variant" "$agent" "$(( (t1 - t0) / 1000000 ))" "$status" "$steps" "$view" >> "$S/results.tsv"
  done
done
python3 - "$S/results.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
by = {}
for v, agent, wall, status, steps, view in rows:
    by.setdefault(v, []).append((int(agent), int(wall), status, int(steps), int(view)))
med = {}
for v in ("view", "noview"):
    rs = by[v]
    a = [r[0] for r in rs]; w = [r[1] for r in rs]
    med[v] = (statistics.median(a), statistics.median(w))
    print(f"{v:7s} runs {len(rs)}  agent ms median {statistics.median(a):.0f} (min {min(a)}, max {max(a)})  "
          f"pab run ms median {statistics.median(w):.0f} (min {min(w)}, max {max(w)})  "
          f"statuses {sorted(set(r[2] for r in rs))}  steps {sorted(set(r[3] for r in rs))}  view bytes max {max(r[4] for r in rs)}")
print(f"ratio view/noview: agent time {med['view'][0] / med['noview'][0]:.2f}, whole pab run {med['view'][1] / med['noview'][1]:.2f}")
PY
