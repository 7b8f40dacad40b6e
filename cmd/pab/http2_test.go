package main

// HTTP/2 inside the replay's HTTPS tunnels: real headless Chromium (pab browser's own
// arguments) through a real `pab replay` on loopback, of a bundle written here whose page
// has well over 50 subresources on two HTTPS hosts. With --http2 (the default) Chromium
// negotiates h2 in every tunnel; with --http2=false it speaks HTTP/1.1. Either way every
// request is answered exactly from the recording, the page finds every script, style sheet,
// image and font it asked for, and the replay log's dest (Sec-Fetch-Dest) is the same.

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

const (
	h2Scripts = 20 // scripts on the page, each pushing its number to window.ran
	h2Styles  = 20 // style sheets, each giving div #dN the width N+1 px
	h2Images  = 20 // PNG images, image N being N+1 px wide
	h2Site    = "https://www.h2.test"
	h2Static  = "https://static.h2.test" // a second host, so a second tunnel
	h2BigSize = 3 << 20                  // bytes of the one large script (many HTTP/2 DATA frames and window updates)
)

// h2Want is one recorded URL the page loads: the method, status, Sec-Fetch-Dest and log
// type the replay should see for it.
type h2Want struct {
	method, url string
	status      int
	dest, typ   string
}

// h2URL puts the i-th subresource on one of the two hosts in turn.
func h2URL(i int, path string) string {
	if i%2 == 0 {
		return h2Site + path
	}
	return h2Static + path
}

// h2PNG is a w×3 PNG.
func h2PNG(t *testing.T, w int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, 3))
	for x := range w {
		for y := range 3 {
			img.Set(x, y, color.RGBA{uint8(x * 9), 80, 160, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeH2Bundle writes the bundle the HTTP/2 tests replay and returns its directory and
// every URL Chromium should request, in no particular order. The page
// https://www.h2.test/ loads 20 scripts, 20 style sheets and 20 images alternating
// between www.h2.test and static.h2.test, a 3 MiB script, a script behind a recorded 301
// to the other host, a web font (DejaVu Sans), a same-origin iframe, a fetch() of JSON and
// a fetch() POST of a form; https://www.h2.test/second.html is a second page opened in
// the same tab. Recorded responses carry the hop-by-hop fields an HTTP/1.1 server sends
// (Connection, Keep-Alive), which an HTTP/2 answer must not.
func writeH2Bundle(t *testing.T) (string, []h2Want) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "h2-bundle")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "h2-test"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	var want []h2Want
	addX := func(x recording.Exchange, ctype, dest, typ string) {
		t.Helper()
		x.Date = at
		if x.Status == 0 {
			x.Status = 200
		}
		if x.RespHeader == nil {
			x.RespHeader = http.Header{}
		}
		x.RespHeader.Set("Content-Type", ctype)
		x.RespHeader.Set("Connection", "keep-alive")
		x.RespHeader.Set("Keep-Alive", "timeout=5, max=100")
		x.RespHeader.Set("Cache-Control", "no-store")
		if _, err := w.Add(x); err != nil {
			t.Fatal(err)
		}
		m := x.Method
		if m == "" {
			m = "GET"
		}
		want = append(want, h2Want{m, x.URL, x.Status, dest, typ})
	}
	add := func(u, ctype string, body []byte, restype, dest, typ string) {
		t.Helper()
		addX(recording.Exchange{URL: u, Body: body, ResourceType: restype}, ctype, dest, typ)
	}

	var head, body strings.Builder
	head.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>h2</title><link rel="icon" href="data:,">
<script>window.ran = [];</script>
<style>@font-face { font-family: H2Font; src: url(/f/h2.ttf) format("truetype"); } .f { font-family: H2Font; } div { height: 1px; }</style>
`)
	for i := range h2Styles {
		u := h2URL(i, fmt.Sprintf("/css/s%d.css", i))
		fmt.Fprintf(&head, "<link rel=\"stylesheet\" href=\"%s\">\n", u)
		add(u, "text/css", fmt.Appendf(nil, "#d%d { width: %dpx; }\n", i, i+1), "stylesheet", "style", "style")
		fmt.Fprintf(&body, "<div id=\"d%d\"></div>\n", i)
	}
	for i := range h2Scripts {
		u := h2URL(i, fmt.Sprintf("/js/s%d.js", i))
		fmt.Fprintf(&head, "<script src=\"%s\"></script>\n", u)
		add(u, "application/javascript", fmt.Appendf(nil, "window.ran.push(%d);\n", i), "script", "script", "script")
	}
	big := make([]byte, 0, h2BigSize+64)
	for len(big) < h2BigSize {
		big = append(big, "// padding padding padding padding padding padding padding padding padding\n"...)
	}
	big = append(big, "window.bigRan = true;\n"...)
	head.WriteString(`<script src="` + h2Static + `/js/big.js"></script>` + "\n")
	add(h2Static+"/js/big.js", "application/javascript", big, "script", "script", "script")
	head.WriteString(`<script src="/js/moved.js"></script>` + "\n")
	addX(recording.Exchange{URL: h2Site + "/js/moved.js", Status: 301, RespHeader: http.Header{"Location": {h2Static + "/js/target.js"}},
		ResourceType: "script"}, "text/html", "script", "script")
	add(h2Static+"/js/target.js", "application/javascript", []byte("window.movedRan = true;\n"), "script", "script", "script")
	for i := range h2Images {
		u := h2URL(i, fmt.Sprintf("/img/i%d.png", i))
		fmt.Fprintf(&body, "<img id=\"i%d\" src=\"%s\">\n", i, u)
		add(u, "image/png", h2PNG(t, i+1), "image", "image", "image")
	}
	font, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatalf("a TrueType font to record: %v (Debian's chromium depends on fonts-dejavu-core)", err)
	}
	add(h2Site+"/f/h2.ttf", "font/ttf", font, "font", "font", "font")
	body.WriteString(`<p class="f">text in the web font</p>
<iframe id="frame" src="/frame.html"></iframe>
<script>window.fetched = fetch("/api/data.json").then(r => r.json()).then(j => j.n);
window.posted = fetch("/api/post", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
	body: "q=h2&page=1"}).then(r => r.text());</script>
`)
	add(h2Site+"/frame.html", "text/html; charset=utf-8",
		[]byte(`<!doctype html><html><head><title>frame</title></head><body><p id="in">framed</p></body></html>`),
		"document", "iframe", "document")
	add(h2Site+"/api/data.json", "application/json", []byte(`{"n": 42}`), "fetch", "empty", "api")
	addX(recording.Exchange{Method: "POST", URL: h2Site + "/api/post", ReqHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		ReqBody: []byte("q=h2&page=1"), Body: []byte("posted q=h2"), ResourceType: "fetch"}, "text/plain", "empty", "api")
	add(h2Site+"/", "text/html; charset=utf-8", []byte(head.String()+"</head><body>\n"+body.String()+"</body></html>\n"),
		"document", "document", "document")
	add(h2Site+"/second.html", "text/html; charset=utf-8",
		[]byte(`<!doctype html><html><head><title>second</title><link rel="icon" href="data:,"></head><body>second</body></html>`),
		"document", "document", "document")
	for _, p := range []string{h2Site + "/", h2Site + "/second.html"} {
		if err := w.AddPage(recording.Page{URL: p, TS: recording.FormatTime(at), Fetched: "GET"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// h2PageResult is what the page reports once it and its subresources have loaded.
type h2PageResult struct {
	Ran      []int    `json:"ran"`      // window.ran: the numbers of the scripts that ran, in order
	BigRan   bool     `json:"bigRan"`   // the large script ran
	MovedRan bool     `json:"movedRan"` // the script behind a recorded 301 ran
	Widths   []string `json:"widths"`   // computed width of each #dN (each style sheet applied)
	Natural  []int    `json:"natural"`  // naturalWidth of each image
	Complete []bool   `json:"complete"` // complete of each image
	Font     string   `json:"font"`     // status of the H2Font face after document.fonts.ready
	Frame    string   `json:"frame"`    // text of the iframe's #in
	Fetched  int      `json:"fetched"`  // n of the fetched JSON
	Posted   string   `json:"posted"`   // the answer to the POSTed form
}

const h2PageJS = `new Promise(resolve => document.readyState === "complete" ? resolve() : addEventListener("load", () => resolve()))
.then(() => document.fonts.ready)
.then(() => Promise.all([window.fetched, window.posted]))
.then(([n, posted]) => {
	const imgs = Array.from(document.images);
	const face = Array.from(document.fonts).find(f => f.family.replace(/["']/g, "") === "H2Font");
	const fd = document.getElementById("frame").contentDocument;
	const el = fd && fd.getElementById("in");
	return {
		ran: window.ran, bigRan: window.bigRan === true, movedRan: window.movedRan === true,
		widths: Array.from(document.querySelectorAll("div[id^=d]"), d => getComputedStyle(d).width),
		natural: imgs.map(i => i.naturalWidth), complete: imgs.map(i => i.complete),
		font: face ? face.status : "none", frame: el ? el.textContent : "", fetched: n, posted,
	};
})`

// h2Run is one load of the h2 bundle's two pages in Chromium through the replay.
type h2Run struct {
	want     []h2Want
	page     h2PageResult
	protocol map[string]string // Response.Protocol per URL, from network.EventResponseReceived
	log      []replay.LogLine
}

// loadH2Pages replays the h2 bundle with pab replay EXTRA..., opens https://www.h2.test/
// in headless Chromium, evaluates h2PageJS, opens https://www.h2.test/second.html, and
// returns what the page, CDP and the replay log saw. The whole run is bounded by 25 s.
func loadH2Pages(t *testing.T, extra ...string) h2Run {
	t.Helper()
	chromiumPath(t) // fails instead of skipping when CI=true
	bundle, want := writeH2Bundle(t)
	p := startReplay(t, bundle, extra...)
	bctx := replayChrome(t, p.addr)
	ctx, cancel := context.WithTimeout(bctx, 25*time.Second)
	defer cancel()

	run := h2Run{want: want, protocol: map[string]string{}}
	var mu sync.Mutex
	if err := chromedp.Listen(ctx, func(ev any) {
		var r *network.Response
		switch e := ev.(type) {
		case *network.EventResponseReceived:
			r = e.Response
		case *network.EventRequestWillBeSent:
			r = e.RedirectResponse // the recorded 301's answer
		}
		if r != nil {
			mu.Lock()
			run.protocol[r.URL] = r.Protocol
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("listen for network events: %v", err)
	}
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(h2Site+"/"))
	if err != nil || resp.Status != 200 {
		t.Fatalf("navigate %s/: %+v %v\nreplay stderr:\n%s", h2Site, resp, err, p.stderr)
	}
	run.page, err = chromedp.Run(ctx, chromedp.Evaluate[h2PageResult](h2PageJS,
		func(p *runtime.EvaluateParams) { await := true; p.AwaitPromise = &await }))
	if err != nil {
		t.Fatalf("evaluate the page: %v", err)
	}
	if resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(h2Site+"/second.html")); err != nil || resp.Status != 200 {
		t.Fatalf("navigate %s/second.html: %+v %v", h2Site, resp, err)
	}
	chromedp.Cancel(bctx) // Chromium closes before the replay stops, so the log is whole
	p.stop(t)
	run.log = p.readLog(t)
	mu.Lock()
	defer mu.Unlock()
	return run
}

// checkH2Page asserts that every subresource reached the page: all scripts ran in order,
// every style sheet applied, every image decoded at its width, the font loaded, the iframe
// and the fetch got their recorded content.
func checkH2Page(t *testing.T, r h2PageResult) {
	t.Helper()
	wantRan := make([]int, h2Scripts)
	for i := range wantRan {
		wantRan[i] = i
	}
	if !slices.Equal(r.Ran, wantRan) || !r.BigRan || !r.MovedRan {
		t.Errorf("scripts that ran: %v (large script %v, redirected script %v), want 0..%d in order, the large one and the redirected one",
			r.Ran, r.BigRan, r.MovedRan, h2Scripts-1)
	}
	if len(r.Widths) != h2Styles {
		t.Errorf("%d styled divs, want %d", len(r.Widths), h2Styles)
	}
	for i, w := range r.Widths {
		if w != fmt.Sprintf("%dpx", i+1) {
			t.Errorf("#d%d width %s, want %dpx: style sheet %d not applied", i, w, i+1, i)
		}
	}
	if len(r.Natural) != h2Images || len(r.Complete) != h2Images {
		t.Errorf("%d images (%d complete flags), want %d", len(r.Natural), len(r.Complete), h2Images)
	}
	for i, n := range r.Natural {
		if n != i+1 || !r.Complete[i] {
			t.Errorf("image %d: naturalWidth %d complete %v, want %d and true", i, n, r.Complete[i], i+1)
		}
	}
	if r.Font != "loaded" {
		t.Errorf("web font status %q, want loaded", r.Font)
	}
	if r.Frame != "framed" || r.Fetched != 42 || r.Posted != "posted q=h2" {
		t.Errorf("iframe text %q, fetched n %d, POST answer %q; want framed, 42 and the recorded answer", r.Frame, r.Fetched, r.Posted)
	}
}

// h2Own reports whether l is one of Chromium's own calls home that pab browser's flags do
// not stop (the component updater's POST to update.googleapis.com, accounts.google.com
// ListAccounts) and the default rules block: outside *.h2.test and answered "blocked".
func h2Own(l replay.LogLine) bool {
	u, err := url.Parse(l.URL)
	return err == nil && !strings.HasSuffix(u.Hostname(), ".h2.test") && l.Source == "blocked"
}

// checkH2Log asserts that the replay log has exactly one line per wanted URL, each an exact
// answer with the wanted method, status, dest and type, and nothing else on *.h2.test or
// anywhere (no miss, no fuzzy, no extra request) besides Chromium's own blocked calls home.
func checkH2Log(t *testing.T, run h2Run) {
	t.Helper()
	byURL := map[string]h2Want{}
	for _, w := range run.want {
		byURL[w.url] = w
	}
	seen := map[string]int{}
	for _, l := range run.log {
		if h2Own(l) {
			t.Logf("Chromium's own call, blocked: %s %s", l.Method, l.URL)
			continue
		}
		seen[l.URL]++
		w, ok := byURL[l.URL]
		switch {
		case !ok:
			t.Errorf("unexpected request %s %s: %s %d dest %q note %q", l.Method, l.URL, l.Source, l.Status, l.Dest, l.Note)
		case l.Method != w.method || l.Source != "exact" || l.Status != w.status || l.Entry == "":
			t.Errorf("%s %s answered %s %d entry %q note %q, want %s exact %d", l.Method, l.URL, l.Source, l.Status, l.Entry, l.Note, w.method, w.status)
		case l.Dest != w.dest || l.Type != w.typ:
			t.Errorf("%s: log dest %q type %q, want dest %q type %q", l.URL, l.Dest, l.Type, w.dest, w.typ)
		}
	}
	for _, w := range run.want {
		if seen[w.url] != 1 {
			t.Errorf("%s requested %d times, want once", w.url, seen[w.url])
		}
	}
	if t.Failed() {
		t.Logf("replay log:\n%s", dumpLog(run.log))
	}
}

// checkH2Protocol asserts that CDP reported the protocol proto for every wanted URL.
func checkH2Protocol(t *testing.T, run h2Run, proto string) {
	t.Helper()
	var bad []string
	for _, w := range run.want {
		if got, ok := run.protocol[w.url]; !ok {
			bad = append(bad, w.url+": no Network.responseReceived")
		} else if got != proto {
			bad = append(bad, fmt.Sprintf("%s: protocol %q", w.url, got))
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s, want %q", b, proto)
	}
}

// TestChromiumHTTP2ManySubresources: with HTTP/2 on (the default), Chromium loads a page
// with 67 subresource requests (20 scripts, a 3 MiB script, a script behind a recorded
// 301, 20 style sheets, 20 images, a web font, an iframe, a fetch() GET and a form POST)
// from two HTTPS hosts over h2 in both tunnels, then a second page in the same tab: CDP
// reports protocol "h2" for both documents and every subresource (the 301 too), the page
// sees every subresource, and the replay log has one exact answer per URL with the
// right method, status, dest and type, and no miss.
func TestChromiumHTTP2ManySubresources(t *testing.T) {
	run := loadH2Pages(t)
	if n := len(run.want) - 2; n < 50 {
		t.Fatalf("only %d subresources", n)
	}
	checkH2Protocol(t, run, "h2")
	checkH2Page(t, run.page)
	checkH2Log(t, run)
}

// TestChromiumHTTP1ManySubresources: the same page with --http2=false: CDP reports
// "http/1.1" for everything, and the page and the replay log are as over h2.
func TestChromiumHTTP1ManySubresources(t *testing.T) {
	run := loadH2Pages(t, "--http2=false")
	checkH2Protocol(t, run, "http/1.1")
	checkH2Page(t, run.page)
	checkH2Log(t, run)
}

// TestFetchDestSameOverH2AndH1: the replay log's dest (Sec-Fetch-Dest) and type of each URL
// over h2 are exactly those over HTTP/1.1: document, iframe, script, style, image, font and
// empty (fetch) all arrive intact through HTTP/2's header compression and pseudo-headers.
func TestFetchDestSameOverH2AndH1(t *testing.T) {
	type seen struct{ dest, typ, key string }
	logOf := func(t *testing.T, run h2Run) map[string]seen {
		m := map[string]seen{}
		for _, l := range run.log {
			if h2Own(l) {
				continue
			}
			m[l.URL] = seen{l.Dest, l.Type, l.Key}
		}
		return m
	}
	var h2, h1 map[string]seen
	var want []h2Want
	t.Run("h2", func(t *testing.T) {
		run := loadH2Pages(t)
		checkH2Protocol(t, run, "h2")
		h2, want = logOf(t, run), run.want
	})
	t.Run("http1.1", func(t *testing.T) {
		run := loadH2Pages(t, "--http2=false")
		checkH2Protocol(t, run, "http/1.1")
		h1 = logOf(t, run)
	})
	if h2 == nil || h1 == nil {
		t.Fatal("a run failed")
	}
	dests := map[string]int{}
	for _, w := range want {
		a, b := h2[w.url], h1[w.url]
		if a != b {
			t.Errorf("%s: over h2 dest %q type %q key %q, over http/1.1 dest %q type %q key %q", w.url, a.dest, a.typ, a.key, b.dest, b.typ, b.key)
		}
		if a.dest != w.dest {
			t.Errorf("%s: dest %q over h2, want %q", w.url, a.dest, w.dest)
		}
		dests[a.dest]++
	}
	for _, d := range []string{"document", "iframe", "script", "style", "image", "font", "empty"} {
		if dests[d] == 0 {
			t.Errorf("no request with dest %q over h2 (dests: %v)", d, dests)
		}
	}
	if len(h2) != len(h1) {
		t.Errorf("%d URLs in the h2 log, %d in the http/1.1 log", len(h2), len(h1))
	}
}
