package guard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A consent box in a browser the owner sees: the owner's resume with the box still unticked
// pauses again; once the owner has ticked it in the browser, the recheck lets the run go on.
// Never ticked: after three pauses the run ends blocked. Headless: the resume is the
// owner's approval and the guard ticks the box itself.
func TestBridgeConsentRechecked(t *testing.T) {
	h := newGHarness(t, "fill_and_review", "")
	h.b.cfg.OwnerBrowser = true
	h.open(t)
	h.p.onPause = func(n int) {
		if n == 2 { // the owner ticks it in the browser during the second pause
			h.fb.mu.Lock()
			h.fb.ticked = map[string]bool{"e9": true}
			h.fb.mu.Unlock()
		}
	}
	r := h.call(t, "browser_click", map[string]any{"target": "e9", "source_quote": "Jane Doe"})
	if r.IsError || len(h.p.reqs) != 2 || h.fb.called("browser_click", "e9") != 0 {
		t.Fatalf("consent: %s, %d pauses, %d clicks", textOf(r), len(h.p.reqs), h.fb.called("browser_click", "e9"))
	}
	if !strings.Contains(h.p.reqs[0].Question, "tick it yourself") || !strings.Contains(h.p.reqs[1].Question, "still not ticked") {
		t.Errorf("questions: %+v", h.p.reqs)
	}
	if len(h.events("policy.decision", "basis", "still_unticked")) != 1 || len(h.events("policy.decision", "decision", "allowed", "basis", "owner_consent")) != 1 {
		t.Fatalf("trace: %s", h.trace)
	}
	if h.b.Done() {
		t.Fatal("run stopped after the owner ticked the box")
	}

	// never ticked: blocked after maxConsentPauses
	h = newGHarness(t, "fill_and_review", "")
	h.b.cfg.OwnerBrowser = true
	h.open(t)
	r = h.call(t, "browser_click", map[string]any{"target": "e9"})
	if !r.IsError || len(h.p.reqs) != maxConsentPauses || !h.b.Done() {
		t.Fatalf("unticked: %s, %d pauses, done=%v", textOf(r), len(h.p.reqs), h.b.Done())
	}
	if res := mustValid(t, h.b); res.Outcome != "blocked" || res.BlockReason != "consent_required" {
		t.Fatalf("result %+v", res)
	}

	// headless: the guard ticks it on the owner's approval
	h = newGHarness(t, "fill_and_review", "")
	h.open(t)
	r = h.call(t, "browser_click", map[string]any{"target": "e9"})
	if r.IsError || len(h.p.reqs) != 1 || !h.fb.ticked["e9"] || len(h.events("policy.decision", "basis", "owner_approved")) != 1 {
		t.Fatalf("headless consent: %s ticked=%v trace %s", textOf(r), h.fb.ticked, h.trace)
	}
	// cancelled: nothing ticked, blocked
	h = newGHarness(t, "fill_and_review", "")
	h.p.resume = false
	h.open(t)
	if r := h.call(t, "browser_click", map[string]any{"target": "e9"}); !r.IsError || h.fb.ticked["e9"] {
		t.Fatalf("cancelled consent: %s", textOf(r))
	}
}

// At an external_redirect pause the owner admits the site (PauseOutcome.AllowSite): the
// guard opens the page again, checks it as any page, and the site stays allowed for the
// run. Without allow_site the page stays undone.
func TestBridgeAllowSite(t *testing.T) {
	h := newGHarness(t, "fill_and_review", "manifest:\n  reviewed: true\n  restrict_paths: true\n  paths:\n    - {path: \"/axon/jobs/:id\"}\n")
	h.p.allowSite = "evil.example"
	h.open(t)
	r := h.call(t, "browser_click", map[string]any{"target": "e13"})
	if r.IsError || h.fb.cur != "https://evil.example/x" {
		t.Fatalf("allow_site: %s cur=%s", textOf(r), h.fb.cur)
	}
	if len(h.events("policy.decision", "basis", "owner_allowed_site")) != 1 || len(h.events("browser.blocked", "reason", "external_redirect")) != 1 {
		t.Fatalf("trace %s", h.trace)
	}
	nav := h.events("browser.navigated")
	if len(nav) != 2 || nav[1].Domain != "evil.example" {
		t.Fatalf("navigations %+v", nav)
	}
	// the admitted site stays open for the run, outside the application's manifest
	if r := h.call(t, "browser_navigate", map[string]any{"url": "https://evil.example/other"}); r.IsError {
		t.Fatalf("admitted site refused: %s", textOf(r))
	}
	if r := h.call(t, "browser_navigate", map[string]any{"url": "https://another.example/"}); !r.IsError {
		t.Fatal("a site nobody admitted was opened")
	}
	// an unlisted path of the application's own site names the reviewed paths
	r = h.call(t, "browser_navigate", map[string]any{"url": "https://job-boards.greenhouse.io/other"})
	if !r.IsError || !strings.Contains(textOf(r), "(it lists /axon/jobs/:id)") {
		t.Fatalf("unlisted path: %s", textOf(r))
	}
}

// A sensitive page of the reviewed manifest is confirmed before the navigation or the click
// that would open it: the browser has not opened it when the owner is asked; declined, it
// is never opened; confirmed, it opens once, without a second pause on landing.
func TestBridgeSensitiveConfirmedBefore(t *testing.T) {
	const manifest = "manifest:\n  reviewed: true\n  paths:\n    - {path: \"/axon/jobs/:id/confirmation\", sensitive: true}\n"
	conf := formURL + "/confirmation"
	for _, resume := range []bool{false, true} {
		h := newGHarness(t, "fill_and_review", manifest)
		h.p.resume = resume
		var at []string
		h.p.onPause = func(int) {
			h.fb.mu.Lock()
			at = append(at, h.fb.cur)
			h.fb.mu.Unlock()
		}
		h.open(t)
		r := h.call(t, "browser_navigate", map[string]any{"url": conf})
		if len(at) != 1 || at[0] != formURL || h.p.reqs[0].Reason != "sensitive_page" {
			t.Fatalf("resume=%v: pauses at %v (%+v); want one, on the form page", resume, at, h.p.reqs)
		}
		if !resume {
			if !r.IsError || h.fb.cur != formURL || !h.b.Done() {
				t.Fatalf("declined: %s cur=%s", textOf(r), h.fb.cur)
			}
			continue
		}
		if r.IsError || h.fb.cur != conf || len(h.p.reqs) != 1 {
			t.Fatalf("confirmed: %s cur=%s pauses=%d", textOf(r), h.fb.cur, len(h.p.reqs))
		}
		if len(h.events("policy.decision", "reason", "sensitive_page", "tool", "browser_navigate", "path", "/axon/jobs/1/confirmation")) != 1 {
			t.Fatalf("trace %s", h.trace)
		}
	}

	// a link to it: asked before the click
	h := newGHarness(t, "fill_and_review", manifest)
	h.p.resume = false
	pg := h.fb.pages[formURL]
	pg.snapshot += "\n  - link \"See confirmation\" [ref=e16]:\n    - /url: " + conf
	pg.facts["e16"] = map[string]any{"tag": "a", "name": "See confirmation", "submits": false, "href": conf}
	pg.clickTo["e16"] = conf
	h.open(t)
	r := h.call(t, "browser_click", map[string]any{"target": "e16"})
	if !r.IsError || h.fb.called("browser_click", "e16") != 0 || len(h.p.reqs) != 1 || h.p.reqs[0].Reason != "sensitive_page" {
		t.Fatalf("sensitive link: %s clicks=%d pauses=%+v", textOf(r), h.fb.called("browser_click", "e16"), h.p.reqs)
	}
}

// The form is checked around every click: a control the click changed that no grounded fill
// names (a button's script ticking the consent box) is put back and traced fill.unjustified
// with its label; a grounded radio click may change its own group, and nothing else.
func TestBridgeClickFormState(t *testing.T) {
	h := newGHarness(t, "fill_and_review", "")
	pg := h.fb.pages[formURL]
	pg.snapshot += "\n  - button \"Autofill with Greenhouse\" [ref=e17]"
	pg.facts["e17"] = map[string]any{"tag": "button", "type": "button", "name": "Autofill with Greenhouse", "submits": false, "inForm": false}
	pg.sideFx = map[string][]string{"e17": {"I agree to the privacy policy"}, "e10": {"Years of experience"}}
	h.open(t)
	r := h.call(t, "browser_click", map[string]any{"target": "e17"})
	if !r.IsError || !strings.Contains(textOf(r), "undone") || len(h.events("policy.decision", "reason", "fill.unjustified", "field", "I agree to the privacy policy", "tool", "browser_click")) != 1 {
		t.Fatalf("button side effect: %s\n%s", textOf(r), h.trace)
	}
	h.call(t, "browser_snapshot", nil) // the guard made the agent's refs stale
	r = h.call(t, "browser_click", map[string]any{"target": "e10", "source_quote": "No"})
	if !r.IsError || len(h.events("field.filled", "role", "radio")) != 1 || len(h.events("policy.decision", "reason", "fill.unjustified", "field", "Years of experience")) != 1 {
		t.Fatalf("radio side effect: %s\n%s", textOf(r), h.trace)
	}
	// the snapshot before the radio's click marks the radio (and its group) as its own
	var own, other int
	for _, c := range h.fb.calls {
		fn, _ := c.args["function"].(string)
		if c.name == "browser_evaluate" && strings.Contains(fn, "__pabFormSnap") && strings.Contains(fn, "own.add(el)") {
			switch {
			case strings.Contains(fn, "if (true && el)"):
				own++
			case strings.Contains(fn, "if (false && el)"): // never a page global the page could set
				other++
			}
		}
	}
	if own != 1 || other != 1 {
		t.Fatalf("form snapshots before clicks: %d own, %d other; want 1 and 1", own, other)
	}
	// a click that changes nothing else passes
	pg.sideFx = nil
	h.call(t, "browser_snapshot", nil)
	if r := h.call(t, "browser_click", map[string]any{"target": "e17"}); r.IsError {
		t.Fatalf("clean click: %s", textOf(r))
	}
	// the snapshot is not the page's to drop: a page that removes it has its click refused,
	// not taken to have changed nothing (review)
	h.fb.snapGone = true
	h.call(t, "browser_snapshot", nil)
	if r := h.call(t, "browser_click", map[string]any{"target": "e17"}); !r.IsError || len(h.events("policy.decision", "reason", "form_check_failed", "tool", "browser_click")) != 1 {
		t.Fatalf("click after the page dropped the snapshot: %s\n%s", textOf(r), h.trace)
	}
}

// engine.started (once, with the MCP client's name) and engine.ended (once, with the
// outcome), and source.read for every grounding source and artifact the application loaded.
func TestBridgeEngineAndSourceEvents(t *testing.T) {
	h := newGHarness(t, "fill_and_review", "")
	if ev := h.events("source.read", "kind", "profile"); len(ev) != 1 || ev[0].Detail["bytes"] != float64(len("Jane Doe, jane.doe@example.com")) {
		t.Fatalf("profile source.read: %+v\n%s", ev, h.trace)
	}
	if len(h.events("source.read", "kind", "answer")) != 1 || len(h.events("source.read", "kind", "resume", "path", "resume.pdf")) != 1 {
		t.Fatalf("source.read: %s", h.trace)
	}
	if strings.Contains(h.trace.String(), "jane.doe@example.com") {
		t.Fatal("a source's text is in the trace")
	}
	h.b.EngineEnded("early") // before any engine: nothing
	h.b.EngineStarted("claude-code")
	h.b.EngineStarted("claude-code")
	h.open(t)
	h.call(t, "ready_for_review", map[string]any{"summary": "done"})
	h.b.EngineEnded("disconnected")
	h.b.EngineEnded("disconnected")
	if ev := h.events("engine.started", "engine", "claude-code", "mode", "fill_and_review"); len(ev) != 1 {
		t.Fatalf("engine.started: %s", h.trace)
	}
	if ev := h.events("engine.ended"); len(ev) != 1 || ev[0].Detail["status"] != "disconnected" || ev[0].Detail["kind"] != "awaiting_review" {
		t.Fatalf("engine.ended: %+v", ev)
	}
}

// POST /local-apply/resume's allow_site is accepted only at an external_redirect pause and
// only for the host that pause names (400 otherwise, the pause goes on); POST
// /local-apply/close closes Closed.
func TestControlAllowSiteAndClose(t *testing.T) {
	c, base := startControl(t)
	if code, _ := do(t, "POST", base+"/local-apply/resume", `{"allow_site": "sso.example"}`); code != http.StatusConflict {
		t.Errorf("allow_site without a pause: %d, want 409", code)
	}
	ch := pauseAsync(context.Background(), c, PauseRequest{Reason: "captcha", Domain: "jobs.example"})
	waitPaused(t, c)
	if code, m := do(t, "POST", base+"/local-apply/resume", `{"allow_site": "jobs.example"}`); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "external_redirect") {
		t.Errorf("allow_site at a captcha pause: %d %v", code, m)
	}
	do(t, "POST", base+"/local-apply/cancel", "")
	outcome(t, ch)
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "external_redirect", Domain: "sso.example"})
	waitPaused(t, c)
	if code, m := do(t, "POST", base+"/local-apply/resume", `{"allow_site": "evil.example"}`); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "not the site this pause is about") {
		t.Errorf("allow_site of another host: %d %v", code, m)
	}
	if c.Waiting() == nil {
		t.Fatal("a refused allow_site ended the pause")
	}
	if code, _ := do(t, "POST", base+"/local-apply/resume", `{"allow_site": "SSO.example"}`); code != 200 {
		t.Errorf("allow_site: %d", code)
	}
	if o := outcome(t, ch); !o.Resumed || o.AllowSite != "sso.example" {
		t.Errorf("outcome %+v", o)
	}
	select {
	case <-c.Closed():
		t.Fatal("closed before the owner said so")
	default:
	}
	if code, m := do(t, "POST", base+"/local-apply/close", ""); code != 200 || m["closing"] != true {
		t.Errorf("close: %d %v", code, m)
	}
	select {
	case <-c.Closed():
	case <-time.After(5 * time.Second):
		t.Fatal("Closed not closed after POST /local-apply/close")
	}
	if code, _ := do(t, "POST", base+"/close", ""); code != 200 {
		t.Errorf("second close (alias): %d", code)
	}
}

// A page that runs no submit lock (a tab of the owner's browser open before the guard
// installed it) gets no click while a lock is expected; without a lock token the probe's
// answer does not matter.
func TestBridgeLockMissing(t *testing.T) {
	for _, token := range []string{"0123abcd", ""} {
		h := newGHarness(t, "fill_and_review", "")
		h.b.cfg.LockToken = token
		h.fb.pages[formURL].facts["e11"]["locked"] = false
		h.fb.pages[formURL].facts["e11"]["type"] = "button"
		h.fb.pages[formURL].facts["e11"]["submits"] = false
		h.open(t)
		r := h.call(t, "browser_click", map[string]any{"target": "e11"})
		refused := len(h.events("policy.decision", "reason", "lock_missing")) == 1
		if token != "" && (!r.IsError || !refused || h.fb.called("browser_click", "e11") != 0) {
			t.Fatalf("no lock: %s", textOf(r))
		}
		if token == "" && (r.IsError || refused) {
			t.Fatalf("no token: %s", textOf(r))
		}
	}
}

// A sign-in field in a browser the owner sees: the owner's resume with the field still empty
// pauses again; once the owner has typed into it, the run goes on (owner_signed_in). The
// agent never types a credential.
func TestBridgeSignInRechecked(t *testing.T) {
	h := newGHarness(t, "fill_and_review", "")
	h.b.cfg.OwnerBrowser = true
	h.open(t)
	h.p.onPause = func(n int) {
		if n == 2 {
			h.fb.mu.Lock()
			h.fb.credFilled = true
			h.fb.mu.Unlock()
		}
	}
	r := h.call(t, "browser_type", map[string]any{"target": "e15", "text": "Jane", "source_quote": "Jane Doe"})
	if r.IsError || len(h.p.reqs) != 2 || h.fb.called("browser_type", "e15") != 0 {
		t.Fatalf("sign-in: %s, %d pauses", textOf(r), len(h.p.reqs))
	}
	if len(h.events("policy.decision", "basis", "still_signed_out")) != 1 || len(h.events("policy.decision", "basis", "owner_signed_in")) != 1 {
		t.Fatalf("trace %s", h.trace)
	}
	// never signed in: blocked after three pauses
	h = newGHarness(t, "fill_and_review", "")
	h.b.cfg.OwnerBrowser = true
	h.open(t)
	if r := h.call(t, "browser_type", map[string]any{"target": "e15", "text": "x", "source_quote": "Jane Doe"}); !r.IsError || len(h.p.reqs) != maxConsentPauses {
		t.Fatalf("never signed in: %s, %d pauses", textOf(r), len(h.p.reqs))
	}
	if res := mustValid(t, h.b); res.Outcome != "blocked" || res.BlockReason != "login_required" {
		t.Fatalf("result %+v", res)
	}
}
