package crawl

import (
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

func TestCanon(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP://Example.TEST:80/a?b=1#frag": "http://example.test/a?b=1",
		"https://x.test:443":                "https://x.test/",
		"https://x.test.:8443/p":            "https://x.test:8443/p",
		"http://[::1]:80/":                  "http://[::1]/",
		"mailto:a@b.test":                   "",
		"javascript:void(0)":                "",
		"/relative":                         "",
	} {
		if got := canon(in); got != want {
			t.Errorf("canon(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"http://www.archive.org/x":              "archive.org",
		"https://a.b.example.co.uk/":            "example.co.uk",
		"http://127.0.0.1:8080/":                "127.0.0.1",
		"http://localhost/":                     "localhost",
		"https://job-boards.greenhouse.io/axon": "greenhouse.io",
	} {
		if got := siteOf(in); got != want {
			t.Errorf("siteOf(%q) = %q, want %q", in, got, want)
		}
	}
	if isPageLink("http://x.test/a.ZIP") || isPageLink("http://x.test/i.jpg?x=1") || !isPageLink("http://x.test/page.php?f=a.zip") || !isPageLink("http://x.test/") {
		t.Error("isPageLink: files are not pages, pages are")
	}
}

// TestTap: lines split across writes, bad lines skipped, an over-long line dropped whole,
// Since and Forget by line number, the bound on lines held.
func TestTap(t *testing.T) {
	tap := NewTap()
	tap.Write([]byte(`{"method":"GET","url":"http://a.test/","source":"exact"}` + "\n" + `{"method":"GET","url":"http://b.te`))
	tap.Write([]byte(`st/","source":"miss"}` + "\nnot json\n"))
	tap.Write([]byte(strings.Repeat("x", maxTapLine+10)))
	tap.Write([]byte("yyy\n" + `{"method":"POST","url":"http://c.test/","source":"fuzzy"}` + "\n"))
	got := tap.Since(0)
	if len(got) != 3 || got[1].URL != "http://b.test/" || got[2].Method != "POST" || tap.Len() != 3 {
		t.Fatalf("tap lines %+v (len %d)", got, tap.Len())
	}
	if s := tap.Since(2); len(s) != 1 || s[0].Source != "fuzzy" {
		t.Errorf("Since(2) = %+v", s)
	}
	tap.Forget(2)
	if s := tap.Since(0); len(s) != 1 || tap.Len() != 3 {
		t.Errorf("after Forget(2): %+v, len %d", s, tap.Len())
	}
	// concurrent writers and readers (go test -race)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(tap, `{"method":"GET","url":"http://w%d.test/%d","source":"exact"}`+"\n", i, j)
				tap.Since(tap.Len() - 1)
			}
		})
	}
	wg.Wait()
	if tap.Len() != 403 {
		t.Errorf("after 400 concurrent lines: len %d", tap.Len())
	}
	line := []byte(`{"method":"GET","url":"http://z.test/","source":"exact"}` + "\n")
	for range MaxTapLines + 1 {
		tap.Write(line)
	}
	if n := len(tap.Since(0)); n > MaxTapLines || tap.Len() != 403+MaxTapLines+1 {
		t.Errorf("tap holds %d lines (bound %d), numbered to %d", n, MaxTapLines, tap.Len())
	}
}

// TestFrontier: seeds first; then, depth by depth, the pages found on each page take turns.
func TestFrontier(t *testing.T) {
	var f frontier
	f.add(queued{url: "s1"})
	f.add(queued{url: "s2"})
	var got []string
	for f.len() > 0 {
		q := f.next()
		got = append(got, q.url)
		switch q.url {
		case "s1":
			for _, u := range []string{"a1", "a2", "a3"} {
				f.add(queued{url: u, depth: 1, from: "s1"})
			}
		case "s2":
			f.add(queued{url: "b1", depth: 1, from: "s2"})
		case "a1":
			f.add(queued{url: "c1", depth: 2, from: "a1"})
		}
	}
	if want := []string{"s1", "s2", "a1", "b1", "a2", "a3", "c1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// testRecording writes and opens a bundle with a page recorded twice under URLs with the
// same key but different payloads (as a key that drops a parameter would give).
func testRecording(t *testing.T) *recorded {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, ex := range []recording.Exchange{
		{URL: "http://s.test/item?id=1", Body: []byte("<html>one</html>")},
		{URL: "http://s.test/item?id=2", Body: []byte("<html>two</html>")},
		{URL: "http://s.test/f.woff", Body: []byte("not a font"), RespHeader: http.Header{"Content-Type": {"font/woff"}}},
		{URL: "http://s.test/app.css?v=1", Body: []byte("p{}"), RespHeader: http.Header{"Content-Type": {"text/css"}}, ResourceType: recording.ResourceStylesheet},
	} {
		ex.Date, ex.Status = at, 200
		if ex.RespHeader == nil {
			ex.RespHeader = http.Header{"Content-Type": {"text/html"}}
		}
		if _, err := w.Add(ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return newRecorded(b)
}

// testVisit is a visit of u whose document got status 200 and was answered by line, with
// more requests and console entries.
func testVisit(u string, line replay.LogLine, more ...*request) *visit {
	v := newVisit(u, "main")
	doc := &request{id: "1", typ: network.ResourceTypeDocument, frame: "main", finished: true,
		hops: []hop{{method: "GET", url: u, status: 200, answered: true}}}
	v.order = append([]*request{doc}, more...)
	line.Method, line.URL = "GET", u
	v.lines = []replay.LogLine{line}
	return v
}

// TestClassify: verdicts that need no browser: exact with the payload recorded for the URL,
// exact by key with another URL's payload (mismatch), a recorded redirect chain that comes
// back (redirect-loop), and a font the sanitizer refused (broken).
func TestClassify(t *testing.T) {
	rec := testRecording(t)
	e1, e2 := rec.b.Entries[0], rec.b.Entries[1]

	pr := classify(testVisit("http://s.test/item?id=1", replay.LogLine{Source: "exact", Status: 200, Entry: e1.ID}), queued{url: "http://s.test/item?id=1"}, rec)
	if pr.Verdict != VerdictOK || pr.Wrong {
		t.Errorf("exact with its own payload: %+v", pr)
	}
	pr = classify(testVisit("http://s.test/item?id=2", replay.LogLine{Source: "exact", Status: 200, Entry: e1.ID}), queued{url: "http://s.test/item?id=2"}, rec)
	if pr.Verdict != VerdictMismatch || !pr.Wrong || !strings.Contains(pr.Detail, "answered with http://s.test/item?id=1") {
		t.Errorf("exact with another URL's payload: %+v", pr)
	}
	pr = classify(testVisit("http://s.test/item?id=3", replay.LogLine{Source: "fuzzy", Status: 200, Entry: e2.ID}), queued{url: "http://s.test/item?id=3"}, rec)
	if pr.Verdict != VerdictFuzzy || !pr.Wrong || pr.Served != e2.URL {
		t.Errorf("fuzzy: %+v", pr)
	}

	v := testVisit("http://s.test/a", replay.LogLine{Source: "exact", Status: 302})
	v.order[0].hops = []hop{{"GET", "http://s.test/a", 302, true}, {"GET", "http://s.test/b", 302, true}, {"GET", "http://s.test/a", 302, true}}
	if pr := classify(v, queued{url: "http://s.test/a"}, rec); pr.Verdict != VerdictRedirectLoop || !pr.Wrong {
		t.Errorf("redirects back to the start: %+v", pr)
	}

	// a style sheet opened as a page, answered by fuzzy with another cache-busting version:
	// the matching policy's lenient rule for static files, whatever vocabulary the
	// recording's resource type is in (the DevTools "stylesheet" here)
	css := rec.b.Entries[3]
	pr = classify(testVisit("http://s.test/app.css?v=2", replay.LogLine{Source: replay.SourceFuzzy, Status: 200, Entry: css.ID}), queued{url: "http://s.test/app.css?v=2"}, rec)
	if pr.Verdict != VerdictFuzzy || pr.Wrong || !strings.Contains(pr.Detail, "a static file (stylesheet)") {
		t.Errorf("fuzzy static file: %+v", pr)
	}

	font := &request{id: "2", typ: network.ResourceTypeFont, frame: "main", finished: true,
		hops: []hop{{method: "GET", url: "http://s.test/f.woff", status: 200, answered: true}}}
	v = testVisit("http://s.test/item?id=1", replay.LogLine{Source: "exact", Status: 200, Entry: e1.ID}, font)
	v.lines = append(v.lines, replay.LogLine{Method: "GET", URL: "http://s.test/f.woff", Source: "exact", Status: 200, Entry: rec.b.Entries[2].ID})
	v.logs = []*cdplog.Entry{
		{Source: cdplog.EntrySourceOther, Level: cdplog.EntryLevelWarning, Text: "Failed to decode downloaded font: http://s.test/f.woff"},
		{Source: cdplog.EntrySourceOther, Level: cdplog.EntryLevelWarning, Text: "OTS parsing error: invalid sfntVersion: 1869881454"},
		{Source: cdplog.EntrySourceJavascript, Level: cdplog.EntryLevelError, Text: "something else went wrong"},
	}
	pr = classify(v, queued{url: "http://s.test/item?id=1"}, rec)
	if pr.Verdict != VerdictBroken || !pr.Wrong || len(pr.Broken) != 1 || !strings.Contains(pr.Broken[0].Reason, "OTS parsing error") ||
		pr.ScriptErrors != 1 || pr.Requests != 2 {
		t.Errorf("refused font: %+v", pr)
	}
}

// TestParseTyped: a typed-URL file is read whole, and each kind of bad input is an error
// naming the file and line.
func TestParseTyped(t *testing.T) {
	good := "urls:\n  - url: http://a.test/x?page=2\n    expect: miss\n    near: [\"http://a.test/x\"]\n    note: n\n  - url: https://a.test/\n    expect: \"404\"\n  - url: http://a.test/y?ref=1\n    expect: http://a.test/y\n"
	got, err := ParseTyped("f.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Expect != ExpectMiss || len(got[0].Near) != 1 || got[1].Expect != Expect404 || got[2].Expect != "http://a.test/y" || got[2].Line != 8 {
		t.Errorf("parsed %+v", got)
	}
	for _, c := range []struct{ in, want string }{
		{"", "f.yaml: empty file"},
		{"urls: []\n", "f.yaml:1: urls: the list is empty"},
		{"urls:\n  - url: a.test/x\n    expect: miss\n", "f.yaml:2: url: \"a.test/x\" is not an absolute"},
		{"urls:\n  - url: http://a.test/\n    expect: maybe\n", "f.yaml:3: expect: \"maybe\""},
		{"urls:\n  - url: http://a.test/\n", "f.yaml:2: urls entry http://a.test/: no expect"},
		{"urls:\n  - url: http://a.test/\n    expect: miss\n    extra: 1\n", "f.yaml:4: urls entry: unknown field \"extra\""},
		{"urls:\n  - url: http://a.test/\n    expect: miss\n    near: x\n", "f.yaml:4: near: want a list"},
		{"other: 1\n", "f.yaml:1: typed-URL file: unknown field \"other\""},
	} {
		if _, err := ParseTyped("f.yaml", []byte(c.in)); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzParseTyped: ParseTyped never panics, and what it accepts has a URL and an expect.
func FuzzParseTyped(f *testing.F) {
	f.Add([]byte("urls:\n  - url: http://a.test/x?page=2\n    expect: miss\n    near: [\"http://a.test/x\"]\n"))
	f.Add([]byte("urls:\n  - {url: \"https://a.test/\", expect: \"404\"}\n"))
	f.Add([]byte("urls: [1, 2]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseTyped("f.yaml", data)
		if err != nil {
			return
		}
		for _, u := range got {
			if canon(u.URL) == "" || u.Expect == "" {
				t.Errorf("accepted %+v", u)
			}
		}
	})
}

// TestExpectedFraming: a payload is taken for chunked framing only when it parses whole as
// chunks and ends with a last chunk; short texts that happen to parse are not.
func TestExpectedFraming(t *testing.T) {
	for _, c := range []struct {
		body   string
		framed bool
	}{
		{"5\r\nhello\r\n0\r\n\r\n", true},
		{"5;ext=1\nhello\n0\nX-T: 1\n\n", true},
		{"0\n", false},
		{"1\nA\n", false},
		{"<html>5\r\n", false},
	} {
		if _, got := dechunkFramed([]byte(c.body)); got != c.framed {
			t.Errorf("%q: framed %v, want %v", c.body, got, c.framed)
		}
	}
}
