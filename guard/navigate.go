package guard

import (
	"context"
	"encoding/json"
	"github.com/pab-dev/pab/guard/netpolicy"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/text/unicode/norm"
)

// Page changes: browser_navigate, back, snapshot and wait_for, the checks on every page
// landed on (site, manifest path, typed data in a URL, blockers, sensitive pages), and the
// typed values handed to the page's submit lock.

func (b *Bridge) navigate(ctx context.Context, raw string) *mcp.CallToolResult {
	u, host, refusal := checkURL(raw)
	if refusal != "" {
		return b.refuse("browser_navigate", ClassRead, "bad_url", refusal, "")
	}
	if b.pageLimitReached() {
		return b.refuse("browser_navigate", ClassRead, "limit_pages", "The run's limit of "+strconv.Itoa(b.app.Limits.Pages)+" pages is reached. Call ready_for_review now.", "")
	}
	if !b.allowsHost(host) {
		return b.refuse("browser_navigate", ClassRead, "external_site", host+" is not one of this application's sites ("+strings.Join(b.app.Sites, ", ")+").", host)
	}
	if b.carriesTyped(u.String()) {
		return b.refuseByGet("browser_navigate", host)
	}
	ok, sensitive := b.pathAllowed(host, u.EscapedPath())
	if !ok && !b.isStartURL(u) {
		return b.refuse("browser_navigate", ClassRead, "path_not_listed", "That page is not in the reviewed site manifest of this application"+b.listedPaths()+".", host)
	}
	if sensitive && !b.confirmSensitive(ctx, "browser_navigate", u, host) {
		return textResult("That page is marked sensitive and the owner did not let the run open it. Stop now.", true)
	}
	b.admit(host)
	res, msg, ok := b.callBrowser(ctx, "browser_navigate", map[string]any{"url": u.String()})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	return b.afterMove(ctx, "browser_navigate", res)
}

// isStartURL reports whether u is the application's start_url (scheme, host and path; the
// query and fragment aside): the run's own start page is never off the manifest.
func (b *Bridge) isStartURL(u *url.URL) bool {
	if b.app.StartURL == "" || u == nil {
		return false
	}
	s, err := url.Parse(b.app.StartURL)
	if err != nil {
		return false
	}
	return strings.EqualFold(s.Scheme, u.Scheme) && strings.EqualFold(s.Host, u.Host) && s.EscapedPath() == u.EscapedPath()
}

// carriesTyped reports whether raw (a URL) sends data of the form by GET: it carries a value
// filled in this run (netpolicy.Carries: after percent- and plus-decoding and Normalize, a
// value of 4 or more characters anywhere in it, a shorter one as a whole query value or path
// segment), or, with Config.Net, it is a POST form's action with that form's field names
// (netpolicy.Decide).
func (b *Bridge) carriesTyped(raw string) bool {
	b.mu.Lock()
	typed := make([]string, 0, len(b.typed))
	for _, t := range b.typed {
		typed = append(typed, Normalize(t))
	}
	b.mu.Unlock()
	if raw == "" {
		return false
	}
	if netpolicy.Carries(raw, typed) {
		return true
	}
	if b.cfg.Net != nil {
		return !netpolicy.Decide(netpolicy.Request{Method: "GET", URL: raw}, b.cfg.Net.Facts(netpolicy.LayerNetwork)).Allow
	}
	return false
}

// canonTyped is the form both the guard and the submit lock hash a typed value in: NFKC,
// lower case, runs of white space one space.
func canonTyped(v string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(norm.NFKC.String(v)), unicode.IsSpace), " ")
}

// typedHashes are the [length, hash] pairs of the run's typed values (and extra) of four or
// more characters for the submit lock: FNV-1a (32 bits) over the code points of canonTyped.
func (b *Bridge) typedHashes(extra string) [][2]uint32 {
	b.mu.Lock()
	vals := append(slices.Clone(b.typed), extra)
	b.mu.Unlock()
	var out [][2]uint32
	seen := map[[2]uint32]bool{}
	for _, v := range vals {
		rs := []rune(canonTyped(v))
		if len(rs) < 4 {
			continue
		}
		h := uint32(0x811c9dc5)
		for _, r := range rs {
			h ^= uint32(r)
			h *= 16777619
		}
		k := [2]uint32{uint32(len(rs)), h}
		if !seen[k] && len(out) < 1000 {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// pushTyped gives the page's submit lock the hashes of the typed values (with extra, a value
// about to be typed), so that the page's own GETs carrying one are refused. Only with the
// lock installed (LockToken) and browser_evaluate available.
func (b *Bridge) pushTyped(ctx context.Context, extra string) {
	if b.cfg.LockToken == "" || !b.canEvaluate() {
		return
	}
	hs := b.typedHashes(extra)
	if len(hs) == 0 {
		return
	}
	list, _ := json.Marshal(hs)
	_, _ = b.cfg.Browser.CallTool(ctx, "browser_evaluate", map[string]any{"function": lockTypedCall(b.cfg.LockToken, list)})
}

// refuseByGet refuses a navigation that would carry typed data to a site (class submit,
// reason submit.by_get): under either mode only the gated submit may send the application.
func (b *Bridge) refuseByGet(tool, host string) *mcp.CallToolResult {
	return b.refuse(tool, ClassSubmit, "submit.by_get", "That URL carries values typed into the form: opening it would send the application by GET. It was not opened. Stop sending form data; call ready_for_review when the form is filled.", host)
}

func (b *Bridge) admit(host string) {
	b.mu.Lock()
	first := !b.admitted[host]
	b.admitted[host] = true
	b.mu.Unlock()
	if first {
		b.emit(Event{Type: "policy.decision", Domain: host, Detail: map[string]any{"class": ClassRead, "decision": "allowed", "basis": "allow_list"}})
	}
}

func (b *Bridge) back(ctx context.Context) *mcp.CallToolResult {
	res, msg, ok := b.callBrowser(ctx, "browser_navigate_back", map[string]any{})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	return b.afterMove(ctx, "browser_navigate_back", res)
}

func (b *Bridge) snapshot(ctx context.Context) *mcp.CallToolResult {
	res, msg, ok := b.callBrowser(ctx, "browser_snapshot", map[string]any{})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	t := textOf(res)
	if snap, ok := ParseSnapshot(t); ok && snap.PageURL != "" {
		// The page may have moved by itself (a timed redirect): re-check where it is.
		b.mu.Lock()
		last := b.lastURL
		b.mu.Unlock()
		if snap.PageURL != last && snap.PageURL != "about:blank" {
			_, host, refusal := checkURL(snap.PageURL)
			if refusal != "" || !b.allowsHost(host) {
				return b.afterMove(ctx, "browser_snapshot", res)
			}
		}
	}
	return b.passOn(res)
}

func (b *Bridge) waitFor(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	fwd := map[string]any{}
	for _, k := range []string{"text", "textGone"} {
		if v, ok := args[k].(string); ok {
			fwd[k] = v
		}
	}
	if v, ok := args["time"].(float64); ok {
		fwd["time"] = math.Max(0, math.Min(v, 30))
	}
	res, msg, ok := b.callBrowser(ctx, "browser_wait_for", fwd)
	if !ok {
		return textResult(msg, true)
	}
	return b.afterClick(ctx, "browser_wait_for", res)
}

// afterMove handles a page change: the landed URL is checked (scheme, site, manifest path);
// leaving is undone (navigate back) and paused or refused; else landed().
func (b *Bridge) afterMove(ctx context.Context, tool string, res *mcp.CallToolResult) *mcp.CallToolResult {
	b.mu.Lock()
	b.refs.invalidate()
	b.mu.Unlock()
	state := b.inspect(ctx)
	if state == nil {
		return b.refuse(tool, ClassRead, "inspect_failed", "The page could not be inspected after it changed, so it cannot be shown to be safe. Take a browser_snapshot.", "")
	}
	if state.URL == "about:blank" {
		// the start of the browser's history (back past the first page): no site, nothing
		// to undo, no redirect
		b.mu.Lock()
		b.lastURL = state.URL
		b.mu.Unlock()
		b.allow(tool, ClassRead, "about_blank")
		return textResult(textOf(res)+"\n(The browser is at about:blank, the start of its history. Navigate to a page of this application's sites.)", res.IsError)
	}
	u, host, refusal := checkURL(state.URL)
	if refusal != "" || !b.allowsHost(host) {
		b.undo(ctx)
		shown := host
		if shown == "" {
			shown = "a non-web page"
		}
		b.emit(Event{Type: "browser.blocked", URL: state.URL, Domain: host, Detail: map[string]any{"reason": "external_redirect", "tool": tool}})
		q := "The page led to " + shown + ", outside this application's sites. It was undone."
		if refusal == "" && host != "" {
			q += " Resume with {\"allow_site\": \"" + host + "\"} to admit it for this run."
		}
		out, resumed := b.pauseOutcome(ctx, PauseRequest{Reason: "external_redirect", Question: q, URL: traceURL(state.URL), Domain: host})
		if !resumed {
			return b.refuse(tool, ClassRead, "external_redirect", "That led to "+shown+", which is not one of this application's sites. It was undone. Stop now.", host)
		}
		b.unblock()
		if refusal == "" && host != "" && out.AllowSite == host {
			// the owner admitted the site for the run: open the page again, checked anew
			b.mu.Lock()
			b.extraSites[host] = true
			b.mu.Unlock()
			b.emit(Event{Type: "policy.decision", URL: traceURL(state.URL), Domain: host, Detail: map[string]any{"tool": tool, "class": ClassRead, "decision": "allowed", "basis": "owner_allowed_site"}})
			if b.carriesTyped(state.URL) {
				// the owner saw the URL without its query: admitting the site is not
				// admitting the typed values it would carry there
				return b.refuseByGet(tool, host)
			}
			res2, msg, ok := b.callBrowser(ctx, "browser_navigate", map[string]any{"url": state.URL})
			if !ok {
				return textResult(msg, true)
			}
			if res2.IsError {
				return b.passOn(res2)
			}
			return b.afterMove(ctx, tool, res2)
		}
		return b.refuse(tool, ClassRead, "external_redirect", "That led to "+shown+", which is not one of this application's sites; it was undone and the owner was told. Take a browser_snapshot and continue on the application's pages.", host)
	}
	if b.carriesTyped(state.URL) {
		// the page (or a script) already sent it: undo, and trace it as the submit it was
		b.undo(ctx)
		b.emit(Event{Type: "browser.blocked", URL: state.URL, Domain: host, Detail: map[string]any{"reason": "submit.by_get", "tool": tool}})
		return b.refuseByGet(tool, host)
	}
	if ok, _ := b.pathAllowed(host, u.EscapedPath()); !ok && !b.isStartURL(u) {
		b.undo(ctx)
		return b.refuse(tool, ClassRead, "path_not_listed", "That page is not in the reviewed site manifest of this application"+b.listedPaths()+"; it was undone. Take a browser_snapshot.", host)
	}
	return b.landed(ctx, tool, res, state)
}

// undo goes back after leaving the allowed pages.
func (b *Bridge) undo(ctx context.Context) {
	_, _, _ = b.callBrowser(ctx, "browser_navigate_back", map[string]any{})
	b.mu.Lock()
	b.refs.invalidate()
	b.mu.Unlock()
	b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": "browser_navigate_back", "class": ClassRead, "decision": "allowed", "basis": "undo"}})
}

// landed counts and traces a page landed on, and pauses for a blocker or a sensitive page.
func (b *Bridge) landed(ctx context.Context, tool string, res *mcp.CallToolResult, state *pageState) *mcp.CallToolResult {
	u, host, _ := checkURL(state.URL)
	b.mu.Lock()
	b.pages++
	b.lastURL = state.URL
	b.mu.Unlock()
	b.admit(host)
	b.emit(Event{Type: "browser.navigated", URL: state.URL, Domain: host, Detail: map[string]any{"tool": tool}})
	b.pushTyped(ctx, "") // a new page's lock starts empty
	if blocker := blockerOf(state); blocker != "" {
		b.emit(Event{Type: "browser.blocked", URL: state.URL, Domain: host, Detail: map[string]any{"reason": blocker}})
		ok := b.pauseFor(ctx, PauseRequest{Reason: blocker, Question: "The page needs a person: " + strings.ReplaceAll(blocker, "_", " ") + ".", URL: traceURL(state.URL), Domain: host}, func() bool {
			after := b.inspect(ctx)
			return after != nil && blockerOf(after) == ""
		})
		if !ok {
			return textResult(host+" needs a person ("+strings.ReplaceAll(blocker, "_", " ")+") and it was not resolved. Do not work around it. Stop now.", true)
		}
		return textResult("Resumed after the owner handled it. Take a browser_snapshot to read the page.", false)
	}
	b.mu.Lock()
	confirmed := b.sensitiveOK[host+u.EscapedPath()]
	b.mu.Unlock()
	if _, sensitive := b.pathAllowed(host, u.EscapedPath()); sensitive && !confirmed {
		b.emit(Event{Type: "policy.decision", Domain: host, Detail: map[string]any{"tool": tool, "class": ClassRead, "decision": "paused", "reason": "sensitive_page"}})
		if !b.pauseFor(ctx, PauseRequest{Reason: "sensitive_page", Question: "The manifest marks this page sensitive: the owner decides whether the run goes on.", URL: traceURL(state.URL), Domain: host}, nil) {
			return textResult("This page is marked sensitive and the owner did not let the run go on. Stop now.", true)
		}
		return textResult("The owner let the run go on from this sensitive page. Take a browser_snapshot.", false)
	}
	return b.passOn(res)
}

// afterClick checks whether an allowed action moved the page; if so it is a page change.
func (b *Bridge) afterClick(ctx context.Context, tool string, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res.IsError {
		return b.passOn(res)
	}
	state := b.inspect(ctx)
	b.mu.Lock()
	last := b.lastURL
	b.mu.Unlock()
	if state == nil {
		b.mu.Lock()
		b.refs.invalidate()
		b.mu.Unlock()
		return textResult(textOf(res)+"\n(The page could not be inspected afterwards; take a browser_snapshot.)", false)
	}
	if state.URL != last {
		return b.afterMove(ctx, tool, res)
	}
	return b.passOn(res)
}
