package main

// Page clock tests: real Chromium through a real `pab replay` of a bundle written here.

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

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

// TestPageClockDeterministicRandom: with --deterministic-random, Math.random and
// crypto.getRandomValues give the same numbers on two loads of a page; without, they differ.
func TestPageClockDeterministicRandom(t *testing.T) {
	chromiumPath(t)
	bundle := writeClockBundle(t)
	const js = `JSON.stringify([Math.random(), Math.random(), Array.from(crypto.getRandomValues(new Uint8Array(8)))])`
	draws := func(t *testing.T, extra ...string) [2]string {
		p := startReplay(t, bundle, extra...)
		ctx := clockChrome(t, p.addr)
		var out [2]string
		for i := range out {
			if _, err := chromedp.RunResponse(ctx, chromedp.Navigate("http://clock.test/")); err != nil {
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
	if d := draws(t, "--deterministic-random"); d[0] != d[1] {
		t.Errorf("--deterministic-random: two loads drew %s and %s", d[0], d[1])
	}
	if d := draws(t); d[0] == d[1] {
		t.Errorf("without --deterministic-random two loads drew the same %s", d[0])
	}
}

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
