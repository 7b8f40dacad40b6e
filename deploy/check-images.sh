#!/usr/bin/env bash
# deploy/check-images.sh [TASK]
#
# Builds pab's images (replay, the task image of TASK (default books-sapiens-price), agent
# and browser) with deploy/build-images.sh under podman, offline, twice (--force --no-cache:
# every image, the browser's base included, is really built both times), and checks:
#   - both builds give the same tags (content digests) and the same image digests;
#   - the replay image holds /bin/pab, /bin/pab-pod and /pab/repo/sites/_default.yaml, the
#     task image /bin/pab-pod and /task/tasks/TASK/{task.yaml,recording/manifest.json} and
#     no testdata/, the agent image /bin/refagent and /plans/<id>/refagent.yaml for every
#     task that has a plan, the browser image /usr/bin/chromium and /usr/local/bin/{pab,
#     pab-pod,chromium-pod};
#   - all four run as user 65532;
# then runs each image once with podman (deploy/podman-env.sh: podman's own runtime, or the
# runc wrapper where the kernel refuses setrlimit), every container with --network none
# and a read-only root (the agent's excepted: the manifests leave it writable):
#   - task: its default command copies the task into a volume mounted at /out;
#   - replay: its default command serves the one task of that volume (mounted at
#     /pab/repo/tasks) on 0.0.0.0:8899; `pab replay TASK --check` serves that volume and
#     requests every recorded page through itself;
#   - agent: `refagent --help`;
#   - browser: Chromium headless as user 65532 with /tmp a tmpfs dumps the DOM of a page
#     whose script writes 6*7, and `pab browser --proxy` (the pod's command) answers its
#     startup probe (pab-pod probe .../json/version);
# then `build-images.sh --load kind=pab-check` and `--load k3s` with stand-ins for kind and
# k3s (neither runs here) that check their command lines and load each archive with podman;
# and prints each image's size and how long each step took.
#
# The browser's base is the rootfs tar $PAB_BROWSER_ROOTFS, default
# ${PAB_CACHE:-$HOME/.cache/pab}/deploy/browser-rootfs.tar, made (or reused, when its stamp
# matches) by deploy/browser-rootfs.sh, which needs root and a Debian mirror.
# Needs podman (apt-get install podman), Go, and runc where the wrapper is needed.
set -euo pipefail
task=${1:-books-sapiens-price}
root=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'check-images: %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }
command -v podman >/dev/null 2>&1 || fail "podman not found (apt-get install podman)"
[[ "$task" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || fail "bad task id \"$task\""
reg="localhost/pab-check"
work=$(mktemp -d /tmp/pab-check-images.XXXXXX)
vol="pab-check-$$-tasks"
ctr="pab-check-$$-browser"
cleanup() {
	local code=$?
	podman rm -f -t 2 "$ctr" >/dev/null 2>&1 || true
	podman volume rm -f "$vol" >/dev/null 2>&1 || true
	rm -rf "$work"
	exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

rootfs=${PAB_BROWSER_ROOTFS:-${PAB_CACHE:-$HOME/.cache/pab}/deploy/browser-rootfs.tar}
if [ -z "${PAB_BROWSER_ROOTFS:-}" ] || [ ! -f "$rootfs" ]; then
	t=$(now)
	"$root/deploy/browser-rootfs.sh" "$rootfs" >/dev/null || fail "deploy/browser-rootfs.sh $rootfs failed"
	say "browser rootfs $rootfs ready in $(since "$t")"
fi

t=$(now)
a=$("$root/deploy/build-images.sh" --force --no-cache --registry "$reg" --browser-rootfs "$rootfs" "$task")
say "first build in $(since "$t")"
t=$(now)
b=$("$root/deploy/build-images.sh" --force --no-cache --registry "$reg" --browser-rootfs "$rootfs" "$task")
say "second build in $(since "$t")"
printf '%s\n' "$a" | sed 's/^/check-images:   /'
[ "$a" = "$b" ] || fail "two builds differ: [$a] [$b]"
img() { awk -v k="$1" '$1==k{print $2}' <<<"$a"; }
replay=$(img replay)
timg=$(img "task/$task")
agent=$(img agent)
browser=$(img browser)
[ -n "$replay" ] && [ -n "$timg" ] && [ -n "$agent" ] && [ -n "$browser" ] || fail "missing image lines: $a"

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
al=$(files "$agent")
check_has "$agent" "$al" bin/refagent
plans=0
for p in "$root"/tasks/*/refagent.yaml; do
	[ -f "$p" ] || continue
	check_has "$agent" "$al" "plans/$(basename "$(dirname "$p")")/refagent.yaml"
	plans=$((plans + 1))
done
bl=$(files "$browser")
check_has "$browser" "$bl" usr/bin/chromium usr/lib/chromium/chromium usr/local/bin/pab usr/local/bin/pab-pod usr/local/bin/chromium-pod
for img in "$replay" "$timg" "$agent" "$browser"; do
	u=$(podman image inspect --format '{{.Config.User}}' "$img")
	[ "$u" = "65532:65532" ] || fail "$img runs as \"$u\""
done
say "file lists and users ok: replay $(wc -l <<<"$rl") paths, task $(wc -l <<<"$tl"), agent $(wc -l <<<"$al") ($plans plans), browser $(wc -l <<<"$bl")"

# run them
. "$root/deploy/podman-env.sh"
pab_podman_init "$work" "$replay" --help || fail "podman cannot run containers here (above)"
P=("${PODMAN[@]}")
run=("${P[@]}" run --rm --network none --pull=never)

t=$(now)
out=$("${run[@]}" --read-only -v "$vol:/out" "$timg" 2>&1) || fail "task image's default command: $out"
say "task: default command copied the task to /out/$task in $(since "$t")"

t=$(now)
out=$("${run[@]}" --read-only -v "$vol:/pab/repo/tasks" --tmpfs /pab/cache --tmpfs /tmp \
	"$replay" replay "$task" --check 2>&1) || fail "replay $task --check: $(tail -n 20 <<<"$out")"
sed 's/^/check-images:   | /' <<<"$(tail -n 4 <<<"$out")"
say "replay: pab replay $task --check in the container passed in $(since "$t")"

# the replay image's default command serves the one task the volume holds
t=$(now)
cid=$("${P[@]}" run -d --network none --pull=never --read-only -v "$vol:/pab/repo/tasks" --tmpfs /pab/cache \
	--tmpfs /tmp --tmpfs /pab/log "$replay") || fail "replay image's default command did not start"
served=""
for _ in $(seq 150); do
	if served=$("${P[@]}" logs "$cid" 2>&1 | grep -m1 -E "^pab replay: $task \(.*\) on http://[^ ]*:8899$"); then
		break
	fi
	[ "$("${P[@]}" inspect --format '{{.State.Running}}' "$cid" 2>/dev/null)" = true ] || break
	sleep 0.2
done
logs=$("${P[@]}" logs "$cid" 2>&1 || true)
"${P[@]}" rm -f -t 2 "$cid" >/dev/null 2>&1 || true
[ -n "$served" ] || fail "replay image's default command did not serve $task: $(tail -n 10 <<<"$logs")"
say "replay: the default command serves $task ($served) in $(since "$t")"

t=$(now)
out=$("${run[@]}" "$agent" --help 2>&1) || fail "refagent --help: $out"
grep -q -- "-plans" <<<"$out" || fail "refagent --help printed no -plans: $out"
say "agent: refagent --help ok in $(since "$t")"

t=$(now)
page='data:text/html,<title>t</title><p id=x>no script</p><script>document.getElementById("x").textContent="six times seven is "+6*7</script>'
out=$("${run[@]}" --read-only --user 65532:65532 --tmpfs /tmp --entrypoint /usr/local/bin/chromium-pod \
	"$browser" --headless --dump-dom "$page" 2>&1) || fail "chromium-pod --headless --dump-dom: $(tail -n 20 <<<"$out")"
grep -q "six times seven is 42" <<<"$out" || fail "Chromium did not run the page's script: $(grep -v dbus <<<"$out" | tail -n 20)"
say "browser: Chromium $("${run[@]}" --read-only --tmpfs /tmp --entrypoint /usr/bin/chromium "$browser" --version 2>/dev/null | tr -s ' ' | sed 's/ *$//' | cut -d' ' -f2) headless, read-only root, user 65532: script ran, in $(since "$t")"

t=$(now)
"${P[@]}" run -d --name "$ctr" --network none --pull=never --read-only --user 65532:65532 \
	--tmpfs /tmp --tmpfs /pab/cache -e PAB_CACHE=/pab/cache --shm-size 256m "$browser" \
	--repo /tmp browser --proxy 127.0.0.1:8899 --port 9222 --chrome /usr/local/bin/chromium-pod >/dev/null
ok=0
for _ in $(seq 60); do
	if "${P[@]}" exec "$ctr" /usr/local/bin/pab-pod probe http://127.0.0.1:9222/json/version >/dev/null 2>&1; then
		ok=1
		break
	fi
	sleep 0.5
done
[ "$ok" = 1 ] || fail "pab browser in the container never answered its probe: $("${P[@]}" logs "$ctr" 2>&1 | grep -v dbus | tail -n 20)"
say "browser: pab browser --proxy answered the startup probe after $(since "$t")"
"${P[@]}" rm -f -t 2 "$ctr" >/dev/null

for img in "$replay" "$timg" "$agent" "$browser"; do
	sz=$(podman image inspect --format '{{.Size}}' "$img")
	say "size $img $sz bytes ($(awk -v s="$sz" 'BEGIN { printf "%.1f MB", s / 1e6 }'))"
done
# --load: the archives build-images.sh hands to kind and k3s. Neither runs here (kind
# needs a container runtime for its node containers, k3s a kubelet), so stand-ins check
# the exact command lines and load each archive with podman, as the node's containerd
# would import it.
mkdir -p "$work/fake"
for tool in kind k3s; do
	cat >"$work/fake/$tool" <<EOF
#!/bin/sh
case "$tool \$1 \$2" in
"kind load image-archive") [ "\$4 \$5" = "--name pab-check" ] || { echo "fake kind: \$*" >&2; exit 1; }; f=\$3 ;;
"k3s ctr images") [ "\$3" = import ] || { echo "fake k3s: \$*" >&2; exit 1; }; f=\$4 ;;
*) echo "fake $tool: unexpected \$*" >&2; exit 1 ;;
esac
echo "$tool \$*" >>"$work/fake/calls"
podman load -q -i "\$f" | grep -q '^Loaded image' || exit 1
EOF
	chmod +x "$work/fake/$tool"
done
PAB_KIND=$work/fake/kind "$root/deploy/build-images.sh" --registry "$reg" --load kind=pab-check "$task" >/dev/null ||
	fail "build-images.sh --load kind=pab-check"
PAB_K3S=$work/fake/k3s "$root/deploy/build-images.sh" --registry "$reg" --load k3s "$task" >/dev/null ||
	fail "build-images.sh --load k3s"
[ "$(grep -c '^kind load image-archive .*\.tar --name pab-check$' "$work/fake/calls")" = 3 ] &&
	[ "$(grep -c '^k3s ctr images import .*\.tar$' "$work/fake/calls")" = 3 ] ||
	{ cat "$work/fake/calls" >&2; fail "--load: want 3 kind and 3 k3s imports (replay, task, agent)"; }
say "--load kind=pab-check and --load k3s: 3 archives each, every one loadable ($(wc -l <"$work/fake/calls") imports)"
say "PASS: 4 images, same tags and digests on a rebuild, each ran; --load hands loadable archives to kind and k3s"
