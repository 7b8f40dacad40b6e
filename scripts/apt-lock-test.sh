#!/usr/bin/env bash
# scripts/apt-lock-test.sh: shows that .ci/run's apt step waits for a dpkg lock that another
# process holds, instead of failing at once (docs/testing.md "The dpkg lock"). Root only, on
# Debian. It:
#   1. takes the locks a concurrent `apt-get install` and `apt-get update` hold
#      (/var/lib/dpkg/lock-frontend, /var/lib/dpkg/lock, /var/lib/apt/lists/lock) with
#      fcntl, as apt and dpkg take them (a flock(1) lock does not conflict with theirs), for
#      HOLD seconds (default 60), and waits until they are held;
#   2. checks that a plain `apt-get install` fails at once on them (the control);
#   3. runs `.ci/run --apt-only` with one package to install (CI_APT_EXTRA: an absent
#      command mapped to the installed package bash, so apt-get update and install both run)
#      and checks that it succeeds, and only after the locks were released.
set -euo pipefail
cd "$(dirname "$0")/.."
HOLD=${HOLD:-60}
[ "$(id -u)" = 0 ] || { echo "apt-lock-test: needs root (it takes the dpkg lock)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "apt-lock-test: needs python3 (to hold the locks with fcntl)" >&2; exit 1; }
work=$(mktemp -d)
holder=""
cleanup() {
	[ -z "$holder" ] || kill "$holder" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
python3 - "$HOLD" "$work/held" <<'PY' &
import fcntl, sys, time
hold, ready = float(sys.argv[1]), sys.argv[2]
files = [open(p, "a") for p in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/lib/apt/lists/lock")]
for f in files:
    fcntl.lockf(f, fcntl.LOCK_EX)
open(ready, "w").close()
time.sleep(hold)
PY
holder=$!
for _ in $(seq 600); do
	[ -e "$work/held" ] && break
	kill -0 "$holder" 2>/dev/null || { echo "apt-lock-test: the lock holder died" >&2; exit 1; }
	sleep 0.1
done
[ -e "$work/held" ] || { echo "apt-lock-test: the locks were not taken in 60 s" >&2; exit 1; }
t0=$SECONDS
echo "apt-lock-test: the dpkg and package-list locks are held for ${HOLD} s by pid $holder"

if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade bash >"$work/plain.log" 2>&1; then
	echo "apt-lock-test: FAIL: a plain apt-get install did not notice the held lock" >&2
	exit 1
fi
grep -q 'Could not get lock' "$work/plain.log" || { cat "$work/plain.log" >&2; echo "apt-lock-test: FAIL: the plain apt-get failed for another reason" >&2; exit 1; }
echo "apt-lock-test: control: a plain apt-get install fails at once: $(grep -m1 'Could not get lock' "$work/plain.log")"

if ! CI_APT_EXTRA="pab-apt-lock-test-absent:bash" ./.ci/run --apt-only; then
	echo "apt-lock-test: FAIL: .ci/run --apt-only failed while another process held the lock" >&2
	exit 1
fi
took=$((SECONDS - t0))
if kill -0 "$holder" 2>/dev/null; then
	echo "apt-lock-test: FAIL: .ci/run's apt step ended after ${took} s while the locks were still held" >&2
	exit 1
fi
echo "apt-lock-test: PASS: .ci/run's apt step waited for the locks and succeeded ${took} s after they were taken (held ${HOLD} s)"
