package grade

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// openaiCompletionJSON is a Chat Completions response in the wire format.
func openaiCompletionJSON(model, content, finish string) string {
	c, _ := json.Marshal(content)
	return fmt.Sprintf(`{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": %q,
  "choices": [{"index": 0, "message": {"role": "assistant", "content": %s, "refusal": null, "annotations": []}, "logprobs": null, "finish_reason": %q}],
  "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
  "service_tier": "default"
}`, model, c, finish)
}

func openaiErrorJSON(typ, param, code, msg string) string {
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":%q,"code":%q}}`, msg, typ, param, code)
}

func newTestOpenAIJudge(t *testing.T, f *judgeFakeAPI, cfg JudgeConfig) Judge {
	t.Helper()
	cfg.Kind = "openai"
	if cfg.BaseURL == "" {
		cfg.BaseURL = f.srv.URL + "/v1"
	}
	if cfg.Model == "" {
		cfg.Model = "qwen3:8b"
	}
	if cfg.Env == nil {
		cfg.Env = judgeEnv(map[string]string{"OPENAI_API_KEY": "sk-openai-test"})
	}
	j, err := NewJudge(cfg)
	if err != nil {
		t.Fatalf("NewJudge: %v", err)
	}
	return j
}

func TestJudgeOpenAISuccessWireFormat(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, openaiCompletionJSON("qwen3:8b", "\n PASS: the form was submitted \n", "stop")
	})
	j := newTestOpenAIJudge(t, f, JudgeConfig{})
	if got, want := j.Name(), "openai/qwen3:8b@"+f.srv.URL+"/v1"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	prompt := "Judge this.\n\"quoted\" & <b>bold</b> ✓"
	r, err := j.Ask(judgeCtx(t), prompt)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if r.Text != "PASS: the form was submitted" || r.Model != "qwen3:8b" || r.Note != "" {
		t.Errorf("reply = %+v", r)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	q := reqs[0]
	if q.Method != "POST" || q.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", q.Method, q.Path)
	}
	if got := q.Header.Get("Authorization"); got != "Bearer sk-openai-test" {
		t.Errorf("Authorization = %q", got)
	}
	if q.Body["model"] != "qwen3:8b" {
		t.Errorf("model = %v", q.Body["model"])
	}
	if temp, ok := q.Body["temperature"]; !ok || temp != float64(0) {
		t.Errorf("temperature = %v (present %v), want 0", temp, ok)
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(q.Raw, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Messages) != 1 || body.Messages[0].Role != "user" || body.Messages[0].Content != prompt {
		t.Errorf("messages = %s, want one user message whose content is the prompt", q.Raw)
	}
	t.Logf("SDK request headers: %v", q.Header)
	t.Logf("SDK request body: %s", q.Raw)
}

func TestJudgeOpenAINoKeyLocalServer(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, openaiCompletionJSON("llama3", "FAIL", "stop")
	})
	// The key is empty in cfg and Env; the server is found through OPENAI_BASE_URL.
	j, err := NewJudge(JudgeConfig{Kind: "openai", Env: judgeEnv(map[string]string{
		"OPENAI_BASE_URL": f.srv.URL + "/v1",
		"OPENAI_MODEL":    "llama3",
	})})
	if err != nil {
		t.Fatalf("NewJudge without a key for a local server: %v", err)
	}
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil || r.Text != "FAIL" {
		t.Fatalf("Ask = %+v, %v", r, err)
	}
	q := f.requests()[0]
	if got := q.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none without a key", got)
	}
	if q.Body["model"] != "llama3" {
		t.Errorf("model = %v, want OPENAI_MODEL", q.Body["model"])
	}
}

func TestJudgeOpenAIRetries(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		switch n {
		case 0:
			return 429, judgeFastRetry, openaiErrorJSON("rate_limit_exceeded", "", "rate_limit_exceeded", "slow down")
		case 1:
			return 503, judgeFastRetry, openaiErrorJSON("server_error", "", "", "busy")
		}
		return 200, nil, openaiCompletionJSON("qwen3:8b", "PASS", "stop")
	})
	j := newTestOpenAIJudge(t, f, JudgeConfig{MaxRetries: 2})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil || r.Text != "PASS" {
		t.Fatalf("Ask = %+v, %v", r, err)
	}
	if n := len(f.requests()); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}

func TestJudgeOpenAIRetriesExhausted(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 500, judgeFastRetry, openaiErrorJSON("server_error", "", "", "The server had an error")
	})
	j := newTestOpenAIJudge(t, f, JudgeConfig{MaxRetries: 1})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "The server had an error") {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

func TestJudgeOpenAIUnauthorized(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 401, judgeFastRetry, openaiErrorJSON("invalid_request_error", "", "invalid_api_key", "Incorrect API key provided: sk-opena***test.")
	})
	j := newTestOpenAIJudge(t, f, JudgeConfig{})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil {
		t.Fatal("Ask succeeded on 401")
	}
	for _, s := range []string{j.Name(), "401", "invalid_api_key", "Incorrect API key provided"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("error does not unwrap to *openai.Error 401")
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1 (401 is not retried)", n)
	}
}

func TestJudgeOpenAITemperatureRejected(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		if _, ok := r.Body["temperature"]; ok {
			return 400, nil, openaiErrorJSON("invalid_request_error", "temperature", "unsupported_value",
				"Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.")
		}
		return 200, nil, openaiCompletionJSON("gpt-5-2026-08-07", "PASS", "stop")
	})
	j := newTestOpenAIJudge(t, f, JudgeConfig{Model: "gpt-5"})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if r.Text != "PASS" || r.Model != "gpt-5-2026-08-07" || !strings.Contains(r.Note, "temperature") {
		t.Errorf("reply = %+v, want PASS with a note about temperature", r)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	if _, ok := reqs[1].Body["temperature"]; ok {
		t.Errorf("second request still has temperature")
	}
}

func TestJudgeOpenAIMalformedReplies(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"empty choices", `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}`, "no choices"},
		{"missing choices", `{"id":"x","object":"chat.completion","model":"m"}`, "no choices"},
		{"empty content", openaiCompletionJSON("m", "", "stop"), "empty content"},
		{"whitespace content", openaiCompletionJSON("m", " \n ", "stop"), "empty content"},
		{"null content", `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`, "empty content"},
		{"refusal", `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`, "declined"},
		{"truncated JSON", `{"id":"x","choices":[{"message":{"content":"PA`, "judge openai/"},
		{"not JSON", `<html>bad gateway</html>`, "judge openai/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
				return 200, nil, tc.body
			})
			j := newTestOpenAIJudge(t, f, JudgeConfig{})
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

func TestJudgeOpenAILengthNote(t *testing.T) {
	f := newJudgeFakeAPI(t, func(n int, r judgeRecorded) (int, map[string]string, string) {
		return 200, nil, openaiCompletionJSON("m", "partial", "length")
	})
	j := newTestOpenAIJudge(t, f, JudgeConfig{})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil || r.Text != "partial" || !strings.Contains(r.Note, "length") {
		t.Fatalf("reply %+v, err %v", r, err)
	}
}
