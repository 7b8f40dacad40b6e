package batch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/testtool"
)

// mcpServer serves a streamable-HTTP MCP server with the named tools at /mcp.
func mcpServer(t *testing.T, tools ...string) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "fake-browser", Version: "1"}, nil)
	for _, name := range tools {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestReadyMCP: a server with the browser tools is handed over through a front that lets
// only the run's token through; one without them, or none at all, is a browser_start
// error once the bound has passed, and whatever was started is stopped.
func TestReadyMCP(t *testing.T) {
	ctx := context.Background()
	good := mcpServer(t, "browser_navigate", "browser_snapshot")
	stopped := false
	m, err := readyMCP(ctx, good.URL+"/mcp", "", time.Now(), 10*time.Second, func() { stopped = true }, "fake")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.URL, "http://127.0.0.1:") || len(m.Token) < 32 {
		t.Errorf("handed over %s with token %q", m.URL, m.Token)
	}
	// the agent's way in: with the token, tools/list answers
	if n, err := listMCPTools(ctx, m.URL, &http.Client{Transport: bearerTransport{m.Token}}); err != nil || n != 2 {
		t.Errorf("tools/list through the front: %d tools, %v", n, err)
	}
	// without it, or with another, nothing reaches the server
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + m.Token + "x"} {
		req, _ := http.NewRequest("POST", m.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	m.stop()
	if !stopped {
		t.Errorf("stop did not stop the server")
	}

	for name, upstream := range map[string]string{
		"no browser tools": mcpServer(t, "read_file").URL + "/mcp",
		"nothing there":    "http://127.0.0.1:1/mcp",
	} {
		stopped = false
		t0 := time.Now()
		_, err := readyMCP(ctx, upstream, "", t0, time.Second, func() { stopped = true }, "fake")
		var se *StartError
		if !errors.As(err, &se) || se.Kind != ErrorBrowserStart || !strings.Contains(err.Error(), "not ready within 1s") {
			t.Errorf("%s: %v, want a browser_start error", name, err)
		}
		if !stopped {
			t.Errorf("%s: the server was not stopped", name)
		}
		if d := time.Since(t0); d > 40*time.Second {
			t.Errorf("%s: gave up after %s", name, d)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestStartPlaywrightMCP: the real @playwright/mcp of tools/playwright-mcp, attached to a
// real Chromium, is handed over ready (its browser tools listed through the front); one
// that never starts listening is a browser_start error after the bound.
func TestStartPlaywrightMCP(t *testing.T) {
	exe := testtool.Chromium(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools/playwright-mcp/node_modules/@playwright/mcp/cli.js")); err != nil {
		testtool.Missing(t, "@playwright/mcp is not installed: npm ci --prefix tools/playwright-mcp")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := browser.Start(ctx, exe, browser.Options{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	dir := t.TempDir()
	t.Setenv("PAB_PLAYWRIGHT_MCP", "")
	m, err := startPlaywrightMCP(ctx, root, b.CDP, dir, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	n, err := listMCPTools(ctx, m.URL, &http.Client{Transport: bearerTransport{m.Token}})
	if err != nil || n < 10 {
		t.Errorf("tools/list: %d tools, %v", n, err)
	}
	m.stop()

	never := filepath.Join(t.TempDir(), "never.mjs")
	if err := os.WriteFile(never, []byte("setInterval(() => {}, 1000);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PAB_PLAYWRIGHT_MCP", never)
	_, err = startPlaywrightMCP(ctx, root, b.CDP, t.TempDir(), 2*time.Second)
	var se *StartError
	if !errors.As(err, &se) || se.Kind != ErrorBrowserStart || !strings.Contains(err.Error(), "did not listen within 2s") {
		t.Errorf("a server that never listens: %v", err)
	}
}
