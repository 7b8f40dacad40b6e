#!/usr/bin/env bash
# Regenerates the graded examples in docs/examples/: for each demo task, a right and a wrong
# run, each graded by `pab grade` into result.json and report.html.
#
#   scripts/examples.sh          grade again from the committed answers and replay logs
#   scripts/examples.sh --logs   first make the replay logs again: pab replay and headless
#                                Chromium (Debian's chromium) open each run's pages
#
# The judge is docs/examples/judge.sh, which replays replies a person wrote (see
# docs/examples/README.md); a prompt without one is listed and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ex=docs/examples
pab=$(mktemp -d)/pab
go build -o "$pab" ./cmd/pab

# Runs: task, run name, then the URLs the "agent" opens in order.
runs=(
	"books-sapiens-price right http://books.toscrape.com/"
	"books-sapiens-price wrong http://books.toscrape.com/ http://books.toscrape.com/catalogue/sapiens-a-brief-history-of-humankind_996/index.html http://books.toscrape.com/catalogue/category/books/history_32/index.html"
	"archive-org-jobs right http://www.archive.org/ http://www.archive.org/about/about.php http://www.archive.org/about/jobs.php"
	"archive-org-jobs wrong http://www.archive.org/ http://www.archive.org/about/contact.php http://www.archive.org/jobs/"
	"lil-former-projects right https://lil.law.harvard.edu/projects/"
	"lil-former-projects wrong https://lil.law.harvard.edu/ https://lil.law.harvard.edu/projects/perma-cc/ https://lil.law.harvard.edu/projects/"
)

make_log() { # task run url...
	local task=$1 run=$2
	shift 2
	local dir=$ex/$task/$run port=18931 prof
	prof=$(mktemp -d)
	rm -f "$dir/replay.jsonl"
	"$pab" replay "$task" --listen 127.0.0.1:$port --log "$dir/replay.jsonl" >"$prof/replay.out" 2>&1 &
	local rp=$!
	for _ in $(seq 50); do
		grep -q "press Ctrl-C" "$prof/replay.out" 2>/dev/null && break
		sleep 0.2
	done
	local spki
	spki=$("$pab" ca --spki)
	for u in "$@"; do
		timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
			--disable-component-update --disable-sync --no-first-run --user-data-dir="$prof/profile" \
			--proxy-server=http://127.0.0.1:$port --ignore-certificate-errors-spki-list="$spki" \
			--virtual-time-budget=5000 --dump-dom "$u" >/dev/null 2>>"$prof/chromium.err" || true
	done
	kill "$rp"
	wait "$rp" || true
	rm -rf "$prof"
	echo "$dir/replay.jsonl: $(wc -l <"$dir/replay.jsonl") requests"
}

if [ "${1:-}" = "--logs" ]; then
	for r in "${runs[@]}"; do
		# shellcheck disable=SC2086
		make_log $r
	done
fi

rm -rf "$ex/judge/pending"
status=0
for r in "${runs[@]}"; do
	read -r task run _ <<<"$r"
	dir=$ex/$task/$run
	echo "== $task $run"
	"$pab" grade "$task" --log "$dir/replay.jsonl" --answer "$dir/answer.txt" --out "$dir" \
		--judge cli --judge-cmd "$ex/judge.sh" --no-cache || status=1
done
if [ -d "$ex/judge/pending" ]; then
	echo "prompts without a written reply: $ex/judge/pending/ (write judge/<sha256>.txt for each)" >&2
	status=1
fi
exit $status
