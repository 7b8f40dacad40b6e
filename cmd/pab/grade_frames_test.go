package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/recording"
)

// TestGradePlainHTTPFrames: Chromium opens a plain-HTTP page with an iframe (no
// Sec-Fetch-Dest: Fetch Metadata goes to HTTPS only), then a second page; pab grade counts
// the two pages, not the frame.
func TestGradePlainHTTPFrames(t *testing.T) {
	chromiumPath(t)
	dir := filepath.Join(t.TempDir(), "frames-bundle")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "frames-test"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2008, 4, 30, 20, 0, 0, 0, time.UTC)
	for _, p := range []struct{ url, body string }{
		{"http://frames.test/", `<html><head><title>top</title></head><body><iframe src="/frame"></iframe><a href="/next">next</a></body></html>`},
		{"http://frames.test/frame", `<html><head><title>frame</title></head><body>in the frame</body></html>`},
		{"http://frames.test/next", `<html><head><title>next</title></head><body>next</body></html>`},
	} {
		if _, err := w.Add(recording.Exchange{URL: p.url, Date: at, Status: 200, RespHeader: http.Header{"Content-Type": {"text/html"}},
			Body: []byte(p.body), ResourceType: "document"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	p := startReplay(t, dir)
	ctx := clockChrome(t, p.addr)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://frames.test/")); err != nil {
		t.Fatal(err)
	}
	// the load event waits for the frame, so its request has been answered
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.frames.length`)); err != nil || n != 1 {
		t.Fatalf("frames on the page: %d (%v), want 1", n, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://frames.test/next")); err != nil {
		t.Fatal(err)
	}
	p.stop(t)

	out := t.TempDir()
	if stdout, stderr, code := runPab(t, "grade", dir, "--log", p.log, "--out", out); code != 0 {
		t.Fatalf("pab grade: exit %d\n%s%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Pages struct {
			Opened []struct {
				URL string `json:"url"`
			} `json:"opened"`
		} `json:"pages"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range res.Pages.Opened {
		got = append(got, o.URL)
	}
	if want := []string{"http://frames.test/", "http://frames.test/next"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pages opened %q, want %q (the frame is not a page)", got, want)
	}
}
