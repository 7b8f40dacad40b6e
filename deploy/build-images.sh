#!/usr/bin/env bash
# deploy/build-images.sh [--registry REG] [--browser-rootfs TAR] [--images-file F] [--push [--tls-verify=false]]
#                        [--load kind[=CLUSTER]|k3s] [--platform linux/amd64|linux/arm64] [--force] [--no-cache] [TASK...]
#
# Builds pab's container images with podman (or docker when podman is missing):
#   REG/replay:TAG          static pab + pab-pod + sites/          (FROM scratch)
#   REG/task-<id>:TAG       pab-pod + tasks/<id>/ (recording packed) (FROM scratch), per TASK
#                           (default: every task of the repository); TASK is an id, or the
#                           task's directory: tasks/<id>, ./tasks/<id>/, or any path to it
#   REG/agent:TAG           the reference agent: static refagent + every tasks/<id>/refagent.yaml
#                           under /plans (FROM scratch), always built
#   REG/browser:TAG         Debian's Chromium + pab + pab-pod, only with --browser-rootfs TAR
#                           (or $PAB_BROWSER_ROOTFS): a tar of a debootstrap rootfs holding
#                           chromium (deploy/browser-rootfs.sh makes one), made a base image
#                           REG/browser-base:<its sha256> (FROM scratch, ADD; docs/deploy.md)
# TAG is the first 16 hex digits of the SHA-256 of a deterministic tar of the build context:
# exactly the files that go into the image (binaries, sites/, the task directory, the
# Dockerfile, and for the browser the base rootfs's SHA-256), so the same input gives the
# same tag, and any change gives a new one. Images are built with --timestamp 0, so the same
# context gives the same image. An image whose REG/NAME:TAG already exists is not built
# again ("exists" on stderr); --force builds it anyway, and --no-cache without podman's
# layer cache (so that a rebuild really builds: deploy/check-images.sh). For each image it prints
# `KIND NAME:TAG DIGEST` (KIND replay, task/<id>, agent, browser), and writes the same lines
# to --images-file (default: stdout only), which `pab k8s render --images` reads. REG
# defaults to localhost/pab. --push pushes every image to REG (log in first: podman login
# REGISTRY); --tls-verify=false lets podman push to a plain-HTTP registry (a local one).
# --load puts the images onto a local cluster's nodes without a registry: each is saved
# with `podman save --format docker-archive` and imported with `kind load image-archive
# FILE --name CLUSTER` (default cluster "kind") or `k3s ctr images import FILE` (into
# containerd's k8s.io namespace; run as root on the k3s node); $PAB_KIND and $PAB_K3S
# name other binaries. The pods reference the same NAME:TAG, never pulled (a tag that is
# not "latest" gets imagePullPolicy IfNotPresent).
# --platform builds the replay, task and agent images (FROM scratch, static Go binaries
# cross-compiled with GOARCH) for another architecture; the browser image is refused for
# an architecture other than the host's, since its Debian rootfs is the host's (build it
# on a machine of that architecture). One architecture per run: no manifest list.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
registry=localhost/pab
rootfs=${PAB_BROWSER_ROOTFS:-}
images_file=""
push=0
tls_verify=true
load=""
platform=""
force=0
nocache=()
tasks=()
while [ $# -gt 0 ]; do
	case "$1" in
	--registry) registry=${2:?--registry needs a value}; shift 2 ;;
	--browser-rootfs) rootfs=${2:?--browser-rootfs needs a file}; shift 2 ;;
	--images-file) images_file=${2:?--images-file needs a file}; shift 2 ;;
	--push) push=1; shift ;;
	--tls-verify=*) tls_verify=${1#--tls-verify=}; shift ;;
	--load) load=${2:?--load needs kind[=CLUSTER] or k3s}; shift 2 ;;
	--platform) platform=${2:?--platform needs linux/amd64 or linux/arm64}; shift 2 ;;
	--force) force=1; shift ;;
	--no-cache) nocache=(--no-cache); shift ;;
	-h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "build-images: unknown flag $1" >&2; exit 2 ;;
	*) tasks+=("$1"); shift ;;
	esac
done
[[ "$registry" =~ ^[a-z0-9]([a-z0-9._:/-]*[a-z0-9])?$ ]] || { echo "build-images: bad --registry $registry" >&2; exit 2; }
if command -v podman >/dev/null 2>&1; then
	engine=podman
elif command -v docker >/dev/null 2>&1; then
	engine=docker
else
	echo "build-images: neither podman nor docker found (Debian: apt-get install podman)" >&2
	exit 1
fi
case "$tls_verify" in true | false) ;; *) echo "build-images: --tls-verify=$tls_verify: want true or false" >&2; exit 2 ;; esac
[ "$tls_verify" = true ] || [ "$push" = 1 ] || { echo "build-images: --tls-verify=false is for --push" >&2; exit 2; }
[ "$tls_verify" = true ] || [ "$engine" = podman ] ||
	{ echo "build-images: --tls-verify=false needs podman (docker: list the registry under insecure-registries in /etc/docker/daemon.json)" >&2; exit 2; }
load_tool=""
load_cluster=""
case "$load" in
"") ;;
kind) load_tool=kind; load_cluster=kind ;;
kind=*) load_tool=kind; load_cluster=${load#kind=} ;;
k3s) load_tool=k3s ;;
*) echo "build-images: --load $load: want kind, kind=CLUSTER or k3s" >&2; exit 2 ;;
esac
[ -z "$load_cluster" ] || [[ "$load_cluster" =~ ^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$ ]] ||
	{ echo "build-images: --load kind=$load_cluster: bad cluster name" >&2; exit 2; }
if [ -n "$load_tool" ]; then
	load_bin=$([ "$load_tool" = kind ] && echo "${PAB_KIND:-kind}" || echo "${PAB_K3S:-k3s}")
	command -v "$load_bin" >/dev/null 2>&1 || {
		echo "build-images: --load $load: $load_bin not found (kind: go install sigs.k8s.io/kind@latest; k3s: run on the k3s node, where /usr/local/bin/k3s is)" >&2
		exit 1
	}
fi
host_arch=$(go env GOARCH)
goarch=$host_arch
case "$platform" in
"") ;;
linux/amd64) goarch=amd64 ;;
linux/arm64) goarch=arm64 ;;
*) echo "build-images: --platform $platform: want linux/amd64 or linux/arm64" >&2; exit 2 ;;
esac
if [ -n "$rootfs" ] && [ "$goarch" != "$host_arch" ]; then
	echo "build-images: --platform $platform with --browser-rootfs: the browser's Debian rootfs is built for this host ($host_arch); build the browser image on a linux/$goarch machine (the other images cross-build here)" >&2
	exit 2
fi
platform_args=()
[ -z "$platform" ] || platform_args=(--platform "$platform")
if [ ${#tasks[@]} -eq 0 ]; then
	for d in "$root"/tasks/*/; do
		[ -f "$d/task.yaml" ] && [ -d "$d/recording" ] && tasks+=("$(basename "$d")")
	done
fi
# task_id ARG: the task id of ARG, an id or a path to $root/tasks/<id> (tasks/<id>,
# ./tasks/<id>/, an absolute path); empty when ARG is neither.
task_id() {
	local a=$1 d
	if [[ "$a" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
		echo "$a"
		return
	fi
	[[ "$a" == */* ]] || return 0
	d=$(cd "$a" 2>/dev/null && pwd -P) || return 0
	if [ "$(dirname "$d")" = "$(cd "$root/tasks" 2>/dev/null && pwd -P)" ]; then
		basename "$d"
	fi
}
ids=()
for a in "${tasks[@]}"; do
	t=$(task_id "$a")
	[[ "$t" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "build-images: bad task \"$a\": want a task id or a directory tasks/<id> of $root" >&2; exit 2; }
	ids+=("$t")
done
tasks=("${ids[@]+"${ids[@]}"}")
for t in "${tasks[@]}"; do
	[ -f "$root/tasks/$t/task.yaml" ] || { echo "build-images: no task $t in $root/tasks" >&2; exit 1; }
	[ -d "$root/tasks/$t/recording" ] || { echo "build-images: task $t has no recording" >&2; exit 1; }
done
if [ -n "$rootfs" ] && [ ! -f "$rootfs" ]; then
	echo "build-images: --browser-rootfs $rootfs is not a file" >&2
	exit 1
fi

work=$(mktemp -d /tmp/pab-images.XXXXXX)
trap 'rm -rf "$work"' EXIT
say() { printf 'build-images: %s\n' "$*" >&2; }

say "building static pab, pab-pod and refagent"
# The lite build (-tags pab_lite: replay, browser, ca, inspect, stats, audit, export,
# rules, tasks) is all the images run: about 12 MB instead of 88 MB, without the judges'
# SDKs, the MCP SDK, chromedp and the Kubernetes types.
export GOARCH=$goarch
say "binaries for linux/$goarch"
(cd "$root" && CGO_ENABLED=0 go build -tags pab_lite -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$work/bin/pab" ./cmd/pab)
(cd "$root" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$work/bin/pab-pod" ./deploy/pod)
(cd "$root" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$work/bin/refagent" ./cmd/refagent)

# normalize DIR: the same modes whatever the umask and the checkout: directories 755,
# files 644 or 755 (executable bits kept), except the sticky mount points made 1777 on
# purpose. podman builds the image with these modes, so the image does not depend on them.
normalize() {
	find "$1" ! -perm -1000 -exec chmod u+rwX,go+rX,go-w {} +
}
# digest DIR: SHA-256 of a tar of DIR with names sorted and owners and times fixed, so
# only names, contents and modes count.
digest() {
	tar -C "$1" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@946684800 \
		--format=gnu -cf - . | sha256sum | cut -c1-64
}

out_lines=()
# build KIND NAME CONTEXT [BUILD ARGS...]
build() {
	local kind=$1 name=$2 ctx=$3
	shift 3
	local sum tag ref id
	normalize "$ctx"
	sum=$(digest "$ctx")
	tag=${sum:0:16}
	ref="$registry/$name:$tag"
	if [ "$force" = 0 ] && "$engine" image inspect "$ref" >/dev/null 2>&1; then
		say "$kind: $ref exists (same content tag); not rebuilt (--force rebuilds)"
	else
		say "$kind: $engine build $ref"
		if [ "$engine" = podman ]; then
			podman build --quiet --timestamp 0 --pull=never "${platform_args[@]+"${platform_args[@]}"}" "${nocache[@]+"${nocache[@]}"}" "$@" -t "$ref" "$ctx" >/dev/null
		else
			docker build --quiet "${platform_args[@]+"${platform_args[@]}"}" "${nocache[@]+"${nocache[@]}"}" "$@" -t "$ref" "$ctx" >/dev/null
		fi
	fi
	if [ "$engine" = podman ]; then
		id=$(podman image inspect --format '{{.Digest}}' "$ref")
	else
		id=$(docker image inspect --format '{{.Id}}' "$ref")
	fi
	if [ "$push" = 1 ]; then
		say "$kind: push $ref"
		if [ "$engine" = podman ]; then
			podman push --quiet --tls-verify="$tls_verify" "$ref" >/dev/null
		else
			docker push --quiet "$ref" >/dev/null
		fi
	fi
	out_lines+=("$kind $ref $id")
	echo "$kind $ref $id"
}

# replay image
ctx="$work/replay"
mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/pab/repo/tasks" "$ctx/rootfs/pab/cache" "$ctx/rootfs/pab/log" "$ctx/rootfs/tmp"
cp "$root/deploy/replay/Dockerfile" "$ctx/"
cp "$work/bin/pab" "$work/bin/pab-pod" "$ctx/rootfs/bin/"
cp -r "$root/sites" "$ctx/rootfs/pab/repo/sites"
# mount points a pod fills with emptyDirs; writable by anyone (like /tmp) so that the image
# also runs on its own (podman copies a mount point's mode into a new named volume)
chmod 1777 "$ctx/rootfs/tmp" "$ctx/rootfs/pab/cache" "$ctx/rootfs/pab/log"
build replay replay "$ctx"

# task images
for t in "${tasks[@]}"; do
	ctx="$work/task-$t"
	mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/task/tasks" "$ctx/rootfs/out"
	chmod 1777 "$ctx/rootfs/out"
	# the default command copies the task to /out/<id> (seed 003: "run the task image once
	# with a volume at /out"); exec-form CMD takes no build arguments, so it is written here
	{
		cat "$root/deploy/task/Dockerfile"
		printf 'LABEL dev.pab.task="%s"\nCMD ["install-task", "/task/tasks/%s", "/out/%s"]\n' "$t" "$t" "$t"
	} >"$ctx/Dockerfile"
	cp "$work/bin/pab-pod" "$ctx/rootfs/bin/"
	# the task directory without its test fixtures; no symlinks (pab-pod refuses them)
	(cd "$root/tasks" && tar --exclude="$t/testdata" -cf - "$t") | tar -C "$ctx/rootfs/task/tasks" -xf -
	if [ -n "$(find "$ctx/rootfs/task" ! -type f ! -type d)" ]; then
		echo "build-images: task $t holds something other than files and directories" >&2
		exit 1
	fi
	build "task/$t" "task-$(echo "$t" | tr 'A-Z_' 'a-z-')" "$ctx"
done

# agent image: the reference agent and every task's plan
ctx="$work/agent"
mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/plans" "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
cp "$root/deploy/agent/Dockerfile" "$ctx/"
cp "$work/bin/refagent" "$ctx/rootfs/bin/"
for plan in "$root"/tasks/*/refagent.yaml; do
	[ -f "$plan" ] || continue
	t=$(basename "$(dirname "$plan")")
	mkdir -p "$ctx/rootfs/plans/$t"
	cp "$plan" "$ctx/rootfs/plans/$t/refagent.yaml"
done
build agent agent "$ctx"

# browser image, on a base made from the rootfs tar
if [ -n "$rootfs" ]; then
	base_sum=$(sha256sum "$rootfs" | cut -c1-64)
	base="$registry/browser-base:${base_sum:0:16}"
	# The base is built (FROM scratch, ADD the tar) rather than `podman import`ed: an import
	# stamps the image with the time it ran, so the browser image's digest would depend on
	# when its base was imported; a build with --timestamp 0 gives the same base anywhere.
	if [ "$force" = 1 ] || ! "$engine" image inspect "$base" >/dev/null 2>&1; then
		bctx="$work/browser-base"
		mkdir -p "$bctx"
		ln "$rootfs" "$bctx/rootfs.tar" 2>/dev/null || cp "$rootfs" "$bctx/rootfs.tar"
		printf 'FROM scratch\nADD rootfs.tar /\n' >"$bctx/Dockerfile"
		say "browser-base: $engine build $base from $rootfs"
		if [ "$engine" = podman ]; then
			podman build --quiet --timestamp 0 --pull=never "${nocache[@]+"${nocache[@]}"}" -t "$base" "$bctx" >/dev/null
		else
			docker build --quiet "${nocache[@]+"${nocache[@]}"}" -t "$base" "$bctx" >/dev/null
		fi
		rm -rf "$bctx"
	else
		say "browser-base: $base exists"
	fi
	ctx="$work/browser"
	mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/pab/cache"
	chmod 1777 "$ctx/rootfs/pab/cache" # a mount point, as in the replay image
	cp "$root/deploy/browser/Dockerfile" "$ctx/"
	cp "$work/bin/pab" "$work/bin/pab-pod" "$root/deploy/browser/chromium-pod" "$ctx/rootfs/usr/local/bin/"
	echo "$base_sum" >"$ctx/BASE.sha256" # the base counts in the tag
	build browser browser "$ctx" --build-arg "BASE=$base"
else
	say "no --browser-rootfs: browser image not built (docs/deploy.md, Containers)"
fi

if [ -n "$load_tool" ]; then
	mkdir -p "$work/load"
	for line in "${out_lines[@]}"; do
		ref=$(echo "$line" | cut -d' ' -f2)
		ar="$work/load/$(echo "$ref" | tr '/:' '__').tar"
		"$engine" save --format docker-archive -o "$ar" "$ref" >/dev/null 2>&1 ||
			"$engine" save -o "$ar" "$ref" >/dev/null || { echo "build-images: $engine save $ref failed" >&2; exit 1; }
		if [ "$load_tool" = kind ]; then
			say "load: $load_bin load image-archive $(basename "$ar") --name $load_cluster ($ref)"
			"$load_bin" load image-archive "$ar" --name "$load_cluster" >&2 || { echo "build-images: kind load image-archive $ref failed" >&2; exit 1; }
		else
			say "load: $load_bin ctr images import $(basename "$ar") ($ref)"
			"$load_bin" ctr images import "$ar" >&2 || { echo "build-images: k3s ctr images import $ref failed" >&2; exit 1; }
		fi
		rm -f "$ar"
	done
fi

if [ -n "$images_file" ]; then
	{
		echo "# written by deploy/build-images.sh; read by pab k8s render --images"
		printf '%s\n' "${out_lines[@]}"
	} >"$images_file.tmp"
	mv "$images_file.tmp" "$images_file"
	say "wrote $images_file"
fi
