package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools the guard offers: their argument specs and the schemas listed to the agent
// (ListTools), argument validation, and the text results the agent gets.

var (
	fieldRoles  = []string{"checkbox", "radio", "option", "switch", "menuitemradio", "menuitemcheckbox"}
	typeRoles   = []string{"textbox", "searchbox", "combobox", "spinbutton"}
	selectRoles = []string{"combobox", "listbox"}
	navRoles    = []string{"link", "tab", "menuitem", "treeitem"}
	focusRoles  = []string{"textbox", "searchbox", "combobox", "spinbutton", "listbox"}
)

func in(list []string, s string) bool { return slices.Contains(list, s) }

// prop describes one argument the guard accepts for a tool.
type prop struct {
	name     string
	typ      string // string | number | boolean | strings (array of string)
	required bool
	maxLen   int      // strings: bound in bytes (0 = 2000)
	enum     []string // strings: allowed values
	desc     string
}

// toolSpec is what the guard accepts for one tool (the schema offered to the agent).
type toolSpec struct {
	name  string
	props []prop
}

const quoteDesc = "The exact words from the owner's profile, answers or materials that this answer comes from; the value must appear in them."

// browserSpecs are the browser tools offered, with the arguments the guard reads and
// forwards. "@ref" stands for the child's ref argument ("target" or "ref").
var browserSpecs = map[string][]prop{
	"browser_navigate":      {{name: "url", typ: "string", required: true, maxLen: 4096}},
	"browser_navigate_back": {},
	"browser_snapshot":      {},
	"browser_wait_for": {{name: "time", typ: "number"}, {name: "text", typ: "string", maxLen: 500},
		{name: "textGone", typ: "string", maxLen: 500}},
	"browser_click": {{name: "element", typ: "string", maxLen: 500}, {name: "@ref", typ: "string", required: true, maxLen: 40},
		{name: "source_quote", typ: "string", maxLen: 4000, desc: quoteDesc + " Needed for checkboxes, radios and options."}},
	"browser_type": {{name: "element", typ: "string", maxLen: 500}, {name: "@ref", typ: "string", required: true, maxLen: 40},
		{name: "text", typ: "string", required: true, maxLen: 10000}, {name: "submit", typ: "boolean"},
		{name: "source_quote", typ: "string", required: true, maxLen: 4000, desc: quoteDesc}},
	"browser_select_option": {{name: "element", typ: "string", maxLen: 500}, {name: "@ref", typ: "string", required: true, maxLen: 40},
		{name: "values", typ: "strings", required: true, maxLen: 1000},
		{name: "source_quote", typ: "string", required: true, maxLen: 4000, desc: quoteDesc}},
	"browser_press_key": {{name: "key", typ: "string", required: true, maxLen: 40}},
}

// browserOrder is the order tools are listed in.
var browserOrder = []string{"browser_navigate", "browser_navigate_back", "browser_snapshot", "browser_wait_for",
	"browser_click", "browser_type", "browser_select_option", "browser_press_key"}

var ownSpecs = map[string][]prop{
	"upload_artifact": {{name: "kind", typ: "string", required: true, enum: []string{"resume", "cover_letter"}}},
	"request_answer": {{name: "question", typ: "string", required: true, maxLen: 2000, desc: "The question for the owner; at most 300 characters are kept."},
		{name: "kind", typ: "string", enum: []string{"missing_answer", "screening_ambiguity"}}},
	"ready_for_review": {{name: "summary", typ: "string", required: true, maxLen: 20000}},
}

var ownDescriptions = map[string]string{
	"upload_artifact":  "Attach an approved document (resume or cover_letter). First click the field's upload control so a file chooser is open, then call this. Each document is attached at most once.",
	"request_answer":   "Ask the owner for an answer the sources do not give (kind missing_answer), or about an ambiguous question (kind screening_ambiguity). The run waits for them; an answer becomes one of your sources.",
	"ready_for_review": "The form is filled as far as the sources allow: stop here so the owner can review it. Call once, last.",
}

// schemaProps reads the "properties" of a JSON schema given as any JSON-marshalable value.
func schemaProps(schema any) map[string]any {
	m, ok := schema.(map[string]any)
	if !ok {
		raw, err := json.Marshal(schema)
		if err != nil {
			return nil
		}
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
	}
	p, _ := m["properties"].(map[string]any)
	return p
}

func (b *Bridge) refName(tool string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.refArg[tool]; r != "" {
		return r
	}
	return "target"
}

// specFor is the accepted arguments of a tool, with "@ref" resolved.
func (b *Bridge) specFor(name string) ([]prop, bool) {
	if ps, ok := ownSpecs[name]; ok {
		return ps, true
	}
	ps, ok := browserSpecs[name]
	if !ok {
		return nil, false
	}
	b.mu.Lock()
	_, offered := b.child[name]
	b.mu.Unlock()
	if !offered {
		return nil, false
	}
	out := slices.Clone(ps)
	for i := range out {
		if out[i].name == "@ref" {
			out[i].name = b.refName(name)
			out[i].desc = "The ref of the element in the latest browser_snapshot (like e12)."
		}
	}
	return out, true
}

func schemaOf(ps []prop, childProps map[string]any) map[string]any {
	props := map[string]any{}
	var req []string
	for _, p := range ps {
		var s map[string]any
		switch p.typ {
		case "strings":
			s = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
		default:
			s = map[string]any{"type": p.typ}
		}
		if len(p.enum) > 0 {
			s["enum"] = p.enum
		}
		desc := p.desc
		if desc == "" {
			if c, ok := childProps[p.name].(map[string]any); ok {
				desc, _ = c["description"].(string)
			}
		}
		if desc != "" {
			s["description"] = desc
		}
		props[p.name] = s
		if p.required {
			req = append(req, p.name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(req) > 0 {
		out["required"] = req
	}
	return out
}

// ListTools returns the tools offered to the agent: the allowed browser tools the child has
// (with the guard's descriptions and schemas: only the arguments it accepts, source_quote
// added to answers) plus upload_artifact, request_answer and ready_for_review. Any other tool
// of the child is never listed. An error means the child's tools could not be read.
func (b *Bridge) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	if err := b.loadChild(ctx); err != nil {
		return nil, fmt.Errorf("guard: the browser's tools could not be read: %w", err)
	}
	var out []*mcp.Tool
	for _, name := range browserOrder {
		b.mu.Lock()
		ct := b.child[name]
		b.mu.Unlock()
		if ct == nil {
			continue
		}
		ps, _ := b.specFor(name)
		t := &mcp.Tool{Name: name, Description: ct.Description, InputSchema: schemaOf(ps, schemaProps(ct.InputSchema))}
		switch name {
		case "browser_navigate":
			t.Description = "Navigate the browser to an http(s) page of this application's sites: " + strings.Join(b.app.Sites, ", ") + "."
		case "browser_click":
			t.Description = "Click a link, tab, pagination or form-step button (Next, Upload, Add), or answer a checkbox, radio or option (answers need source_quote). A control that submits the application is governed by the run's mode (" + b.app.Mode + ")."
		case "browser_type":
			t.Description = "Type an answer into a text field. source_quote must be the owner's own words that contain the value."
		case "browser_select_option":
			t.Description = "Choose options in a dropdown. source_quote must be the owner's own words that contain each value."
		case "browser_press_key":
			t.Description = "Press Tab, Shift+Tab, an arrow key, Escape, Home, End, PageUp or PageDown. Nothing that types or submits."
		}
		out = append(out, t)
	}
	for _, name := range []string{"upload_artifact", "request_answer", "ready_for_review"} {
		out = append(out, &mcp.Tool{Name: name, Description: ownDescriptions[name], InputSchema: schemaOf(ownSpecs[name], nil)})
	}
	return out, nil
}

// validateArgs checks args against the accepted arguments: unknown names, wrong types,
// missing required ones and oversized strings are refused, naming the argument.
func validateArgs(tool string, ps []prop, args map[string]any) string {
	known := map[string]prop{}
	for _, p := range ps {
		known[p.name] = p
	}
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		p, ok := known[k]
		if !ok {
			acc := make([]string, 0, len(ps))
			for _, q := range ps {
				acc = append(acc, q.name)
			}
			list := "none"
			if len(acc) > 0 {
				list = strings.Join(acc, ", ")
			}
			return fmt.Sprintf("%s does not take the argument %q (it takes: %s).", tool, bound(k, 60), list)
		}
		v := args[k]
		limit := p.maxLen
		if limit == 0 {
			limit = 2000
		}
		switch p.typ {
		case "string":
			s, ok := v.(string)
			if !ok {
				return fmt.Sprintf("%s: argument %q must be a string.", tool, k)
			}
			if len(s) > limit {
				return fmt.Sprintf("%s: argument %q is longer than %d bytes.", tool, k, limit)
			}
			if len(p.enum) > 0 && !slices.Contains(p.enum, s) {
				return fmt.Sprintf("%s: argument %q must be one of %s.", tool, k, strings.Join(p.enum, ", "))
			}
		case "number":
			f, ok := v.(float64)
			if i, isInt := v.(int); isInt {
				f, ok = float64(i), true
			}
			if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Sprintf("%s: argument %q must be a number.", tool, k)
			}
		case "boolean":
			if _, ok := v.(bool); !ok {
				return fmt.Sprintf("%s: argument %q must be true or false.", tool, k)
			}
		case "strings":
			list, ok := v.([]any)
			if !ok {
				if ss, isStrs := v.([]string); isStrs {
					list = make([]any, len(ss))
					for i := range ss {
						list[i] = ss[i]
					}
					ok = true
				}
			}
			if !ok || len(list) > 50 {
				return fmt.Sprintf("%s: argument %q must be a list of at most 50 strings.", tool, k)
			}
			for _, x := range list {
				s, isStr := x.(string)
				if !isStr {
					return fmt.Sprintf("%s: argument %q must be a list of strings.", tool, k)
				}
				if len(s) > limit {
					return fmt.Sprintf("%s: an item of %q is longer than %d bytes.", tool, k, limit)
				}
			}
		}
	}
	for _, p := range ps {
		if _, ok := args[p.name]; p.required && !ok {
			return fmt.Sprintf("%s: argument %q is required.", tool, p.name)
		}
	}
	return ""
}

func argStr(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}

func argStrings(args map[string]any, k string) []string {
	switch v := args[k].(type) {
	case []string:
		return v
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// textResult is a tool result with one text, capped at MaxOutputBytes.
func textResult(s string, isErr bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: capText(s)}}, IsError: isErr}
}

// capText bounds s to MaxOutputBytes, saying so when it cut.
func capText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxOutputBytes {
		return s
	}
	note := fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", MaxOutputBytes-100, len(s))
	return bound(s, MaxOutputBytes-100) + note
}

// textOf joins the text contents of a result; other content kinds are noted, not passed.
func textOf(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		default:
			parts = append(parts, "[non-text content omitted]")
		}
	}
	return strings.Join(parts, "\n")
}
