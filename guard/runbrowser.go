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
	"github.com/pab-dev/pab/tlsca"
)

// The browser of a guard session (Run): the default browser MCP server's command line
// (@playwright/mcp with Chromium, or attached to the owner's), and the owner's browser
// kept open at review.

// PlaywrightMCPCLI is @playwright/mcp's entry point under a directory holding
// tools/playwright-mcp (installed there with `npm ci`, pinned by its package-lock.json).
const PlaywrightMCPCLI = "tools/playwright-mcp/node_modules/@playwright/mcp/cli.js"

// guardChromiumArgs are extra Chromium switches for the default browser (beside those
// Playwright passes, which already turn off background networking, Translate, network
// time queries and optimization hints).
var guardChromiumArgs = []string{
	"--disable-quic",
	"--disable-sync",
	"--disable-domain-reliability",
	"--no-pings",
}

// browserMode is how the default browser MCP server gets its browser: started headless
// (the default) or headed, with proxy and chrome (an executable, "" = chromium on PATH);
// or attached to the owner's running Chromium at the DevTools URL cdp.
type browserMode struct {
	proxy, chrome string
	headed        bool
	cdp           string
}

// findChromium is RunOptions.FindChromium's default: internal/browser.Find.
func findChromium(path string) (string, error) { return browser.Find(path) }

// defaultBrowserMCP is the command line of @playwright/mcp with Debian's Chromium: headless,
// an in-memory profile, output files under tmp, and with proxy, every request through it
// with pab's CA trusted by its SPKI hash (Playwright takes extra Chromium switches only
// from a config file: tmp/playwright-mcp.json). repoRoot and findChromium are
// RunOptions.RepoRoot and RunOptions.FindChromium.
//
// Every page runs SubmitLockScript(lockToken) first (tmp/submit-lock.js), so that no
// script can submit a form unless the guard arms it for a permitted submit.
func defaultBrowserMCP(repoRoot func() (string, error), findChromium func(string) (string, error), m browserMode, tmp, lockToken string) ([]string, error) {
	proxy := m.proxy
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
	lockPath := filepath.Join(tmp, "submit-lock.js")
	if err := os.WriteFile(lockPath, []byte(SubmitLockScript(lockToken)), 0o600); err != nil {
		return nil, err
	}
	outDir := filepath.Join(tmp, "output")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		return nil, err
	}
	if m.cdp != "" {
		// the owner's running browser: its default context (their profile, their sign-ins);
		// the lock is added to it as an init script for every new document
		configPath, err := writePlaywrightConfig(tmp, map[string]any{"browser": map[string]any{"initScript": []string{lockPath}}})
		if err != nil {
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
	configPath, err := writePlaywrightConfig(tmp, map[string]any{"browser": map[string]any{"launchOptions": map[string]any{"args": chromeArgs}, "initScript": []string{lockPath}}})
	if err != nil {
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

// waitForOwner keeps a browser pab guard started with --headed open after the agent's
// session ended with the run awaiting review, until the owner's word: the browser closed
// (its process gone), POST /local-apply/close, or ctx (Ctrl-C, SIGTERM).
func waitForOwner(ctx context.Context, ctl *Controller, child *Child, errOut io.Writer, controlAddr string) {
	fmt.Fprintf(errOut, "pab guard: the run is awaiting your review: the browser stays open with the filled form. When you are done, close the browser, or POST http://%s%s (or press Ctrl-C)\n", controlAddr, ControlClosePath)
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
