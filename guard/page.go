package guard

import (
	"context"
	"encoding/json"
	"github.com/pab-dev/pab/guard/netpolicy"
	"math"
	"strings"
)

// What the guard reads from the page through the child's browser_evaluate: the page's
// state (inspectPageJS) and one control's facts (probeElementJS).

// pageState is what inspectPageJS reports.
type pageState struct {
	URL, Title                                    string
	Captcha, Login, Duplicate, AntiBot, Confirmed bool
}

// evaluateResult reads the JSON value of a browser_evaluate answer ("### Result\n<json>\n###
// ..." from @playwright/mcp, or bare JSON).
func evaluateResult(t string) (map[string]any, bool) {
	if len(t) > 1<<20 {
		return nil, false
	}
	body := t
	if i := strings.Index(t, "### Result"); i >= 0 {
		body = t[i+len("### Result"):]
		if j := strings.Index(body, "\n### "); j >= 0 {
			body = body[:j]
		}
	}
	body = strings.TrimSpace(body)
	body = strings.TrimPrefix(body, "```json")
	body = strings.TrimPrefix(body, "```")
	body = strings.TrimSuffix(body, "```")
	var v map[string]any
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &v) != nil {
		// Some versions return the value as a JSON string holding JSON.
		var s string
		if json.Unmarshal([]byte(strings.TrimSpace(body)), &s) != nil || json.Unmarshal([]byte(s), &v) != nil {
			return nil, false
		}
	}
	return v, v != nil
}

func (b *Bridge) inspect(ctx context.Context) *pageState {
	if !b.canEvaluate() {
		return nil
	}
	v, ok := b.evalJSON(ctx, inspectPageJS)
	if !ok {
		return nil
	}
	u, ok := v["url"].(string)
	if !ok {
		return nil
	}
	t := func(k string) bool { x, _ := v[k].(bool); return x }
	title, _ := v["title"].(string)
	if n, _ := v["leaked"].(float64); n > 0 {
		b.emit(Event{Type: "policy.decision", Domain: hostOf(u), Detail: map[string]any{"class": ClassSubmit, "decision": "refused", "reason": "submit.by_get", "basis": netpolicy.LayerPage, "count": int(math.Min(n, 1e6))}})
	}
	if n, _ := v["scriptBlocked"].(float64); n > 0 {
		b.emit(Event{Type: "policy.decision", Domain: hostOf(u), Detail: map[string]any{"class": ClassSubmit, "decision": "refused", "reason": "script_submit", "basis": netpolicy.LayerPage, "count": int(math.Min(n, 1e6))}})
	}
	b.readForms(ctx)
	return &pageState{URL: u, Title: title, Captcha: t("captcha"), Login: t("login"), Duplicate: t("duplicate"), AntiBot: t("antiBot"), Confirmed: t("confirmed")}
}

// facts is what probeElementJS reports.
type facts struct {
	Tag, Type, Role, Name, Method, FormAction, Href   string
	Submits, EnterSubmits, InForm, NewTab, ScriptSubs bool
	Group                                             string      // the question a radio or checkbox answers (legend, group label)
	Options                                           []selectOpt // a <select>'s options
	GetURL                                            string      // a GET form's submission URL with its data (for a control that submits one)
	Unlocked                                          bool        // the page runs no submit lock (it was open before the guard installed it)
}

// selectOpt is one option of a <select>: its value attribute and its visible label.
type selectOpt struct{ Value, Label string }

func (b *Bridge) probe(ctx context.Context, ref, label string) *facts {
	if !b.canEvaluate() {
		return nil
	}
	var v map[string]any
	var ok bool
	if b.cfg.Holds != nil {
		v, ok = b.probeHeld(ctx, ref, firstNonEmpty(label, "control"))
	} else {
		v, _, ok = b.evalElement(ctx, probeElementJS, ref, firstNonEmpty(label, "control"))
	}
	if !ok {
		return nil
	}
	submits, ok := v["submits"].(bool)
	if !ok {
		return nil
	}
	s := func(k string) string { x, _ := v[k].(string); return x }
	t := func(k string) bool { x, _ := v[k].(bool); return x }
	var opts []selectOpt
	if list, ok := v["options"].([]any); ok {
		for _, o := range list {
			if m, ok := o.(map[string]any); ok {
				val, _ := m["value"].(string)
				lab, _ := m["label"].(string)
				opts = append(opts, selectOpt{Value: val, Label: lab})
			}
		}
	}
	return &facts{Tag: strings.ToLower(s("tag")), Type: strings.ToLower(s("type")), Role: s("role"), Name: s("name"),
		Method: strings.ToLower(s("method")), FormAction: s("formAction"), Href: s("href"), Submits: submits,
		EnterSubmits: t("enterSubmits"), InForm: t("inForm"), NewTab: t("newTab"), ScriptSubs: t("scriptSubmits"),
		Group: s("group"), Options: opts, GetURL: s("getURL"), Unlocked: v["locked"] == false}
}

func blockerOf(s *pageState) string {
	switch {
	case s.Captcha:
		return "captcha"
	case s.AntiBot:
		return "anti_bot"
	case s.Duplicate:
		return "duplicate_application"
	case s.Login:
		return "login_required"
	}
	return ""
}

func hostOf(raw string) string {
	_, h, refusal := checkURL(raw)
	if refusal != "" {
		return ""
	}
	return h
}

// canEvaluate reports whether the child browser MCP server offers browser_evaluate, which
// every page script of the guard runs through.
func (b *Bridge) canEvaluate() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, has := b.child["browser_evaluate"]
	return has
}

// evalJSON runs fn in the page through the child's browser_evaluate and returns its JSON
// object value; false when it failed or returned no object.
func (b *Bridge) evalJSON(ctx context.Context, fn string) (map[string]any, bool) {
	v, _, ok := b.evaluate(ctx, map[string]any{"function": fn})
	return v, ok
}

// evalElement runs fn on the element ref through the child's browser_evaluate (label
// names the element for the server, cut to 200 characters) and returns its JSON object
// value with ok. gone is true when the server answered with an error: the ref no longer
// resolves, the page changed. A call that failed is neither ok nor gone.
func (b *Bridge) evalElement(ctx context.Context, fn, ref, label string) (v map[string]any, gone, ok bool) {
	return b.evaluate(ctx, map[string]any{"function": fn, "element": bound(label, 200), b.refName("browser_evaluate"): ref})
}

// evaluate calls browser_evaluate with args; see evalElement.
func (b *Bridge) evaluate(ctx context.Context, args map[string]any) (v map[string]any, gone, ok bool) {
	res, err := b.cfg.Browser.CallTool(ctx, "browser_evaluate", args)
	if err != nil {
		return nil, false, false
	}
	if res == nil || res.IsError {
		return nil, true, false
	}
	v, ok = evaluateResult(textOf(res))
	return v, false, ok
}
