#!/bin/sh
# codex-playwright.sh: Codex CLI driving the run's Chromium through @playwright/mcp over CDP.
# For `pab run --browser --proxy-env=false` (docs/run.md, "Real agents").
#
# Environment (all optional):
#   CODEX_BIN        the codex CLI (default: agents/node_modules/.bin/codex, from
#                    npm ci --prefix agents)
#   PLAYWRIGHT_MCP   @playwright/mcp's cli.js (default: the pinned copy in
#                    tools/playwright-mcp, from npm ci --prefix tools/playwright-mcp)
#   CODEX_MODEL      passed as -m
#   CODEX_BASE_URL   a Responses API endpoint other than OpenAI's (key in OPENAI_API_KEY)
#   CODEX_HOME       Codex's home (default: a fresh one in the run directory)
#   OPENAI_API_KEY   the API key
set -eu
here=$(cd "$(dirname "$0")" && pwd)
codex=${CODEX_BIN:-$here/node_modules/.bin/codex}
mcp=${PLAYWRIGHT_MCP:-$here/../tools/playwright-mcp/node_modules/@playwright/mcp/cli.js}
: "${PAB_CDP_URL:?codex-playwright.sh runs under pab run --browser (PAB_CDP_URL is not set)}"
[ -x "$codex" ] || { echo "codex-playwright.sh: no codex CLI at $codex (npm ci --prefix agents, or set CODEX_BIN)" >&2; exit 2; }
[ -f "$mcp" ] || { echo "codex-playwright.sh: no @playwright/mcp at $mcp (npm ci --prefix tools/playwright-mcp, or set PLAYWRIGHT_MCP)" >&2; exit 2; }
. "$here/codex-env.sh"

# The browser MCP server must be up before the first model turn (required: Codex otherwise
# starts MCP servers in the background and the first turns may have no browser tools).
node=$(command -v node) || { echo "codex-playwright.sh: node not found on PATH" >&2; exit 2; }
set -- "$@" -c "mcp_servers.browser.command=$(toml "$node")" \
	-c "mcp_servers.browser.args=[$(toml "$mcp"), \"--cdp-endpoint\", $(toml "$PAB_CDP_URL"), \"--output-dir\", $(toml "$PAB_RUN_DIR/.playwright-mcp")]" \
	-c mcp_servers.browser.required=true -c mcp_servers.browser.startup_timeout_sec=60 \
	--output-last-message "$PAB_ANSWER_FILE" \
	"$(cat "$PAB_PROMPT_FILE")

Use only the browser tools. Reply with the answer only."
exec "$codex" "$@" < /dev/null
