package grade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// judgeRecorded is one request a fake API server received.
type judgeRecorded struct {
	Method string
	Path   string
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

// judgeFakeAPI is a loopback HTTP server that records every request and
// answers with respond(n, req), n counting requests from 0.
type judgeFakeAPI struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []judgeRecorded
	respond func(n int, r judgeRecorded) (status int, header map[string]string, body string)
}

func newJudgeFakeAPI(t *testing.T, respond func(n int, r judgeRecorded) (int, map[string]string, string)) *judgeFakeAPI {
	t.Helper()
	f := &judgeFakeAPI{t: t, respond: respond}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err != nil {
			t.Errorf("fake API: reading request body: %v", err)
		}
		rec := judgeRecorded{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Raw: raw}
		if err := json.Unmarshal(raw, &rec.Body); err != nil {
			t.Errorf("fake API: request body is not a JSON object: %v: %q", err, raw)
		}
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		status, header, body := f.respond(n, rec)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *judgeFakeAPI) requests() []judgeRecorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]judgeRecorded(nil), f.reqs...)
}

// anthropicMessageJSON is a Messages API response in the wire format.
func anthropicMessageJSON(model, stopReason string, blocks ...string) string {
	return fmt.Sprintf(`{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": %q,
  "content": [%s],
  "stop_reason": %q,
  "stop_sequence": null,
  "stop_details": null,
  "usage": {"input_tokens": 12, "output_tokens": 6, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}`, model, strings.Join(blocks, ","), stopReason)
}

func anthropicText(s string) string {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return string(b)
}

// anthropicRefusalJSON is a refused message carrying a fallback credit token.
func anthropicRefusalJSON(model, token string) string {
	return fmt.Sprintf(`{
  "id": "msg_refused", "type": "message", "role": "assistant", "model": %q,
  "content": [],
  "stop_reason": "refusal", "stop_sequence": null,
  "stop_details": {"type": "refusal", "category": "cyber", "explanation": "policy", "fallback_credit_token": %q, "recommended_model": null},
  "usage": {"input_tokens": 12, "output_tokens": 0}
}`, model, token)
}

func anthropicErrorJSON(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, typ, msg)
}

// judgeFastRetry makes the SDK's retry backoff 1 ms.
var judgeFastRetry = map[string]string{"retry-after-ms": "1"}

// judgeEnv returns an Env lookup over m only.
func judgeEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func newTestAnthropicJudge(t *testing.T, f *judgeFakeAPI, cfg JudgeConfig) Judge {
	t.Helper()
	cfg.Kind = "api"
	cfg.BaseURL = f.srv.URL
	if cfg.Env == nil {
		cfg.Env = judgeEnv(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-key"})
	}
	j, err := NewJudge(cfg)
	if err != nil {
		t.Fatalf("NewJudge: %v", err)
	}
	return j
}

func judgeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestJudgeAnthropicSuccessWireFormat(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, anthropicMessageJSON("claude-opus-5-5", "end_turn",
			`{"type":"thinking","thinking":"hmm","signature":"sig"}`,
			anthropicText("\n  VERDICT: "), anthropicText("PASS \n"))
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{})
	if got, want := j.Name(), "anthropic/claude-opus-5-5@"+f.srv.URL; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	prompt := "Did the agent book the flight?\nAnswer PASS or FAIL. \"quotes\" & <tags> ü"
	r, err := j.Ask(judgeCtx(t), prompt)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if r.Text != "VERDICT: PASS" || r.Model != "claude-opus-5-5" || r.Note != "" {
		t.Errorf("reply = %+v, want text %q, model claude-opus-5-5, no note", r, "VERDICT: PASS")
	}

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	q := reqs[0]
	if q.Method != "POST" || q.Path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", q.Method, q.Path)
	}
	if got := q.Header.Get("x-api-key"); got != "sk-ant-test-key" {
		t.Errorf("x-api-key = %q, want the key", got)
	}
	if got := q.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none when an API key is used", got)
	}
	if got := q.Header.Get("anthropic-version"); got != "2026-10-21" {
		t.Errorf("anthropic-version = %q, want 2026-10-21 (SDK v2 default)", got)
	}
	if got := q.Header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
		t.Errorf("Content-Type = %q", got)
	}
	if q.Body["model"] != "claude-opus-5-5" {
		t.Errorf("model = %v", q.Body["model"])
	}
	if q.Body["max_tokens"] != float64(1024) {
		t.Errorf("max_tokens = %v, want 1024", q.Body["max_tokens"])
	}
	if _, ok := q.Body["temperature"]; ok {
		t.Errorf("temperature sent (%v); API version 2026-10-21 rejects it", q.Body["temperature"])
	}
	if _, ok := q.Body["stream"]; ok {
		t.Errorf("stream sent: %v", q.Body["stream"])
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(q.Raw, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Messages) != 1 || body.Messages[0].Role != "user" || len(body.Messages[0].Content) != 1 ||
		body.Messages[0].Content[0].Type != "text" || body.Messages[0].Content[0].Text != prompt {
		t.Errorf("messages = %s, want one user message with one text block equal to the prompt", q.Raw)
	}
	t.Logf("SDK request headers: %v", q.Header)
	t.Logf("SDK request body: %s", q.Raw)
}

func TestJudgeAnthropicAuthToken(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, anthropicMessageJSON("claude-opus-5-5", "end_turn", anthropicText("ok"))
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{Env: judgeEnv(map[string]string{"ANTHROPIC_AUTH_TOKEN": "oauth-token"})})
	if _, err := j.Ask(judgeCtx(t), "hi"); err != nil {
		t.Fatal(err)
	}
	q := f.requests()[0]
	if got := q.Header.Get("Authorization"); got != "Bearer oauth-token" {
		t.Errorf("Authorization = %q, want Bearer oauth-token", got)
	}
	if got := q.Header.Get("x-api-key"); got != "" {
		t.Errorf("x-api-key = %q, want none with an auth token", got)
	}
}

func TestJudgeAnthropicRetriesOverloaded(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		if n < 2 {
			return 529, judgeFastRetry, anthropicErrorJSON("overloaded_error", "Overloaded")
		}
		return 200, nil, anthropicMessageJSON("claude-opus-5-5", "end_turn", anthropicText("PASS"))
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{MaxRetries: 2})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if r.Text != "PASS" || r.Model != "claude-opus-5-5" || r.Note != "" {
		t.Errorf("reply = %+v", r)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("server saw %d requests, want 3 (2 retries)", len(reqs))
	}
	for i, q := range reqs {
		if q.Body["model"] != "claude-opus-5-5" {
			t.Errorf("request %d model = %v, want the main model", i, q.Body["model"])
		}
		if got, want := q.Header.Get("X-Stainless-Retry-Count"), fmt.Sprint(i); got != want {
			t.Errorf("request %d X-Stainless-Retry-Count = %q, want %q", i, got, want)
		}
	}
}

func TestJudgeAnthropicOverloadedFallsBack(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		if r.Body["model"] == "claude-opus-5-5" {
			return 529, judgeFastRetry, anthropicErrorJSON("overloaded_error", "Overloaded")
		}
		return 200, nil, anthropicMessageJSON(fmt.Sprint(r.Body["model"]), "end_turn", anthropicText("FAIL"))
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{MaxRetries: 2})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if r.Text != "FAIL" || r.Model != "claude-sonnet-5-5" {
		t.Errorf("reply = %+v, want FAIL from claude-sonnet-5-5", r)
	}
	if !strings.Contains(r.Note, "claude-opus-5-5 overloaded") || !strings.Contains(r.Note, "answered by claude-sonnet-5-5") {
		t.Errorf("Note = %q, want it to say the main model was overloaded and who answered", r.Note)
	}
	reqs := f.requests()
	var models []string
	for _, q := range reqs {
		models = append(models, fmt.Sprint(q.Body["model"]))
	}
	want := "claude-opus-5-5,claude-opus-5-5,claude-opus-5-5,claude-sonnet-5-5"
	if got := strings.Join(models, ","); got != want {
		t.Errorf("models sent = %s, want %s", got, want)
	}
}

func TestJudgeAnthropicOverloadedFallbackFailsToo(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 529, judgeFastRetry, anthropicErrorJSON("overloaded_error", "Overloaded")
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{MaxRetries: -1, Fallback: "claude-haiku-5-5"})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil {
		t.Fatal("Ask succeeded against an always-overloaded server")
	}
	for _, s := range []string{j.Name(), "claude-opus-5-5", "claude-haiku-5-5", "529", "overloaded_error"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2 (no retries, one fallback)", n)
	}
}

func TestJudgeAnthropicRefusalFallsBack(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		if r.Body["model"] == "claude-opus-5-5" {
			return 200, nil, anthropicRefusalJSON("claude-opus-5-5", "credit-tok-1")
		}
		return 200, nil, anthropicMessageJSON(fmt.Sprint(r.Body["model"]), "end_turn", anthropicText("PASS"))
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{})
	r, err := j.Ask(judgeCtx(t), "grade this")
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if r.Text != "PASS" || r.Model != "claude-sonnet-5-5" {
		t.Errorf("reply = %+v, want PASS from claude-sonnet-5-5", r)
	}
	if !strings.Contains(r.Note, "claude-opus-5-5 declined (refusal") || !strings.Contains(r.Note, "answered by claude-sonnet-5-5") {
		t.Errorf("Note = %q", r.Note)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	if reqs[1].Body["model"] != "claude-sonnet-5-5" {
		t.Errorf("second request model = %v, want the fallback", reqs[1].Body["model"])
	}
	tok, _ := reqs[1].Body["fallback_credit_token"].(map[string]any)
	if tok["token"] != "credit-tok-1" {
		t.Errorf("fallback request fallback_credit_token = %v, want the refusal's token redeemed", reqs[1].Body["fallback_credit_token"])
	}
	if _, ok := reqs[0].Body["fallback_credit_token"]; ok {
		t.Errorf("first request carries a fallback_credit_token")
	}
	msgs, _ := reqs[1].Body["messages"].([]any)
	if len(msgs) != 1 || !strings.Contains(string(reqs[1].Raw), `"text":"grade this"`) {
		t.Errorf("fallback request messages = %s, want the same single prompt", reqs[1].Raw)
	}
	for i, q := range reqs {
		if !strings.Contains(strings.Join(q.Header.Values("anthropic-beta"), ","), "fallback-credit-2026-07-01") {
			t.Errorf("request %d anthropic-beta = %q, want the fallback-credit beta", i, q.Header.Values("anthropic-beta"))
		}
		if q.Header.Get("x-api-key") == "" {
			t.Errorf("request %d lost x-api-key", i)
		}
	}
}

func TestJudgeAnthropicRefusalWithoutFallback(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, anthropicRefusalJSON(fmt.Sprint(r.Body["model"]), "tok")
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{Fallback: "none"})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil || !strings.Contains(err.Error(), "declined") || !strings.Contains(err.Error(), j.Name()) {
		t.Fatalf("err = %v, want a refusal error naming the judge", err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Errorf("server saw %d requests, want 1", len(reqs))
	}
	if v := reqs[0].Header.Values("anthropic-beta"); len(v) != 0 {
		t.Errorf("anthropic-beta = %q without a fallback, want none", v)
	}
}

func TestJudgeAnthropicRefusalByBoth(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, anthropicRefusalJSON(fmt.Sprint(r.Body["model"]), "")
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil || !strings.Contains(err.Error(), "fallback claude-sonnet-5-5 declined too") {
		t.Fatalf("err = %v, want both models declined", err)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

func TestJudgeAnthropicUnauthorizedNotRetried(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 401, judgeFastRetry, anthropicErrorJSON("authentication_error", "invalid x-api-key")
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{MaxRetries: 3})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil {
		t.Fatal("Ask succeeded on 401")
	}
	for _, s := range []string{j.Name(), "401", "authentication_error", "invalid x-api-key"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	t.Logf("error: %v", err)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("error does not unwrap to the SDK's *anthropic.Error with status 401: %#v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1 (401 is not retried, no fallback)", n)
	}
}

func TestJudgeAnthropicBadRequestNoFallback(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 400, nil, anthropicErrorJSON("invalid_request_error", "max_tokens: too large")
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "max_tokens: too large") {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestJudgeAnthropicMalformedReplies(t *testing.T) {
	cases := []struct {
		name, ctype, body, want string
	}{
		{"truncated JSON", "application/json", `{"id":"msg_1","type":"message","content":[{"type":"text","text":"PA`, "judge anthropic/"},
		{"not an object", "application/json", `[1,2,3]`, "judge anthropic/"},
		{"empty object", "application/json", `{}`, "no text"},
		{"no text blocks", "application/json", anthropicMessageJSON("claude-opus-5-5", "end_turn"), "no text"},
		{"whitespace text", "application/json", anthropicMessageJSON("claude-opus-5-5", "end_turn", anthropicText(" \n\t ")), "no text"},
		{"content not a list", "application/json", `{"type":"message","model":"m","content":"PASS","stop_reason":"end_turn"}`, "judge anthropic/"},
		{"html", "text/html", `<html>gateway</html>`, "judge anthropic/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
				return 200, map[string]string{"Content-Type": tc.ctype}, tc.body
			})
			j := newTestAnthropicJudge(t, f, JudgeConfig{})
			r, err := j.Ask(judgeCtx(t), "p")
			if err == nil {
				t.Fatalf("Ask accepted a malformed reply: %+v", r)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			t.Logf("error: %v", err)
		})
	}
}

func TestJudgeAnthropicMaxTokensNote(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, anthropicMessageJSON("claude-opus-5-5", "max_tokens", anthropicText("partial"))
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil || r.Text != "partial" || !strings.Contains(r.Note, "max_tokens") {
		t.Fatalf("reply %+v, err %v; want partial text and a max_tokens note", r, err)
	}
}

func TestJudgeAnthropicOversizedBody(t *testing.T) {
	big := anthropicMessageJSON("claude-opus-5-5", "end_turn", anthropicText(strings.Repeat("a", judgeMaxHTTPBody)))
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, big
	})
	j := newTestAnthropicJudge(t, f, JudgeConfig{MaxRetries: -1})
	if _, err := j.Ask(judgeCtx(t), "p"); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v, want a body-too-large error", err)
	}
}

func TestJudgeAnthropicTimeout(t *testing.T) {
	release := make(chan struct{})
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		<-release
		return 200, nil, anthropicMessageJSON("claude-opus-5-5", "end_turn", anthropicText("late"))
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	j := newTestAnthropicJudge(t, f, JudgeConfig{Timeout: 200 * time.Millisecond, MaxRetries: -1})
	start := time.Now()
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil {
		t.Fatal("Ask succeeded past its timeout")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Ask took %v with a 200ms timeout", d)
	}
}
