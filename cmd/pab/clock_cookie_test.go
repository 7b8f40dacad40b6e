package main

// Page clock and cookies: real Chromium through a real `pab replay` of a bundle written
// here, recorded at clockCapturedFrom (2018), so that a year after the recorded day is in
// the real past.

import (
	"context"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/recording"
)

// writeCookieBundle writes a bundle recorded at clockCapturedFrom with two pages that set
// cookies from their scripts: http://cookie.test/ through document.cookie (a cookie that
// expires a year after the recorded day, one with max-age, and one set and then deleted
// with an expiry in 1970), and https://cookie.test/store, whose script calls
// cookieStore.set (a secure context only) with an expiry a year after the page's today.
func writeCookieBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cookie-bundle")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "cookie-test"})
	if err != nil {
		t.Fatal(err)
	}
	yearLater := clockCapturedFrom.AddDate(1, 0, 0).Format(http.TimeFormat)
	pages := []struct{ url, body string }{
		{"http://cookie.test/", `<!doctype html><html><head><title>cookie</title><script>
document.cookie = "c=1; expires=` + yearLater + `; path=/";
document.cookie = "m=1; max-age=3600; path=/";
document.cookie = "gone=1; path=/";
document.cookie = "gone=1; expires=Thu, 01 Jan 1970 00:00:00 GMT; path=/";
window.readBack = document.cookie;
</script></head><body>cookie</body></html>`},
		{"https://cookie.test/store", `<!doctype html><html><head><title>store</title><script>
window.stored = cookieStore.set({name: "s", value: "1", expires: Date.now() + 365 * 864e5, path: "/"})
  .then(() => cookieStore.get("s")).then(c => c ? c.value : "missing");
</script></head><body>store</body></html>`},
	}
	for _, p := range pages {
		h := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
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

// cookieExpiry returns the expiry (Unix seconds) of the browser's cookie name for rawURL,
// and whether there is one.
func cookieExpiry(t *testing.T, ctx context.Context, rawURL, name string) (float64, bool) {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{rawURL}})
	if err != nil {
		t.Fatalf("get cookies: %v", err)
	}
	for _, c := range res.Cookies {
		if c.Name == name {
			return c.Expires, true
		}
	}
	return 0, false
}

// near reports whether the Unix time got (seconds) is within a minute of want.
func near(got float64, want time.Time) bool {
	return math.Abs(got-float64(want.Unix())) < 60
}

// TestPageClockCookies: with the page clock on, a cookie a page script sets through
// document.cookie to expire a year after the recorded day is kept, and expires a year after
// the real today; a max-age cookie keeps its max-age; a cookie deleted with a 1970 expiry is
// gone; and cookieStore.set with an expiry a year after the page's today keeps its cookie.
func TestPageClockCookies(t *testing.T) {
	chromiumPath(t)
	p := startReplay(t, writeCookieBundle(t))
	ctx := replayChrome(t, p.addr)

	const pageURL = "http://cookie.test/"
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(pageURL))
	if err != nil || resp.Status != 200 {
		t.Fatalf("navigate %s: %v (response %+v)", pageURL, err, resp)
	}
	start := time.Now()
	back, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.readBack + " | " + document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(back, " | ") {
		cookies := "; " + part + ";"
		if !strings.Contains(cookies, "; c=1;") || !strings.Contains(cookies, "; m=1;") || strings.Contains(cookies, "gone=") {
			t.Errorf("page reads cookies %q, want c=1 and m=1 and no gone=1", part)
		}
	}
	if exp, ok := cookieExpiry(t, ctx, pageURL, "c"); !ok || !near(exp, start.AddDate(1, 0, 0)) {
		t.Errorf("cookie c expires %s (found %v), want a year from the real today, %s",
			time.Unix(int64(exp), 0).UTC(), ok, start.AddDate(1, 0, 0).UTC())
	}
	if exp, ok := cookieExpiry(t, ctx, pageURL, "m"); !ok || !near(exp, start.Add(time.Hour)) {
		t.Errorf("max-age cookie m expires %s (found %v), want an hour from now", time.Unix(int64(exp), 0).UTC(), ok)
	}

	const storeURL = "https://cookie.test/store"
	if resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(storeURL)); err != nil || resp.Status != 200 {
		t.Fatalf("navigate %s: %v (response %+v)", storeURL, err, resp)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.stored`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got != "1" {
		t.Errorf("cookieStore.get after cookieStore.set a year ahead of the page's today: %q, want 1", got)
	}
	if exp, ok := cookieExpiry(t, ctx, storeURL, "s"); !ok || !near(exp, time.Now().AddDate(0, 0, 365)) {
		t.Errorf("cookie s expires %s (found %v), want 365 days from the real today", time.Unix(int64(exp), 0).UTC(), ok)
	}
}
