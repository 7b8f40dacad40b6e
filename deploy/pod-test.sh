#!/usr/bin/env bash
# deploy/pod-test.sh [TASK]
#
# One batch of pab as a real pod, with podman and no network, from the manifests
# `pab k8s render` writes (TASK default books-sapiens-price):
#   1. builds the replay, task, agent and browser images (deploy/build-images.sh; the
#      browser image from the Debian rootfs of deploy/browser-rootfs.sh, cached);
#   2. renders the task's Job and runs its pod with deploy/runpod: `podman pod create
#      --network none`, the task container copies the task in (init), the collector,
#      the replay and Chromium start as native sidecars with their startup probes, the
#      reference agent (cmd/refagent --cdp) opens the plan's pages in the pod's Chromium
#      and answers, the sidecars stop in reverse order and the collector copies the run
#      to the results directory (the PersistentVolumeClaim);
#   3. `pab run --collect` grades it: score 1, and every request of the replay log was
#      answered from the recording, but for Chromium's own traffic the site rules block
#      and what the recording does not hold (each miss is checked with `pab inspect` on
#      the host: a miss in the pod must be a miss outside it too);
#   4. the same pod with an agent that tries to reach the outside (an IP literal and a DNS
#      name: a DNS lookup, a direct connection, a GET through the replay, a page in the
#      browser): every direct attempt fails inside the pod, whose only interface is lo,
#      and the replay log shows the proxied ones as misses;
#   5. a cold start of the replay image on the 75 MB bench recording (bench/gen).
# It prints how long each step took, the image digests and sizes. Needs root, podman,
# runc (installed when missing), Go. Everything it starts is removed on every exit path
# (PAB_POD_TEST_KEEP=1 keeps the work directory, its logs and results, for a look).
set -euo pipefail

task=${1:-books-sapiens-price}
root=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'pod-test: %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }
t_start=$(date +%s.%N)
since() { python3 -c "import sys,time; print('%.1f s' % (time.time()-float(sys.argv[1])))" "$1"; }

[ "$(id -u)" = 0 ] || fail "needs root (podman pods as root; see docs/deploy.md)"
command -v go >/dev/null 2>&1 || fail "go not found"
if ! command -v podman >/dev/null 2>&1; then
	say "installing podman"
	. "$root/scripts/apt.sh"
	apt_install podman
fi

work=$(mktemp -d /tmp/pab-podtest.XXXXXX)
cleanup() {
	local code=$?
	for p in $(podman pod ls --filter "label=pab.dev/pod-test=$$" -q 2>/dev/null); do podman pod rm -f "$p" >/dev/null 2>&1 || true; done
	rm -rf "$work"
	exit "$code"
}
trap cleanup EXIT
[ -z "${PAB_POD_TEST_KEEP:-}" ] || trap - EXIT
trap 'exit 130' INT TERM

say "building pab and runpod"
(cd "$root" && go build -o "$work/pab" ./cmd/pab && go build -o "$work/runpod" ./deploy/runpod)
pab() { "$work/pab" --repo "$root" "$@"; }

t=$(date +%s.%N)
rootfs=${PAB_BROWSER_ROOTFS:-${PAB_CACHE:-$HOME/.cache/pab}/deploy/browser-rootfs.tar}
bash "$root/deploy/browser-rootfs.sh" "$rootfs" >&2
say "browser rootfs $rootfs ($(du -m "$rootfs" | cut -f1) MB) in $(since "$t")"

t=$(date +%s.%N)
reg=localhost/pab-podtest
bash "$root/deploy/build-images.sh" --registry "$reg" --browser-rootfs "$rootfs" --images-file "$work/images.txt" "$task" >"$work/images.out"
say "images built in $(since "$t"):"
while read -r kind ref digest; do
	size=$(podman image inspect --format '{{.Size}}' "$ref")
	say "  $kind $ref $digest $((size / 1000000)) MB"
done <"$work/images.out"
img() { awk -v k="$1" '$1==k{print $2}' "$work/images.out"; }
replay_img=$(img replay)
agent_img=$(img agent)
[ -n "$replay_img" ] && [ -n "$agent_img" ] && [ -n "$(img browser)" ] && [ -n "$(img "task/$task")" ] ||
	fail "build-images.sh did not build replay, agent, browser and task/$task: $(cat "$work/images.out")"

. "$root/deploy/podman-env.sh"
pab_podman_init "$work" "$replay_img" || fail "podman cannot run containers here"

# run_pod NAME AGENT-COMMAND: render TASK's Job as batch NAME with the agent command,
# run its pod 0 with runpod, and leave the results under $work/results/NAME.
run_pod() {
	local batch=$1 cmd=$2 t
	pab k8s render --offline --results-claim pab-results --images "$work/images.txt" --agent-image "$agent_img" --agent-command "$cmd" \
		--batch "$batch" --out "$work/k8s-$batch" "$task" 2>/dev/null
	mkdir -p "$work/results"
	t=$(date +%s.%N)
	"$work/runpod" --label "pab.dev/pod-test=$$" --volume-dir "pab-results=$work/results" --status-file "$work/$batch.status.json" \
		--logs "$work/logs-$batch" "$work/k8s-$batch/job-$task.yaml" 2> >(tee "$work/$batch.runpod" >&2) ||
		{ for f in "$work/logs-$batch"/*.log; do say "--- $f"; tail -20 "$f"; done; return 1; }
	say "pod of batch $batch ran in $(since "$t")"
}

say "1. the task's pod, with the reference agent in the pod's Chromium"
run_pod podtest "/bin/refagent,--plans,/plans,--cdp" || fail "the pod failed"
ready=$(grep -o '+ *[0-9.]*s sidecar replay started' "$work/podtest.runpod" | grep -o '[0-9.]*s' | head -1)
say "  from podman pod create to the replay's first answered request (its startup probe): $ready"
run_dir="$work/results/podtest/$task/1"
[ -s "$run_dir/replay.jsonl" ] || fail "the collector copied no replay.jsonl to $run_dir"
grep -q "refagent: browser opened" "$run_dir/agent.stdout" || fail "the agent did not open its pages in the pod's browser: $(cat "$run_dir/agent.stdout")"
say "  $(grep 'browser opened' "$run_dir/agent.stdout" | head -1)"

say "2. grading: pab run --collect"
pab run --collect "$work/results/podtest" --judge cli --judge-cmd "$root/docs/examples/judge.sh" >"$work/grade.out" 2>&1 ||
	{ cat "$work/grade.out"; fail "pab run --collect failed"; }
python3 - "$work/results/podtest/summary.json" "$run_dir/replay.jsonl" "$work/pab" "$root" "$task" <<'EOF' || fail "grading or the replay log is not as expected"
import collections, json, subprocess, sys
s = json.load(open(sys.argv[1]))
runs = s["runs"]
assert len(runs) == 1, f"{len(runs)} runs"
r = runs[0]
print(f"pod-test:   run {r['task']} #{r['repeat']}: status {r['status']}, score {r.get('score')}")
assert r["status"] == "graded" and r.get("score") == 1, r
src = collections.Counter()
notes = []
bad = []
for line in open(sys.argv[2]):
    d = json.loads(line)
    if "event" in d or d.get("url", "").startswith("http://rr.control/"):
        continue  # the log's header line; the probes' control requests
    s = d["source"]
    src[s] += 1
    if s in ("exact", "search", "promo", "fuzzy"):
        continue
    what = f"{s} {d['method']} {d['url'][:100]} ({d.get('type')})"
    if s == "blocked" and d.get("type") == "tracker":
        notes.append(what + ": Chromium's own traffic, blocked by the site rules")
        continue
    # a miss is right only where the recording holds nothing for the request: ask
    # `pab inspect` on the host, outside the pod, for the same request
    out = subprocess.run([sys.argv[3], "--repo", sys.argv[4], "inspect", "--json", sys.argv[5], d["url"]],
                         capture_output=True, text=True)
    host = json.loads(out.stdout).get("source") if out.returncode == 0 else "error: " + out.stderr.strip()
    if s == "miss" and host == "miss":
        notes.append(what + ": not in the recording (pab inspect on the host: miss too)")
    else:
        bad.append(f"{what}, pab inspect on the host: {host}")
print(f"pod-test:   replay log: {sum(src.values())} requests, by source {dict(sorted(src.items()))}")
for n in notes:
    print("pod-test:     " + n)
assert not bad, "requests answered otherwise than the recording says: " + "; ".join(bad)
EOF

say "3. an agent that tries to reach the outside"
run_pod egress "/bin/refagent,--plans,/plans,--cdp,--mode,egress" || fail "the egress pod failed"
e_dir="$work/results/egress/$task/1"
sed 's/^/pod-test:   /' "$e_dir/agent.stdout"
grep -qx 'egress: interfaces: lo' "$e_dir/agent.stdout" || fail "the pod has interfaces other than lo"
for h in 1.1.1.1 example.com; do
	grep -q "^egress: direct $h:443: failed" "$e_dir/agent.stdout" || fail "a direct connection to $h:443 did not fail"
done
grep -q '^egress: dns example.com: failed' "$e_dir/agent.stdout" || fail "the DNS lookup of example.com did not fail"
python3 - "$e_dir/replay.jsonl" <<'EOF' || fail "the replay log does not show the outside requests as misses"
import json, sys
seen = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    for h in ("1.1.1.1", "example.com"):
        if d.get("url", "").startswith(f"https://{h}/"):
            seen.setdefault(h, []).append(d["source"])
for h in ("1.1.1.1", "example.com"):
    assert seen.get(h), f"no request to {h} in the replay log"
    assert all(s == "miss" for s in seen[h]), f"{h}: {seen[h]}"
    print(f"pod-test:   replay log: https://{h}/ -> {', '.join(seen[h])}")
EOF

say "4. cold start of the replay image on the 75 MB bench recording"
t=$(date +%s.%N)
(cd "$root" && go run ./bench/gen -out "$work/bench" -size 75MB >/dev/null)
say "  generated $(du -m "$work/bench/repo/tasks/bench/recording" | cut -f1) MB (published) in $(since "$t")"
mkdir -p "$work/bench-cache" "$work/bench-log" "$work/bench-tmp" && chmod 0777 "$work/bench-cache" "$work/bench-log" "$work/bench-tmp"
"${PODMAN[@]}" pod create --name "pab-podtest-bench-$$" --label "pab.dev/pod-test=$$" --network none >/dev/null
t=$(date +%s.%N)
"${PODMAN[@]}" run -d --pod "pab-podtest-bench-$$" --name "pab-podtest-bench-$$-replay" --pull=never --user 65532:65532 \
	--read-only --read-only-tmpfs=false --mount "type=bind,src=$work/bench/repo/tasks,dst=/pab/repo/tasks,ro=true" \
	--mount "type=bind,src=$work/bench-cache,dst=/pab/cache" --mount "type=bind,src=$work/bench-tmp,dst=/tmp" \
	--mount "type=bind,src=$work/bench-log,dst=/pab/log" "$replay_img" \
	--repo /pab/repo replay bench --listen 127.0.0.1:8899 --log /pab/log/replay.jsonl >/dev/null
ok=""
for _ in $(seq 600); do
	if "${PODMAN[@]}" exec "pab-podtest-bench-$$-replay" /bin/pab-pod probe --proxy 127.0.0.1:8899 http://rr.control/health >/dev/null 2>&1; then
		ok=1
		break
	fi
	sleep 0.05
done
[ -n "$ok" ] || { "${PODMAN[@]}" logs "pab-podtest-bench-$$-replay" | tail; fail "the bench replay did not start"; }
say "  replay container on the 75 MB recording answered $(since "$t") after podman run (cold: empty cache)"

say "PASS in $(since "$t_start")"
