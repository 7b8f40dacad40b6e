package meter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestNoSecretsRecorded: with prompts, outputs and keys carrying marker strings, through
// every API streamed and not, an error answer echoing the key, an answer that does not parse
// and an upstream URL with a password, none of the markers is in the meter's records (as
// JSON), its log or its errors.
func TestNoSecretsRecorded(t *testing.T) {
	const prompt, output, key, pass = "PROMPT-SECRET-1", "OUTPUT-SECRET-2", "sk-KEY-SECRET-3", "PASS-SECRET-4"
	var logbuf syncBuffer
	fm, m := setup(t, Options{Log: &logbuf})
	_ = fm
	callAll(t, m, prompt+" what?", "claude-test", "gpt-test")

	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "bad-key"):
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"type":"error","error":{"message":"invalid x-api-key %s"}}`, r.Header.Get("X-Api-Key"))
		case strings.Contains(r.URL.Path, "broken"):
			fmt.Fprintf(w, `{"model":"m","content":"%s %s", "usage":{"input_tokens":`, output, b)
		case strings.Contains(r.URL.Path, "stream"):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message_start\ndata: {\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}},\"x\":\"%s\"}\n\n", output)
			fmt.Fprintf(w, "event: message_delta\ndata: {not json %s %s}\n\n", output, key)
		default:
			fmt.Fprintf(w, `{"model":"m","content":[{"type":"text","text":%q}],"usage":{"input_tokens":-1,"output_tokens":2}}`, output)
		}
	}))
	m2, err := Start(Options{Upstreams: map[Kind]string{KindAnthropic: up}, Log: &logbuf})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/bad-key/v1/messages", "/broken/v1/messages", "/stream/v1/messages", "/v1/messages"} {
		req, _ := http.NewRequest("POST", m2.BaseURL(KindAnthropic)+path, strings.NewReader(`{"messages":[{"role":"user","content":"`+prompt+`"}]}`))
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	m2.Close(context.Background())
	m.Close(context.Background())

	_, startErr := Start(Options{Upstreams: map[Kind]string{KindOpenAI: "http://user:" + pass + "@127.0.0.1:1/v1?q=1"}})
	if startErr == nil {
		t.Fatal("an upstream URL with a query was accepted")
	}
	u1, u2 := m.Usage(), m2.Usage()
	if len(u1.Calls) != 6 || len(u2.Calls) != 4 || u2.Totals.UnreadableCalls != 3 || u2.Totals.ErrorCalls != 1 {
		t.Fatalf("usage %+v / %+v", u1.Totals, u2.Totals)
	}
	for _, where := range []struct{ name, text string }{
		{"records", mustJSON(t, u1) + mustJSON(t, u2)}, {"log", logbuf.String()}, {"Start's error", startErr.Error()},
	} {
		for _, s := range []string{prompt, output, key, "sk-ant-test-KEY", "sk-openai-test-KEY", pass} {
			if strings.Contains(where.text, s) {
				t.Errorf("the meter's %s hold %q: %s", where.name, s, where.text)
			}
		}
	}
	if !strings.Contains(logbuf.String(), "usage unreadable") {
		t.Errorf("the log says nothing of the unreadable calls: %q", logbuf.String())
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parse feeds answer to a parser in pieces of n bytes and returns what it read.
func parse(api API, sse bool, answer string, n, maxBody, maxEvent int, eof bool) usageResult {
	p := newUsageParser(api, sse, maxBody, maxEvent)
	b := []byte(answer)
	for len(b) > 0 {
		k := min(n, len(b))
		p.Write(b[:k])
		b = b[k:]
	}
	return p.result(eof)
}

const anthropicStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"output_tokens":1,"cache_creation_input_tokens":6,"cache_read_input_tokens":4,"cache_creation":{"ephemeral_5m_input_tokens":4,"ephemeral_1h_input_tokens":2}}}}` + "\n\n" +
	"event: content_block_delta\r\n" + `data: {"type":"content_block_delta","delta":{"text":"hi"}}` + "\r\n\r\n" +
	": a comment\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","usage":{"output_tokens":15}}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","usage":{"output_tokens":42}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

const chatStream = `data: {"model":"gpt-x","choices":[{"delta":{"content":"a"}}],"usage":null}` + "\n\n" +
	`data: {"model":"gpt-x","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n\n" +
	"data: [DONE]\n\n"

const responsesStream = "event: response.created\n" + `data: {"type":"response.created","response":{"model":"gpt-y","usage":null}}` + "\n\n" +
	"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","delta":"x"}` + "\n\n" +
	"event: response.completed\n" + `data: {"type":"response.completed","response":{"model":"gpt-y","usage":{"input_tokens":50,"output_tokens":7,"input_tokens_details":{"cached_tokens":20}}}}` + "\n\n"

// TestParsers: the usage of each API's answers, streamed and not, whatever the pieces the
// bytes come in; message_delta's output count is cumulative (the last one counts).
func TestParsers(t *testing.T) {
	cases := []struct {
		api    API
		sse    bool
		answer string
		want   tokens
		model  string
	}{
		{APIMessages, true, anthropicStream, tokens{10, 42, 4, 6, 2}, "claude-x"},
		{APIMessages, false, `{"model":"claude-x","content":[],"usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5,"cache_creation_input_tokens":6}}`, tokens{3, 4, 5, 6, 0}, "claude-x"},
		{APIChatCompletions, true, chatStream, tokens{30, 5, 8, 0, 0}, "gpt-x"},
		{APIChatCompletions, false, `{"model":"gpt-x","usage":{"prompt_tokens":9,"completion_tokens":2}}`, tokens{9, 2, 0, 0, 0}, "gpt-x"},
		{APIResponses, true, responsesStream, tokens{50, 7, 20, 0, 0}, "gpt-y"},
		{APIResponses, false, `{"model":"gpt-y","usage":{"input_tokens":8,"output_tokens":1,"input_tokens_details":{"cached_tokens":3}}}`, tokens{8, 1, 3, 0, 0}, "gpt-y"},
	}
	for i, c := range cases {
		for _, n := range []int{1, 3, 64, 1 << 20} {
			r := parse(c.api, c.sse, c.answer, n, 1<<20, 1<<20, true)
			if r.reason != "" || r.tokens != c.want || r.model != c.model {
				t.Errorf("case %d, pieces of %d: %+v, want %+v %s", i, n, r, c.want, c.model)
			}
		}
	}
}

// TestHostileAnswers: answers that are cut, malformed, over the bounds or lying are
// unreadable (never 0, never a panic), and an over-long event that cannot hold the usage
// does not spoil it.
func TestHostileAnswers(t *testing.T) {
	huge := strings.Repeat("x", 5000)
	bad := []struct {
		name   string
		api    API
		sse    bool
		answer string
		eof    bool
		reason string
	}{
		{"malformed JSON", APIMessages, false, `{"usage":{"input_tokens":1,`, true, "does not parse"},
		{"cut JSON", APIMessages, false, `{"usage":{"input_tokens":1,`, false, "cut before its end"},
		{"no usage", APIChatCompletions, false, `{"model":"m","choices":[]}`, true, "no usage"},
		{"usage lacks a count", APIResponses, false, `{"usage":{"input_tokens":1}}`, true, "lacks"},
		{"negative count", APIMessages, false, `{"usage":{"input_tokens":-5,"output_tokens":1}}`, true, "negative"},
		{"huge count", APIMessages, false, `{"usage":{"input_tokens":9000000000000000000,"output_tokens":1}}`, true, "over"},
		{"count overflows", APIMessages, false, `{"usage":{"input_tokens":1e400,"output_tokens":1}}`, true, "does not parse"},
		{"string count", APIMessages, false, `{"usage":{"input_tokens":"5","output_tokens":1}}`, true, "does not parse"},
		{"body over the bound", APIMessages, false, `{"usage":{"input_tokens":1,"output_tokens":1},"pad":"` + huge + `"}`, true, "over 4096 bytes"},
		{"deep nesting", APIMessages, false, strings.Repeat("[", 1000), true, "nested deeper"},
		{"empty", APIResponses, false, ``, true, "empty"},
		{"huge usage event", APIMessages, true, strings.Replace(anthropicStream, `"output_tokens":42}`, `"output_tokens":42,"pad":"`+huge+`"}`, 1), true, "over 4096 bytes"},
		{"huge unnamed chunk", APIChatCompletions, true, `data: {"pad":"` + huge + "\"}\n\n" + chatStream, true, "could hold the usage"},
		{"stream cut", APIMessages, true, anthropicStream[:strings.Index(anthropicStream, "event: message_delta")], false, "cut before its usage"},
		{"stream ended early", APIResponses, true, responsesStream[:strings.Index(responsesStream, "event: response.completed")], true, "ended without its usage"},
		{"error event", APIMessages, true, "event: message_start\n" + `data: {"message":{"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\nevent: error\ndata: {\"type\":\"error\"}\n\n", true, "error event"},
		{"malformed event", APIResponses, true, "event: response.completed\ndata: {oops\n\n", true, "does not parse"},
		{"message_start without usage", APIMessages, true, "event: message_start\ndata: {\"message\":{}}\n\n", true, "without usage"},
		{"completed without usage", APIResponses, true, "event: response.completed\ndata: {\"response\":{\"usage\":null}}\n\n", true, "without usage"},
		{"delta before start", APIMessages, true, "event: message_delta\ndata: {\"usage\":{\"output_tokens\":3}}\n\n", true, "without its usage"},
		{"no blank line after the last event", APIResponses, true, strings.TrimSuffix(responsesStream, "\n\n"), true, "without its usage"},
	}
	for _, c := range bad {
		for _, n := range []int{1, 7, 1 << 20} {
			r := parse(c.api, c.sse, c.answer, n, 4096, 4096, c.eof)
			if !strings.Contains(r.reason, c.reason) || r.tokens != (tokens{}) {
				t.Errorf("%s (pieces of %d): %+v, want a reason with %q and no tokens", c.name, n, r, c.reason)
			}
		}
	}
	// A long event that cannot hold the usage (a content delta) is skipped harmlessly.
	long := strings.Replace(anthropicStream, `"delta":{"text":"hi"}`, `"delta":{"text":"`+huge+`"}`, 1)
	if r := parse(APIMessages, true, long, 100, 4096, 4096, true); r.reason != "" || r.OutputTokens != 42 {
		t.Errorf("long content delta: %+v", r)
	}
	// An event name over the bound is replaced by the next one.
	if r := parse(APIMessages, true, "event: "+huge+"\n"+anthropicStream, 100, 4096, 4096, true); r.reason != "" || r.OutputTokens != 42 {
		t.Errorf("long event name: %+v", r)
	}
	// The parser keeps at most the bound of a line, however long the line.
	p := newUsageParser(APIMessages, true, 4096, 4096)
	for i := 0; i < 1000; i++ {
		p.Write([]byte("data: " + huge))
	}
	if cap(p.line) > 2*4096 || cap(p.data) > 2*4096 {
		t.Errorf("the parser holds %d + %d bytes of a 5 MB line", cap(p.line), cap(p.data))
	}
}

// TestErrorAnswerNotBilled: an error status without usage is a call at no cost, not an
// unreadable one; a 2xx answer without usage is unreadable.
func TestErrorAnswerNotBilled(t *testing.T) {
	status := 429
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error"}}`)
	}))
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindAnthropic: up}})
	for _, s := range []int{429, 200} {
		status = s
		resp, err := http.Post(m.BaseURL(KindAnthropic)+"/v1/messages", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	m.Close(context.Background())
	u := m.Usage()
	if c := u.Calls[0]; c.Status != 429 || c.Unreadable || c.CostUSD == nil || *c.CostUSD != 0 {
		t.Errorf("429: %+v", c)
	}
	if c := u.Calls[1]; c.Status != 200 || !c.Unreadable || c.CostUSD != nil {
		t.Errorf("200 without usage: %+v", c)
	}
	if tt := u.Totals; tt.Calls != 2 || tt.ErrorCalls != 1 || tt.UnreadableCalls != 1 || tt.CostUSD != nil || tt.KnownCostUSD != 0 {
		t.Errorf("totals %+v", tt)
	}
}

// TestOverBoundForwardedWhole: a body over MaxBody reaches the client whole; only its usage
// is unreadable.
func TestOverBoundForwardedWhole(t *testing.T) {
	body := `{"model":"claude-test","usage":{"input_tokens":1,"output_tokens":1},"pad":"` + strings.Repeat("y", 100000) + `"}`
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	_, m := setup(t, Options{Upstreams: map[Kind]string{KindAnthropic: up}, MaxBody: 1000})
	resp, err := http.Post(m.BaseURL(KindAnthropic)+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != body {
		t.Errorf("the client got %d bytes of %d", len(got), len(body))
	}
	m.Close(context.Background())
	if c := m.Usage().Calls[0]; !c.Unreadable || !strings.Contains(c.Reason, "over 1000 bytes") {
		t.Errorf("call %+v", c)
	}
}

// FuzzParsers: any answer, in any pieces, never panics; the result does not depend on how
// the bytes were cut; counts read are within bounds; a result is either tokens or a reason.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{anthropicStream, chatStream, responsesStream,
		`{"usage":{"input_tokens":1,"output_tokens":2}}`, `{"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		"data: [DONE]\n\n", "event: message_delta\ndata: {\"usage\":{\"output_tokens\":-1}}\n\n", "\r\r\n\n::\n"} {
		for api := 0; api < 3; api++ {
			f.Add([]byte(s), uint8(api), true, uint8(5))
			f.Add([]byte(s), uint8(api), false, uint8(1))
		}
	}
	apis := []API{APIMessages, APIChatCompletions, APIResponses}
	f.Fuzz(func(t *testing.T, data []byte, api uint8, sse bool, piece uint8) {
		a := apis[int(api)%3]
		whole := parse(a, sse, string(data), len(data)+1, 1024, 512, true)
		cut := parse(a, sse, string(data), int(piece)%17+1, 1024, 512, true)
		if whole != cut {
			t.Fatalf("whole %+v, in pieces of %d %+v", whole, int(piece)%17+1, cut)
		}
		if whole.reason != "" && whole.tokens != (tokens{}) {
			t.Fatalf("unreadable with tokens: %+v", whole)
		}
		for _, n := range []int64{whole.InputTokens, whole.OutputTokens, whole.CacheReadTokens, whole.CacheWriteTokens, whole.CacheWrite1hTokens} {
			if n < 0 || n > maxCount {
				t.Fatalf("count %d out of range", n)
			}
		}
		if len(whole.model) > 200 {
			t.Fatalf("model name of %d bytes", len(whole.model))
		}
		if bytes.Contains([]byte(whole.reason), data) && len(data) > 8 {
			t.Fatalf("the reason %q holds the answer", whole.reason)
		}
	})
}

// TestSumRefused: refused requests are counted apart from the model calls, an upgrade's
// (501) apart from the others, and leave the cost known; Add keeps both counts.
func TestSumRefused(t *testing.T) {
	tt := Sum([]Call{{Status: 501, Refused: true}, {Status: 413, Refused: true}, {Status: 400, Refused: true}})
	if tt.Calls != 0 || tt.RefusedUpgrades != 1 || tt.RefusedRequests != 2 || tt.CostUSD == nil || *tt.CostUSD != 0 {
		t.Errorf("Sum: %+v", tt)
	}
	if two := tt.Add(tt); two.RefusedUpgrades != 2 || two.RefusedRequests != 4 || two.CostUSD == nil {
		t.Errorf("Add: %+v", two)
	}
}
