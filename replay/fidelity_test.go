package replay

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
)

// fidelity_test.go: the regressions of issue 13, "never a wrong page", each built from a
// case seen on real captures: fuzzy answering a page with another page, canonical keys
// collapsing redirect chains, revalidation, IDN hosts and multipart bodies.

// fidRules are defaultTestRules plus the site of fidExchanges, whose sid is volatile.
func fidRules() map[string]string {
	return map[string]string{
		"_default.yaml": defaultTestRules["_default.yaml"],
		"site.yaml":     defaultTestRules["site.yaml"],
		"fid.yaml":      "hosts: [\"fid.test\"]\ndrop_params: [sid]\n",
	}
}

const (
	fidLastModified = "Tue, 01 Oct 2024 10:00:00 GMT"
	fidBoundaryA    = "----WebKitFormBoundaryRecordedAAAAAA"
	fidBoundaryB    = "----WebKitFormBoundaryReplayedBBBBBB"
)

// fidUpload is the multipart body of an upload form written with boundary.
func fidUpload(t testing.TB, boundary, title string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	w.WriteField("title", title)
	fw, err := w.CreateFormFile("photo", "cat.png")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte("\x89PNG\r\n\x1a\nfake"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w.FormDataContentType()
}

// fidExchanges is the recording of the fidelity tests (ids e000001...).
func fidExchanges(t testing.TB) []ex {
	html := []string{"Content-Type: text/html"}
	doc := func(u, body string, header ...string) ex {
		return ex{method: "GET", url: u, status: 200, resType: "document", header: append(append([]string{}, html...), header...), body: []byte(body)}
	}
	redirect := func(u string, status int, loc string) ex {
		return ex{method: "GET", url: u, status: status, resType: "document", header: []string{"Location: " + loc, "Content-Type: text/html"}}
	}
	upload, uploadType := fidUpload(t, fidBoundaryA, "my cat")
	return []ex{
		/* e000001 */ doc("https://fid.test/about/faq.php?faq_id=252", "faq entry 252"),
		/* e000002 */ doc("https://fid.test/about/faq.php?faq_id=243", "faq entry 243"),
		/* e000003 */ doc("https://fid.test/browse.php?collection=etree&field=%2Fmetadata%2Fcreator", "etree by creator"),
		/* e000004 */ doc("https://fid.test/same?v=1", "one payload"),
		/* e000005 */ doc("https://fid.test/same?v=2", "one payload"),
		/* e000006 */ doc("https://fid.test/page?id=7&sid=abc", "page 7"),
		/* e000007 */ {method: "GET", url: "https://fid.test/static/app.css?v=41", status: 200, resType: "style",
			header: []string{"Content-Type: text/css"}, body: []byte("body{}")},
		/* e000008 */ redirect("http://fid.test/", 301, "https://fid.test/"),
		/* e000009 */ doc("https://fid.test/", "home over https"),
		/* e000010 */ redirect("http://fid.test/only", 301, "https://fid.test/only"),
		/* e000011 */ redirect("https://fid.test/loop", 302, "/loop"),
		/* e000012 */ doc("http://fid.test/both", "both: http"),
		/* e000013 */ doc("https://fid.test/both", "both: https"),
		/* e000014 */ doc("https://fid.test/etag", "strong etag body", `ETag: "v1"`, "Cache-Control: max-age=60",
			"Last-Modified: "+fidLastModified, "Set-Cookie: s=1", "Vary: Accept-Encoding", "Date: Tue, 01 Oct 2024 11:00:00 GMT"),
		/* e000015 */ doc("https://fid.test/weak", "weak etag body", `ETag: W/"w1"`),
		/* e000016 */ doc("https://fid.test/lastmod", "last-modified body", "Last-Modified: "+fidLastModified),
		/* e000017 */ doc("https://bücher.test/", "buch home"),
		/* e000018 */ doc("https://xn--caf-dma.test/menu", "cafe menu"),
		/* e000019 */ doc("https://fid.test/straße", "street"),
		/* e000020 */ {method: "POST", url: "https://fid.test/upload", reqType: uploadType, reqBody: upload, status: 200,
			resType: "fetch", header: []string{"Content-Type: application/json"}, body: []byte(`{"uploaded":true}`)},
		/* e000021 */ {method: "GET", url: "https://fid.test/api/items?page=1", status: 200, resType: "fetch",
			header: []string{"Content-Type: application/json"}, body: []byte(`{"items":[1]}`)},
		/* e000022 */ doc("https://fid.test/cart?x=1", "cart state"),
		/* e000023 */ doc("https://fid.test/cart?x=2", "cart state"),
	}
}

func fidIndex(t testing.TB) *Index {
	t.Helper()
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, fidExchanges(t))
	ix, err := NewIndex(b, testRules(t, fidRules()))
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestFidelityProxy replays each case through the proxy over TLS (plain HTTP for http://
// URLs) and checks the answer, its status and its log line.
func TestFidelityProxy(t *testing.T) {
	tp := startProxy(t, recording.Manifest{}, fidExchanges(t), fidRules())
	doc := map[string]string{"Sec-Fetch-Dest": "document"}
	xhr := map[string]string{"Sec-Fetch-Dest": "empty", "Accept": "application/json"}
	upload, uploadType := fidUpload(t, fidBoundaryB, "my cat")
	otherUpload, otherType := fidUpload(t, fidBoundaryB, "my dog")
	cases := []struct {
		name, method, url string
		hdr               map[string]string
		body              []byte
		status            int
		answer            string // "" checks nothing for misses
		source            Source
		entry             string
	}{
		{"faq without a query is a miss", "GET", "https://fid.test/about/faq.php", doc, nil, 404, "", SourceMiss, ""},
		{"one parameter of two in common is a miss", "GET", "https://fid.test/browse.php?collection=etree&field=/metadata/year", doc, nil, 404, "", SourceMiss, ""},
		{"a parameter the request lacks is a miss", "GET", "https://fid.test/browse.php?collection=etree", doc, nil, 404, "", SourceMiss, ""},
		{"an API call with another page is a miss", "GET", "https://fid.test/api/items?page=2", xhr, nil, 404, "{}", SourceMiss, ""},
		{"one payload for every parameter: served", "GET", "https://fid.test/same", doc, nil, 200, "one payload", SourceFuzzy, "e000004"},
		{"drop_params: exact whatever sid", "GET", "https://fid.test/page?sid=zzz&id=7", doc, nil, 200, "page 7", SourceExact, "e000006"},
		{"drop_params: and an extra parameter is fuzzy (fetch)", "GET", "https://fid.test/page?id=7&sid=q&ref=x", xhr, nil, 200, "page 7", SourceFuzzy, "e000006"},
		{"a static file stays lenient", "GET", "https://fid.test/static/app.css?v=42", map[string]string{"Sec-Fetch-Dest": "style"}, nil, 200, "body{}", SourceFuzzy, "e000007"},
		{"a static file without its version", "GET", "https://fid.test/static/app.css", map[string]string{"Sec-Fetch-Dest": "style"}, nil, 200, "body{}", SourceFuzzy, "e000007"},
		{"https: the https capture, not the redirect to itself", "GET", "https://fid.test/", doc, nil, 200, "home over https", SourceExact, "e000009"},
		{"http: the redirect to its own key skipped for the next capture", "GET", "http://fid.test/", doc, nil, 200, "home over https", SourceExact, "e000009"},
		{"only a redirect to the other scheme: served", "GET", "http://fid.test/only", doc, nil, 301, "", SourceExact, "e000010"},
		{"its target is the very URL: miss, not a loop", "GET", "https://fid.test/only", doc, nil, 404, "", SourceMiss, ""},
		{"a redirect to the very URL requested: miss", "GET", "https://fid.test/loop", doc, nil, 404, "", SourceMiss, ""},
		{"both schemes recorded: https", "GET", "https://fid.test/both", doc, nil, 200, "both: https", SourceExact, "e000013"},
		{"both schemes recorded: http", "GET", "http://fid.test/both", doc, nil, 200, "both: http", SourceExact, "e000012"},
		{"IDN recorded in Unicode, asked in punycode", "GET", "https://xn--bcher-kva.test/", doc, nil, 200, "buch home", SourceExact, "e000017"},
		{"IDN recorded in punycode, asked for the Unicode name", "GET", "https://café.test/menu", doc, nil, 200, "cafe menu", SourceExact, "e000018"},
		{"path recorded raw UTF-8, asked percent-encoded", "GET", "https://fid.test/stra%C3%9Fe", doc, nil, 200, "street", SourceExact, "e000019"},
		{"multipart with a fresh boundary", "POST", "https://fid.test/upload", map[string]string{"Content-Type": uploadType, "Sec-Fetch-Dest": "empty"}, upload, 200, `{"uploaded":true}`, SourceExact, "e000020"},
		{"multipart with other content", "POST", "https://fid.test/upload", map[string]string{"Content-Type": otherType, "Sec-Fetch-Dest": "empty"}, otherUpload, 404, "", SourceMiss, ""},
		{"a page with a parameter no recording has is a miss", "GET", "https://fid.test/page?id=7&sid=q&ref=x", doc, nil, 404, "", SourceMiss, ""},
	}
	for _, c := range cases {
		r := tp.do(t, c.method, c.url, c.hdr, c.body)
		if r.status != c.status || (c.answer != "" && string(r.body) != c.answer) {
			t.Errorf("%s: %s %s: %d %q, want %d %q", c.name, c.method, c.url, r.status, r.body, c.status, c.answer)
		}
		if c.status == 301 && r.header.Get("Location") != "https://fid.test/only" {
			t.Errorf("%s: Location %q", c.name, r.header.Get("Location"))
		}
	}
	lines := tp.logLines(t)
	if len(lines) != len(cases) {
		t.Fatalf("%d log lines, want %d", len(lines), len(cases))
	}
	for i, c := range cases {
		if l := lines[i]; l.Source != c.source || l.Entry != c.entry && c.source != SourceMiss || l.Status != c.status {
			t.Errorf("%s: log source %s entry %q status %d, want %s %q %d", c.name, l.Source, l.Entry, l.Status, c.source, c.entry, c.status)
		}
	}
	if l := lines[10]; !strings.Contains(l.Note, "skipped e000008: redirect to its own key") {
		t.Errorf("http://fid.test/ note %q", l.Note)
	}
	if l := lines[16]; l.URL != "https://xn--bcher-kva.test/" || l.Key != "GET xn--bcher-kva.test/" {
		t.Errorf("IDN log line: url %q key %q", l.URL, l.Key)
	}
	if l := lines[19]; !strings.HasPrefix(l.Key, "POST fid.test/upload #body:multipart:title=my cat&photo=#file:cat.png:sha256:") {
		t.Errorf("multipart key %q", l.Key)
	}
}

// TestFidelityRevalidate: conditional requests get 304 with no body when their validators
// match the recorded ones (RFC 9110 section 13), logged 304 with the lookup's source.
func TestFidelityRevalidate(t *testing.T) {
	tp := startProxy(t, recording.Manifest{}, fidExchanges(t), fidRules())
	cases := []struct {
		name, method, url string
		hdr               map[string]string
		status            int
	}{
		{"no validators", "GET", "https://fid.test/etag", nil, 200},
		{"strong tag", "GET", "https://fid.test/etag", map[string]string{"If-None-Match": `"v1"`}, 304},
		{"weak tag against a strong one", "GET", "https://fid.test/etag", map[string]string{"If-None-Match": `W/"v1"`}, 304},
		{"strong tag against a weak one", "GET", "https://fid.test/weak", map[string]string{"If-None-Match": `"w1"`}, 304},
		{"other tag", "GET", "https://fid.test/etag", map[string]string{"If-None-Match": `"v0"`}, 200},
		{"list", "GET", "https://fid.test/etag", map[string]string{"If-None-Match": `"a", W/"b" ,W/"v1"`}, 304},
		{"list without it", "GET", "https://fid.test/etag", map[string]string{"If-None-Match": `"a", "b"`}, 200},
		{"star", "GET", "https://fid.test/etag", map[string]string{"If-None-Match": "*"}, 304},
		{"star without an ETag", "GET", "https://fid.test/lastmod", map[string]string{"If-None-Match": "*"}, 304},
		{"If-None-Match decides over If-Modified-Since", "GET", "https://fid.test/etag",
			map[string]string{"If-None-Match": `"v0"`, "If-Modified-Since": "Wed, 02 Oct 2024 10:00:00 GMT"}, 200},
		{"malformed list", "GET", "https://fid.test/etag", map[string]string{"If-None-Match": `"v1`}, 200},
		{"HEAD", "HEAD", "https://fid.test/etag", map[string]string{"If-None-Match": `"v1"`}, 304},
		{"since the same second", "GET", "https://fid.test/lastmod", map[string]string{"If-Modified-Since": fidLastModified}, 304},
		{"since later", "GET", "https://fid.test/lastmod", map[string]string{"If-Modified-Since": "Wed, 02 Oct 2024 10:00:00 GMT"}, 304},
		{"since earlier", "GET", "https://fid.test/lastmod", map[string]string{"If-Modified-Since": "Tue, 01 Oct 2024 09:59:59 GMT"}, 200},
		{"since RFC 850 date", "GET", "https://fid.test/lastmod", map[string]string{"If-Modified-Since": "Tuesday, 01-Oct-24 10:00:00 GMT"}, 304},
		{"since an invalid date", "GET", "https://fid.test/lastmod", map[string]string{"If-Modified-Since": "yesterday"}, 200},
		{"since, no Last-Modified recorded", "GET", "https://fid.test/weak", map[string]string{"If-Modified-Since": "Wed, 02 Oct 2024 10:00:00 GMT"}, 200},
		{"fuzzy answers revalidate too", "GET", "https://fid.test/page?id=7&ref=x", map[string]string{"If-None-Match": "*"}, 304},
		{"a miss is never 304", "GET", "https://fid.test/about/faq.php", map[string]string{"If-None-Match": "*"}, 404},
		{"POST is answered as recorded", "POST", "https://fid.test/etag", map[string]string{"If-None-Match": "*"}, 404},
	}
	for _, c := range cases {
		r := tp.do(t, c.method, c.url, c.hdr, nil)
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, r.status, c.status)
			continue
		}
		if c.status != 304 {
			continue
		}
		if len(r.body) != 0 || r.header.Get("Content-Length") != "" || r.header.Get("Content-Type") != "" || r.header.Get("Set-Cookie") != "" {
			t.Errorf("%s: 304 with body %q, header %v", c.name, r.body, r.header)
		}
		if c.url == "https://fid.test/etag" {
			for name, want := range map[string]string{"Etag": `"v1"`, "Cache-Control": "max-age=60", "Last-Modified": fidLastModified,
				"Vary": "Accept-Encoding", "Date": "Tue, 01 Oct 2024 11:00:00 GMT"} {
				if got := r.header.Get(name); got != want {
					t.Errorf("%s: %s %q, want %q", c.name, name, got, want)
				}
			}
		}
	}
	lines := tp.logLines(t)
	if len(lines) != len(cases) {
		t.Fatalf("%d log lines, want %d", len(lines), len(cases))
	}
	for i, c := range cases {
		l := lines[i]
		if l.Status != c.status {
			t.Errorf("%s: logged status %d, want %d", c.name, l.Status, c.status)
		}
		want := SourceExact
		if strings.Contains(c.url, "ref=x") {
			want = SourceFuzzy
		}
		if c.status == 304 && (l.Source != want || !strings.HasPrefix(l.Note, "304: ") || l.Entry == "") {
			t.Errorf("%s: log line %+v", c.name, l)
		}
	}
}

// TestFidelityExplain: pab inspect shows every refused candidate with its reason.
func TestFidelityExplain(t *testing.T) {
	ix := fidIndex(t)
	ex := ix.Explain(req("GET", "https://fid.test/about/faq.php", "", ""))
	if ex.Source != SourceMiss || len(ex.Refused) != 2 {
		t.Fatalf("faq.php: %+v", ex)
	}
	for i, id := range []string{"e000001", "e000002"} {
		rf := ex.Refused[i]
		if rf.ID != id || rf.Step != StepFuzzy || !strings.HasPrefix(rf.Reason, "the request has no parameters; this recording has faq_id=") {
			t.Errorf("refused[%d] = %+v", i, rf)
		}
	}
	var sb strings.Builder
	ex.Print(&sb)
	out := sb.String()
	for _, want := range []string{
		"  fuzzy    no   all 2 recordings of GET fid.test/about/faq.php refused (listed under refused)",
		"refused (the matching policy: a miss rather than a wrong answer):\n",
		"  e000001  fuzzy  https://fid.test/about/faq.php?faq_id=252  the request has no parameters; this recording has faq_id=252\n",
		"  e000002  fuzzy  https://fid.test/about/faq.php?faq_id=243  the request has no parameters; this recording has faq_id=243\n",
		"source:   miss\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("print lacks %q:\n%s", want, out)
		}
	}

	ex = ix.Explain(req("GET", "https://fid.test/browse.php?collection=etree&field=/metadata/year", "", ""))
	if len(ex.Refused) != 1 || ex.Refused[0].Reason != "field: the request has /metadata/year, this recording /metadata/creator" {
		t.Errorf("browse.php refused = %+v", ex.Refused)
	}

	ex = ix.Explain(req("GET", "http://fid.test/", "", ""))
	if ex.Source != SourceExact || ex.Entry.ID != "e000009" || len(ex.Refused) != 1 || ex.Refused[0].ID != "e000008" ||
		!strings.Contains(ex.Refused[0].Reason, "redirect to its own key (Location https://fid.test/): skipped for the next capture") {
		t.Errorf("http://fid.test/: %+v", ex)
	}
	if d := ex.Steps[1].Detail; !strings.Contains(d, "e000008 skipped, a redirect to its own key") {
		t.Errorf("exact detail %q", d)
	}
	ex = ix.Explain(req("GET", "https://fid.test/", "", ""))
	if d := ex.Steps[1].Detail; ex.Entry.ID != "e000009" || !strings.Contains(d, "recorded with both schemes: the request's (https) first") {
		t.Errorf("https://fid.test/: %q", d)
	}
	ex = ix.Explain(req("GET", "https://fid.test/loop", "", ""))
	if ex.Source != SourceMiss || len(ex.Refused) != 1 || !strings.Contains(ex.Refused[0].Reason, "redirect to the very URL requested") ||
		!strings.Contains(ex.Steps[1].Detail, "a miss rather than a redirect loop") {
		t.Errorf("loop: %+v", ex)
	}
	ex = ix.Explain(req("GET", "https://fid.test/same", "", ""))
	if ex.Source != SourceFuzzy || !strings.Contains(ex.Steps[2].Detail, "all 2 recordings of GET fid.test/same have one payload") {
		t.Errorf("same payload: %+v", ex.Steps)
	}
}

// TestFidelityIndex checks the policy's corners at the index: ties of same-payload
// recordings follow latest, IDN and paths in both directions, HEAD.
func TestFidelityIndex(t *testing.T) {
	ix := fidIndex(t)
	for _, c := range []struct {
		method, url string
		source      Source
		entry       string
	}{
		{"GET", "https://fid.test/cart", SourceFuzzy, "e000023"}, // one payload, latest: the last
		{"GET", "https://fid.test/same?v=9", SourceMiss, ""},     // lenient rule: 0 of 1 is below fuzzy_min
		{"GET", "https://bücher.test/", SourceExact, "e000017"},
		{"GET", "https://BÜCHER.test./", SourceExact, "e000017"},
		{"GET", "https://xn--caf-dma.test/menu", SourceExact, "e000018"},
		{"GET", "https://fid.test/straße", SourceExact, "e000019"},
		{"HEAD", "http://fid.test/", SourceExact, "e000009"},
		{"HEAD", "https://fid.test/loop", SourceMiss, ""},
		{"HEAD", "https://fid.test/about/faq.php", SourceMiss, ""},
	} {
		res := ix.Lookup(req(c.method, c.url, "", ""))
		id := ""
		if res.Entry != nil {
			id = res.Entry.ID
		}
		if res.Source != c.source || id != c.entry {
			t.Errorf("%s %s: %s %q (key %s), want %s %q", c.method, c.url, res.Source, id, res.Key.String(), c.source, c.entry)
		}
	}
}

// TestParseETags covers the entity-tag lists of If-None-Match and both comparisons.
func TestParseETags(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []entityTag
		ok   bool
	}{
		{`"a"`, []entityTag{{opaque: `"a"`}}, true},
		{`W/"a", "b,c" ,, W/""`, []entityTag{{true, `"a"`}, {false, `"b,c"`}, {true, `""`}}, true},
		{`abc`, []entityTag{{opaque: "abc"}}, true},
		{``, nil, true},
		{`"a`, nil, false},
		{`"a"b`, nil, false},
		{"\"a\x01\"", nil, false},
	} {
		got, ok := parseETags(c.in, 4)
		if ok != c.ok || len(got) != len(c.want) {
			t.Errorf("%q: %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q: %v, want %v", c.in, got, c.want)
			}
		}
	}
	if _, ok := parseETags(`"1","2","3","4","5"`, 4); ok {
		t.Error("more tags than the bound")
	}
	strong, weak := entityTag{opaque: `"x"`}, entityTag{weak: true, opaque: `"x"`}
	if !strong.matches(strong, false) || strong.matches(weak, false) || weak.matches(weak, false) ||
		!weak.matches(strong, true) || !weak.matches(weak, true) || (entityTag{opaque: `"y"`}).matches(strong, true) {
		t.Error("comparison")
	}
	if noneMatchMatches([]string{strings.Repeat(`"x",`, 3000)}, []string{`"x"`}) {
		t.Error("an over-long If-None-Match matched")
	}
}

// TestFidelityRevalidateHeaders checks revalidate alone: only the fields of RFC 9110
// section 15.4.5 survive.
func TestFidelityRevalidateHeaders(t *testing.T) {
	h := http.Header{}
	for _, kv := range []string{"Etag: \"v\"", "Content-Type: text/html", "Content-Security-Policy: x", "Expires: 0",
		"Content-Location: /a", "Access-Control-Allow-Origin: *", "X-Other: 1"} {
		n, v, _ := strings.Cut(kv, ": ")
		h.Add(n, v)
	}
	a := &answer{status: 200, header: h, body: strings.NewReader("x"), size: 1}
	r, _ := http.NewRequest("GET", "https://x.test/", nil)
	r.Header.Set("If-None-Match", `"v"`)
	if !revalidate(r, a) || a.status != 304 || a.body != nil || a.size != 0 {
		t.Fatalf("answer %+v", a)
	}
	if len(a.header) != 4 || a.header.Get("Etag") == "" || a.header.Get("Expires") == "" || a.header.Get("Content-Location") == "" ||
		a.header.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("304 fields %v", a.header)
	}
	a = &answer{status: 404, header: http.Header{"Etag": {`"v"`}}}
	if revalidate(r, a) || a.status != 404 {
		t.Error("a 404 revalidated") // RFC 9110 section 13.1: preconditions apply to 2xx answers only
	}
}

// TestParamsAgree: the allocation-free check and the reason-giving one agree.
func TestParamsAgree(t *testing.T) {
	p := func(pairs ...string) []string {
		out := make([]string, len(pairs))
		for i, s := range pairs {
			out[i] = strings.Replace(s, "=", "\x00", 1)
		}
		return out
	}
	body := func(b string) string { return bodyPair + b }
	for _, c := range []struct {
		want, have []string
		agree      bool
		reason     string
	}{
		{nil, nil, true, ""},
		{nil, p("faq_id=252"), false, "the request has no parameters; this recording has faq_id=252"},
		{nil, []string{body("x")}, false, "the request has no parameters and no body; this recording has a request body"},
		{p("a=1", "b=2"), p("a=1"), true, ""},
		{p("a=1"), p("a=1", "b=2"), false, "this recording has b=2, which the request lacks"},
		{p("a=1", "b=3"), p("a=1", "b=2"), false, "b: the request has 3, this recording 2"},
		{p("a=1", "a=2"), p("a=1"), false, "a: the request has 1|2, this recording 1"},
		{p("a=1", "ab=2"), p("ab=2"), true, ""},
		{append([]string{body("x")}, p("a=1")...), p("a=1"), true, ""},
		{p("a=1"), append([]string{body("x")}, p("a=1")...), false, "this recording has a request body, the request none"},
		{append([]string{body("y")}, p("a=1")...), append([]string{body("x")}, p("a=1")...), false, "the request body differs from this recording's"},
		{p("q=" + strings.Repeat("é", 40)), p("q=x\n"), false, `q: the request has ` + strings.Repeat("é", 30) + `…, this recording "x\n"`},
	} {
		if got := paramsAgree(c.want, c.have); got != c.agree {
			t.Errorf("paramsAgree(%q, %q) = %v", c.want, c.have, got)
		}
		if got := paramConflict(c.want, c.have); got != c.reason {
			t.Errorf("paramConflict(%q, %q) = %q, want %q", c.want, c.have, got, c.reason)
		}
	}
}
