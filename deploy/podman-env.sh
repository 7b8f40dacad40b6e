# deploy/podman-env.sh: sourced by pab's bash scripts that run containers with podman.
#
#   . "$root/deploy/podman-env.sh"
#   pab_podman_init "$work" localhost/pab/replay:TAG [CMD...]   # CMD default: --help
#   "${PODMAN[@]}" run --rm --network none IMAGE ...
#
# pab_podman_init WORKDIR IMAGE [CMD...] finds out how podman can run containers here:
#   1. it runs `podman run --rm --network none --pull=never IMAGE CMD` (CMD must exit 0);
#      when that works, podman's own runtime is used (a laptop, a CI runner);
#   2. when that fails because the kernel refuses setrlimit (crun: "setrlimit
#      RLIMIT_NOFILE: Operation not permitted", runc: "error setting rlimit type 7"; the
#      sandboxed machines pab is developed on), it builds deploy/runc-wrapper into
#      WORKDIR/runc-wrapper (an OCI runtime that deletes process.rlimits from the
#      container's config.json and execs runc; docs/deploy.md), writes the real runc's
#      path to WORKDIR/runc-wrapper.runtime, and runs the same container with
#      `podman --runtime WORKDIR/runc-wrapper`; it installs runc with apt-get when it is
#      missing (and says so);
#   3. any other failure is an error (the output of podman is printed).
# It sets PODMAN, an array (`podman`, or `podman --runtime WRAPPER`), and exports
# PAB_PODMAN_RUNTIME (the wrapper's path, or empty when none is needed), prints one line
# on stderr saying which it chose and why, and returns 0; on failure it prints why and
# returns 1. WORKDIR must outlive every container started with the wrapper (podman calls
# the runtime again to stop and delete them). Needs Go to build the wrapper.

# _pab_podman_root: the repository holding this file.
_pab_podman_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# pab_rlimit_refused TEXT: true when TEXT (podman's output) is the kernel's setrlimit
# refusal, as crun (`setrlimit `RLIMIT_NOFILE`: Operation not permitted`) or runc
# (`error setting rlimit type 7`) report it.
pab_rlimit_refused() {
	grep -Eq 'setrlimit[^A-Za-z]+RLIMIT_[A-Z]+[^A-Za-z]*: Operation not permitted|error setting rlimit type [0-9]+' <<<"$1"
}

pab_podman_init() {
	local workdir=${1:?pab_podman_init WORKDIR IMAGE [CMD...]} image=${2:?pab_podman_init WORKDIR IMAGE [CMD...]}
	shift 2
	local cmd=("$@")
	[ ${#cmd[@]} -gt 0 ] || cmd=(--help)
	PODMAN=(podman)
	export PAB_PODMAN_RUNTIME=""
	if ! command -v podman >/dev/null 2>&1; then
		echo "podman-env: podman not found (Debian: apt-get install -y podman)" >&2
		return 1
	fi
	local out
	if out=$(podman run --rm --network none --pull=never "$image" "${cmd[@]}" 2>&1 </dev/null); then
		echo "podman-env: podman's own runtime runs containers ($image ${cmd[*]} exited 0); no wrapper" >&2
		return 0
	fi
	if ! pab_rlimit_refused "$out"; then
		printf 'podman-env: podman run %s %s failed, and not with the setrlimit refusal the wrapper works around:\n%s\n' \
			"$image" "${cmd[*]}" "$(tail -n 5 <<<"$out")" >&2
		return 1
	fi
	local refusal
	refusal=$(grep -Eo 'setrlimit[^A-Za-z]+RLIMIT_[A-Z]+[^A-Za-z]*: Operation not permitted|error setting rlimit type [0-9]+' <<<"$out" | head -n 1)
	local runc="" c
	for c in "$(command -v runc 2>/dev/null || true)" /usr/bin/runc /usr/sbin/runc; do
		if [ -n "$c" ] && [ -x "$c" ]; then
			runc=$c
			break
		fi
	done
	if [ -z "$runc" ]; then
		echo "podman-env: runc missing, the wrapper needs it: apt-get install -y runc" >&2
		. "$_pab_podman_root/scripts/apt.sh" # waits for the dpkg lock of a busy machine
		if ! apt_get install -y -q runc >/dev/null 2>&1; then
			echo "podman-env: apt-get install -y runc failed (as root? apt-get update first?)" >&2
			return 1
		fi
		runc=$(command -v runc 2>/dev/null || echo /usr/sbin/runc)
	fi
	if ! mkdir -p "$workdir"; then
		echo "podman-env: cannot create $workdir" >&2
		return 1
	fi
	local wrapper
	wrapper="$(cd "$workdir" && pwd)/runc-wrapper"
	if ! (cd "$_pab_podman_root" && CGO_ENABLED=0 go build -trimpath -o "$wrapper" ./deploy/runc-wrapper); then
		echo "podman-env: go build ./deploy/runc-wrapper failed" >&2
		return 1
	fi
	if ! { printf '%s\n' "$runc" >"$wrapper.runtime.tmp" && mv "$wrapper.runtime.tmp" "$wrapper.runtime"; }; then
		echo "podman-env: cannot write $wrapper.runtime" >&2
		return 1
	fi
	if ! out=$(podman --runtime "$wrapper" run --rm --network none --pull=never "$image" "${cmd[@]}" 2>&1 </dev/null); then
		printf 'podman-env: the kernel refuses setrlimit (%s), and podman --runtime %s failed too:\n%s\n' \
			"$refusal" "$wrapper" "$(tail -n 5 <<<"$out")" >&2
		return 1
	fi
	PODMAN=(podman --runtime "$wrapper")
	export PAB_PODMAN_RUNTIME=$wrapper
	echo "podman-env: the kernel refuses setrlimit ($refusal); using the runtime wrapper $wrapper (runc: $runc)" >&2
	return 0
}
