#!/bin/sh
# codex-playwright.sh: Codex CLI driving the run's Chromium through @playwright/mcp. For
# `pab run --browser --mcp --proxy-env=false` (docs/run.md, "Real agents"): pab starts
# @playwright/mcp on the run's Chromium and starts this script only once the server has
# answered tools/list; Codex connects to it over HTTP (PAB_MCP_URL, bearer token from
# PAB_MCP_TOKEN).
#
# Environment (all optional):
#   CODEX_BIN        the codex CLI (default: agents/node_modules/.bin/codex, from
#                    npm ci --prefix agents)
#   CODEX_MODEL      passed as -m (default: Codex's own; see docs/run.md for what its
#                    default model does with MCP tools)
#   CODEX_BASE_URL   a Responses API endpoint other than OpenAI's (key in OPENAI_API_KEY)
#   CODEX_HOME       Codex's home (default: a fresh one in the run directory)
#   OPENAI_API_KEY   the API key
set -eu
here=$(cd "$(dirname "$0")" && pwd)
codex=${CODEX_BIN:-$here/node_modules/.bin/codex}
: "${PAB_MCP_URL:?codex-playwright.sh runs under pab run --browser --mcp (PAB_MCP_URL is not set)}"
: "${PAB_MCP_TOKEN:?codex-playwright.sh runs under pab run --browser --mcp (PAB_MCP_TOKEN is not set)}"
[ -x "$codex" ] || { echo "codex-playwright.sh: no codex CLI at $codex (npm ci --prefix agents, or set CODEX_BIN)" >&2; exit 2; }
. "$here/codex-env.sh"

# required: the run fails if the server cannot be reached, rather than going on without it
set -- "$@" -c "mcp_servers.browser.url=$(toml "$PAB_MCP_URL")" \
	-c 'mcp_servers.browser.bearer_token_env_var="PAB_MCP_TOKEN"' \
	-c mcp_servers.browser.required=true -c mcp_servers.browser.startup_timeout_sec=60 \
	--output-last-message "$PAB_ANSWER_FILE" \
	"$(cat "$PAB_PROMPT_FILE")

Use only the browser tools. Reply with the answer only."
exec "$codex" "$@" < /dev/null
