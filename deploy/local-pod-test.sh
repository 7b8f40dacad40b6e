#!/usr/bin/env bash
# deploy/local-pod-test.sh [TASK [URL [TITLE]]]
#
# The local isolation check of a replay "pod", without Docker: two network namespaces joined
# by one veth pair and nothing else. `pab replay TASK` runs in one, Chromium (`pab browser
# --proxy`) in the other. The script opens URL over the Chrome DevTools Protocol, waits for
# the page title, and checks that
#   - the page rendered from the recording (its title, and the replay log's line for URL),
#   - the browser's namespace has no route out: only the pair's /30 is routed, and a
#     connection to an address outside it fails at once (no route, so no packet leaves),
#   - the replay's namespace has no route out either.
# It needs root, iproute2 (ip netns), curl and Debian's chromium. Namespaces, processes and
# files are removed on every exit path.
set -euo pipefail

task=${1:-lil-former-projects}
url=${2:-https://lil.law.harvard.edu/projects/}
want_title=${3:-Projects | Library Innovation Lab}
root=$(cd "$(dirname "$0")/.." && pwd)

say() { printf 'local-pod-test: %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (ip netns); run it with sudo"
for tool in ip curl chromium go; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (Debian packages: iproute2, curl, chromium; Go 1.26)"
done

work=$(mktemp -d /tmp/pab-pod.XXXXXX)
ns_r="pabr$$"
ns_b="pabb$$"
veth_r="pr$$"
veth_b="pb$$"
addr_r=10.231.7.1
addr_b=10.231.7.2
pids=()

cleanup() {
	local code=$?
	for pid in "${pids[@]}"; do
		kill -INT "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	ip netns del "$ns_r" 2>/dev/null || true
	ip netns del "$ns_b" 2>/dev/null || true
	rm -rf "$work"
	exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "building pab"
(cd "$root" && go build -o "$work/pab" ./cmd/pab)
pab() { "$work/pab" --repo "$root" "$@"; }
export PAB_CACHE="$work/cache"
# unpack the recording and make the CA before the namespaces exist
pab replay "$task" --check >/dev/null 2>&1 || fail "pab replay $task --check failed"

say "namespaces $ns_r (replay, $addr_r) and $ns_b (browser, $addr_b), one veth pair"
ip netns add "$ns_r"
ip netns add "$ns_b"
ip link add "$veth_r" type veth peer name "$veth_b"
ip link set "$veth_r" netns "$ns_r"
ip link set "$veth_b" netns "$ns_b"
ip -n "$ns_r" addr add "$addr_r/30" dev "$veth_r"
ip -n "$ns_b" addr add "$addr_b/30" dev "$veth_b"
for ns in "$ns_r" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_r" link set "$veth_r" up
ip -n "$ns_b" link set "$veth_b" up

ip netns exec "$ns_r" "$work/pab" --repo "$root" replay "$task" --listen "$addr_r:8899" --log "$work/replay.jsonl" \
	>"$work/replay.out" 2>"$work/replay.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "on http://" "$work/replay.err" && break; sleep 0.1; done
grep -q "on http://" "$work/replay.err" || fail "pab replay did not start: $(cat "$work/replay.err")"
say "$(grep 'on http://' "$work/replay.err")"

say "isolation of the browser's namespace"
routes=$(ip -n "$ns_b" route)
say "  routes: $(echo "$routes" | tr '\n' ';')"
[ "$(echo "$routes" | grep -vc "^10.231.7.0/30 ")" = 0 ] || fail "the browser's namespace has other routes: $routes"
# addresses of the documentation ranges (RFC 5737), standing for the internet: with no route the
# kernel refuses the connect at once (ENETUNREACH); nothing is sent
for out in 192.0.2.1 198.51.100.1 203.0.113.1; do
	for ns in "$ns_b" "$ns_r"; do
		if ip netns exec "$ns" timeout 5 bash -c "exec 3<>/dev/tcp/$out/443" 2>/dev/null; then
			fail "a connection from $ns to $out succeeded"
		fi
	done
	say "  $out unreachable from both namespaces"
done
health=$(ip netns exec "$ns_b" curl -s --max-time 5 --proxy "http://$addr_r:8899" http://rr.control/health) ||
	fail "the browser's namespace cannot reach the replay"
say "  the replay answers across the pair: rr.control/health = $health"

say "starting Chromium in $ns_b through the replay"
ip netns exec "$ns_b" env PAB_CACHE="$PAB_CACHE" "$work/pab" --repo "$root" browser --proxy "$addr_r:8899" \
	>"$work/browser.out" 2>"$work/browser.err" &
pids+=($!)
for _ in $(seq 300); do grep -q "CDP ws://" "$work/browser.err" && break; sleep 0.1; done
ws=$(grep -o 'CDP ws://[^ ]*' "$work/browser.err" | head -1 | cut -c5-) || true
[ -n "$ws" ] || fail "pab browser printed no CDP address: $(cat "$work/browser.err")"
cdp=$(echo "$ws" | sed -E 's#^ws://([^/]+)/.*#\1#')
say "  CDP $ws"

say "opening $url over CDP"
ip netns exec "$ns_b" curl -s --max-time 10 -X PUT "http://$cdp/json/new?$url" >"$work/new.json" ||
	fail "CDP /json/new failed"
title=""
for _ in $(seq 150); do
	title=$(ip netns exec "$ns_b" curl -s --max-time 5 "http://$cdp/json/list" |
		python3 -c 'import json,sys
url=sys.argv[1]
for t in json.load(sys.stdin):
    if t.get("type")=="page" and t.get("url")==url and t.get("title") not in ("", url):
        print(t["title"]); break' "$url") || true
	# while the page loads, Chromium shows its URL without the scheme as the title: wait
	# for the page's own title (or the time limit) instead of taking the first one seen
	[ "$title" = "$want_title" ] && break
	sleep 0.2
done
say "  title: $title"
[ "$title" = "$want_title" ] || fail "page title is \"$title\", want \"$want_title\""

# stop the browser and the replay so the log is complete
for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
pids=()
# the log's request lines only: its first line is the replay-start header (replay.LogHeader:
# "event", "recording"; no "source"), which is no request. An error in a summary fails the
# step (assignments, not arguments, so set -e sees a failing python3).
line=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l) if l.strip() else {}
    if "event" in d:
        continue
    if d.get("url")==sys.argv[2] and d.get("type")=="document":
        print(d["source"], d["status"]); break' "$work/replay.jsonl" "$url") ||
	fail "cannot read the replay log $work/replay.jsonl"
say "  replay log for the page: $line"
[ "$line" = "exact 200" ] || fail "the page was not answered from the recording ($line)"
summary=$(python3 -c 'import json,sys,collections
c=collections.Counter()
for l in open(sys.argv[1]):
    d=json.loads(l) if l.strip() else {}
    if d and "event" not in d:
        c[d["source"]]+=1
print("%d requests; by source: %s" % (sum(c.values()), dict(sorted(c.items()))))' "$work/replay.jsonl") ||
	fail "cannot summarize the replay log $work/replay.jsonl"
say "  replay log: $summary"
say "PASS: $url rendered from the recording in an isolated namespace"
