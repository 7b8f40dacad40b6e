package batch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/internal/wholebody/wholebodytest"
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
	m, err := readyMCP(ctx, good.URL+"/mcp", "", time.Now(), 10*time.Second, func() { stopped = true }, "fake", nil)
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
		_, err := readyMCP(ctx, upstream, "", t0, time.Second, func() { stopped = true }, "fake", nil)
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
	m, err := startPlaywrightMCP(ctx, root, b.CDP, dir, 2*time.Minute, newStepRecorder(dir, b.CDP, ""))
	if err != nil {
		t.Fatal(err)
	}
	n, err := listMCPTools(ctx, m.URL, &http.Client{Transport: bearerTransport{m.Token}})
	if err != nil || n < 10 {
		t.Errorf("tools/list: %d tools, %v", n, err)
	}
	playSteps(t, ctx, m, dir)
	m.stop()

	never := filepath.Join(t.TempDir(), "never.mjs")
	if err := os.WriteFile(never, []byte("setInterval(() => {}, 1000);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PAB_PLAYWRIGHT_MCP", never)
	_, err = startPlaywrightMCP(ctx, root, b.CDP, t.TempDir(), 2*time.Second, nil)
	var se *StartError
	if !errors.As(err, &se) || se.Kind != ErrorBrowserStart || !strings.Contains(err.Error(), "did not listen within 2s") {
		t.Errorf("a server that never listens: %v", err)
	}
}

// playSteps makes five tool calls through the front as an agent would (three pages of a
// loopback site, a snapshot, a typing call with a secret on a ref that does not exist) and
// checks steps.jsonl and the view written from it: five steps, each page's screenshot with
// the title of its URL, the typed value nowhere.
func playSteps(t *testing.T, ctx context.Context, m *runMCP, dir string) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!doctype html><title>Page %s</title><h1>Page %s</h1><input aria-label=box>", r.URL.Path[1:], r.URL.Path[1:])
	}))
	defer site.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "steps-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m.URL, HTTPClient: &http.Client{Transport: bearerTransport{m.Token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "typed-secret-4711"
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"browser_navigate", map[string]any{"url": site.URL + "/a"}},
		{"browser_navigate", map[string]any{"url": site.URL + "/b"}},
		{"browser_snapshot", map[string]any{}},
		{"browser_navigate", map[string]any{"url": site.URL + "/c"}},
		{"browser_type", map[string]any{"element": "box", "target": "e999", "text": secret}},
	}
	// broken holds the calls whose answer's stream ended without the answer: the front must
	// record them as steps with an RPC error; each is made again once. @playwright/mcp ended
	// one such stream in two of many full test runs on a loaded machine (the cause is not
	// known; the front's log and the server's stderr are printed when it happens).
	broken := map[int]bool{}
	var order []int // the call behind each recorded step
	for i, call := range calls {
		for try := 0; ; try++ {
			order = append(order, i)
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call.tool, Arguments: call.args})
			if err == nil {
				break
			}
			stderr, _ := os.ReadFile(filepath.Join(dir, "browser-mcp.stderr"))
			front, _ := os.ReadFile(filepath.Join(dir, FileMCPFront))
			msg := fmt.Sprintf("%s: %v\n%s:\n%s\nbrowser-mcp.stderr:\n%s", call.tool, err, FileMCPFront, front, stderr)
			if try == 0 && strings.Contains(err.Error(), "terminated without response") {
				t.Logf("made again: %s", msg)
				broken[len(order)-1] = true
				continue
			}
			t.Errorf("%s", msg)
			break
		}
	}
	cs.Close()
	m.stop() // closes steps.jsonl
	raw, err := os.ReadFile(filepath.Join(dir, FileSteps))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) {
		t.Errorf("steps.jsonl holds the typed value:\n%s", raw)
	}
	all, err := ReadSteps(filepath.Join(dir, FileSteps))
	if err != nil || len(all) != len(order) {
		t.Fatalf("steps: %d, %v, want %d\n%s", len(all), err, len(order), raw)
	}
	var steps []Step // one for each call, its last
	wantPage := []string{"a", "b", "b", "c", "c"}
	for k, st := range all {
		if st.N != k+1 || st.Tool != calls[order[k]].tool {
			t.Errorf("step %d: %+v, want call %s", k+1, st, calls[order[k]].tool)
		}
		if broken[k] {
			if st.RPCError == "" {
				t.Errorf("step %d, whose answer never came: no rpc_error: %+v", k+1, st)
			}
			continue
		}
		steps = append(steps, st)
	}
	if len(steps) != len(calls) {
		t.Fatalf("%d steps answered, want %d", len(steps), len(calls))
	}
	shots := 0
	for _, st := range all {
		if st.Screenshot != "" {
			shots++
		}
	}
	for i, st := range steps {
		if st.Screenshot == "" {
			t.Errorf("step %d: %+v", st.N, st)
			continue
		}
		if st.URL != site.URL+"/"+wantPage[i] || st.Title != "Page "+wantPage[i] {
			t.Errorf("step %d: page %q %q, want %s/%s titled Page %s", st.N, st.URL, st.Title, site.URL, wantPage[i], wantPage[i])
		}
		img, err := os.ReadFile(filepath.Join(dir, st.Screenshot))
		if err != nil || len(img) < 1000 || len(img) > maxShotBytes || !bytes.HasPrefix(img, []byte{0xff, 0xd8}) {
			t.Errorf("step %d: screenshot %d bytes, %v", st.N, len(img), err)
		}
	}
	if !strings.Contains(string(steps[4].Args), "[masked: 17 chars]") || !steps[4].IsError {
		t.Errorf("typing step: args %s, isError %v; want the text masked and the bad ref an error", steps[4].Args, steps[4].IsError)
	}
	if err := WriteView(dir, nil); err != nil {
		t.Fatal(err)
	}
	view, err := os.ReadFile(filepath.Join(dir, FileView))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(view), `<section class="step`); n != len(all) || strings.Contains(string(view), secret) ||
		strings.Count(string(view), "data:image/jpeg;base64,") != shots || len(view) > 5<<20 {
		t.Errorf("view.html: %d steps, %d bytes, secret %v", n, len(view), strings.Contains(string(view), secret))
	}
}

// oneRequestPerConn is a loopback HTTP/1.1 server that answers the first request on each
// connection (200, keep-alive, body "ok") and closes the connection, unanswered, when a
// second request comes on it: a server closing an idle connection just as a request is
// written to it (Node's http server, @playwright/mcp's, after 5 s idle by default).
func oneRequestPerConn(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 1; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if n > 1 {
						return // closed, the request unanswered
					}
					io.Copy(io.Discard, req.Body)
					fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestMCPFrontFreshConnections: the front sends each request on a connection of its own,
// so a server that closes a connection after one answer (as one closing idle connections
// may, just as the next request arrives) answers every POST; on a reused connection the
// second POST would be lost (502: Go's transport does not write a POST again).
func TestMCPFrontFreshConnections(t *testing.T) {
	front, err := startMCPFront(oneRequestPerConn(t), "", "tok", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	for i := 1; i <= 3; i++ {
		req, _ := http.NewRequest("POST", front.URL, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Errorf("POST %d through the front: %d %q, want 200 \"ok\"", i, resp.StatusCode, body)
		}
	}
}

// TestMCPFrontLateBodyRead: an answer's stream through the front is whole even when the
// transport reads the end of the request body after the front has begun to pass the
// answer on (the flake of cmd/pab's TestRunGuardEngineEvents under load: the front's HTTP
// server closes the agent's request body once the answer starts, the transport's late
// read of it failed, and the transport closed the connection to the server with the
// answer half passed on: curl's "transfer closed with outstanding read data remaining",
// browser-mcp-front.log's "use of closed network connection"). The server sends its
// answer in two parts, the second once that late read is done; with and without the step
// recorder (which reads the body first).
func TestMCPFrontLateBodyRead(t *testing.T) {
	for _, steps := range []bool{false, true} {
		t.Run(fmt.Sprintf("steps=%v", steps), func(t *testing.T) {
			released := make(chan struct{}) // the late read is done
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: message\ndata: first\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-released:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, "event: message\ndata: last\n\n")
			}))
			defer up.Close()
			firstSeen := make(chan struct{}) // the agent has the first part of the answer
			base := newFrontTransport()
			tr := wholebodytest.LateEndTransport(base, firstSeen, released)
			dir := t.TempDir()
			var rec *stepRecorder
			if steps {
				rec = newStepRecorder(dir, "", "no browser in this test")
				defer rec.Close()
			}
			front, err := startMCPFront(up.URL+"/mcp", "", "tok", rec, tr)
			if err != nil {
				t.Fatal(err)
			}
			defer front.Close()
			req, _ := http.NewRequest("POST", front.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"browser_navigate","arguments":{}}}`))
			req.Header.Set("Authorization", "Bearer tok")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := wholebodytest.ReadInTwoParts(resp.Body, "data: first\n\n", firstSeen)
			if err != nil || !strings.Contains(got, "data: last\n\n") {
				f, _ := os.ReadFile(filepath.Join(dir, FileMCPFront))
				t.Fatalf("the answer's stream: %v after %q\n%s:\n%s", err, got, FileMCPFront, f)
			}
		})
	}
}

// TestMCPFrontRequestBound: a body of more than maxFrontRequest bytes gets 413 from the
// front (and a line in its log) without reaching the server; one of that size passes.
func TestMCPFrontRequestBound(t *testing.T) {
	var reached []int
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reached = append(reached, len(b))
		mu.Unlock()
	}))
	defer up.Close()
	dir := t.TempDir()
	rec := newStepRecorder(dir, "", "no browser in this test")
	defer rec.Close()
	front, err := startMCPFront(up.URL+"/mcp", "", "tok", rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	for _, n := range []int{maxFrontRequest + 1, maxFrontRequest} {
		req, _ := http.NewRequest("POST", front.URL, bytes.NewReader(bytes.Repeat([]byte(" "), n)))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusOK
		if n > maxFrontRequest {
			want = http.StatusRequestEntityTooLarge
		}
		if resp.StatusCode != want {
			t.Errorf("%d bytes: %d, want %d", n, resp.StatusCode, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 1 || reached[0] != maxFrontRequest {
		t.Errorf("bodies that reached the server: %v, want [%d]", reached, maxFrontRequest)
	}
	if f, _ := os.ReadFile(filepath.Join(dir, FileMCPFront)); !strings.Contains(string(f), "refused (413)") {
		t.Errorf("%s: %q, want the refusal", FileMCPFront, f)
	}
}
