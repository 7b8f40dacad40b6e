package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/pab-dev/pab/internal/httpx"
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

// idempotentRules are the rules FuzzKeyIdempotent keys with: the shipped _default plus a
// shop whose endpoint key templates give paths their own endpoint matches again (a
// template that leads out of its endpoint, "/{slug}/dp/{asin}" keyed "/dp/{asin}", makes
// the key of the key's own URL differ by design; docs/rules.md advises against it).
const idempotentRules = `hosts: ["shop.test", "*.shop.test"]
drop_params: [ref, "pd_rd_*", sid]
body_drop: ["*token*", clientTs]
endpoints:
  - name: product
    match: "GET /**/dp/{asin}/**"
    key: "/dp/{asin}"
    keep_params: [th, psc]
  - name: search
    match: "GET /s"
    keep_params: [k, page, "rh*"]
    kind: search
    text_param: k
  - name: add
    match: "POST /cart/add/**"
    kind: stateful
    body_keep: [ASIN, quantity, items]
  - name: item
    match: "GET /item/{id}"
    key: "/item/{id}"
`

// requestFromKey builds the request a key stands for: the URL from host, path and kept
// parameters, the method, and the normalized body under the original content type. A form
// body is read back from its rendering (see Key.String); a digested body is left out, and
// digest reports that.
func requestFromKey(t *testing.T, k Key, contentType string, body []byte) (r Request, digest bool) {
	t.Helper()
	path, err := url.PathUnescape(k.Path)
	if err != nil {
		t.Fatalf("key path %q is not percent-encoded properly: %v", k.Path, err)
	}
	var q []string
	for _, p := range k.Params {
		q = append(q, url.QueryEscape(p.Name)+"="+url.QueryEscape(p.Value))
	}
	u := &url.URL{Scheme: "https", Host: k.Host, Path: path, RawPath: k.Path, RawQuery: strings.Join(q, "&")}
	r = Request{Method: k.Method, URL: u, ContentType: contentType}
	sum := sha256.Sum256(body)
	switch {
	case k.Body == "":
	case k.Body == "sha256:"+hex.EncodeToString(sum[:]):
		digest = true
	case strings.HasPrefix(k.Body, multipartPrefix) && httpx.MediaType(contentType) == "multipart/form-data":
		digest = true // the parts hold file digests, not bytes; FuzzMultipartKey checks these keys
	case httpx.MediaType(contentType) == "application/x-www-form-urlencoded":
		var fields []string
		for _, piece := range strings.Split(k.Body, "&") {
			name, value, _ := strings.Cut(piece, "=")
			fields = append(fields, url.QueryEscape(pctDecode(name))+"="+url.QueryEscape(pctDecode(value)))
		}
		r.Body = []byte(strings.Join(fields, "&"))
	default: // canonical JSON
		r.Body = []byte(k.Body)
	}
	return r, digest
}

// pctDecode undoes writeEscaped: every %XX is a byte.
func pctDecode(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b = append(b, hi<<4|lo)
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// FuzzKeyIdempotent checks that normalizing never panics and that a normalized request
// normalizes to itself: the request rebuilt from a key (see requestFromKey) has the same
// key. A digested body is compared by leaving it out.
func FuzzKeyIdempotent(f *testing.F) {
	f.Add("GET", "https://WWW.Shop.Test:443/Apple-AirPods/dp/B0FQFB8FMG/ref=sr_1_1?th=1&ref=x&utm_source=y", []byte(nil), "")
	f.Add("get", "http://shop.test/s?k=airpods+pro&page=2&crid=2X&rh=n%3A1&sprefix=air%2Caps", []byte(nil), "")
	f.Add("POST", "https://shop.test/cart/add/x", []byte(`{"ASIN":"B0","quantity":"1","csrf_token":"t","items":[{"a":1,"authToken":"z"}]}`), "application/json; charset=utf-8")
	f.Add("POST", "http://shop.test:8080/login", []byte("b=2&a=1&a=0&q=x+y%21&csrfToken=abc&%3D=%26&e=%E2%82%AC&z=%FF"), "application/x-www-form-urlencoded")
	f.Add("PUT", "http://[::1]:80/%2F%2e%2E/x?%zz=%&a=%2B", []byte{0, 1, 2, 0xff}, "application/octet-stream")
	f.Add("POST", "https://e.com/beacon", []byte(` [1.50, -0, 1e3, "\u2028\ud800", {"b":null,"a":true}] `), "text/plain")
	f.Add("GET", "https://shop.test/item/a%20b/../c?x=1;y=2", []byte(nil), "")
	f.Add("", "//host./p;x?&&=&", []byte(`"just a string"`), "application/json")
	file, err := ParseFile("shop.yaml", []byte(idempotentRules))
	if err != nil {
		f.Fatal(err)
	}
	def, err := ParseFile(EmbeddedDefaultPath, sites.Default)
	if err != nil {
		f.Fatal(err)
	}
	s, err := build([]layerFile{{file: def, site: DefaultSite}, {file: file, site: "shop"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, rawURL string, body []byte, contentType string) {
		u, err := url.Parse(rawURL)
		if err != nil {
			u = &url.URL{Host: rawURL, Path: rawURL, RawQuery: rawURL}
		}
		k1 := s.Key(Request{Method: method, URL: u, Body: body, ContentType: contentType})
		r2, digest := requestFromKey(t, k1, contentType, body)
		k2 := s.Key(r2)
		if digest {
			k1.Body, k2.Body = "", ""
		}
		if k1.String() != k2.String() {
			t.Fatalf("not idempotent:\n first  %q\n again  %q\n (rebuilt URL %q, body %q)", k1.String(), k2.String(), r2.URL.String(), r2.Body)
		}
	})
}

// FuzzCheckFile checks that CheckFile never panics, finds problems exactly when ParseFile
// refuses the file, and reports each on one line naming the file.
func FuzzCheckFile(f *testing.F) {
	f.Add(sites.Default)
	f.Add([]byte(idempotentRules))
	f.Add([]byte("hosts: [a, \"b/c\"]\ndrop_param: x\nendpoints:\n  - name: p\n    match: GET /{a}\n    key: /{b}\n    fuzzy: 1\n    x: y\n  - name: p\n    match: /q\n"))
	f.Add([]byte("endpoints:\n  - {name: a, match: /a, similarity: 9, similarity: 1}\n  - [x]\n  - name: a\n"))
	f.Add([]byte("hosts: &a [x]\ndrop_params: *a\n<<: {a: 1}\n"))
	f.Add([]byte("a: [1, 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps := CheckFile("fuzz.yaml", data)
		_, err := ParseFile("fuzz.yaml", data)
		if (len(ps) == 0) != (err == nil) {
			t.Fatalf("CheckFile found %d problems, ParseFile said %v", len(ps), err)
		}
		for _, p := range ps {
			line := p.String()
			if !strings.HasPrefix(line, "fuzz.yaml") || strings.Contains(line, "\n") || p.Message == "" {
				t.Fatalf("bad problem %q", line)
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
