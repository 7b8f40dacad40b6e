package guard

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/guard/devtools"
	"github.com/pab-dev/pab/guard/netpolicy"
)

// What the MCP bridge tells the layers below the page (Config.Net, Config.Holds): the values
// about to be typed, the forms of the pages landed on, and whether the browser is still held.
// The decisions themselves are guard/netpolicy's; the holds are guard/devtools' and
// guard/gate's.

// holdTyped adds a value about to be typed to the request policy, so that neither the
// browser's network layer nor the wire lets a request carrying it leave.
func (b *Bridge) holdTyped(v string) {
	if b.cfg.Net != nil {
		b.cfg.Net.AddTyped(v)
	}
}

// readForms reads the forms of every frame of the browser in the guard's isolated world
// (formsJS) and gives the POST ones to the request policy: a GET to such a form's action
// carrying its field names is then its submission, whoever wrote the values.
func (b *Bridge) readForms(ctx context.Context) {
	if b.cfg.Net == nil || b.cfg.Holds == nil {
		return
	}
	vals, err := b.cfg.Holds.Evaluate(ctx, formsJS)
	if err != nil {
		return
	}
	for _, v := range vals {
		var forms []struct {
			Action string   `json:"action"`
			Method string   `json:"method"`
			Fields []string `json:"fields"`
		}
		if json.Unmarshal(v.Value, &forms) != nil {
			continue
		}
		out := make([]netpolicy.Form, 0, len(forms))
		for _, f := range forms {
			out = append(out, netpolicy.Form{Action: f.Action, Method: f.Method, Fields: f.Fields})
		}
		b.cfg.Net.AddForms(out)
	}
}

// browserLost: once the guard's DevTools session with the browser is gone (the browser
// crashed or dropped it: browser_lost), or, in the owner's browser (Config.OwnerContext),
// once the run's pages are not in the context the session holds (browser_not_held), nothing
// below the page holds the page's requests at the browser, so the run pauses for the owner
// to see it and then ends blocked, whatever the owner answers; the call is not made. nil
// while the browser is held.
func (b *Bridge) browserLost(ctx context.Context, tool string) *mcp.CallToolResult {
	if b.cfg.Holds == nil {
		return nil
	}
	reason, question, note := "", "", ""
	select {
	case <-b.cfg.Holds.Lost():
		reason = "browser_lost"
		question = "The guard lost its DevTools session with the browser, so it can no longer hold the page's requests. The run cannot go on unprotected and ends here; resume or cancel."
		note = "The browser's DevTools session was lost; the run cannot go on unprotected."
	default:
		b.mu.Lock()
		answered := b.answered
		b.mu.Unlock()
		if !b.cfg.OwnerContext || !answered || b.cfg.Holds.HeldPages() > 0 {
			return nil
		}
		reason = "browser_not_held"
		question = "The run's page is not in the browser context the guard holds (the browser MCP server used another context, or the run's window was closed), so the guard cannot hold its requests. The run cannot go on unprotected and ends here; resume or cancel."
		note = "The run's page is not in the browser context the guard holds; the run cannot go on unprotected."
	}
	b.emit(Event{Type: "browser.blocked", Detail: map[string]any{"reason": reason, "tool": tool}})
	b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassRead, "decision": "refused", "reason": reason}})
	b.pauseOutcome(ctx, PauseRequest{Reason: reason, Question: question})
	b.mu.Lock()
	b.stopped = true
	b.stopNote = note
	b.blocked = &block{reason: reason, questions: []string{}}
	b.mu.Unlock()
	return textResult("The browser is no longer held by the guard, so the run is stopped. Stop now.", true)
}

// refusedBelowPage traces one request a layer below the page refused (netpolicy's
// OnRefuse): policy.decision refused, class submit, its reason (submit.blocked or
// submit.by_get), basis (network or wire) and carrier, the method and the request's kind;
// never its URL beyond the host, which may carry the value. At most maxBelowPageEvents are
// written one by one; the rest are counted (belowPageDropped) and written once at the end.
func (t *belowPageTrace) refused(r netpolicy.Refusal) {
	t.mu.Lock()
	t.n++
	over := t.n > maxBelowPageEvents
	t.mu.Unlock()
	if over {
		return
	}
	d := map[string]any{"class": ClassSubmit, "decision": "refused", "reason": r.Verdict.Reason, "basis": r.Layer,
		"carrier": r.Verdict.Carrier, "method": bound(r.Method, 20)}
	if r.Kind != "" {
		d["resource"] = bound(r.Kind, 40)
	}
	if r.Navigation {
		d["navigation"] = true
	}
	if r.WebSocket {
		d["websocket"] = true
	}
	t.emit(Event{Type: "policy.decision", Domain: bound(r.Host, 253), Detail: d})
}

// maxBelowPageEvents bounds the refusals below the page traced one by one (a page that
// floods requests cannot flood the trace).
const maxBelowPageEvents = 2000

// belowPageTrace traces the refusals of the layers below the page (refused); safe for
// concurrent use, since both layers decide on goroutines of their own.
type belowPageTrace struct {
	mu   sync.Mutex
	n    int
	emit func(Event)
}

// close writes one policy.decision with the count of the refusals past maxBelowPageEvents.
func (t *belowPageTrace) close() {
	t.mu.Lock()
	n := t.n - maxBelowPageEvents
	t.mu.Unlock()
	if n > 0 {
		t.emit(Event{Type: "policy.decision", Detail: map[string]any{"class": ClassSubmit, "decision": "refused", "reason": "below_page_refusals_not_listed", "count": n}})
	}
}

// actedControl is the control the last probe read through the isolated world (probeHeld):
// its handle there and what it was when the decision was made.
type actedControl struct {
	h      devtools.Handle
	before map[string]any
}

// markJS marks the element a ref names, in the page's world (the only world that knows
// Playwright's refs), with the attribute "@ATTR@"; probeHeld then takes the element into the
// isolated world and the mark off at once.
const markJS = `(el) => { el.setAttribute("@ATTR@", ""); return { marked: true }; }`

// probeHeld reads a control's facts (probeElementJS) in the guard's isolated world, where
// the page's prototypes, getters and globals are not the probe's: the page's world only
// marks the element with a random attribute, which the isolated world finds and removes
// (devtools.Session.FindTagged). The control is kept (actedControl) so that recheckActed can
// read it again after the action. false: it could not be read.
func (b *Bridge) probeHeld(ctx context.Context, ref, label string) (map[string]any, bool) {
	attr := "data-pab-" + NewLockToken()[:24]
	if _, _, ok := b.evalElement(ctx, strings.Replace(markJS, "@ATTR@", attr, 1), ref, label); !ok {
		return nil, false
	}
	h, err := b.cfg.Holds.FindTagged(ctx, attr)
	if err != nil {
		return nil, false
	}
	raw, err := b.cfg.Holds.CallOn(ctx, h, probeElementJS)
	var v map[string]any
	if err != nil || json.Unmarshal(raw, &v) != nil || v == nil {
		b.cfg.Holds.Release(h)
		return nil, false
	}
	v["locked"] = true // the page-side lock is not what holds the page (Config.Holds is)
	b.mu.Lock()
	old := b.acted
	b.acted = &actedControl{h: h, before: v}
	b.mu.Unlock()
	if old != nil {
		b.cfg.Holds.Release(old.h)
	}
	return v, true
}

// putBackJS sets a control's checked state and value back to what they were, with the
// input and change events a person's change would fire; in the isolated world.
const putBackJS = `(el, st) => {
  if (typeof el.checked === "boolean") el.checked = !!st.checked;
  if (typeof el.value === "string" && el.type !== "file" && typeof st.value === "string") el.value = st.value;
  for (const t of ["input", "change"]) el.dispatchEvent(new Event(t, { bubbles: true }));
  return { done: true };
}`

// recheckActed reads the control of the last probe again (in the isolated world) after a
// fill of it (a click on a radio or checkbox, browser_type, browser_select_option): the
// decision was made for what it was then. When the page changed it as the action landed
// (its label shares no word with the one decided on, or its role, type or form method
// differs: a "Yes" turned into a privacy consent at pointerdown, a field moved into a POST
// form), its checked state and value are put back, the change is traced (policy.decision
// refused control_changed, with both labels, never values), and the call is refused; a
// control that now reads as a consent pauses first (consent_required), since only the
// owner may agree. nil when nothing changed, or there is nothing to check (no held browser,
// or the control left the page).
func (b *Bridge) recheckActed(ctx context.Context, tool string) *mcp.CallToolResult {
	b.mu.Lock()
	a := b.acted
	b.mu.Unlock()
	if b.cfg.Holds == nil || a == nil {
		return nil
	}
	raw, err := b.cfg.Holds.CallOn(ctx, a.h, probeElementJS)
	var now map[string]any
	if err != nil || json.Unmarshal(raw, &now) != nil || now == nil || now["connected"] == false {
		return nil
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	was, is := str(a.before, "name"), str(now, "name")
	changed := !sameLabel(was, is)
	for _, k := range []string{"tag", "type", "role", "method"} {
		if str(a.before, k) != str(now, k) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	_, _ = b.cfg.Holds.CallOn(ctx, a.h, putBackJS, map[string]any{"checked": a.before["checked"], "value": a.before["value"]})
	b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "refused", "reason": "control_changed",
		"field": boundChars(is, 300), "was": boundChars(was, 300), "basis": "reread"}})
	msg := "The page changed that control as the action landed (it was \"" + bound(was, 120) + "\", it is now \"" + bound(is, 120) + "\"); the change was undone. Take a fresh browser_snapshot."
	if isConsentLabel(is) {
		if _, ok := b.pauseOutcome(ctx, PauseRequest{Reason: "consent_required", Question: "The page turned the control the agent answered (\"" + bound(was, 100) + "\") into \"" + bound(is, 120) + "\" as it was clicked; the tick was undone. Only you can agree: tick it yourself if you agree, then resume."}); !ok {
			return textResult(msg+" The owner ended the run. Stop now.", true)
		}
	}
	return textResult(msg, true)
}

// sameLabel: two labels of one control are the same label when either is empty or they
// share a word (letters and digits, after Normalize): a page's own re-rendering ("First
// Name" and "First Name *") is no change; "Yes" becoming "I agree to the privacy policy" is.
func sameLabel(a, b string) bool {
	wa, wb := labelWords(a), labelWords(b)
	if len(wa) == 0 || len(wb) == 0 {
		return true
	}
	for w := range wa {
		if wb[w] {
			return true
		}
	}
	return false
}

// labelWords are the words of a label (runs of letters and digits, after Normalize).
func labelWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(Normalize(s), func(r rune) bool { return !isWordRune(r) }) {
		out[w] = true
	}
	return out
}
