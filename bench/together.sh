#!/usr/bin/env bash
# Two peers under load at the same time: CPU per request of A ÷ B, each round's two runs
# sharing the same seconds of the machine (bench/README.md "Two peers at once").
#
#   TG_REPO=/tmp/pab-bench/r75MB/repo TG_TASK=bench TG_CYCLE=/tmp/pab-bench/r75MB/cycle/cycle.tsv bench/together.sh
#   TG_A=/tmp/pab-new TG_B=/tmp/pab-old TG_REPO=... TG_TASK=... TG_CYCLE=... bench/together.sh
#
# bench/vsbaseline.sh runs its peers one after the other; on a shared virtual machine one
# binary's CPU per request then moves by up to 30% from one 10 s run to the next (the host's
# other tenants), more than the differences worth measuring. Here, in each round, both
# peers are started fresh and each is loaded by its own bench/load, at the same time, with
# the same connections, scheme and cycle, for TG_DUR after TG_WARMUP; each load counts its
# own peer's CPU (-watch). Whatever the machine does in those seconds touches both. The
# two peers and two loads share the cores, so each run is slower than alone and the ratio
# is that of a machine under contention, not of vsbaseline's solo runs; use it to compare
# two builds of pab (an A/A run of one binary against a copy of itself gave 0.87–1.06 per
# round, median 1.00 over 6 rounds) and to take pab's cost apart: pab ÷ shell is what
# replay's own work costs, shell ÷ baseline what pab's MITM shell costs
# (docs/performance.md, "CPU per request against the baseline, twelfth part").
#
# A peer is "pab" (this tree's ./cmd/pab, built), the path of a pab binary, "baseline"
# (bench/baseline) or "shell" (bench/shell: pab's shell with the baseline's handler). The
# baseline and the shell serve the cycle's body files, so TG_CYCLE must name them (bench/gen's
# cycles do; bench/scale's do not). Environment: TG_A, TG_B (default pab and baseline),
# TG_REPO, TG_TASK, TG_CYCLE (required), TG_ROUNDS (default 6), TG_CONNS (default 64),
# TG_SCHEMES (default "https http"), TG_DUR (default 8s), TG_WARMUP (default 2s), TG_DIR
# (scratch, default /tmp/pab-together). Raw results: $TG_DIR/results.jsonl.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
. "$HERE/lib.sh"
S=${TG_DIR:-/tmp/pab-together}
: "${TG_REPO:?TG_REPO: the task repository}" "${TG_TASK:?TG_TASK: the task id}" "${TG_CYCLE:?TG_CYCLE: the cycle file}"
A=${TG_A:-pab}
B=${TG_B:-baseline}
ROUNDS=${TG_ROUNDS:-6}
CONNS=${TG_CONNS:-64}
SCHEMES=${TG_SCHEMES:-"https http"}
DUR=${TG_DUR:-8s}
WARM=${TG_WARMUP:-2s}
BIN=$S/bin
mkdir -p "$BIN"
log() { echo "together: $*" >&2; }

if [ "$(head -1 "$TG_CYCLE" | cut -f4)" = "-" ]; then
  for p in "$A" "$B"; do
    case $p in baseline | shell) log "$TG_CYCLE has no body files for $p (bench/scale's cycles: use bench/vsbaseline.sh)"; exit 1 ;; esac
  done
fi
(cd "$ROOT" && go build -o "$BIN/load" ./bench/load && go build -o "$BIN/baseline" ./bench/baseline &&
  go build -o "$BIN/shell" ./bench/shell)
# peer_bin PEER: the binary a pab peer runs
peer_bin() {
  case $1 in
  pab)
    [ -x "$BIN/pab" ] || (cd "$ROOT" && go build -o "$BIN/pab" ./cmd/pab)
    echo "$BIN/pab"
    ;;
  *) realpath "$1" ;;
  esac
}
for p in "$A" "$B"; do
  case $p in
  pab | baseline | shell) ;;
  *) [ -x "$p" ] || { log "$p: not a peer (pab, baseline, shell or the path of a pab binary)"; exit 1; } ;;
  esac
done
rm -f "$BIN/pab"
case $A in baseline | shell) ;; *) ABIN=$(peer_bin "$A") ;; esac
case $B in baseline | shell) ;; *) BBIN=$(peer_bin "$B") ;; esac

CACHE=$S/cache # the CA every peer signs with
mkdir -p "$CACHE"
PAB_CACHE=$CACHE "${ABIN:-${BBIN:-$(peer_bin pab)}}" --repo "$TG_REPO" ca >/dev/null
CA=$CACHE/ca/ca.pem
# Each pab peer has a cache of its own, holding that CA: a saved index is kept per recording
# for one pab executable, so two builds (or a binary and its copy) sharing a cache would each
# find the other's and compute it again at every start (docs/replay.md "The saved index").
for side in a b; do
  rm -rf "$S/cache-$side"
  mkdir -p "$S/cache-$side"
  cp -r "$CACHE/ca" "$S/cache-$side/ca"
done
# the saved index written whole, so that no timed run pays for it
if [ -n "${ABIN:-}" ]; then
  PAB_CACHE=$S/cache-a "$ABIN" --repo "$TG_REPO" inspect "$TG_TASK" "$(head -1 "$TG_CYCLE" | cut -f1)" >/dev/null
fi
if [ -n "${BBIN:-}" ]; then
  PAB_CACHE=$S/cache-b "$BBIN" --repo "$TG_REPO" inspect "$TG_TASK" "$(head -1 "$TG_CYCLE" | cut -f1)" >/dev/null
fi
OUT=$S/results.jsonl
: >"$OUT"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# start SIDE PEER BIN: starts the peer; sets PEER_PID and PEER_ADDR
start() {
  local err=$S/$1.err
  rm -f "$err"
  case $2 in
  baseline | shell) "$BIN/$2" -listen 127.0.0.1:0 -ca-dir "$CACHE/ca" -cycle "$TG_CYCLE" 2>"$err" & ;;
  *) PAB_CACHE=$S/cache-$1 "$3" --repo "$TG_REPO" replay "$TG_TASK" --listen 127.0.0.1:0 --clock off --log /dev/null 2>"$err" & ;;
  esac
  PEER_PID=$!
  PIDS+=("$PEER_PID")
  PEER_ADDR=$(peer_addr "$err" "$PEER_PID") && return 0
  log "$2 did not start:"
  cat "$err" >&2
  exit 1
}

for round in $(seq "$ROUNDS"); do
  for conns in $CONNS; do
    for scheme in $SCHEMES; do
      log "round $round: $A and $B, $scheme, $conns connections each"
      start a "$A" "${ABIN:-}"
      apid=$PEER_PID aaddr=$PEER_ADDR
      start b "$B" "${BBIN:-}"
      bpid=$PEER_PID baddr=$PEER_ADDR
      "$BIN/load" -label a -rep "$round" -proxy "$aaddr" -ca "$CA" -cycle "$TG_CYCLE" -scheme "$scheme" \
        -c "$conns" -d "$DUR" -warmup "$WARM" -watch "$apid" >"$S/a.json" &
      la=$!
      "$BIN/load" -label b -rep "$round" -proxy "$baddr" -ca "$CA" -cycle "$TG_CYCLE" -scheme "$scheme" \
        -c "$conns" -d "$DUR" -warmup "$WARM" -watch "$bpid" >"$S/b.json" &
      lb=$!
      wait "$la" "$lb" || log "round $round: a load failed"
      kill "$apid" "$bpid" 2>/dev/null || true
      wait "$apid" "$bpid" 2>/dev/null || true
      PIDS=()
      for side in a b; do
        [ -s "$S/$side.json" ] && { tr -d '\n' <"$S/$side.json"; echo; } >>"$OUT"
      done
    done
  done
done

python3 - "$OUT" "$A" "$B" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
a, b = sys.argv[2], sys.argv[3]
print(f"A = {a}, B = {b}: both loaded at the same time; median (min–max) over the rounds")
print()
print("| connections | scheme | CPU/req A ÷ B | rps A ÷ B | A CPU ms/req | B CPU ms/req | rounds | bad answers |")
print("|---|---|---|---|---|---|---|---|")
keys = sorted({(r["conns"], r["scheme"]) for r in rows}, key=lambda k: (k[0], k[1] != "https"))
for conns, scheme in keys:
    cpu, rps, ac, bc, bad = [], [], [], [], 0
    for rep in sorted({r["rep"] for r in rows}):
        x = [r for r in rows if r["label"] == "a" and r["rep"] == rep and (r["conns"], r["scheme"]) == (conns, scheme)]
        y = [r for r in rows if r["label"] == "b" and r["rep"] == rep and (r["conns"], r["scheme"]) == (conns, scheme)]
        if not x or not y or not x[0].get("requests") or not y[0].get("requests"):
            continue
        x, y = x[0], y[0]
        bad += x["errors"] + x["mismatches"] + y["errors"] + y["mismatches"]
        cpu.append(x["cpu_ms_per_req"] / y["cpu_ms_per_req"]); rps.append(x["rps"] / y["rps"])
        ac.append(x["cpu_ms_per_req"]); bc.append(y["cpu_ms_per_req"])
    if not cpu:
        continue
    f = lambda xs: f"{statistics.median(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"
    print(f"| {conns} | {scheme} | {f(cpu)} | {f(rps)} | {statistics.median(ac):.4f} | {statistics.median(bc):.4f} | {len(cpu)} | {bad} |")
EOF
