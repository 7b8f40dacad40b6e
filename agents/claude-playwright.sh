#!/bin/sh
# claude-playwright.sh: Claude Code driving the run's Chromium through @playwright/mcp over
# CDP. For `pab run --browser --proxy-env=false` (docs/run.md, "Real agents").
#
# Environment (all optional):
#   CLAUDE_BIN          the claude CLI (default: agents/node_modules/.bin/claude, from
#                       npm ci --prefix agents)
#   PLAYWRIGHT_MCP      @playwright/mcp's cli.js (default: the pinned copy in
#                       tools/playwright-mcp, from npm ci --prefix tools/playwright-mcp)
#   CLAUDE_MODEL        passed as --model
#   CLAUDE_CONFIG_DIR   Claude Code's settings directory (default: a fresh one in the run
#                       directory, so no user setting, hook or plugin joins the run)
#   ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL   as Claude Code reads them
set -eu
here=$(cd "$(dirname "$0")" && pwd)
claude=${CLAUDE_BIN:-$here/node_modules/.bin/claude}
mcp=${PLAYWRIGHT_MCP:-$here/../tools/playwright-mcp/node_modules/@playwright/mcp/cli.js}
: "${PAB_CDP_URL:?claude-playwright.sh runs under pab run --browser (PAB_CDP_URL is not set)}"
[ -x "$claude" ] || { echo "claude-playwright.sh: no claude CLI at $claude (npm ci --prefix agents, or set CLAUDE_BIN)" >&2; exit 2; }
[ -f "$mcp" ] || { echo "claude-playwright.sh: no @playwright/mcp at $mcp (npm ci --prefix tools/playwright-mcp, or set PLAYWRIGHT_MCP)" >&2; exit 2; }
. "$here/claude-env.sh"

# @playwright/mcp attaches to pab's Chromium (already through the replay, trusting pab's CA);
# its output directory (snapshots, downloads) is kept in the run directory.
node=$(command -v node) || { echo "claude-playwright.sh: node not found on PATH" >&2; exit 2; }
cat > mcp.json <<JSON
{"mcpServers": {"browser": {"type": "stdio", "command": $(json "$node"),
  "args": [$(json "$mcp"), "--cdp-endpoint", $(json "$PAB_CDP_URL"), "--output-dir", $(json "$PAB_RUN_DIR/.playwright-mcp")]}}}
JSON
set -- -p "$(cat "$PAB_PROMPT_FILE")

Use only the browser tools. Reply with the answer only." \
	--mcp-config mcp.json --strict-mcp-config --allowedTools mcp__browser --output-format text
[ -z "${CLAUDE_MODEL:-}" ] || set -- "$@" --model "$CLAUDE_MODEL"
exec "$claude" "$@" < /dev/null > "$PAB_ANSWER_FILE"
