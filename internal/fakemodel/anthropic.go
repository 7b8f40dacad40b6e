package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// anthropic answers POST /v1/messages: the Messages API, streamed (server-sent events:
// message_start, content_block_start/delta/stop, message_delta, message_stop) when the
// request says "stream": true, else one JSON message.
func (s *Server) anthropic(w http.ResponseWriter, body []byte, rec *Request) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string `json:"name"`
			Type        string `json:"type"`
			InputSchema any    `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		rec.Reply = "400"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{"type": "error",
			"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	c := &convo{results: map[string]result{}}
	for _, t := range req.Tools {
		if t.Name != "" {
			c.tools = append(c.tools, tool{name: t.Name, props: schemaProps(t.InputSchema)})
		}
	}
	var user []string
	for _, m := range req.Messages {
		blocks, ok := m.Content.([]any)
		if !ok {
			if m.Role == "user" {
				user = append(user, textOf(m.Content))
			}
			continue
		}
		for _, b := range blocks {
			bm, _ := b.(map[string]any)
			switch bm["type"] {
			case "text":
				if m.Role == "user" {
					user = append(user, textOf(bm))
				}
			case "tool_use":
				id, _ := bm["id"].(string)
				name, _ := bm["name"].(string)
				args, _ := bm["input"].(map[string]any)
				c.calls = append(c.calls, call{id: id, name: name, args: args})
			case "tool_result":
				id, _ := bm["tool_use_id"].(string)
				isErr, _ := bm["is_error"].(bool)
				c.results[id] = result{text: textOf(bm["content"]), isError: isErr}
			}
		}
	}
	c.userText = strings.Join(user, "\n")
	a := s.decide(c, rec)

	var block map[string]any
	stop := "end_turn"
	if a.call != nil {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": s.newID("toolu"), "name": a.call.name, "input": a.call.args}
	} else {
		block = map[string]any{"type": "text", "text": a.answer}
	}
	rep := reportedUsage(body, true)
	rec.Usage = &rep
	usage := map[string]any{"input_tokens": rep.Input, "output_tokens": rep.Output,
		"cache_creation_input_tokens": rep.CacheWrite, "cache_read_input_tokens": rep.CacheRead,
		"cache_creation": map[string]any{"ephemeral_5m_input_tokens": rep.CacheWrite - rep.CacheWrite1h,
			"ephemeral_1h_input_tokens": rep.CacheWrite1h}}
	msg := map[string]any{"id": s.newID("msg"), "type": "message", "role": "assistant", "model": req.Model,
		"stop_sequence": nil}
	if !req.Stream {
		msg["content"], msg["stop_reason"], msg["usage"] = []any{block}, stop, usage
		writeJSON(w, msg)
		return
	}
	e := newSSE(w)
	msg["content"], msg["stop_reason"] = []any{}, nil
	// message_start has the input counts and a first output count; message_delta the
	// final (cumulative) output count.
	started := map[string]any{}
	for k, v := range usage {
		started[k] = v
	}
	started["output_tokens"] = 1
	msg["usage"] = started
	e.event("message_start", map[string]any{"type": "message_start", "message": msg})
	if a.call != nil {
		input, _ := json.Marshal(a.call.args)
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": a.call.name, "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": a.answer}})
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": rep.Output}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}
