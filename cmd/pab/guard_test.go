package main

// Tests of `pab guard`: its command line (bad input, nothing started), and an end-to-end
// run: an MCP client plays the agent through `pab guard` over stdio, with @playwright/mcp
// and headless Chromium behind it, against `pab replay` of a shipped task.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/testtool"
)

// writeApp writes an application file and returns its path.
func writeApp(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const smokeApp = `id: guard-smoke
mode: fill_and_review
sites: [books.toscrape.com]
grounding:
  profile: |
    Jane Doe, jane.doe@example.com
`

func TestGuardCommandLineErrors(t *testing.T) {
	bad := writeApp(t, "id: x\nmode: fill_and_review\nsites: [a.test]\nlimits: {actions: many}\n")
	good := writeApp(t, smokeApp)
	marker := filepath.Join(t.TempDir(), "started")
	// a --browser-mcp that would leave a mark if it were ever started
	starter := fmt.Sprintf("sh -c 'touch %s'", marker)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"guard"}, "--application FILE is required"},
		{[]string{"guard", "--application", bad, "--browser-mcp", starter, "--unprotected-browser"}, bad + ":4:"},
		{[]string{"guard", "--application", filepath.Join(t.TempDir(), "missing.yaml"), "--browser-mcp", starter, "--unprotected-browser"}, "missing.yaml"},
		{[]string{"guard", "--application", good, "--listen", "0.0.0.0:0", "--browser-mcp", starter, "--unprotected-browser"}, "--listen"},
		{[]string{"guard", "--application", good, "--control", "10.1.2.3:80", "--browser-mcp", starter, "--unprotected-browser"}, "--control"},
		{[]string{"guard", "--application", good, "--proxy", "http://127.0.0.1:8899", "--browser-mcp", starter, "--unprotected-browser"}, "--proxy"},
		{[]string{"guard", "--application", good, "--browser-mcp", "'unclosed", "--unprotected-browser"}, "unclosed"},
		{[]string{"guard", "--application", good, "--result", "/nonexistent/dir/r.json", "--browser-mcp", starter, "--unprotected-browser"}, "--result"},
		{[]string{"guard", "--application", good, "--cdp-endpoint", "http://10.0.0.5:9222"}, "must be on loopback"},
		{[]string{"guard", "--application", good, "--cdp-endpoint", "ftp://127.0.0.1:9222"}, "want http://127.0.0.1:PORT"},
		{[]string{"guard", "--application", good, "--cdp-endpoint", "http://127.0.0.1"}, "no port"},
		{[]string{"guard", "--application", good, "--cdp-endpoint", "http://127.0.0.1:9222", "--headed"}, "give --cdp-endpoint or --headed, not both"},
		{[]string{"guard", "--application", good, "--cdp-endpoint", "http://127.0.0.1:9222", "--browser-mcp", starter, "--unprotected-browser"}, "give --cdp-endpoint or --browser-mcp"},
		{[]string{"guard", "--application", good, "--headed", "--browser-mcp", starter, "--unprotected-browser"}, "give --headed or --browser-mcp"},
		{[]string{"guard", "--application", good, "--headed"}, "--headed needs a display"},
		{[]string{"guard", "--application", good, "--browser-mcp", starter}, "pass --unprotected-browser"},
		{[]string{"guard", "--application", good, "--unprotected-browser"}, "--unprotected-browser goes with --browser-mcp only"},
	} {
		cmd := pabCmd(tc.args...)
		cmd.Env = append(cmd.Env, "DISPLAY=", "WAYLAND_DISPLAY=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Stdin = strings.NewReader("")
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Errorf("%v: %v; want exit 1", tc.args, err)
		}
		msg := strings.TrimSpace(stderr.String())
		if !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 0 {
			t.Errorf("%v: stderr %q; want one line with %q", tc.args, msg, tc.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the browser MCP server was started despite bad input")
	}
}

// fakeMCPBin builds guard's fake MCP server (guard/testdata/fakemcp).
func fakeMCPBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakemcp")
	if out, err := exec.Command("go", "build", "-o", bin, "../../guard/testdata/fakemcp").CombinedOutput(); err != nil {
		t.Fatalf("build fakemcp: %v\n%s", err, out)
	}
	return bin
}

// guardProc is a running `pab guard` over stdio with an MCP client session.
type guardProc struct {
	cmd     *exec.Cmd
	session *mcp.ClientSession
	stderr  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGuard starts `pab guard ARGS...` over stdio and connects an MCP client to it.
func startGuard(t *testing.T, args ...string) *guardProc {
	t.Helper()
	g := &guardProc{stderr: &syncBuffer{}}
	g.cmd = pabCmd(append([]string{"guard"}, args...)...)
	g.cmd.Stderr = g.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "guard-test"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: g.cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to pab guard: %v\nstderr:\n%s", err, g.stderr)
	}
	g.session = cs
	t.Cleanup(func() { g.close(t) })
	return g
}

// close closes the client session (pab guard's stdin), which ends pab guard.
func (g *guardProc) close(t *testing.T) {
	if g.session == nil {
		return
	}
	g.session.Close()
	g.session = nil
	if g.cmd.ProcessState == nil || !g.cmd.ProcessState.Exited() {
		t.Errorf("pab guard did not exit by itself when its stdin closed\nstderr:\n%s", g.stderr)
	} else if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("pab guard exited with %d\nstderr:\n%s", code, g.stderr)
	}
}

func (g *guardProc) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := g.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", name, err, g.stderr)
	}
	return res
}

func textOf(r *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

var controlLine = regexp.MustCompile(`control http://(127\.0\.0\.1:\d+)`)

// tokenLine finds the control API's token pab guard prints on stderr.
var tokenLine = regexp.MustCompile(`control token ([0-9a-f]{64})`)

// TestGuardPlumbingFakeBrowser runs pab guard over stdio with the fake MCP server as its
// browser: the control API answers, a browser that dies gives error results (no hang),
// and closing stdin ends pab guard with the result file written.
func TestGuardPlumbingFakeBrowser(t *testing.T) {
	app := writeApp(t, smokeApp)
	dir := t.TempDir()
	resultPath := filepath.Join(dir, "result.json")
	tracePath := filepath.Join(dir, "trace.jsonl")
	g := startGuard(t, "--application", app, "--browser-mcp", fakeMCPBin(t), "--unprotected-browser", "--result", resultPath, "--trace", tracePath)
	m := controlLine.FindStringSubmatch(g.stderr.String())
	if m == nil {
		t.Fatalf("no control address on stderr:\n%s", g.stderr)
	}
	tm := tokenLine.FindStringSubmatch(g.stderr.String())
	if tm == nil {
		t.Fatalf("no control token on stderr:\n%s", g.stderr)
	}
	req, _ := http.NewRequest("GET", "http://"+m[1]+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+tm[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != 200 || st["run"] == nil {
		t.Errorf("GET /status: %d %v", resp.StatusCode, st)
	}
	start := time.Now()
	res := g.call(t, "exit", nil) // the browser dies in the middle of the call
	if !res.IsError {
		t.Errorf("call to a dying browser: %+v; want an error result", res)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the dying browser's call took %s", d)
	}
	g.close(t)
	data, err := os.ReadFile(resultPath)
	if err != nil {
		t.Fatalf("result file: %v", err)
	}
	var r map[string]any
	if err := json.Unmarshal(data, &r); err != nil || r["runId"] != "guard-smoke" {
		t.Errorf("result file %s: %v", data, err)
	}
	if _, err := os.Stat(tracePath); err != nil {
		t.Errorf("trace file: %v", err)
	}
}

// playwrightMCPPath finds the installed @playwright/mcp; in CI its absence fails the test.
func playwrightMCPPath(t *testing.T) string {
	p := filepath.Join(repoRoot, guard.PlaywrightMCPCLI)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	testtool.Missing(t, "%s missing (npm ci --prefix tools/playwright-mcp; scripts/test.sh runs it)", p)
	return ""
}

// TestGuardEndToEnd: an MCP client plays the agent through pab guard (stdio) with
// @playwright/mcp and headless Chromium, against pab replay of books-sapiens-price (HTTP)
// and lil-former-projects (HTTPS: Chromium trusts pab's CA by its SPKI hash, nothing else).
func TestGuardEndToEnd(t *testing.T) {
	chromiumPath(t)
	playwrightMCPPath(t)
	if _, err := exec.LookPath("node"); err != nil {
		testtool.Missing(t, "node not found on PATH (Debian's nodejs)")
	}
	for _, tc := range []struct{ task, site, url, text string }{
		{"books-sapiens-price", "books.toscrape.com", "http://books.toscrape.com/", "All products"},
		{"lil-former-projects", "lil.law.harvard.edu", "https://lil.law.harvard.edu/projects/", "Projects"},
	} {
		t.Run(tc.task, func(t *testing.T) { guardEndToEnd(t, tc.task, tc.site, tc.url, tc.text) })
	}
}

func guardEndToEnd(t *testing.T, task, site, pageURL, pageText string) {
	p := startReplay(t, task)
	app := writeApp(t, strings.Replace(smokeApp, "books.toscrape.com", site, 1))
	dir := t.TempDir()
	tracePath := filepath.Join(dir, "trace.jsonl")
	resultPath := filepath.Join(dir, "result.json")
	g := startGuard(t, "--application", app, "--proxy", p.addr, "--trace", tracePath, "--result", resultPath)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lt, err := g.session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range lt.Tools {
		names[tl.Name] = true
	}
	if names["browser_evaluate"] || names["browser_run_code_unsafe"] {
		t.Errorf("script tools offered: %v", names)
	}
	for _, n := range []string{"upload_artifact", "browser_navigate", "browser_snapshot", "browser_click"} {
		if !names[n] {
			t.Errorf("%s not offered: %v", n, names)
		}
	}

	res := g.call(t, "browser_navigate", map[string]any{"url": pageURL})
	if res.IsError {
		t.Fatalf("navigate refused: %s\nstderr:\n%s", textOf(res), g.stderr)
	}
	res = g.call(t, "browser_snapshot", nil)
	if res.IsError || !strings.Contains(textOf(res), pageText) {
		t.Fatalf("snapshot does not show the recorded page (error %v):\n%.2000s", res.IsError, textOf(res))
	}
	res = g.call(t, "browser_evaluate", map[string]any{"function": "() => document.title"})
	if !res.IsError {
		t.Errorf("browser_evaluate allowed: %s", textOf(res))
	}
	res = g.call(t, "browser_navigate", map[string]any{"url": "data:text/html,<form method=post>"})
	if !res.IsError {
		t.Errorf("data: URL allowed: %s", textOf(res))
	}
	g.close(t)

	// the trace holds the decisions
	data, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	decisions := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e struct {
			Type   string         `json:"type"`
			Detail map[string]any `json:"detail"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("trace line not JSON: %q", sc.Text())
		}
		if e.Type == "policy.decision" {
			tool, _ := e.Detail["tool"].(string)
			dec, _ := e.Detail["decision"].(string)
			decisions[tool+" "+dec]++
		}
	}
	if decisions["browser_evaluate refused"] == 0 {
		t.Errorf("no refusal of browser_evaluate in the trace: %v\n%s", decisions, data)
	}
	if decisions["browser_navigate refused"] == 0 {
		t.Errorf("no refusal of the data: URL in the trace: %v\n%s", decisions, data)
	}
	if bytes.Contains(data, []byte("jane.doe@example.com")) {
		t.Error("the trace holds grounding text")
	}
	if _, err := os.Stat(resultPath); err != nil {
		t.Errorf("result file: %v", err)
	}

	// the page came from the recording, through the proxy
	p.stop(t)
	var page bool
	for _, l := range p.readLog(t) {
		if l.URL == pageURL && l.Type == "document" && l.Source == "exact" && l.Status == 200 {
			page = true
		}
	}
	if !page {
		t.Errorf("replay log has no exact answer for the page:\n%s", dumpLog(p.readLog(t)))
	}
}
