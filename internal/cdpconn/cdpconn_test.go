package cdpconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/testtool"
)

// busyPage changes its DOM and logs to the console every few milliseconds, as a page that is
// still loading does: the case where chromedp's attach to a running target races.
const busyPage = `<!doctype html><title>busy page</title><body><p id=n>0</p>
<script>
let n = 0;
setInterval(() => {
  n++;
  document.getElementById("n").textContent = n;
  const d = document.createElement("div"); d.className = "c" + n; document.body.appendChild(d);
  if (document.body.children.length > 50) document.body.removeChild(document.body.children[1]);
  console.log("tick", n);
}, 2);
</script>`

// startBusy starts headless Chromium on a loopback page that never stops changing, and
// returns the browser and the page's URL.
func startBusy(t *testing.T) (*browser.Process, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, busyPage)
	}))
	t.Cleanup(srv.Close)
	exe := testtool.Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := srv.URL + "/busy"
	p, err := browser.Start(ctx, exe, browser.Options{}, url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, url
}

// pageOf waits (at most a minute) for the page target at url and returns its id.
func pageOf(t *testing.T, c *Conn, url string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ts, err := c.Targets(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range ts {
			if ti.Type == "page" && ti.URL == url && ti.Title == "busy page" {
				return ti.TargetID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no loaded page at %s among %+v", url, ts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAttachEvaluate: a session on a page that runs already and keeps changing answers in the
// page's main world (its own globals), by value; undefined, a thrown error, an answer over
// MaxValueBytes, an unknown command and a value of the wrong type are told apart; after
// Close every call is ErrLost.
func TestAttachEvaluate(t *testing.T) {
	p, url := startBusy(t)
	ctx := context.Background()
	c, err := Dial(ctx, p.CDP, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Events() != nil {
		t.Errorf("Events() of a connection without events: not nil")
	}
	session, err := c.Attach(ctx, pageOf(t, c, url))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Title string
		N     int
		Href  string
	}
	if err := c.Evaluate(ctx, session, `({Title: document.title, N: n, Href: location.href})`, &got); err != nil {
		t.Fatal(err)
	}
	// n is the page's own global (an isolated world would throw a ReferenceError); it may
	// still be 0 on a busy machine, before the page's first tick
	if got.Title != "busy page" || got.Href != url || got.N < 0 {
		t.Errorf("main world answered %+v, want the page's title, URL and its own counter n", got)
	}
	var later int
	if err := c.Evaluate(ctx, session, `new Promise((ok) => { const i = setInterval(() => { if (n > `+fmt.Sprint(got.N)+`) { clearInterval(i); ok(n); } }, 1); })`, &later); err != nil || later <= got.N {
		t.Errorf("an awaited promise: %d (%v), want more than %d", later, err, got.N)
	}
	var undef = 7
	if err := c.Evaluate(ctx, session, `undefined`, &undef); err != nil {
		t.Errorf("undefined: %v", err)
	}
	if err := c.Evaluate(ctx, session, `(() => { throw new Error("boom in the page") })()`, nil); err == nil || !strings.Contains(err.Error(), "boom in the page") {
		t.Errorf("a thrown error: %v, want its message", err)
	}
	if err := c.Evaluate(ctx, session, `"x".repeat(2 << 20)`, new(string)); err == nil || !strings.Contains(err.Error(), "answer over") {
		t.Errorf("a 2 MiB answer: %v, want an error", err)
	}
	if err := c.Evaluate(ctx, session, `"text"`, new(int)); err == nil {
		t.Errorf("a string read into an int: no error")
	}
	if _, err := c.Call(ctx, session, "No.such", nil); err == nil || !strings.Contains(err.Error(), "No.such") {
		t.Errorf("unknown command: %v", err)
	}
	c.Detach(session)
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := c.Call(ctx, "", "Target.getTargets", nil); !errors.Is(err, ErrLost) {
		t.Errorf("Call after Close: %v, want ErrLost", err)
	}
	if c.Err() != nil {
		t.Errorf("Err after Close (not a loss): %v", c.Err())
	}
}

// TestEventsUnread: a connection whose events nobody reads still answers while its queue has
// room, and Close returns even when the reader waits on a full queue.
func TestEventsUnread(t *testing.T) {
	p, url := startBusy(t)
	ctx := context.Background()
	c, err := Dial(ctx, p.CDP, Options{Events: 4})
	if err != nil {
		t.Fatal(err)
	}
	session, err := c.Attach(ctx, pageOf(t, c, url))
	if err != nil {
		t.Fatal(err)
	}
	// Runtime.enable: a console event every 2 ms from now on, never read
	c.Send(session, "Runtime.enable", nil)
	deadline := time.Now().Add(30 * time.Second)
	for len(c.Events()) < cap(c.Events()) {
		if time.Now().After(deadline) {
			t.Fatalf("%d events queued after 30 s, want %d", len(c.Events()), cap(c.Events()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with the event queue full")
	}
	n := 0
	for range c.Events() {
		n++
	}
	if n < cap(c.Events()) {
		t.Errorf("%d events delivered before the queue closed, want the %d queued", n, cap(c.Events()))
	}
}

// TestConcurrentCalls: calls from several goroutines on the browser and on sessions of the
// same page, while the page's events flow and one reader takes them, each get their own
// answer.
func TestConcurrentCalls(t *testing.T) {
	p, url := startBusy(t)
	ctx := context.Background()
	c, err := Dial(ctx, p.CDP, Options{Events: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		for range c.Events() {
		}
	}()
	id := pageOf(t, c, url)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session, err := c.Attach(ctx, id)
			if err != nil {
				errs <- err
				return
			}
			defer c.Detach(session)
			c.Send(session, "Runtime.enable", nil)
			for i := 0; i < 20; i++ {
				var v int
				if err := c.Evaluate(ctx, session, fmt.Sprintf("%d * 1000 + %d", g, i), &v); err != nil || v != g*1000+i {
					errs <- fmt.Errorf("goroutine %d call %d: %d, %v", g, i, v, err)
				}
				if _, err := c.Targets(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLost: when the browser goes away, Lost is closed, Err wraps ErrLost and calls fail
// with ErrLost; Close still returns.
func TestLost(t *testing.T) {
	p, _ := startBusy(t)
	c, err := Dial(context.Background(), p.CDP, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost not closed 30 s after the browser was killed")
	}
	if !errors.Is(c.Err(), ErrLost) {
		t.Errorf("Err: %v, want ErrLost", c.Err())
	}
	if _, err := c.Call(context.Background(), "", "Target.getTargets", nil); !errors.Is(err, ErrLost) {
		t.Errorf("Call after the loss: %v, want ErrLost", err)
	}
	c.Close()
}

// TestFail: Fail ends a call that waits for an answer that never comes, at once and with
// Err, and every later call fails the same way, though the browser would still answer it.
func TestFail(t *testing.T) {
	p, url := startBusy(t)
	ctx := context.Background()
	c, err := Dial(ctx, p.CDP, Options{CallTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	session, err := c.Attach(ctx, pageOf(t, c, url))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Evaluate(ctx, session, `new Promise(() => {})`, nil) }()
	for waiting := 0; waiting == 0; { // the call is sent: its answer is awaited
		c.mu.Lock()
		waiting = len(c.waiting)
		c.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	c.Fail(errors.New("the browser's process ended"))
	select {
	case err := <-done:
		if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "process ended") {
			t.Errorf("the waiting call: %v, want Err", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiting call still waits a minute after Fail")
	}
	// the browser still answers on this socket: none of those answers may be taken
	for i := 0; i < 50; i++ {
		if _, err := c.Targets(ctx); !errors.Is(err, ErrLost) {
			t.Fatalf("call %d after Fail: %v, want Err", i, err)
		}
	}
}

// TestDialRefused: no browser at the address is an error naming it, within the call timeout.
func TestDialRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/devtools/browser/x"
	srv.Close()
	if _, err := Dial(context.Background(), url, Options{CallTimeout: 5 * time.Second}); err == nil || !strings.Contains(err.Error(), url) {
		t.Errorf("Dial to a closed port: %v, want an error naming %s", err, url)
	}
}

// FuzzRuntimeResult: any answer of Runtime.evaluate, from a browser that may be hostile, is
// read without a panic; a value is never over MaxValueBytes and comes only without an error.
func FuzzRuntimeResult(f *testing.F) {
	f.Add([]byte(`{"result":{"type":"number","value":7}}`))
	f.Add([]byte(`{"result":{"type":"object","subtype":"node","objectId":"1.2.3"}}`))
	f.Add([]byte(`{"result":{"type":"object"},"exceptionDetails":{"text":"Uncaught","exception":{"description":"Error: boom"}}}`))
	f.Add([]byte(`{"exceptionDetails":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, res []byte) {
		v, _, err := RuntimeResult("Runtime.evaluate", res)
		if err != nil && v != nil {
			t.Errorf("a value (%d bytes) with an error: %v", len(v), err)
		}
		if len(v) > MaxValueBytes {
			t.Errorf("a value of %d bytes", len(v))
		}
	})
}
