//go:build !pab_lite

package main

import (
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/guard"
)

// newGuardCmd is pab guard: its flags are guard.RunOptions, the session is guard.Run.
func newGuardCmd(g *globalFlags) *cobra.Command {
	var o guard.RunOptions
	cmd := &cobra.Command{
		Use:   "guard --application FILE",
		Short: "Serve a browser to an agent over MCP, with every action judged by the application's policy",
		Long: `pab guard is the only browser an agent gets: an MCP server whose tools are those of
a browser MCP server it starts as a child (by default @playwright/mcp with headless
Chromium), each call classed read, fill, review or submit and allowed or refused by code
following the application file (YAML: allowed sites, mode, limits, grounding sources,
approved artifacts; see docs/guard.md). Under fill_and_review nothing is ever submitted.

Without --listen it speaks MCP over stdin/stdout (the agent CLI starts it); with
--listen 127.0.0.1:PORT it serves streamable HTTP at http://ADDR/mcp. Nothing else is
written to stdout.

With --proxy HOST:PORT (a running 'pab replay' or 'pab record' with the same CA, see
'pab ca') Chromium sends every request there and trusts pab's CA, by its public key
(--ignore-certificate-errors-spki-list), and no other certificate. Without --proxy it
browses the internet directly.

Pauses (a captcha, a sign-in, a consent box, a missing answer, a page outside the sites)
wait for a person: the control API on --control (printed on stderr) has
GET /local-apply/run, GET /local-apply/status (the bare result), POST /local-apply/resume
(body {"answer": "..."} optional; {"allow_site": "HOST"} at an external_redirect pause
admits that site for the run), POST /local-apply/cancel and POST /local-apply/close (the
owner is done with the browser; /status, /resume, /cancel and /close are aliases). Every request needs "Authorization: Bearer TOKEN": a random token
per run, printed on stderr and written to --control-token-file (mode 0600; by default a
file in the guard's temporary directory), or taken from $PAB_GUARD_CONTROL_TOKEN; POSTs
need "Content-Type: application/json". With --listen and a terminal on stdin, a prompt
asks too.

On exit (the agent closes stdin, Ctrl-C, SIGTERM) the result envelope goes to --result
(also written as soon as the run is done) and the trace (JSONL) to --trace.

--browser-mcp "CMD ARGS" replaces the default child with any MCP server over stdio that
has the same tool names (words split on spaces; quote with ' or ").

The owner's browser: --headed starts a visible Chromium (same switches and submit lock;
needs a display, $DISPLAY). When the agent's session ends with the run awaiting review,
pab guard keeps it open with the filled form and waits for the owner's word: closing the
browser, POST /local-apply/close, or Ctrl-C. --cdp-endpoint URL attaches to a Chromium the
owner already runs (started with --remote-debugging-port; loopback only) and opens the run
in a window of its own there (a browser context through the guard's wire gate, chained to
--proxy when given; the owner's other tabs are not held); at review pab guard waits until
that window is closed, and never closes the browser. In both, the owner handles consent
boxes, captchas and sign-ins in that browser, and the guard rechecks the page when they
resume (docs/guard.md, "The owner's browser").`,
		Example: `  # Claude Code, against a running 'pab replay TASK --listen 127.0.0.1:8899':
  claude mcp add pab-guard -- pab --repo /path/to/pab guard --application app.yaml --proxy 127.0.0.1:8899

  # Codex (~/.codex/config.toml):
  #   [mcp_servers.pab-guard]
  #   command = "pab"
  #   args = ["--repo", "/path/to/pab", "guard", "--application", "app.yaml", "--proxy", "127.0.0.1:8899"]

  # streamable HTTP for a scripted client, with a trace and a result file:
  pab guard --application app.yaml --listen 127.0.0.1:8765 --trace run.jsonl --result result.json

  # resume a pause with an answer (TOKEN and PORT as printed on stderr):
  curl -H "Authorization: Bearer TOKEN" -H "Content-Type: application/json" \
    --data '{"answer": "No"}' http://127.0.0.1:PORT/local-apply/resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.RepoRoot = func() (string, error) {
				repo, err := g.findRepo()
				if err != nil {
					return "", err
				}
				return repo.Root, nil
			}
			o.FindChromium = findChromium
			o.Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}
			o.Stderr = cmd.ErrOrStderr()
			return guard.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Application, "application", "", "the application file (YAML; see docs/guard.md)")
	f.StringVar(&o.Listen, "listen", "", "serve MCP as streamable HTTP on this loopback address (default: stdio)")
	f.StringVar(&o.Proxy, "proxy", "", "send the browser's traffic to this pab proxy (host:port) and trust pab's CA")
	f.StringVar(&o.BrowserMCP, "browser-mcp", "", `the browser MCP server to start instead of @playwright/mcp ("CMD ARGS")`)
	f.StringVar(&o.Trace, "trace", "", "write the trace (JSONL policy events) to this file")
	f.StringVar(&o.Result, "result", "", "write the result envelope (JSON) to this file")
	f.StringVar(&o.Control, "control", "", "serve the control API on this loopback address (default 127.0.0.1 on a free port)")
	f.StringVar(&o.ControlTokenFile, "control-token-file", "", "write the control API's bearer token to this file (mode 0600; default: a file in the guard's temporary directory, removed at exit)")
	f.StringVar(&o.Chrome, "chrome", "", "Chromium executable for the default browser MCP server (default: chromium on PATH)")
	f.BoolVar(&o.Headed, "headed", false, "start a visible Chromium (needs $DISPLAY); at awaiting_review it stays open until the owner closes it or POSTs /local-apply/close")
	f.StringVar(&o.CDPEndpoint, "cdp-endpoint", "", "attach to the owner's running Chromium at this DevTools URL (http://127.0.0.1:PORT; loopback only) instead of starting one: the run gets a window (browser context) of its own there, through the wire gate; the browser is never closed")
	f.BoolVar(&o.UnprotectedBrowser, "unprotected-browser", false, "with --browser-mcp: run a browser the guard cannot hold below the page (page-level checks only; printed and traced)")
	f.BoolVar(&o.NoPageLock, "test-no-page-lock", false, "for tests: install no page-side submit lock (the network layer and the wire gate alone enforce)")
	_ = f.MarkHidden("test-no-page-lock")
	return cmd
}
