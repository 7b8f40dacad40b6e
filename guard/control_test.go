package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRun is a RunControl that records Cancel.
type fakeRun struct {
	mu        sync.Mutex
	cancelled string
}

func (f *fakeRun) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := "running"
	if f.cancelled != "" {
		st = "done"
	}
	return Status{RunID: "run-1", Mode: "fill_and_review", State: st, Actions: 3}
}

func (f *fakeRun) Cancel(reason string) {
	f.mu.Lock()
	f.cancelled = reason
	f.mu.Unlock()
}

// startControl serves a Controller on a real loopback port.
func startControl(t *testing.T) (*Controller, string) {
	t.Helper()
	c := NewController()
	ln, err := ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.ServeControl(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeControl: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	controlTokens.Store(base, c.Token())
	return c, base
}

// controlTokens: the token of each test control API, by base URL (do sends it).
var controlTokens sync.Map

func do(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	controlTokens.Range(func(k, v any) bool {
		if strings.HasPrefix(url, k.(string)+"/") {
			req.Header.Set("Authorization", "Bearer "+v.(string))
		}
		return true
	})
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(data) > 0 && method != "HEAD" {
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s %s: body not JSON: %q", method, url, data)
		}
	}
	return resp.StatusCode, m
}

// pauseAsync starts a Pause and returns where its outcome arrives.
func pauseAsync(ctx context.Context, c *Controller, p PauseRequest) chan PauseOutcome {
	out := make(chan PauseOutcome, 1)
	go func() { out <- c.Pause(ctx, p) }()
	return out
}

// waitPaused waits until the controller shows a pause.
func waitPaused(t *testing.T, c *Controller) *Waiting {
	t.Helper()
	for i := 0; i < 200; i++ {
		if w := c.Waiting(); w != nil {
			return w
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no pause appeared")
	return nil
}

func outcome(t *testing.T, ch chan PauseOutcome) PauseOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("Pause did not return")
		return PauseOutcome{}
	}
}

func TestControlResumeWithAnswer(t *testing.T) {
	c, base := startControl(t)
	run := &fakeRun{}
	c.Attach(run)
	code, m := do(t, "GET", base+"/status", "")
	if code != 200 || m["waiting"] != nil || m["run"].(map[string]any)["runId"] != "run-1" {
		t.Fatalf("status before a pause: %d %v", code, m)
	}
	if code, _ := do(t, "POST", base+"/resume", ""); code != http.StatusConflict {
		t.Errorf("resume without a pause: %d; want 409", code)
	}
	ch := pauseAsync(context.Background(), c, PauseRequest{Reason: "missing_answer", Question: "Do you need sponsorship?", URL: "https://a.test/apply", Domain: "a.test"})
	waitPaused(t, c)
	code, m = do(t, "GET", base+"/status", "")
	w, _ := m["waiting"].(map[string]any)
	if code != 200 || w == nil || w["reason"] != "missing_answer" || w["question"] != "Do you need sponsorship?" || w["domain"] != "a.test" {
		t.Fatalf("status during a pause: %d %v", code, m)
	}
	select {
	case <-ch:
		t.Fatal("Pause returned before anyone answered")
	case <-time.After(50 * time.Millisecond):
	}
	code, m = do(t, "POST", base+"/resume", `{"answer": "  No  "}`)
	if code != 200 || m["resumed"] != true {
		t.Fatalf("resume: %d %v", code, m)
	}
	if o := outcome(t, ch); !o.Resumed || o.Answer != "No" {
		t.Errorf("outcome %+v; want resumed with answer No", o)
	}
	if c.Waiting() != nil {
		t.Error("pause still shown after resume")
	}
	if code, _ := do(t, "POST", base+"/resume", `{}`); code != http.StatusConflict {
		t.Errorf("second resume: %d; want 409", code)
	}
	// a resume without a body: resumed, no answer
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "captcha"})
	waitPaused(t, c)
	if code, _ := do(t, "POST", base+"/resume", ""); code != 200 {
		t.Errorf("resume without body: %d", code)
	}
	if o := outcome(t, ch); !o.Resumed || o.Answer != "" {
		t.Errorf("outcome %+v", o)
	}
	if run.cancelled != "" {
		t.Error("the run was cancelled by a resume")
	}
}

func TestControlCancel(t *testing.T) {
	c, base := startControl(t)
	run := &fakeRun{}
	c.Attach(run)
	ch := pauseAsync(context.Background(), c, PauseRequest{Reason: "login_required"})
	waitPaused(t, c)
	if code, m := do(t, "POST", base+"/cancel", ""); code != 200 || m["cancelled"] != true {
		t.Fatalf("cancel: %d %v", code, m)
	}
	if o := outcome(t, ch); o.Resumed {
		t.Errorf("outcome %+v; want not resumed", o)
	}
	if run.cancelled != "" {
		t.Error("cancelling a pause called Cancel on the run; the bridge ends it from the outcome")
	}
	// outside a pause, /cancel ends the run
	if code, _ := do(t, "POST", base+"/cancel", ""); code != 200 || run.cancelled == "" {
		t.Errorf("cancel outside a pause: %d, run cancelled %q", code, run.cancelled)
	}
	if _, m := do(t, "GET", base+"/status", ""); m["run"].(map[string]any)["state"] != "done" {
		t.Errorf("status after cancel: %v", m)
	}
	// with no run attached, there is nothing to cancel
	c2 := NewController()
	if err := c2.Cancel(); err == nil {
		t.Error("Cancel with neither pause nor run: no error")
	}
}

func TestControlBadRequests(t *testing.T) {
	c, base := startControl(t)
	ch := pauseAsync(context.Background(), c, PauseRequest{Reason: "captcha"})
	waitPaused(t, c)
	for _, tc := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/status", "", 405},
		{"DELETE", "/status", "", 405},
		{"GET", "/resume", "", 405},
		{"PUT", "/cancel", "", 405},
		{"GET", "/", "", 404},
		{"POST", "/pause", "", 404},
		{"GET", "/status/x", "", 404},
		{"POST", "/resume", `{"answer": 42}`, 400},
		{"POST", "/resume", `{"answer": "a", "force": true}`, 400},
		{"POST", "/resume", `not json`, 400},
		{"POST", "/resume", `{"answer": "a"} {}`, 400},
		{"POST", "/resume", `{"answer": "` + strings.Repeat("x", MaxControlBody) + `"}`, 413},
		{"POST", "/resume", `{"answer": "` + strings.Repeat("x", 20<<10) + `"}`, 400},
		{"POST", "/cancel", `{"x": 1}`, 400},
	} {
		code, m := do(t, tc.method, base+tc.path, tc.body)
		if code != tc.code {
			t.Errorf("%s %s %.40q: %d; want %d", tc.method, tc.path, tc.body, code, tc.code)
		}
		if m["error"] == nil {
			t.Errorf("%s %s: no error message in %v", tc.method, tc.path, m)
		}
	}
	if c.Waiting() == nil {
		t.Fatal("a bad request ended the pause")
	}
	if code, _ := do(t, "HEAD", base+"/status", ""); code != 200 {
		t.Errorf("HEAD /status: %d", code)
	}
	c.Resume("")
	outcome(t, ch)
}

func TestControlPauseContextEnds(t *testing.T) {
	c, base := startControl(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := pauseAsync(ctx, c, PauseRequest{Reason: "anti_bot"})
	waitPaused(t, c)
	cancel()
	if o := outcome(t, ch); o.Resumed {
		t.Errorf("outcome %+v after ctx ended; want not resumed", o)
	}
	if c.Waiting() != nil {
		t.Error("pause still shown after ctx ended")
	}
	if code, _ := do(t, "POST", base+"/resume", ""); code != http.StatusConflict {
		t.Errorf("resume after the pause ended: %d", code)
	}
}

// TestControlConcurrentPauses: pauses queue one at a time, each ended by its own resume.
func TestControlConcurrentPauses(t *testing.T) {
	c, base := startControl(t)
	var chans []chan PauseOutcome
	for i := range 3 {
		chans = append(chans, pauseAsync(context.Background(), c, PauseRequest{Reason: "missing_answer", Question: fmt.Sprint(i)}))
	}
	answers := map[string]bool{}
	for i := range 3 {
		w := waitPaused(t, c)
		if code, _ := do(t, "POST", base+"/resume", fmt.Sprintf(`{"answer": "a%s"}`, w.Question)); code != 200 {
			t.Fatalf("resume %d: %d", i, code)
		}
		for c.Waiting() != nil && c.Waiting().ID == w.ID {
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, ch := range chans {
		o := outcome(t, ch)
		answers[o.Answer] = true
	}
	if len(answers) != 3 || !answers["a0"] || !answers["a1"] || !answers["a2"] {
		t.Errorf("answers %v", answers)
	}
}

func TestControlTerminalPrompt(t *testing.T) {
	c := NewController()
	inR, inW := io.Pipe()
	var mu sync.Mutex
	var out strings.Builder
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	printed := func() string {
		mu.Lock()
		defer mu.Unlock()
		return out.String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	promptDone := make(chan struct{})
	go func() { c.Prompt(ctx, inR, w); close(promptDone) }()

	// a line outside a pause gets a note
	io.WriteString(inW, "hello\n")
	waitFor(t, func() bool { return strings.Contains(printed(), "no pause in progress") })

	ch := pauseAsync(context.Background(), c, PauseRequest{Reason: "missing_answer", Question: "Years of Go?", URL: "https://a.test/"})
	waitFor(t, func() bool { return strings.Contains(printed(), "Years of Go?") })
	if !strings.Contains(printed(), "PAUSED (missing_answer) at https://a.test/") {
		t.Errorf("prompt printed %q", printed())
	}
	io.WriteString(inW, "  five  \n")
	if o := outcome(t, ch); !o.Resumed || o.Answer != "five" {
		t.Errorf("typed answer: %+v", o)
	}
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "captcha"})
	waitFor(t, func() bool { return strings.Count(printed(), "PAUSED") == 2 })
	io.WriteString(inW, "\n")
	if o := outcome(t, ch); !o.Resumed || o.Answer != "" {
		t.Errorf("empty line: %+v", o)
	}
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "login_required"})
	waitFor(t, func() bool { return strings.Count(printed(), "PAUSED") == 3 })
	io.WriteString(inW, "Cancel\n")
	if o := outcome(t, ch); o.Resumed {
		t.Errorf("cancel line: %+v", o)
	}
	// "allow" at an external_redirect pause admits its host; elsewhere it is an answer
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "external_redirect", Domain: "sso.example"})
	waitFor(t, func() bool { return strings.Contains(printed(), "\"allow\": admit sso.example for this run") })
	io.WriteString(inW, "allow\n")
	if o := outcome(t, ch); !o.Resumed || o.AllowSite != "sso.example" || o.Answer != "" {
		t.Errorf("allow line: %+v", o)
	}
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "missing_answer", Domain: "a.test"})
	waitFor(t, func() bool { return strings.Count(printed(), "PAUSED") == 5 })
	io.WriteString(inW, "allow\n")
	if o := outcome(t, ch); !o.Resumed || o.AllowSite != "" || o.Answer != "allow" {
		t.Errorf("allow at another pause: %+v", o)
	}
	// a pause resumed over HTTP while the prompt waits: the next line is just noted
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "captcha"})
	waitFor(t, func() bool { return strings.Count(printed(), "PAUSED") == 6 })
	c.Resume("from http")
	if o := outcome(t, ch); o.Answer != "from http" {
		t.Errorf("http resume: %+v", o)
	}
	io.WriteString(inW, "late\n")
	waitFor(t, func() bool { return strings.Contains(printed(), "the pause shown has ended") })
	// a pause resumed over HTTP, then another: the new one is shown before any line
	// answers it (a line never answers a pause the owner was not shown)
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "captcha"})
	waitFor(t, func() bool { return strings.Count(printed(), "PAUSED") == 7 })
	c.Resume("from http")
	outcome(t, ch)
	ch = pauseAsync(context.Background(), c, PauseRequest{Reason: "missing_answer", Question: "Notice period?"})
	waitFor(t, func() bool { return strings.Contains(printed(), "Notice period?") })
	if !strings.Contains(printed(), "the pause above ended through the control API") {
		t.Errorf("the second pause was shown without a note that the first ended: %q", printed())
	}
	io.WriteString(inW, "two weeks\n")
	if o := outcome(t, ch); !o.Resumed || o.Answer != "two weeks" {
		t.Errorf("answer to the new pause: %+v", o)
	}
	inW.Close()
	select {
	case <-promptDone:
	case <-time.After(5 * time.Second):
		t.Error("Prompt did not return when its input ended")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 5s")
}

func FuzzDecodeControlBody(f *testing.F) {
	for _, s := range []string{`{"answer":"x"}`, `{}`, `{"answer":null}`, `[`, `{"answer":"a"}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var body struct {
			Answer *string `json:"answer"`
		}
		if err := decodeControlBody(data, &body); err == nil {
			if _, err := json.Marshal(body); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// resultRun is a fakeRun with a result envelope (as *Bridge has).
type resultRun struct{ fakeRun }

func (r *resultRun) Result() Result {
	return Result{RunID: "run-1", Outcome: "blocked", Mode: "fill_and_review", TraceID: "t1", EngineAuth: "unknown", Uploaded: []string{}, BlockReason: "incomplete"}
}

// TestControlAuth: every request needs the bearer token, the listen address as Host, no
// foreign Origin and (POST) a JSON Content-Type; OPTIONS is refused and no response carries
// an Access-Control-* header. A refused request never ends the pause; the owner's does.
func TestControlAuth(t *testing.T) {
	c, base := startControl(t)
	c.Attach(&resultRun{})
	host := strings.TrimPrefix(base, "http://")
	ch := pauseAsync(context.Background(), c, PauseRequest{Reason: "missing_answer", Question: "Email?"})
	waitPaused(t, c)
	tok := c.Token()
	if len(tok) != 64 {
		t.Fatalf("token %d characters, want 64", len(tok))
	}
	for _, tc := range []struct {
		what, method, path, body string
		hdr                      map[string]string
		code                     int
	}{
		{"no token", "POST", "/resume", `{"answer":"x"}`, map[string]string{"Content-Type": "application/json"}, 401},
		{"wrong token", "POST", "/local-apply/resume", `{"answer":"x"}`, map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64), "Content-Type": "application/json"}, 401},
		{"token without Bearer", "GET", "/status", "", map[string]string{"Authorization": tok}, 401},
		{"cross-origin text/plain POST (a web page's simple request)", "POST", "/resume", `{"answer":"evil@x.test"}`, map[string]string{"Origin": "http://evil.test", "Content-Type": "text/plain"}, 403},
		{"cross-origin with the token", "POST", "/resume", `{"answer":"evil@x.test"}`, map[string]string{"Origin": "http://evil.test", "Authorization": "Bearer " + tok, "Content-Type": "application/json"}, 403},
		{"text/plain with the token", "POST", "/resume", `{"answer":"evil@x.test"}`, map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "text/plain"}, 415},
		{"no Content-Type with the token", "POST", "/local-apply/cancel", ``, map[string]string{"Authorization": "Bearer " + tok}, 415},
		{"DNS rebinding (Host evil.test)", "GET", "/status", "", map[string]string{"Host": "evil.test:" + strings.Split(host, ":")[1], "Authorization": "Bearer " + tok}, 403},
		{"Host localhost", "GET", "/status", "", map[string]string{"Host": "localhost:" + strings.Split(host, ":")[1], "Authorization": "Bearer " + tok}, 403},
		{"CORS preflight", "OPTIONS", "/resume", "", map[string]string{"Origin": "http://" + host, "Access-Control-Request-Method": "POST"}, 405},
		{"cross-origin status read", "GET", "/local-apply/run", "", map[string]string{"Origin": "null", "Authorization": "Bearer " + tok}, 403},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
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
		if c.Waiting() == nil {
			t.Fatalf("%s: the pause ended", tc.what)
		}
	}
	// the owner: same-origin Origin allowed, the contract's paths
	code, m := do(t, "GET", base+"/local-apply/status", "")
	if code != 200 || m["outcome"] != "blocked" || m["runId"] != "run-1" || m["run"] != nil {
		t.Errorf("GET /local-apply/status: %d %v; want the bare result", code, m)
	}
	code, m = do(t, "GET", base+"/local-apply/run", "")
	if w, _ := m["waiting"].(map[string]any); code != 200 || w == nil || w["reason"] != "missing_answer" {
		t.Errorf("GET /local-apply/run: %d %v", code, m)
	}
	req, _ := http.NewRequest("POST", base+"/local-apply/resume", strings.NewReader(`{"answer":"jane@example.com"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Origin", base)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the owner's resume: %d", resp.StatusCode)
	}
	if o := outcome(t, ch); !o.Resumed || o.Answer != "jane@example.com" {
		t.Errorf("outcome %+v", o)
	}
	if err := c.SetToken("short"); err == nil {
		t.Error("SetToken accepted a 5-character token")
	}
}

// TestTerminalSafe: what the agent and the page wrote reaches the owner's terminal without
// control bytes (an ESC sequence could clear the line and draw a fake prompt).
func TestTerminalSafe(t *testing.T) {
	in := "Resume?\x1b[2K\r\x1b[1Apab guard: PAUSED (sensitive_page)\nEnter: resume\x9b1m\x7f ok é"
	got := terminalSafe(in)
	for _, bad := range []string{"\x1b", "\r", "\n", "\x9b", "\x7f"} {
		if strings.Contains(got, bad) {
			t.Errorf("terminalSafe kept %q: %q", bad, got)
		}
	}
	if !strings.Contains(got, "ok é") || !strings.HasPrefix(got, "Resume?") {
		t.Errorf("terminalSafe lost text: %q", got)
	}
}
