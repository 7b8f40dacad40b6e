package crawl

// Run in-process with real headless Chromium through a real replay server, so that go test
// -race sees the crawl's goroutines (the CDP listener and the visit) at work.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
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

// crawlRecording writes exchanges (dated at, status 200 unless set) as a bundle with one
// recorded page, the first exchange's URL, serves it with the page clock on a loopback
// port, and crawls it with real headless Chromium within the bounds given.
func crawlRecording(t *testing.T, exchanges []recording.Exchange, maxPages, maxLinks int) (*Report, []string) {
	t.Helper()
	o := serveRecording(t, exchanges)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress []string
	o.MaxPages, o.MaxLinks = maxPages, maxLinks
	o.Progress = func(done, queued int, p PageResult) { progress = append(progress, p.Verdict) }
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep, progress
}

// serveRecording writes exchanges as crawlRecording does, serves them, starts Chromium
// through the replay, and returns the Options of a crawl of it.
func serveRecording(t *testing.T, exchanges []recording.Exchange) Options {
	t.Helper()
	chromium(t)
	dir := filepath.Join(t.TempDir(), "b")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, ex := range exchanges {
		ex.Date = at
		if ex.Status == 0 {
			ex.Status = 200
		}
		if _, err := w.Add(ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddPage(recording.Page{URL: exchanges[0].URL, TS: recording.FormatTime(at), Fetched: "GET"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
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
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	ws := startBrowser(t, ln.Addr().String(), ca)
	return Options{CDP: ws, Bundle: b, Tap: tap, PageTimeout: 20 * time.Second, Clock: srv.Clock()}
}

// TestTyped runs typed URLs in Chromium through a replay: one of each outcome. A page with
// a parameter no recording has is a miss (lost when the live site serves the recorded
// page); the lenient rule for a path whose recordings have one payload still answers a
// page with another recording (wrong, or near when the file says so).
func TestTyped(t *testing.T) {
	htmlH := http.Header{"Content-Type": {"text/html"}}
	o := serveRecording(t, []recording.Exchange{
		{URL: "https://typed.test/", RespHeader: htmlH, Body: []byte(`<title>home</title>`)},
		{URL: "https://typed.test/list?id=1&cat=a", RespHeader: htmlH, Body: []byte(`<title>list</title>`)},
		{URL: "https://typed.test/list?id=2&cat=a", RespHeader: htmlH, Body: []byte(`<title>list</title>`)},
	})
	const file = `urls:
  - url: https://typed.test/
    expect: https://typed.test/
  - url: https://typed.test/list?id=3&cat=a
    expect: miss
  - url: https://typed.test/list?id=4&cat=a
    expect: miss
    near: ["https://typed.test/list?id=2&cat=a", "https://typed.test/list?id=1&cat=a"]
  - url: https://typed.test/none
    expect: "404"
  - url: https://typed.test/list?id=1&cat=a&ref=x
    expect: https://typed.test/list?id=1&cat=a
`
	urls, err := ParseTyped("typed.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckTyped("typed.yaml", urls, o.Bundle); err != nil {
		t.Fatal(err)
	}
	if err := CheckTyped("typed.yaml", []TypedURL{{URL: "https://typed.test/", Expect: "https://typed.test/other", Line: 3}}, o.Bundle); err == nil ||
		!strings.Contains(err.Error(), "typed.yaml:3: expect: https://typed.test/other is not a recorded GET") {
		t.Errorf("an expect the recording lacks: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Typed(ctx, o, urls)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.URLs {
		got = append(got, r.Outcome+" "+r.Source)
	}
	want := []string{"right exact", "wrong fuzzy", "near fuzzy", "miss miss", "lost miss"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("outcomes %q, want %q", got, want)
	}
	if s := rep.Summary(); s != "typed: 5 URLs: right 1, wrong 1, near 1, miss 1, lost 1" {
		t.Errorf("summary %q", s)
	}
	if len(rep.URLs) == 5 && (len(rep.URLs[1].Served) != 1 || rep.URLs[1].Served[0] != "https://typed.test/list?id=1&cat=a") {
		t.Errorf("the wrong answer names %q, want the recorded URL it served", rep.URLs[1].Served)
	}
}

// pageVerdicts lists the report's pages as "URL verdict".
func pageVerdicts(rep *Report) []string {
	var got []string
	for _, p := range rep.Pages {
		got = append(got, p.URL+" "+p.Verdict)
	}
	return got
}

// TestRun crawls a small recording: the recorded page, a page linked from it with one
// query parameter more than was recorded (for a page, a miss: the recording lacks that
// parameter), one with another value of a parameter whose recordings all have one payload
// (fuzzy, counted as answered with another URL), one never recorded (miss) and one whose
// recorded font is no font (broken), within the bounds given.
func TestRun(t *testing.T) {
	htmlH := http.Header{"Content-Type": {"text/html"}}
	rep, progress := crawlRecording(t, []recording.Exchange{
		{URL: "https://run.test/", RespHeader: htmlH, Body: []byte(`<title>home</title><a href="/list?id=1&amp;sort=new">l</a><a href="/list?id=3&amp;cat=a">p</a><a href="/none">n</a><a href="/font">f</a><a href="/x1">1</a><a href="/x2">2</a>`)},
		{URL: "https://run.test/list?id=1&cat=a", RespHeader: htmlH, Body: []byte(`<title>list</title>`)},
		{URL: "https://run.test/list?id=2&cat=a", RespHeader: htmlH, Body: []byte(`<title>list</title>`)},
		{URL: "https://run.test/font", RespHeader: htmlH, Body: []byte(`<style>@font-face{font-family:F;src:url(/f.woff)}body{font-family:F}</style>text`)},
		{URL: "https://run.test/f.woff", RespHeader: http.Header{"Content-Type": {"font/woff"}}, Body: []byte("no font")},
	}, 5, 4)
	want := []string{"https://run.test/ ok", "https://run.test/list?id=1&sort=new miss", "https://run.test/list?id=3&cat=a fuzzy", "https://run.test/none miss", "https://run.test/font broken"}
	if got := pageVerdicts(rep); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("pages %q, want %q", got, want)
	}
	// --links 4 left /x1 and /x2 out; nothing is queued beyond them
	if rep.NotVisited != 0 || rep.Wrong != 2 || len(progress) != 5 || rep.Pages[0].Links != 6 || rep.OtherURL != 1 {
		t.Errorf("not visited %d, wrong %d, progress %v, links %d, other URL %d", rep.NotVisited, rep.Wrong, progress, rep.Pages[0].Links, rep.OtherURL)
	}
	if len(rep.Pages) == 5 && rep.Pages[2].Served != "https://run.test/list?id=1&cat=a" {
		t.Errorf("fuzzy page served %q, want the recorded URL https://run.test/list?id=1&cat=a", rep.Pages[2].Served)
	}
}

// TestRunBodies crawls pages whose recorded payloads a browser would not show as recorded:
// raw chunked framing stored as the body of a page and of a script, a page the recording
// marks WARC-Truncated, and gzip bytes stored as text without their Content-Encoding; each
// is broken. A windows-1252 page (decoded by Chromium before it hands the body over) and
// the clock's script in every page compare as the same body.
func TestRunBodies(t *testing.T) {
	htmlH := http.Header{"Content-Type": {"text/html"}}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("<title>zipped</title>" + strings.Repeat("z", 100)))
	zw.Close()
	framed := "<title>framed</title><p>hello</p>"
	rep, _ := crawlRecording(t, []recording.Exchange{
		{URL: "https://bodies.test/", RespHeader: htmlH, Body: []byte(`<title>home</title><script src="/ok.js"></script><a href="/framed">1</a><a href="/cut">2</a><a href="/zipped">3</a><a href="/latin">4</a><a href="/script">5</a>`)},
		{URL: "https://bodies.test/ok.js", RespHeader: http.Header{"Content-Type": {"text/javascript"}}, Body: []byte(`var ok = 1;`)},
		{URL: "https://bodies.test/framed", RespHeader: htmlH, Body: []byte(fmt.Sprintf("%x;ext=1\n%s\r\n0\r\nX-Trailer: t\r\n\r\n", len(framed), framed))},
		{URL: "https://bodies.test/cut", RespHeader: htmlH, Body: []byte(`<title>cut</title><p>the first half`), Truncated: "length"},
		{URL: "https://bodies.test/zipped", RespHeader: htmlH, Body: gz.Bytes()},
		{URL: "https://bodies.test/latin", RespHeader: http.Header{"Content-Type": {"text/html; charset=windows-1252"}}, Body: []byte("<title>caf\xe9</title><p>na\xefve \x93quoted\x94</p>")},
		{URL: "https://bodies.test/script", RespHeader: htmlH, Body: []byte(`<title>s</title><script src="/framed.js"></script>`)},
		{URL: "https://bodies.test/framed.js", RespHeader: http.Header{"Content-Type": {"text/javascript"}}, Body: []byte("b\r\nvar x = 1;\r\n0\r\n\r\n")},
	}, 6, 10)
	want := []string{"https://bodies.test/ ok", "https://bodies.test/framed broken", "https://bodies.test/cut broken",
		"https://bodies.test/zipped broken", "https://bodies.test/latin ok", "https://bodies.test/script broken"}
	if got := pageVerdicts(rep); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("pages %q, want %q", got, want)
	}
	for _, c := range []struct {
		page int
		want string
	}{
		{1, "chunked framing"}, {2, "WARC-Truncated: length"}, {3, "gzip data stored without its Content-Encoding"},
		{5, "framed.js: body not the recorded one"},
	} {
		if c.page < len(rep.Pages) && !strings.Contains(rep.Pages[c.page].Detail, c.want) {
			t.Errorf("%s: detail %q, want it to say %q", rep.Pages[c.page].URL, rep.Pages[c.page].Detail, c.want)
		}
	}
	// home: the page and ok.js; the latin page; the others one page each, the script
	// page two
	for _, p := range rep.Pages {
		t.Logf("%s %s: %s", p.URL, p.Verdict, p.Detail)
	}
	if rep.BodiesCompared != 8 || rep.BodiesDiffer != 4 || rep.Wrong != 4 {
		t.Errorf("bodies compared %d, differ %d, unverified %d; wrong %d: want 8, 4, 4 wrong", rep.BodiesCompared, rep.BodiesDiffer, rep.BodiesUnverified, rep.Wrong)
	}
}
