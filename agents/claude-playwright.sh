#!/bin/sh
# claude-playwright.sh: Claude Code driving the run's Chromium through @playwright/mcp. For
# `pab run --browser --mcp --proxy-env=false` (docs/run.md, "Real agents"): pab starts
# @playwright/mcp on the run's Chromium and starts this script only once the server has
# answered tools/list with the browser tools; the script connects to it over HTTP
# (PAB_MCP_URL, with the bearer token PAB_MCP_TOKEN), so Claude Code has its browser tools
# from the first turn however long the server took to start.
#
# Environment (all optional):
#   CLAUDE_BIN          the claude CLI (default: agents/node_modules/.bin/claude, from
#                       npm ci --prefix agents)
#   CLAUDE_MODEL        passed as --model
#   CLAUDE_CONFIG_DIR   Claude Code's settings directory (default: a fresh one in the run
#                       directory, so no user setting, hook or plugin joins the run)
#   ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL   as Claude Code reads them
set -eu
here=$(cd "$(dirname "$0")" && pwd)
claude=${CLAUDE_BIN:-$here/node_modules/.bin/claude}
: "${PAB_MCP_URL:?claude-playwright.sh runs under pab run --browser --mcp (PAB_MCP_URL is not set)}"
: "${PAB_MCP_TOKEN:?claude-playwright.sh runs under pab run --browser --mcp (PAB_MCP_TOKEN is not set)}"
[ -x "$claude" ] || { echo "claude-playwright.sh: no claude CLI at $claude (npm ci --prefix agents, or set CLAUDE_BIN)" >&2; exit 2; }
. "$here/claude-env.sh"

cat > mcp.json <<JSON
{"mcpServers": {"browser": {"type": "http", "url": $(json "$PAB_MCP_URL"),
  "headers": {"Authorization": $(json "Bearer $PAB_MCP_TOKEN")}}}}
JSON
chmod 600 mcp.json
set -- -p "$(cat "$PAB_PROMPT_FILE")

Use only the browser tools. Reply with the answer only." \
	--mcp-config mcp.json --strict-mcp-config --allowedTools mcp__browser --output-format text
[ -z "${CLAUDE_MODEL:-}" ] || set -- "$@" --model "$CLAUDE_MODEL"
exec "$claude" "$@" < /dev/null > "$PAB_ANSWER_FILE"
