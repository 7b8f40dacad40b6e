package main

// The owner's browser (issue 19): pab guard --cdp-endpoint attached to a visible Chromium
// the test owns (under Xvfb), --headed, and the owner's part of a run (allow_site, a
// sensitive page confirmed first, a click's side effects put back, engine.* and
// source.read). Real processes: pab guard, @playwright/mcp, Chromium, pab replay, Xvfb.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/cdpconn"
	"github.com/pab-dev/pab/internal/procgroup"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/tlsca"
)

// ownerApp is the application of the owner's-browser tests: the consent page of the
// guard-harden replay, a manifest that marks /apply/done sensitive.
const ownerApp = `id: owner-1
mode: fill_and_review
sites: [jobs.harden.test]
start_url: https://jobs.harden.test/consent
grounding:
  profile: |
    Jane Doe
    Email: jane.doe@example.com
manifest:
  reviewed: true
  paths:
    - { path: "/consent" }
    - { path: "/apply/done", sensitive: true }
`

// startXvfb starts Debian's Xvfb on a free display (-displayfd) in a process group of its
// own, sets $DISPLAY for the test and the processes it starts, and stops it at cleanup.
// Without Xvfb the test fails under CI=true and is skipped elsewhere (testtool.Missing).
func startXvfb(t *testing.T) string {
	t.Helper()
	exe, err := exec.LookPath("Xvfb")
	if err != nil {
		testtool.Missing(t, "Xvfb not found on PATH: install Debian's xvfb (apt-get install xvfb)")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-displayfd", "3", "-screen", "0", "1280x1024x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	procgroup.Set(cmd, true)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { procgroup.Stop(cmd.Process.Pid, exited, 5*time.Second) })
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		r.Close()
		line <- strings.TrimSpace(l)
	}()
	select {
	case l := <-line:
		if _, err := strconv.Atoi(l); err != nil {
			t.Fatalf("Xvfb -displayfd gave %q", l)
		}
		t.Setenv("DISPLAY", ":"+l)
		return ":" + l
	case err := <-exited:
		t.Fatalf("Xvfb exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Xvfb gave no display within 30 s")
	}
	return ""
}

// startOwnerRun starts pab guard with args (plus trace, result and control) as startApplyRun
// does, without --proxy.
func startOwnerRun(t *testing.T, args ...string) *applyRun {
	t.Helper()
	dir := t.TempDir()
	r := &applyRun{trace: filepath.Join(dir, "trace.jsonl"), result: filepath.Join(dir, "result.json")}
	r.guardProc = startGuard(t, append(args, "--trace", r.trace, "--result", r.result, "--control", "127.0.0.1:0")...)
	r.parseControl(t)
	return r
}

// parseControl reads the control address and token pab guard printed on stderr.
func (r *applyRun) parseControl(t *testing.T) {
	t.Helper()
	m := controlLine.FindStringSubmatch(r.stderr.String())
	tm := tokenLine.FindStringSubmatch(r.stderr.String())
	if m == nil || tm == nil {
		t.Fatalf("no control address or token on stderr:\n%s", r.stderr)
	}
	r.control, r.token = m[1], tm[1]
}

// pauseAgain waits for a pause whose id differs from prev (a new pause) and returns it.
func (r *applyRun) waitPauseAfter(t *testing.T, prev int) (int, string, string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st := r.status(t); st.Waiting != nil && st.Waiting.ID != prev {
			return st.Waiting.ID, st.Waiting.Reason, st.Waiting.Question
		}
	}
	t.Fatalf("no new pause (after #%d) within 60 s\nstderr:\n%s", prev, r.stderr)
	return 0, "", ""
}

// callAsync calls a tool on its own goroutine (a call that pauses) and returns where its
// answer arrives.
func (r *applyRun) callAsync(name string, args map[string]any) chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
		defer cancel()
		res, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call failed: " + err.Error()}}}
		}
		done <- res
	}()
	return done
}

func (r *applyRun) post(t *testing.T, path, body string) {
	t.Helper()
	resp := r.controlReq(t, "POST", path, body)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s %s: %d %s", path, body, resp.StatusCode, data)
	}
}

func answerOf(t *testing.T, ch chan *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(120 * time.Second):
		t.Fatal("no answer within 120 s")
	}
	return nil
}

// ownerTab is a DevTools session (internal/cdpconn) on a page of the owner's Chromium: the
// test stands in for the person at the browser. (chromedp's attach to a tab that runs
// already races when the page changes while it attaches.)
type ownerTab struct {
	conn    *cdpconn.Conn
	session string
}

// ownerPage attaches to the page of the owner's Chromium (DevTools at devtools,
// http://127.0.0.1:PORT) whose URL starts with prefix; its close detaches (never closing
// the page).
func ownerPage(t *testing.T, devtools, prefix string) (*ownerTab, func()) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(devtools + "/json/version")
	if err != nil {
		t.Fatal(err)
	}
	var version struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&version)
	resp.Body.Close()
	if err != nil || version.WS == "" {
		t.Fatalf("%s/json/version: no webSocketDebuggerUrl (%v)", devtools, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := cdpconn.Dial(ctx, version.WS, cdpconn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := conn.Targets(ctx)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	var id string
	for _, tg := range ts {
		if tg.Type == "page" && strings.HasPrefix(tg.URL, prefix) {
			id = tg.TargetID
		}
	}
	if id == "" {
		conn.Close()
		t.Fatalf("no page at %s in the owner's browser: %+v", prefix, ts)
	}
	session, err := conn.Attach(ctx, id)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return &ownerTab{conn: conn, session: session}, func() { conn.Detach(session); conn.Close() }
}

// eval runs expression in the page's main world and decodes its value into out.
func (o *ownerTab) eval(expression string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return o.conn.Evaluate(ctx, o.session, expression, out)
}

// click clicks the middle of the element at selector with the mouse, as the person would
// (Input.dispatchMouseEvent: a trusted click), after scrolling it into view.
func (o *ownerTab) click(selector string) error {
	q, _ := json.Marshal(selector)
	var box struct{ X, Y float64 }
	if err := o.eval(`(() => { const e = document.querySelector(`+string(q)+`); e.scrollIntoView({block: "center"});
		const r = e.getBoundingClientRect(); return {X: r.left + r.width / 2, Y: r.top + r.height / 2}; })()`, &box); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ev := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		m := map[string]any{"type": ev, "x": box.X, "y": box.Y}
		if ev != "mouseMoved" {
			m["button"], m["clickCount"] = "left", 1
		}
		if _, err := o.conn.Call(ctx, o.session, "Input.dispatchMouseEvent", m); err != nil {
			return err
		}
	}
	return nil
}

// screenshot is a PNG of the page's viewport (Page.captureScreenshot).
func (o *ownerTab) screenshot() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := o.conn.Call(ctx, o.session, "Page.captureScreenshot", map[string]any{"format": "png"})
	if err != nil {
		return nil, err
	}
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON
	}
	if err := json.Unmarshal(res, &shot); err != nil {
		return nil, err
	}
	return shot.Data, nil
}

// closeOwnerPage closes the page at prefix in the browser at devtools (/json/close), as the
// owner closing a window.
func closeOwnerPage(t *testing.T, devtools, prefix string) {
	t.Helper()
	resp, err := httpGetJSON(devtools + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range resp {
		if tg["type"] == "page" && strings.HasPrefix(fmt.Sprint(tg["url"]), prefix) {
			c := &http.Client{Timeout: 10 * time.Second}
			r, err := c.Get(devtools + "/json/close/" + fmt.Sprint(tg["id"]))
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			return
		}
	}
	t.Fatalf("no page at %s in the owner's browser: %v", prefix, resp)
}

func httpGetJSON(u string) ([]map[string]any, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v []map[string]any
	return v, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v)
}

// formValues reads the consent page's fields in the owner's browser.
func formValues(t *testing.T, tab *ownerTab) (first, email string, consent bool) {
	t.Helper()
	type form struct {
		First, Email string
		Consent      bool
	}
	var v form
	err := tab.eval(`({First: document.querySelector("#first").value, Email: document.querySelector("#email").value, Consent: document.querySelector("#consent").checked})`, &v)
	if err != nil {
		t.Fatalf("read the form in the owner's browser: %v", err)
	}
	return v.First, v.Email, v.Consent
}

// TestGuardOwnerBrowserCDP: pab guard --cdp-endpoint attached to a visible Chromium under
// Xvfb that the test started (the owner's browser), through a replay. The agent fills the
// consent page; clicking the consent box pauses; the owner resumes without ticking it and
// the guard pauses again; the owner ticks it through CDP (a real mouse click), resumes, and
// the guard's recheck lets the run go on. The run's pages are in a window (a browser
// context) of their own whose proxy is the guard's wire gate, chained to the replay. At
// awaiting_review the form is still filled in that window (read through CDP, screenshot
// taken); when the agent leaves, pab guard waits for the owner with the window open, and
// exits once the owner closes it, leaving the owner's browser running: the guard did not
// close a browser it did not start. No POST reaches the form.
func TestGuardOwnerBrowserCDP(t *testing.T) {
	requireBrowserStack(t)
	startXvfb(t)
	ca, err := tlsca.LoadOrCreate(filepath.Join(cacheDir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	p := startReplay(t, writeHardenWARC(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	owner, err := browser.Start(ctx, chromiumPath(t), browser.Options{Proxy: p.addr, SPKI: ca.SPKIHash(), Headed: true}, "", filepath.Join(t.TempDir(), "owner-chromium.log"))
	if err != nil {
		t.Fatalf("the owner's Chromium: %v", err)
	}
	defer owner.Stop()
	cu, err := url.Parse(owner.CDP)
	if err != nil {
		t.Fatal(err)
	}
	devtools := "http://" + cu.Host

	r := startGuardPipes(t, "--application", writeApp(t, ownerApp), "--cdp-endpoint", devtools, "--proxy", p.addr)
	if !strings.Contains(r.stderr.String(), "--cdp-endpoint "+devtools) || strings.Contains(r.stderr.String(), "--headless") ||
		!strings.Contains(r.stderr.String(), "--isolated --proxy-server http://127.0.0.1:") || !strings.Contains(r.stderr.String(), "a window of its own") {
		t.Errorf("browser MCP server command line:\n%s", r.stderr)
	}
	r.open(t, harden+"/consent")
	r.do(t, "allowed", "browser_type", map[string]any{"target": r.find(t, "textbox", "First Name", 0), "text": "Jane", "source_quote": "Jane Doe"})
	r.do(t, "allowed", "browser_type", map[string]any{"target": r.find(t, "textbox", "Email", 0), "text": "jane.doe@example.com", "source_quote": "Email: jane.doe@example.com"})
	m := r.mark(t)

	box := r.find(t, "checkbox", "I agree to the privacy policy", 0)
	done := r.callAsync("browser_click", map[string]any{"target": box, "element": "privacy consent"})
	id, reason, q := r.waitPauseAfter(t, 0)
	if reason != "consent_required" || !strings.Contains(q, "tick it yourself in the browser") {
		t.Fatalf("pause %q %q", reason, q)
	}
	r.post(t, "/local-apply/resume", "{}") // not ticked yet
	id2, reason, q := r.waitPauseAfter(t, id)
	if reason != "consent_required" || !strings.Contains(q, "still not ticked") {
		t.Fatalf("second pause %q %q", reason, q)
	}
	_ = id2
	tab, pcancel := ownerPage(t, devtools, harden+"/consent")
	if err := tab.click("#consent"); err != nil {
		t.Fatalf("the owner's tick: %v", err)
	}
	r.post(t, "/local-apply/resume", "{}")
	res := answerOf(t, done)
	expect(t, "consent after the owner's tick", res.IsError, textOf(res), "allowed")
	m = r.traced(t, m, "policy.decision", "reason", "consent_required", "basis", "still_unticked")
	r.traced(t, m, "policy.decision", "reason", "consent_required", "decision", "allowed", "basis", "owner_consent")

	r.do(t, "allowed", "ready_for_review", map[string]any{"summary": "filled; consent given by the owner"})
	if st := r.status(t); st.Run == nil || st.Run.Result == nil || st.Run.Result.Outcome != "awaiting_review" {
		t.Fatalf("status %+v", st.Run)
	}
	var locked bool
	if err := tab.eval(`typeof window.__pabGuardLock === "function"`, &locked); err != nil || !locked {
		t.Errorf("the submit lock is not installed in the owner's page: %v %v", locked, err)
	}
	first, email, consent := formValues(t, tab)
	if first != "Jane" || email != "jane.doe@example.com" || !consent {
		t.Errorf("at awaiting_review the owner's browser shows first=%q email=%q consent=%v", first, email, consent)
	}
	shot, err := tab.screenshot()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shotPath := filepath.Join(t.TempDir(), "awaiting-review.png")
	if d := os.Getenv("PAB_GUARD_SCREENSHOT_DIR"); d != "" {
		shotPath = filepath.Join(d, "awaiting-review.png")
	}
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if b.Dx() < 400 || b.Dy() < 300 || len(colours) < 8 {
		t.Errorf("screenshot %dx%d with %d colours: not a rendered page", b.Dx(), b.Dy(), len(colours))
	}
	t.Logf("screenshot of the owner's browser at awaiting_review: %s (%dx%d, %d bytes)", shotPath, b.Dx(), b.Dy(), len(shot))
	pcancel()

	r.session.Close() // the agent leaves: pab guard waits for the owner
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(r.stderr.String(), "awaiting your review") && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-r.exited:
		t.Fatalf("pab guard exited (%v) when the agent left, with the run awaiting review\n%s", err, r.stderr)
	case <-time.After(2 * time.Second):
	}
	tab, pcancel = ownerPage(t, devtools, harden+"/consent")
	if first, email, consent := formValues(t, tab); first != "Jane" || email != "jane.doe@example.com" || !consent {
		t.Errorf("while pab guard waits the run's window shows first=%q email=%q consent=%v", first, email, consent)
	}
	pcancel()
	closeOwnerPage(t, devtools, harden+"/consent") // the owner closes the run's window
	select {
	case err := <-r.exited:
		if err != nil {
			t.Errorf("pab guard exited: %v\n%s", err, r.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("pab guard did not exit after the run's window was closed\n%s", r.stderr)
	}
	r.session = nil
	for _, want := range []string{"the run's window was closed", "stays open (pab guard did not start it)"} {
		if !strings.Contains(r.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	select {
	case err := <-owner.Exited():
		t.Fatalf("the owner's browser exited with pab guard: %v", err)
	case <-time.After(time.Second):
	}
	if _, err := httpGetJSON(devtools + "/json/list"); err != nil {
		t.Errorf("the owner's browser no longer answers: %v", err)
	}
	r.traced(t, 0, "engine.ended", "status", "disconnected", "kind", "awaiting_review")
	if n := posts(t, p, "*/consent/submit*"); n != 0 {
		t.Errorf("%d POSTs reached the form", n)
	}
}

// guardPipes is a pab guard over stdio whose stdin the test closes itself (so that it can
// watch pab guard go on after the agent left).
type guardPipes struct {
	*applyRun
	stdin   io.WriteCloser
	exited  chan error    // receives the exit status once
	stopped chan struct{} // closed once pab guard has exited
}

func startGuardPipes(t *testing.T, args ...string) *guardPipes {
	t.Helper()
	dir := t.TempDir()
	g := &guardPipes{applyRun: &applyRun{trace: filepath.Join(dir, "trace.jsonl"), result: filepath.Join(dir, "result.json")}, exited: make(chan error, 1), stopped: make(chan struct{})}
	g.guardProc = &guardProc{stderr: &syncBuffer{}}
	cmd := pabCmd(append(append([]string{"guard"}, args...), "--trace", g.trace, "--result", g.result, "--control", "127.0.0.1:0")...)
	cmd.Stderr = g.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.cmd, g.stdin = cmd, stdin
	go func() { err := cmd.Wait(); close(g.stopped); g.exited <- err }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.stopped:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "guard-test"}, nil).Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatalf("connect to pab guard: %v\nstderr:\n%s", err, g.stderr)
	}
	g.session = cs
	g.parseControl(t)
	return g
}

// browserOf finds the Chromium browser process (no --type=) below pid and returns its pid
// and command line.
func browserOf(pid int) (int, string) {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		f := strings.Fields(string(st[i+1:]))
		if len(f) > 1 && f[0] != "Z" {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	below := func(p int) bool {
		for i := 0; i < 50 && p > 1; i++ {
			if p = parent[p]; p == pid {
				return true
			}
		}
		return false
	}
	for p := range parent {
		if !below(p) {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		args := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
		if len(args) > 0 && strings.Contains(filepath.Base(args[0]), "chrom") && !strings.Contains(string(cl), "--type=") && !strings.Contains(args[0], "crashpad") {
			return p, strings.Join(args, " ")
		}
	}
	return 0, ""
}

// TestGuardHeaded: pab guard --headed under Xvfb starts a visible Chromium (no --headless)
// with the submit lock. When the agent's session ends with the run awaiting review, pab
// guard keeps the browser open and waits for the owner's word: POST /local-apply/close ends
// it (the browser closed, exit 0); in a second run the owner closes the browser (its
// process ends) and pab guard exits by itself.
func TestGuardHeaded(t *testing.T) {
	requireBrowserStack(t)
	startXvfb(t)
	p := startReplay(t, writeHardenWARC(t))
	app := writeApp(t, ownerApp)
	for _, how := range []string{"close", "browser closed"} {
		g := startGuardPipes(t, "--application", app, "--proxy", p.addr, "--headed")
		g.open(t, harden+"/consent")
		g.do(t, "allowed", "browser_type", map[string]any{"target": g.find(t, "textbox", "First Name", 0), "text": "Jane", "source_quote": "Jane Doe"})
		bpid, cl := browserOf(g.cmd.Process.Pid)
		if bpid == 0 || strings.Contains(cl, "--headless") {
			t.Fatalf("%s: the browser below pab guard: pid %d %q; want a headed Chromium", how, bpid, cl)
		}
		if how == "close" {
			// the submit lock runs in the headed browser: the page's own beacons carrying the
			// typed email are refused (traced at the next page landed)
			g.open(t, harden+"/apply")
			g.do(t, "allowed", "browser_type", map[string]any{"target": g.find(t, "textbox", "Email", 0), "text": "jane.doe@example.com", "source_quote": "Email: jane.doe@example.com"})
			g.do(t, "allowed", "browser_click", map[string]any{"target": g.find(t, "textbox", "First Name", 0), "element": "First Name"})
			g.open(t, harden+"/consent")
			g.traced(t, 0, "policy.decision", "class", "submit", "decision", "refused", "reason", "submit.by_get", "basis", "page")
		}
		probe := g.do(t, "allowed", "browser_snapshot", nil)
		if !strings.Contains(probe, "First Name") {
			t.Fatalf("snapshot: %.500s", probe)
		}
		g.do(t, "allowed", "ready_for_review", map[string]any{"summary": "filled"})
		g.session.Close() // the agent leaves
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(g.stderr.String(), "awaiting your review") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case err := <-g.exited:
			t.Fatalf("%s: pab guard exited (%v) when the agent left, with the run awaiting review\n%s", how, err, g.stderr)
		case <-time.After(2 * time.Second):
		}
		if alive, _ := browserOf(g.cmd.Process.Pid); alive != bpid {
			t.Fatalf("%s: the browser (pid %d) is gone while pab guard waits for the owner", how, bpid)
		}
		if res := g.resultOf(t); res.Outcome != "awaiting_review" {
			t.Errorf("%s: result %+v", how, res)
		}
		t0 := time.Now()
		if how == "close" {
			g.post(t, "/local-apply/close", "")
		} else {
			syscall.Kill(bpid, syscall.SIGTERM) // the owner closes the browser
		}
		select {
		case err := <-g.exited:
			if err != nil {
				t.Errorf("%s: pab guard exited: %v\n%s", how, err, g.stderr)
			}
			t.Logf("%s: pab guard exited %s after the owner's word", how, time.Since(t0).Round(100*time.Millisecond))
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: pab guard did not exit after the owner's word\n%s", how, g.stderr)
		}
		want := map[string]string{"close": "the owner is done; closing the browser", "browser closed": "the browser was closed"}[how]
		if !strings.Contains(g.stderr.String(), want) {
			t.Errorf("%s: stderr lacks %q:\n%s", how, want, g.stderr)
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(bpid)); err == nil {
			if st, _ := os.ReadFile("/proc/" + strconv.Itoa(bpid) + "/stat"); !bytes.Contains(st, []byte(") Z")) {
				t.Errorf("%s: the browser (pid %d) outlived pab guard", how, bpid)
			}
		}
		g.session = nil
	}
}

// TestGuardOwnerPages: the owner's part of a run in headless Chromium through a replay:
// source.read for the profile and engine.started/ended in the trace; a "Prefill" button
// whose script ticks the consent box and picks an answer has both put back
// (fill.unjustified); a sensitive page of the reviewed manifest is confirmed before it is
// opened; a link to a site outside the application's sites is undone and paused, and the
// owner's {"allow_site": HOST} admits it: the guard opens it again and checks it.
func TestGuardOwnerPages(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	p := startReplay(t, writeHardenWARC(t))
	r := startApplyRun(t, writeApp(t, ownerApp), p)
	r.traced(t, 0, "source.read", "kind", "profile")
	r.open(t, harden+"/consent")
	r.traced(t, 0, "engine.started", "engine", "guard-test", "mode", "fill_and_review")

	// a click's side effects
	m := r.mark(t)
	text := r.do(t, "refused", "browser_click", map[string]any{"target": r.find(t, "button", "Prefill from my profile", 0), "element": "Prefill"})
	if !strings.Contains(text, "undone") {
		t.Errorf("prefill: %s", text)
	}
	r.traced(t, m, "policy.decision", "tool", "browser_click", "reason", "fill.unjustified", "field", "I agree to the privacy policy and to the processing of my data")
	r.traced(t, m, "policy.decision", "tool", "browser_click", "reason", "fill.unjustified", "field", "Years of experience")
	snap := r.snapshot(t)
	for _, l := range strings.Split(snap, "\n") {
		if strings.Contains(l, "checkbox \"I agree") && strings.Contains(l, "[checked]") {
			t.Errorf("the consent box stayed ticked: %s", l)
		}
	}

	// a sensitive page: asked before it is opened
	done := r.callAsync("browser_navigate", map[string]any{"url": harden + "/apply/done"})
	_, reason, _ := r.waitPauseAfter(t, 0)
	st := r.status(t)
	if reason != "sensitive_page" || st.Run == nil || st.Run.URL != harden+"/consent" {
		t.Fatalf("sensitive: pause %q while the browser is at %+v; want the pause before leaving /consent", reason, st.Run)
	}
	r.post(t, "/local-apply/resume", "{}")
	res := answerOf(t, done)
	expect(t, "sensitive page confirmed", res.IsError, textOf(res), "allowed")
	m = r.traced(t, m, "policy.decision", "tool", "browser_navigate", "reason", "sensitive_page", "decision", "paused")
	var landed, asked int
	for _, e := range readTrace(t, r.trace) {
		if e.Type == "browser.navigated" && strings.HasSuffix(e.URL, "/apply/done") {
			landed++
		}
		if e.Type == "run.paused" && e.Detail["reason"] == "sensitive_page" {
			asked++
		}
	}
	if landed != 1 || asked != 1 {
		t.Errorf("/apply/done: landed %d times, asked %d times; want once each (no second pause on landing)", landed, asked)
	}

	// allow_site
	r.open(t, harden+"/consent")
	done = r.callAsync("browser_click", map[string]any{"target": r.find(t, "link", "Sign in with Harden ID", 0), "element": "Sign in"})
	_, reason, q := r.waitPauseAfter(t, 1)
	if reason != "external_redirect" || !strings.Contains(q, `"allow_site": "sso.harden-partner.test"`) {
		t.Fatalf("external: pause %q %q", reason, q)
	}
	r.post(t, "/local-apply/resume", `{"allow_site": "sso.harden-partner.test"}`)
	res = answerOf(t, done)
	expect(t, "admitted site", res.IsError, textOf(res), "allowed")
	m = r.traced(t, m, "browser.blocked", "reason", "external_redirect")
	m = r.traced(t, m, "policy.decision", "basis", "owner_allowed_site")
	if i := r.traced(t, m, "browser.navigated"); i > 0 {
		if e := readTrace(t, r.trace)[i-1]; e.Domain != "sso.harden-partner.test" {
			t.Errorf("navigated to %s after allow_site", e.Domain)
		}
	}
	if !strings.Contains(r.snapshot(t), "You are signed in as the owner") {
		t.Error("the admitted page is not shown")
	}
	r.close(t)
	r.traced(t, 0, "engine.ended", "status", "disconnected")
	if n := posts(t, p, "*/consent/submit*"); n != 0 {
		t.Errorf("%d POSTs reached the form", n)
	}
}

// TestRunGuardEngineEvents: in pab run --guard the guard's trace (guard.trace.jsonl in the
// run directory) holds source.read for the application's profile, engine.started with the
// name the agent's MCP client gives (an agent speaking MCP over the guard's streamable
// HTTP endpoint with curl), and engine.ended once the run is over (the guard is stopped).
func TestRunGuardEngineEvents(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testtool.Missing(t, "curl not found on PATH (Debian's curl)")
	}
	t.Setenv("RIGHT_ANSWER", filepath.Join(repoRoot, "docs", "examples", "books-sapiens-price", "right", "answer.txt"))
	app := writeApp(t, smokeApp)
	fake := fakeMCPBin(t)
	out := filepath.Join(t.TempDir(), "batch")
	// initialize (MCP 2025-06-18), initialized, tools/list, each with the session id
	agent := `set -e
h='Content-Type: application/json'
a='Accept: application/json, text/event-stream'
k="Authorization: Bearer $PAB_MCP_TOKEN"
curl -sS --fail-with-body -D hdr -H "$h" -H "$a" -H "$k" --data '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl-agent","version":"1"}}}' "$PAB_MCP_URL" >init.txt || { echo "initialize: $?" >&2; cat hdr init.txt >&2; exit 1; }
sid=$(tr -d '\r' <hdr | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
s="Mcp-Session-Id: $sid"
p='MCP-Protocol-Version: 2025-06-18'
curl -sS --fail-with-body -H "$h" -H "$a" -H "$k" -H "$s" -H "$p" --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$PAB_MCP_URL" >/dev/null
curl -sS --fail-with-body -H "$h" -H "$a" -H "$k" -H "$s" -H "$p" --data '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' "$PAB_MCP_URL" >tools.txt || { echo "tools/list: $?" >&2; cat tools.txt >&2; exit 1; }
grep -q '"name":"ready_for_review"' tools.txt
cp "$RIGHT_ANSWER" "$PAB_ANSWER_FILE"`
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--guard", app, "--guard-browser-mcp", fake+" browser",
		"--proxy-env=false", "--timeout", "60s", "--agent", agent, "--judge", "cli", "--judge-cmd", exampleJudge, "books-sapiens-price")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	dir := filepath.Join(out, "books-sapiens-price", "1")
	if s := readSummary(t, out); len(s.Runs) != 1 || s.Runs[0].Status == batch.StatusAgentFailed || s.Runs[0].Status == batch.StatusError {
		e, _ := os.ReadFile(filepath.Join(dir, batch.FileStderr))
		g, _ := os.ReadFile(filepath.Join(dir, "guard.stderr"))
		f, _ := os.ReadFile(filepath.Join(dir, batch.FileMCPFront))
		t.Fatalf("runs %+v\nagent.stderr:\n%s\nguard.stderr:\n%s\n%s:\n%s", s.Runs, e, g, batch.FileMCPFront, f)
	}
	r := &applyRun{trace: filepath.Join(dir, "guard.trace.jsonl")}
	r.traced(t, 0, "source.read", "kind", "profile")
	m := r.traced(t, 0, "engine.started", "engine", "curl-agent")
	for _, e := range readTrace(t, r.trace) {
		if e.Type == "engine.started" && e.Detail["engine"] != "curl-agent" {
			t.Errorf("engine.started for %v: pab run's readiness check is not the engine", e.Detail["engine"])
		}
	}
	r.traced(t, m, "engine.ended")
}
