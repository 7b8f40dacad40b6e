package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// chat answers POST /v1/chat/completions: OpenAI Chat Completions, streamed (server-sent
// events without names: chat.completion.chunk objects, then data: [DONE]) when the request
// says "stream": true, else one chat.completion object. A streamed answer ends with a chunk
// holding the usage (and no choices) only when the request sets
// stream_options.include_usage, as the API does.
func (s *Server) chat(w http.ResponseWriter, body []byte, rec *Request) {
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string `json:"name"`
				Parameters any    `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		rec.Reply = "400"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	c := &convo{results: map[string]result{}}
	for _, t := range req.Tools {
		if t.Function.Name != "" {
			c.tools = append(c.tools, tool{name: t.Function.Name, props: schemaProps(t.Function.Parameters)})
		}
	}
	var user []string
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			user = append(user, textOf(m.Content))
		case "assistant":
			for _, tc := range m.ToolCalls {
				var args map[string]any
				json.Unmarshal([]byte(tc.Function.Arguments), &args)
				c.calls = append(c.calls, call{id: tc.ID, name: tc.Function.Name, args: args})
			}
		case "tool":
			c.results[m.ToolCallID] = result{text: textOf(m.Content)}
		}
	}
	c.userText = strings.Join(user, "\n")
	a := s.decide(c, rec)

	rep := reportedUsage(body, false)
	usage := map[string]any{"prompt_tokens": rep.Input, "completion_tokens": rep.Output,
		"total_tokens": rep.Input + rep.Output, "prompt_tokens_details": map[string]any{"cached_tokens": rep.CacheRead},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
	id, created := s.newID("chatcmpl"), time.Now().Unix()
	message := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	var toolCalls []any
	if a.call != nil {
		args, _ := json.Marshal(a.call.args)
		finish = "tool_calls"
		toolCalls = []any{map[string]any{"id": s.newID("call"), "type": "function",
			"function": map[string]any{"name": a.call.name, "arguments": string(args)}}}
		message["tool_calls"] = toolCalls
	} else {
		message["content"] = a.answer
	}
	if !req.Stream {
		rec.Usage = &rep
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}, "usage": usage})
		return
	}
	e := newSSE(w)
	chunk := func(choices []any, u any) {
		ch := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": choices}
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			ch["usage"] = u // null on every chunk but the last
		}
		b, _ := json.Marshal(ch)
		fmt.Fprintf(e.w, "data: %s\n\n", b)
		if e.f != nil {
			e.f.Flush()
		}
	}
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}}, nil)
	if a.call != nil {
		chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
			map[string]any{"index": 0, "id": toolCalls[0].(map[string]any)["id"], "type": "function",
				"function": toolCalls[0].(map[string]any)["function"]}}}, "finish_reason": nil}}, nil)
	} else {
		chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"content": a.answer}, "finish_reason": nil}}, nil)
	}
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		rec.Usage = &rep
		chunk([]any{}, usage)
	}
	fmt.Fprint(e.w, "data: [DONE]\n\n")
	if e.f != nil {
		e.f.Flush()
	}
}
