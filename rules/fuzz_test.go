package rules

import (
	"net/url"
	"strings"
	"testing"

	"github.com/pab-dev/pab/sites"
)

// FuzzKey checks that the key never panics, is stable, stays on one line, and that its
// parts are already normal (normalizing them again changes nothing).
func FuzzKey(f *testing.F) {
	f.Add("GET", "https://WWW.Example.COM:443/a/../b/%7e?utm_source=x&k=airpods+pro&b=1&a=2", []byte(nil), "")
	f.Add("POST", "https://shop.test/cart/add", []byte(`{"quantity":"1","ASIN":"B0TEST","csrf_token":"x"}`), "application/json")
	f.Add("POST", "http://shop.test:8080/form", []byte("b=2&a=1&a=0&q=x+y%21"), "application/x-www-form-urlencoded")
	f.Add("PUT", "http://[::1]:80/%2F%2e%2E/x?%zz=%", []byte{0, 1, 2, 0xff}, "application/octet-stream")
	f.Add("post", "https://e.com/s?q=%E2%82%AC&q=%0A#frag", []byte(`[[[{"a":"\u2028"}]]]`), "text/plain")
	f.Add("", "//host./p;x?&&=&", []byte(" {\"a\":1} "), "multipart/form-data; boundary=x")
	f.Add("GET", "https://analytics.lil.tools/piwik.php?action_name=Projects%20%7C%20Library%20Innovation%20Lab&idsite=1", []byte(nil), "")
	s, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, rawURL string, body []byte, contentType string) {
		u, err := url.Parse(rawURL)
		if err != nil {
			// Reach the normalizer with fields url.Parse would refuse.
			u = &url.URL{Host: rawURL, Path: rawURL, RawQuery: rawURL}
		}
		r := Request{Method: method, URL: u, Body: body, ContentType: contentType}
		k1 := s.Key(r)
		k2 := s.Key(r)
		str := k1.String()
		if str != k2.String() || k1.Base() != k2.Base() {
			t.Fatalf("key not stable: %q vs %q", str, k2.String())
		}
		if strings.ContainsAny(str, "\r\n") {
			t.Fatalf("key has a line break: %q", str)
		}
		if !strings.HasPrefix(str, k1.Base()) {
			t.Fatalf("Base %q is not a prefix of %q", k1.Base(), str)
		}
		if p := normPath(k1.Path); p != k1.Path {
			t.Fatalf("path not idempotent: %q -> %q", k1.Path, p)
		}
		if h, _ := normHost(k1.Host); h != k1.Host {
			t.Fatalf("host not idempotent: %q -> %q", k1.Host, h)
		}
		if m := normMethod(k1.Method); m != k1.Method {
			t.Fatalf("method not idempotent: %q -> %q", k1.Method, m)
		}
		// The kept parameters, encoded again, give the same parameters.
		var q []string
		for _, p := range k1.Params {
			q = append(q, url.QueryEscape(p.Name)+"="+url.QueryEscape(p.Value))
		}
		again := parseParams(strings.Join(q, "&"), nil)
		sortParams(again)
		if len(again) != len(k1.Params) {
			t.Fatalf("params: %q re-parsed to %q", k1.Params, again)
		}
		for i := range again {
			if again[i] != k1.Params[i] {
				t.Fatalf("params: %q re-parsed to %q", k1.Params, again)
			}
		}
		// A canonical JSON body is its own canonical form.
		var bf bodyFilter
		if c, ok := canonicalJSON(body, &bf); ok {
			if c2, ok := canonicalJSON([]byte(c), &bf); !ok || c2 != c {
				t.Fatalf("json not idempotent: %q -> %q (%v)", c, c2, ok)
			}
		}
		s.Blocked(u)
		s.Latest(u)
		s.Excluded(u)
		s.XHRNotFound(u.Host)
	})
}

// FuzzParseRules checks that any bytes give a File or a one-line error naming the file, and
// that a parsed file builds into a Set whose lookups do not panic.
func FuzzParseRules(f *testing.F) {
	f.Add(sites.Default)
	f.Add([]byte("site: amazon\nhosts: [\"amazon.com\", \"*.amazon.com\"]\ndrop_params: [ref, \"pd_rd_*\"]\nbody_drop: [\"*token*\"]\n" +
		"block: [\"fls-na.amazon.com\", \"www.amazon.com/1/batch/**\"]\nexclude: [\"www.amazon.com/checkpoint/**\"]\nlatest: [\"*/gp/cart/*\"]\n" +
		"xhr_not_found: { content_type: application/json, body: \"{}\" }\n"))
	f.Add([]byte("hosts: [a.test]\nendpoints:\n  - name: product\n    match: \"GET /*/dp/{asin}/**\"\n    key: \"/dp/{asin}\"\n    keep_params: []\n" +
		"  - name: search\n    match: GET /s\n    kind: search\n    text_param: k\n    similarity: 0.6\n    fuzzy: true\n    fuzzy_min: 0\n"))
	f.Add([]byte("hosts: &a [x]\ndrop_params: *a\n"))
	f.Add([]byte("a: [1, 2\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("endpoints:\n  - name: p\n    match: /{a}/**/{b}\n    key: /{b}/{a}\n"))
	urls := []*url.URL{
		{Scheme: "https", Host: "a.test", Path: "/x/dp/B0/y", RawQuery: "k=1&ref=2"},
		{Scheme: "http", Host: "www.amazon.com:8080", Path: "/gp/cart/view.html"},
		{Host: "", Path: ""},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile("fuzz.yaml", data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "fuzz.yaml") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		for _, site := range []string{"fuzz", DefaultSite} {
			set, err := build([]layerFile{{file: file, site: site}})
			if err != nil {
				continue
			}
			for _, u := range urls {
				r := Request{Method: "GET", URL: u, Body: []byte(`{"a":1}`), ContentType: "application/json"}
				if set.Key(r).String() != set.Key(r).String() {
					t.Fatal("key not stable")
				}
				set.Endpoint(r)
				set.Blocked(u)
				set.Excluded(u)
				set.Latest(u)
				set.XHRNotFound(u.Host)
			}
		}
	})
}

// BenchmarkKey measures key normalization with the shipped default rules.
func BenchmarkKey(b *testing.B) {
	s, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		r    Request
	}{
		{"static", Request{Method: "GET", URL: mustURL(b, "https://lil.law.harvard.edu/assets/css/main.css?cache-buster=11")}},
		{"tracking", Request{Method: "GET", URL: mustURL(b, "https://www.amazon.com/s?k=airpods+pro&utm_source=google&utm_medium=cpc&gclid=abc123&crid=2X&sprefix=airp%2Caps%2C150&ref=nb_sb_noss_1")}},
		{"messy-path", Request{Method: "get", URL: mustURL(b, "https://WWW.Example.COM:443/a/./b/../%7euser/caf%c3%a9/index.html")}},
		{"json-body", Request{Method: "POST", URL: mustURL(b, "https://shop.test/cart/add"), ContentType: "application/json",
			Body: []byte(`{"items":[{"ASIN":"B0TEST","quantity":"1","offerListingId":"abc"}],"csrf":"x","clientTs":1700000000000}`)}},
		{"form-body", Request{Method: "POST", URL: mustURL(b, "https://shop.test/login"), ContentType: "application/x-www-form-urlencoded",
			Body: []byte("email=a%40b.test&remember=1&next=%2Faccount&authenticity_token=XyZ")}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Key(c.r).String()
			}
		})
	}
}
