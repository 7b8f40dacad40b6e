#!/usr/bin/env bash
# The test command of pab (README "Tests"). It installs what the tests need when it is
# missing (Debian's chromium, for the browser tests), then vets and runs every test with the
# race detector. Set FUZZTIME (for example FUZZTIME=10s) to also run each fuzz target that long.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
	echo "test.sh: chromium not found; installing Debian's chromium" >&2
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# Xvfb (Debian's xvfb) is the display of the headed-browser tests of pab guard
# (cmd/pab/guard_owner_test.go: --headed, and the owner's visible Chromium for
# --cdp-endpoint); they fail in CI without it.
if ! command -v Xvfb >/dev/null 2>&1; then
	echo "test.sh: Xvfb not found; installing Debian's xvfb" >&2
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xvfb >/dev/null
fi

# warcio.js (npm package warcio, pinned in tools/warcio/package-lock.json) reads pab's
# exported WARC files in warc/warcio_test.go; that test fails in CI without it.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "test.sh: node or npm not found; installing Debian's nodejs and npm" >&2
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
npm ci --prefix tools/warcio --no-audit --no-fund --silent
# @playwright/mcp (pinned in tools/playwright-mcp/package-lock.json) is the browser MCP server
# that `pab guard` starts by default; cmd/pab/guard_test.go drives it with Debian's chromium.
# It downloads no browser of its own.
npm ci --prefix tools/playwright-mcp --no-audit --no-fund --silent
# The agent CLIs that the scripts of agents/ run (Claude Code and Codex, pinned in
# agents/package-lock.json, each with its native linux binary); cmd/pab/agents_test.go runs
# them against a scripted model server, in a network namespace with only loopback.
npm ci --prefix agents --no-audit --no-fund --silent

go vet ./...
# cmd/pab's tests drive Chromium, pab guard and the agent CLIs: under the race detector on a
# busy two-core machine they take more than go test's default 10 minutes per package.
go test -race -count=1 -timeout 40m ./...

if [ -n "${FUZZTIME:-}" ]; then
	# every FuzzXxx function, one at a time (go test -fuzz takes one target per run)
	grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
		pkg="./$(dirname "${f#./}")"
		grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r fn; do
			echo "fuzz $pkg $fn for $FUZZTIME"
			out=$(mktemp)
			# On a loaded machine the fuzz engine can end with "context deadline exceeded"
			# when a worker is slow to stop, without any failing input: run it again, up to
			# three times in all. A real failure names its input under testdata/fuzz and fails
			# at once.
			for try in 1 2 3; do
				if go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" "$pkg" >"$out" 2>&1; then
					tail -n 3 "$out"
					break
				fi
				cat "$out"
				if [ "$try" = 3 ] || ! grep -q 'context deadline exceeded' "$out" || grep -q 'Failing input written' "$out"; then
					rm -f "$out"
					exit 1
				fi
				echo "fuzz $pkg $fn: the fuzz engine timed out without a failing input; running it again"
			done
			rm -f "$out"
		done
	done
fi
