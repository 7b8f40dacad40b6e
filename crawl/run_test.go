package crawl

// Run in-process with real headless Chromium through a real replay server, so that go test
// -race sees the crawl's goroutines (the CDP listener and the visit) at work.

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/tlsca"

	"github.com/pab-dev/pab/internal/testtool"
)

// chromium finds Debian's chromium; in CI (CI=true) its absence fails the test, as the
// browser tests of cmd/pab do.
func chromium(t *testing.T) string { return testtool.Chromium(t) }

// startBrowser starts headless Chromium through the proxy at addr, trusting ca, with pab
// browser's own flags (internal/browser), and returns its DevTools address; the browser is
// stopped when the test ends.
func startBrowser(t *testing.T, addr string, ca *tlsca.CA) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := browser.Start(ctx, chromium(t), browser.Options{Proxy: addr, SPKI: ca.SPKIHash(), Profile: t.TempDir()}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p.CDP
}

// TestRun crawls a small recording: the recorded page, a page linked from it with one
// query parameter more than was recorded (fuzzy), one never recorded (miss) and one whose recorded font
// is no font (broken), within the bounds given.
func TestRun(t *testing.T) {
	chromium(t)
	dir := filepath.Join(t.TempDir(), "b")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	htmlH := http.Header{"Content-Type": {"text/html"}}
	for _, ex := range []recording.Exchange{
		{URL: "https://run.test/", RespHeader: htmlH, Body: []byte(`<title>home</title><a href="/list?id=1&amp;sort=new">l</a><a href="/none">n</a><a href="/font">f</a><a href="/x1">1</a><a href="/x2">2</a>`)},
		{URL: "https://run.test/list?id=1", RespHeader: htmlH, Body: []byte(`<title>list</title>`)},
		{URL: "https://run.test/font", RespHeader: htmlH, Body: []byte(`<style>@font-face{font-family:F;src:url(/f.woff)}body{font-family:F}</style>text`)},
		{URL: "https://run.test/f.woff", RespHeader: http.Header{"Content-Type": {"font/woff"}}, Body: []byte("no font")},
	} {
		ex.Date, ex.Status = at, 200
		if _, err := w.Add(ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddPage(recording.Page{URL: "https://run.test/", TS: recording.FormatTime(at), Fetched: "GET"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rs, err := rules.Load()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	tap := NewTap()
	srv, err := replay.New(replay.Options{Bundle: b, Rules: rs, CA: ca, Clock: true, Log: tap})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		<-served
	}()
	ws := startBrowser(t, ln.Addr().String(), ca)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress []string
	rep, err := Run(ctx, Options{CDP: ws, Bundle: b, Tap: tap, MaxPages: 4, MaxLinks: 3, PageTimeout: 20 * time.Second,
		Progress: func(done, queued int, p PageResult) { progress = append(progress, p.Verdict) }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Pages {
		got = append(got, p.URL+" "+p.Verdict)
	}
	want := []string{"https://run.test/ ok", "https://run.test/list?id=1&sort=new fuzzy", "https://run.test/none miss", "https://run.test/font broken"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("pages %q, want %q", got, want)
	}
	// --links 3 left /x1 and /x2 out; nothing is queued beyond them
	if rep.NotVisited != 0 || rep.Wrong != 2 || len(progress) != 4 || rep.Pages[0].Links != 5 {
		t.Errorf("not visited %d, wrong %d, progress %v, links %d", rep.NotVisited, rep.Wrong, progress, rep.Pages[0].Links)
	}
}
