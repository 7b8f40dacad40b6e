#!/usr/bin/env bash
# pab's benchmark suite against whistle, mitmproxy and a minimal Go MITM proxy (the
# baseline): one command runs it all and writes docs/performance.md. See bench/README.md.
#
#   bench/run.sh                 full run (about 30 minutes on 2 cores)
#   BENCH_QUICK=1 bench/run.sh   quick run (a few minutes): 75 MB only, 1 and 16 connections, one repeat
#
# Environment: BENCH_DIR (scratch directory, default /tmp/pab-bench; the recordings are
# written there, never into the repository), BENCH_OUT (default docs/performance.md),
# BENCH_REPS, BENCH_DURATION, BENCH_WARMUP, BENCH_CONNS, BENCH_RATES, BENCH_PAGELOADS
# (override the mode's settings), BENCH_PAB (use this pab binary instead of building ./cmd/pab).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
QUICK=${BENCH_QUICK:-0}
S=${BENCH_DIR:-/tmp/pab-bench}
OUT=${BENCH_OUT:-$ROOT/docs/performance.md}
if [ "$QUICK" = 1 ]; then
  REPS=${BENCH_REPS:-1}; DUR=${BENCH_DURATION:-5s}; WARM=${BENCH_WARMUP:-1s}; CONNS=${BENCH_CONNS:-"1 16"}
  SIZES="75MB"; NEED_MB=900; MODE="quick (BENCH_QUICK=1)"; RATES=${BENCH_RATES:-"1000"}; PAGELOADS=${BENCH_PAGELOADS:-5}
else
  REPS=${BENCH_REPS:-2}; DUR=${BENCH_DURATION:-10s}; WARM=${BENCH_WARMUP:-2s}; CONNS=${BENCH_CONNS:-"1 16 64"}
  SIZES="75MB 500MB"; NEED_MB=3500; MODE="full"; RATES=${BENCH_RATES:-"200 1000"}; PAGELOADS=${BENCH_PAGELOADS:-20}
fi
EXCHANGES=20000
CYCLE=500
PAGE_SUBS=60                # subresources of the page-load page (bench/gen -page)
H2_HOST=static.bench.test   # the h2 cells keep only this host's URLs: one tunnel per worker

log() { echo "bench: $*" >&2; }

mkdir -p "$S"
avail=$(df -Pm "$S" | awk 'NR==2 {print $4}')
if [ "$avail" -lt "$NEED_MB" ]; then
  echo "bench: $S has ${avail} MB free; this run needs about ${NEED_MB} MB (set BENCH_DIR)" >&2
  exit 1
fi
rm -rf "$S/results.jsonl" "$S/gobench.txt" "$S/machine.txt" "$S/config.txt" "$S/pageload.log" "$S/pprof.md"
BIN=$S/bin
mkdir -p "$BIN"

# ---- peers and tools -------------------------------------------------------------------
need_apt=()
command -v mitmdump >/dev/null || need_apt+=(mitmproxy)
command -v strace >/dev/null || need_apt+=(strace)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]} (Debian)"
  apt-get install -y "${need_apt[@]}" >"$S/apt.log" 2>&1 || { apt-get update >>"$S/apt.log" 2>&1; apt-get install -y "${need_apt[@]}" >>"$S/apt.log" 2>&1; }
fi
if [ ! -x "$HERE/peers/node_modules/.bin/w2" ]; then
  log "installing whistle (npm ci, pinned in bench/peers/package-lock.json)"
  (cd "$HERE/peers" && npm ci --no-audit --no-fund >"$S/npm.log" 2>&1)
fi
W2=$HERE/peers/node_modules/.bin/w2

log "building pab and the bench tools"
if [ -n "${BENCH_PAB:-}" ]; then
  cp "$BENCH_PAB" "$BIN/pab" # a pab built elsewhere (when the working tree does not build)
else
  (cd "$ROOT" && go build -o "$BIN/pab" ./cmd/pab)
fi
(cd "$ROOT" && for t in load gen report baseline pageload; do go build -o "$BIN/$t" ./bench/$t; done)
# pab replay's --http2 (h2 offered by ALPN inside the tunnel; default on): older pab has none
if "$BIN/pab" replay --help 2>&1 | grep -q -- '--http2'; then PAB_HTTP2=yes; else PAB_HTTP2=no; fi

# ---- recordings -----------------------------------------------------------------------
for size in $SIZES; do
  if [ ! -f "$S/r$size/done" ] || [ "$(cat "$S/r$size/done")" != "$EXCHANGES $size $CYCLE page $PAGE_SUBS" ]; then
    log "generating the $size recording ($EXCHANGES exchanges and a page of $PAGE_SUBS subresources)"
    rm -rf "$S/r$size"
    "$BIN/gen" -out "$S/r$size" -n "$EXCHANGES" -size "$size" -cycle "$CYCLE" -page "$PAGE_SUBS" >&2
    echo "$EXCHANGES $size $CYCLE page $PAGE_SUBS" >"$S/r$size/done"
  fi
done
R=$S/r75MB
CYC=$R/cycle/cycle.tsv
FIRST_URL=$(head -1 "$CYC" | cut -f1)
FIRST_SHA=$(head -1 "$CYC" | cut -f5)
PAGE=$R/page/page.tsv
PAGE_URL=$(head -1 "$PAGE" | cut -f1)
PAGE_N=$(wc -l <"$PAGE")

# pab's CA (ECDSA P-256), shared with mitmproxy so both sign the same kind of leaf.
rm -rf "$S/ca-cache"
PAB_CACHE=$S/ca-cache "$BIN/pab" --repo "$R/repo" ca >/dev/null
CA=$S/ca-cache/ca/ca.pem
mkdir -p "$S/mitm-conf"
cat "$S/ca-cache/ca/ca-key.pem" "$CA" >"$S/mitm-conf/mitmproxy-ca.pem"
/usr/bin/python3 "$HERE/peers/mkflows.py" "$R/cycle" "$S/bench.flows" >&2

# whistle makes its own root CA (RSA 2048) on first start, in $HOME/.WhistleAppData
rm -rf "$S/whistle-home"; mkdir -p "$S/whistle-home"
WRAP=()
PEER_PID=

fresh_cache() { # fresh_cache DIR: an empty pab cache holding only the CA
  rm -rf "$1"; mkdir -p "$1"; cp -r "$S/ca-cache/ca" "$1/ca"
}

# ---- peer start/stop -------------------------------------------------------------------
PAB_PORT=18080; MITM_PORT=18081; WHISTLE_PORT=18082; BASE_PORT=18083
PAB_EXTRA=()  # more pab replay flags (--http2=false)
BASE_EXTRA=() # more baseline flags (-h2)

start_pab() { # start_pab REPO CACHE
  port_free $PAB_PORT || return 1
  PAB_CACHE=$2 "${WRAP[@]}" "$BIN/pab" --repo "$1" replay bench --listen 127.0.0.1:$PAB_PORT --clock off \
    --log "$S/pab-replay.log" ${PAB_EXTRA[@]+"${PAB_EXTRA[@]}"} 2>"$S/pab.err" &
  PEER_PID=$!
  wait_port $PAB_PORT
}
BASE_ARGS=(-listen 127.0.0.1:$BASE_PORT -ca-dir "$S/ca-cache/ca" -cycle "$CYC" -cycle "$PAGE")
start_baseline() {
  port_free $BASE_PORT || return 1
  "${WRAP[@]}" "$BIN/baseline" "${BASE_ARGS[@]}" ${BASE_EXTRA[@]+"${BASE_EXTRA[@]}"} 2>"$S/baseline.err" &
  PEER_PID=$!
  wait_port $BASE_PORT
}
MITM_ARGS=(-q --listen-host 127.0.0.1 --listen-port $MITM_PORT --set confdir="$S/mitm-conf"
  --server-replay "$S/bench.flows" --set server_replay_nopop=true --set server_replay_kill_extra=true
  --set server_replay_refresh=false --set connection_strategy=lazy --set upstream_cert=false)
start_mitm() {
  port_free $MITM_PORT || return 1
  "${WRAP[@]}" mitmdump "${MITM_ARGS[@]}" >"$S/mitm.log" 2>&1 &
  PEER_PID=$!
  wait_port $MITM_PORT
}
whistle_rules() {
  local f=$R/cycle/files
  for h in www.bench.test static.bench.test img.bench.test api.bench.test; do
    echo "$h file://$f/$h"
  done
  echo "/./ file://(not-recorded)" # answer anything else locally: never resolve or dial
}
start_whistle() {
  port_free $WHISTLE_PORT || return 1
  HOME=$S/whistle-home "${WRAP[@]}" "$W2" run -H 127.0.0.1 -p $WHISTLE_PORT -M capture -D "$S/whistle-home/w" \
    -r "$(whistle_rules)" >"$S/whistle.log" 2>&1 &
  PEER_PID=$!
  wait_port $WHISTLE_PORT
  for _ in $(seq 100); do
    WHISTLE_CA=$(find "$S/whistle-home" -name root.crt | head -1)
    [ -n "$WHISTLE_CA" ] && break
    sleep 0.1
  done
}
descendants() { # the PIDs of every descendant of $1
  local c
  for c in $(pgrep -P "$1" || true); do
    echo "$c"
    descendants "$c"
  done
}
stop_peer() { # stop the peer started last and every process it started (whistle's workers; strace's tracee)
  [ -n "${PEER_PID:-}" ] || return 0
  local pids
  pids="$(descendants "$PEER_PID") $PEER_PID"
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 $pids 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL $pids 2>/dev/null || true
  wait "$PEER_PID" 2>/dev/null || true
  PEER_PID=
}
port_free() { # port_free PORT: nothing listens there yet (a peer left over would be measured instead)
  if (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; then
    echo "bench: port $1 is already in use before the peer started" >&2
    return 1
  fi
}
wait_port() {
  for _ in $(seq 600); do
    if (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "bench: nothing listens on port $1 after 60 s" >&2
  return 1
}
trap 'stop_peer' EXIT
start_whistle
stop_peer
[ -n "$WHISTLE_CA" ] || { echo "bench: whistle made no root CA" >&2; exit 1; }

ca_of() { case $1 in pab | baseline | mitmproxy) echo "$CA" ;; whistle) echo "$WHISTLE_CA" ;; esac; }
port_of() { case $1 in pab) echo $PAB_PORT ;; baseline) echo $BASE_PORT ;; mitmproxy) echo $MITM_PORT ;; whistle) echo $WHISTLE_PORT ;; esac; }
PEERS="pab baseline mitmproxy whistle"
start_peer() {
  case $1 in
    pab) start_pab "$R/repo" "$S/cache-warm" ;;
    baseline) start_baseline ;;
    mitmproxy) start_mitm ;;
    whistle) start_whistle ;;
  esac
}

# ---- machine ---------------------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "cores: $(nproc)"
  echo "ram: $(free -g | awk '/^Mem:/ {print $2}') GiB"
  echo "kernel: $(uname -r)"
  echo "go: $(go version | cut -d' ' -f3-)"
  echo "pab: $(cd "$ROOT" && go list -m -f '{{.Path}}' 2>/dev/null) built from the working tree"
  echo "mitmproxy: $(mitmdump --version 2>/dev/null | awk '/^Mitmproxy/ {print $2}')"
  echo "whistle: $("$W2" -V 2>/dev/null | tail -1)"
  echo "node: $(node --version)"
  echo "chromium: $(chromium --version 2>/dev/null | awk '{print $2}')"
  echo "load_before: $(uptime | sed 's/.*load average: //')"
} >"$S/machine.txt"
{
  echo "mode: $MODE"
  echo "client: bench/load (Go), HTTPS through an HTTP CONNECT proxy, HTTP/1.1 in the tunnel, TLS 1.3 with X25519 only"
  echo "cycle_n: $(wc -l <"$CYC")"
  echo "cycle_mean: $(awk -F'\t' '{s+=$6} END {printf "%d", s/NR}' "$CYC")"
  echo "recording: 75 MB ($EXCHANGES exchanges)"
  echo "duration: $DUR"
  echo "warmup: $WARM"
  echo "reps: $REPS"
  echo "pab_http2: $PAB_HTTP2"
  echo "h2_host: $H2_HOST"
  echo "h2_urls: $(grep -c "^https://$H2_HOST/" "$CYC")"
  echo "page: $PAGE_URL, $((PAGE_N - 1)) subresources on the same host, $(awk -F'\t' '{s+=$6} END {printf "%d", s/1024}' "$PAGE") KB in all"
  echo "pageloads: $PAGELOADS"
} >"$S/config.txt"

# ---- start time --------------------------------------------------------------------------
for rep in $(seq "$REPS"); do
  for size in $SIZES; do
    RR=$S/r$size
    RURL=$(head -1 "$RR/cycle/cycle.tsv" | cut -f1); RSHA=$(head -1 "$RR/cycle/cycle.tsv" | cut -f5)
    fresh_cache "$S/cache-start"
    for mode in cold warm; do
      log "start time: pab $size $mode (run $rep)"
      "$BIN/load" -mode start -label "pab $size $mode" -rep "$rep" -ca "$CA" -url "$RURL" -sha256 "$RSHA" -- \
        env PAB_CACHE="$S/cache-start" "$BIN/pab" --repo "$RR/repo" replay bench --listen 127.0.0.1:0 --clock off \
        >>"$S/results.jsonl"
    done
  done
  log "start time: peers (run $rep)"
  "$BIN/load" -mode start -label "mitmproxy ($(wc -l <"$CYC") exchanges × 2 schemes)" -rep "$rep" -ca "$CA" -proxy 127.0.0.1:$MITM_PORT \
    -url "$FIRST_URL" -sha256 "$FIRST_SHA" -- mitmdump "${MITM_ARGS[@]}" >>"$S/results.jsonl"
  "$BIN/load" -mode start -label "baseline ($(wc -l <"$CYC") exchanges and the page, in memory)" -rep "$rep" -ca "$CA" -proxy 127.0.0.1:$BASE_PORT \
    -url "$FIRST_URL" -sha256 "$FIRST_SHA" -- "$BIN/baseline" "${BASE_ARGS[@]}" >>"$S/results.jsonl"
  "$BIN/load" -mode start -label "whistle ($(wc -l <"$CYC") exchanges, file rules)" -rep "$rep" -proxy 127.0.0.1:$WHISTLE_PORT \
    -ca "$WHISTLE_CA" -url "$FIRST_URL" -sha256 "$FIRST_SHA" -- env HOME="$S/whistle-home" "$W2" run -H 127.0.0.1 -p $WHISTLE_PORT \
    -M capture -D "$S/whistle-home/w" -r "$(whistle_rules)" >>"$S/results.jsonl"
done

# ---- throughput and latency, interleaved -------------------------------------------------
fresh_cache "$S/cache-warm"
start_pab "$R/repo" "$S/cache-warm" # fill the cache once (stamps; a format 2 recording is unpacked)
stop_peer
for rep in $(seq "$REPS"); do
  for conns in $CONNS; do
    for scheme in https http; do
      for peer in $PEERS; do
        log "load: $peer $scheme $conns connections (run $rep)"
        start_peer $peer
        "$BIN/load" -label $peer -rep "$rep" -proxy 127.0.0.1:"$(port_of $peer)" -ca "$(ca_of $peer)" -cycle "$CYC" \
          -scheme $scheme -c "$conns" -d "$DUR" -warmup "$WARM" -watch "$PEER_PID" >>"$S/results.jsonl"
        stop_peer
        if [ $peer = pab ]; then
          /usr/bin/python3 "$HERE/logstats.py" "$S/pab-replay.log" "$scheme, $conns connections, as fast as answered" "$rep" >>"$S/results.jsonl"
        fi
      done
    done
  done
done

# ---- latency at a fixed rate (16 connections, https), interleaved ---------------------------
for rep in $(seq "$REPS"); do
  for rate in $RATES; do
    for peer in $PEERS; do
      log "paced load: $peer https 16 connections at $rate requests/s (run $rep)"
      start_peer $peer
      "$BIN/load" -label $peer -rep "$rep" -proxy 127.0.0.1:"$(port_of $peer)" -ca "$(ca_of $peer)" -cycle "$CYC" \
        -scheme https -c 16 -rate "$rate" -d "$DUR" -warmup "$WARM" -watch "$PEER_PID" >>"$S/results.jsonl"
      stop_peer
      if [ $peer = pab ]; then
        /usr/bin/python3 "$HERE/logstats.py" "$S/pab-replay.log" "https, 16 connections, paced at $rate requests/s" "$rep" >>"$S/results.jsonl"
      fi
    done
  done
done

# ---- HTTP/2 against HTTP/1.1 (https, one host's URLs), pab and the baseline, interleaved ----
# h1: 16 workers, one request in flight each (16 connections); h2: 1 worker whose one
# connection carries 16 streams at once. Only $H2_HOST's URLs, so a worker has one tunnel.
for rep in $(seq "$REPS"); do
  for proto in h1 h2; do
    for peer in pab baseline; do
      if [ $proto = h2 ]; then
        flags=(-proto h2 -c 1 -streams 16); BASE_EXTRA=(-h2)
      else
        flags=(-proto h1 -c 16); BASE_EXTRA=()
      fi
      log "h2 cell: $peer https $proto ${flags[*]} (run $rep)"
      start_peer $peer
      "$BIN/load" -label $peer -rep "$rep" -proxy 127.0.0.1:"$(port_of $peer)" -ca "$CA" -cycle "$CYC" -host "$H2_HOST" \
        -scheme https "${flags[@]}" -d "$DUR" -warmup "$WARM" -watch "$PEER_PID" >>"$S/results.jsonl"
      stop_peer
      BASE_EXTRA=()
    done
  done
done

# ---- Chromium page load over h2 and h1 (pab replay --http2=true/false; the baseline) ----
# Only against the loopback proxies started here.
for rep in $(seq "$REPS"); do
  for proto in h2 h1; do
    for peer in pab baseline; do
      PAB_EXTRA=(); BASE_EXTRA=()
      if [ $proto = h2 ]; then BASE_EXTRA=(-h2); fi
      if [ $PAB_HTTP2 = yes ]; then
        if [ $proto = h2 ]; then PAB_EXTRA=(--http2=true); else PAB_EXTRA=(--http2=false); fi
      fi
      log "page load: $peer $proto, $PAGELOADS loads of $PAGE_URL (run $rep)"
      start_peer $peer
      "$BIN/pageload" -label $peer -proto $proto -rep "$rep" -proxy 127.0.0.1:"$(port_of $peer)" -ca "$CA" -url "$PAGE_URL" \
        -n "$PAGELOADS" -warmup 2 -expect "$PAGE_N" -watch "$PEER_PID" >>"$S/results.jsonl" 2>>"$S/pageload.log" ||
        log "page load: $peer $proto failed (see $S/pageload.log)"
      log "$(tail -1 "$S/pageload.log")"
      stop_peer
      PAB_EXTRA=(); BASE_EXTRA=()
    done
  done
done

# ---- memory ---------------------------------------------------------------------------
for size in $SIZES; do
  RR=$S/r$size
  fresh_cache "$S/cache-mem"
  start_pab "$RR/repo" "$S/cache-mem" # fill the cache once (stamps; a format 2 recording is unpacked)
  stop_peer
  for rep in $(seq "$REPS"); do
    log "memory: pab serving the $size recording (run $rep)"
    start_pab "$RR/repo" "$S/cache-mem"
    sleep 0.5
    idle=$(awk '/VmRSS/ {print $2/1024}' /proc/"$PEER_PID"/status)
    echo "{\"kind\":\"rss\",\"label\":\"pab $size, idle after start\",\"rep\":$rep,\"rss_mb\":$idle}" >>"$S/results.jsonl"
    "$BIN/load" -label "pab $size serving" -rep "$rep" -proxy 127.0.0.1:$PAB_PORT -ca "$CA" -cycle "$RR/cycle/cycle.tsv" \
      -c 16 -d "$DUR" -warmup "$WARM" -watch "$PEER_PID" >"$S/mem.json"
    peak=$(sed 's/.*"peak_rss_mb":\([0-9.]*\).*/\1/' "$S/mem.json")
    echo "{\"kind\":\"rss\",\"label\":\"pab $size serving, https 16 conns, peak\",\"rep\":$rep,\"rss_mb\":$peak}" >>"$S/results.jsonl"
    stop_peer
  done
done

# ---- no peer dials out -------------------------------------------------------------------
for peer in $PEERS; do
  log "dial check: $peer under strace"
  WRAP=(strace -f -qq -e trace=connect -o "$S/strace.$peer")
  start_peer $peer
  for scheme in https http; do
    "$BIN/load" -label $peer -proxy 127.0.0.1:"$(port_of $peer)" -ca "$(ca_of $peer)" -cycle "$CYC" -scheme $scheme \
      -c 4 -d 2s -warmup 0s -verify-every 1 >"$S/dial.$peer.$scheme.json" || true
  done
  # an unrecorded host too: a proxy that falls back to the network would dial here
  curl -s -o /dev/null --max-time 5 -x http://127.0.0.1:"$(port_of $peer)" http://unrecorded.bench.test/ || true
  stop_peer
  WRAP=()
  connects=$(grep -c 'connect(' "$S/strace.$peer" || true)
  outbound=$(grep 'connect(' "$S/strace.$peer" | grep -E 'sin6?_' | grep -v -E 'inet_addr\("127\.|inet_pton\(AF_INET6, "::1"' -c || true)
  dns=$(grep 'connect(' "$S/strace.$peer" | grep -c 'htons(53)' || true)
  outbound=$((outbound + dns))
  bad=$(cat "$S"/dial.$peer.*.json | grep -o '"mismatches":[0-9]*' | cut -d: -f2 | awk '{s+=$1} END {print s+0}')
  echo "{\"kind\":\"dialcheck\",\"label\":\"$peer\",\"connects\":$connects,\"outbound\":$outbound,\"detail\":\"$bad wrong answers among every body checked; $dns to port 53\"}" >>"$S/results.jsonl"
done

# ---- Profile: where pab's CPU per request goes (PAB_CPUPROFILE, bench/pprofsum.py) ----------
log "profile: pab https 16 connections"
rm -f "$S/pab.cpu"
PAB_CPUPROFILE="$S/pab.cpu" start_pab "$R/repo" "$S/cache-warm"
"$BIN/load" -label pab-profile -rep 1 -proxy 127.0.0.1:$PAB_PORT -ca "$CA" -cycle "$CYC" \
  -scheme https -c 16 -d "$DUR" -warmup 0s -watch "$PEER_PID" >"$S/profile-load.json"
stop_peer
reqs=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$S/profile-load.json")
go tool pprof -traces "$BIN/pab" "$S/pab.cpu" 2>/dev/null | /usr/bin/python3 "$HERE/pprofsum.py" "$reqs" >"$S/pprof.md"

# ---- Go benchmarks -------------------------------------------------------------------------
log "go test -bench"
count=$REPS
(cd "$ROOT" && go test ./replay ./rules -run '^$' -bench 'Lookup100k|KeyOfRequest|NewIndex100k|Handler|KeyNormalize' \
  -benchmem -count "$count" -benchtime 1s) >"$S/gobench.txt" 2>&1 || { cat "$S/gobench.txt" >&2; exit 1; }

echo "load_after: $(uptime | sed 's/.*load average: //')" >>"$S/machine.txt"
"$BIN/report" -dir "$S" -out "$OUT" -notes "$HERE/notes.md"
log "wrote $OUT"
