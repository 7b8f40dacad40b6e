package replay

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testCapturedFrom = time.Date(2018, 11, 11, 22, 56, 36, 0, time.UTC)

func testClock() *Clock { return NewClock(testCapturedFrom, false) }

func TestClockScriptAndHash(t *testing.T) {
	c := testClock()
	if !strings.Contains(c.Script(), strconv.FormatInt(testCapturedFrom.UnixMilli(), 10)) {
		t.Errorf("script does not hold captured_from in ms: %s", c.Script())
	}
	if strings.Contains(strings.ToLower(c.Script()), "</script") {
		t.Error("script text contains </script")
	}
	sum := sha256.Sum256([]byte(c.Script()))
	if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; c.Hash() != want {
		t.Errorf("hash %s, want %s", c.Hash(), want)
	}
	if again := NewClock(testCapturedFrom, false); again.Script() != c.Script() {
		t.Error("script text differs between two clocks of the same recording")
	}
	r := NewClock(testCapturedFrom, true)
	if r.Hash() == c.Hash() || !strings.Contains(r.Script(), "Math.random") || strings.Contains(c.Script(), "Math.random") {
		t.Error("deterministic random does not change the script as expected")
	}
}

// TestInjectPlacement: '@' in want marks where the script goes; the input is want without it.
func TestInjectPlacement(t *testing.T) {
	cases := []struct{ name, want string }{
		{"head", "<!DOCTYPE html><html><head>@<title>x</title></head><body>b</body></html>"},
		{"head with attributes", "<html lang=en>\n<HEAD data-x='<head>'>@<meta charset=utf-8></HEAD></html>"},
		{"head in comment", "<!doctype html><!-- <head> --><html><head>@</head></html>"},
		{"head in script string", "<script>var s = '<head>';</script>" /* script opens the head */},
		{"two heads", "<html><head>@<title>a</title></head><head><title>b</title></head></html>"},
		{"no head, body", "<!DOCTYPE html>\n<html>\n@<body><p>hi</p></body></html>"},
		{"no head, meta first", "<html>@<meta charset=utf-8><title>t</title></html>"},
		{"fragment", "  \n@<div>hello</div>"},
		{"head in title", "<html><head>@<title><head></title></head></html>"},
		{"no element", "<!-- only a comment -->text@"},
		{"bom", "\ufeff<html><head>@</head></html>"},
		{"unterminated comment", "<!-- <head>@"},
	}
	cases[3].want = "@<script>var s = '<head>';</script><head></head>"
	c := testClock()
	tag := "<script>" + c.Script() + "</script>"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(tc.want, "@", "", 1)
			want := strings.Replace(tc.want, "@", tag, 1)
			h := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
			got, note := c.Inject(h, []byte(in))
			if string(got) != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
			if note != "" {
				t.Errorf("note %q", note)
			}
		})
	}
}

func TestInjectNotHTML(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("<html><head></head></html>"))
	zw.Close()
	c := testClock()
	for name, body := range map[string][]byte{
		"json":       []byte(` {"html": "<head>"}`),
		"array":      []byte("[1,2,3]"),
		"jsonp":      []byte(`callback({"a":"<head>"});`),
		"gzip":       gz.Bytes(),
		"empty":      nil,
		"text":       []byte("plain text <head>"),
		"spacesonly": []byte(" \n\t"),
	} {
		h := http.Header{"Content-Type": {"text/html"}, "Content-Security-Policy": {"script-src 'self'"}}
		got, note := c.Inject(h, body)
		if !bytes.Equal(got, body) || note != "" || h.Get("Content-Security-Policy") != "script-src 'self'" {
			t.Errorf("%s: changed to %q (note %q, csp %q)", name, got, note, h.Get("Content-Security-Policy"))
		}
	}
}

func TestWantsClock(t *testing.T) {
	cases := []struct {
		status int
		h      http.Header
		want   bool
	}{
		{200, http.Header{"Content-Type": {"text/html; charset=utf-8"}}, true},
		{203, http.Header{"Content-Type": {"TEXT/HTML"}}, true},
		{200, http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"identity"}}, true},
		{200, http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"gzip"}}, false},
		{404, http.Header{"Content-Type": {"text/html"}}, true},
		{500, http.Header{"Content-Type": {"text/html"}}, true},
		{302, http.Header{"Content-Type": {"text/html"}}, true},
		{204, http.Header{"Content-Type": {"text/html"}}, false},
		{304, http.Header{"Content-Type": {"text/html"}}, false},
		{200, http.Header{"Content-Type": {"application/json"}}, false},
		{200, http.Header{"Content-Type": {"application/xhtml+xml"}}, false},
		{200, http.Header{}, false},
	}
	for _, tc := range cases {
		if got := wantsClock(tc.status, tc.h); got != tc.want {
			t.Errorf("wantsClock(%d, %v) = %v, want %v", tc.status, tc.h, got, tc.want)
		}
	}
}

func TestAddCSPHash(t *testing.T) {
	const h = "'sha256-AAAA'"
	cases := []struct {
		name, in, want string
		changed        bool
	}{
		{"script-src", "script-src 'self'", "script-src 'self' " + h, true},
		{"default-src only", "default-src 'self'; img-src *", "default-src 'self' " + h + "; img-src *", true},
		{"script-src wins over default-src", "default-src 'none'; script-src 'self'", "default-src 'none'; script-src 'self' " + h, true},
		{"script-src-elem wins", "script-src 'self'; script-src-elem https://cdn.test", "script-src 'self'; script-src-elem https://cdn.test " + h, true},
		{"no script restriction", "img-src 'self'; frame-ancestors 'none'", "img-src 'self'; frame-ancestors 'none'", false},
		{"none replaced", "script-src 'none'", "script-src " + h, true},
		{"unsafe-inline kept", "script-src 'self' 'unsafe-inline'", "script-src 'self' 'unsafe-inline'", false},
		{"unsafe-inline already off by nonce", "script-src 'unsafe-inline' 'nonce-abc'", "script-src 'unsafe-inline' 'nonce-abc' " + h, true},
		{"strict-dynamic and nonce", "script-src 'nonce-r4nd0m' 'strict-dynamic' https:; object-src 'none'", "script-src 'nonce-r4nd0m' 'strict-dynamic' https: " + h + "; object-src 'none'", true},
		{"two policies", "script-src 'self', default-src https:", "script-src 'self' " + h + ", default-src https: " + h, true},
		{"repeated directive", "script-src 'self'; script-src *", "script-src 'self' " + h + "; script-src *", true},
		{"upper case", "Script-Src 'self'", "Script-Src 'self' " + h, true},
		{"already there", "script-src " + h, "script-src " + h, false},
		{"empty", "", "", false},
	}
	for _, tc := range cases {
		got, changed, err := addCSPHash(tc.in, h)
		if err != nil || got != tc.want || changed != tc.changed {
			t.Errorf("%s: addCSPHash(%q) = %q, %v, %v; want %q, %v", tc.name, tc.in, got, changed, err, tc.want, tc.changed)
		}
	}
	for _, bad := range []string{"script_src 'self'", "script-src 'self' caf\u00e9.test", "script-src\x01 'self'", "script-src 'self'\x7f"} {
		got, changed, err := addCSPHash(bad, h)
		if err == nil || changed || got != bad {
			t.Errorf("addCSPHash(%q) = %q, %v, %v; want an error and no change", bad, got, changed, err)
		}
	}
}

func TestInjectCSP(t *testing.T) {
	c := testClock()
	tag := "<script>" + c.Script() + "</script>"
	h := http.Header{
		"Content-Type":                        {"text/html; charset=utf-8"},
		"Content-Security-Policy":             {"script-src 'self'", "img-src *", "default-src 'self' 'unsafe-inline'"},
		"Content-Security-Policy-Report-Only": {"script-src 'none'"},
	}
	in := `<html><head><meta http-equiv="content-security-policy" content="script-src 'nonce-x' 'strict-dynamic'"><title>t</title>` +
		`<meta http-equiv="Content-Security-Policy" content="img-src 'self'"></head>` +
		`<body><meta http-equiv="Content-Security-Policy" content="script-src 'none'"></body></html>`
	got, note := c.Inject(h, []byte(in))
	want := `<html><head>` + tag + `<meta http-equiv="content-security-policy" content="script-src &#39;nonce-x&#39; &#39;strict-dynamic&#39; ` +
		strings.ReplaceAll(c.Hash(), "'", "&#39;") + `"><title>t</title>` +
		`<meta http-equiv="Content-Security-Policy" content="img-src 'self'"></head>` +
		`<body><meta http-equiv="Content-Security-Policy" content="script-src 'none'"></body></html>`
	if string(got) != want || note != "" {
		t.Errorf("got (note %q)\n%s\nwant\n%s", note, got, want)
	}
	wantCSP := []string{"script-src 'self' " + c.Hash(), "img-src *", "default-src 'self' 'unsafe-inline'"}
	if g := h.Values("Content-Security-Policy"); strings.Join(g, "|") != strings.Join(wantCSP, "|") {
		t.Errorf("CSP header %q, want %q", g, wantCSP)
	}
	if g := h.Get("Content-Security-Policy-Report-Only"); g != "script-src 'none'" {
		t.Errorf("report-only policy changed to %q", g)
	}
}

func TestInjectMalformedCSP(t *testing.T) {
	c := testClock()
	h := http.Header{"Content-Type": {"text/html"}, "Content-Security-Policy": {"script-src 'self' caf\u00e9"}}
	in := `<head><meta http-equiv="Content-Security-Policy" content="scr!pt-src 'self'"></head>`
	got, note := c.Inject(h, []byte(in))
	if want := "<head><script>" + c.Script() + "</script>" + in[len("<head>"):]; string(got) != want {
		t.Errorf("got %s", got)
	}
	if h.Get("Content-Security-Policy") != "script-src 'self' caf\u00e9" {
		t.Errorf("malformed header changed to %q", h.Get("Content-Security-Policy"))
	}
	if !strings.Contains(note, "meta CSP left as is") || !strings.Contains(note, "Content-Security-Policy left as is") {
		t.Errorf("note %q does not name both malformed policies", note)
	}
}

func TestInjectCharset(t *testing.T) {
	c := testClock()
	for _, tc := range []struct{ ct, body, want string }{
		{"text/html", `<html><head><meta charset="windows-1252"></head></html>`, "text/html; charset=windows-1252"},
		{"text/html", `<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-2"></head></html>`, "text/html; charset=iso-8859-2"},
		{"text/html; charset=utf-8", `<html><head><meta charset="windows-1252"></head></html>`, "text/html; charset=utf-8"},
		{"text/html", `<html><head></head></html>`, "text/html"},
	} {
		h := http.Header{"Content-Type": {tc.ct}}
		c.Inject(h, []byte(tc.body))
		if got := h.Get("Content-Type"); got != tc.want {
			t.Errorf("%s with %s: Content-Type %q, want %q", tc.body, tc.ct, got, tc.want)
		}
	}
}

// TestProxyClock serves documents through the proxy with the clock on: HTML gets the
// script with a matching Content-Length, everything else is served byte for byte, a
// document over the bound is served untouched with a note, a 20 MiB one gets the clock, and
// http://rr.control/log?tail=N returns the last lines.
func TestProxyClock(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("<html><head></head><body>zipped</body></html>"))
	zw.Close()
	big := append([]byte("<html><head><title>big</title></head><body>"), bytes.Repeat([]byte("<p>twenty megabytes of page</p>\n"), 20<<20/32+1)...)
	exs := []ex{
		{method: "GET", url: "https://site.test/", status: 200, resType: "document",
			header: []string{"Content-Type: text/html; charset=utf-8", "Content-Security-Policy: script-src 'self'"},
			body:   []byte("<!doctype html><html><head><title>home</title></head><body>home</body></html>")},
		{method: "GET", url: "https://site.test/api", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte(`{"a":"<head>"}`)},
		{method: "GET", url: "https://site.test/gz", status: 200, resType: "document",
			header: []string{"Content-Type: text/html", "Content-Encoding: gzip"}, body: gz.Bytes()},
		{method: "GET", url: "https://site.test/big", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: big},
		{method: "GET", url: "https://site.test/over", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: big[:2<<20]},
		{method: "GET", url: "https://site.test/app.js", status: 200, resType: "script",
			header: []string{"Content-Type: text/javascript"}, body: []byte("<head>")},
		{method: "GET", url: "https://site.test/gone", status: 410, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("<html><head></head></html>")},
	}
	m := siteManifest()
	m.CapturedFrom = testCapturedFrom.Format(time.RFC3339)
	b := writeTestBundle(t, t.TempDir(), m, exs)
	tp := startProxyBundle(t, b, nil, func(o *Options) { o.Clock = true; o.LogTail = 3 })
	tp.s.clockMax = 1 << 20 // "/over" (2 MiB) is over it; "/big" (20 MiB) is not looked at
	clock := NewClock(testCapturedFrom, false)
	tag := "<script>" + clock.Script() + "</script>"

	r := tp.get(t, "https://site.test/", nil)
	want := "<!doctype html><html><head>" + tag + "<title>home</title></head><body>home</body></html>"
	if string(r.body) != want {
		t.Errorf("home page:\n%s\nwant\n%s", r.body, want)
	}
	if r.header.Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length %s, body %d", r.header.Get("Content-Length"), len(want))
	}
	if got := r.header.Get("Content-Security-Policy"); got != "script-src 'self' "+clock.Hash() {
		t.Errorf("CSP %q", got)
	}
	for _, x := range exs[1:] {
		if x.url == "https://site.test/big" || x.url == "https://site.test/gone" {
			continue
		}
		r := tp.get(t, x.url, nil)
		if r.status != x.status || !bytes.Equal(r.body, x.body) {
			t.Errorf("%s: status %d, %d bytes; want %d, %d bytes as recorded", x.url, r.status, len(r.body), x.status, len(x.body))
		}
	}
	tp.s.clockMax = MaxClockDocument
	r = tp.get(t, "https://site.test/big", nil)
	if want := append([]byte("<html><head>"+tag), big[len("<html><head>"):]...); !bytes.Equal(r.body, want) {
		t.Errorf("20 MiB document: %d bytes, want %d with the clock", len(r.body), len(want))
	}
	tp.get(t, "https://site.test/app.js", nil)
	// an error page (410) is an HTML answer too: it gets the clock (issue 21)
	if r := tp.get(t, "https://site.test/gone", nil); r.status != 410 || string(r.body) != "<html><head>"+tag+"</head></html>" {
		t.Errorf("410 page: %d %q, want the clock in it", r.status, r.body)
	}
	tail := tp.get(t, "http://rr.control/log?tail=2", nil)
	lines, err := ReadLog(bytes.NewReader(tail.body), "tail")
	if err != nil || len(lines) != 2 || lines[0].URL != "https://site.test/app.js" || lines[1].URL != "https://site.test/gone" {
		t.Errorf("log?tail=2: %v\n%s", err, tail.body)
	}
	all := tp.get(t, "http://rr.control/log", nil)
	if n := bytes.Count(all.body, []byte("\n")); n != 3 {
		t.Errorf("log without tail: %d lines, want the 3 kept:\n%s", n, all.body)
	}
	if r := tp.get(t, "http://rr.control/log?tail=x", nil); r.status != http.StatusBadRequest {
		t.Errorf("log?tail=x: status %d", r.status)
	}
	var bigNote bool
	for _, l := range tp.logLines(t) {
		if l.URL == "https://site.test/over" && strings.Contains(l.Note, "served without the clock") {
			bigNote = true
		}
	}
	if !bigNote {
		t.Error("no log note for the document over the bound")
	}
}

func TestLogRing(t *testing.T) {
	r := newLogRing(3)
	if got := r.tail(10); len(got) != 0 {
		t.Errorf("empty ring: %q", got)
	}
	for i := range 5 {
		r.add(encodeLogLine(LogLine{Method: "GET", URL: "u" + strconv.Itoa(i), Source: "exact"}))
	}
	lines, err := ReadLog(bytes.NewReader(r.tail(10)), "ring")
	if err != nil || len(lines) != 3 || lines[0].URL != "u2" || lines[2].URL != "u4" {
		t.Errorf("tail(10) = %v, %v", lines, err)
	}
	if lines, _ := ReadLog(bytes.NewReader(r.tail(1)), "ring"); len(lines) != 1 || lines[0].URL != "u4" {
		t.Errorf("tail(1) = %v", lines)
	}
	if got := r.tail(0); len(got) != 0 {
		t.Errorf("tail(0) = %q", got)
	}
}

func FuzzInject(f *testing.F) {
	for _, s := range []string{
		"<html><head><title>x</title></head></html>",
		"<!-- <head> --><head>",
		"<script>'<head>'</script>",
		`<head><meta http-equiv="Content-Security-Policy" content="script-src 'self'">`,
		`<meta http-equiv=content-security-policy content="default-src 'none'"><body>`,
		`{"a":1}`, "callback([1])", "<", "<!", "<head", "\ufeff <p>",
	} {
		f.Add([]byte(s), "script-src 'self'")
	}
	c := testClock()
	tag := "<script>" + c.Script() + "</script>"
	f.Fuzz(func(t *testing.T, body []byte, csp string) {
		h := http.Header{"Content-Type": {"text/html"}, "Content-Security-Policy": {csp}}
		orig := append([]byte(nil), body...)
		out, _ := c.Inject(h, body)
		if !bytes.Equal(body, orig) {
			t.Fatal("Inject changed its input")
		}
		if !looksLikeHTML(body) {
			if !bytes.Equal(out, body) {
				t.Fatal("a body that is not HTML was changed")
			}
			return
		}
		i := bytes.Index(out, []byte(tag))
		if i < 0 {
			t.Fatal("no script in the output")
		}
		rest := append(append([]byte(nil), out[:i]...), out[i+len(tag):]...)
		if !bytes.Contains(bytes.ToLower(body), []byte("content-security-policy")) && !bytes.Equal(rest, body) {
			t.Fatalf("output without the script differs from the input:\n%q\n%q", rest, body)
		}
	})
}

// TestClockErrorPages: every HTML answer of a replay gets the page clock (seed 003, issue
// 21): a recorded 500 page, the site's own 404 page (manifest not_found, keyed by site name)
// served for a missed document, and pab's own plain 404 page. Answers that are not HTML
// (a missed script, a JSON miss) stay without it.
func TestClockErrorPages(t *testing.T) {
	m := siteManifest()
	m.CapturedFrom = testCapturedFrom.Format(time.RFC3339)
	m.NotFound = map[string]string{"site": "https://site.test/rr-not-found-x"}
	exs := []ex{
		{method: "GET", url: "https://site.test/", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("<html><head></head><body>home</body></html>")},
		{method: "GET", url: "https://site.test/rr-not-found-x", status: 404, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("<html><head><title>Site 404</title></head></html>")},
		{method: "GET", url: "https://site.test/broken", status: 500, resType: "document",
			header: []string{"Content-Type: text/html; charset=utf-8"}, body: []byte("<html><head></head><body>oops</body></html>")},
	}
	b := writeTestBundle(t, t.TempDir(), m, exs)
	tp := startProxyBundle(t, b, map[string]string{"site.yaml": `hosts: ["site.test"]` + "\n"}, func(o *Options) { o.Clock = true })
	tag := "<script>" + NewClock(testCapturedFrom, false).Script() + "</script>"
	doc := map[string]string{"Sec-Fetch-Dest": "document"}

	if r := tp.get(t, "https://site.test/broken", doc); r.status != 500 || string(r.body) != "<html><head>"+tag+"</head><body>oops</body></html>" {
		t.Errorf("recorded 500 page: %d %q, want the clock in it", r.status, r.body)
	}
	r := tp.get(t, "https://site.test/no/such/page", doc)
	if want := "<html><head>" + tag + "<title>Site 404</title></head></html>"; r.status != 404 || string(r.body) != want {
		t.Errorf("site's own 404 page: %d %q, want %q", r.status, r.body, want)
	}
	if r.header.Get("Content-Length") != strconv.Itoa(len(r.body)) {
		t.Errorf("site's own 404 page: Content-Length %s for %d bytes", r.header.Get("Content-Length"), len(r.body))
	}
	r = tp.get(t, "https://other.test/missing", doc)
	if r.status != 404 || !strings.Contains(string(r.body), tag) || !strings.Contains(string(r.body), "Not in the recording") {
		t.Errorf("plain 404 page: %d %q, want the clock in it", r.status, r.body)
	}
	if r.header.Get("Content-Length") != strconv.Itoa(len(r.body)) {
		t.Errorf("plain 404 page: Content-Length %s for %d bytes", r.header.Get("Content-Length"), len(r.body))
	}
	if r := tp.get(t, "https://site.test/missing.js", map[string]string{"Sec-Fetch-Dest": "script"}); r.status != 404 || len(r.body) != 0 {
		t.Errorf("missed script: %d %q, want an empty 404", r.status, r.body)
	}
	if r := tp.get(t, "https://site.test/api/x", map[string]string{"Sec-Fetch-Dest": "empty", "Accept": "application/json"}); r.status != 404 || string(r.body) != "{}" {
		t.Errorf("missed API call: %d %q, want {}", r.status, r.body)
	}
}
