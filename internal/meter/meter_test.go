package meter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/pab-dev/pab/internal/fakemodel"
	"github.com/pab-dev/pab/internal/wholebody/wholebodytest"
)

// testPrices prices the models the tests name; "unpriced-model" is left out on purpose.
const testPrices = `
taken: 2026-12-06
models:
  claude-test: {input: 3, output: 15, cache_read: 0.30, cache_write: 3.75, cache_write_1h: 6}
  gpt-test: {input: 2.5, output: 15, cache_read: 0.25, cache_write: 0}
`

var plan = fakemodel.Plan{Marker: "MARKER-never-sent", Steps: []fakemodel.Step{{Tool: "browser_navigate"}}, Answer: "x"}

// setup starts the fake model server and a meter in front of it, with its Anthropic route
// forwarding to the server's root and its OpenAI route to the server's /v1 (as
// ANTHROPIC_BASE_URL and OPENAI_BASE_URL would name them).
func setup(t *testing.T, opts Options) (*fakemodel.Server, *Meter) {
	t.Helper()
	fm, err := fakemodel.Start(plan, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Close() })
	if opts.Upstreams == nil {
		opts.Upstreams = UpstreamsFromEnv(env{"ANTHROPIC_BASE_URL": fm.URL(), "OPENAI_BASE_URL": fm.URL() + "/v1"}.get)
	}
	if opts.Prices == nil {
		opts.Prices, err = ParsePrices("test.yaml", []byte(testPrices))
		if err != nil {
			t.Fatal(err)
		}
	}
	m, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return fm, m
}

type env map[string]string

func (e env) get(k string) string { return e[k] }

func anthropicClient(m *Meter) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(m.BaseURL(KindAnthropic)), aoption.WithAPIKey("sk-ant-test-KEY"), aoption.WithMaxRetries(0))
}

func openaiClient(m *Meter) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(m.BaseURL(KindOpenAI)), ooption.WithAPIKey("sk-openai-test-KEY"), ooption.WithMaxRetries(0))
}

// callAll makes a non-streamed and a streamed call of each API with the official SDKs,
// prompt being the user's text, and fails the test on an error.
func callAll(t *testing.T, m *Meter, prompt, claudeModel, gptModel string) {
	t.Helper()
	ctx := context.Background()
	ac, oc := anthropicClient(m), openaiClient(m)
	ap := anthropic.MessageNewParams{Model: anthropic.Model(claudeModel), MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
	if _, err := ac.Messages.New(ctx, ap); err != nil {
		t.Fatalf("anthropic: %v", err)
	}
	st := ac.Messages.NewStreaming(ctx, ap)
	for st.Next() {
	}
	if err := st.Err(); err != nil {
		t.Fatalf("anthropic stream: %v", err)
	}
	cp := openai.ChatCompletionNewParams{Model: gptModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	if _, err := oc.Chat.Completions.New(ctx, cp); err != nil {
		t.Fatalf("chat: %v", err)
	}
	cp.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	cs := oc.Chat.Completions.NewStreaming(ctx, cp)
	for cs.Next() {
	}
	if err := cs.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	rp := responses.ResponseNewParams{Model: gptModel, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
	if _, err := oc.Responses.New(ctx, rp); err != nil {
		t.Fatalf("responses: %v", err)
	}
	rs := oc.Responses.NewStreaming(ctx, rp)
	for rs.Next() {
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("responses stream: %v", err)
	}
}

// TestTotalsPerAPI: through the meter, the official SDKs make a streamed and a non-streamed
// call of each API against the fake model; every call is recorded with the usage the fake
// model reported, and the totals are their sums exactly, with the cost from the price file.
func TestTotalsPerAPI(t *testing.T) {
	fm, m := setup(t, Options{})
	callAll(t, m, "hello there", "claude-test-20261201", "gpt-test")
	m.Close(context.Background())
	got := m.Usage()

	var want Totals
	var wantCost float64
	byKey := map[string]fakemodel.Usage{}
	for _, r := range fm.Requests() {
		if r.Usage == nil {
			t.Fatalf("the fake model reported no usage for %s %s", r.Method, r.Path)
		}
		u := *r.Usage
		byKey[fmt.Sprintf("%s %v", r.API, r.Stream)] = u
		want.Calls++
		want.InputTokens += u.Input
		want.OutputTokens += u.Output
		want.CacheReadTokens += u.CacheRead
		want.CacheWriteTokens += u.CacheWrite
		if r.API == "anthropic" {
			wantCost += (float64(u.Input)*3 + float64(u.Output)*15 + float64(u.CacheRead)*0.30 +
				float64(u.CacheWrite-u.CacheWrite1h)*3.75 + float64(u.CacheWrite1h)*6) / 1e6
		} else {
			wantCost += (float64(u.Input-u.CacheRead)*2.5 + float64(u.Output)*15 + float64(u.CacheRead)*0.25) / 1e6
		}
	}
	if want.Calls != 6 || len(got.Calls) != 6 {
		t.Fatalf("%d calls at the model, %d recorded: %+v", want.Calls, len(got.Calls), got.Calls)
	}
	tt := got.Totals
	if tt.Calls != want.Calls || tt.InputTokens != want.InputTokens || tt.OutputTokens != want.OutputTokens ||
		tt.CacheReadTokens != want.CacheReadTokens || tt.CacheWriteTokens != want.CacheWriteTokens ||
		tt.UnreadableCalls != 0 || tt.UnpricedCalls != 0 || tt.ErrorCalls != 0 || tt.StreamedCalls != 3 {
		t.Errorf("totals %+v, want %+v", tt, want)
	}
	if tt.CostUSD == nil || math.Abs(*tt.CostUSD-wantCost) > 1e-12 || *tt.CostUSD == 0 {
		t.Errorf("cost %v, want %v", tt.CostUSD, wantCost)
	}
	apiName := map[API]string{APIMessages: "anthropic", APIChatCompletions: "openai-chat", APIResponses: "openai"}
	for _, c := range got.Calls {
		u, ok := byKey[fmt.Sprintf("%s %v", apiName[c.API], c.Streamed)]
		if !ok {
			t.Errorf("call %+v: no such request at the model", c)
			continue
		}
		if c.InputTokens != u.Input || c.OutputTokens != u.Output || c.CacheReadTokens != u.CacheRead ||
			c.CacheWriteTokens != u.CacheWrite || c.CacheWrite1hTokens != u.CacheWrite1h || c.Status != 200 || c.Unreadable {
			t.Errorf("call %+v, the model reported %+v", c, u)
		}
		wantModel := "gpt-test"
		if c.API == APIMessages {
			wantModel = "claude-test-20261201"
		}
		if c.Model != wantModel || c.CostUSD == nil || (c.API == APIMessages) != (c.PricedAs == "claude-test") {
			t.Errorf("call %+v: model %q, cost %v, priced as %q", c, c.Model, c.CostUSD, c.PricedAs)
		}
	}
	// The JSON names of the totals.
	b, _ := json.Marshal(tt)
	for _, f := range []string{`"calls":6`, `"input_tokens":`, `"output_tokens":`, `"cache_read_tokens":`, `"cache_write_tokens":`, `"cost_usd":0.`, `"unreadable_calls":0`} {
		if !bytes.Contains(b, []byte(f)) {
			t.Errorf("totals JSON %s lacks %s", b, f)
		}
	}
}

// TestUnknownModelAndNoStreamUsage: a model the price table does not name has an unknown
// cost (null, also in the totals), and a streamed Chat Completions call without
// stream_options.include_usage is unreadable, which the totals say.
func TestUnknownModelAndNoStreamUsage(t *testing.T) {
	_, m := setup(t, Options{})
	oc := openaiClient(m)
	ctx := context.Background()
	cp := openai.ChatCompletionNewParams{Model: "unpriced-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	if _, err := oc.Chat.Completions.New(ctx, cp); err != nil {
		t.Fatal(err)
	}
	u := m.Usage()
	if c := u.Calls[0]; c.CostUSD != nil || c.Unreadable || c.InputTokens == 0 {
		t.Errorf("unpriced call: %+v", c)
	}
	if tt := u.Totals; tt.CostUSD != nil || tt.UnpricedCalls != 1 || len(tt.UnpricedModels) != 1 || tt.UnpricedModels[0] != "unpriced-model" {
		t.Errorf("totals %+v", tt)
	}
	b, _ := json.Marshal(u.Totals)
	if !bytes.Contains(b, []byte(`"cost_usd":null`)) {
		t.Errorf("totals JSON %s: cost_usd is not null", b)
	}

	cp.Model = "gpt-test"
	cs := oc.Chat.Completions.NewStreaming(ctx, cp) // no include_usage
	for cs.Next() {
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	u = m.Usage()
	c := u.Calls[1]
	if !c.Unreadable || !strings.Contains(c.Reason, "include_usage") || c.CostUSD != nil || !c.Streamed {
		t.Errorf("streamed chat without usage: %+v", c)
	}
	if u.Totals.UnreadableCalls != 1 || u.Totals.Calls != 2 || u.Totals.CostUSD != nil {
		t.Errorf("totals %+v", u.Totals)
	}
}

// TestForwarding: method, path under the upstream's base path, query, headers (the key
// headers included) and body reach the upstream as sent; status, headers and body come back
// as answered; requests that are not model calls pass without being recorded.
func TestForwarding(t *testing.T) {
	type seen struct {
		method, path, query, key, auth, version, body string
	}
	got := make(chan seen, 4)
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("Anthropic-Version"), string(b)}
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"model":"claude-test","usage":{"input_tokens":7,"output_tokens":3}}`)
	}))
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindAnthropic: up + "/gateway/base"}})
	req, _ := http.NewRequest("POST", m.BaseURL(KindAnthropic)+"/v1/messages?beta=true&x=%2F", strings.NewReader(`{"prompt":"p"}`))
	req.Header.Set("X-Api-Key", "k1")
	req.Header.Set("Authorization", "Bearer k2")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := <-got
	want := seen{"POST", "/gateway/base/v1/messages", "beta=true&x=%2F", "k1", "Bearer k2", "2023-06-01", `{"prompt":"p"}`}
	if s != want {
		t.Errorf("upstream saw %+v, want %+v", s, want)
	}
	if resp.StatusCode != 201 || resp.Header.Get("X-Upstream") != "yes" || !strings.Contains(string(body), `"input_tokens":7`) {
		t.Errorf("client got %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// GET /v1/models is forwarded, not a model call.
	resp, err = http.Get(m.BaseURL(KindAnthropic) + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := <-got; s.method != "GET" || s.path != "/gateway/base/v1/models" {
		t.Errorf("GET: %+v", s)
	}
	// An unknown kind is a 404 of the meter's own.
	resp, _ = http.Get(strings.TrimSuffix(m.BaseURL(KindAnthropic), "anthropic") + "nope/v1/messages")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown kind: %d", resp.StatusCode)
	}
	m.Close(context.Background())
	u := m.Usage()
	if len(u.Calls) != 1 || u.Calls[0].Status != 201 || u.Calls[0].InputTokens != 7 || u.Calls[0].Path != "/v1/messages" {
		t.Errorf("calls %+v", u.Calls)
	}
}

// startUpstream serves h on a loopback port and returns its base URL.
func startUpstream(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h}
	ln := listen(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestStreamNotBuffered: each server-sent event reaches the client while the upstream is
// still answering: the client reads message_start before the upstream has written the rest.
func TestStreamNotBuffered(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-test\",\"usage\":{\"input_tokens\":11,\"output_tokens\":1,\"cache_read_input_tokens\":4}}}\n\n")
		f.Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindAnthropic: up}})
	resp, err := http.Post(m.BaseURL(KindAnthropic)+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := br.ReadString('\n')
		got <- line{s, err}
	}()
	select {
	case first := <-got:
		if first.err != nil || first.s != "event: message_start\n" {
			t.Fatalf("first line %q, %v", first.s, first.err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the first event did not reach the client while the upstream held the rest back")
	}
	if n := len(m.Usage().Calls); n != 0 {
		t.Fatalf("%d calls recorded before the stream ended", n)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"output_tokens":9`) {
		t.Errorf("rest of the stream: %q", rest)
	}
	resp.Body.Close()
	m.Close(context.Background())
	u := m.Usage()
	if len(u.Calls) != 1 {
		t.Fatalf("calls %+v", u.Calls)
	}
	c := u.Calls[0]
	if !c.Streamed || c.InputTokens != 11 || c.OutputTokens != 9 || c.CacheReadTokens != 4 || c.Unreadable {
		t.Errorf("call %+v", c)
	}
}

// TestRefusesWebSocket: a WebSocket upgrade (the Responses API over WebSocket) is refused
// and counted apart, not passed unmetered.
func TestRefusesWebSocket(t *testing.T) {
	_, m := setup(t, Options{})
	req, _ := http.NewRequest("GET", m.BaseURL(KindOpenAI)+"/responses", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("status %d", resp.StatusCode)
	}
	m.Close(context.Background())
	if tt := m.Usage().Totals; tt.RefusedUpgrades != 1 || tt.Calls != 0 {
		t.Errorf("totals %+v", tt)
	}
}

// TestConcurrentCalls: calls from many goroutines at once are each recorded once, and the
// totals are the sums of what the model reported (run with -race -count=20).
func TestConcurrentCalls(t *testing.T) {
	fm, m := setup(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ac, oc := anthropicClient(m), openaiClient(m)
			ctx := context.Background()
			prompt := strings.Repeat("w", i*37)
			if i%2 == 0 {
				st := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 10,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
				for st.Next() {
				}
				errs <- st.Err()
				return
			}
			rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-test",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}})
			for rs.Next() {
			}
			errs <- rs.Err()
		}(i)
	}
	done := make(chan struct{})
	go func() { // read the usage while calls run
		defer close(done)
		for i := 0; i < 50; i++ {
			_ = m.Usage().Totals
		}
	}()
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	m.Close(context.Background())
	var in, out int64
	for _, r := range fm.Requests() {
		in += r.Usage.Input
		out += r.Usage.Output
	}
	tt := m.Usage().Totals
	if tt.Calls != 8 || tt.InputTokens != in || tt.OutputTokens != out || tt.UnreadableCalls != 0 || tt.CostUSD == nil {
		t.Errorf("totals %+v, want 8 calls, %d in, %d out", tt, in, out)
	}
}

// TestUpstreamDown: no answer from the upstream is a 502 to the client and an unreadable call
// (the request may have been billed), with no error text from the transport in the record.
func TestUpstreamDown(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	var logbuf syncBuffer
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindOpenAI: "http://" + addr + "/v1"}, Log: &logbuf})
	resp, err := http.Post(m.BaseURL(KindOpenAI)+"/responses", "application/json", strings.NewReader(`{"model":"gpt-test"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d", resp.StatusCode)
	}
	m.Close(context.Background())
	u := m.Usage()
	if len(u.Calls) != 1 || !u.Calls[0].Unreadable || u.Calls[0].Status != 502 || u.Totals.UnreadableCalls != 1 || u.Totals.CostUSD != nil {
		t.Errorf("usage %+v", u)
	}
	if !strings.Contains(logbuf.String(), "no answer from the upstream") {
		t.Errorf("log %q", logbuf.String())
	}
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

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestCloseCutsStuckStream: Close with a deadline cuts a stream the upstream never finishes;
// the call is recorded (unreadable) by the time Close returns, with its latency.
func TestCloseCutsStuckStream(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-test\",\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindAnthropic: up}})
	began := time.Now()
	resp, err := http.Post(m.BaseURL(KindAnthropic)+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	m.Close(ctx)
	elapsed := time.Since(began)
	u := m.Usage()
	if len(u.Calls) != 1 {
		t.Fatalf("calls %+v", u.Calls)
	}
	c := u.Calls[0]
	if !c.Unreadable || !strings.Contains(c.Reason, "cut before its usage") || c.InputTokens != 0 || u.Totals.CostUSD != nil {
		t.Errorf("call %+v", c)
	}
	if c.LatencyMS < 0 || c.LatencyMS > elapsed.Milliseconds() || c.Time.Before(began.Add(-time.Second)) {
		t.Errorf("latency %d ms, time %v; the test took %v from %v", c.LatencyMS, c.Time, elapsed, began)
	}
}

// TestLateBodyRead: a streamed answer passes the meter whole, its usage read, even when the
// transport reads the end of the request body after the meter has begun to pass the answer
// on (golang/go#40747: the meter's HTTP server closes the agent's request body once the
// answer starts; the transport's late read of that body failed, and the transport closed
// the connection to the upstream with the answer half passed on). The upstream sends its
// answer in two parts, the second once that late read is done.
func TestLateBodyRead(t *testing.T) {
	released := make(chan struct{}) // the late read is done
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-test\",\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-released:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	firstSeen := make(chan struct{}) // the agent has the first part of the answer
	base := http.DefaultTransport.(*http.Transport).Clone()
	tr := wholebodytest.LateEndTransport(base, firstSeen, released)
	var logbuf syncBuffer
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindAnthropic: up}, Transport: tr, Log: &logbuf})
	resp, err := http.Post(m.BaseURL(KindAnthropic)+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"claude-test","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := wholebodytest.ReadInTwoParts(resp.Body, "\n\n", firstSeen)
	if err != nil || !strings.Contains(got, `"type":"message_stop"`) {
		t.Fatalf("the answer's stream: %v after %q\nmeter log:\n%s", err, got, logbuf.String())
	}
	resp.Body.Close()
	m.Close(context.Background())
	u := m.Usage()
	if len(u.Calls) != 1 {
		t.Fatalf("calls %+v", u.Calls)
	}
	if c := u.Calls[0]; c.Unreadable || !c.Streamed || c.Status != 200 || c.InputTokens != 11 || c.OutputTokens != 9 || u.Totals.CostUSD == nil {
		t.Errorf("call %+v, totals %+v", c, u.Totals)
	}
}

// TestRequestBound: a request body over MaxRequest bytes, with a Content-Length or chunked,
// gets 413 from the meter and never reaches the upstream; one whose body cannot be read (the
// client gone mid-body) gets 400. Both are recorded as refused, outside the model calls and
// their cost. A body of MaxRequest bytes passes whole (a chunked one with its
// Content-Length), and a request without a body passes as it is.
func TestRequestBound(t *testing.T) {
	const bound = 1000
	var mu sync.Mutex
	var reached []string // "METHOD PATH LENGTH/CONTENT-LENGTH"
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reached = append(reached, fmt.Sprintf("%s %s %d/%d", r.Method, r.URL.Path, len(b), r.ContentLength))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message","model":"claude-test","usage":{"input_tokens":5,"output_tokens":2}}`)
	}))
	var logbuf syncBuffer
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindAnthropic: up}, MaxRequest: bound, Log: &logbuf})
	url := m.BaseURL(KindAnthropic) + "/v1/messages"
	body := func(n int) string {
		return `{"model":"claude-test","x":"` + strings.Repeat("w", n-len(`{"model":"claude-test","x":""}`)) + `"}`
	}
	for _, c := range []struct {
		n       int
		chunked bool
		want    int
	}{{bound + 1, false, 413}, {bound + 1, true, 413}, {bound, false, 200}, {bound, true, 200}} {
		var rd io.Reader = strings.NewReader(body(c.n))
		if c.chunked {
			rd = io.MultiReader(rd) // no length known: sent chunked
		}
		req, _ := http.NewRequest("POST", url, rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(TagHeader, "bound")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%d bytes, chunked %v: %d %s, want %d", c.n, c.chunked, resp.StatusCode, b, c.want)
		}
		if c.want == 413 && !strings.Contains(string(b), `"type":"error"`) {
			t.Errorf("413's body %q: want the meter's JSON error", b)
		}
	}
	resp, err := http.Get(m.BaseURL(KindAnthropic) + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// The client announces 100 bytes, sends 10 and stops writing.
	conn, err := net.Dial("tcp", m.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
	conn.(*net.TCPConn).CloseWrite()
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body cut short: %d, want 400", resp.StatusCode)
	}

	m.Close(context.Background())
	mu.Lock()
	got := strings.Join(reached, ", ")
	mu.Unlock()
	if want := "POST /v1/messages 1000/1000, POST /v1/messages 1000/1000, GET /v1/models 0/0"; got != want {
		t.Errorf("requests that reached the upstream: %s, want %s", got, want)
	}
	u := m.Usage()
	tt := u.Totals
	if tt.Calls != 2 || tt.RefusedRequests != 3 || tt.RefusedUpgrades != 0 || tt.InputTokens != 10 || tt.UnreadableCalls != 0 || tt.CostUSD == nil {
		t.Errorf("totals %+v", tt)
	}
	var statuses []int
	for _, c := range u.Calls {
		if c.Refused {
			statuses = append(statuses, c.Status)
			if c.API != APIMessages || c.Path != "/v1/messages" || c.CostUSD != nil {
				t.Errorf("refused call %+v", c)
			}
		}
	}
	if fmt.Sprint(statuses) != "[413 413 400]" {
		t.Errorf("refused calls' statuses %v, want [413 413 400]", statuses)
	}
	if tagged := m.UsageOf("bound").Totals; tagged.RefusedRequests != 2 || tagged.Calls != 2 {
		t.Errorf("tagged totals %+v", tagged)
	}
	if l := logbuf.String(); strings.Count(l, "refused a request (413), not forwarded: a body of more than 1000 bytes") != 2 ||
		!strings.Contains(l, "refused a request (400)") {
		t.Errorf("log %q", l)
	}
}

// TestDefaultMaxRequest: without MaxRequest, the bound is DefaultMaxRequest.
func TestDefaultMaxRequest(t *testing.T) {
	_, m := setup(t, Options{})
	if m.opts.MaxRequest != DefaultMaxRequest || DefaultMaxRequest != 32<<20 {
		t.Errorf("MaxRequest %d, DefaultMaxRequest %d; want 32 MiB", m.opts.MaxRequest, DefaultMaxRequest)
	}
}
