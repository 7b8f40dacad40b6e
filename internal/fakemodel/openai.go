package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// openai answers POST /v1/responses: the Responses API, streamed (server-sent events:
// response.created, response.in_progress, response.output_item.added, the item's deltas,
// response.output_item.done, response.completed) when the request says "stream": true,
// else one JSON response object.
func (s *Server) openai(w http.ResponseWriter, body []byte, rec *Request) {
	var req struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Input  json.RawMessage   `json:"input"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		rec.Reply = "400"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	c := openaiConvo(req.Tools, req.Input)
	a := s.decide(c, rec)

	item := s.openaiItem(a)
	rep := reportedUsage(body, false)
	rec.Usage = &rep
	resp := map[string]any{"id": s.newID("resp"), "object": "response", "created_at": time.Now().Unix(),
		"model": req.Model, "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": rep.Input, "input_tokens_details": map[string]any{"cached_tokens": rep.CacheRead},
			"output_tokens": rep.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": rep.Input + rep.Output}}
	if !req.Stream {
		writeJSON(w, resp)
		return
	}
	streamOpenAI(w, resp, item, a.answer)
}

// openaiConvo reads a Responses API request's tools and input items (a string, or a list
// of messages, function calls and their outputs, tool searches and their outputs) into a
// conversation.
func openaiConvo(tools []json.RawMessage, input json.RawMessage) *convo {
	c := &convo{results: map[string]result{}}
	for _, raw := range tools {
		var t map[string]any
		if json.Unmarshal(raw, &t) == nil {
			c.addTool(t, "")
		}
	}
	var items []map[string]any
	var user []string
	if err := json.Unmarshal(input, &items); err != nil {
		var text string
		json.Unmarshal(input, &text)
		user = append(user, text)
	}
	for _, it := range items {
		if c.addCodeMode(it) {
			continue
		}
		switch it["type"] {
		case "message", nil:
			if it["role"] == "user" {
				user = append(user, textOf(it["content"]))
			}
		case "function_call":
			id, _ := it["call_id"].(string)
			name, _ := it["name"].(string)
			ns, _ := it["namespace"].(string)
			var args map[string]any
			if a, ok := it["arguments"].(string); ok {
				json.Unmarshal([]byte(a), &args)
			}
			c.calls = append(c.calls, call{id: id, name: name, namespace: ns, args: args})
		case "function_call_output":
			id, _ := it["call_id"].(string)
			res := result{text: textOf(it["output"])}
			if ok, isBool := it["success"].(bool); isBool && !ok {
				res.isError = true
			}
			c.results[id] = res
		case "tool_search_call":
			id, _ := it["call_id"].(string)
			args, _ := it["arguments"].(map[string]any)
			c.calls = append(c.calls, call{id: id, name: "tool_search", search: true, args: args})
		case "tool_search_output":
			// The tools a search found are callable from the next turn on.
			ts, _ := it["tools"].([]any)
			for _, t := range ts {
				if m, ok := t.(map[string]any); ok {
					c.addTool(m, "")
				}
			}
		}
	}
	c.userText = strings.Join(user, "\n")
	return c
}

// openaiItem is the output item of the action: a tool search call, a function call, or an
// assistant message.
func (s *Server) openaiItem(a action) map[string]any {
	var item map[string]any
	if a.call != nil && a.call.script != "" {
		item = map[string]any{"type": "custom_tool_call", "id": s.newID("ctc"), "call_id": s.newID("call"),
			"name": "exec", "input": a.call.script, "status": "completed"}
	} else if a.call != nil && a.call.search {
		item = map[string]any{"type": "tool_search_call", "id": s.newID("ts"), "call_id": s.newID("call"),
			"execution": "client", "status": "completed", "arguments": a.call.args}
	} else if a.call != nil {
		args, _ := json.Marshal(a.call.args)
		item = map[string]any{"type": "function_call", "id": s.newID("fc"), "call_id": s.newID("call"),
			"name": a.call.name, "arguments": string(args), "status": "completed"}
		if a.call.namespace != "" {
			item["namespace"] = a.call.namespace
		}
	} else {
		item = map[string]any{"type": "message", "id": s.newID("msg"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": a.answer, "annotations": []any{}}}}
	}
	return item
}

// streamOpenAI writes resp as the Responses API's server-sent events: created,
// in_progress, the output item added, its deltas and done, then completed.
func streamOpenAI(w http.ResponseWriter, resp, item map[string]any, answer string) {
	e := newSSE(w)
	seq := 0
	ev := func(name string, data map[string]any) {
		data["type"], data["sequence_number"] = name, seq
		seq++
		e.event(name, data)
	}
	started := map[string]any{}
	for k, v := range resp {
		started[k] = v
	}
	started["status"], started["output"] = "in_progress", []any{}
	delete(started, "usage")
	ev("response.created", map[string]any{"response": started})
	ev("response.in_progress", map[string]any{"response": started})
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	switch item["type"] {
	case "function_call":
		added["arguments"] = ""
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		ev("response.function_call_arguments.delta", map[string]any{"item_id": item["id"], "output_index": 0, "delta": item["arguments"]})
		ev("response.function_call_arguments.done", map[string]any{"item_id": item["id"], "output_index": 0, "arguments": item["arguments"]})
	case "custom_tool_call":
		added["input"] = ""
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		ev("response.custom_tool_call_input.delta", map[string]any{"item_id": item["id"], "output_index": 0, "delta": item["input"]})
		ev("response.custom_tool_call_input.done", map[string]any{"item_id": item["id"], "output_index": 0, "input": item["input"]})
	case "message":
		added["content"] = []any{}
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		ev("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0, "part": part})
		ev("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": answer})
		ev("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0, "text": answer})
		ev("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": answer, "annotations": []any{}}})
	default:
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": resp})
}

// addTool adds a Responses API tool: a function, the functions of a namespace, or the
// client-side tool_search.
func (c *convo) addTool(t map[string]any, namespace string) {
	name, _ := t["name"].(string)
	switch t["type"] {
	case "function":
		for _, have := range c.tools {
			if have.name == name && have.namespace == namespace {
				return // listed again by a later search
			}
		}
		if name != "" {
			c.tools = append(c.tools, tool{name: name, namespace: namespace, props: schemaProps(t["parameters"])})
		}
	case "namespace":
		sub, _ := t["tools"].([]any)
		for _, st := range sub {
			if m, ok := st.(map[string]any); ok {
				c.addTool(m, name)
			}
		}
	case "tool_search":
		c.search = true
	}
}
