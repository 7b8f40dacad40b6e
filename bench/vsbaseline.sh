#!/usr/bin/env bash
# pab replay against the minimal Go MITM baseline (bench/baseline) only, interleaved, on any
# task's recording: the "within 1.05x of the baseline" check of docs/performance.md ("Against
# the baseline at scale"). For each round, for each number of connections and each scheme
# (HTTPS keep-alive through CONNECT, plain HTTP), pab and the baseline are each started
# fresh, loaded by bench/load for VB_DUR after VB_WARMUP, and stopped; the order of the two
# alternates from round to round. The table gives, per setting, the median over the rounds of
# pab ÷ baseline for CPU per request and for requests per second (each round's ratio is of
# two runs next to each other, so a load change on the machine touches both).
#
#   VB_REPO=/tmp/pab-bench/r75MB/repo VB_TASK=bench VB_CYCLE=/tmp/pab-bench/r75MB/cycle/cycle.tsv bench/vsbaseline.sh
#   VB_REPO=/tmp/pab-scale/small-100000/repo VB_TASK=scale VB_CYCLE=/tmp/pab-scale/small-100000/cycle.tsv bench/vsbaseline.sh
#
# The cycle is bench/load's cycle format (url, status, content type, body file, sha256 hex,
# size). The baseline serves the body files; a cycle whose body column is "-" (bench/scale's)
# has its bodies fetched once through pab replay first, each checked against its SHA-256,
# into $VB_DIR/bodies, with a cycle naming them.
#
# Environment: VB_DIR (scratch, default /tmp/pab-vsbaseline), VB_REPO, VB_TASK, VB_CYCLE
# (required), VB_ROUNDS (default 3), VB_CONNS (default "16 64"), VB_DUR (default 10s),
# VB_WARMUP (default 2s), VB_PAB (a pab binary instead of building ./cmd/pab), VB_LABEL
# (names the recording in the table). Raw results: $VB_DIR/results.jsonl; the load average
# before and after each run is recorded with it.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
. "$HERE/lib.sh"
S=${VB_DIR:-/tmp/pab-vsbaseline}
: "${VB_REPO:?VB_REPO: the task repository}" "${VB_TASK:?VB_TASK: the task id}" "${VB_CYCLE:?VB_CYCLE: the cycle file}"
ROUNDS=${VB_ROUNDS:-3}
CONNS=${VB_CONNS:-"16 64"}
DUR=${VB_DUR:-10s}
WARM=${VB_WARMUP:-2s}
LABEL=${VB_LABEL:-$VB_TASK}
BIN=$S/bin
mkdir -p "$BIN"
if [ -n "${VB_PAB:-}" ]; then
  cp "$VB_PAB" "$BIN/pab"
else
  (cd "$ROOT" && go build -o "$BIN/pab" ./cmd/pab)
fi
(cd "$ROOT" && go build -o "$BIN/load" ./bench/load && go build -o "$BIN/baseline" ./bench/baseline)

CACHE=$S/cache # pab's cache, kept across runs (warm starts), holding the CA the baseline signs with
mkdir -p "$CACHE"
PAB_CACHE=$CACHE "$BIN/pab" --repo "$VB_REPO" ca >/dev/null
CA=$CACHE/ca/ca.pem
OUT=$S/results.jsonl
: >"$OUT"
log() { echo "vsbaseline: $*" >&2; }

PEER_PID=
PEER_ADDR=
wait_addr() { # wait_addr ERRFILE: sets PEER_ADDR to the address PEER_PID printed there
  PEER_ADDR=$(peer_addr "$1" "$PEER_PID") && return 0
  log "no address in $1:"; cat "$1" >&2
  return 1
}
start_pab() {
  PAB_CACHE=$CACHE "$BIN/pab" --repo "$VB_REPO" replay "$VB_TASK" --listen 127.0.0.1:0 --clock off \
    --log /dev/null 2>"$S/pab.err" &
  PEER_PID=$!
  wait_addr "$S/pab.err"
}
start_baseline() {
  "$BIN/baseline" -listen 127.0.0.1:0 -ca-dir "$CACHE/ca" -cycle "$CYC" 2>"$S/baseline.err" &
  PEER_PID=$!
  wait_addr "$S/baseline.err"
}
stop_peer() {
  [ -n "$PEER_PID" ] || return 0
  kill -TERM "$PEER_PID" 2>/dev/null || true
  wait "$PEER_PID" 2>/dev/null || true
  PEER_PID=
}
trap stop_peer EXIT

# the cycle with body files the baseline can read
CYC=$VB_CYCLE
if [ "$(head -1 "$VB_CYCLE" | cut -f4)" = "-" ]; then
  log "fetching the cycle's bodies through pab replay"
  rm -rf "$S/bodies"; mkdir -p "$S/bodies"
  start_pab
  i=0
  while IFS=$'\t' read -r url status ctype _ sha size; do
    f=b$i
    curl -sS --proxy "http://$PEER_ADDR" --cacert "$CA" -o "$S/bodies/$f" "$url"
    got=$(sha256sum "$S/bodies/$f" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
      log "$url: body SHA-256 $got, the cycle says $sha"
      exit 1
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$url" "$status" "$ctype" "$f" "$sha" "$size"
    i=$((i + 1))
  done <"$VB_CYCLE" >"$S/bodies/cycle.tsv"
  stop_peer
  CYC=$S/bodies/cycle.tsv
fi

# a warm cache: the saved index written whole (pab inspect's Close waits for it), so that no
# timed run pays for writing it
PAB_CACHE=$CACHE "$BIN/pab" --repo "$VB_REPO" inspect "$VB_TASK" "$(head -1 "$CYC" | cut -f1)" >/dev/null

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order="pab baseline"; else order="baseline pab"; fi
  for conns in $CONNS; do
    for scheme in https http; do
      for peer in $order; do
        log "round $round: $peer $scheme $conns connections"
        load0=$(cut -d' ' -f1 /proc/loadavg)
        "start_$peer"
        line=$("$BIN/load" -label "$peer" -rep "$round" -proxy "$PEER_ADDR" -ca "$CA" -cycle "$CYC" \
          -scheme "$scheme" -c "$conns" -d "$DUR" -warmup "$WARM" -watch "$PEER_PID")
        kill -0 "$PEER_PID" 2>/dev/null || log "$peer exited during the run (its stderr: $S/$peer.err)"
        stop_peer
        load1=$(cut -d' ' -f1 /proc/loadavg)
        echo "{\"recording\":\"$LABEL\",\"load_before\":$load0,\"load_after\":$load1,${line#\{}" >>"$OUT"
      done
    done
  done
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
label = rows[0]["recording"] if rows else ""
failed = []
keys = sorted({(r["conns"], r["scheme"]) for r in rows}, key=lambda k: (k[0], k[1] != "https"))
loads = [r["load_before"] for r in rows] + [r["load_after"] for r in rows]
print(f"pab ÷ baseline on {label}: median (min–max) over {len({r['rep'] for r in rows})} interleaved rounds; "
      f"load average {min(loads):.1f}–{max(loads):.1f} on {len(open('/proc/cpuinfo').read().split('processor')) - 1} CPUs")
print()
print("| connections | scheme | CPU/req pab ÷ baseline | rps pab ÷ baseline | pab CPU ms/req | baseline CPU ms/req | pab rps | baseline rps | bad answers |")
print("|---|---|---|---|---|---|---|---|---|")
for conns, scheme in keys:
    cpu, rps, pc, bc, pr, br, bad = [], [], [], [], [], [], 0
    for rep in sorted({r["rep"] for r in rows}):
        p = [r for r in rows if r["label"] == "pab" and r["conns"] == conns and r["scheme"] == scheme and r["rep"] == rep]
        b = [r for r in rows if r["label"] == "baseline" and r["conns"] == conns and r["scheme"] == scheme and r["rep"] == rep]
        if not p or not b:
            continue
        p, b = p[0], b[0]
        bad += p["errors"] + p["mismatches"] + b["errors"] + b["mismatches"]
        if "cpu_ms_per_req" not in p or "cpu_ms_per_req" not in b or p["requests"] == 0 or b["requests"] == 0:
            failed.append(f"round {rep} {conns} {scheme}: " + (p.get("first_error") or b.get("first_error") or "no requests"))
            continue
        cpu.append(p["cpu_ms_per_req"] / b["cpu_ms_per_req"])
        rps.append(p["rps"] / b["rps"])
        pc.append(p["cpu_ms_per_req"]); bc.append(b["cpu_ms_per_req"]); pr.append(p["rps"]); br.append(b["rps"])
    if not cpu:
        continue
    f = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"
    print(f"| {conns} | {scheme} | {f(cpu)} | {f(rps)} | {statistics.median(pc):.3f} | {statistics.median(bc):.3f} | "
          f"{statistics.median(pr):.0f} | {statistics.median(br):.0f} | {bad} |")
for f in failed:
    print(f"\nA pair left out: {f[:200]}")
EOF
