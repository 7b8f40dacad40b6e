#!/usr/bin/env bash
# deploy/browser-rootfs.sh [OUT]
#
# Builds the base of pab's browser image: a Debian bookworm root file system made with
# debootstrap (--variant=minbase) from the mirror apt already uses, plus Debian's
# `chromium`, `fonts-liberation` and `ca-certificates` (no recommended packages), cleaned
# (apt lists and caches, logs, documentation but copyright files, man pages, message
# catalogs and Mesa's GPU drivers left out, /etc/machine-id empty),
# written as a normalized tar (names sorted, one fixed mtime, numeric owners) to OUT,
# default ${PAB_CACHE:-$HOME/.cache/pab}/deploy/browser-rootfs.tar. deploy/build-images.sh
# --browser-rootfs OUT imports it (docs/deploy.md, "The browser rootfs").
#
# Cache: OUT.stamp beside OUT holds this script's SHA-256; when OUT exists and the stamp
# matches, OUT is reused and nothing is built. Change the script (or delete OUT) to rebuild.
#
# Mirror: the first `URIs:` of a bookworm stanza of /etc/apt/sources.list.d/debian.sources
# (or the first bookworm `deb` line of /etc/apt/sources.list), and the same for
# bookworm-security (Debian ships Chromium's updates there); $PAB_DEBIAN_MIRROR and
# $PAB_DEBIAN_SECURITY_MIRROR override them. Needs root and a reachable Debian mirror;
# installs debootstrap with apt-get when it is missing. /proc is not mounted in the chroot
# (apt and these packages' scripts do not need it); whatever debootstrap leaves mounted
# under the work directory is unmounted on every exit path.
set -euo pipefail

self=$(readlink -f "$0")
out=${1:-${PAB_CACHE:-$HOME/.cache/pab}/deploy/browser-rootfs.tar}
say() { printf 'browser-rootfs: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

[ $# -le 1 ] || fail "usage: deploy/browser-rootfs.sh [OUT]"
case "$out" in -*) fail "usage: deploy/browser-rootfs.sh [OUT] (OUT may not start with -)" ;; esac
want=$(sha256sum "$self" | cut -c1-64)
if [ -f "$out" ] && [ -f "$out.stamp" ] && [ "$(head -c 64 "$out.stamp")" = "$want" ]; then
	say "reusing $out (stamp matches this script, sha256 ${want:0:16})"
	echo "$out"
	exit 0
fi
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot)"

# mirror SUITE: the URI apt uses for SUITE (bookworm or bookworm-security), empty if none.
mirror() {
	local suite=$1 f=/etc/apt/sources.list.d/debian.sources
	if [ -f "$f" ]; then
		# deb822: stanzas separated by blank lines; take the first URI of the first
		# stanza whose Suites field lists SUITE as a whole word.
		awk -v want="$suite" '
			BEGIN { RS=""; FS="\n" }
			{
				uris=""; hit=0
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^URIs:/) { split(substr($i, 6), u, " "); for (k in u) if (u[k] != "") { uris=u[k]; break } }
					if ($i ~ /^Suites:/) { n=split(substr($i, 8), s, " "); for (j = 1; j <= n; j++) if (s[j] == want) hit=1 }
				}
				if (hit && uris != "") { print uris; exit }
			}' "$f"
	elif [ -f /etc/apt/sources.list ]; then
		awk -v want="$suite" '$1=="deb" { u=$2; s=$3; if ($2 ~ /^\[/) { u=$3; s=$4 } if (s==want) { print u; exit } }' /etc/apt/sources.list
	fi
}
main_mirror=${PAB_DEBIAN_MIRROR:-$(mirror bookworm)}
sec_mirror=${PAB_DEBIAN_SECURITY_MIRROR:-$(mirror bookworm-security)}
main_mirror=${main_mirror:-http://deb.debian.org/debian}
[[ "$main_mirror" =~ ^https?://[A-Za-z0-9._:/@%~+-]+$ ]] || fail "bad mirror URI \"$main_mirror\" (from apt's sources or \$PAB_DEBIAN_MIRROR)"
[ -z "$sec_mirror" ] || [[ "$sec_mirror" =~ ^https?://[A-Za-z0-9._:/@%~+-]+$ ]] || fail "bad security mirror URI \"$sec_mirror\""

if ! command -v debootstrap >/dev/null 2>&1; then
	say "debootstrap missing: apt-get install -y debootstrap"
	. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/apt.sh" # waits for the dpkg lock of a busy machine
	apt_get install -y -q debootstrap >/dev/null || fail "apt-get install debootstrap failed"
fi

mkdir -p "$(dirname "$out")"
work=$(mktemp -d "${TMPDIR:-/tmp}/pab-rootfs.XXXXXX")
rootfs="$work/rootfs"

# unmount_all: unmount every mount point under $work, deepest first.
unmount_all() {
	local m
	# /proc/self/mounts escapes spaces as \040; $work has none (mktemp's template).
	for m in $(awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
	done
}
child=""
# run CMD...: runs CMD in a process group of its own in the background and waits for it,
# so that a signal reaches the traps at once (bash runs traps only between commands) and
# the trap can stop CMD with everything it started (dpkg, apt's download methods).
run() {
	setsid "$@" &
	child=$!
	local code=0
	wait "$child" || code=$?
	child=""
	return "$code"
}
cleanup() {
	local code=$?
	if [ -n "$child" ]; then
		kill -TERM -- "-$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	unmount_all
	if awk -v w="$work/" 'index($2, w) == 1 { found=1 } END { exit !found }' /proc/self/mounts; then
		say "mounts remain under $work; not removing it"
	else
		rm -rf --one-file-system "$work"
	fi
	rm -f "$out.tmp" "$out.stamp.tmp"
	exit "$code"
}
trap cleanup EXIT
trap 'say "interrupted; cleaning up"; exit 130' INT TERM

start=$(date +%s)
keyring=()
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] && keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
say "debootstrap --variant=minbase bookworm from $main_mirror (a few minutes)"
run debootstrap --variant=minbase --include=ca-certificates "${keyring[@]}" bookworm "$rootfs" "$main_mirror" \
	>"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
say "debootstrap done in $(($(date +%s) - start)) s"

# apt sources inside the rootfs: the same mirrors, main component only.
rm -f "$rootfs/etc/apt/sources.list"
{
	printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$main_mirror"
	if [ -n "$sec_mirror" ]; then
		printf '\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$sec_mirror"
	fi
} >"$rootfs/etc/apt/sources.list.d/debian.sources"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf" 2>/dev/null || true
# What dpkg leaves out of the packages it installs: documentation (copyright files kept),
# man and info pages, message catalogs (Chromium carries its own locales), and Mesa's GPU
# drivers with the LLVM and Z3 libraries only they load (about 190 MB): the browser runs
# with --disable-gpu and renders with the SwiftShader in /usr/lib/chromium; the ldd check
# below proves nothing Chromium links is missing.
mkdir -p "$rootfs/etc/dpkg/dpkg.cfg.d"
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/pab-excludes" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/lib/*/dri/*
path-exclude=/usr/lib/*/libLLVM-*
path-exclude=/usr/lib/*/libz3.so*
path-exclude=/usr/lib/chromium/libVkLayer_khronos_validation.so
EOF
# no service may start inside the chroot
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 755 "$rootfs/usr/sbin/policy-rc.d"

t=$(date +%s)
say "apt-get install chromium fonts-liberation in the chroot"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
run chroot "$rootfs" apt-get -o DPkg::Lock::Timeout=600 -q update >"$work/apt.log" 2>&1 || { tail -n 20 "$work/apt.log" >&2; fail "apt-get update in the chroot failed (log above)"; }
run chroot "$rootfs" apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends chromium fonts-liberation ca-certificates \
	>>"$work/apt.log" 2>&1 || { tail -n 20 "$work/apt.log" >&2; fail "apt-get install in the chroot failed (log above)"; }
chroot "$rootfs" apt-get -o DPkg::Lock::Timeout=600 clean
version=$(chroot "$rootfs" dpkg-query -W -f '${Version}' chromium)
say "chromium $version installed in $(($(date +%s) - t)) s"

# clean: what changes from one build to the next and what a browser does not need
rm -f "$rootfs/usr/sbin/policy-rc.d"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
	"$rootfs"/var/lib/dpkg/*-old "$rootfs"/var/cache/ldconfig/aux-cache \
	"$rootfs"/tmp/* "$rootfs"/var/tmp/* "$rootfs"/root/.bash_history \
	"$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$rootfs/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
find "$rootfs/var/log" -type f -delete
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
: >"$rootfs/etc/resolv.conf" # the container runtime provides it
echo pab-browser >"$rootfs/etc/hostname"
[ -x "$rootfs/usr/bin/chromium" ] || fail "no /usr/bin/chromium in the rootfs"
missing=$(chroot "$rootfs" ldd /usr/lib/chromium/chromium | grep 'not found' || true)
[ -z "$missing" ] || fail "chromium links libraries the rootfs lacks: $missing"

# Every file gets the tar's one mtime now, and fontconfig's caches are made again after:
# they record their font directory's mtime, so made before they would differ from one
# build to the next and be stale in the image (fontconfig would rebuild them at every
# browser start, in $HOME). Made after, two builds from the same packages give the same tar.
find "$rootfs" -xdev -exec touch -h -d @946684800 {} +
chroot "$rootfs" fc-cache --system-only --really-force >/dev/null || fail "fc-cache in the chroot failed"

# /dev's nodes stay out: every container runtime mounts its own /dev.
tar -C "$rootfs" --sort=name --numeric-owner --mtime=@946684800 --format=gnu --one-file-system \
	--exclude='./dev/*' -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "$want  deploy/browser-rootfs.sh (chromium $version)" >"$out.stamp.tmp"
mv "$out.stamp.tmp" "$out.stamp"
say "wrote $out ($(du -m "$out" | cut -f1) MB, sha256 $(sha256sum "$out" | cut -c1-16)) in $(($(date +%s) - start)) s"
echo "$out"
