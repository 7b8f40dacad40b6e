package guard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeSource is a ToolSource that records the calls it gets.
type fakeSource struct {
	tools []*mcp.Tool
	mu    sync.Mutex
	calls []fakeCall
}

type fakeCall struct {
	name string
	args map[string]any
}

func (f *fakeSource) ListTools(context.Context) ([]*mcp.Tool, error) { return f.tools, nil }

func (f *fakeSource) CallTool(_ context.Context, name string, args map[string]any) *mcp.CallToolResult {
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{name, args})
	f.mu.Unlock()
	if name == "browser_evaluate" || name == "browser_run_code_unsafe" {
		return errorResult("refused: " + name + " is not offered")
	}
	j, _ := json.Marshal(args)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + string(j)}}}
}

func (f *fakeSource) called() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

func newFakeSource() *fakeSource {
	return &fakeSource{tools: []*mcp.Tool{
		{Name: "browser_navigate", Description: "go to a URL", InputSchema: map[string]any{
			"type": "object", "properties": map[string]any{"url": map[string]any{"type": "string"}},
			"required": []any{"url"}, "additionalProperties": false},
			OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}},
		{Name: "browser_evaluate", InputSchema: map[string]any{"type": "object"}},
		{Name: "weird_schema", InputSchema: map[string]any{"type": "array"}},
		{Name: "no_schema"},
		{Name: ""},
	}}
}

// connectInMemory serves src with Serve over an in-memory pipe and returns a client session.
func connectInMemory(t *testing.T, src ToolSource) (*mcp.ClientSession, chan error) {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, src, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, served
}

func TestServeForwardsTools(t *testing.T) {
	src := newFakeSource()
	cs, served := connectInMemory(t, src)
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tl := range lt.Tools {
		got[tl.Name] = tl
	}
	if len(got) != 4 {
		t.Fatalf("tools %v; want the 4 named ones", reflect.ValueOf(got).MapKeys())
	}
	nav := got["browser_navigate"]
	want := map[string]any{"type": "object", "properties": map[string]any{"url": map[string]any{"type": "string"}},
		"required": []any{"url"}, "additionalProperties": false}
	if !reflect.DeepEqual(nav.InputSchema, want) || nav.Description != "go to a URL" {
		t.Errorf("browser_navigate forwarded as %+v", nav)
	}
	if nav.OutputSchema != nil {
		t.Errorf("output schema kept: %v", nav.OutputSchema)
	}
	for _, n := range []string{"weird_schema", "no_schema"} {
		if !reflect.DeepEqual(got[n].InputSchema, map[string]any{"type": "object"}) {
			t.Errorf("%s schema %v; want {type: object}", n, got[n].InputSchema)
		}
	}

	// extra arguments (not in the schema) reach the source, untouched
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser_navigate",
		Arguments: map[string]any{"url": "http://a.test/", "extra": []any{1.0, "x"}}})
	if err != nil || res.IsError {
		t.Fatalf("navigate: %v %+v", err, res)
	}
	// a refusal from the source reaches the client as an error result
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser_evaluate", Arguments: map[string]any{"function": "() => 1"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "refused") {
		t.Errorf("evaluate: %v %+v", err, res)
	}
	// no arguments: nil map
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_schema"}); err != nil {
		t.Fatal(err)
	}
	// arguments that are not an object never reach the source
	for _, bad := range []json.RawMessage{json.RawMessage(`[1,2]`), json.RawMessage(`"http://a.test/"`), json.RawMessage(`42`)} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser_navigate", Arguments: bad})
		if err != nil {
			t.Errorf("args %s: protocol error %v; want an error result", bad, err)
			continue
		}
		if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "JSON object") {
			t.Errorf("args %s: %+v", bad, res)
		}
	}
	calls := src.called()
	if len(calls) != 3 {
		t.Fatalf("source got %d calls (%v); want 3", len(calls), calls)
	}
	if calls[0].name != "browser_navigate" || !reflect.DeepEqual(calls[0].args, map[string]any{"url": "http://a.test/", "extra": []any{1.0, "x"}}) {
		t.Errorf("first call %+v", calls[0])
	}
	if calls[2].name != "no_schema" || len(calls[2].args) != 0 {
		t.Errorf("call without arguments: %+v", calls[2])
	}
	// a tool not offered still reaches the source, which refuses it (and can trace that)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser_run_code_unsafe", Arguments: map[string]any{"code": "x"}})
	if err != nil || !res.IsError {
		t.Errorf("tool not offered: %v %+v", err, res)
	}
	if c := src.called(); len(c) != 4 || c[3].name != "browser_run_code_unsafe" || c[3].args["code"] != "x" {
		t.Errorf("tool not offered did not reach the source: %+v", c)
	}
	cs.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after the client closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Serve did not return after the client closed")
	}
}

// TestServeRawWire sends hand-written JSON-RPC lines, as a buggy agent could: arguments of
// the wrong type, and none at all; the server answers each and goes on.
func TestServeRawWire(t *testing.T) {
	src := newFakeSource()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, src, &mcp.IOTransport{Reader: sr, Writer: sw}) }()
	in := bufio.NewReader(cr)
	send := func(s string) {
		if _, err := io.WriteString(cw, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]any {
		line, err := in.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("server wrote a line that is not JSON: %q", line)
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := recv(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"browser_navigate","arguments":"http://a.test/"}}`)
	m := recv()
	if r, _ := m["result"].(map[string]any); r == nil || r["isError"] != true {
		t.Errorf("string arguments: %v; want an error result", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"browser_navigate","arguments":{"url":"http://a.test/"}}}`)
	m = recv()
	if r, _ := m["result"].(map[string]any); r == nil || r["isError"] == true {
		t.Errorf("good call after a bad one: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_schema"}}`)
	m = recv()
	if r, _ := m["result"].(map[string]any); r == nil || r["isError"] == true {
		t.Errorf("call without arguments: %v", m)
	}
	if c := src.called(); len(c) != 2 || c[1].args != nil {
		t.Errorf("source calls %v; want the good one and one with nil arguments", c)
	}
	cw.Close()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Error("Serve did not return after stdin closed")
	}
}

func TestDecodeArguments(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]any
		err  string
	}{
		{"", nil, ""},
		{" null ", nil, ""},
		{`{}`, map[string]any{}, ""},
		{`{"a":{"b":[1,true,null]}}`, map[string]any{"a": map[string]any{"b": []any{1.0, true, nil}}}, ""},
		{`[1]`, nil, "JSON object"},
		{`"x"`, nil, "JSON object"},
		{`{"a":`, nil, "not a valid JSON object"},
		{`{"a":1} {"b":2}`, nil, "one JSON object"},
		{`{"a":1}]`, nil, "one JSON object"},
	} {
		got, err := decodeArguments(json.RawMessage(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v; want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	big := `{"a":"` + strings.Repeat("x", MaxArgumentBytes) + `"}`
	if _, err := decodeArguments(json.RawMessage(big)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversized arguments: %v", err)
	}
}

func FuzzDecodeArguments(f *testing.F) {
	for _, s := range []string{"", "null", "{}", `{"a":[1,{"b":null}]}`, "[", `{"a":1}x`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeArguments(json.RawMessage(data))
		if err != nil && m != nil {
			t.Fatalf("error %v with a map", err)
		}
		if err == nil && m != nil {
			if _, err := json.Marshal(m); err != nil {
				t.Fatalf("decoded map does not marshal: %v", err)
			}
		}
	})
}

func TestListenLoopback(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:80", "8080", "[::]:0"} {
		if ln, err := ListenLoopback(bad); err == nil {
			ln.Close()
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"127.0.0.1:0", "localhost:0", "127.0.0.2:0"} {
		ln, err := ListenLoopback(good)
		if err != nil {
			t.Errorf("%q: %v", good, err)
			continue
		}
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
			t.Errorf("%q listens on %v", good, ip)
		}
		ln.Close()
	}
}

func TestServeHTTP(t *testing.T) {
	src := newFakeSource()
	ln, err := ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeHTTP(ctx, src, ln) }()
	defer func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("ServeHTTP: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeHTTP did not stop")
		}
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 4 {
		t.Fatalf("list over HTTP: %v %v", err, lt)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "browser_navigate", Arguments: map[string]any{"url": "http://b.test/"}})
	if err != nil || res.IsError {
		t.Fatalf("call over HTTP: %v %+v", err, res)
	}
	if c := src.called(); len(c) != 1 || c[0].args["url"] != "http://b.test/" {
		t.Errorf("source calls %+v", c)
	}
	// DNS rebinding: a foreign Host header is refused
	req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Host = "evil.example:80"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Errorf("foreign Host header: status %d", resp.StatusCode)
	}
}

// engineSource is a fakeSource that records EngineStarted.
type engineSource struct {
	*fakeSource
	mu      sync.Mutex
	engines []string
}

func (e *engineSource) EngineStarted(engine string) {
	e.mu.Lock()
	e.engines = append(e.engines, engine)
	e.mu.Unlock()
}

// A ToolSource that is an EngineObserver learns the client's name at its first tools/list.
func TestServeEngineStarted(t *testing.T) {
	src := &engineSource{fakeSource: newFakeSource()}
	cs, _ := connectInMemory(t, src)
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.engines) == 0 || src.engines[0] != "test" {
		t.Fatalf("EngineStarted calls %q; want [test ...]", src.engines)
	}
}
