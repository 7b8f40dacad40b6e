# codex-env.sh: sourced by the codex-*.sh agent scripts after they set codex. It starts the
# command line ("$@") of a reproducible `codex exec` batch agent; the script adds its MCP
# server. See docs/run.md, "Real agents".

# toml STRING: STRING as a TOML basic string.
toml() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

# A Codex home of the run's own (sessions, logs, the skills Codex installs), unless the
# caller gives one; --ignore-user-config keeps a given home's config.toml out all the same.
: "${PAB_RUN_DIR:?codex-env.sh: PAB_RUN_DIR is not set (run the agent under pab run)}"
export CODEX_HOME=${CODEX_HOME:-$PAB_RUN_DIR/.codex}
mkdir -p "$CODEX_HOME"

# - no analytics (ab.chatgpt.com), no plugin sync (github.com, api.github.com, chatgpt.com),
#   no update check; --strict-config fails on a key this Codex does not know, rather than
#   ignoring it;
# - tool_output_token_limit: Codex keeps only about 10 KB of a tool's answer in the
#   conversation by default, cutting the middle out, so a page snapshot loses most of the
#   page (on books.toscrape.com, most product cards, the one asked about included);
# - codex exec cannot ask for approval of MCP tool calls without a terminal, hence the
#   bypass: the run directory is the only workspace and, in a container (docs/deploy.md),
#   the pod has no route out but the replay.
set -- exec --skip-git-repo-check --ephemeral --ignore-user-config --strict-config --color never \
	--dangerously-bypass-approvals-and-sandbox -c analytics.enabled=false -c features.plugins=false \
	-c check_for_update_on_startup=false -c tool_output_token_limit=100000
[ -z "${CODEX_MODEL:-}" ] || set -- "$@" -m "$CODEX_MODEL"
# Another Responses API endpoint goes into a model provider of Codex's config (with the
# built-in provider, OPENAI_BASE_URL alone never reached it: Codex tried its Responses
# WebSocket instead); the key comes from OPENAI_API_KEY.
if [ -n "${CODEX_BASE_URL:-}" ]; then
	set -- "$@" -c 'model_provider="pab"' -c 'model_providers.pab.name="pab"' \
		-c "model_providers.pab.base_url=$(toml "$CODEX_BASE_URL")" \
		-c 'model_providers.pab.env_key="OPENAI_API_KEY"' -c 'model_providers.pab.wire_api="responses"'
fi
