#!/bin/sh
# claude-guard.sh: Claude Code with pab guard as its only browser. For
# `pab run --guard APP.yaml --proxy-env=false` (docs/run.md, "Real agents"; docs/guard.md):
# pab starts pab guard and this script only once the guard has answered tools/list
# (PAB_MCP_URL, bearer token PAB_MCP_TOKEN).
#
# Environment (all optional):
#   CLAUDE_BIN          the claude CLI (default: agents/node_modules/.bin/claude, from
#                       npm ci --prefix agents)
#   CLAUDE_MODEL        passed as --model
#   CLAUDE_CONFIG_DIR   Claude Code's settings directory (default: a fresh one in the run
#                       directory)
#   ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL   as Claude Code reads them
set -eu
here=$(cd "$(dirname "$0")" && pwd)
claude=${CLAUDE_BIN:-$here/node_modules/.bin/claude}
: "${PAB_MCP_URL:?claude-guard.sh runs under pab run --guard (PAB_MCP_URL is not set)}"
[ -x "$claude" ] || { echo "claude-guard.sh: no claude CLI at $claude (npm ci --prefix agents, or set CLAUDE_BIN)" >&2; exit 2; }
. "$here/claude-env.sh"

cat > mcp.json <<JSON
{"mcpServers": {"pab": {"type": "http", "url": $(json "$PAB_MCP_URL"),
  "headers": {"Authorization": $(json "Bearer ${PAB_MCP_TOKEN:-}")}}}}
JSON
chmod 600 mcp.json
set -- -p "$(cat "$PAB_PROMPT_FILE")" \
	--mcp-config mcp.json --strict-mcp-config --allowedTools mcp__pab --output-format text
[ -z "${CLAUDE_MODEL:-}" ] || set -- "$@" --model "$CLAUDE_MODEL"
exec "$claude" "$@" < /dev/null > "$PAB_ANSWER_FILE"
