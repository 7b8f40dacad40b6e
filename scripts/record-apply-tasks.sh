#!/usr/bin/env bash
# Rebuilds the recordings of the application-form tasks tasks/apply-* (see
# tools/applyfixture). It starts the fixture server (HTTPS for every fixture host on one
# loopback port, with a throw-away CA), then for each task runs `pab record` with
# --resolve HOST:443 to the fixture and --upstream-ca its CA, and plays the task's
# scenario in headless Chromium through the recording proxy: every page, every submit
# path, the confirmation and error pages (pab record adds the 404 probe of each host).
# Finally it checks each task with `pab replay --check` and plays the scenario again
# through `pab replay`.
#
# Everything runs in a new network namespace (unshare -n, which needs root or user
# namespaces) that has only the loopback interface, so no request can leave the machine.
#
# usage: [PAB=path/to/pab] scripts/record-apply-tasks.sh [TASK...]   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

if [ "${APPLYFIXTURE_NETNS:-}" != 1 ]; then
	exec unshare -n env APPLYFIXTURE_NETNS=1 "$0" "$@"
fi
ip link set lo up
ifaces=$(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ' | sed 's/ $//')
if [ "$ifaces" != "lo" ]; then
	echo "record-apply-tasks: network interfaces besides lo: $ifaces; refusing to record" >&2
	exit 1
fi

declare -A site=([apply-greenhouse-axon]=greenhouse [apply-teamtailor-harper]=teamtailor [apply-adversarial]=acme)
declare -A hosts=(
	[apply-greenhouse-axon]="job-boards.greenhouse.io"
	[apply-teamtailor-harper]="harper-demo.teamtailor.com"
	[apply-adversarial]="careers.acme-robotics.test evil.example.test"
)
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(apply-greenhouse-axon apply-teamtailor-harper apply-adversarial)

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

export PAB_CACHE="${PAB_CACHE:-$tmp/cache}"
# PAB=/path/to/pab uses a pab binary already built (else ./cmd/pab is built)
if [ -n "${PAB:-}" ]; then
	pab=$PAB
else
	go build -o "$tmp/pab" ./cmd/pab
	pab="$tmp/pab"
fi
go build -o "$tmp/applyfixture" ./tools/applyfixture
spki=$("$pab" ca --spki)

"$tmp/applyfixture" serve -listen 127.0.0.1:0 -ca-out "$tmp/fixture-ca.pem" -addr-out "$tmp/fixture-addr" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/fixture-addr" ] && break; sleep 0.1; done
fixture=$(cat "$tmp/fixture-addr")
fixture_port=${fixture##*:}

# wait_addr FILE: the proxy address pab printed on stderr ("... on http://ADDR")
wait_addr() {
	for _ in $(seq 200); do
		a=$(sed -n 's/.* on http:\/\/\([0-9.:]*\)$/\1/p' "$1" 2>/dev/null | head -n1 || true)
		if [ -n "$a" ]; then echo "$a"; return 0; fi
		sleep 0.1
	done
	echo "record-apply-tasks: no proxy address in $1:" >&2
	cat "$1" >&2
	return 1
}

for t in "${tasks[@]}"; do
	s=${site[$t]:?unknown task $t}
	echo "== record $t (scenario $s)"
	rm -rf "tasks/$t/recording" "$PAB_CACHE/record/$t"
	rm -f "tasks/$t"/rules/*.auto.yaml
	args=()
	for h in ${hosts[$t]}; do args+=(--resolve "$h:443:127.0.0.1:$fixture_port"); done
	"$pab" record --task "$t" --listen 127.0.0.1:0 --upstream-ca "$tmp/fixture-ca.pem" "${args[@]}" \
		>"$tmp/$t.record.out" 2>"$tmp/$t.record.err" &
	rec=$!
	pids+=($rec)
	addr=$(wait_addr "$tmp/$t.record.err")
	"$tmp/applyfixture" drive -site "$s" -proxy "$addr" -spki "$spki" -files "tasks/$t/testdata"
	sleep 1 # let the not-found probes finish
	kill -INT "$rec"
	wait "$rec" || { cat "$tmp/$t.record.err" >&2; exit 1; }
	cat "$tmp/$t.record.out"
	# The inferred rules exclude captcha and bot-check pages from replay; the guard must
	# meet them, so the inferred file goes (the hand-written rules/*.yaml stay).
	for f in "tasks/$t"/rules/*.auto.yaml; do
		[ -e "$f" ] || continue
		echo "removing inferred $f:"
		sed 's/^/  /' "$f"
		rm -f "$f"
	done
	grep -E 'stored|warning' "$tmp/$t.record.err" || true
	cp "$PAB_CACHE/record/$t/record.log.jsonl" "$tmp/$t.record.log.jsonl" 2>/dev/null || true
	# every request the recorder forwarded went to the fixture hosts; others failed inside
	# the namespace (upstream-error) and are not in the recording
	if [ -f "$tmp/$t.record.log.jsonl" ]; then
		echo "record log of $t: events by host"
		jq -r 'select(.url) | .event + " " + (.url | split("/")[2])' "$tmp/$t.record.log.jsonl" | sort | uniq -c
	fi
done

for t in "${tasks[@]}"; do
	echo "== replay --check $t"
	"$pab" replay "$t" --check
	echo "== drive ${site[$t]} through pab replay $t"
	"$pab" replay "$t" --listen 127.0.0.1:0 --log "$tmp/$t.replay.jsonl" 2>"$tmp/$t.replay.err" &
	rp=$!
	pids+=($rp)
	addr=$(wait_addr "$tmp/$t.replay.err")
	"$tmp/applyfixture" drive -replay -site "${site[$t]}" -proxy "$addr" -spki "$spki" -files "tasks/$t/testdata"
	kill -INT "$rp"
	wait "$rp" || true
	echo "replay log of $t: requests by source and type"
	jq -r '.source + " " + .type' "$tmp/$t.replay.jsonl" | sort | uniq -c
	echo "replay log of $t: misses and POSTs"
	jq -r 'select(.source == "miss" or .method == "POST") | "  " + .source + " " + (.status|tostring) + " " + .method + " " + .url' "$tmp/$t.replay.jsonl"
done
