# scripts/apt.sh: sourced by pab's scripts (scripts/, .ci/, deploy/) for every apt-get they
# run, so that a busy machine (unattended upgrades, cloud-init, a second CI job holding the
# dpkg lock) delays them instead of failing them:
#
#   . "$root/scripts/apt.sh"
#   apt_install PACKAGE...     apt-get update, then apt-get install -y PACKAGE... (quiet)
#   apt_install_missing CMD:PACKAGE...
#                              apt_install the packages whose command is not found (on PATH
#                              or in /usr/sbin), saying which; nothing when none is missing
#   apt_get ARGS...            apt-get ARGS..., waiting for the locks
#
# Every apt-get here gets -o DPkg::Lock::Timeout=600: it waits up to 10 minutes for the dpkg
# lock (/var/lib/dpkg/lock-frontend and lock). apt-get update does not honour that option
# for the lock of the package lists (/var/lib/apt/lists/lock, apt 2.6), so apt_get update
# retries for up to 10 minutes while another process holds that lock. Not root: through sudo.
# docs/testing.md "The dpkg lock"; scripts/apt-lock-test.sh shows it.

# PAB_TEST_APT_TOOLS are the Debian packages scripts/test.sh installs when their command is
# missing (CMD:PACKAGE): chromium for the browser tests; Xvfb, the display of the headed
# tests of pab guard (cmd/pab/guard_owner_test.go); node and npm for warcio.js
# (recording/warcio_test.go), @playwright/mcp and the agent CLIs; mount(8) for the full-disk
# tests' tmpfs (batch/run_test.go TestRunDiskFull; CI runs as root, so they never skip);
# mitmdump, the mitmproxy capture whose HAR cmd/pab/har_test.go TestHARMitmproxy imports.
PAB_TEST_APT_TOOLS=(chromium:chromium Xvfb:xvfb node:nodejs npm:npm mount:mount mitmdump:mitmproxy)

# PAB_APT_LOCK_TIMEOUT is the wait in seconds (600; a knob for scripts/apt-lock-test.sh).
PAB_APT_LOCK_TIMEOUT=${PAB_APT_LOCK_TIMEOUT:-600}

apt_get() {
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	if [ "${1:-}" != update ]; then
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$PAB_APT_LOCK_TIMEOUT" "$@"
		return
	fi
	local log deadline=$((SECONDS + PAB_APT_LOCK_TIMEOUT)) said=0
	log=$(mktemp)
	while :; do
		if $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$PAB_APT_LOCK_TIMEOUT" "$@" >"$log" 2>&1; then
			cat "$log"
			rm -f "$log"
			return 0
		fi
		if ! grep -q 'Could not get lock' "$log" || [ "$SECONDS" -ge "$deadline" ]; then
			cat "$log" >&2
			rm -f "$log"
			return 1
		fi
		if [ "$said" = 0 ]; then
			echo "apt: another process holds the package lists' lock; waiting (up to ${PAB_APT_LOCK_TIMEOUT} s)" >&2
			said=1
		fi
		sleep 2
	done
}

apt_install() {
	apt_get update -qq && apt_get install -y -qq "$@" >/dev/null
}

apt_install_missing() {
	local missing=() spec
	for spec in "$@"; do
		command -v "${spec%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${spec%%:*}" ] || missing+=("${spec#*:}")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	echo "apt: installing ${missing[*]}" >&2
	apt_install "${missing[@]}"
}
