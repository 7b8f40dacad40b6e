#!/usr/bin/env bash
# deploy/check-images.sh [TASK]
#
# Builds the two FROM-scratch images (replay, and the task image of TASK, default
# books-sapiens-price) with deploy/build-images.sh under podman, offline, twice, and checks:
#   - both builds give the same tags (content digests) and the same image digests;
#   - the replay image holds /bin/pab, /bin/pab-pod and /pab/repo/sites/_default.yaml, the task image
#     /bin/pab-pod and /task/tasks/TASK/{task.yaml,recording/manifest.json}, and no testdata/;
#   - both run as user 65532.
# Images are only built and inspected, not run (running containers fails in this sandbox).
# Needs podman (apt-get install podman) and Go.
set -euo pipefail
task=${1:-books-sapiens-price}
root=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'check-images: %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }
command -v podman >/dev/null 2>&1 || fail "podman not found (apt-get install podman)"
reg="localhost/pab-check"
a=$("$root/deploy/build-images.sh" --registry "$reg" "$task")
b=$("$root/deploy/build-images.sh" --registry "$reg" "$task")
say "$(echo "$a" | tr '\n' ';')"
[ "$a" = "$b" ] || fail "two builds differ: [$a] [$b]"
replay=$(echo "$a" | awk '$1=="replay"{print $2}')
timg=$(echo "$a" | awk -v k="task/$task" '$1==k{print $2}')
[ -n "$replay" ] && [ -n "$timg" ] || fail "missing image lines: $a"
files() { # IMAGE: the image's file list
	local m
	m=$(podman image mount "$1")
	(cd "$m" && find . | sort)
	podman image unmount "$1" >/dev/null
}
check_has() { # IMAGE LISTING PATH...
	local img=$1 list=$2
	shift 2
	for p in "$@"; do grep -qx "./$p" <<<"$list" || fail "$img has no /$p"; done
}
rl=$(files "$replay")
check_has "$replay" "$rl" bin/pab bin/pab-pod pab/repo/sites/_default.yaml pab/repo/tasks
tl=$(files "$timg")
check_has "$timg" "$tl" bin/pab-pod "task/tasks/$task/task.yaml" "task/tasks/$task/recording/manifest.json"
! grep -q "/testdata" <<<"$tl" || fail "$timg holds testdata/"
for img in "$replay" "$timg"; do
	u=$(podman image inspect --format '{{.Config.User}}' "$img")
	[ "$u" = "65532:65532" ] || fail "$img runs as \"$u\""
done
say "PASS: $replay ($(wc -l <<<"$rl") paths), $timg ($(wc -l <<<"$tl") paths), same tags and digests on a rebuild"
