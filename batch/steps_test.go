package batch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/internal/cdpconn"
)

// TestParseRPCResponse: the answer to a tools/call is found in a JSON body, a JSON batch
// and an SSE stream (with a notification before it, CRLF lines and a multi-line data
// field); another id's answer is not taken.
func TestParseRPCResponse(t *testing.T) {
	id := json.RawMessage(`7`)
	res := `{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"text","text":"boom"}]}}`
	for name, tc := range map[string]struct{ ctype, body string }{
		"json":  {"application/json", res},
		"batch": {"application/json", `[{"jsonrpc":"2.0","id":6,"result":{}},` + res + `]`},
		"sse": {"text/event-stream; charset=utf-8", "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n" +
			"id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{\"isError\":true,\"content\":[{\"type\":\"text\",\"text\":\"boom\"}]}}\n\n"},
	} {
		m := parseRPCResponse(tc.ctype, []byte(tc.body), id)
		if m == nil || m.Result == nil || !m.Result.IsError || m.Result.Content[0].Text != "boom" {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if m := parseRPCResponse("application/json", []byte(strings.Replace(res, `"id":7`, `"id":8`, 1)), id); m != nil {
		t.Errorf("another id's answer was taken: %+v", m)
	}
}

// TestMaskArgs: typed values are masked at any depth and collected to be cut out of what
// a step shows; other arguments stay.
func TestMaskArgs(t *testing.T) {
	var args any
	json.Unmarshal([]byte(`{"element":"Name","ref":"e3","text":"Ada Lovelace","fields":[{"name":"Email","value":"ada@example.org"}],"values":["yes"]}`), &args)
	var secrets []string
	b, _ := json.Marshal(maskArgs(args, &secrets))
	s := string(b)
	for _, sec := range []string{"Ada Lovelace", "ada@example.org", `"yes"`} {
		if strings.Contains(s, sec) {
			t.Errorf("masked args %s hold %s", s, sec)
		}
	}
	if !strings.Contains(s, `"text":"[masked: 12 chars]"`) || !strings.Contains(s, `"element":"Name"`) || len(secrets) != 3 {
		t.Errorf("masked args %s, secrets %d", s, len(secrets))
	}
	if got := scrub("https://x/?q=Ada+Lovelace and Ada Lovelace", secrets); strings.Contains(got, "Ada") {
		t.Errorf("scrub: %s", got)
	}
}

// FuzzParseRPCResponse: any answer body is parsed or ignored without a panic.
func FuzzParseRPCResponse(f *testing.F) {
	f.Add("text/event-stream", []byte("data: {\"id\":1,\"result\":{\"content\":[]}}\n\n"))
	f.Add("application/json", []byte(`[{"id":1,"error":{"message":"x"}}]`))
	f.Add("text/event-stream", []byte("data:\ndata"))
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		parseRPCResponse(ctype, body, json.RawMessage(`1`))
	})
}

// FuzzReadSteps: any steps.jsonl is read or refused with an error naming it, and what is
// read renders into a view without a panic.
func FuzzReadSteps(f *testing.F) {
	f.Add([]byte(`{"n":1,"tool":"browser_navigate","start":"2026-01-01T00:00:00.000Z","end":"2026-01-01T00:00:01.000Z","screenshot":"../../etc/passwd"}` + "\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, FileSteps), data, 0o644)
		os.WriteFile(filepath.Join(dir, FileLog), []byte(`{"time":"2026-01-01T00:00:00.500Z","method":"GET","url":"https://a/","source":"miss","status":404}`+"\n"), 0o644)
		if _, err := ReadSteps(filepath.Join(dir, FileSteps)); err != nil {
			if !strings.Contains(err.Error(), FileSteps) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := WriteView(dir, nil); err != nil {
			t.Fatalf("WriteView: %v", err)
		}
	})
}

// TestStepsConcurrentCalls: tool calls sent at once through a recording front (a fake MCP
// server, no browser) are all answered and recorded once each, numbered 1..n with windows
// that do not overlap (the front records one call at a time), the typed values masked.
func TestStepsConcurrentCalls(t *testing.T) {
	srv := mcpServer(t, "browser_navigate", "browser_type")
	dir := t.TempDir()
	rec := newStepRecorder(dir, "", "no browser in this test")
	front, err := startMCPFront(srv.URL+"/mcp", "", "tok", rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL, HTTPClient: &http.Client{Transport: bearerTransport{"tok"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser_type", Arguments: map[string]any{"text": "secret-value", "ref": "e1"}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	cs.Close()
	front.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	steps, err := ReadSteps(filepath.Join(dir, FileSteps))
	if err != nil || len(steps) != n {
		t.Fatalf("%d steps, %v", len(steps), err)
	}
	var lastEnd string
	for i, st := range steps {
		if st.N != i+1 || st.Tool != "browser_type" || strings.Contains(string(st.Args), "secret") || st.ShotNote != "no browser in this test" || st.RPCError != "" {
			t.Errorf("step %d: %+v", i+1, st)
		}
		if st.Start < lastEnd {
			t.Errorf("step %d starts at %s, before step %d ended at %s", i+1, st.Start, i, lastEnd)
		}
		lastEnd = st.End
	}
}

// TestPickPage: the page the answer names wins over the browser's order; without it the
// first page that is not blank, else a blank page; never a worker.
func TestPickPage(t *testing.T) {
	ts := []cdpconn.TargetInfo{{TargetID: "w", Type: "service_worker", URL: "https://a/sw.js"}, {TargetID: "1", Type: "page", URL: "about:blank"},
		{TargetID: "2", Type: "page", URL: "https://a/"}, {TargetID: "3", Type: "page", URL: "https://b/"}}
	for hint, want := range map[string]string{"https://b/": "3", "": "2", "https://gone/": "2"} {
		if p := pickPage(ts, hint); p == nil || p.TargetID != want {
			t.Errorf("hint %q: %v, want %s", hint, p, want)
		}
	}
	if p := pickPage(ts[:2], ""); p == nil || p.TargetID != "1" {
		t.Errorf("only blank: %v", p)
	}
	if m := pageURLLine.FindStringSubmatch("### Page state\n- Page URL: https://b/x?y=1\n- Page Title: B\n"); m == nil || m[1] != "https://b/x?y=1" {
		t.Errorf("Page URL line: %q", m)
	}
}

// TestFrontLog: a stream the MCP server cuts in the middle of an answer is recorded as a
// step with an RPC error, and the front writes what happened to browser-mcp-front.log; a
// front with nothing gone wrong writes no log.
func TestFrontLog(t *testing.T) {
	// an upstream that starts an answer's stream and then cuts its connection
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	rec := newStepRecorder(dir, "", "no browser in this test")
	front, err := startMCPFront(srv.URL+"/mcp", "", "tok", rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"browser_navigate","arguments":{"url":"http://x/"}}}`
	req, _ := http.NewRequest("POST", front.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("the cut stream reached the client whole")
		}
	}
	front.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	steps, err := ReadSteps(filepath.Join(dir, FileSteps))
	if err != nil || len(steps) != 1 || steps[0].RPCError == "" {
		t.Fatalf("steps %+v, %v; want one with an rpc_error", steps, err)
	}
	log, err := os.ReadFile(filepath.Join(dir, FileMCPFront))
	if err != nil || !strings.Contains(string(log), "ReverseProxy read error") {
		t.Errorf("%s: %q, %v", FileMCPFront, log, err)
	}

	// nothing wrong: no log
	good := mcpServer(t, "browser_navigate")
	dir2 := t.TempDir()
	front2, err := startMCPFront(good.URL+"/mcp", "", "tok", newStepRecorder(dir2, "", "none"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listMCPTools(context.Background(), front2.URL, &http.Client{Transport: bearerTransport{"tok"}}); err != nil {
		t.Fatal(err)
	}
	front2.Close()
	if _, err := os.Stat(filepath.Join(dir2, FileMCPFront)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a front with nothing wrong wrote %s: %v", FileMCPFront, err)
	}
}
