package replay

import (
	"bytes"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// updateRouteGolden rewrites testdata/route_keys.golden from the code under test. It was
// generated once with the code before issue 18 (separate Set.Key, Set.Endpoint, BlockedBy,
// ExcludedBy and LatestBy calls), so the test proves the one-call route gives the same
// keys, verdicts and pab inspect output.
var updateRouteGolden = flag.Bool("update-route-golden", false, "rewrite testdata/route_keys.golden")

// oddRequests are hostile or unusual requests looked up under every task's rules: HEADs,
// ports, IDNA hosts, encoded and dotted paths, opaque URLs, bodies, and no URL at all.
var oddRequests = []struct{ method, url, body, ct string }{
	{"GET", "https://books.toscrape.com/", "", ""},
	{"HEAD", "https://books.toscrape.com/", "", ""},
	{"head", "http://books.toscrape.com/catalogue/page-2.html?utm_source=x&b=2&a=1", "", ""},
	{"GET", "https://BOOKS.toscrape.com.:443/a/./b/../%7euser/caf%c3%a9/index.html", "", ""},
	{"GET", "http://books.toscrape.com:80/media/cache/x.jpg?v=1", "", ""},
	{"GET", "http://books.toscrape.com:8080/x%2Fy/%2e%2e/z", "", ""},
	{"GET", "https://bücher.example/straße?q=ä", "", ""},
	{"GET", "https://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%A4", "", ""},
	{"GET", "https://www.google-analytics.com/g/collect?v=2&tid=G-1", "", ""},
	{"HEAD", "https://www.google-analytics.com/g/collect", "", ""},
	{"GET", "https://www.googletagmanager.com/gtm.js?id=GTM-1", "", ""},
	{"POST", "https://lil.law.harvard.edu/api/x", `{"b":1,"a":[1,2],"csrf":"t"}`, "application/json"},
	{"POST", "https://lil.law.harvard.edu/form", "b=2&a=1&a=0", "application/x-www-form-urlencoded"},
	{"PUT", "https://boards.greenhouse.io/axon/jobs/1?gh_src=x", "not json {", "application/json"},
	{"HEAD", "https://boards.greenhouse.io/axon/jobs/1?gh_src=x", "", ""},
	{"GET", "https://acme-robotics.test/careers?x=1&x=2&y=", "", ""},
	{"HEAD", "https://harper.teamtailor.com/jobs", "", ""},
	{"GET", "http://books.toscrape.com/catalogue/category/books_1/index.html", "", ""},
	{"HEAD", "http://books.toscrape.com/catalogue/page-2.html", "", ""},
	{"GET", "http://books.toscrape.com/catalogue/page-2.html?a=1&b=2", "", ""},
	{"GET", "http://books.toscrape.com/index.html", "", ""},
	{"GET", "https://web.archive.org/web/2008/http://example.com/a?b=c", "", ""},
	{"GET", "https://[::1]:8443/p?q", "", ""},
	{"GET", "https://127.0.0.1/p;a=b/%ZZ?%zz=1&&=&k", "", ""},
	{"GET", "mailto:someone@example.com", "", ""},
	{"GET", "https:opaque/path?x=1", "", ""},
	{"OPTIONS", "*", "", ""},
	{"DELETE", "", "", ""},
	{"GET", "-", "", ""}, // no URL
}

// goldenRequest builds the request of an oddRequests line; "-" is no URL.
func goldenRequest(method, raw, body, ct string) (rules.Request, error) {
	r := rules.Request{Method: method, Body: []byte(body), ContentType: ct}
	if raw == "-" {
		return r, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return r, err
	}
	r.URL = u
	return r, nil
}

// routeGolden writes, for each shipped task, the index's key of every recorded exchange,
// then for each recorded exchange and each odd request: the key Set.Key computes, the
// lookup's keys (a HEAD's and the GET's), its source, rule and endpoint, and for odd
// requests the pab inspect text.
func routeGolden(t *testing.T) []byte {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("..", "tasks", "*", "recording"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no shipped task recordings under ../tasks (%v)", err)
	}
	// A layer of its own (exclude, latest, a GET-only endpoint a HEAD borrows, an endpoint
	// limited to a host), so every verdict and the HEAD's GET key are exercised.
	extra := filepath.Join("testdata", "route_golden_rules")
	var out bytes.Buffer
	for _, rec := range tasks {
		dir := filepath.Dir(rec)
		rs, err := rules.Load(filepath.Join("..", "sites"), filepath.Join(dir, "rules"), extra)
		if err != nil {
			t.Fatal(err)
		}
		b, err := recording.OpenBundle(rec)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := NewIndex(b, rs)
		if err != nil {
			b.Close()
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "== task %s\n", filepath.Base(dir))
		for _, ie := range ix.entries {
			fmt.Fprintf(&out, "index %s %s\n", ie.e.ID, ie.keyStr)
		}
		var reqs []rules.Request
		for i := range b.Entries {
			e := &b.Entries[i]
			u, err := url.Parse(e.URL)
			if err != nil {
				continue
			}
			body, err := b.RequestBody(e)
			if err != nil {
				t.Fatalf("%s: %v", e.ID, err)
			}
			reqs = append(reqs, rules.Request{Method: e.Method, URL: u, Body: body, ContentType: e.RequestType(body)})
			h := rules.Request{Method: "HEAD", URL: u}
			reqs = append(reqs, h)
		}
		nRecorded := len(reqs)
		for _, o := range oddRequests {
			r, err := goldenRequest(o.method, o.url, o.body, o.ct)
			if err != nil {
				fmt.Fprintf(&out, "unparsable %q: %v\n", o.url, err)
				continue
			}
			reqs = append(reqs, r)
		}
		for i, r := range reqs {
			raw := "-"
			if r.URL != nil {
				raw = r.URL.String()
			}
			fmt.Fprintf(&out, "req %s %s\n  set.key %s\n", r.Method, raw, rs.Key(r).String())
			res, l := ix.lookup(r, false)
			var keys []string
			for _, k := range l.keys {
				keys = append(keys, k.String())
			}
			fmt.Fprintf(&out, "  lookup.key %s keys [%s] source %s rule %q endpoint %q note %q\n",
				res.Key.String(), strings.Join(keys, " | "), res.Source, res.Rule, res.Endpoint, res.Note)
			if i >= nRecorded || i < 6 {
				var sb bytes.Buffer
				ix.Explain(r).Print(&sb)
				for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
					fmt.Fprintf(&out, "  | %s\n", line)
				}
			}
		}
		b.Close()
	}
	return out.Bytes()
}

// TestRouteKeysGolden checks that keys, lookups and explanations over the shipped tasks'
// recordings and rules, and a set of odd requests, are exactly those of the code before
// the route was computed in one call (testdata/route_keys.golden): the saved index stores
// keys, so they may never change.
func TestRouteKeysGolden(t *testing.T) {
	got := routeGolden(t)
	path := filepath.Join("testdata", "route_keys.golden")
	if *updateRouteGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s line %d differs:\n got %s\nwant %s", path, i+1, g, w)
		}
	}
}
