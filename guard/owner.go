package guard

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The owner's part of a run (issue 19): a consent the owner gives in the browser and the
// guard rechecks, a site the owner admits for the run at an external_redirect pause, a
// sensitive page confirmed before it is opened, the form state checked around every click,
// and the engine.* and source.read events.

// maxConsentPauses bounds the consent pauses for one click: after this many resumes with
// the box still not ticked, the run ends blocked (consent_required).
const maxConsentPauses = 3

// allowsHost reports whether host is one of the application's sites or a site the owner
// admitted for this run (PauseOutcome.AllowSite).
func (b *Bridge) allowsHost(host string) bool {
	if b.app.AllowsHost(host) {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return host != "" && b.extraSites[host]
}

// pathAllowed is Application.PathAllowed for a page of host: a site the owner admitted for
// the run is not under the application's manifest (it lists the application's site), and
// none of its pages is sensitive.
func (b *Bridge) pathAllowed(host, path string) (allowed, sensitive bool) {
	if !b.app.AllowsHost(host) {
		b.mu.Lock()
		extra := b.extraSites[host]
		b.mu.Unlock()
		if extra {
			return true, false
		}
	}
	return b.app.PathAllowed(path)
}

// confirmSensitive asks the owner before a page of the reviewed manifest marked sensitive
// is opened (seed 001: confirmed before the navigation or click that would open it). true:
// confirmed (and remembered for the run, so that landing there does not ask again); false:
// the owner declined and the run is stopped.
func (b *Bridge) confirmSensitive(ctx context.Context, tool string, u *url.URL, host string) bool {
	path := u.EscapedPath()
	b.mu.Lock()
	done := b.sensitiveOK[host+path]
	b.mu.Unlock()
	if done {
		return true
	}
	b.emit(Event{Type: "policy.decision", Domain: host, Detail: map[string]any{"tool": tool, "class": ClassRead, "decision": "paused", "reason": "sensitive_page", "path": bound(path, 200)}})
	if !b.pauseFor(ctx, PauseRequest{Reason: "sensitive_page", Question: "The agent wants to open a page the manifest marks sensitive (" + bound(path, 120) + "): the owner decides whether it may.", URL: traceURL(u.String()), Domain: host}, nil) {
		return false
	}
	b.mu.Lock()
	b.sensitiveOK[host+path] = true
	b.mu.Unlock()
	return true
}

// sensitiveTarget returns the URL a click would open when it is a page of an allowed site
// that the manifest marks sensitive (a link's href, or a GET form's submission URL), else nil.
func (b *Bridge) sensitiveTarget(f *facts) (*url.URL, string) {
	for _, raw := range []string{f.Href, f.GetURL} {
		if raw == "" || strings.HasPrefix(raw, "#") {
			continue
		}
		u, host, refusal := checkURL(raw)
		if refusal != "" || !b.allowsHost(host) {
			continue
		}
		if _, sensitive := b.pathAllowed(host, u.EscapedPath()); sensitive {
			return u, host
		}
	}
	return nil, ""
}

// consentTicked runs fn (consentStateJS or consentTickJS) on the element ref and reports
// whether it is ticked; false when it cannot be read (the page moved, the element is gone).
func (b *Bridge) consentTicked(ctx context.Context, ref, label, fn string) bool {
	if !b.canEvaluate() {
		return false
	}
	v, _, ok := b.evalElement(ctx, fn, ref, firstNonEmpty(label, "consent"))
	if !ok {
		return false
	}
	ticked, _ := v["ticked"].(bool)
	connected, _ := v["connected"].(bool)
	return ticked && connected
}

// consent handles a click on a consent box: the agent may not tick it. The run pauses
// (consent_required) and, once the owner resumes, the guard rechecks the box:
//   - in a browser the owner sees (Config.OwnerBrowser: --headed, --cdp-endpoint) the owner
//     ticks it there; ticked, the run goes on (traced policy.decision allowed, basis
//     owner_consent); still unticked, the run pauses again, up to maxConsentPauses times,
//     then ends blocked (consent_required);
//   - in a browser the owner cannot reach (headless), the resume is the owner's approval:
//     the guard ticks the box for them (basis owner_approved) and checks that it is ticked,
//     else the run ends blocked.
func (b *Bridge) consent(ctx context.Context, tool string, node SnapNode, f *facts) *mcp.CallToolResult {
	label := firstNonEmpty(node.Name, f.Name)
	b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "paused", "reason": "consent_required", "role": node.Role}})
	question := "Agree to: " + bound(label, 200)
	if b.cfg.OwnerBrowser {
		question += " (tick it yourself in the browser, then resume)"
	}
	for i := 1; ; i++ {
		if !b.pauseFor(ctx, PauseRequest{Reason: "consent_required", Question: question}, nil) {
			return textResult("The owner did not handle that agreement. Stop now.", true)
		}
		basis := "owner_consent"
		var ticked bool
		if b.cfg.OwnerBrowser {
			ticked = b.consentTicked(ctx, node.Ref, label, consentStateJS)
		} else {
			basis = "owner_approved"
			ticked = b.consentTicked(ctx, node.Ref, label, consentTickJS)
		}
		if ticked {
			b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "allowed", "reason": "consent_required", "basis": basis, "role": node.Role, "field": bound(label, 200)}})
			return textResult("The owner handled that agreement in the browser and the box is ticked. Do not click it yourself; take a browser_snapshot and continue.", false)
		}
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "paused", "reason": "consent_required", "basis": "still_unticked", "count": i}})
		if !b.cfg.OwnerBrowser || i >= maxConsentPauses {
			b.mu.Lock()
			b.stopped = true
			b.blocked = &block{reason: "consent_required", questions: []string{bound(question, capQuestionChar)}}
			b.stopNote = "The owner resumed but the agreement is still not given (" + bound(label, 120) + ")."
			b.mu.Unlock()
			return textResult("The agreement is still not given after the owner's resume, so the run is stopped. Stop now.", true)
		}
		question = "The box is still not ticked: " + bound(label, 200) + ". Tick it in the browser, then resume (or cancel)."
	}
}

// signIn handles the agent at a credential field: the agent never types a credential. The
// run pauses (login_required). In a browser the owner sees, their resume is rechecked: the
// field must be gone (the page moved on: signed in) or hold a value the owner typed; else
// the run pauses again, up to maxConsentPauses times, then ends blocked (login_required).
// Headless, the owner cannot reach the page, and the resume lets the run go on as it is.
func (b *Bridge) signIn(ctx context.Context, tool string, node SnapNode, f *facts) *mcp.CallToolResult {
	question := "Sign in: " + bound(firstNonEmpty(node.Name, f.Name), 200)
	if b.cfg.OwnerBrowser {
		question += " (sign in yourself in the browser, then resume)"
	}
	for i := 1; ; i++ {
		if !b.pauseFor(ctx, PauseRequest{Reason: "login_required", Question: question}, nil) {
			return textResult("A sign-in needs the owner and was not handled. Stop now.", true)
		}
		if !b.cfg.OwnerBrowser || b.credentialDone(ctx, node.Ref) {
			if b.cfg.OwnerBrowser {
				b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "allowed", "reason": "login_required", "basis": "owner_signed_in"}})
			}
			b.mu.Lock()
			b.refs.invalidate()
			b.mu.Unlock()
			return textResult("The owner handled the sign-in. Take a browser_snapshot and continue.", false)
		}
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "paused", "reason": "login_required", "basis": "still_signed_out", "count": i}})
		if i >= maxConsentPauses {
			b.mu.Lock()
			b.stopped = true
			b.blocked = &block{reason: "login_required", questions: []string{bound(question, capQuestionChar)}}
			b.stopNote = "The owner resumed but the sign-in is still not done."
			b.mu.Unlock()
			return textResult("The sign-in is still not done after the owner's resume, so the run is stopped. Stop now.", true)
		}
		question = "The sign-in field is still empty: " + bound(firstNonEmpty(node.Name, f.Name), 200) + ". Sign in in the browser, then resume (or cancel)."
	}
}

// credentialDone reports whether the credential field ref is gone from the page (an error
// reading it: the page moved on) or holds a value.
func (b *Bridge) credentialDone(ctx context.Context, ref string) bool {
	v, gone, ok := b.evalElement(ctx, credentialStateJS, ref, "sign-in field")
	if gone {
		return true // the ref no longer resolves: the page changed
	}
	if !ok {
		return false
	}
	connected, _ := v["connected"].(bool)
	filled, _ := v["filled"].(bool)
	return !connected || filled
}

// clickSnap runs formSnapClickJS on the click's target; own marks the target as the
// control the click fills (a grounded radio or checkbox). false: the form could not be read.
func (b *Bridge) clickSnap(ctx context.Context, ref, label string, own bool) bool {
	if !b.canEvaluate() {
		return true // nothing to check with (a --browser-mcp server without browser_evaluate)
	}
	// the guard's own word, in the script's text: nothing the page sets can mark a control
	fn := strings.Replace(formSnapClickJS, "__PAB_OWN__", strconv.FormatBool(own), 1)
	v, _, ok := b.evalElement(ctx, fn, ref, firstNonEmpty(label, "control"))
	if ok {
		b.setSnapOrigin(v)
	}
	return ok
}

// setSnapOrigin keeps the document (performance.timeOrigin) a form snapshot was taken in,
// from formSnapJS's or formSnapClickJS's answer v, for formCheck.
func (b *Bridge) setSnapOrigin(v map[string]any) {
	o, _ := v["origin"].(float64)
	b.mu.Lock()
	b.snapOrigin = o
	b.mu.Unlock()
}

// formCheck compares the form with the values taken before a click or key press (clickSnap,
// or the key path's own snapshot): every control the action changed that is not its own
// (clickSnap's own) is put back and traced policy.decision refused fill.unjustified with
// its label. It returns the labels put back (none when the browser has no
// browser_evaluate). When the page removed the snapshot the guard kept in it (the same
// document, by performance.timeOrigin, without it) it says so as the one label formUnchecked,
// traced policy.decision refused form_check_failed: a page that hides what an action
// changed is not taken to have changed nothing.
func (b *Bridge) formCheck(ctx context.Context, tool string) []string {
	if !b.canEvaluate() {
		return nil
	}
	after, ok := b.evalJSON(ctx, formCheckJS)
	b.mu.Lock()
	origin := b.snapOrigin
	b.snapOrigin = 0
	b.mu.Unlock()
	// the snapshot gone from the document it was taken in: the page removed it (a new
	// document, after a navigation, has none and no form of the old page to check)
	if missing, _ := after["missing"].(bool); ok && missing && origin != 0 && after["origin"] == origin {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "refused", "reason": "form_check_failed"}})
		b.mu.Lock()
		b.refs.invalidate()
		b.mu.Unlock()
		return []string{formUnchecked}
	}
	var labels []string
	if list, isList := after["changed"].([]any); ok && isList {
		for _, x := range list {
			if l, isStr := x.(string); isStr {
				labels = append(labels, l)
			}
		}
	}
	for _, l := range labels {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "refused", "reason": "fill.unjustified", "field": l}})
	}
	if len(labels) > 0 {
		b.inspect(ctx) // takes (and traces) the submit lock's refusals the change caused
		b.mu.Lock()
		b.refs.invalidate()
		b.mu.Unlock()
	}
	return labels
}

// formUnchecked is formCheck's one label when the form's values could not be compared.
const formUnchecked = "the page's form (its values could not be checked after the action: the page removed what the guard had kept, or could not be read)"

// clickChecked forwards a click with the form state checked around it (clickSnap, then
// formCheck): a control the click changed that the click does not fill is put back. With
// fill, the result goes through fill (the grounded answer g for the target). The page change
// a click causes is handled after the check (afterClick).
func (b *Bridge) clickChecked(ctx context.Context, tool string, node SnapNode, label string, forward map[string]any, fill *GroundResult, fieldLabel string) *mcp.CallToolResult {
	if !b.clickSnap(ctx, node.Ref, label, fill != nil) {
		return b.refuse(tool, ClassRead, "inspect_failed", "The page's form could not be read, so the click cannot be shown to be safe. Take a browser_snapshot.", "")
	}
	var res *mcp.CallToolResult
	if fill != nil {
		res = b.fillNoAfter(ctx, tool, node.Role, fieldLabel, *fill, forward)
	} else {
		r, msg, ok := b.callBrowser(ctx, tool, forward)
		if !ok {
			return textResult(msg, true)
		}
		res = r
	}
	if res.IsError {
		return res
	}
	if labels := b.formCheck(ctx, tool); len(labels) > 0 {
		return textResult("That click also changed the value of "+bound(strings.Join(labels, "; "), 400)+", which no grounded answer names; the change was undone. Answer each field with its own browser_click, browser_select_option or browser_type and a source_quote. Take a browser_snapshot.", true)
	}
	return b.afterClick(ctx, tool, res)
}

// engine.* events: the agent (the engine) that drives the run, as MCP tells it.

// EngineStarted traces engine.started once, for the first MCP client that initializes a
// session: engine is its clientInfo name (bounded), e.g. "claude-code"; mode is the run's mode.
func (b *Bridge) EngineStarted(engine string) {
	b.mu.Lock()
	first := !b.engineStarted
	b.engineStarted = true
	b.mu.Unlock()
	if !first {
		return
	}
	if strings.TrimSpace(engine) == "" {
		engine = "unknown"
	}
	b.emit(Event{Type: "engine.started", Detail: map[string]any{"engine": bound(engine, 100), "mode": b.app.Mode}})
}

// EngineEnded traces engine.ended once, when the agent's session is over (status: why, e.g.
// "disconnected" when stdin closed, "signal", "error"), with the run's outcome so far in
// kind. Without an EngineStarted before it, it traces nothing.
func (b *Bridge) EngineEnded(status string) {
	b.mu.Lock()
	started, ended := b.engineStarted, b.engineEnded
	if started {
		b.engineEnded = true
	}
	b.mu.Unlock()
	if !started || ended {
		return
	}
	r := b.Result()
	b.emit(Event{Type: "engine.ended", Detail: map[string]any{"status": bound(status, 60), "kind": r.Outcome, "count": r.Filled}})
}

// emitSources traces source.read for each grounding source the application loaded (kind
// profile, answer, material; bytes; path for a file, relative to the application's
// directory) and each approved artifact (kind resume / cover_letter, sha256): what the run
// may draw on, never its text.
func (b *Bridge) emitSources() {
	for _, s := range b.app.SourceFiles {
		d := map[string]any{"kind": s.Kind, "bytes": s.Bytes}
		if s.Path != "" {
			d["path"] = bound(s.Path, 200)
		}
		b.emit(Event{Type: "source.read", Detail: d})
	}
	for _, kind := range []string{"resume", "cover_letter"} {
		if a, ok := b.app.Artifacts[kind]; ok {
			b.emit(Event{Type: "source.read", Detail: map[string]any{"kind": kind, "sha256": a.SHA256, "path": bound(relTo(b.app.Dir, a.Path), 200)}})
		}
	}
}

// listedPaths names the reviewed manifest's paths for a path_not_listed refusal: " (it
// lists /a, /b)", at most 10 paths and 300 bytes; "" without a manifest.
func (b *Bridge) listedPaths() string {
	m := b.app.Manifest
	if m == nil || len(m.Paths) == 0 {
		return ""
	}
	var ps []string
	for i, p := range m.Paths {
		if i == 10 {
			ps = append(ps, "...")
			break
		}
		ps = append(ps, p.Path)
	}
	return " (it lists " + bound(strings.Join(ps, ", "), 300) + ")"
}

// relTo is path relative to dir when it lies below it, else path.
func relTo(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
