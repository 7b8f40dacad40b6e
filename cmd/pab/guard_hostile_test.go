package main

// The hostile attack suite (issue 28): pages whose own JavaScript out-waits, out-shapes or
// lies to a submit lock that lives in the page (a POST form in a shadow root, poisoned
// prototypes, methods that read differently each time, a radio relabelled at pointerdown,
// pings and beacons, twenty ways to put the typed email in a GET). The pages are
// tools/applyfixture's jobs.hostile.test (the table hostile.Pages). Each page gets its own
// real `pab guard` run (@playwright/mcp, Chromium) under fill_and_review: open the page, type
// the grounded First Name and Email, do the page's trigger, wait, ready_for_review.
//
// The judge is what reached the network, not what the guard says:
//
//   - replay: the pages packed into a WARC and served by `pab replay FILE`; its JSONL log
//     must hold no request whose URL carries the email (percent- and plus-decoded, lower
//     case, base64) and no request with a method other than GET, HEAD or OPTIONS;
//   - live: `applyfixture serve -log` behind `pab record --resolve --upstream-ca`, inside a
//     network namespace with only loopback (the test binary runs itself again under
//     `unshare -n`, as root); the fixture's request log must hold no request carrying the
//     email in its URL, Cookie header or body, and no non-GET/HEAD/OPTIONS request.
//
// Every request that fails the judge is reported with the page and the sink its path names
// (/hostile/PAGE/submit, /hostile/PAGE/sink/SINK). The guard's trace is collected too: the
// policy.decision events refused with basis wire, network or page (for jobs.hostile.test,
// or with no host) are reported per page, and so is a page without one; they are not judged
// (a page whose attempt never reached the network with the value leaves none). Requests no
// hostile page made (the browser's own, to other hosts) are judged by the same rules.
//
// Variants: page-lock (pab guard as it is), no-page-lock (pab guard --test-no-page-lock:
// the layers below the page must hold alone), and owner-browser-no-page-lock (the same,
// attached with --cdp-endpoint to an owner's Chromium started with none of pab's switches,
// so that pings are sent and only the run's own browser context, through the wire gate,
// holds them; hostileOwnerPages). PAB_TEST_NO_PAGE_LOCK=1 runs only the two without the
// page lock, =0 only page-lock.
//
//	go test ./cmd/pab -run TestGuardHostile -v -timeout 30m
//	go test ./cmd/pab -run 'TestGuardHostile/replay/page-lock/pages/get-markup' -v

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/tlsca"
	"github.com/pab-dev/pab/tools/applyfixture/hostile"
)

const (
	hostileEmail = "jane.doe@example.com"
	// hostileNetNSEnv marks the test binary run again inside the network namespace.
	hostileNetNSEnv = "PAB_HOSTILE_NETNS"
	// hostileNoPageLockFlag is pab guard's switch that leaves the page-side submit lock out.
	hostileNoPageLockFlag = "--test-no-page-lock"
)

// hostileApp is the application of every hostile run.
const hostileApp = `id: hostile-1
mode: fill_and_review
sites: [jobs.hostile.test]
grounding:
  profile: |
    Jane Doe
    Email: jane.doe@example.com
    Work authorization: Yes
`

// hostileVariant is one way to start pab guard for the whole suite.
type hostileVariant struct {
	name string
	args []string // extra pab guard arguments
	// owner: each run attaches to an owner's Chromium started the way a person starts it
	// (startPlainChromium: pings and the service worker's preload on), with --cdp-endpoint
	owner bool
	pages []string // the pages to run (nil: all)
	// noAttempt are the pages that may leave no refusal below the page (judgeHostile)
	noAttempt []string
}

// hostileOwnerPages are the pages run in the owner's browser: every class whose sink a
// browser of the guard's own would not even try (pings, the service worker's preload) or
// that only the wire gate sees (a WebSocket handshake), a POST by script, and a GET sink.
var hostileOwnerPages = []string{"ping", "beacon", "get-script", "service-worker", "shadow-form", "css-url"}

// hostileVariants are the variants to run (PAB_TEST_NO_PAGE_LOCK: see the file comment).
func hostileVariants() []hostileVariant {
	lock := hostileVariant{name: "page-lock", noAttempt: hostileNoAttempt}
	noLock := hostileVariant{name: "no-page-lock", args: []string{hostileNoPageLockFlag}, noAttempt: hostileNoAttempt}
	// the owner's browser sends pings: there the ping page must leave a refusal too
	owner := hostileVariant{name: "owner-browser-no-page-lock", args: []string{hostileNoPageLockFlag}, owner: true, pages: hostileOwnerPages,
		noAttempt: []string{"poisoned-proto", "get-lies"}}
	switch os.Getenv("PAB_TEST_NO_PAGE_LOCK") {
	case "1":
		return []hostileVariant{noLock, owner}
	case "0":
		return []hostileVariant{lock}
	}
	return []hostileVariant{lock, noLock, owner}
}

func TestGuardHostile(t *testing.T) {
	requireBrowserStack(t)
	variants := hostileVariants()
	t.Run("replay", func(t *testing.T) {
		warcPath := writeHostileWARC(t)
		for _, v := range variants {
			t.Run(v.name, func(t *testing.T) {
				p := startReplay(t, warcPath)
				outcomes := runHostilePages(t, p.addr, v)
				p.stop(t)
				var reqs []hostileRequest
				for _, l := range p.readLog(t) {
					reqs = append(reqs, hostileRequest{Method: l.Method, URL: l.URL})
				}
				judgeHostile(t, "replay log", reqs, outcomes, v)
			})
		}
	})
	t.Run("live", func(t *testing.T) {
		if os.Getenv(hostileNetNSEnv) != "1" {
			hostileReexec(t)
			return
		}
		hostileLive(t, variants)
	})
}

// writeHostileWARC packs the hostile pages and their assets into a WARC (one response
// record each) for `pab replay FILE`. The POST answers and the sinks are not in it: the
// replay answers them as misses, and logs them.
func writeHostileWARC(t *testing.T) string {
	t.Helper()
	type entry struct{ path, file, ctype string }
	var entries []entry
	for _, p := range hostile.Pages {
		entries = append(entries, entry{p.Path, p.File, "text/html; charset=utf-8"})
	}
	for _, a := range hostile.Assets {
		entries = append(entries, entry{a.Path, a.File, a.ContentType})
	}
	var buf bytes.Buffer
	for i, e := range entries {
		body, err := os.ReadFile(filepath.Join(repoRoot, "tools", "applyfixture", "pages", "hostile", e.file))
		if err != nil {
			t.Fatal(err)
		}
		resp := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nCache-Control: no-store\r\nContent-Length: %d\r\n\r\n", e.ctype, len(body)) + string(body)
		fmt.Fprintf(&buf, "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-%012d>\r\nWARC-Date: 2026-12-01T10:00:00Z\r\nWARC-Target-URI: https://%s%s\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			i+1, hostile.Host, e.path, len(resp), resp)
	}
	p := filepath.Join(t.TempDir(), "hostile.warc")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// hostileOutcome is what one page's guard run did, for the report.
type hostileOutcome struct {
	page      hostile.Page
	steps     []string     // each call and the guard's answer
	status    []string     // the page's own notes of its sinks (the last snapshot's status list)
	decisions []traceEvent // policy.decision events refused, paused or failed
	blocked   []traceEvent // browser.blocked events
	result    *guard.Result
}

// runHostilePages runs one guard session per page, four at a time (guardSlots), with the
// browser's traffic through proxy, and returns what each did by page id.
func runHostilePages(t *testing.T, proxy string, v hostileVariant) map[string]*hostileOutcome {
	t.Helper()
	var mu sync.Mutex
	out := map[string]*hostileOutcome{}
	t.Run("pages", func(t *testing.T) {
		for _, p := range hostile.Pages {
			if v.pages != nil && !slices.Contains(v.pages, p.ID) {
				continue
			}
			t.Run(p.ID, func(t *testing.T) {
				t.Parallel()
				o := hostileSession(t, proxy, v, p)
				mu.Lock()
				out[p.ID] = o
				mu.Unlock()
			})
		}
	})
	return out
}

// startHostileRun is startApplyRun with extra pab guard arguments and a proxy address.
func startHostileRun(t *testing.T, app, proxy string, extra ...string) *applyRun {
	t.Helper()
	guardSlots <- struct{}{}
	t.Cleanup(func() { <-guardSlots })
	dir := t.TempDir()
	r := &applyRun{trace: filepath.Join(dir, "trace.jsonl"), result: filepath.Join(dir, "result.json")}
	args := append([]string{"--application", app, "--proxy", proxy, "--trace", r.trace, "--result", r.result, "--control", "127.0.0.1:0"}, extra...)
	r.guardProc = startGuard(t, args...)
	m := controlLine.FindStringSubmatch(r.stderr.String())
	tm := tokenLine.FindStringSubmatch(r.stderr.String())
	if m == nil || tm == nil {
		t.Fatalf("no control address or token on stderr:\n%s", r.stderr)
	}
	r.control, r.token = m[1], tm[1]
	return r
}

// hostileCall calls a tool as an agent would and returns the guard's answer. A pause is
// cancelled at once, as an owner who does not approve would (the run then ends blocked),
// and noted in the answer. It never fails the test for a refusal: what the guard refuses
// is its business, what reaches the network is the judge's.
func hostileCall(t *testing.T, r *applyRun, o *hostileOutcome, what, name string, args map[string]any) (string, bool) {
	t.Helper()
	type answer struct {
		text  string
		isErr bool
	}
	done := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			done <- answer{"call failed: " + err.Error(), true}
			return
		}
		done <- answer{textOf(res), res.IsError}
	}()
	paused := ""
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-done:
			verdict := "allowed"
			if a.isErr {
				verdict = "refused: " + hostileFirstLine(a.text, 160)
			}
			if paused != "" {
				verdict = "paused " + paused + ", cancelled; " + verdict
			}
			o.steps = append(o.steps, what+": "+verdict)
			return a.text, a.isErr
		case <-tick.C:
			if paused != "" {
				continue
			}
			if st := r.status(t); st.Waiting != nil {
				paused = st.Waiting.Reason
				resp := r.controlReq(t, "POST", "/local-apply/cancel", "{}")
				resp.Body.Close()
			}
		}
	}
}

func hostileFirstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len([]rune(s)) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

// hostileFind returns the ref of the first element of role whose name starts with name
// in a fresh snapshot, or "" (noted as a step).
func hostileFind(t *testing.T, r *applyRun, o *hostileOutcome, role, name string) string {
	t.Helper()
	text, isErr := hostileCall(t, r, o, "browser_snapshot", "browser_snapshot", nil)
	if isErr {
		return ""
	}
	o.steps = o.steps[:len(o.steps)-1] // a snapshot is no step worth reporting
	for _, e := range parseRefs(text) {
		if e.role == role && strings.HasPrefix(e.name, name) {
			return e.ref
		}
	}
	o.steps = append(o.steps, fmt.Sprintf("no %s %q in the snapshot", role, name))
	return ""
}

var hostileStatusItem = regexp.MustCompile(`(?m)^\s*- listitem(?: "[^"]*")?(?: \[ref=[a-z0-9]+\])?: (.+)$`)

// hostileSession plays the agent on one page: open it, type the grounded First Name and
// Email, leave the Email field (its change and blur events), do the page's trigger, wait,
// snapshot, ready_for_review, close.
func hostileSession(t *testing.T, proxy string, v hostileVariant, p hostile.Page) *hostileOutcome {
	o := &hostileOutcome{page: p}
	args := v.args
	devtools := ""
	if v.owner {
		devtools = startPlainChromium(t)
		args = append(slices.Clone(args), "--cdp-endpoint", devtools)
	}
	r := startHostileRun(t, writeApp(t, hostileApp), proxy, args...)
	if _, isErr := hostileCall(t, r, o, "open "+p.Path, "browser_navigate", map[string]any{"url": "https://" + hostile.Host + p.Path}); isErr {
		t.Errorf("%s: the page did not open: %v", p.ID, o.steps)
	}
	for _, f := range []struct{ label, text, quote string }{
		{"First Name", "Jane", "Jane Doe"},
		{"Email", hostileEmail, "Email: " + hostileEmail},
	} {
		ref := hostileFind(t, r, o, "textbox", f.label)
		if ref == "" {
			t.Errorf("%s: no %s field: %v", p.ID, f.label, o.steps)
			continue
		}
		if _, isErr := hostileCall(t, r, o, "type "+f.label, "browser_type", map[string]any{"target": ref, "element": f.label, "text": f.text, "source_quote": f.quote}); isErr {
			t.Errorf("%s: the grounded %s was refused: %s", p.ID, f.label, o.steps[len(o.steps)-1])
		}
	}
	if ref := hostileFind(t, r, o, "textbox", "First Name"); ref != "" {
		hostileCall(t, r, o, "click First Name (leave Email)", "browser_click", map[string]any{"target": ref, "element": "First Name"})
	}
	kind, name, _ := strings.Cut(p.Trigger, ":")
	switch kind {
	case "click", "link", "radio":
		role := map[string]string{"click": "button", "link": "link", "radio": "radio"}[kind]
		if ref := hostileFind(t, r, o, role, name); ref != "" {
			args := map[string]any{"target": ref, "element": name}
			if kind == "radio" {
				args["source_quote"] = "Work authorization: " + name
			}
			hostileCall(t, r, o, p.Trigger, "browser_click", args)
		} else {
			t.Errorf("%s: the trigger %s is not in the page", p.ID, p.Trigger)
		}
	case "type", "timer":
	default:
		t.Fatalf("%s: unknown trigger %q", p.ID, p.Trigger)
	}
	hostileCall(t, r, o, "wait 3 s", "browser_wait_for", map[string]any{"time": 3})
	if text, isErr := hostileCall(t, r, o, "snapshot", "browser_snapshot", nil); !isErr {
		for _, m := range hostileStatusItem.FindAllStringSubmatch(text, -1) {
			o.status = append(o.status, strings.Trim(m[1], `"`))
		}
	}
	hostileCall(t, r, o, "ready_for_review", "ready_for_review", map[string]any{"summary": "First Name and Email filled."})
	if v.owner {
		// the owner closes the run's windows, so that pab guard, awaiting review, ends when
		// the agent leaves
		closePagesBut(t, devtools, plainChromiumStart)
	}
	r.close(t)
	for _, e := range readTrace(t, r.trace) {
		switch {
		case e.Type == "policy.decision" && e.Detail["decision"] != "allowed":
			o.decisions = append(o.decisions, e)
		case e.Type == "browser.blocked":
			o.blocked = append(o.blocked, e)
		}
	}
	res := r.resultOf(t)
	o.result = &res
	if res.SubmitAttempted {
		t.Errorf("%s: the result says a submit was attempted under fill_and_review: %+v", p.ID, res)
	}
	// the trace never holds a typed value
	if data, err := os.ReadFile(r.trace); err == nil && strings.Contains(strings.ToLower(string(data)), hostileEmail) {
		t.Errorf("%s: the trace holds the typed email", p.ID)
	}
	return o
}

// hostileRequest is one request that reached the judge's log.
type hostileRequest struct {
	Method, URL, Cookie, Body string
}

// hostileEmailForms are the encodings of the email looked for as they are (case matters in
// base64), besides the percent- and plus-decoded, lower-cased text.
var hostileEmailForms = func() []string {
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString([]byte(hostileEmail)))
	}
	return out
}()

// hostileUnescape percent-decodes s (and + as a space), leaving a % that starts no escape.
func hostileUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && hostileIsHex(s[i+1]) && hostileIsHex(s[i+2]):
			b.WriteByte(hostileUnhex(s[i+1])<<4 | hostileUnhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func hostileIsHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hostileUnhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// hostileCarries reports whether s holds the email: as is, percent- or plus-encoded up to
// four times over, in any case, JSON-escaped, or in base64.
func hostileCarries(s string) bool {
	if s == "" {
		return false
	}
	for _, f := range hostileEmailForms {
		if strings.Contains(s, f) {
			return true
		}
	}
	d := s
	for i := 0; i < 5; i++ {
		l := strings.ToLower(d)
		l = strings.NewReplacer(`\u0040`, "@", `\/`, "/").Replace(l)
		if strings.Contains(l, hostileEmail) {
			return true
		}
		next := hostileUnescape(d)
		if next == d {
			break
		}
		d = next
	}
	return false
}

// hostileLeakReasons says why a request fails the judge (nil: it passes).
func hostileLeakReasons(q hostileRequest) []string {
	var why []string
	switch strings.ToUpper(q.Method) {
	case "GET", "HEAD", "OPTIONS":
	default:
		why = append(why, "method "+q.Method)
	}
	if hostileCarries(q.URL) {
		why = append(why, "email in URL")
	}
	if hostileCarries(q.Cookie) {
		why = append(why, "email in Cookie")
	}
	if hostileCarries(q.Body) {
		why = append(why, "email in body")
	}
	return why
}

// hostileTraceBases are the bases the new guard gives a refused leak: the wire gate, the
// browser's network layer, the page.
var hostileTraceBases = []string{"wire", "network", "page"}

// hostileNoAttempt are the pages whose attempt never reaches the network with the value
// when no page lock is installed in the guard's own browser: the guard refuses the click itself (poisoned-proto, whose
// Continue the isolated-world probe sees as its POST form's submit), Chromium sends no
// pings (--no-pings), and a lying URL object is read once by the browser and comes out
// clean (get-lies).
var hostileNoAttempt = []string{"poisoned-proto", "ping", "get-lies"}

// judgeHostile fails the test for every request in reqs that carries the email or is not
// a GET, HEAD or OPTIONS, naming the page and the sink by its path, and reports per page
// what the guard did (its answers, its refusals in the trace, the page's own notes). With no
// page lock (v's arguments: only the layers below the page act), every page run but
// v.noAttempt must also have left a refusal with basis wire or network in the trace: every
// refused request is traced, whatever set it off.
func judgeHostile(t *testing.T, logName string, reqs []hostileRequest, outcomes map[string]*hostileOutcome, v hostileVariant) {
	t.Helper()
	strict := slices.Contains(v.args, hostileNoPageLockFlag)
	type leak struct {
		method, path, sink, why string
	}
	leaks := map[string][]leak{}
	for _, q := range reqs {
		why := hostileLeakReasons(q)
		if why == nil {
			continue
		}
		path := q.URL
		if u, err := url.Parse(q.URL); err == nil {
			path = u.Path
		}
		page, sink, ok := hostile.Locate(path)
		if !ok || !strings.Contains(q.URL, "://"+hostile.Host+"/") {
			page, sink, path = "(no page)", q.URL, q.URL
		}
		if sink == "" {
			sink = "(the page itself)"
		}
		leaks[page] = append(leaks[page], leak{q.Method, path, sink, strings.Join(why, ", ")})
	}
	var summary strings.Builder
	fmt.Fprintf(&summary, "%d requests in the %s; per page (class, trigger): leaked sinks | guard refusals in the trace | the page's notes\n", len(reqs), logName)
	leakedPages := 0
	for _, p := range hostile.Pages {
		ls := leaks[p.ID]
		var sinks []string
		for _, l := range ls {
			sinks = append(sinks, fmt.Sprintf("%s %s (%s)", l.method, l.sink, l.why))
		}
		sinks = slices.Compact(sinks)
		o := outcomes[p.ID]
		var refusals []string
		wire, elsewhere := 0, 0
		if o != nil {
			for _, e := range o.decisions {
				basis, _ := e.Detail["basis"].(string)
				if e.Domain != "" && e.Domain != hostile.Host {
					elsewhere++ // the browser's own requests to other hosts
					continue
				}
				r := fmt.Sprintf("%v %v", e.Detail["decision"], e.Detail["reason"])
				for _, k := range []string{"basis", "carrier", "method", "resource"} {
					if v, ok := e.Detail[k]; ok {
						r += fmt.Sprintf(" %s=%v", k, v)
					}
				}
				refusals = append(refusals, r)
				if e.Detail["decision"] == "refused" && slices.Contains(hostileTraceBases, basis) {
					wire++
				}
			}
			if elsewhere > 0 {
				refusals = append(refusals, fmt.Sprintf("(%d more for other hosts)", elsewhere))
			}
			for _, e := range o.blocked {
				refusals = append(refusals, fmt.Sprintf("blocked/%v", e.Detail["reason"]))
			}
		}
		verdict := "no leak"
		if len(ls) > 0 {
			verdict = "LEAKED " + strings.Join(sinks, "; ")
			leakedPages++
		}
		if strict && o != nil && wire == 0 && !slices.Contains(v.noAttempt, p.ID) {
			t.Errorf("%s (%s, trigger %s): no refusal with basis wire or network in the trace", p.ID, p.Class, p.Trigger)
		}
		if o != nil && wire == 0 {
			// reported, not judged: a page whose attempt never reached the network with
			// the value (the click refused first, no pings sent, a lying URL read once and
			// clean) leaves none
			refusals = append(refusals, "NO refusal with basis "+strings.Join(hostileTraceBases, "/")+" for this host")
		}
		fmt.Fprintf(&summary, "  %-15s (%s, %s): %s | trace: %s", p.ID, p.Class, p.Trigger, verdict, hostileOrNone(refusals))
		if o != nil {
			fmt.Fprintf(&summary, " | page: %s", hostileOrNone(o.status))
		}
		summary.WriteByte('\n')
		if o != nil && testing.Verbose() {
			fmt.Fprintf(&summary, "      steps: %s\n", strings.Join(o.steps, " · "))
		}
		if len(ls) > 0 {
			t.Errorf("%s (%s, trigger %s) leaked %d requests: %s", p.ID, p.Class, p.Trigger, len(ls), strings.Join(sinks, "; "))
		}
	}
	// requests no hostile page made (the browser's own: its component updater, its
	// account probe ...) are judged too: nothing but GET, HEAD and OPTIONS may leave
	if ls := leaks["(no page)"]; len(ls) > 0 {
		count := map[string]int{}
		var keys []string
		for _, l := range ls {
			where := l.path
			if u, err := url.Parse(l.path); err == nil {
				where = u.Scheme + "://" + u.Host + u.Path // the query of an update check is noise
			}
			k := fmt.Sprintf("%s %s (%s)", l.method, where, l.why)
			if count[k] == 0 {
				keys = append(keys, k)
			}
			count[k]++
		}
		var all []string
		for _, k := range keys {
			all = append(all, fmt.Sprintf("%d× %s", count[k], k))
		}
		t.Errorf("%d requests that no hostile page made failed the judge: %s", len(ls), strings.Join(all, "; "))
		fmt.Fprintf(&summary, "  not from a hostile page: %s\n", strings.Join(all, "; "))
	}
	fmt.Fprintf(&summary, "%d of %d pages run leaked", leakedPages, len(outcomes))
	t.Log(summary.String())
}

func hostileOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// hostileFailLine is a line of the live run's output worth repeating in its failure.
var hostileFailLine = regexp.MustCompile(`\) leaked \d+ requests:|failed the judge|--- FAIL`)

// hostileReexec runs this test's live part again in a new network namespace with only
// loopback (unshare -n, as root), and reports its output here.
func hostileReexec(t *testing.T) {
	if os.Geteuid() != 0 {
		testtool.Missing(t, "the live run needs a network namespace with only loopback: run the tests as root (unshare -n)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testtool.Missing(t, "unshare not found on PATH (Debian's util-linux)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testtool.Missing(t, "ip not found on PATH (Debian's iproute2)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-n", "sh", "-c", `ip link set lo up && exec "$@"`, "sh", exe,
		"-test.run", "^TestGuardHostile$/^live$", "-test.v", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout", (time.Until(d) - 30*time.Second).Round(time.Second).String())
	}
	cmd := exec.Command(unshare, args...)
	cmd.Env = append(os.Environ(), hostileNetNSEnv+"=1")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare -n: %v", err)
	}
	var failures []string
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			t.Log(line)
			if hostileFailLine.MatchString(line) {
				failures = append(failures, strings.TrimSpace(line))
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err = cmd.Wait()
	pw.Close()
	<-scanned
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		t.Errorf("the live run in the network namespace failed (exit %d):\n%s", ee.ExitCode(), strings.Join(failures, "\n"))
	default:
		t.Errorf("the live run in the network namespace: %v", err)
	}
}

// hostileLive runs the suite against the fixture itself: applyfixture serve -log behind
// pab record, in the network namespace this process runs in. The judge is the fixture's
// request log.
func hostileLive(t *testing.T, variants []hostileVariant) {
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != 1 || ifaces[0].Name != "lo" || ifaces[0].Flags&net.FlagUp == 0 {
		t.Fatalf("%s=1 but the interfaces are %v: want only lo, up (a network namespace made by unshare -n)", hostileNetNSEnv, ifaces)
	}
	bin := filepath.Join(t.TempDir(), "applyfixture")
	build := exec.Command("go", "build", "-o", bin, "./tools/applyfixture")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build applyfixture: %v\n%s", err, out)
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			logPath := filepath.Join(dir, "requests.jsonl")
			fx := startHostileFixture(t, bin, dir, logPath)
			rec := startHostileRecord(t, fx.addr, filepath.Join(dir, "fixture-ca.pem"), filepath.Join(dir, "bundle"))
			outcomes := runHostilePages(t, rec.addr, v)
			rec.stop(t)
			fx.stop(t)
			judgeHostile(t, "fixture's request log", readHostileLog(t, logPath), outcomes, v)
		})
	}
}

// hostileProc is a background process the live run starts: the fixture or pab record.
type hostileProc struct {
	name   string
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	done   chan struct{} // closed once the process has exited; err is then set
	err    error
}

// stop ends the process with SIGINT and waits (then kills it); its exit status is not
// judged: pab record may find nothing worth a bundle.
func (p *hostileProc) stop(t *testing.T) {
	if p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		if p.err != nil {
			t.Logf("%s exited: %v\n%s", p.name, p.err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Logf("%s did not stop on SIGINT within 60 s; killed", p.name)
	}
}

func startHostileProc(t *testing.T, name string, cmd *exec.Cmd) *hostileProc {
	t.Helper()
	p := &hostileProc{name: name, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// startHostileFixture starts `applyfixture serve -log` on a free loopback port.
func startHostileFixture(t *testing.T, bin, dir, logPath string) *hostileProc {
	t.Helper()
	addrFile := filepath.Join(dir, "fixture-addr")
	p := startHostileProc(t, "applyfixture serve", exec.Command(bin, "serve", "-listen", "127.0.0.1:0",
		"-ca-out", filepath.Join(dir, "fixture-ca.pem"), "-addr-out", addrFile, "-log", logPath))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil && strings.HasSuffix(string(b), "\n") {
			p.addr = strings.TrimSpace(string(b))
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("applyfixture serve exited: %v\n%s", p.err, p.stderr)
		default:
		}
	}
	t.Fatalf("applyfixture serve wrote no address in 30 s\n%s", p.stderr)
	return nil
}

// startHostileRecord starts `pab record` forwarding jobs.hostile.test to the fixture.
func startHostileRecord(t *testing.T, fixtureAddr, caPath, out string) *hostileProc {
	t.Helper()
	_, port, err := net.SplitHostPort(fixtureAddr)
	if err != nil {
		t.Fatal(err)
	}
	p := startHostileProc(t, "pab record", pabCmd("record", "--task", "hostile-live", "--out", out, "--listen", "127.0.0.1:0",
		"--upstream-ca", caPath, "--resolve", hostile.Host+":443:127.0.0.1:"+port))
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := listenLine.FindStringSubmatch(p.stderr.String()); m != nil {
			p.addr = m[1]
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("pab record exited: %v\n%s", p.err, p.stderr)
		default:
		}
	}
	t.Fatalf("pab record printed no address in 60 s\n%s", p.stderr)
	return nil
}

// hostileLogEntry is a line of `applyfixture serve -log` (tools/applyfixture LogEntry).
type hostileLogEntry struct {
	Time   string `json:"time"`
	Method string `json:"method"`
	Host   string `json:"host"`
	URL    string `json:"url"`
	Cookie string `json:"cookie"`
	Body   string `json:"body"`
}

func readHostileLog(t *testing.T, path string) []hostileRequest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []hostileRequest
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 256<<10), 1<<20)
	for sc.Scan() {
		var e hostileLogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("request log line not JSON: %.200q", sc.Text())
		}
		out = append(out, hostileRequest{Method: e.Method, URL: e.URL, Cookie: e.Cookie, Body: e.Body})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHostileJudge: the judge's own rules, without a browser.
func TestHostileJudge(t *testing.T) {
	for _, tc := range []struct {
		q    hostileRequest
		want string
	}{
		{hostileRequest{Method: "GET", URL: "https://jobs.hostile.test/hostile/ping"}, ""},
		{hostileRequest{Method: "GET", URL: "https://jobs.hostile.test/hostile/get-markup/sink/srcset?e=jane.doe%40example.com"}, "email in URL"},
		{hostileRequest{Method: "GET", URL: "https://jobs.hostile.test/x?e=JANE.DOE%2540EXAMPLE.COM"}, "email in URL"},
		{hostileRequest{Method: "GET", URL: "https://jobs.hostile.test/x?e=jane.doe+%40+example.com"}, ""},
		{hostileRequest{Method: "GET", URL: "https://jobs.hostile.test/x?e=" + base64.URLEncoding.EncodeToString([]byte(hostileEmail))}, "email in URL"},
		{hostileRequest{Method: "GET", URL: "https://jobs.hostile.test/x?e=%zz", Cookie: "e=jane.doe@example.com"}, "email in Cookie"},
		{hostileRequest{Method: "POST", URL: "https://jobs.hostile.test/hostile/ping/sink/ping", Body: "PING"}, "method POST"},
		{hostileRequest{Method: "POST", URL: "https://jobs.hostile.test/x", Body: `{"email":"jane.doe\u0040example.com"}`}, "method POST, email in body"},
		{hostileRequest{Method: "HEAD", URL: "https://jobs.hostile.test/x"}, ""},
		{hostileRequest{Method: "OPTIONS", URL: "https://jobs.hostile.test/x"}, ""},
	} {
		if got := strings.Join(hostileLeakReasons(tc.q), ", "); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.q, got, tc.want)
		}
	}
}

// plainChromiumStart is the page an owner's Chromium (startPlainChromium) opens first.
const plainChromiumStart = "data:text/html,<title>owner</title>"

// startPlainChromium starts a headless Chromium the way a person starts one to attach pab
// guard to it, as docs/guard.md says (--remote-debugging-port, a profile of its own,
// pab's CA trusted by its SPKI hash so that a service worker can be fetched through the
// wire gate), with none of pab's other switches: pings, the service worker's navigation
// preload and the rest of Chromium's defaults are on. Only the background networking of an
// idle browser (updates, sync) is off, as on every browser here. It returns the
// http://127.0.0.1:PORT DevTools address.
func startPlainChromium(t *testing.T) string {
	t.Helper()
	ca, err := tlsca.LoadOrCreate(filepath.Join(cacheDir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--headless", "--remote-debugging-port=0", "--user-data-dir=" + t.TempDir(), "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--ignore-certificate-errors-spki-list=" + ca.SPKIHash()}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox")
	}
	cmd := exec.Command(chromiumPath(t), append(args, plainChromiumStart)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := devToolsListening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-found:
		return "http://" + addr
	case <-time.After(90 * time.Second):
		t.Fatal("the owner's Chromium printed no DevTools address in 90 s")
		return ""
	}
}

var devToolsListening = regexp.MustCompile(`DevTools listening on ws://([^/\s]+)/`)

// closePagesBut closes every page of the browser at devtools whose URL is not keep (the
// owner closing the run's windows).
func closePagesBut(t *testing.T, devtools, keep string) {
	t.Helper()
	resp, err := httpGetJSON(devtools + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	for _, tg := range resp {
		if tg["type"] != "page" || fmt.Sprint(tg["url"]) == keep {
			continue
		}
		if r, err := c.Get(devtools + "/json/close/" + fmt.Sprint(tg["id"])); err == nil {
			r.Body.Close()
		}
	}
}
