package replay

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

func testIndex(t testing.TB) *Index {
	t.Helper()
	b := writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges())
	ix, err := NewIndex(b, testRules(t, defaultTestRules))
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func req(method, raw string, body string, ct string) rules.Request {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return rules.Request{Method: method, URL: u, Body: []byte(body), ContentType: ct}
}

func TestLookupOrder(t *testing.T) {
	ix := testIndex(t)
	cases := []struct {
		name, method, url, body, ct string
		source                      Source
		entry                       string
	}{
		{"exact", "GET", "https://site.test/", "", "", SourceExact, "e000001"},
		{"scheme ignored", "GET", "http://site.test/", "", "", SourceExact, "e000001"},
		{"default port dropped", "GET", "https://site.test:443/", "", "", SourceExact, "e000001"},
		{"host case", "GET", "https://SITE.test/style.css", "", "", SourceExact, "e000002"},
		{"non-default port kept", "GET", "https://site.test:8443/port", "", "", SourceExact, "e000009"},
		{"non-default port is another host", "GET", "https://site.test/port", "", "", SourceMiss, ""},
		{"dropped param", "GET", "https://site.test/?utm_source=x&fbclid=y", "", "", SourceExact, "e000001"},
		{"dropped param recorded", "GET", "https://site.test/page?id=7", "", "", SourceExact, "e000018"},
		{"earliest copy", "GET", "https://site.test/dup", "", "", SourceExact, "e000014"},
		{"latest copy", "GET", "https://site.test/cart", "", "", SourceExact, "e000008"},
		// A page does not take another page's parameters (docs/replay.md "Matching policy").
		{"fuzzy refuses another value", "GET", "https://site.test/search?q=boots&page=9", "", "", SourceMiss, ""},
		{"fuzzy refuses every disagreeing page", "GET", "https://site.test/search?q=shoes&page=2", "", "", SourceMiss, ""},
		{"fuzzy: the request's extra parameter", "GET", "https://site.test/search?q=boots&page=2&sort=new", "", "", SourceFuzzy, "e000005"},
		{"fuzzy refuses a parameter the request lacks", "GET", "https://site.test/search?q=boots", "", "", SourceMiss, ""},
		{"fuzzy none in common below 0.5", "GET", "https://site.test/search?x=1", "", "", SourceMiss, ""},
		{"fuzzy static any share", "GET", "https://site.test/style.css?v=2", "", "", SourceFuzzy, "e000002"},
		{"fuzzy static by recorded mime", "GET", "https://site.test/notmod?v=9", "", "", SourceMiss, ""},
		{"fuzzy extra param", "GET", "https://site.test/page?id=7&session=abc", "", "", SourceFuzzy, "e000018"},
		{"head matches get", "HEAD", "https://site.test/style.css", "", "", SourceExact, "e000002"},
		{"head fuzzy", "HEAD", "https://site.test/search?q=boots&page=2&sort=new", "", "", SourceFuzzy, "e000005"},
		{"post exact json reordered", "POST", "https://site.test/api/cart", `{"qty":2,"id":1}`, "application/json", SourceExact, "e000006"},
		{"post other body misses", "POST", "https://site.test/api/cart", `{"id":2,"qty":2}`, "application/json", SourceMiss, ""},
		{"post never fuzzy", "POST", "https://site.test/search?q=shoes", "a=1", "application/x-www-form-urlencoded", SourceMiss, ""},
		{"blocked host", "GET", "https://tracker.test/px?id=1", "", "", SourceBlocked, ""},
		{"blocked path", "POST", "https://site.test/beacon/v1", "x", "text/plain", SourceBlocked, ""},
		{"excluded never indexed", "GET", "https://site.test/captcha/check", "", "", SourceMiss, ""},
		{"miss other host", "GET", "https://other.test/", "", "", SourceMiss, ""},
		{"unresolved still found", "GET", "https://site.test/gone", "", "", SourceExact, "e000013"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := ix.Lookup(req(c.method, c.url, c.body, c.ct))
			id := ""
			if res.Entry != nil {
				id = res.Entry.ID
			}
			if res.Source != c.source || id != c.entry {
				t.Errorf("%s %s: got %s %q (key %s), want %s %q", c.method, c.url, res.Source, id, res.Key.String(), c.source, c.entry)
			}
		})
	}
}

func TestIndexSkipped(t *testing.T) {
	ix := testIndex(t)
	sk := ix.Skipped()
	if sk["e000016"] != noteExcluded || len(sk) != 1 {
		t.Errorf("skipped = %v, want only e000016 excluded", sk)
	}
	if ix.Len() != len(siteExchanges())-1 {
		t.Errorf("Len = %d", ix.Len())
	}
}

// TestFuzzyEndpointKnobs checks that an endpoint's fuzzy and fuzzy_min fields are honoured.
func TestFuzzyEndpointKnobs(t *testing.T) {
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, siteExchanges())
	files := map[string]string{
		"_default.yaml": defaultTestRules["_default.yaml"],
		"site.yaml": `
hosts: ["site.test"]
endpoints:
  - name: search
    match: "GET /search"
    fuzzy_min: 0.5
  - name: page
    match: "GET /page"
    fuzzy: false
`,
	}
	ix, err := NewIndex(b, testRules(t, files))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url    string
		source Source
	}{
		{"https://site.test/search?q=boots&page=9", SourceFuzzy}, // 1 of 2 in common
		{"https://site.test/search?q=x&page=9&z=1", SourceMiss},  // 0 of 3
		{"https://site.test/page?id=7&session=abc", SourceMiss},  // fuzzy off
		{"https://site.test/page?id=7", SourceExact},
	} {
		if got := ix.Lookup(req("GET", c.url, "", "")).Source; got != c.source {
			t.Errorf("%s: %s, want %s", c.url, got, c.source)
		}
	}
}

func TestExplain(t *testing.T) {
	ix := testIndex(t)
	ex := ix.Explain(req("GET", "https://site.test/search?q=boots&page=2&sort=x&utm_medium=x", "", ""))
	if ex.Source != SourceFuzzy || ex.Entry == nil || ex.Entry.ID != "e000005" {
		t.Fatalf("explain = %+v", ex)
	}
	if ex.Key != "GET site.test/search?page=2&q=boots&sort=x" {
		t.Errorf("key = %q", ex.Key)
	}
	if len(ex.Refused) != 1 || ex.Refused[0].ID != "e000004" || ex.Refused[0].Reason != "page: the request has 2, this recording 1" {
		t.Errorf("refused = %+v", ex.Refused)
	}
	if len(ex.Candidates) != 2 || ex.Candidates[0].ID != "e000005" || ex.Candidates[0].Common != 2 || !ex.Candidates[0].SamePath {
		t.Errorf("candidates = %+v", ex.Candidates)
	}
	miss := ix.Explain(req("GET", "https://site.test/search/deeper", "", ""))
	if miss.Source != SourceMiss || len(miss.Candidates) == 0 || miss.Candidates[0].SamePath {
		t.Fatalf("miss explain = %+v", miss)
	}
	if miss.Candidates[0].URL != "https://site.test/search?q=shoes&page=1" || miss.Candidates[0].Common != 1 {
		t.Errorf("nearest = %+v", miss.Candidates[0])
	}
	var sb strings.Builder
	ex.Print(&sb)
	if !strings.Contains(sb.String(), "source:   fuzzy") || !strings.Contains(sb.String(), "e000005") {
		t.Errorf("print:\n%s", sb.String())
	}
	un := ix.Explain(req("GET", "https://site.test/gone", "", ""))
	if un.Note != noteUnresolved {
		t.Errorf("unresolved note = %q", un.Note)
	}
}

// bigIndex builds an index of n entries over n/100 paths with 100 query variants each.
func bigIndex(b *testing.B, n int) *Index {
	exs := make([]ex, n)
	for i := range exs {
		exs[i] = ex{method: "GET", url: fmt.Sprintf("https://big.test/p%d/item?id=%d&sort=asc&page=%d", i/100, i, i%7),
			status: 200, header: []string{"Content-Type: text/plain"}, body: []byte("x")}
	}
	bd := writeTestBundle(b, b.TempDir(), recording.Manifest{}, exs)
	rs, err := rules.Default()
	if err != nil {
		b.Fatal(err)
	}
	ix, err := NewIndex(bd, rs)
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

func BenchmarkLookupExact(b *testing.B) {
	ix := bigIndex(b, 100000)
	r := req("GET", "https://big.test/p512/item?id=51234&sort=asc&page=1", "", "")
	b.ResetTimer()
	for b.Loop() {
		if res := ix.Lookup(r); res.Source != SourceExact {
			b.Fatal(res.Source)
		}
	}
}

func BenchmarkLookupFuzzy(b *testing.B) {
	ix := bigIndex(b, 100000)
	r := req("GET", "https://big.test/p512/item?id=999999&sort=asc&page=3", "", "")
	b.ResetTimer()
	for b.Loop() {
		if res := ix.Lookup(r); res.Source != SourceFuzzy {
			b.Fatal(res.Source)
		}
	}
}

func BenchmarkNewIndex(b *testing.B) {
	exs := make([]ex, 100000)
	for i := range exs {
		exs[i] = ex{method: "GET", url: fmt.Sprintf("https://big.test/p%d/item?id=%d", i/100, i),
			status: 200, header: []string{"Content-Type: text/plain"}, body: []byte("x")}
	}
	bd := writeTestBundle(b, b.TempDir(), recording.Manifest{}, exs)
	rs, _ := rules.Default()
	b.ResetTimer()
	for b.Loop() {
		if _, err := NewIndex(bd, rs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFuzzyDocumentUnknownParam checks the matching policy for pages: a document request
// carrying a parameter that no recording of its path has (a listing's page=2 asked of a
// path recorded without page), or that the recording lacks, is a miss, not another
// recording by fuzzy; the same request of another type, a static file, and an endpoint
// that sets fuzzy_min keep the fuzzy answer.
func TestFuzzyDocumentUnknownParam(t *testing.T) {
	ix := testIndex(t)
	doc := func(raw string) rules.Request {
		r := req("GET", raw, "", "")
		r.Type = TypeDocument
		return r
	}
	other := req("GET", "https://site.test/search?q=boots&page=2&sort=new", "", "")
	other.Type = TypeAPI
	for _, c := range []struct {
		name   string
		r      rules.Request
		source Source
	}{
		{"document, sort recorded nowhere", doc("https://site.test/search?q=boots&page=2&sort=new"), SourceMiss},
		{"document, session recorded nowhere", doc("https://site.test/page?id=7&session=abc"), SourceMiss},
		{"type unknown", req("GET", "https://site.test/search?q=boots&page=2&sort=new", "", ""), SourceFuzzy},
		{"fetch", other, SourceFuzzy},
		{"document asking a static file", doc("https://site.test/style.css?v=2"), SourceFuzzy},
		{"document, its own key", doc("https://site.test/search?q=boots&page=2"), SourceExact},
	} {
		if got := ix.Lookup(c.r).Source; got != c.source {
			t.Errorf("%s: %s %s, want %s", c.name, c.r.URL, got, c.source)
		}
	}
	exp := ix.Explain(doc("https://site.test/search?q=boots&page=2&sort=new"))
	found := false
	for _, r := range exp.Refused {
		if strings.Contains(r.Reason, "sort, a parameter no recording of") {
			found = true
		}
	}
	if !found {
		t.Errorf("explanation does not name the unknown parameter: %+v", exp.Refused)
	}

	// a parameter another recording of the path has: the recording that lacks it is
	// refused too (a poster's posts in one forum are not the poster's posts)
	exs := append(siteExchanges(),
		ex{method: "GET", url: "https://site.test/f?forum=a", status: 200, resType: "document", header: []string{"Content-Type: text/html"}, body: []byte("forum a")},
		ex{method: "GET", url: "https://site.test/f?poster=x", status: 200, resType: "document", header: []string{"Content-Type: text/html"}, body: []byte("poster x")})
	ix3, err := NewIndex(writeTestBundle(t, t.TempDir(), recording.Manifest{}, exs), testRules(t, defaultTestRules))
	if err != nil {
		t.Fatal(err)
	}
	if got := ix3.Lookup(req("GET", "https://site.test/f?forum=a&poster=y", "", "")); got.Source != SourceFuzzy {
		t.Errorf("type unknown: %s, want fuzzy with forum=a", got.Source)
	}
	ex3 := ix3.Explain(doc("https://site.test/f?forum=a&poster=y"))
	if ex3.Source != SourceMiss || len(ex3.Refused) != 2 || !strings.Contains(ex3.Refused[0].Reason+ex3.Refused[1].Reason, "with poster, which this recording lacks") {
		t.Errorf("document f?forum=a&poster=y: %s, refused %+v; want a miss, forum=a refused for lacking poster", ex3.Source, ex3.Refused)
	}

	// an endpoint that sets fuzzy_min is its author's opt-in
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, siteExchanges())
	files := map[string]string{
		"_default.yaml": defaultTestRules["_default.yaml"],
		"site.yaml":     "hosts: [\"site.test\"]\nendpoints:\n  - name: search\n    match: \"GET /search\"\n    fuzzy_min: 0.5\n",
	}
	ix2, err := NewIndex(b, testRules(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if got := ix2.Lookup(doc("https://site.test/search?q=boots&page=2&sort=new")); got.Source != SourceFuzzy || got.Entry.ID != "e000005" {
		t.Errorf("opted-in endpoint: %s, want fuzzy e000005", got.Source)
	}
}

// TestBrowserPage: the stricter rule for pages is for a browser's navigations: Fetch
// Metadata says so on https, Accept text/html first on http; curl and bare clients are not
// taken for a browser.
func TestBrowserPage(t *testing.T) {
	for _, c := range []struct {
		hdr  map[string]string
		want bool
	}{
		{map[string]string{"Sec-Fetch-Dest": "document", "Accept": "text/html"}, true},
		{map[string]string{"Sec-Fetch-Dest": "iframe"}, true},
		{map[string]string{"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, true},
		{map[string]string{"Sec-Fetch-Dest": "empty", "Accept": "text/html"}, false},
		{map[string]string{"Accept": "*/*"}, false},
		{map[string]string{}, false},
	} {
		r, _ := http.NewRequest("GET", "http://a.test/list?page=2", nil)
		for k, v := range c.hdr {
			r.Header.Set(k, v)
		}
		if got := browserPage(r); got != c.want {
			t.Errorf("%v: browserPage %v, want %v", c.hdr, got, c.want)
		}
	}
}
