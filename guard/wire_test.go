package guard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawSession is Serve over NewStdioTransport on pipes, with a line-level client.
type rawSession struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func newRawSession(t *testing.T) *rawSession {
	src := newFakeSource()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &rawSession{t: t, in: cw, out: bufio.NewReaderSize(cr, 1<<20), done: make(chan error, 1)}
	go func() { s.done <- Serve(ctx, src, NewStdioTransport(sr, sw)) }()
	return s
}

func (s *rawSession) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write: %v", err)
	}
}

func (s *rawSession) recv() map[string]any {
	s.t.Helper()
	type got struct {
		line string
		err  error
	}
	ch := make(chan got, 1)
	go func() { l, err := s.out.ReadString('\n'); ch <- got{l, err} }()
	select {
	case g := <-ch:
		if g.err != nil {
			s.t.Fatalf("read: %v", g.err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(g.line), &m); err != nil {
			s.t.Fatalf("not JSON: %q", g.line)
		}
		return m
	case err := <-s.done:
		s.t.Fatalf("the session ended (%v) instead of answering", err)
	case <-time.After(10 * time.Second):
		s.t.Fatal("no answer within 10 s")
	}
	return nil
}

func wireErrCode(m map[string]any) (float64, string) {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0, ""
	}
	c, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return c, msg
}

// TestStdioMalformedInput: a non-JSON line, a line over MaxRequestBytes, JSON nested
// 50,000 deep, a batch and a non-request object each get a JSON-RPC error response and the
// session goes on: the next valid request is answered.
func TestStdioMalformedInput(t *testing.T) {
	s := newRawSession(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := s.recv(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	big := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"x","arguments":{"a":"` + strings.Repeat("x", MaxRequestBytes) + `"}}}`
	deep := `{"jsonrpc":"2.0","id":98,"method":"tools/call","params":{"name":"x","arguments":{"a":` + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + `}}}`
	for i, tc := range []struct {
		line, what string
		code       float64
		id         any
		msg        string
	}{
		{"this is not JSON", "non-JSON line", -32700, nil, "parse error"},
		{big, "line over the size limit", -32600, nil, "request too large"},
		{deep, "JSON nested 50,000 deep", -32700, nil, "nested deeper"},
		{`[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`, "batch", -32600, nil, "batches"},
		{`{"jsonrpc":"2.0","id":"q7","foo":1}`, "not a request", -32600, "q7", "invalid request"},
		{`"just a string"`, "not an object", -32600, nil, "JSON object"},
	} {
		t.Logf("sending the %s", tc.what)
		s.send(tc.line)
		m := s.recv()
		code, msg := wireErrCode(m)
		if code != tc.code || !strings.Contains(msg, tc.msg) || m["id"] != tc.id {
			t.Errorf("%s: answer %v; want code %v with %q, id %v", tc.what, m, tc.code, tc.msg, tc.id)
		}
		// the session goes on: the next valid request is answered
		s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(10+i) + `,"method":"tools/list"}`)
		if m := s.recv(); m["result"] == nil {
			t.Fatalf("after the %s: tools/list answered %v", tc.what, m)
		}
	}
	s.in.Close()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Serve did not return after stdin closed")
	}
}

// TestServeHTTPDepth: over HTTP, a body nested 50,000 deep gets 400 with a JSON-RPC parse
// error, and the server goes on answering.
func TestServeHTTPDepth(t *testing.T) {
	ln, err := ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHTTP(ctx, newFakeSource(), ln) }()
	defer func() { cancel(); <-done }()
	u := "http://" + ln.Addr().String() + "/mcp"
	post := func(body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m)
		return resp.StatusCode, m
	}
	code, m := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + `}`)
	if c, _ := wireErrCode(m); code != 400 || c != -32700 {
		t.Errorf("deep body: %d %v; want 400 and -32700", code, m)
	}
	code, _ = post(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if code != 200 {
		t.Errorf("initialize after the deep body: %d", code)
	}
}
