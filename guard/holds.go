package guard

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
// crashed or dropped it), nothing below the page holds the page's requests at the browser,
// so the run pauses (browser_lost) for the owner to see it and then ends blocked, whatever
// the owner answers; the call is not made. nil while the session holds.
func (b *Bridge) browserLost(ctx context.Context, tool string) *mcp.CallToolResult {
	if b.cfg.Holds == nil {
		return nil
	}
	select {
	case <-b.cfg.Holds.Lost():
	default:
		return nil
	}
	b.emit(Event{Type: "browser.blocked", Detail: map[string]any{"reason": "browser_lost", "tool": tool}})
	b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassRead, "decision": "refused", "reason": "browser_lost"}})
	b.pauseOutcome(ctx, PauseRequest{Reason: "browser_lost", Question: "The guard lost its DevTools session with the browser, so it can no longer hold the page's requests. The run cannot go on unprotected and ends here; resume or cancel."})
	b.mu.Lock()
	b.stopped = true
	b.stopNote = "The browser's DevTools session was lost; the run cannot go on unprotected."
	b.blocked = &block{reason: "browser_lost", questions: []string{}}
	b.mu.Unlock()
	return textResult("The browser was lost, so the run is stopped. Stop now.", true)
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
