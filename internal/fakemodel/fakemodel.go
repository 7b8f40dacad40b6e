// Package fakemodel is a scripted model server for testing real agent CLIs (Claude Code,
// Codex) end to end without an LLM. It listens on loopback and speaks enough of the
// Anthropic Messages API (POST /v1/messages, streaming and not), of the OpenAI Responses
// API (POST /v1/responses, streaming and not) and of OpenAI Chat Completions (POST
// /v1/chat/completions, streaming and not, the usage chunk when the request sets
// stream_options.include_usage) to play a fixed Plan: a list of tool calls
// (open the task's start page, take a snapshot, fill a field, press a button, ...) and then
// a final answer.
//
// The server is stateless per request: every request carries the whole conversation, so
// the next step is the number of the plan's calls already in it. Before each step it checks
// the result of the previous one (the texts it must contain, no error): the page text has
// to have come back from the browser. When a check fails, when the tool a step needs is not
// offered, or when a result is missing, the server records the failure and answers
// Plan.Wrong instead of Plan.Answer, so a test that grades the answer fails when the agent
// ran without its browser tools.
//
// Tools are found by name in the request's tool list: the plan says "browser_navigate",
// and a tool named exactly so, or ending in "__browser_navigate" (Claude Code names MCP
// tools mcp__SERVER__TOOL), or a function browser_navigate inside a Responses API
// namespace (Codex lists an MCP server's tools as the namespace mcp__SERVER), is called.
// When Codex hides MCP tools behind its client-side tool_search, the server searches first
// ("browser navigate") and takes the tools the search returned.
//
// Codex's code mode (its default model: one exec tool running JavaScript that calls the MCP
// tools, codemode.go) is played as one exec call per step.
//
// Every answer to a model call reports a known token usage (Usage), recorded with the
// request, so that a test can check a meter's sums against it.
//
// Every request is recorded (Requests) with what was answered, for the test to inspect.
package fakemodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/internal/textcut"
)

// Plan is what the scripted model does in the agent's conversation.
type Plan struct {
	// Marker is a piece of the task prompt. A request whose user messages contain it and
	// that offers tools is a turn of the agent's conversation; any other request (a title,
	// a summary, a quota probe) is answered with a short text and not counted.
	Marker string
	// Steps are the tool calls, one per model turn, in order.
	Steps []Step
	// Answer is the final text once every step went as planned.
	Answer string
	// Wrong is the final text when a step failed (default: a sentence naming the failure).
	Wrong string
}

// Step is one tool call of a plan.
type Step struct {
	// Tool is the tool's own name, such as "browser_navigate" (see the package comment for
	// how it is found among the offered tools).
	Tool string
	// Args are the call's arguments.
	Args map[string]any
	// Target, when set, adds the ref of the element of the latest snapshot with this role
	// whose accessible name starts with Name, as the argument the tool's schema has for it
	// ("target" or "ref"), and Name as "element" when the schema has that argument.
	Target *Target
	// Expect are texts the tool's result must contain.
	Expect []string
	// MayFail accepts a result marked as an error (by default an error fails the plan).
	MayFail bool
}

// Target is an element of a browser snapshot.
type Target struct{ Role, Name string }

// Request is one request the server answered.
type Request struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	// API is "anthropic", "openai" (Responses), "openai-chat" (Chat Completions) or ""
	// (anything else).
	API    string `json:"api,omitempty"`
	Model  string `json:"model,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	// Agent is true for a turn of the agent's conversation (see Plan.Marker).
	Agent bool `json:"agent,omitempty"`
	// Tools are the names of the tools offered ("namespace/name" for a tool inside a
	// Responses API namespace; "tool_search" for Codex's search).
	Tools []string `json:"tools,omitempty"`
	// Step is the plan step this turn played (0-based; len(Steps) for the answer).
	Step int `json:"step"`
	// Reply says what was answered: "call NAME ARGS", "search QUERY" or "answer TEXT".
	Reply string `json:"reply"`
	// Failure is why the plan failed at this turn, if it did.
	Failure string `json:"failure,omitempty"`
	// Usage is the token usage the answer reported (nil for an answer without one).
	Usage *Usage `json:"usage,omitempty"`
	// Body is the request body as received.
	Body json.RawMessage `json:"-"`
}

// Usage is the token usage the server reports for a model call: a function of the request
// body's length, so that calls differ, and never all zero. Anthropic answers report Input
// (input_tokens, the uncached input), CacheRead, CacheWrite (of which CacheWrite1h went to the
// 1-hour cache) and Output; OpenAI answers report Input (which includes the cached tokens),
// CacheRead (cached_tokens) and Output, with CacheWrite 0.
type Usage struct {
	Input        int64 `json:"input"`
	Output       int64 `json:"output"`
	CacheRead    int64 `json:"cache_read"`
	CacheWrite   int64 `json:"cache_write"`
	CacheWrite1h int64 `json:"cache_write_1h"`
}

// reportedUsage is the usage reported for a request body (see Usage).
func reportedUsage(body []byte, anthropic bool) Usage {
	n := int64(len(body))
	u := Usage{Input: n/4 + 1, Output: 20 + n%7, CacheRead: n / 16}
	if anthropic {
		u.CacheWrite, u.CacheWrite1h = 5+n%3, 2
	}
	return u
}

// Server is a running scripted model server.
type Server struct {
	plan Plan
	ln   net.Listener
	srv  *http.Server
	// dir, when set, receives every request body (NNN.json) and the records (requests.jsonl).
	dir string

	mu       sync.Mutex
	requests []Request
	failures []string
	answered bool // the right answer was given
	seq      int  // requests recorded
	ids      int  // ids handed out (messages, calls)
}

// Start starts a server for plan on a free loopback port. When dir is not empty, every
// request body is written there as NNN-PATH.json and every record appended to
// requests.jsonl, for a person to read after a failed test.
func Start(plan Plan, dir string) (*Server, error) {
	if len(plan.Steps) == 0 || plan.Answer == "" || plan.Marker == "" {
		return nil, errors.New("fakemodel: a plan needs a marker, steps and an answer")
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{plan: plan, ln: ln, dir: dir}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the server's base URL, http://127.0.0.1:PORT (ANTHROPIC_BASE_URL; for the OpenAI
// API add /v1).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns a copy of every request answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Failures returns why the plan failed, one entry per failed turn (none when it went well).
func (s *Server) Failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failures...)
}

// Answered reports whether the plan ran to its end and the right answer was given.
func (s *Server) Answered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered
}

// maxBody bounds a request body (Claude Code's first request is about 100 KB; a long run
// with snapshots a few MB).
const maxBody = 64 << 20

// ServeHTTP answers POST /v1/messages (and /v1/messages/count_tokens), POST /v1/responses,
// POST /v1/chat/completions,
// GET /v1/models (an empty list) and HEAD / (Claude Code's reachability probe); anything
// else is a 404. Every request is recorded.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := Request{Time: time.Now().UTC(), Method: r.Method, Path: r.URL.Path, Body: body}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		rec.API = "anthropic"
		s.anthropic(w, body, &rec)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		rec.API, rec.Reply = "anthropic", "count_tokens"
		writeJSON(w, map[string]any{"input_tokens": len(body)/4 + 1})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		rec.API = "openai"
		s.openai(w, body, &rec)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		rec.API = "openai-chat"
		s.chat(w, body, &rec)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		rec.Reply = "models"
		writeJSON(w, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && r.URL.Path == "/"):
		rec.Reply = "ok"
		w.WriteHeader(http.StatusOK)
	default:
		rec.Reply = "404"
		http.Error(w, "fakemodel: no such endpoint", http.StatusNotFound)
	}
	s.record(rec)
}

func (s *Server) record(rec Request) {
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	if rec.Failure != "" {
		s.failures = append(s.failures, rec.Failure)
	}
	s.seq++
	n := s.seq
	s.mu.Unlock()
	if s.dir == "" {
		return
	}
	name := fmt.Sprintf("%03d%s.json", n, strings.ReplaceAll(rec.Path, "/", "-"))
	os.WriteFile(filepath.Join(s.dir, name), rec.Body, 0o644)
	line, _ := json.Marshal(rec)
	if f, err := os.OpenFile(filepath.Join(s.dir, "requests.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		f.Write(append(line, '\n'))
		f.Close()
	}
}

// tool is an offered tool as the client names it.
type tool struct {
	name      string // as called
	namespace string // Responses API namespace ("" for none)
	props     map[string]any
}

// call is a tool call of the model, as the conversation holds it.
type call struct {
	id, name, namespace string
	search              bool   // Codex's tool_search
	script              string // Codex's code mode: the exec call's script (codemode.go)
	args                map[string]any
}

// result is a tool's answer in the conversation.
type result struct {
	text    string
	isError bool
}

// convo is a request's conversation, the same for both APIs.
type convo struct {
	userText string // every user message's text, joined
	tools    []tool
	search   bool // a client-side tool_search is offered
	calls    []call
	results  map[string]result
	exec     bool   // Codex's code mode: the custom tool exec is offered (codemode.go)
	deferred string // the first MCP namespace of code mode, mcp__SERVER
}

// action is the next model turn.
type action struct {
	call   *call  // a tool call, or
	answer string // the final text
}

// decide plays the plan on the conversation c and fills rec's Agent, Step, Reply and Failure.
func (s *Server) decide(c *convo, rec *Request) action {
	for _, t := range c.tools {
		if t.namespace != "" {
			rec.Tools = append(rec.Tools, t.namespace+"/"+t.name)
		} else {
			rec.Tools = append(rec.Tools, t.name)
		}
	}
	if c.search {
		rec.Tools = append(rec.Tools, "tool_search")
	}
	if c.exec {
		rec.Tools = append(rec.Tools, "exec")
	}
	codeMode := c.exec && c.deferred != ""
	if !strings.Contains(c.userText, s.plan.Marker) || (len(c.tools) == 0 && !c.search && !codeMode) {
		rec.Reply = "answer (side request) OK"
		return action{answer: "OK"}
	}
	rec.Agent = true
	fail := func(format string, a ...any) action {
		rec.Failure = fmt.Sprintf(format, a...)
		text := s.plan.Wrong
		if text == "" {
			text = "I could not do it: " + rec.Failure
		}
		rec.Reply = "answer (wrong) " + text
		return action{answer: text}
	}
	var plan []call // the plan's calls made so far
	searches := map[string]bool{}
	for _, cl := range c.calls {
		if cl.search {
			q, _ := cl.args["query"].(string)
			searches[q] = true
			continue
		}
		plan = append(plan, cl)
	}
	k := len(plan)
	rec.Step = k
	if k > len(s.plan.Steps) {
		return fail("the conversation has %d tool calls, more than the plan's %d", k, len(s.plan.Steps))
	}
	if k > 0 {
		prev, st := plan[k-1], s.plan.Steps[k-1]
		if !nameMatches(prev.name, st.Tool) {
			return fail("step %d: the conversation's call is %q, the plan's %q", k, prev.name, st.Tool)
		}
		res, ok := c.results[prev.id]
		if !ok {
			return fail("step %d (%s): no tool result for call %s", k, st.Tool, prev.id)
		}
		if res.isError && !st.MayFail {
			return fail("step %d (%s): the tool answered an error: %s", k, st.Tool, clip(res.text, 500))
		}
		for _, want := range st.Expect {
			if !strings.Contains(res.text, want) {
				return fail("step %d (%s): the result lacks %q: %s", k, st.Tool, want, clip(res.text, 800))
			}
		}
	}
	if k == len(s.plan.Steps) {
		s.mu.Lock()
		s.answered = true
		s.mu.Unlock()
		rec.Reply = "answer " + s.plan.Answer
		return action{answer: s.plan.Answer}
	}
	st := s.plan.Steps[k]
	t := findTool(c.tools, st.Tool)
	if t == nil && codeMode {
		// the MCP tool behind code mode's exec: its schema is not in the request, so a
		// target is given as "ref" and "element"
		t = &tool{name: c.deferred + "__" + st.Tool, props: map[string]any{"ref": true, "element": true}}
	}
	if t == nil {
		q := strings.ReplaceAll(st.Tool, "_", " ")
		if c.search && !searches[q] {
			cl := &call{name: "tool_search", search: true, args: map[string]any{"query": q, "limit": 20}}
			rec.Reply = "search " + q
			return action{call: cl}
		}
		return fail("step %d: no tool %s among the %d offered: %s", k+1, st.Tool, len(rec.Tools), strings.Join(rec.Tools, ", "))
	}
	args := map[string]any{}
	for k, v := range st.Args {
		args[k] = v
	}
	if st.Target != nil {
		ref := c.findRef(st.Target.Role, st.Target.Name)
		if ref == "" {
			return fail("step %d (%s): no %s %q in the latest snapshot", k+1, st.Tool, st.Target.Role, st.Target.Name)
		}
		refArg := "ref"
		if _, ok := t.props["target"]; ok {
			refArg = "target"
		}
		args[refArg] = ref
		if _, ok := t.props["element"]; ok {
			args["element"] = st.Target.Name
		}
	}
	cl := &call{name: t.name, namespace: t.namespace, args: args}
	if codeMode && strings.HasPrefix(t.name, c.deferred+"__") {
		cl = &call{name: "exec", script: execScript(t.name, args)}
	}
	a, _ := json.Marshal(args)
	rec.Reply = "call " + t.name + " " + string(a)
	if t.namespace != "" {
		rec.Reply = "call " + t.namespace + "/" + t.name + " " + string(a)
	}
	return action{call: cl}
}

// nameMatches reports whether the called name is the plan's tool (see the package comment).
func nameMatches(name, want string) bool {
	return name == want || strings.HasSuffix(name, "__"+want)
}

func findTool(tools []tool, want string) *tool {
	for i := range tools {
		if nameMatches(tools[i].name, want) {
			return &tools[i]
		}
	}
	return nil
}

// refLine is an element of a @playwright/mcp snapshot: "- textbox "Name" [ref=e12]".
var refLine = regexp.MustCompile(`^\s*-\s+'?([a-z]+)(?: "((?:[^"\\]|\\.)*)")?[^\n]*?\[ref=([a-z0-9]+)\]`)

// findRef returns the ref of the first element with role whose name starts with name, in
// the latest tool result that holds a snapshot.
func (c *convo) findRef(role, name string) string {
	for i := len(c.calls) - 1; i >= 0; i-- {
		res, ok := c.results[c.calls[i].id]
		if !ok || !strings.Contains(res.text, "[ref=") {
			continue
		}
		for _, l := range strings.Split(res.text, "\n") {
			m := refLine.FindStringSubmatch(l)
			if m != nil && m[1] == role && strings.HasPrefix(strings.ReplaceAll(m[2], `\"`, `"`), name) {
				return m[3]
			}
		}
		return ""
	}
	return ""
}

// newID returns a fresh id with prefix.
func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return fmt.Sprintf("%s_fake%04d", prefix, s.ids)
}

// clip cuts s to n bytes on a character boundary, marking the cut with "...".
func clip(s string, n int) string { return textcut.Cut(s, n, "...") }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (e *sse) event(name string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	if e.f != nil {
		e.f.Flush()
	}
}

// textOf joins the text of a content value: a string, or a list of blocks with "text"
// (nested "content" lists too, as MCP results carry them).
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, e := range x {
			if t := textOf(e); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	case map[string]any:
		if t, ok := x["text"].(string); ok {
			return t
		}
		if c, ok := x["content"]; ok {
			return textOf(c)
		}
	}
	return ""
}

func schemaProps(v any) map[string]any {
	m, _ := v.(map[string]any)
	p, _ := m["properties"].(map[string]any)
	return p
}
