package fakemodel

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Codex's code mode (the default model of Codex 0.171, when no model is named): the request
// has no "tools" field. Its first input item is "additional_tools" with one custom tool,
// exec (namespace functions), that runs JavaScript in a V8 isolate where every nested tool
// is a method of the global tools object; MCP servers are only named, in a developer
// message ("Deferred tool namespaces:\n- mcp__browser"), and their tools are reached as
// tools.mcp__SERVER__TOOL(args) from that JavaScript. The model calls exec with a
// custom_tool_call (free-form input: the script) and gets a custom_tool_call_output with
// what the script passed to text().
//
// The server plays a plan step there as one exec call whose script calls the step's tool
// on the first deferred namespace and returns the text of its result; in the next request
// the call is read back from the script (the tools.mcp__SERVER__TOOL it calls) and the
// output is the step's result.

// deferredNamespace matches an MCP server named in the deferred tool namespaces.
var deferredNamespace = regexp.MustCompile(`(?m)^Deferred tool namespaces:\s*\n\s*-\s*(mcp__[A-Za-z0-9_]+)`)

// execCallee is the tool a code-mode script calls: tools.mcp__SERVER__TOOL(.
var execCallee = regexp.MustCompile(`tools\.(mcp__[A-Za-z0-9_]+?__[A-Za-z0-9_]+)\(`)

// addCodeMode reads one input item of a Responses API request for code mode: the exec
// tool offered in additional_tools, the deferred namespaces in a developer message, an exec
// call and its output. It reports whether the item was one of those.
func (c *convo) addCodeMode(it map[string]any) bool {
	switch it["type"] {
	case "additional_tools":
		ts, _ := it["tools"].([]any)
		for _, t := range ts {
			m, _ := t.(map[string]any)
			sub, _ := m["tools"].([]any)
			for _, st := range sub {
				if sm, ok := st.(map[string]any); ok && sm["type"] == "custom" && sm["name"] == "exec" {
					c.exec = true
				}
			}
		}
		return true
	case "custom_tool_call":
		id, _ := it["call_id"].(string)
		input, _ := it["input"].(string)
		name := "exec"
		if m := execCallee.FindStringSubmatch(input); m != nil {
			name = m[1]
		}
		c.calls = append(c.calls, call{id: id, name: name})
		return true
	case "custom_tool_call_output":
		id, _ := it["call_id"].(string)
		text := textOf(it["output"])
		c.results[id] = result{text: text, isError: strings.HasPrefix(text, "Script error") || strings.Contains(text, "ERROR:")}
		return true
	}
	if it["role"] == "developer" || it["role"] == "system" {
		if m := deferredNamespace.FindStringSubmatch(textOf(it["content"])); m != nil && c.deferred == "" {
			c.deferred = m[1]
		}
	}
	return false
}

// execScript is the code-mode script that calls tool (a deferred MCP tool) with args and
// hands back the text of its result.
func execScript(tool string, args map[string]any) string {
	a, _ := json.Marshal(args)
	return "const r = await tools." + tool + "(" + string(a) + ");\n" +
		"text(typeof r === \"string\" ? r : (r && r.content ? r.content.map((c) => c.text || \"\").join(\"\\n\") : JSON.stringify(r)));\n"
}
