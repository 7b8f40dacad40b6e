package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pab-dev/pab/internal/jsonx"
)

// ToolSource is what the MCP server offers to the agent: a *Bridge, or a fake in tests.
// CallTool never fails with a Go error: a refusal or failure is a result with IsError.
type ToolSource interface {
	ListTools(ctx context.Context) ([]*mcp.Tool, error)
	CallTool(ctx context.Context, name string, args map[string]any) *mcp.CallToolResult
}

// EngineObserver is implemented by a ToolSource that traces the agent (the engine) driving
// the run (*Bridge: engine.started): NewMCPServer calls EngineStarted at every tools/list
// and tools/call (the Bridge traces only the first), with the client's name from its
// clientInfo ("" when it gave none).
type EngineObserver interface {
	EngineStarted(engine string)
}

// ReadinessClient is the client name of pab run's readiness check (batch: it connects and
// lists the tools before the agent starts); it is not the engine, so it is not observed.
const ReadinessClient = "pab-run-readiness"

// MaxArgumentBytes bounds the JSON arguments of one tool call (and, over HTTP, one request).
const MaxArgumentBytes = 4 << 20

// NewMCPServer returns an MCP server named "pab-guard" whose tools are src.ListTools(ctx),
// each with its input schema forwarded as given (so that arguments the schema does not list
// still reach src to be judged) and its output schema dropped (src answers with text).
// A tool whose input schema is not a JSON object schema gets {"type":"object"}; a tool
// without a name is skipped; both are logged on logger (nil: discarded). Calls decode the
// arguments into map[string]any (absent or null: nil) and go to src.CallTool, calls of
// tools not listed too (src refuses them, and can record it); arguments that are not a
// JSON object, or larger than MaxArgumentBytes, get an error result.
// Errors: src.ListTools failed, or it listed no tools.
func NewMCPServer(ctx context.Context, src ToolSource, logger *slog.Logger) (*mcp.Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tools, err := src.ListTools(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	if len(tools) == 0 {
		return nil, errors.New("list tools: no tools to offer")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "pab-guard", Title: "pab guard: a policy layer over a browser", Version: "1"},
		&mcp.ServerOptions{Logger: logger})
	seen := map[string]bool{}
	for _, t := range tools {
		if t == nil || t.Name == "" || seen[t.Name] {
			logger.Warn("skipping a tool without a name or listed twice")
			continue
		}
		seen[t.Name] = true
		tc := *t
		tc.OutputSchema = nil
		schema, ok := objectSchema(t.InputSchema)
		if !ok {
			logger.Warn("tool input schema is not an object schema; offering {\"type\":\"object\"}", "tool", t.Name)
		}
		tc.InputSchema = schema
		name := tc.Name
		s.AddTool(&tc, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return forwardCall(ctx, src, name, req.Params.Arguments), nil
		})
	}
	// A call of a tool not offered (browser_evaluate, say) also goes to src, which refuses it
	// and records the refusal, instead of ending as the SDK's "unknown tool" error.
	eo, observe := src.(EngineObserver)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if observe && (method == "tools/list" || method == "tools/call") {
				// the engine: the client's name from initialize (MCP up to 2025-11-25) or
				// from the request's _meta (2026-07-28)
				name := ""
				if ci, ok := req.(interface{ ClientInfo() *mcp.Implementation }); ok {
					if impl := ci.ClientInfo(); impl != nil {
						name = impl.Name
					}
				}
				if name != ReadinessClient {
					eo.EngineStarted(name)
				}
			}
			if method == "tools/call" {
				if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil && !seen[r.Params.Name] {
					name := r.Params.Name
					if len(name) > 128 {
						name = name[:128]
					}
					return forwardCall(ctx, src, name, r.Params.Arguments), nil
				}
			}
			return next(ctx, method, req)
		}
	})
	return s, nil
}

// forwardCall decodes raw arguments and calls src; undecodable arguments get an error
// result without reaching src.
func forwardCall(ctx context.Context, src ToolSource, name string, raw json.RawMessage) *mcp.CallToolResult {
	args, err := decodeArguments(raw)
	if err != nil {
		return errorResult(fmt.Sprintf("%s: %v", name, err))
	}
	res := src.CallTool(ctx, name, args)
	if res == nil {
		return errorResult(name + ": no result")
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return res
}

// objectSchema returns schema as a JSON value (json.RawMessage) when it is an object with
// "type": "object"; else {"type":"object"} and false.
func objectSchema(schema any) (json.RawMessage, bool) {
	fallback := json.RawMessage(`{"type":"object"}`)
	if schema == nil {
		return fallback, false
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return fallback, false
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["type"] != "object" {
		return fallback, false
	}
	return raw, true
}

// decodeArguments decodes a call's raw arguments: absent or null gives nil; anything but a
// JSON object of at most MaxArgumentBytes is an error naming what was expected.
func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	if len(trimmed) > MaxArgumentBytes {
		return nil, fmt.Errorf("arguments are %d bytes; at most %d are accepted", len(trimmed), MaxArgumentBytes)
	}
	if trimmed[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("arguments are not a valid JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("arguments must be one JSON object")
	}
	return args, nil
}

// errorResult is a tool result with IsError and one text.
func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// Serve serves src over one MCP connection on t (for example &mcp.StdioTransport{}) and
// returns when the client ends the session (nil) or ctx ends (ctx's error). Errors: those of
// NewMCPServer, and a failed connection.
func Serve(ctx context.Context, src ToolSource, t mcp.Transport) error {
	s, err := NewMCPServer(ctx, src, nil)
	if err != nil {
		return err
	}
	err = s.Run(ctx, t)
	if errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}

// ListenLoopback listens on addr (host:port) after checking that host is a loopback
// address or "localhost" (taken as 127.0.0.1); port 0 picks a free port. Errors: a missing
// or non-loopback host, or the listen failing.
func ListenLoopback(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: want host:port on loopback, e.g. 127.0.0.1:8765", addr)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("address %q: only a loopback address (127.0.0.1, ::1 or localhost) is accepted", addr)
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}

// ServeHTTP serves src as a streamable HTTP MCP endpoint (at every path, e.g.
// http://ADDR/mcp) on ln, which should come from ListenLoopback, until ctx ends; then it
// shuts the server down (open streams get 5 s) and returns nil. Request bodies are bounded
// by MaxRequestBytes and their JSON nesting by MaxJSONDepth (checked before decoding: a
// deeper body gets 400 with a JSON-RPC -32700 error); Host headers other than loopback names are refused (DNS
// rebinding). Errors: those of NewMCPServer, and a failed Serve.
func ServeHTTP(ctx context.Context, src ToolSource, ln net.Listener) error {
	s, err := NewMCPServer(ctx, src, nil)
	if err != nil {
		ln.Close()
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := &http.Server{
		Handler:           http.MaxBytesHandler(depthChecked(h), MaxRequestBytes),
		ReadHeaderTimeout: 10 * time.Second,
	}
	return serveUntil(ctx, srv, ln, 5*time.Second)
}

// serveUntil serves srv on ln until ctx ends, then shuts it down, closing it after grace;
// it returns Serve's error when serving stopped on its own, nil after ctx ended.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-served
	return nil
}

// depthChecked reads a POST body (already bounded by http.MaxBytesHandler) and refuses it
// with 400 and a JSON-RPC parse error when it nests deeper than MaxJSONDepth; else h gets
// the same body.
func depthChecked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			writeWireError(w, nil, codeInvalidRequest, fmt.Sprintf("request too large: a message is at most %d bytes", MaxRequestBytes))
			return
		}
		if jsonx.Depth(data, MaxJSONDepth) > MaxJSONDepth {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			writeWireError(w, nil, codeParseError, fmt.Sprintf("parse error: JSON nested deeper than %d levels", MaxJSONDepth))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		h.ServeHTTP(w, r)
	})
}
