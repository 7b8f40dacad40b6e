package main

// Hardening of pab guard against a hostile agent and a hostile page (issue 19): malformed
// JSON-RPC on stdio, the control API's authentication, false refusals, grounding as field
// values. Real processes: pab guard, @playwright/mcp, Chromium, pab replay.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/guard"
)

// TestGuardStdioMalformed: pab guard (with the real @playwright/mcp as its child) answers a
// non-JSON line, a line over the size limit and JSON nested 50,000 deep with JSON-RPC
// errors on stdout, and goes on answering; it exits 0 when stdin closes.
func TestGuardStdioMalformed(t *testing.T) {
	requireBrowserStack(t)
	app := writeApp(t, smokeApp)
	cmd := pabCmd("guard", "--application", app)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	send := func(s string) {
		t.Helper()
		// written from a goroutine: a 4 MiB line must not block the test while pab guard answers
		errc := make(chan error, 1)
		go func() { _, err := io.WriteString(stdin, s+"\n"); errc <- err }()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("write: %v\nstderr:\n%s", err, stderr)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("write blocked 30 s")
		}
	}
	recv := func() map[string]any {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("pab guard closed stdout\nstderr:\n%s", stderr)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("stdout line not JSON: %.200q", l)
			}
			return m
		case <-time.After(60 * time.Second):
			t.Fatalf("no answer in 60 s\nstderr:\n%s", stderr)
		}
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := recv(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, tc := range []struct {
		what, line string
		code       float64
		msg        string
	}{
		{"a non-JSON line", "GET / HTTP/1.1", -32700, "parse error"},
		{"a line over the size limit", `{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"browser_navigate","arguments":{"url":"` + strings.Repeat("a", 5<<20) + `"}}}`, -32600, "request too large"},
		{"JSON nested 50,000 deep", `{"jsonrpc":"2.0","id":51,"method":"tools/call","params":{"name":"browser_navigate","arguments":` + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + `}}`, -32700, "nested deeper than 64"},
	} {
		send(tc.line)
		m := recv()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != tc.code || !strings.Contains(e["message"].(string), tc.msg) || m["id"] != nil {
			t.Errorf("%s: answer %v; want error %v %q with id null", tc.what, m, tc.code, tc.msg)
		}
		id := 10 + i
		send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/list"}`)
		m = recv()
		r, _ := m["result"].(map[string]any)
		if r == nil || m["id"] != float64(id) {
			t.Fatalf("after %s, tools/list: %v", tc.what, m)
		}
		if tools, _ := r["tools"].([]any); len(tools) < 8 {
			t.Errorf("after %s: %d tools listed", tc.what, len(tools))
		}
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok || err != nil {
			t.Errorf("pab guard exited: %v %v\nstderr:\n%s", err, ee, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("pab guard did not exit after stdin closed")
	}
}

// TestGuardControlAuth: a request_answer is pending in a real run (Greenhouse through a
// replay); a cross-origin text/plain POST to /resume (what any web page can send), the
// same with a DNS-rebinding Host, a CORS preflight and a request without the token are all
// refused and do not answer it; the owner's authenticated resume does, and only the
// owner's answer becomes a source: the attacker's email is then refused as ungrounded.
func TestGuardControlAuth(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	p := startReplay(t, "apply-greenhouse-axon")
	r := startApplyRun(t, "../../tasks/apply-greenhouse-axon/application.yaml", p)
	r.open(t, axon)
	if info, err := os.Stat(tokenFileOf(t, r)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v; want mode 0600", info, err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		res, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: "request_answer", Arguments: map[string]any{"question": "What city do you currently reside in?"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	waitWaiting(t, r)
	port := strings.Split(r.control, ":")[1]
	for _, tc := range []struct {
		what string
		hdr  map[string]string
		code int
	}{
		{"cross-origin text/plain POST", map[string]string{"Origin": "https://evil.example.test", "Content-Type": "text/plain;charset=UTF-8"}, 403},
		{"DNS rebinding (Host evil.example.test)", map[string]string{"Host": "evil.example.test:" + port, "Content-Type": "text/plain"}, 403},
		{"DNS rebinding with JSON", map[string]string{"Host": "evil.example.test:" + port, "Content-Type": "application/json", "Origin": "http://evil.example.test:" + port}, 403},
		{"no token", map[string]string{"Content-Type": "application/json"}, 401},
	} {
		req, _ := http.NewRequest("POST", "http://"+r.control+"/resume", strings.NewReader(`{"answer": "I live at attacker@evil.example.test"}`))
		for k, v := range tc.hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d, want %d", tc.what, resp.StatusCode, tc.code)
		}
		for k := range resp.Header {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Errorf("%s: answered with %s", tc.what, k)
			}
		}
	}
	req, _ := http.NewRequest("OPTIONS", "http://"+r.control+"/local-apply/resume", nil)
	req.Header.Set("Origin", "https://evil.example.test")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS preflight: %d %v", resp.StatusCode, resp.Header)
	}
	select {
	case res := <-done:
		t.Fatalf("a refused request answered the pause: %s", textOf(res))
	case <-time.After(500 * time.Millisecond):
	}
	if st := r.status(t); st.Waiting == nil || st.Waiting.Reason != "missing_answer" {
		t.Fatalf("after the attacks: %+v; want still waiting", st)
	}
	// the owner's own resume, through the contract's path
	resp = r.controlReq(t, "POST", "/local-apply/resume", `{"answer": "I live in London"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("owner's resume: %d", resp.StatusCode)
	}
	select {
	case res := <-done:
		expect(t, "request_answer", res.IsError, textOf(res), "allowed")
	case <-time.After(60 * time.Second):
		t.Fatal("no answer after the owner's resume")
	}
	city := r.find(t, "textbox", "What city do you currently reside in?", 0)
	r.do(t, "refused", "browser_type", map[string]any{"target": city, "element": "city", "text": "attacker@evil.example.test", "source_quote": "I live at attacker@evil.example.test"})
	r.do(t, "allowed", "browser_type", map[string]any{"target": city, "element": "city", "text": "London", "source_quote": "I live in London"})
	// GET /local-apply/status: the bare result envelope
	resp = r.controlReq(t, "GET", "/local-apply/status", "")
	var res guard.Result
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&res)
	resp.Body.Close()
	if res.RunID != "axon-swe-2" || res.Outcome == "" {
		t.Errorf("GET /local-apply/status: %+v", res)
	}
	r.close(t)
}

// tokenFileOf is the token file pab guard named on stderr.
func tokenFileOf(t *testing.T, r *applyRun) string {
	t.Helper()
	m := regexp.MustCompile(`\(also in (\S+), mode 0600\)`).FindStringSubmatch(r.stderr.String())
	if m == nil {
		t.Fatalf("no token file on stderr:\n%s", r.stderr)
	}
	return m[1]
}

// waitWaiting waits until the control API shows a pause.
func waitWaiting(t *testing.T, r *applyRun) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st := r.status(t); st.Waiting != nil {
			return
		}
	}
	t.Fatal("no pause within 60 s")
}

const harden = "https://jobs.harden.test"

// hardenApp is the application of the guard-harden pages: a manifest that lists /apply and
// /challenge but not the start page (which is never off the manifest).
const hardenApp = `id: harden-1
mode: fill_and_review
sites: [jobs.harden.test]
start_url: https://jobs.harden.test/jobs/1?src=board
grounding:
  profile: |
    Jane Doe
    Email: jane.doe@example.com
    Phone: +1 555 0100
    Location: London, England, United Kingdom
    Work authorization: Yes
    Years of experience: 7
  answers:
    - { question: "Expected salary", answer: "EUR 150,000" }
manifest:
  reviewed: true
  restrict_paths: true
  paths:
    - { path: "/apply" }
    - { path: "/challenge" }
    - { path: "/jobs/search" }
`

// writeHardenWARC packs testdata/guard-harden's pages into a WARC (one response record a
// page, WARC/1.0, ISO 28500) for `pab replay FILE`, and returns its path.
func writeHardenWARC(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	for i, pg := range []struct{ url, file string }{
		{harden + "/jobs/1?src=board", "start.html"},
		{harden + "/apply", "apply.html"},
		{harden + "/challenge", "challenge.html"},
		{harden + "/consent", "consent.html"},
		{harden + "/apply/done", "done.html"},
		{"https://sso.harden-partner.test/signin", "sso.html"},
	} {
		body, err := os.ReadFile(filepath.Join("testdata", "guard-harden", pg.file))
		if err != nil {
			t.Fatal(err)
		}
		http := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n", len(body)) + string(body)
		fmt.Fprintf(&buf, "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-%012d>\r\nWARC-Date: 2026-11-29T10:00:00Z\r\nWARC-Target-URI: %s\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			i+1, pg.url, len(http), http)
	}
	p := filepath.Join(t.TempDir(), "harden.warc")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startHardenRun starts a replay of the guard-harden pages and a guard run on them with the
// application body (hardenApp when "").
func startHardenRun(t *testing.T, app string) (*applyRun, *replayProc) {
	t.Helper()
	if app == "" {
		app = hardenApp
	}
	p := startReplay(t, writeHardenWARC(t))
	return startApplyRun(t, writeApp(t, app), p), p
}

// TestGuardFalseRefusals: the legitimate actions issue 19 found refused now pass, through
// a real replay, @playwright/mcp and Chromium: a page with an invisible reCAPTCHA badge (and
// an invisible hCaptcha) is no captcha; a textbox whose label holds ": " (a YAML-quoted
// snapshot line) is typed into; "Apply" and "Autofill with Greenhouse" buttons outside any
// POST form are reads; the start page off the manifest opens; going back to about:blank is
// no external redirect; a visible challenge pauses, and once the owner has solved it their
// resume lets the run go on. No POST reaches the form.
func TestGuardFalseRefusals(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	r, p := startHardenRun(t, "")
	r.open(t, harden+"/jobs/1?src=board") // the start page, not in the manifest
	m := r.mark(t)
	r.traced(t, 0, "browser.navigated", "tool", "browser_navigate")
	r.open(t, harden+"/apply")
	if st := r.status(t); st.Waiting != nil || st.Run.State != "running" {
		t.Fatalf("the invisible badge paused the run: %+v", st)
	}
	r.do(t, "allowed", "browser_click", map[string]any{"target": r.find(t, "button", "Apply", 0), "element": "Apply"})
	m = r.traced(t, m, "policy.decision", "tool", "browser_click", "class", "read", "decision", "allowed", "basis", "button_no_submit")
	r.do(t, "allowed", "browser_click", map[string]any{"target": r.find(t, "button", "Autofill with Greenhouse", 0), "element": "Autofill with Greenhouse"})
	m = r.traced(t, m, "policy.decision", "tool", "browser_click", "class", "read", "decision", "allowed", "basis", "button_no_submit")
	snap := r.snapshot(t)
	if !strings.Contains(snap, `- 'textbox "Work authorization: do you need sponsorship? #visa" [ref=`) {
		t.Errorf("the label is not YAML-quoted in the snapshot:\n%.3000s", snap)
	}
	auth := r.find(t, "textbox", "Work authorization: do you need sponsorship?", 0)
	r.do(t, "allowed", "browser_type", map[string]any{"target": auth, "element": "Work authorization", "text": "Yes", "source_quote": "Work authorization: Yes"})
	m = r.traced(t, m, "field.filled", "tool", "browser_type", "field", "Work authorization: do you need sponsorship? #visa")
	// a visible challenge pauses; the owner solves it (the page's script takes it away after
	// 2 s) and resumes: the recheck passes and the run goes on
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		res, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: "browser_navigate", Arguments: map[string]any{"url": harden + "/challenge"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	waitWaiting(t, r)
	if st := r.status(t); st.Waiting.Reason != "captcha" {
		t.Errorf("paused for %q, want captcha", st.Waiting.Reason)
	}
	time.Sleep(3 * time.Second)
	resp := r.controlReq(t, "POST", "/local-apply/resume", "{}")
	resp.Body.Close()
	res := <-done
	expect(t, "navigate to the challenge", res.IsError, textOf(res), "allowed")
	m = r.traced(t, m, "run.paused", "pauseReason", "captcha")
	m = r.traced(t, m, "run.resumed", "status", "resumed")
	// back: /apply, the start page, then about:blank (the start of the history)
	for i := 0; i < 3; i++ {
		r.do(t, "allowed", "browser_navigate_back", nil)
		r.do(t, "allowed", "browser_snapshot", nil) // (the same call three times in a row is nudged)
	}
	r.traced(t, m, "policy.decision", "tool", "browser_navigate_back", "decision", "allowed", "basis", "about_blank")
	for _, e := range readTrace(t, r.trace) {
		if e.Type == "browser.blocked" && e.Detail["reason"] != "captcha" {
			t.Errorf("blocked: %+v", e)
		}
	}
	r.do(t, "allowed", "browser_snapshot", nil)
	r.do(t, "allowed", "ready_for_review", map[string]any{"summary": "filled"})
	r.close(t)
	if res := r.resultOf(t); res.Outcome != "awaiting_review" {
		t.Errorf("result %+v", res)
	}
	p.stop(t)
	if n := posts(t, p, "*/apply/submit*"); n != 0 {
		t.Errorf("%d POSTs reached the form", n)
	}
}

// TestGuardGroundingValues: grounding as field values, not words (issue 19), through a real
// replay, @playwright/mcp and Chromium: the fragment of an email, text spanning two profile
// lines, a full-width copy of the email and a label word are refused (ungrounded); the
// sponsorship "Yes" quoted from "Work authorization: Yes" is typed but traced weak under
// lenient grounding, and asked of the owner under grounding mode strict; a select option
// is grounded by its visible label, not its value attribute. The trace never holds a value.
func TestGuardGroundingValues(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	r, p := startHardenRun(t, "")
	r.open(t, harden+"/apply")
	email := r.find(t, "textbox", "Email", 0)
	m := r.mark(t)
	for _, c := range []struct{ what, text, quote string }{
		{"a fragment of the email", "example.com", "Email: jane.doe@example.com"},
		{"text spanning two profile lines", "Jane Doe Email", "Jane Doe\nEmail: jane.doe@example.com"},
		{"a full-width copy of the email", "ｊａｎｅ．ｄｏｅ＠ｅｘａｍｐｌｅ．ｃｏｍ", "Email: jane.doe@example.com"},
		{"a label word", "Phone", "Phone: +1 555 0100"},
	} {
		r.do(t, "refused", "browser_type", map[string]any{"target": email, "element": "Email", "text": c.text, "source_quote": c.quote})
		m = r.traced(t, m, "policy.decision", "tool", "browser_type", "decision", "refused", "reason", "ungrounded", "field", "Email*")
	}
	r.do(t, "allowed", "browser_type", map[string]any{"target": email, "element": "Email", "text": "jane.doe@example.com", "source_quote": "Email: jane.doe@example.com"})
	m = r.traced(t, m, "field.filled", "field", "Email*", "basis", "value", "source", "profile")
	// the sponsorship "Yes" from "Work authorization: Yes": typed, traced weak (lenient)
	r.do(t, "allowed", "browser_select_option", map[string]any{"target": r.find(t, "combobox", "Will you require visa sponsorship?", 0), "element": "sponsorship", "values": []any{"Yes"}, "source_quote": "Work authorization: Yes"})
	m = r.traced(t, m, "field.filled", "tool", "browser_select_option", "field", "Will you require visa sponsorship?", "basis", "weak")
	// a select option by its value attribute "7", quoting a 7 from the profile: the label
	// the page shows ("EUR 150,000") is what must be grounded
	salary := r.find(t, "combobox", "Expected salary", 0)
	r.do(t, "refused", "browser_select_option", map[string]any{"target": salary, "element": "salary", "values": []any{"7"}, "source_quote": "Years of experience: 7"})
	m = r.traced(t, m, "policy.decision", "tool", "browser_select_option", "decision", "refused", "reason", "ungrounded")
	r.do(t, "allowed", "browser_select_option", map[string]any{"target": salary, "element": "salary", "values": []any{"7"}, "source_quote": "EUR 150,000"})
	m = r.traced(t, m, "field.filled", "tool", "browser_select_option", "field", "Expected salary", "basis", "value", "source", "answer")
	if snap := r.snapshot(t); !strings.Contains(snap, "EUR 150,000") {
		t.Errorf("the salary option is not shown selected:\n%.2000s", snap)
	}
	data, _ := os.ReadFile(r.trace)
	for _, v := range []string{"jane.doe@example.com", "example.com", "EUR 150,000", "+1 555 0100"} {
		if strings.Contains(string(data), v) {
			t.Errorf("the trace holds the value %q", v)
		}
	}
	r.close(t)
	p.stop(t)

	// grounding mode strict: a weak fill is asked of the owner first; confirmed, it is
	// filled (traced weak); cancelled, the run stops blocked and nothing is typed
	r2, p2 := startHardenRun(t, strings.Replace(hardenApp, "grounding:\n", "grounding:\n  mode: strict\n", 1))
	r2.open(t, harden+"/apply")
	sp := r2.find(t, "combobox", "Will you require visa sponsorship?", 0)
	text, isErr := r2.paused(t, "screening_ambiguity", "resume", "", "browser_select_option", map[string]any{"target": sp, "element": "sponsorship", "values": []any{"Yes"}, "source_quote": "Work authorization: Yes"})
	expect(t, "strict weak fill confirmed", isErr, text, "allowed")
	m2 := r2.traced(t, 0, "policy.decision", "tool", "browser_select_option", "decision", "paused", "reason", "weak_grounding", "field", "Will you require visa sponsorship?")
	m2 = r2.traced(t, m2, "field.filled", "tool", "browser_select_option", "basis", "weak")
	search := r2.find(t, "textbox", "Search jobs near you", 0)
	text, isErr = r2.paused(t, "screening_ambiguity", "cancel", "", "browser_type", map[string]any{"target": search, "element": "Search", "text": "London", "source_quote": "Location: London, England, United Kingdom"})
	expect(t, "strict weak fill cancelled", isErr, text, "refused")
	r2.traced(t, m2, "policy.decision", "tool", "browser_type", "decision", "paused", "reason", "weak_grounding", "field", "Search jobs near you")
	for _, e := range readTrace(t, r2.trace)[m2:] {
		if e.Type == "field.filled" {
			t.Errorf("filled under strict after the owner cancelled: %+v", e)
		}
	}
	r2.close(t)
	if res := r2.resultOf(t); res.Outcome != "blocked" || res.BlockReason != "screening_ambiguity" {
		t.Errorf("strict result %+v", res)
	}
	p2.stop(t)
}

// TestGuardCapsAndAskBound: the contract's caps in characters and the bound on
// request_answer without progress, through a real pab guard (real @playwright/mcp child):
// a 400-character Japanese question reaches the owner cut at 300 characters (not 100); an
// answer of 2,001 characters is refused and one of 2,000 taken; the fourth request_answer
// in a row with nothing filled is refused (no_progress) without a pause; an application
// with 21 answers does not load.
func TestGuardCapsAndAskBound(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	r, p := startHardenRun(t, "")
	defer p.stop(t)
	question := strings.Repeat("職歴", 200) // 400 characters, 1,200 bytes
	done := make(chan *mcp.CallToolResult, 1)
	ask := func(q string) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			res, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: "request_answer", Arguments: map[string]any{"question": q}})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			done <- res
		}()
		waitWaiting(t, r)
	}
	ask(question)
	st := r.status(t)
	if got := []rune(st.Waiting.Question); len(got) != 300 || string(got) != string([]rune(question)[:300]) {
		t.Errorf("the owner sees %d characters of the question, want 300", len(got))
	}
	body, _ := json.Marshal(map[string]string{"answer": strings.Repeat("あ", 2001)})
	resp := r.controlReq(t, "POST", "/local-apply/resume", string(body))
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("a 2,001-character answer: %d, want 400", resp.StatusCode)
	}
	body, _ = json.Marshal(map[string]string{"answer": strings.Repeat("あ", 2000)})
	resp = r.controlReq(t, "POST", "/local-apply/resume", string(body))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a 2,000-character answer: %d, want 200", resp.StatusCode)
	}
	if res := <-done; res.IsError {
		t.Errorf("request_answer 1: %s", textOf(res))
	}
	for i := 2; i <= 3; i++ {
		ask("Question " + strconv.Itoa(i) + "?")
		resp := r.controlReq(t, "POST", "/local-apply/resume", `{"answer": "Answer `+strconv.Itoa(i)+`"}`)
		resp.Body.Close()
		if res := <-done; res.IsError {
			t.Errorf("request_answer %d: %s", i, textOf(res))
		}
	}
	start := time.Now()
	r.do(t, "refused", "request_answer", map[string]any{"question": "Question 4?"})
	if time.Since(start) > 10*time.Second {
		t.Error("the fourth request_answer waited")
	}
	r.traced(t, 0, "policy.decision", "tool", "request_answer", "decision", "refused", "reason", "no_progress")
	// progress (a grounded fill) resets the bound
	r.open(t, harden+"/apply")
	r.do(t, "allowed", "browser_type", map[string]any{"target": r.find(t, "textbox", "First Name", 0), "element": "First Name", "text": "Jane", "source_quote": "Jane Doe"})
	ask("Question 5?")
	resp = r.controlReq(t, "POST", "/local-apply/resume", `{}`)
	resp.Body.Close()
	if res := <-done; res.IsError {
		t.Errorf("request_answer after progress: %s", textOf(res))
	}
	r.close(t)

	var answers strings.Builder
	for i := 0; i < 21; i++ {
		fmt.Fprintf(&answers, "    - { question: \"Q%d?\", answer: \"A%d\" }\n", i, i)
	}
	app := writeApp(t, "id: caps\nsites: [a.test]\ngrounding:\n  answers:\n"+answers.String())
	out, err := pabCmd("guard", "--application", app).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "at most 20 answers") {
		t.Errorf("21 answers: %v %s", err, out)
	}
}

// TestGuardKeyboardFills: keys on a focused value-bearing control are fills (issue 19's
// bypass): Tab onto a select then ArrowDown/End/PageDown, and Tab onto a privacy-consent
// radio group then ArrowDown, change values no one grounded; each change is undone in the
// page and traced fill.unjustified with the control's label (never the value), through a
// real replay, @playwright/mcp and Chromium.
func TestGuardKeyboardFills(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	r, p := startHardenRun(t, "")
	defer p.stop(t)
	r.open(t, harden+"/apply")
	r.do(t, "allowed", "browser_click", map[string]any{"target": r.find(t, "textbox", "Email", 0), "element": "Email"})
	m := r.mark(t)
	r.do(t, "allowed", "browser_press_key", map[string]any{"key": "Tab"}) // onto the select
	m = r.traced(t, m, "policy.decision", "tool", "browser_press_key", "class", "read", "decision", "allowed")
	for _, key := range []string{"ArrowDown", "End", "PageDown"} {
		r.do(t, "refused", "browser_press_key", map[string]any{"key": key})
		m = r.traced(t, m, "policy.decision", "tool", "browser_press_key", "class", "fill", "decision", "allowed")
		m = r.traced(t, m, "policy.decision", "tool", "browser_press_key", "class", "fill", "decision", "refused", "reason", "fill.unjustified", "field", "Years of experience")
		r.do(t, "allowed", "browser_snapshot", nil) // (not the same call three times in a row)
	}
	snap := r.snapshot(t)
	if !regexp.MustCompile(`combobox "Years of experience"[^\n]*\n\s*- option "Select\.\.\." \[selected\]`).MatchString(snap) {
		t.Errorf("the select's value was not put back:\n%.4000s", snap)
	}
	r.do(t, "allowed", "browser_press_key", map[string]any{"key": "Tab"}) // onto the radio group
	r.do(t, "refused", "browser_press_key", map[string]any{"key": "ArrowDown"})
	m = r.traced(t, m, "policy.decision", "tool", "browser_press_key", "decision", "refused", "reason", "fill.unjustified")
	snap = r.snapshot(t)
	if strings.Contains(snap, `radio "I agree to the privacy policy" [checked]`) || strings.Contains(snap, `radio "I do not agree" [checked]`) {
		t.Errorf("a radio stayed ticked by a key:\n%.4000s", snap)
	}
	for _, e := range readTrace(t, r.trace) {
		if e.Detail["reason"] == "fill.unjustified" {
			if f := e.Detail["field"]; f != "Years of experience" && f != "I agree to the privacy policy" && f != "I do not agree" {
				t.Errorf("fill.unjustified names %q, not a label", f)
			}
		}
	}
	r.do(t, "allowed", "ready_for_review", map[string]any{"summary": "keys"})
	r.close(t)
}

// TestGuardSubmitByGet: data leaving by GET is a submit (issue 19), through a real replay,
// @playwright/mcp and Chromium: after the email is typed, browser_navigate to the form's
// action with the email in the query is refused (submit.by_get), and so is pressing a GET
// form's button once its field holds a typed value; no request carrying the value reaches
// the replay, and neither does the page's own image, fetch or XHR beacon carrying the typed
// email (the submit lock refuses it from hashes of the typed values). The same button with
// an untyped, empty field is a read.
func TestGuardSubmitByGet(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	r, p := startHardenRun(t, "")
	r.open(t, harden+"/apply")
	r.do(t, "allowed", "browser_click", map[string]any{"target": r.find(t, "button", "Search", 0), "element": "Search"})
	m := r.traced(t, 0, "policy.decision", "tool", "browser_click", "class", "read", "decision", "allowed", "basis", "button_no_submit")
	r.open(t, harden+"/apply")
	r.do(t, "allowed", "browser_type", map[string]any{"target": r.find(t, "textbox", "Email", 0), "element": "Email", "text": "jane.doe@example.com", "source_quote": "Email: jane.doe@example.com"})
	// the page's own beacons (image, fetch, XHR GETs with the email) meet the submit lock,
	// which holds hashes of the typed values; the next inspection traces them
	r.do(t, "allowed", "browser_click", map[string]any{"target": r.find(t, "textbox", "First Name", 0), "element": "First Name"}) // blur: change event
	r.open(t, harden+"/apply")
	m = r.traced(t, m, "policy.decision", "class", "submit", "decision", "refused", "reason", "submit.by_get", "basis", "page")
	for _, u := range []string{
		harden + "/apply/submit?name=Jane&email=jane.doe%40example.com",
		harden + "/apply/submit?e=JANE.DOE%2540EXAMPLE.COM", // doubly encoded, other case
		harden + "/track/jane.doe@example.com/pixel.gif",
	} {
		r.do(t, "refused", "browser_navigate", map[string]any{"url": u})
		m = r.traced(t, m, "policy.decision", "tool", "browser_navigate", "class", "submit", "decision", "refused", "reason", "submit.by_get")
	}
	r.do(t, "allowed", "browser_type", map[string]any{"target": r.find(t, "textbox", "Search jobs near you", 0), "element": "Search", "text": "London", "source_quote": "Location: London, England, United Kingdom"})
	r.do(t, "refused", "browser_click", map[string]any{"target": r.find(t, "button", "Search", 0), "element": "Search"})
	r.traced(t, m, "policy.decision", "tool", "browser_click", "class", "submit", "decision", "refused", "reason", "submit.by_get")
	r.do(t, "allowed", "ready_for_review", map[string]any{"summary": "get"})
	r.close(t)
	p.stop(t)
	for _, l := range p.readLog(t) {
		if strings.Contains(strings.ToLower(l.URL), "jane.doe") || strings.Contains(l.URL, "q=London") || strings.Contains(l.URL, "/apply/submit") {
			t.Errorf("a request carried typed data: %s %s", l.Method, l.URL)
		}
	}
}

// TestRunGuardToken: pab run --guard hands the guard its control token internally: the
// agent's environment does not hold it, the guard's stderr (guard.stderr in the run
// directory) names only the token file, and the file is mode 0600.
func TestRunGuardToken(t *testing.T) {
	t.Setenv("RIGHT_ANSWER", filepath.Join(repoRoot, "docs", "examples", "books-sapiens-price", "right", "answer.txt"))
	app := writeApp(t, smokeApp)
	fake := fakeMCPBin(t)
	out := filepath.Join(t.TempDir(), "batch")
	agent := `if env | grep -q PAB_GUARD_CONTROL_TOKEN; then echo "the agent has the control token" >&2; exit 7; fi
cp "$RIGHT_ANSWER" "$PAB_ANSWER_FILE"`
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--guard", app, "--guard-browser-mcp", fake+" browser",
		"--proxy-env=false", "--timeout", "60s", "--agent", agent, "--judge", "cli", "--judge-cmd", exampleJudge, "books-sapiens-price")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, out)
	if len(s.Runs) != 1 || s.Runs[0].Status == batch.StatusAgentFailed || s.Runs[0].Status == batch.StatusError {
		e, _ := os.ReadFile(filepath.Join(out, "books-sapiens-price", "1", batch.FileStderr))
		t.Fatalf("runs %+v\n%s", s.Runs, e)
	}
	gs, err := os.ReadFile(filepath.Join(out, "books-sapiens-price", "1", "guard.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gs), "control token from $PAB_GUARD_CONTROL_TOKEN") || regexp.MustCompile(`[0-9a-f]{64}`).Match(gs) {
		t.Errorf("guard.stderr should name the token's source and not hold it:\n%s", gs)
	}
}
