#!/bin/sh
# codex-guard.sh: Codex CLI with pab guard as its only browser. For
# `pab run --guard APP.yaml --proxy-env=false` (docs/run.md, "Real agents"; docs/guard.md):
# pab starts pab guard and this script only once the guard has answered tools/list
# (PAB_MCP_URL, bearer token PAB_MCP_TOKEN).
#
# Environment (all optional):
#   CODEX_BIN        the codex CLI (default: agents/node_modules/.bin/codex, from
#                    npm ci --prefix agents)
#   CODEX_MODEL      passed as -m
#   CODEX_BASE_URL   a Responses API endpoint other than OpenAI's (key in OPENAI_API_KEY)
#   CODEX_HOME       Codex's home (default: a fresh one in the run directory)
#   OPENAI_API_KEY   the API key
set -eu
here=$(cd "$(dirname "$0")" && pwd)
codex=${CODEX_BIN:-$here/node_modules/.bin/codex}
: "${PAB_MCP_URL:?codex-guard.sh runs under pab run --guard (PAB_MCP_URL is not set)}"
[ -x "$codex" ] || { echo "codex-guard.sh: no codex CLI at $codex (npm ci --prefix agents, or set CODEX_BIN)" >&2; exit 2; }
. "$here/codex-env.sh"

# The guard must be connected before the first model turn (see codex-playwright.sh).
set -- "$@" -c "mcp_servers.pab.url=$(toml "$PAB_MCP_URL")" \
	-c 'mcp_servers.pab.bearer_token_env_var="PAB_MCP_TOKEN"' \
	-c mcp_servers.pab.required=true -c mcp_servers.pab.startup_timeout_sec=60 \
	--output-last-message "$PAB_ANSWER_FILE" \
	"$(cat "$PAB_PROMPT_FILE")"
exec "$codex" "$@" < /dev/null
