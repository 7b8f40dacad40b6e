#!/usr/bin/env bash
# Instructions per request under callgrind: a measure of the work each answer costs that
# the host's other tenants do not move (bench/README.md "Instructions per request").
#
#   IN_REPO=/tmp/pab-bench/r75MB/repo IN_TASK=bench IN_CYCLE=/tmp/pab-bench/r75MB/cycle/cycle.tsv bench/instructions.sh
#   IN_PEERS="/tmp/pab-new /tmp/pab-old" IN_REPO=... IN_TASK=... IN_CYCLE=... bench/instructions.sh
#
# Each peer is started under valgrind's callgrind with its counting off, loaded by
# bench/load for IN_WARMUP (its connections opened, their TLS handshakes done) and then
# IN_DUR, with counting on for the timed window only (load's -at-start and -at-end run
# callgrind_control). Instructions counted ÷ requests answered in the window is the
# peer's instructions per keep-alive request: its own work, the runtime's (the collector's
# marking, the scheduler) and the crypto's, without the handshakes. Two runs of one build
# agree within about 1% (the collector's cycles that fall in the window are the spread:
# run IN_DUR long enough to hold several). Instructions are not time: a request that reads
# memory the caches no longer hold costs more time for the same count; bench/vsbaseline.sh
# and bench/together.sh measure time.
#
# A peer is "pab" (this tree's ./cmd/pab, built), the path of a pab binary, "baseline"
# (bench/baseline) or "shell" (bench/shell: pab's MITM shell with the baseline's handler).
# A pab peer's saved index is written before its counted run (pab inspect, under the same
# valgrind tool: the tool is a part of the index's key), and the script stops when the
# counted run did not start from it (a cold start computes the index again and holds the
# whole recording in memory). valgrind runs everything about 50 times slower: the
# counted window holds some tens of thousands of requests. Environment: IN_PEERS (default
# "pab baseline"), IN_REPO, IN_TASK, IN_CYCLE (required; the baseline and the shell need the
# cycle's body files: bench/gen's cycles), IN_CONNS (default 64), IN_SCHEME (https or http,
# default https), IN_DUR (default 30s), IN_WARMUP (default 8s), IN_TOP (default 0: with N,
# each peer's N functions of most instructions per request are printed), IN_DIR (scratch,
# default /tmp/pab-instructions). Needs valgrind and python3.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
. "$HERE/lib.sh"
S=${IN_DIR:-/tmp/pab-instructions}
: "${IN_REPO:?IN_REPO: the task repository}" "${IN_TASK:?IN_TASK: the task id}" "${IN_CYCLE:?IN_CYCLE: the cycle file}"
PEERS=${IN_PEERS:-"pab baseline"}
CONNS=${IN_CONNS:-64}
SCHEME=${IN_SCHEME:-https}
DUR=${IN_DUR:-30s}
WARM=${IN_WARMUP:-8s}
TOP=${IN_TOP:-0}
BIN=$S/bin
CACHE=$S/cache
mkdir -p "$BIN" "$CACHE"
log() { echo "instructions: $*" >&2; }
command -v valgrind >/dev/null || { log "valgrind is not installed (apt-get install valgrind)"; exit 1; }

(cd "$ROOT" && go build -o "$BIN/load" ./bench/load && go build -o "$BIN/baseline" ./bench/baseline &&
  go build -o "$BIN/shell" ./bench/shell)
rm -f "$BIN/pab"
(cd "$ROOT" && go build -o "$BIN/pab" ./cmd/pab)
PAB_CACHE=$CACHE "$BIN/pab" --repo "$IN_REPO" ca >/dev/null
CA=$CACHE/ca/ca.pem
# Each pab peer has a cache of its own, holding the one CA: a saved index is kept per
# recording for one pab executable, so two builds sharing a cache would each find the
# other's and compute it again at every start (docs/replay.md "The saved index").
N=0
declare -A PEERBIN PEERCACHE
for p in $PEERS; do
  case $p in
  baseline | shell) continue ;;
  pab) PEERBIN[$p]=$BIN/pab ;;
  *)
    [ -x "$p" ] || { log "$p: not a peer (pab, baseline, shell or the path of a pab binary)"; exit 1; }
    N=$((N + 1))
    cp "$p" "$BIN/pab$N"
    PEERBIN[$p]=$BIN/pab$N
    ;;
  esac
  PEERCACHE[$p]=$S/cache-$(basename "${PEERBIN[$p]}")
  rm -rf "${PEERCACHE[$p]}"
  mkdir -p "${PEERCACHE[$p]}"
  cp -r "$CACHE/ca" "${PEERCACHE[$p]}/ca"
done

PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null || true; }
trap cleanup EXIT
# start PEER ERRFILE [valgrind args...]: starts the peer (under the command given after
# ERRFILE); sets PID and ADDR
start() {
  local peer=$1 err=$2
  shift 2
  rm -f "$err"
  case $peer in
  baseline | shell) "$@" "$BIN/$peer" -listen 127.0.0.1:0 -ca-dir "$CACHE/ca" -cycle "$IN_CYCLE" 2>"$err" & ;;
  *) PAB_CACHE=${PEERCACHE[$peer]} "$@" "${PEERBIN[$peer]}" --repo "$IN_REPO" replay "$IN_TASK" --listen 127.0.0.1:0 --clock off --log /dev/null 2>"$err" & ;;
  esac
  PID=$!
  ADDR=$(peer_addr "$err" "$PID") && return 0
  log "$peer did not start:"
  cat "$err" >&2
  exit 1
}

OUT=$S/results.jsonl
: >"$OUT"
FIRST_URL=$(head -1 "$IN_CYCLE" | cut -f1)
# saved_index PEER: the identity (inode, size, modification time) of a pab peer's saved
# index files ("" when there is none); "-" for the baseline and the shell
saved_index() {
  case $1 in
  baseline | shell) echo - ;;
  *) stat -c '%i %s %y' "${PEERCACHE[$1]}"/indexes/*.idx 2>/dev/null || true ;;
  esac
}
i=0
for p in $PEERS; do
  i=$((i + 1))
  R=$S/run$i
  rm -f "$R".cg.* "$R".json
  case $p in
  baseline | shell) ;;
  *) # A first run writes the saved index, under the same valgrind tool and $GODEBUG as the
    # counted run: both are a part of the saved index's key (under valgrind /proc/self/exe
    # is valgrind's tool, not pab; outside it the counted run would compute its index
    # again, a cold start with the whole recording in memory). pab inspect's exit waits
    # for the index to be written whole.
    if ! PAB_CACHE=${PEERCACHE[$p]} GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file=/dev/null -q "${PEERBIN[$p]}" --repo "$IN_REPO" inspect "$IN_TASK" "$FIRST_URL" \
      >/dev/null 2>"$R.first.err"; then
      log "$p: pab inspect failed:"
      cat "$R.first.err" >&2
      exit 1
    fi
    ;;
  esac
  log "$p: $CONNS connections, $SCHEME, $WARM warm, $DUR counted"
  idx_before=$(saved_index "$p")
  # GODEBUG=asyncpreemptoff=1: callgrind stops on the signals of Go's asynchronous preemption
  start "$p" "$R.err" env GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$R.cg.%p"
  "$BIN/load" -label "$p" -rep "$i" -proxy "$ADDR" -ca "$CA" -cycle "$IN_CYCLE" -scheme "$SCHEME" -c "$CONNS" \
    -d "$DUR" -warmup "$WARM" -at-start "callgrind_control -i on $PID >/dev/null" \
    -at-end "callgrind_control -i off $PID >/dev/null" >"$R.json"
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
  if [ -z "$idx_before" ] || [ "$(saved_index "$p")" != "$idx_before" ]; then
    # a counted run that found no saved index of its key computed one: a cold start
    log "$p: the counted run did not start from the saved index the first run wrote (${idx_before:-none}); not counted"
    exit 1
  fi
  python3 - "$R" "$p" "$TOP" >>"$OUT" <<'PY'
import glob, json, re, subprocess, sys
run, peer, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = json.load(open(run + ".json"))
total, biggest = 0, None
for f in glob.glob(run + ".cg.*"):
    for line in open(f):
        m = re.match(r"(?:summary|totals): (\d+)", line)
        if m and int(m.group(1)) > total:
            total, biggest = int(m.group(1)), f
n = d["requests"]
row = {"peer": peer, "requests": n, "errors": d["errors"] + d["mismatches"], "instructions": total,
       "per_request": round(total / n) if n else None}
if top and biggest:
    out = subprocess.run(["callgrind_annotate", "--threshold=99", biggest], capture_output=True, text=True).stdout
    fns = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S+:(\S+)", line)
        if m:
            fns.append([m.group(2), round(int(m.group(1).replace(",", "")) / n)])
    row["top"] = fns[:top]
print(json.dumps(row))
PY
done

python3 - "$OUT" <<'EOF2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
last = rows[-1]["per_request"]
print("| peer | requests counted | bad answers | instructions per request | ÷ last peer |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['peer']} | {r['requests']} | {r['errors']} | {r['per_request']} | {r['per_request'] / last:.3f} |")
for r in rows:
    if r.get("top"):
        print(f"\n{r['peer']}: the functions of most instructions per request")
        for name, n in r["top"]:
            print(f"  {n:8d}  {name}")
EOF2
