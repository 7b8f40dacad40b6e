#!/usr/bin/env bash
# The test command of pab (README "Tests"). It installs what the tests need when it is
# missing (Debian's chromium, for the browser tests, and the rest: see below), then vets and
# runs every test with the race detector, reported by tools/testreport (docs/testing.md).
# Set FUZZTIME (for example FUZZTIME=10s) to also run each fuzz target that long
# (FUZZMINIMIZETIME bounds the minimizing of each new input, default 1s).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt.sh # apt_install: waits for the dpkg lock of a busy machine

# Debian's chromium (browser tests), xvfb (headed guard tests), nodejs and npm (warcio.js,
# @playwright/mcp, the agent CLIs) and mount (full-disk tests), when missing: the list and
# why each is needed are PAB_TEST_APT_TOOLS in scripts/apt.sh.
apt_install_missing "${PAB_TEST_APT_TOOLS[@]}"

# warcio.js (npm package warcio, pinned in tools/warcio/package-lock.json) reads pab's
# exported WARC files in recording/warcio_test.go; that test fails in CI without it.
npm ci --prefix tools/warcio --no-audit --no-fund --silent
# Chromium DevTools' HAR importer (HARFormat.ts and Importer.ts of the npm package
# chrome-devtools-frontend, bundled by esbuild, both pinned in
# tools/devtools-har/package-lock.json) loads pab's HAR files in cmd/pab/har_devtools_test.go
# and run_test.go; those tests fail in CI without it.
npm ci --prefix tools/devtools-har --no-audit --no-fund --silent
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
# tools/testreport prints the results as go test does, every failed test's output, and at the
# end every skipped test with its reason; under CI=true a skip not listed in docs/testing.md
# ("Allowed skips") fails the run (docs/testing.md).
go build -o "${TMPDIR:-/tmp}/pab-testreport.$$" ./tools/testreport
trap 'rm -f "${TMPDIR:-/tmp}/pab-testreport.$$"' EXIT
go test -json -race -count=1 -timeout 40m ./... 2>&1 | "${TMPDIR:-/tmp}/pab-testreport.$$" -allowed docs/testing.md

if [ -n "${FUZZTIME:-}" ]; then
	# every FuzzXxx function, one at a time (go test -fuzz takes one target per run). Each
	# new interesting input is minimized for at most FUZZMINIMIZETIME (default 1s; Go's is
	# 60s): in a few seconds of fuzzing the engine would otherwise spend them all minimizing
	# (docs/testing.md, "Fuzzing").
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
				if go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "${FUZZMINIMIZETIME:-1s}" "$pkg" >"$out" 2>&1; then
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
