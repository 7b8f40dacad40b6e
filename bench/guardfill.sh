#!/usr/bin/env bash
# Cost of pab guard's enforcement: the wall time of one normal fill-to-review run of
# tasks/apply-greenhouse-axon through `pab guard` (bench/guardfill: start pab guard,
# navigate, fill the 13 grounded fields, ready_for_review, close, until pab guard exits),
# with pab built at this tree ("new") and at a base commit ("base"), interleaved base, new,
# base, new, ... Prints the median of each and the ratio new/base. See bench/README.md
# ("pab guard: fill-to-review wall time").
#
#   bench/guardfill.sh                   base 5c4216f, 5 runs each
#   BASE=HEAD~3 RUNS=9 bench/guardfill.sh
#
# Environment: BASE (commit, default 5c4216f), RUNS (timed runs per build, default 5),
# WARMUP (untimed runs per build first, default 1: Chromium's, node's and the task's first
# start), UPLOADS=1 (also attach the resume and cover letter before ready_for_review),
# KEEP=DIR (keep every run's JSON report, trace, result and guard stderr there; by default
# they go with the temporary directory).
#
# Both builds run against this tree's tasks/ and tools/playwright-mcp (npm ci there first),
# with Debian's chromium, each invocation of bench/guardfill with its own
# `pab replay apply-greenhouse-axon --listen 127.0.0.1:0` (started by the same binary, not
# timed). Loopback only. PAB_CACHE is a temporary directory; the base tree is a
# `git worktree` in a temporary directory, removed at the end; nothing is written to the
# repository.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BASE=${BASE:-5c4216f}
RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
UPLOADS=${UPLOADS:-0}

cd "$ROOT"
if [ ! -f tools/playwright-mcp/node_modules/@playwright/mcp/cli.js ]; then
	echo "guardfill.sh: @playwright/mcp missing: npm ci --prefix tools/playwright-mcp" >&2
	exit 1
fi
command -v chromium >/dev/null || { echo "guardfill.sh: Debian's chromium not on PATH" >&2; exit 1; }

W=$(mktemp -d /tmp/pab-guardfill.XXXXXX)
WT="$W/base-tree"
cleanup() {
	if [ -d "$WT" ]; then git -C "$ROOT" worktree remove --force "$WT" || true; fi
	git -C "$ROOT" worktree prune || true
	rm -rf "$W"
}
trap cleanup EXIT

base_rev=$(git rev-parse --short "$BASE^{commit}")
new_rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo '+changes')"
echo "building pab: base $base_rev, new $new_rev (this tree)"
git worktree add --detach --quiet "$WT" "$base_rev"
(cd "$WT" && go build -o "$W/pab-base" ./cmd/pab)
git worktree remove --force "$WT"
go build -o "$W/pab-new" ./cmd/pab
go build -o "$W/guardfill" ./bench/guardfill

export PAB_CACHE="$W/cache"
OUT=${KEEP:-$W/out}
mkdir -p "$OUT/base" "$OUT/new"
extra=()
[ "$UPLOADS" = 1 ] && extra+=(-uploads)

# one: LABEL N [TIMED]: one run of pab-LABEL; a timed run's report goes to $OUT/LABEL/N.json
one() {
	local label=$1 n=$2 timed=${3:-}
	local dir="$OUT/runs/$label-$n" json=/dev/null
	[ -n "$timed" ] && json="$OUT/$label/$n.json"
	if ! "$W/guardfill" -pab "$W/pab-$label" -repo "$ROOT" -runs 1 -keep "$dir" -json "$json" "${extra[@]}" >"$dir.out" 2>&1; then
		mkdir -p "$dir"
		echo "guardfill.sh: $label run $n failed:" >&2
		cat "$dir.out" >&2
		exit 1
	fi
	if [ -n "$timed" ]; then
		printf '%-4s %s\n' "$label" "$(grep -m1 '^run 1:' "$dir.out" | sed "s/^run 1/run $n/")"
	fi
}

mkdir -p "$OUT/runs"
echo "uptime: $(uptime)"
for i in $(seq 1 "$WARMUP"); do
	one base "warmup$i"
	one new "warmup$i"
done
for i in $(seq 1 "$RUNS"); do
	one base "$i" timed
	one new "$i" timed
done
echo "uptime: $(uptime)"
echo
"$W/guardfill" -summary "base=$OUT/base" "new=$OUT/new"
[ -n "${KEEP:-}" ] && echo "reports, traces and results kept in $KEEP"
exit 0
