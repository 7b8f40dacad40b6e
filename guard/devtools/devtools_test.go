package devtools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp/remote"

	"github.com/pab-dev/pab/guard/netpolicy"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/testtool"
)

// site is a loopback site whose pages try to send a typed value, and its request log.
type site struct {
	mu   sync.Mutex
	log  []string // "METHOD URL"
	srv  *httptest.Server
	seen chan string
}

const email = "jane.doe@example.com"

// hostilePage tries every way below to send the email out, from the page alone: a POST by
// fetch, a beacon, an image, a srcset, a CSS url(), a worker's fetch, a service worker's
// fetch, a meta refresh, and a ping. /ok is a plain GET that must pass.
const hostilePage = `<!doctype html><title>hostile</title>
<form id=f method=post action="/apply/submit"><input name=email value="` + email + `"><input name=first value=Jane></form>
<iframe name=side src="/ok?via=frame"></iframe>
<a id=a href="/ok?via=link" target=side ping="/sink/ping?e=` + email + `">link</a>
<script>
const e = encodeURIComponent("` + email + `");
fetch("/sink/fetch-post", {method: "POST", body: "e=" + e}).catch(() => {});
navigator.sendBeacon("/sink/beacon", "e=" + e);
new Image().src = "/sink/img?e=" + e;
const i = document.createElement("img"); i.srcset = "/sink/srcset?e=" + e + " 1x"; document.body.appendChild(i);
const st = document.createElement("style"); st.textContent = "body{background:url(/sink/css?e=" + e + ")}"; document.head.appendChild(st);
new Worker("/worker.js?x=1").postMessage(e);
navigator.serviceWorker && navigator.serviceWorker.register("/sw.js").then(() => navigator.serviceWorker.ready).then((r) => r.active.postMessage(e)).catch(() => {});
fetch("/ok?via=fetch").catch(() => {});
setTimeout(() => { document.getElementById("a").click(); }, 300);
setTimeout(() => { try { document.getElementById("f").submit(); } catch (x) {} }, 600);
setTimeout(() => { const m = document.createElement("meta"); m.httpEquiv = "refresh"; m.content = "0;url=/sink/meta?e=" + e; document.head.appendChild(m); }, 900);
</script>`

const swScript = `self.addEventListener("message", (ev) => { fetch("/sink/sw?e=" + ev.data); });
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (ev) => ev.waitUntil(self.clients.claim()));`

func newSite(t *testing.T) *site {
	s := &site{seen: make(chan string, 1000)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.String()
		s.mu.Lock()
		s.log = append(s.log, line)
		s.mu.Unlock()
		select {
		case s.seen <- line:
		default:
		}
		switch r.URL.Path {
		case "/hostile":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, hostilePage)
		case "/sw.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, swScript)
		case "/worker.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, "onmessage = (ev) => { fetch('/sink/worker?e=' + ev.data); };")
		case "/owner":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<title>owner</title><script>setInterval(() => fetch("/sink/owner", {method: "POST", body: "x"}).catch(() => {}), 200)</script>`)
		case "/done":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<title>done</title>done")
		default:
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "ok")
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// startBrowser starts headless Chromium (no proxy; popups not blocked, so that a page can
// open as many as it likes) and attaches a Session with policy.
func startBrowser(t *testing.T, policy *netpolicy.Policy, maxTargets int) (*browser.Process, *Session) {
	t.Helper()
	exe := testtool.Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := browser.Start(ctx, exe, browser.Options{Extra: []string{"--disable-features=" + browser.FeaturesOff + ",ServiceWorkerAutoPreload", "--disable-popup-blocking"}}, "about:blank", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	s, err := Attach(ctx, Options{URL: p.CDP, Policy: policy, Log: testLog{t}, MaxTargets: maxTargets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return p, s
}

// pageTarget returns the session of the first attached page, waiting for it.
func pageTarget(t *testing.T, s *Session) target {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ps := s.pages(false); len(ps) > 0 {
			return ps[0]
		}
	}
	t.Fatal("no page attached in 30 s")
	return target{}
}

// TestHoldsEverySink: with a value typed, a page that tries a POST, a beacon, a ping, an
// image, a srcset, a CSS url(), a worker's and a service worker's fetch, a form submit and a
// meta refresh carrying it gets none of them to the site (the site's own log is the judge),
// while its plain GETs pass; every refusal reaches the policy's OnRefuse with basis network,
// and the refused meta refresh leaves the page where it was. (A WebSocket handshake is not
// held by Fetch: the wire gate refuses it, guard/gate's tests.)
func TestHoldsEverySink(t *testing.T) {
	var mu sync.Mutex
	var refusals []netpolicy.Refusal
	policy := netpolicy.New(netpolicy.ModeFillAndReview, []string{"127.0.0.1"}, func(r netpolicy.Refusal) {
		mu.Lock()
		refusals = append(refusals, r)
		mu.Unlock()
	})
	policy.AddTyped(email)
	st := newSite(t)
	_, s := startBrowser(t, policy, 0)
	pg := pageTarget(t, s)
	ctx := context.Background()
	if _, err := s.Call(ctx, pg.session, "Page.navigate", map[string]any{"url": st.srv.URL + "/hostile"}); err != nil {
		t.Fatal(err)
	}
	// wait until the page's last attempt (the meta refresh at 900 ms) is over: the plain
	// GETs have arrived and the refusals of the sinks have come in
	deadline := time.Now().Add(60 * time.Second) // the loop ends as soon as the last attempts are in
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		meta, xhr := 0, 0
		for _, r := range refusals {
			switch {
			case r.Kind == "Document" && r.Verdict.Reason == netpolicy.ReasonByGet:
				meta++
			case r.Kind == "XHR" && r.Verdict.Reason == netpolicy.ReasonByGet:
				xhr++
			}
		}
		mu.Unlock()
		if meta > 0 && xhr >= 2 && strings.Contains(strings.Join(st.requests(), "\n"), "via=link") {
			break
		}
	}
	for _, line := range st.requests() {
		dec, _ := url.QueryUnescape(line)
		if strings.Contains(strings.ToLower(dec), email) || !strings.HasPrefix(line, "GET ") {
			t.Errorf("reached the site: %s", line)
		}
	}
	got := strings.Join(st.requests(), "\n")
	for _, want := range []string{"GET /hostile", "GET /ok?via=fetch", "GET /ok?via=link"} {
		if !strings.Contains(got, want) {
			t.Errorf("the site never saw %q:\n%s", want, got)
		}
	}
	mu.Lock()
	kinds := map[string]int{}
	for _, r := range refusals {
		if r.Layer != netpolicy.LayerNetwork {
			t.Errorf("refusal at layer %q", r.Layer)
		}
		kinds[r.Kind+" "+r.Verdict.Reason]++
		t.Logf("refused: %+v", r)
	}
	mu.Unlock()
	t.Logf("refusals: %v\nsite: %v", kinds, st.requests())
	for _, want := range []string{"XHR submit.blocked", "Ping submit.blocked", "Image submit.by_get", "Document submit.by_get", "Document submit.blocked"} {
		if kinds[want] == 0 {
			t.Errorf("no refusal %q: %v", want, kinds)
		}
	}
	// the page stayed on /hostile (the meta refresh was aborted, no error page committed)
	vals, err := s.Evaluate(ctx, "location.href")
	if err != nil {
		t.Fatal(err)
	}
	var href string
	json.Unmarshal(vals[0].Value, &href)
	if !strings.HasSuffix(href, "/hostile") {
		t.Errorf("the page is at %s", href)
	}
}

// testLog writes the session's log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestFloodAndPopups: a page that sends 2,000 refused requests and opens 200 popups: every
// request is decided (the site sees none of the refused ones), no more than MaxTargets
// targets are ever attached, and the session still answers a command afterwards.
func TestFloodAndPopups(t *testing.T) {
	policy := netpolicy.New(netpolicy.ModeFillAndReview, nil, nil)
	policy.AddTyped(email)
	st := newSite(t)
	st.srv.Config.Handler = floodHandler(st, st.srv.Config.Handler)
	_, s := startBrowser(t, policy, 8)
	pg := pageTarget(t, s)
	ctx := context.Background()
	if _, err := s.Call(ctx, pg.session, "Page.navigate", map[string]any{"url": st.srv.URL + "/flood"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, _, refused := s.Stats(); refused >= 2000 && s.closedTargets.Load() > 0 {
			break
		}
	}
	held, _, refused := s.Stats()
	if refused < 2000 {
		t.Errorf("refused %d of 2,000 (held %d)", refused, held)
	}
	s.mu.Lock()
	n := len(s.targets)
	s.mu.Unlock()
	if n > 8 {
		t.Errorf("%d targets attached, want at most 8", n)
	}
	if c := s.closedTargets.Load(); c == 0 {
		t.Errorf("no popup was closed (did the page open any?)")
	} else {
		t.Logf("%d popups closed past the bound", c)
	}
	for _, line := range st.requests() {
		if strings.Contains(line, "/sink/") {
			t.Errorf("reached the site: %s", line)
		}
	}
	if _, err := s.Evaluate(ctx, "1+1"); err != nil {
		t.Errorf("the session no longer answers: %v", err)
	}
}

// floodHandler serves /flood (2,000 POSTs and GETs carrying the email, and 200 popups)
// before h.
func floodHandler(st *site, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/flood" {
			h.ServeHTTP(w, r)
			return
		}
		st.mu.Lock()
		st.log = append(st.log, r.Method+" "+r.URL.String())
		st.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>flood</title><script>
for (let i = 0; i < 1000; i++) { fetch("/sink/p" + i, {method: "POST", body: "x"}).catch(() => {}); fetch("/sink/g" + i + "?e=`+email+`").catch(() => {}); }
for (let i = 0; i < 200; i++) window.open("/ok?popup=" + i, "_blank");
</script>`)
	})
}

// TestLost: when the browser goes away, Lost is closed and calls fail with ErrLost.
func TestLost(t *testing.T) {
	policy := netpolicy.New(netpolicy.ModeFillAndReview, nil, nil)
	p, s := startBrowser(t, policy, 0)
	pageTarget(t, s)
	// the browser process alone (its helpers left to notice), as a crash would
	if err := killBrowser(p); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost not closed 30 s after the browser stopped")
	}
	if _, err := s.Evaluate(context.Background(), "1"); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Evaluate after the loss: %v", err)
	}
}

// killBrowser kills the browser process itself (SIGKILL), as a crash would.
func killBrowser(p *browser.Process) error {
	pid := p.PID()
	if pid <= 0 {
		return fmt.Errorf("no browser pid")
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// TestNewContextsOnly: attached to a browser the owner already uses (a page of its default
// context that POSTs every 200 ms), with NewContextsOnly the session leaves that page alone
// (its POSTs go on reaching the site) and holds a page of a browser context made
// afterwards, as @playwright/mcp's --isolated context is: its POST, carrying nothing typed,
// is refused all the same (no POST before the owner's submit).
func TestNewContextsOnly(t *testing.T) {
	policy := netpolicy.New(netpolicy.ModeFillAndReview, []string{"127.0.0.1"}, nil)
	st := newSite(t)
	exe := testtool.Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := browser.Start(ctx, exe, browser.Options{}, st.srv.URL+"/owner", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	waitSeen(t, st, "POST /sink/owner", 0)
	s, err := Attach(ctx, Options{URL: p.CDP, Policy: policy, Log: testLog{t}, NewContextsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// a second client (standing in for @playwright/mcp) makes the run's context and a page
	conn, err := remote.DialContext(ctx, p.CDP)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var lastID int64
	call := func(method string, params any) json.RawMessage {
		t.Helper()
		b, _ := json.Marshal(params)
		lastID++
		id := lastID
		if err := conn.Write(ctx, &cdproto.Message{ID: id, Method: cdproto.MethodType(method), Params: b}); err != nil {
			t.Fatal(err)
		}
		for {
			var m cdproto.Message
			if err := conn.Read(ctx, &m); err != nil {
				t.Fatal(err)
			}
			if m.ID == id {
				if m.Error != nil {
					t.Fatalf("%s: %s", method, m.Error.Message)
				}
				return json.RawMessage(m.Result)
			}
		}
	}
	var bc struct {
		ID string `json:"browserContextId"`
	}
	json.Unmarshal(call("Target.createBrowserContext", map[string]any{"disposeOnDetach": true}), &bc)
	call("Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": bc.ID})
	var held target
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && held.session == ""; time.Sleep(20 * time.Millisecond) {
		for _, pg := range s.pages(false) {
			held = pg
		}
	}
	if held.session == "" || held.context != bc.ID {
		t.Fatalf("the new context's page is not held: %+v", held)
	}
	if n := s.HeldPages(); n != 1 {
		t.Errorf("HeldPages = %d, want 1 (the owner's page is not held)", n)
	}
	if _, err := s.Call(ctx, held.session, "Page.navigate", map[string]any{"url": st.srv.URL + "/ok?held=1"}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, st, "GET /ok?held=1", 0)
	if _, err := s.Call(ctx, held.session, "Runtime.evaluate", map[string]any{"expression": `fetch("/sink/held", {method: "POST", body: "x"}).then(() => 1, () => 0)`, "awaitPromise": true}); err != nil {
		t.Fatal(err)
	}
	if _, _, refused := s.Stats(); refused == 0 {
		t.Errorf("the held page's POST was not refused")
	}
	// the owner's page is not held: its POSTs keep arriving after the guard attached
	waitSeen(t, st, "POST /sink/owner", len(st.requests()))
	for _, line := range st.requests() {
		if strings.HasPrefix(line, "POST /sink/held") {
			t.Errorf("reached the site from the held context: %s", line)
		}
	}
}

// waitSeen waits (up to 30 s) until the site has seen a request line starting with want,
// among its requests from the after-th on.
func waitSeen(t *testing.T, st *site, want string, after int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, l := range st.requests()[after:] {
			if strings.HasPrefix(l, want) {
				return
			}
		}
	}
	t.Fatalf("the site never saw %q: %v", want, st.requests())
}
