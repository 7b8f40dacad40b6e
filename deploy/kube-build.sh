#!/usr/bin/env bash
# deploy/kube-build.sh [OUTDIR]: build kube-apiserver and kube-controller-manager from the
# Go module proxy, through the wrapper module in deploy/kube/ (its own go.mod and go.sum,
# committed, so no `go mod tidy` is needed here).
#
# OUTDIR defaults to ${PAB_CACHE:-$HOME/.cache/pab}/kube/$KUBE_VERSION/. When both
# binaries are there with a stamp that matches the version and go.sum's SHA-256, they are
# reused. Each binary is built to a temporary name in OUTDIR and renamed into place; the
# stamp is written last, the same way. Prints how long each build took.
#
# Exit: 0 on success, 1 on a build error, 2 on bad usage.
set -euo pipefail

# The one place the Kubernetes version is pinned. deploy/kube/go.mod must require the same
# k8s.io/kubernetes version (and its replace lines the matching v0.x staging releases).
KUBE_VERSION=v1.37.2

here=$(cd "$(dirname "$0")" && pwd)
mod="$here/kube"

usage() { echo "usage: deploy/kube-build.sh [OUTDIR]" >&2; exit 2; }
case "${1:-}" in -h|--help) usage ;; esac
[ $# -le 1 ] || usage

out=${1:-${PAB_CACHE:-$HOME/.cache/pab}/kube/$KUBE_VERSION}

for f in go.mod go.sum tools.go; do
	[ -f "$mod/$f" ] || { echo "kube-build: $mod/$f is missing" >&2; exit 1; }
done
if ! grep -Eq "^require k8s.io/kubernetes $KUBE_VERSION\$" "$mod/go.mod"; then
	echo "kube-build: $mod/go.mod does not require k8s.io/kubernetes $KUBE_VERSION (KUBE_VERSION in $0)" >&2
	exit 1
fi

sum=$(sha256sum "$mod/go.sum" | cut -d' ' -f1)
stamp="$KUBE_VERSION go.sum-sha256:$sum"
bins=(kube-apiserver kube-controller-manager)

mkdir -p "$out"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] &&
	[ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ]; then
	echo "kube-build: reusing $out/kube-apiserver and $out/kube-controller-manager ($stamp)"
	exit 0
fi
rm -f "$out/stamp"

tmp=()
cleanup() { [ ${#tmp[@]} -eq 0 ] || rm -f "${tmp[@]}"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The version the binaries report (`--version`, /version), as Kubernetes's own builds set it.
minor=${KUBE_VERSION#v*.}; minor=${minor%%.*}
major=${KUBE_VERSION#v}; major=${major%%.*}
vflags="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
vflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
vflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

cd "$mod"
for b in "${bins[@]}"; do
	t="$out/.$b.tmp.$$"
	tmp+=("$t")
	echo "kube-build: building $b $KUBE_VERSION (go $(go env GOVERSION), CGO_ENABLED=0) ..."
	start=$(date +%s)
	# -mod=readonly: go.mod and go.sum are committed; a build never rewrites them. GOWORK=off:
	# no go.work of the caller changes which modules are used.
	if ! CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false \
		-ldflags="-s -w $vflags" -o "$t" "k8s.io/kubernetes/cmd/$b"; then
		echo "kube-build: go build k8s.io/kubernetes/cmd/$b failed" >&2
		exit 1
	fi
	mv -f "$t" "$out/$b"
	end=$(date +%s)
	echo "kube-build: built $out/$b ($(du -m "$out/$b" | cut -f1) MB) in $((end - start))s"
done

printf '%s\n' "$stamp" > "$out/.stamp.tmp.$$"
tmp+=("$out/.stamp.tmp.$$")
mv -f "$out/.stamp.tmp.$$" "$out/stamp"
"$out/kube-apiserver" --version
echo "kube-build: done, $out"
