package fakemodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

var testPlan = Plan{
	Marker: "what does Sapiens cost",
	Steps: []Step{
		{Tool: "browser_navigate", Args: map[string]any{"url": "http://books.example/"}},
		{Tool: "browser_snapshot", Expect: []string{"£54.23"}},
		{Tool: "browser_click", Target: &Target{Role: "link", Name: "Sapiens"}},
	},
	Answer: "£54.23",
}

const snapshot = "### Snapshot\n- generic [ref=e1]:\n  - link \"Sapiens: A Brief History\" [ref=e7] [cursor=pointer]\n  - paragraph [ref=e8]: £54.23\n"

func start(t *testing.T, p Plan) *Server {
	t.Helper()
	s, err := Start(p, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func browserTool(name string, props map[string]any) anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name,
		InputSchema: anthropic.ToolInputSchemaParam{Properties: props}}}
}

// TestAnthropicPlan: the official SDK, streaming, plays the whole plan as Claude Code
// would: tool names mcp__SERVER__TOOL, results as tool_result blocks; the ref of a Target
// comes from the latest snapshot.
func TestAnthropicPlan(t *testing.T) {
	s := start(t, testPlan)
	client := anthropic.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey("k"), option.WithMaxRetries(0))
	tools := []anthropic.ToolUnionParam{browserTool("Bash", nil),
		browserTool("mcp__browser__browser_navigate", map[string]any{"url": map[string]any{"type": "string"}}),
		browserTool("mcp__browser__browser_snapshot", nil),
		browserTool("mcp__browser__browser_click", map[string]any{"target": map[string]any{}, "element": map[string]any{}})}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("On books.example, what does Sapiens cost?"))}
	results := []string{"navigated", snapshot, "clicked"}
	var wantCalls = []string{"mcp__browser__browser_navigate", "mcp__browser__browser_snapshot", "mcp__browser__browser_click"}
	for i := 0; ; i++ {
		stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-test",
			MaxTokens: 100, Messages: msgs, Tools: tools})
		var m anthropic.Message
		for stream.Next() {
			if err := m.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if len(m.Content) != 1 {
			t.Fatalf("turn %d: %d content blocks", i, len(m.Content))
		}
		b := m.Content[0]
		if i == len(wantCalls) {
			if b.Type != "text" || b.Text != "£54.23" || m.StopReason != "end_turn" {
				t.Fatalf("answer: %+v, stop %s", b, m.StopReason)
			}
			break
		}
		if b.Type != "tool_use" || b.Name != wantCalls[i] || m.StopReason != "tool_use" {
			t.Fatalf("turn %d: %s %s (stop %s), want a call of %s", i, b.Type, b.Name, m.StopReason, wantCalls[i])
		}
		var input map[string]any
		json.Unmarshal(b.Input, &input)
		switch i {
		case 0:
			if input["url"] != "http://books.example/" {
				t.Errorf("navigate input %v", input)
			}
		case 2:
			if input["target"] != "e7" || input["element"] != "Sapiens" {
				t.Errorf("click input %v, want target e7 (from the snapshot)", input)
			}
		}
		msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(b.ID, input, b.Name)),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(b.ID, results[i], false)))
	}
	if !s.Answered() || len(s.Failures()) > 0 {
		t.Errorf("answered %v, failures %v", s.Answered(), s.Failures())
	}
	reqs := s.Requests()
	if len(reqs) != 4 || !reqs[0].Agent || !reqs[0].Stream || reqs[0].API != "anthropic" || reqs[3].Step != 3 {
		t.Errorf("records: %+v", reqs)
	}
}

// post sends a raw JSON body and returns the response body.
func post(t *testing.T, url string, body any) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, out.String())
	}
	return out.Bytes()
}

// anthropicText is the text of a non-streamed Messages API answer.
func anthropicText(t *testing.T, body []byte) string {
	t.Helper()
	var m struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(body, &m); err != nil || len(m.Content) != 1 || m.Content[0].Type != "text" {
		t.Fatalf("not a text answer: %s", body)
	}
	return m.Content[0].Text
}

// TestAnthropicNoBrowserTools: a turn of the agent without the browser tools (the MCP
// server was not connected yet) gets a wrong answer, and the failure is recorded; a request
// of another conversation (no marker) gets "OK" and is not the agent's.
func TestAnthropicNoBrowserTools(t *testing.T) {
	s := start(t, testPlan)
	text := anthropicText(t, post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "max_tokens": 10,
		"tools":    []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}},
		"messages": []any{map[string]any{"role": "user", "content": "So what does Sapiens cost?"}}}))
	recordedAfter(t, s, 0)
	if !strings.Contains(text, "no tool browser_navigate") || s.Answered() {
		t.Errorf("answer %q, answered %v", text, s.Answered())
	}
	if f := s.Failures(); len(f) != 1 || !strings.Contains(f[0], "Bash") {
		t.Errorf("failures %v", f)
	}
	side := anthropicText(t, post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "max_tokens": 10,
		"messages": []any{map[string]any{"role": "user", "content": "Write a title for this session"}}}))
	if r := recordedAfter(t, s, 1); side != "OK" || r[len(r)-1].Agent {
		t.Errorf("side request: %q, %+v", side, r[len(r)-1])
	}
}

// TestAnthropicPageMissing: a snapshot without the expected text fails the plan.
func TestAnthropicPageMissing(t *testing.T) {
	s := start(t, testPlan)
	tools := []any{map[string]any{"name": "mcp__b__browser_navigate"}, map[string]any{"name": "mcp__b__browser_snapshot"}}
	text := anthropicText(t, post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "max_tokens": 10, "tools": tools,
		"messages": []any{
			map[string]any{"role": "user", "content": "what does Sapiens cost?"},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "a", "name": "mcp__b__browser_navigate", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "a", "content": "ok"}}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "b", "name": "mcp__b__browser_snapshot", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "b",
				"content": []any{map[string]any{"type": "text", "text": "- paragraph: …8 tokens truncated…"}}}}},
		}}))
	if !strings.Contains(text, `lacks "£54.23"`) || s.Answered() {
		t.Errorf("answer %q", text)
	}
}

// events reads a server-sent event stream: the data of each event, by event name.
func events(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			if d["type"] != name {
				t.Errorf("event %s has type %v", name, d["type"])
			}
			out = append(out, d)
		}
	}
	return out
}

// doneItem is the item of the response.output_item.done event of a Responses API stream,
// after checking the stream's frame (created first, completed last with the same item).
func doneItem(t *testing.T, body []byte) map[string]any {
	t.Helper()
	ev := events(t, body)
	if len(ev) < 4 || ev[0]["type"] != "response.created" || ev[len(ev)-1]["type"] != "response.completed" {
		t.Fatalf("stream: %s", body)
	}
	var item map[string]any
	for i, e := range ev {
		if int(e["sequence_number"].(float64)) != i {
			t.Errorf("event %d has sequence_number %v", i, e["sequence_number"])
		}
		if e["type"] == "response.output_item.done" {
			item = e["item"].(map[string]any)
		}
	}
	out := ev[len(ev)-1]["response"].(map[string]any)["output"].([]any)
	if item == nil || len(out) != 1 || out[0].(map[string]any)["id"] != item["id"] {
		t.Fatalf("no output item: %s", body)
	}
	return item
}

// TestOpenAIToolSearch: Codex with a model it knows hides MCP tools behind tool_search: the
// server searches first, then calls the function the search returned, with its namespace;
// with the tools listed as a namespace, it calls them at once.
func TestOpenAIToolSearch(t *testing.T) {
	s := start(t, Plan{Marker: "Sapiens", Steps: testPlan.Steps[:2], Answer: "£54.23"})
	url := s.URL() + "/v1/responses"
	user := map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Sapiens?"}}}
	base := []any{map[string]any{"type": "function", "name": "exec_command"}, map[string]any{"type": "tool_search", "execution": "client"}}
	item := doneItem(t, post(t, url, map[string]any{"model": "gpt-x", "stream": true, "tools": base, "input": []any{user}}))
	args, _ := item["arguments"].(map[string]any)
	if item["type"] != "tool_search_call" || args["query"] != "browser navigate" || item["execution"] != "client" {
		t.Fatalf("first turn: %v, want a tool_search_call", item)
	}
	found := map[string]any{"type": "namespace", "name": "mcp__browser", "tools": []any{
		map[string]any{"type": "function", "name": "browser_navigate"}, map[string]any{"type": "function", "name": "browser_snapshot"}}}
	input := []any{user, item, map[string]any{"type": "tool_search_output", "call_id": item["call_id"], "execution": "client", "tools": []any{found}}}
	item = doneItem(t, post(t, url, map[string]any{"model": "gpt-x", "stream": true, "tools": base, "input": input}))
	if item["type"] != "function_call" || item["name"] != "browser_navigate" || item["namespace"] != "mcp__browser" ||
		item["arguments"] != `{"url":"http://books.example/"}` {
		t.Fatalf("second turn: %v, want browser_navigate in mcp__browser", item)
	}
	input = append(input, item, map[string]any{"type": "function_call_output", "call_id": item["call_id"], "output": "ok"})
	// the namespace now comes with the request's tools (not only through the search)
	item = doneItem(t, post(t, url, map[string]any{"model": "gpt-x", "stream": true, "tools": append(base, found), "input": input}))
	if item["name"] != "browser_snapshot" {
		t.Fatalf("third turn: %v", item)
	}
	input = append(input, item, map[string]any{"type": "function_call_output", "call_id": item["call_id"],
		"output": []any{map[string]any{"type": "input_text", "text": snapshot}}})
	body := post(t, url, map[string]any{"model": "gpt-x", "input": input, "tools": base}) // not streamed
	var resp struct {
		Status string
		Output []struct {
			Type    string
			Content []struct{ Type, Text string }
		}
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Status != "completed" || len(resp.Output) != 1 ||
		resp.Output[0].Type != "message" || resp.Output[0].Content[0].Text != "£54.23" {
		t.Fatalf("answer: %s", body)
	}
	if !s.Answered() || len(s.Failures()) > 0 {
		t.Errorf("answered %v, failures %v", s.Answered(), s.Failures())
	}
}

// TestOpenAISearchFindsNothing: when the search does not return the tool (a tool whose
// description lacks the words searched for), the plan fails instead of searching forever.
func TestOpenAISearchFindsNothing(t *testing.T) {
	s := start(t, testPlan)
	url := s.URL() + "/v1/responses"
	user := map[string]any{"type": "message", "role": "user", "content": "what does Sapiens cost"}
	tools := []any{map[string]any{"type": "tool_search"}}
	item := doneItem(t, post(t, url, map[string]any{"model": "m", "stream": true, "tools": tools, "input": []any{user}}))
	input := []any{user, item, map[string]any{"type": "tool_search_output", "call_id": item["call_id"], "tools": []any{}}}
	item = doneItem(t, post(t, url, map[string]any{"model": "m", "stream": true, "tools": tools, "input": input}))
	if item["type"] != "message" || s.Answered() || len(s.Failures()) != 1 {
		t.Errorf("after an empty search: %v; failures %v", item, s.Failures())
	}
}

// TestChatPlan: OpenAI Chat Completions, through the official SDK, plays the plan (tools as
// functions, results as tool messages); every answer reports the usage recorded with the
// request, the streamed one in its last chunk when include_usage is set, and not at all
// without it.
func TestChatPlan(t *testing.T) {
	s := start(t, Plan{Marker: "Sapiens", Steps: testPlan.Steps[:2], Answer: "£54.23"})
	client := openai.NewClient(ooption.WithBaseURL(s.URL()+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	ctx := context.Background()
	fn := func(name string) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name})
	}
	params := openai.ChatCompletionNewParams{Model: "gpt-x",
		Tools:    []openai.ChatCompletionToolUnionParam{fn("browser_navigate"), fn("browser_snapshot")},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what does Sapiens cost?")}}
	results := []string{"navigated", snapshot}
	for i := 0; ; i++ {
		n := len(s.Requests())
		var msg openai.ChatCompletionMessage
		var usage openai.CompletionUsage
		if i%2 == 0 {
			res, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			msg, usage = res.Choices[0].Message, res.Usage
		} else {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			st := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			msg, usage = acc.Choices[0].Message, acc.Usage
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
		}
		r := recordedAfter(t, s, n)
		if u := r[len(r)-1].Usage; u == nil || usage.PromptTokens != u.Input || usage.CompletionTokens != u.Output ||
			usage.PromptTokensDetails.CachedTokens != u.CacheRead || u.Input == 0 {
			t.Errorf("turn %d: usage %+v, recorded %+v", i, usage, u)
		}
		if i == len(results) {
			if msg.Content != "£54.23" || len(msg.ToolCalls) != 0 {
				t.Fatalf("answer %+v", msg)
			}
			break
		}
		if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != testPlan.Steps[i].Tool {
			t.Fatalf("turn %d: %+v", i, msg)
		}
		params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(results[i], msg.ToolCalls[0].ID))
	}
	if !s.Answered() {
		t.Errorf("not answered: %v", s.Failures())
	}
	// A stream without include_usage reports none.
	before := len(s.Requests())
	st := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for st.Next() {
		if st.Current().JSON.Usage.Valid() {
			t.Error("a chunk has usage without include_usage")
		}
	}
	if r := recordedAfter(t, s, before); st.Err() != nil || r[len(r)-1].Usage != nil {
		t.Errorf("no include_usage: %v, recorded %+v", st.Err(), r[len(r)-1].Usage)
	}
}

// recordedAfter waits (up to 10 s) until the server has recorded more than n requests (it
// records one once its answer is written, which a client may read before) and returns them.
func recordedAfter(t *testing.T, s *Server, n int) []Request {
	t.Helper()
	r := s.Requests()
	for deadline := time.Now().Add(10 * time.Second); len(r) <= n && time.Now().Before(deadline); r = s.Requests() {
		time.Sleep(5 * time.Millisecond)
	}
	if len(r) <= n {
		t.Fatalf("the server recorded %d requests, want more than %d", len(r), n)
	}
	return r
}
