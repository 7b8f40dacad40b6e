package guard

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
	"path/filepath"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/browser"
)

// The browser of a guard session (Run): the default browser MCP server's command line
// (@playwright/mcp with Chromium, or attached to the owner's), and the owner's browser
// kept open at review.

// PlaywrightMCPCLI is @playwright/mcp's entry point under a directory holding
// tools/playwright-mcp (installed there with `npm ci`, pinned by its package-lock.json).
const PlaywrightMCPCLI = "tools/playwright-mcp/node_modules/@playwright/mcp/cli.js"

// findChromium is RunOptions.FindChromium's default: internal/browser.Find.
func findChromium(path string) (string, error) { return browser.Find(path) }

// defaultBrowserMCP is the command line of @playwright/mcp attached to the browser the
// guard holds (heldBrowser) at the DevTools URL cdp, output files under tmp, then extra
// (heldBrowser.ownerContextArgs: in the owner's browser, a context of the run's own through
// the wire gate; else the guard's own Chromium's default context, an in-memory profile).
// repoRoot is RunOptions.RepoRoot.
//
// With lockToken set, every page runs SubmitLockScript(lockToken) first (tmp/submit-lock.js,
// given as an init script in tmp/playwright-mcp.json): the page-side lock, an early refusal
// that tells the agent why; the enforcement is below the page. "" installs no lock (the
// test-only --test-no-page-lock).
func defaultBrowserMCP(repoRoot func() (string, error), cdp, tmp, lockToken string, extra []string) ([]string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node not found on PATH: install Node.js (Debian's nodejs), or pass --browser-mcp")
	}
	root := ""
	if repoRoot != nil {
		if r, err := repoRoot(); err == nil {
			root = r
		}
	}
	cli, err := FindPlaywrightMCP(root)
	if err != nil {
		return nil, err
	}
	outDir := filepath.Join(tmp, "output")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		return nil, err
	}
	config := map[string]any{"browser": map[string]any{}}
	if lockToken != "" {
		lockPath := filepath.Join(tmp, "submit-lock.js")
		if err := os.WriteFile(lockPath, []byte(SubmitLockScript(lockToken)), 0o600); err != nil {
			return nil, err
		}
		config["browser"] = map[string]any{"initScript": []string{lockPath}}
	}
	configPath, err := writePlaywrightConfig(tmp, config)
	if err != nil {
		return nil, err
	}
	argv := []string{node, cli, "--config", configPath, "--cdp-endpoint", cdp,
		"--no-webmcp", // tools a page registers are never offered
		"--output-dir", outDir}
	return append(argv, extra...), nil
}

// writePlaywrightConfig writes config, @playwright/mcp's configuration, as
// tmp/playwright-mcp.json (indented JSON, mode 0600) and returns the file's path.
func writePlaywrightConfig(tmp string, config map[string]any) (string, error) {
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return "", err
	}
	configPath := filepath.Join(tmp, "playwright-mcp.json")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		return "", err
	}
	return configPath, nil
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

// waitForOwner keeps the run's browser open after the agent's session ended with the run
// awaiting review, until the owner's word: the browser closed (alive false: the process
// pab guard started with --headed gone, or, ownerBrowser, the run's window in the owner's
// browser closed), POST /local-apply/close, or ctx (Ctrl-C, SIGTERM).
func waitForOwner(ctx context.Context, ctl *Controller, child *Child, alive func() bool, errOut io.Writer, controlAddr string, ownerBrowser bool) {
	what, closeIt := "the browser stays open", "close the browser"
	if ownerBrowser {
		what, closeIt = "the run's window in your browser stays open", "close that window"
	}
	fmt.Fprintf(errOut, "pab guard: the run is awaiting your review: %s with the filled form. When you are done, %s, or POST http://%s%s (or press Ctrl-C)\n", what, closeIt, controlAddr, ControlClosePath)
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
			if !alive() {
				if ownerBrowser {
					fmt.Fprintln(errOut, "pab guard: the run's window was closed")
				} else {
					fmt.Fprintln(errOut, "pab guard: the browser was closed")
				}
				return
			}
		}
	}
}

// FindPlaywrightMCP finds @playwright/mcp's cli.js: $PAB_PLAYWRIGHT_MCP, else
// PlaywrightMCPCLI under repoRoot (the pab repository; "" = none), else beside the running
// executable (its directory and its parent). Errors: $PAB_PLAYWRIGHT_MCP is not a file, or
// none of the places holds it (the error lists them and how to install it).
func FindPlaywrightMCP(repoRoot string) (string, error) {
	if p := os.Getenv("PAB_PLAYWRIGHT_MCP"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("PAB_PLAYWRIGHT_MCP=%s: not a file", p)
		}
		return p, nil
	}
	var tried []string
	if repoRoot != "" {
		tried = append(tried, filepath.Join(repoRoot, PlaywrightMCPCLI))
	}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		tried = append(tried, filepath.Join(dir, PlaywrightMCPCLI), filepath.Join(dir, "..", PlaywrightMCPCLI))
	}
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("@playwright/mcp not found (tried %s): run `npm ci --prefix tools/playwright-mcp` in the pab repository, set PAB_PLAYWRIGHT_MCP, or pass --browser-mcp", strings.Join(tried, ", "))
}
