#!/usr/bin/env bash
# The scale series (bench/README.md "Scale series"): for each number of exchanges N, a WARC
# of N small exchanges written by bench/scale, then
#   zcat        the time of `zcat crawl.warc.gz | wc -c` (reading the input at all)
#   import      `pab import --task scale --no-check crawl.warc.gz`: wall time, CPU time and
#               peak RSS (/usr/bin/time); with SCALE_CHECK=1 the import again with its
#               self-check
#   write       the time of copying the published recording and syncing it (writing its
#               bytes at all)
#   start       bench/load -mode start: launch `pab replay scale` to the first correct
#               HTTPS answer, cold (empty PAB_CACHE) then warm (that cache kept, its saved
#               index completed by `pab inspect` in between: bench/load stops the cold start
#               5 s after its answer, before a large recording's saved index is written),
#               with the process tree's RSS and CPU right after the answer; SCALE_RUNS rounds
#   load        HTTPS keep-alive, 16 connections, SCALE_DUR: CPU per request and peak RSS
#               of pab replay over the cycle of N's recording (SCALE_LOAD=0 skips it)
#
#   bench/scale.sh                                  N = 1000 10000 100000
#   SCALE_NS="1000 10000 100000 1000000" SCALE_RUNS=5 bench/scale.sh
#
# Environment: SCALE_DIR (scratch, default /tmp/pab-scale; a WARC already generated there is
# reused), SCALE_NS, SCALE_BODY (small or large), SCALE_RUNS (start rounds, default 5),
# SCALE_PAB (a pab binary instead of building ./cmd/pab), SCALE_TIMEOUT (seconds an import
# may take, default 1800), SCALE_LOAD, SCALE_DUR (default 5s), SCALE_CHECK=1 (import again
# with the self-check, its time and RSS as "import+check"), SCALE_SKIP_IMPORT=1 (keep the
# recording an earlier run imported: no import measured). Raw results: one JSON line per
# measurement in $SCALE_DIR/scale.jsonl; the table is printed at the end.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
. "$HERE/lib.sh"
S=${SCALE_DIR:-/tmp/pab-scale}
NS=${SCALE_NS:-"1000 10000 100000"}
BODY=${SCALE_BODY:-small}
RUNS=${SCALE_RUNS:-5}
TIMEOUT=${SCALE_TIMEOUT:-1800}
DUR=${SCALE_DUR:-5s}
BIN=$S/bin
mkdir -p "$BIN"
if [ -n "${SCALE_PAB:-}" ]; then
  cp "$SCALE_PAB" "$BIN/pab"
else
  (cd "$ROOT" && go build -o "$BIN/pab" ./cmd/pab)
fi
(cd "$ROOT" && go build -o "$BIN/load" ./bench/load && go build -o "$BIN/scale" ./bench/scale)

export PAB_CA_DIR=$S/ca
OUT=$S/scale.jsonl
: >"$OUT"

now() { date +%s.%N; }
emit() { echo "$1" >>"$OUT"; echo "$1" >&2; }

for n in $NS; do
  D=$S/$BODY-$n
  if [ ! -f "$D/crawl.warc.gz" ]; then
    echo "scale: generating $n exchanges ($BODY bodies)" >&2
    rm -rf "$D"
    "$BIN/scale" -out "$D" -n "$n" -body "$BODY"
  fi
  if [ "${SCALE_SKIP_IMPORT:-0}" = 1 ] && [ -d "$D/repo/tasks/scale/recording" ]; then
    rm -rf "$D/repo/.cache" "$D/cache"
  else
    warc_bytes=$(stat -L -c %s "$D/crawl.warc.gz")
    t0=$(now); raw=$(zcat "$D/crawl.warc.gz" | wc -c); t1=$(now)
    emit "{\"kind\":\"zcat\",\"n\":$n,\"seconds\":$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}"),\"gz_bytes\":$warc_bytes,\"bytes\":$raw}"

    rm -rf "$D/repo/tasks/scale/recording" "$D/repo/.cache" "$D/cache"
    rc=0
    timeout "$TIMEOUT" /usr/bin/time -f '%e %M %U %S' -o "$D/import.time" env PAB_CACHE="$D/cache" \
      "$BIN/pab" --repo "$D/repo" import --task scale --no-check "$D/crawl.warc.gz" >"$D/import.out" 2>"$D/import.err" || rc=$?
    if [ $rc -ne 0 ]; then
      emit "{\"kind\":\"import\",\"n\":$n,\"failed\":$rc}"
      continue
    fi
    read -r secs kb usr sys <"$D/import.time"
    rec_bytes=$(du -sb "$D/repo/tasks/scale/recording" | cut -f1)
    emit "{\"kind\":\"import\",\"n\":$n,\"seconds\":$secs,\"cpu_seconds\":$(awk "BEGIN{printf \"%.2f\", $usr + $sys}"),\"peak_rss_bytes\":$((kb * 1024)),\"recording_bytes\":$rec_bytes}"
    # writing the published recording's bytes at all: a copy of it, synced
    rm -rf "$D/copy"
    t0=$(now); cp -r "$D/repo/tasks/scale/recording" "$D/copy" && sync -f "$D/copy"; t1=$(now)
    rm -rf "$D/copy"
    emit "{\"kind\":\"write\",\"n\":$n,\"seconds\":$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}"),\"bytes\":$rec_bytes}"
    if [ "${SCALE_CHECK:-0}" = 1 ]; then
      rm -rf "$D/repo/tasks/scale/recording"
      /usr/bin/time -f '%e %M' -o "$D/check.time" env PAB_CACHE="$D/cache" \
        "$BIN/pab" --repo "$D/repo" import --task scale "$D/crawl.warc.gz" >"$D/check.out" 2>"$D/check.err" || true
      read -r secs kb <"$D/check.time"
      emit "{\"kind\":\"import+check\",\"n\":$n,\"seconds\":$secs,\"peak_rss_bytes\":$((kb * 1024))}"
    fi
  fi

  [ -d "$S/ca-cache" ] || PAB_CACHE=$S/ca-cache "$BIN/pab" --repo "$D/repo" ca >/dev/null
  CA=$(PAB_CACHE=$S/ca-cache "$BIN/pab" --repo "$D/repo" ca)
  URL=$(head -1 "$D/cycle.tsv" | cut -f1)
  SHA=$(head -1 "$D/cycle.tsv" | cut -f5)
  for rep in $(seq "$RUNS"); do
    rm -rf "$D/cache"
    for mode in cold warm; do
      line=$("$BIN/load" -mode start -timeout 600s -label "$mode" -rep "$rep" -ca "$CA" -url "$URL" -sha256 "$SHA" -- \
        env PAB_CACHE="$D/cache" "$BIN/pab" --repo "$D/repo" replay scale --listen 127.0.0.1:0 --clock off)
      emit "{\"kind\":\"start\",\"n\":$n,${line#\{}"
      if [ "$mode" = cold ]; then
        # the saved index the cold start began, written whole (task.Open's Close waits for it)
        env PAB_CACHE="$D/cache" "$BIN/pab" --repo "$D/repo" inspect scale "$URL" >/dev/null 2>&1 || true
      fi
    done
  done

  if [ "${SCALE_LOAD:-1}" = 1 ]; then
    # a warm cache from the starts above; wait for the address line, then load it
    env PAB_CACHE="$D/cache" "$BIN/pab" --repo "$D/repo" replay scale --listen 127.0.0.1:0 --clock off \
      --log /dev/null 2>"$D/replay.err" &
    pid=$!
    addr=$(peer_addr "$D/replay.err" $pid) || addr=""
    if [ -n "$addr" ]; then
      for scheme in https http; do
        line=$("$BIN/load" -proxy "$addr" -ca "$CA" -cycle "$D/cycle.tsv" -scheme $scheme -c 16 -d "$DUR" -warmup 2s \
          -watch $pid -label "$scheme" || echo '{"failed":1}')
        emit "{\"kind\":\"load\",\"n\":$n,${line#\{}"
      done
    fi
    kill $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
  fi
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ns = sorted({r["n"] for r in rows})
def one(kind, n, key):
    for r in rows:
        if r["kind"] == kind and r["n"] == n and key in r:
            return r[key]
    return None
def med(n, label, key):
    xs = [r[key] for r in rows if r["kind"] == "start" and r["n"] == n and r.get("label") == label and key in r]
    return statistics.median(xs) if xs else None
def load(n, label, key):
    for r in rows:
        if r["kind"] == "load" and r["n"] == n and r.get("label") == label:
            return r.get(key)
    return None
f = lambda x, fmt: "—" if x is None else fmt.format(x)
print("| entries | WARC (gz) MB | zcat s | write s | import s | import CPU s | import peak RSS MB | cold start s | warm start s | warm start CPU s | RSS after warm start MB | HTTPS CPU µs/req | HTTP CPU µs/req | RSS under load MB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in ns:
    gz = one("zcat", n, "gz_bytes")
    imp = one("import", n, "seconds")
    rss = one("import", n, "peak_rss_bytes")
    print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        n, f(gz and gz / 1e6, "{:.1f}"), f(one("zcat", n, "seconds"), "{:.2f}"), f(one("write", n, "seconds"), "{:.2f}"),
        f(imp, "{:.1f}") if imp is not None else ("failed" if one("import", n, "failed") else "—"),
        f(one("import", n, "cpu_seconds"), "{:.1f}"),
        f(rss and rss / 2**20, "{:.0f}"), f(med(n, "cold", "seconds"), "{:.3f}"), f(med(n, "warm", "seconds"), "{:.3f}"),
        f(med(n, "warm", "cpu_seconds"), "{:.2f}"), f(med(n, "warm", "rss_bytes") and med(n, "warm", "rss_bytes") / 2**20, "{:.0f}"),
        f(load(n, "https", "cpu_ms_per_req") and load(n, "https", "cpu_ms_per_req") * 1000, "{:.1f}"),
        f(load(n, "http", "cpu_ms_per_req") and load(n, "http", "cpu_ms_per_req") * 1000, "{:.1f}"),
        f(load(n, "https", "peak_rss_mb"), "{:.0f}")))
EOF
