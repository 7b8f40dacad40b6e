//go:build !pab_lite

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/tlsca"
)

// playwrightMCPCLI is @playwright/mcp's entry point under a directory holding
// tools/playwright-mcp (installed there with `npm ci`, pinned by its package-lock.json).
const playwrightMCPCLI = "tools/playwright-mcp/node_modules/@playwright/mcp/cli.js"

// guardChromiumArgs are extra Chromium switches for the default browser (beside those
// Playwright passes, which already turn off background networking, Translate, network
// time queries and optimization hints).
var guardChromiumArgs = []string{
	"--disable-quic",
	"--disable-sync",
	"--disable-domain-reliability",
	"--no-pings",
}

func newGuardCmd(g *globalFlags) *cobra.Command {
	var (
		appPath    string
		listen     string
		proxy      string
		browserMCP string
		tracePath  string
		resultPath string
		control    string
		chrome     string
		tokenFile  string
		headed     bool
		cdpURL     string
	)
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
owner already runs (started with --remote-debugging-port; loopback only), installs the
submit lock in it for new pages, and never closes it. In both, the owner handles consent
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
			errOut := cmd.ErrOrStderr()
			if appPath == "" {
				return errors.New("guard: --application FILE is required")
			}
			// Everything that can be checked is checked before anything starts.
			app, err := guard.LoadApplication(appPath)
			if err != nil {
				return firstLine(err)
			}
			for _, a := range []struct{ flag, addr string }{{"listen", listen}, {"control", control}} {
				if a.addr != "" {
					if err := checkLoopbackAddr(a.addr); err != nil {
						return fmt.Errorf("guard: --%s: %v", a.flag, err)
					}
				}
			}
			if proxy != "" {
				if err := checkHostPort(proxy); err != nil {
					return fmt.Errorf("guard: --proxy: %v", err)
				}
			}
			if cdpURL != "" {
				if err := checkCDPEndpoint(cdpURL); err != nil {
					return fmt.Errorf("guard: --cdp-endpoint: %v", err)
				}
				for _, c := range []struct {
					flag string
					set  bool
				}{{"--browser-mcp", browserMCP != ""}, {"--headed", headed}, {"--chrome", chrome != ""}} {
					if c.set {
						return fmt.Errorf("guard: give --cdp-endpoint or %s, not both (the owner's browser is already running)", c.flag)
					}
				}
				if proxy != "" {
					return errors.New("guard: --proxy cannot be set on a running browser: start the owner's Chromium with --proxy-server=http://HOST:PORT and --ignore-certificate-errors-spki-list=HASH (pab ca spki) instead, and give --cdp-endpoint alone")
				}
			}
			if headed {
				if browserMCP != "" {
					return errors.New("guard: give --headed or --browser-mcp, not both (--headed is for the default browser)")
				}
				if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
					return errors.New("guard: --headed needs a display, and neither $DISPLAY nor $WAYLAND_DISPLAY is set (run it in the owner's desktop session, or under xvfb-run)")
				}
			}
			for _, p := range []struct{ flag, path string }{{"trace", tracePath}, {"result", resultPath}, {"control-token-file", tokenFile}} {
				if p.path != "" {
					if st, err := os.Stat(filepath.Dir(p.path)); err != nil || !st.IsDir() {
						return fmt.Errorf("guard: --%s %s: its directory does not exist", p.flag, p.path)
					}
				}
			}
			tmp, err := os.MkdirTemp("", "pab-guard-")
			if err != nil {
				return fmt.Errorf("guard: %w", err)
			}
			defer os.RemoveAll(tmp)
			var argv []string
			var lockToken, uploadDir string // the submit lock's token and the upload directory (default browser only)
			if browserMCP != "" {
				if argv, err = guard.SplitCommand(browserMCP); err != nil {
					return fmt.Errorf("guard: --browser-mcp: %v", err)
				}
			} else {
				lockToken = guard.NewLockToken()
				uploadDir = filepath.Join(tmp, "output") // @playwright/mcp reads uploads only from there (or its cwd)
				if argv, err = defaultBrowserMCP(g, browserMode{proxy: proxy, chrome: chrome, headed: headed, cdp: cdpURL}, tmp, lockToken); err != nil {
					return fmt.Errorf("guard: %v", err)
				}
			}

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()

			var traceFile *os.File
			var traceW io.Writer = io.Discard
			if tracePath != "" {
				if traceFile, err = os.OpenFile(tracePath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err != nil {
					return fmt.Errorf("guard: --trace: %w", err)
				}
				defer traceFile.Close()
				traceW = traceFile
			}
			tracer := guard.NewTracer(traceW, "")

			ctl := guard.NewController()
			tokenFromParent := false
			if tok, ok := os.LookupEnv(guard.ControlTokenEnv); ok {
				tokenFromParent = true
				// from pab run --guard; kept out of the browser's environment
				os.Unsetenv(guard.ControlTokenEnv)
				if err := ctl.SetToken(tok); err != nil {
					return fmt.Errorf("guard: $%s: %v", guard.ControlTokenEnv, err)
				}
			}
			if tokenFile == "" {
				tokenFile = filepath.Join(tmp, "control-token")
			}
			if err := atomicfile.Write(tokenFile, []byte(ctl.Token()+"\n"), 0o600); err != nil {
				return fmt.Errorf("guard: --control-token-file: %v", err)
			}
			ctlAddr := control
			if ctlAddr == "" {
				ctlAddr = "127.0.0.1:0"
			}
			ctlLn, err := guard.ListenLoopback(ctlAddr)
			if err != nil {
				return fmt.Errorf("guard: --control: %v", err)
			}
			ctlCtx, ctlCancel := context.WithCancel(context.Background())
			ctlDone := make(chan error, 1)
			go func() { ctlDone <- ctl.ServeControl(ctlCtx, ctlLn) }()
			defer func() { ctlCancel(); <-ctlDone }()
			fmt.Fprintf(errOut, "pab guard: control http://%s (GET %s, GET %s, POST %s, POST %s, POST %s; header Authorization: Bearer TOKEN)\n",
				ctlLn.Addr(), guard.ControlRunPath, guard.ControlStatusPath, guard.ControlResumePath, guard.ControlCancelPath, guard.ControlClosePath)
			if tokenFromParent {
				// the parent knows it; stderr may be a log file others can read
				fmt.Fprintf(errOut, "pab guard: control token from $%s (also in %s, mode 0600)\n", guard.ControlTokenEnv, tokenFile)
			} else {
				fmt.Fprintf(errOut, "pab guard: control token %s (also in %s, mode 0600)\n", ctl.Token(), tokenFile)
			}

			fmt.Fprintf(errOut, "pab guard: browser MCP server: %s\n", joinArgs(argv))
			child, err := guard.StartChild(ctx, argv, guard.ChildOptions{Stderr: os.Stderr})
			if err != nil {
				return fmt.Errorf("guard: %v", err)
			}
			defer child.Close()

			bridge, err := guard.NewBridge(guard.Config{App: app, Browser: child, Pauser: ctl, Trace: tracer, LockToken: lockToken, UploadDir: uploadDir,
				OwnerBrowser: headed || cdpURL != ""})
			if err != nil {
				return fmt.Errorf("guard: %v", err)
			}
			ctl.Attach(bridge)
			src := &resultWriter{bridge: bridge, path: resultPath, errOut: errOut}
			defer src.write() // at exit: the final result

			// POST /local-apply/close while the agent works: the owner ends the run
			serveCtx, serveCancel := context.WithCancel(ctx)
			defer serveCancel()
			ownerClosed := make(chan struct{})
			go func() {
				select {
				case <-ctl.Closed():
					bridge.Cancel("The owner closed the run (POST " + guard.ControlClosePath + ").")
					close(ownerClosed)
					serveCancel()
				case <-serveCtx.Done():
				}
			}()
			var serveErr error
			if listen == "" {
				fmt.Fprintf(errOut, "pab guard: run %s (%s) serving MCP on stdio\n", app.ID, app.Mode)
				serveErr = guard.Serve(serveCtx, src, guard.NewStdioTransport(os.Stdin, os.Stdout))
			} else {
				ln, err := guard.ListenLoopback(listen)
				if err != nil {
					return fmt.Errorf("guard: --listen: %v", err)
				}
				fmt.Fprintf(errOut, "pab guard: run %s (%s) serving MCP on http://%s/mcp\n", app.ID, app.Mode, ln.Addr())
				if isTerminal(os.Stdin) {
					go ctl.Prompt(ctx, os.Stdin, errOut)
				}
				serveErr = guard.ServeHTTP(serveCtx, src, ln)
			}
			status := "disconnected"
			select {
			case <-ownerClosed:
				status = "closed_by_owner"
			default:
				switch {
				case ctx.Err() != nil:
					status = "signal"
				case serveErr != nil && !errors.Is(serveErr, context.Canceled):
					status = "error"
				}
			}
			bridge.EngineEnded(status)
			src.write()
			if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
				return fmt.Errorf("guard: %v", serveErr)
			}
			switch {
			case cdpURL != "":
				fmt.Fprintf(errOut, "pab guard: run %s ended %s; the browser at %s stays open (pab guard did not start it)\n", app.ID, bridge.Result().Outcome, cdpURL)
			case headed && bridge.Result().Outcome == "awaiting_review" && status == "disconnected":
				waitForOwner(ctx, ctl, child, errOut, ctlLn.Addr().String())
			}
			if err := tracer.Err(); err != nil {
				return fmt.Errorf("guard: --trace: %v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&appPath, "application", "", "the application file (YAML; see docs/guard.md)")
	f.StringVar(&listen, "listen", "", "serve MCP as streamable HTTP on this loopback address (default: stdio)")
	f.StringVar(&proxy, "proxy", "", "send the browser's traffic to this pab proxy (host:port) and trust pab's CA")
	f.StringVar(&browserMCP, "browser-mcp", "", `the browser MCP server to start instead of @playwright/mcp ("CMD ARGS")`)
	f.StringVar(&tracePath, "trace", "", "write the trace (JSONL policy events) to this file")
	f.StringVar(&resultPath, "result", "", "write the result envelope (JSON) to this file")
	f.StringVar(&control, "control", "", "serve the control API on this loopback address (default 127.0.0.1 on a free port)")
	f.StringVar(&tokenFile, "control-token-file", "", "write the control API's bearer token to this file (mode 0600; default: a file in the guard's temporary directory, removed at exit)")
	f.StringVar(&chrome, "chrome", "", "Chromium executable for the default browser MCP server (default: chromium on PATH)")
	f.BoolVar(&headed, "headed", false, "start a visible Chromium (needs $DISPLAY); at awaiting_review it stays open until the owner closes it or POSTs /local-apply/close")
	f.StringVar(&cdpURL, "cdp-endpoint", "", "attach to the owner's running Chromium at this DevTools URL (http://127.0.0.1:PORT; loopback only) instead of starting one; it is never closed")
	return cmd
}

// firstLine keeps only the first line of err, so that a bad application file gives one
// clear line ("FILE:LINE: message").
func firstLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return errors.New(s)
}

// checkLoopbackAddr checks that addr can be listened on with guard.ListenLoopback, by
// listening and closing at once.
func checkLoopbackAddr(addr string) error {
	ln, err := guard.ListenLoopback(addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// checkHostPort checks that s is host:port with a non-empty host and port.
func checkHostPort(s string) error {
	if strings.Contains(s, "://") {
		return fmt.Errorf("%q: want host:port without a scheme, e.g. 127.0.0.1:8899", s)
	}
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return fmt.Errorf("%q: want host:port, e.g. 127.0.0.1:8899", s)
	}
	return nil
}

// defaultBrowserMCP is the command line of @playwright/mcp with Debian's Chromium: headless,
// an in-memory profile, output files under tmp, and with proxy, every request through it
// with pab's CA trusted by its SPKI hash (Playwright takes extra Chromium switches only
// from a config file: tmp/playwright-mcp.json).
//
// Every page runs guard.SubmitLockScript(lockToken) first (tmp/submit-lock.js), so that no
// script can submit a form unless the guard arms it for a permitted submit.
func defaultBrowserMCP(g *globalFlags, m browserMode, tmp, lockToken string) ([]string, error) {
	proxy := m.proxy
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node not found on PATH: install Node.js (Debian's nodejs), or pass --browser-mcp")
	}
	cli, err := findPlaywrightMCP(g)
	if err != nil {
		return nil, err
	}
	lockPath := filepath.Join(tmp, "submit-lock.js")
	if err := os.WriteFile(lockPath, []byte(guard.SubmitLockScript(lockToken)), 0o600); err != nil {
		return nil, err
	}
	outDir := filepath.Join(tmp, "output")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		return nil, err
	}
	if m.cdp != "" {
		// the owner's running browser: its default context (their profile, their sign-ins);
		// the lock is added to it as an init script for every new document
		config := map[string]any{"browser": map[string]any{"initScript": []string{lockPath}}}
		data, err := json.MarshalIndent(config, "", "  ")
		if err != nil {
			return nil, err
		}
		configPath := filepath.Join(tmp, "playwright-mcp.json")
		if err := os.WriteFile(configPath, data, 0o600); err != nil {
			return nil, err
		}
		return []string{node, cli, "--config", configPath, "--cdp-endpoint", m.cdp, "--no-webmcp", "--output-dir", outDir}, nil
	}
	exe, err := findChromium(m.chrome)
	if err != nil {
		return nil, err
	}
	chromeArgs := append([]string(nil), guardChromiumArgs...)
	if proxy != "" {
		ca, err := tlsca.LoadDefault()
		if err != nil {
			return nil, err
		}
		chromeArgs = append(chromeArgs, "--ignore-certificate-errors-spki-list="+ca.SPKIHash())
	}
	config := map[string]any{"browser": map[string]any{"launchOptions": map[string]any{"args": chromeArgs}, "initScript": []string{lockPath}}}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(tmp, "playwright-mcp.json")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		return nil, err
	}
	argv := []string{node, cli,
		"--config", configPath,
		"--browser", "chromium",
		"--executable-path", exe,
	}
	if !m.headed {
		argv = append(argv, "--headless")
	}
	argv = append(argv,
		"--isolated",
		"--no-webmcp", // tools a page registers are never offered
		"--output-dir", outDir,
	)
	if proxy != "" {
		// Playwright adds <-loopback> to the bypass list, so loopback pages go through the proxy too.
		argv = append(argv, "--proxy-server", "http://"+proxy)
	}
	return argv, nil
}

// browserMode is how the default browser MCP server gets its browser: started headless
// (the default) or headed, with proxy and chrome (an executable, "" = chromium on PATH);
// or attached to the owner's running Chromium at the DevTools URL cdp.
type browserMode struct {
	proxy, chrome string
	headed        bool
	cdp           string
}

// checkCDPEndpoint checks a --cdp-endpoint URL: http, https, ws or wss, on a loopback host
// (127.0.0.0/8, ::1, localhost), with a port.
func checkCDPEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q: %v", raw, err)
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return fmt.Errorf("%q: want http://127.0.0.1:PORT (the browser's DevTools address) or its ws:// URL", raw)
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
		return fmt.Errorf("%q: the owner's browser must be on loopback (127.0.0.1, ::1 or localhost), not %q", raw, host)
	}
	if u.Port() == "" {
		return fmt.Errorf("%q: no port (start Chromium with --remote-debugging-port=PORT)", raw)
	}
	return nil
}

// waitForOwner keeps a browser pab guard started with --headed open after the agent's
// session ended with the run awaiting review, until the owner's word: the browser closed
// (its process gone), POST /local-apply/close, or ctx (Ctrl-C, SIGTERM).
func waitForOwner(ctx context.Context, ctl *guard.Controller, child *guard.Child, errOut io.Writer, controlAddr string) {
	fmt.Fprintf(errOut, "pab guard: the run is awaiting your review: the browser stays open with the filled form. When you are done, close the browser, or POST http://%s%s (or press Ctrl-C)\n", controlAddr, guard.ControlClosePath)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(errOut, "pab guard: stopped; closing the browser")
			return
		case <-ctl.Closed():
			fmt.Fprintln(errOut, "pab guard: the owner is done; closing the browser")
			return
		case <-child.Exited():
			fmt.Fprintln(errOut, "pab guard: the browser MCP server exited")
			return
		case <-t.C:
			if !child.BrowserAlive() {
				fmt.Fprintln(errOut, "pab guard: the browser was closed")
				return
			}
		}
	}
}

// findPlaywrightMCP finds @playwright/mcp's cli.js: $PAB_PLAYWRIGHT_MCP, else under the
// repository (--repo, $PAB_REPO, the current directory), else beside the pab executable.
func findPlaywrightMCP(g *globalFlags) (string, error) {
	if p := os.Getenv("PAB_PLAYWRIGHT_MCP"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("PAB_PLAYWRIGHT_MCP=%s: not a file", p)
		}
		return p, nil
	}
	var tried []string
	if repo, err := g.findRepo(); err == nil {
		tried = append(tried, filepath.Join(repo.Root, playwrightMCPCLI))
	}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		tried = append(tried, filepath.Join(dir, playwrightMCPCLI), filepath.Join(dir, "..", playwrightMCPCLI))
	}
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("@playwright/mcp not found (tried %s): run `npm ci --prefix tools/playwright-mcp` in the pab repository, set PAB_PLAYWRIGHT_MCP, or pass --browser-mcp", strings.Join(tried, ", "))
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// resultWriter passes calls to the bridge and writes the result envelope to path once the
// run is done (and again by write at exit).
type resultWriter struct {
	bridge *guard.Bridge
	path   string
	errOut io.Writer
	mu     sync.Mutex
}

// EngineStarted passes the agent's MCP clientInfo name to the bridge (engine.started).
func (r *resultWriter) EngineStarted(engine string) { r.bridge.EngineStarted(engine) }

func (r *resultWriter) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	return r.bridge.ListTools(ctx)
}

func (r *resultWriter) CallTool(ctx context.Context, name string, args map[string]any) *mcp.CallToolResult {
	res := r.bridge.CallTool(ctx, name, args)
	if r.bridge.Done() {
		r.write()
	}
	return res
}

// write writes the result envelope atomically (a temporary file renamed over path).
func (r *resultWriter) write() {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := atomicfile.WriteJSON(r.path, r.bridge.Result(), 0o644); err != nil {
		fmt.Fprintf(r.errOut, "pab guard: --result: %v\n", err)
	}
}
