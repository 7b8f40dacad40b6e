package main

// Page clock tests: real Chromium through a real `pab replay` of a bundle written here.

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/browser/cdpalloc"
	"github.com/pab-dev/pab/recording"
)

// clockCapturedFrom is the recording time of the bundle the clock tests replay.
var clockCapturedFrom = time.Date(2018, 11, 11, 22, 56, 36, 0, time.UTC)

// writeClockBundle writes a bundle with two pages recorded at clockCapturedFrom: / and /csp,
// whose policy (script-src 'self') blocks its own inline script that would set
// window.inlineRan.
func writeClockBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clock-bundle")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "clock-test"})
	if err != nil {
		t.Fatal(err)
	}
	pages := []struct {
		url, csp, body string
	}{
		{"http://clock.test/", "", "<!doctype html><html><head><title>clock</title></head><body>clock</body></html>"},
		{"http://clock.test/csp", "script-src 'self'",
			"<!doctype html><html><head><title>csp</title><script>window.inlineRan = true;</script></head><body>csp</body></html>"},
		// a secure context: crypto.randomUUID exists only there
		{"https://clock.test/secure", "", "<!doctype html><html><head><title>secure</title></head><body>secure</body></html>"},
	}
	for _, p := range pages {
		h := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
		if p.csp != "" {
			h.Set("Content-Security-Policy", p.csp)
		}
		if _, err := w.Add(recording.Exchange{URL: p.url, Date: clockCapturedFrom, Status: 200, RespHeader: h,
			Body: []byte(p.body), ResourceType: "document"}); err != nil {
			t.Fatal(err)
		}
		if err := w.AddPage(recording.Page{URL: p.url, TS: recording.FormatTime(clockCapturedFrom), Fetched: "GET"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// clockChrome starts headless Chromium through the proxy at addr.
func clockChrome(t *testing.T, addr string) context.Context {
	t.Helper()
	opts := cdpalloc.Options(chromiumPath(t), browser.Options{Proxy: addr, Profile: t.TempDir()})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // start the browser without a deadline
		t.Fatalf("start chromium: %v", err)
	}
	nctx, ncancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(ncancel)
	return nctx
}

// pageClock is what a page reports about its clock.
type pageClock struct {
	Now       float64 `json:"now"`       // Date.now()
	Elapsed   float64 `json:"elapsed"`   // performance.now(): ms since the page started
	NewDate   float64 `json:"newDate"`   // new Date().getTime()
	DateStr   string  `json:"dateStr"`   // Date()
	Epoch     float64 `json:"epoch"`     // new Date(0).getTime()
	IsDate    bool    `json:"isDate"`    // new Date() instanceof Date
	Inline    bool    `json:"inline"`    // window.inlineRan
	ProtoSame bool    `json:"protoSame"` // Object.getPrototypeOf(new Date()) === Date.prototype
}

const pageClockJS = `({now: Date.now(), elapsed: performance.now(), newDate: new Date().getTime(), dateStr: Date(),
	epoch: new Date(0).getTime(), isDate: new Date() instanceof Date, inline: window.inlineRan === true,
	protoSame: Object.getPrototypeOf(new Date()) === Date.prototype})`

func loadPageClock(t *testing.T, ctx context.Context, url string) pageClock {
	t.Helper()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(url))
	if err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
	if resp.Status != 200 {
		t.Fatalf("navigate %s: status %d", url, resp.Status)
	}
	pc, err := chromedp.Run(ctx, chromedp.Evaluate[pageClock](pageClockJS))
	if err != nil {
		t.Fatalf("evaluate on %s: %v", url, err)
	}
	return pc
}

// TestPageClockInChromium: with the clock on, a replayed page's Date.now() is captured_from
// plus (at most) the time since the page started; new Date(x), instanceof and the prototype
// behave as before.
func TestPageClockInChromium(t *testing.T) {
	chromiumPath(t)
	p := startReplay(t, writeClockBundle(t))
	ctx := clockChrome(t, p.addr)
	pc := loadPageClock(t, ctx, "http://clock.test/")
	want := float64(clockCapturedFrom.UnixMilli()) + pc.Elapsed
	if d := pc.Now - want; d < -5000 || d > 5000 {
		t.Errorf("Date.now() = %s, want about %s (captured_from + %.0f ms)",
			time.UnixMilli(int64(pc.Now)).UTC().Format(time.RFC3339), time.UnixMilli(int64(want)).UTC().Format(time.RFC3339), pc.Elapsed)
	}
	if d := pc.NewDate - pc.Now; d < 0 || d > 5000 {
		t.Errorf("new Date() = %.0f, Date.now() = %.0f", pc.NewDate, pc.Now)
	}
	if got := pc.DateStr; len(got) < 15 || got[11:15] != "2018" {
		t.Errorf("Date() = %q, want a 2018 date", got)
	}
	if pc.Epoch != 0 || !pc.IsDate || !pc.ProtoSame {
		t.Errorf("Date with arguments or its prototype changed: %+v", pc)
	}
}

// TestPageClockOff: with --clock off or RR_CLOCK=off the page sees the machine's time.
func TestPageClockOff(t *testing.T) {
	chromiumPath(t)
	bundle := writeClockBundle(t)
	for _, tc := range []struct {
		name  string
		env   string
		extra []string
	}{
		{"flag", "", []string{"--clock", "off"}},
		{"env", "off", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RR_CLOCK", tc.env)
			p := startReplay(t, bundle, tc.extra...)
			ctx := clockChrome(t, p.addr)
			pc := loadPageClock(t, ctx, "http://clock.test/")
			if d := pc.Now - float64(time.Now().UnixMilli()); d < -60000 || d > 60000 {
				t.Errorf("Date.now() = %s, want the machine's time %s",
					time.UnixMilli(int64(pc.Now)).UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
			}
		})
	}
}

// TestPageClockStrictCSP: a page whose policy is script-src 'self' still gets the clock (its
// hash is added to the policy), and its own inline script stays blocked.
func TestPageClockStrictCSP(t *testing.T) {
	chromiumPath(t)
	p := startReplay(t, writeClockBundle(t))
	ctx := clockChrome(t, p.addr)
	pc := loadPageClock(t, ctx, "http://clock.test/csp")
	if y := time.UnixMilli(int64(pc.Now)).UTC().Year(); y != 2018 {
		t.Errorf("Date.now() is in %d: the clock did not run under the page's CSP", y)
	}
	if pc.Inline {
		t.Error("the page's own inline script ran although its policy blocks it")
	}
}

// TestPageClockDeterministicRandom: with --deterministic-random, Math.random,
// crypto.getRandomValues and crypto.randomUUID give the same values on two loads of a page
// (a UUID of version 4 and variant 10, RFC 9562 section 5.4); without, they differ.
func TestPageClockDeterministicRandom(t *testing.T) {
	chromiumPath(t)
	bundle := writeClockBundle(t)
	const js = `JSON.stringify([Math.random(), Math.random(), Array.from(crypto.getRandomValues(new Uint8Array(8))), crypto.randomUUID(), crypto.randomUUID()])`
	uuid := regexp.MustCompile(`"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}","[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"\]$`)
	draws := func(t *testing.T, extra ...string) [2]string {
		p := startReplay(t, bundle, extra...)
		ctx := replayChrome(t, p.addr)
		var out [2]string
		for i := range out {
			if _, err := chromedp.RunResponse(ctx, chromedp.Navigate("https://clock.test/secure")); err != nil {
				t.Fatalf("navigate: %v", err)
			}
			s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
			if err != nil {
				t.Fatalf("evaluate: %v", err)
			}
			out[i] = s
		}
		return out
	}
	if d := draws(t, "--deterministic-random"); d[0] != d[1] || !uuid.MatchString(d[0]) {
		t.Errorf("--deterministic-random: two loads drew %s and %s (want the same, ending in two version 4 UUIDs)", d[0], d[1])
	}
	if d := draws(t); d[0] == d[1] {
		t.Errorf("without --deterministic-random two loads drew the same %s", d[0])
	}
}

// TestPageClockPerformance: with the clock on, performance.timeOrigin (and its toJSON,
// and performance.timing's epoch times) are on the recorded day, timeOrigin +
// performance.now() is Date.now(), and timers and performance.now() run at the real speed:
// a 400 ms timeout takes about 400 ms by Date.now() and by performance.now().
func TestPageClockPerformance(t *testing.T) {
	chromiumPath(t)
	p := startReplay(t, writeClockBundle(t))
	ctx := replayChrome(t, p.addr)
	if _, err := chromedp.RunResponse(ctx, chromedp.Navigate("https://clock.test/secure")); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	type perf struct {
		Origin   float64 `json:"origin"`
		Now      float64 `json:"now"`
		Date     float64 `json:"date"`
		JSON     float64 `json:"json"`
		NavStart float64 `json:"navStart"`
		NavJSON  float64 `json:"navJSON"`
		LoadEnd  float64 `json:"loadEnd"`
		TimerD   float64 `json:"timerD"`
		TimerP   float64 `json:"timerP"`
	}
	const js = `new Promise(res => { const o = {origin: performance.timeOrigin, now: performance.now(), date: Date.now(),
		json: performance.toJSON().timeOrigin, navStart: performance.timing.navigationStart,
		navJSON: performance.timing.toJSON().navigationStart, loadEnd: performance.timing.loadEventEnd};
		const d0 = Date.now(), p0 = performance.now();
		setTimeout(() => { o.timerD = Date.now() - d0; o.timerP = performance.now() - p0; res(o); }, 400); })`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[perf](js, func(p *runtime.EvaluateParams) { p.AwaitPromise = ptrTo(true) }))
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	captured := float64(clockCapturedFrom.UnixMilli())
	if d := got.Origin - captured; d < -60000 || d > 60000 {
		t.Errorf("performance.timeOrigin = %s, want the recorded day %s", time.UnixMilli(int64(got.Origin)).UTC().Format(time.RFC3339), clockCapturedFrom.Format(time.RFC3339))
	}
	if d := got.Origin + got.Now - got.Date; d < -50 || d > 50 {
		t.Errorf("timeOrigin + performance.now() = %.0f, Date.now() = %.0f: %.0f ms apart", got.Origin+got.Now, got.Date, d)
	}
	if got.JSON != got.Origin {
		t.Errorf("performance.toJSON().timeOrigin = %.0f, performance.timeOrigin = %.0f", got.JSON, got.Origin)
	}
	if d := got.NavStart - got.Origin; got.NavStart != got.NavJSON || d < -1000 || d > 1000 {
		t.Errorf("performance.timing.navigationStart = %.0f (toJSON %.0f), want about timeOrigin %.0f", got.NavStart, got.NavJSON, got.Origin)
	}
	if got.LoadEnd != 0 && (got.LoadEnd < got.NavStart || got.LoadEnd-got.NavStart > 60000) {
		t.Errorf("performance.timing.loadEventEnd = %.0f, navigationStart %.0f", got.LoadEnd, got.NavStart)
	}
	// timers unchanged in speed: wide bounds for a loaded machine, the two clocks agreeing
	if got.TimerD < 390 || got.TimerD > 5000 || got.TimerP < 390 || got.TimerP > 5000 || got.TimerD-got.TimerP > 20 || got.TimerP-got.TimerD > 20 {
		t.Errorf("a 400 ms timeout took %.0f ms by Date.now() and %.1f ms by performance.now()", got.TimerD, got.TimerP)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestClockSetting(t *testing.T) {
	cases := []struct {
		flag    string
		flagSet bool
		env     string
		want    bool
		err     bool
	}{
		{"on", false, "", true, false},
		{"on", false, "off", false, false},
		{"on", false, "OFF", false, false},
		{"on", false, "on", true, false},
		{"on", true, "off", true, false}, // the flag wins
		{"off", true, "", false, false},
		{"on", false, "maybe", false, true},
		{"sometimes", true, "", false, true},
	}
	for _, tc := range cases {
		got, err := clockSetting(tc.flag, tc.flagSet, tc.env)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("clockSetting(%q, %v, %q) = %v, %v", tc.flag, tc.flagSet, tc.env, got, err)
		}
	}
}
