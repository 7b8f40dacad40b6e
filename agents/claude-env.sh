# claude-env.sh: sourced by the claude-*.sh agent scripts. Settings that make Claude Code
# a reproducible batch agent; see docs/run.md, "Real agents".

# json STRING: STRING as a JSON string.
json() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

# Wait for every MCP server to connect before the first model turn. In -p mode Claude Code
# otherwise waits about 2 s and then runs without the servers that were not ready: with no
# browser tools at all, and exit status 0. MCP_TIMEOUT bounds the wait per server (ms).
export MCP_CONNECTION_NONBLOCKING=false
export MCP_TIMEOUT=${MCP_TIMEOUT:-60000}
# No telemetry, error reports, auto-update or other nonessential traffic (by default Claude
# Code looks up api.anthropic.com at start even with ANTHROPIC_BASE_URL set elsewhere), and
# no automatic install of the official plugin marketplace.
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
export CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1
# A settings directory of the run's own (no user setting, hook, plugin or MCP server joins
# the run), unless the caller gives one.
: "${PAB_RUN_DIR:?claude-env.sh: PAB_RUN_DIR is not set (run the agent under pab run)}"
export CLAUDE_CONFIG_DIR=${CLAUDE_CONFIG_DIR:-$PAB_RUN_DIR/.claude}
mkdir -p "$CLAUDE_CONFIG_DIR"
