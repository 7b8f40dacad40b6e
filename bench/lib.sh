# bench/lib.sh: shell functions the bench scripts share; sourced, not run.

# peer_addr ERRFILE PID: prints the host:port of the first http://127.0.0.1:PORT address
# in ERRFILE, where a peer (pab replay, bench/baseline, bench/shell) says it once it
# listens. It waits for it up to 10 minutes (a large recording's first start builds its
# index first); status 1, printing nothing, when PID exits before or the time passes.
peer_addr() {
  local a
  for _ in $(seq 6000); do
    a=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$1" 2>/dev/null | head -1 | sed 's,http://,,') || true
    if [ -n "$a" ]; then
      echo "$a"
      return 0
    fi
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
