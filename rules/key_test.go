package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes name -> content into dir (created when missing).
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadSites loads a sites directory holding files; an empty _default.yaml is added unless
// files has one, so that only the test's rules apply.
func loadSites(t testing.TB, files map[string]string) *Set {
	t.Helper()
	dir := t.TempDir()
	if _, ok := files["_default.yaml"]; !ok {
		files["_default.yaml"] = ""
	}
	writeFiles(t, dir, files)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	return u
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// TestKeyURL covers host, path and query normalization with no rules at all.
func TestKeyURL(t *testing.T) {
	tests := []struct {
		name, method, url, want string
	}{
		{"host case and default https port", "GET", "https://WWW.Example.COM:443/a", "GET www.example.com/a"},
		{"default http port", "GET", "http://example.com:80/", "GET example.com/"},
		{"port 443 dropped whatever the scheme", "GET", "http://example.com:443/", "GET example.com/"},
		{"port 80 dropped whatever the scheme", "GET", "https://example.com:80/", "GET example.com/"},
		{"other port kept", "GET", "https://example.com:8443/x", "GET example.com:8443/x"},
		{"port leading zeros", "GET", "http://localhost:08080/x", "GET localhost:8080/x"},
		{"empty port", "GET", "http://example.com:/x", "GET example.com/x"},
		{"trailing dot", "GET", "http://example.com./x", "GET example.com/x"},
		{"trailing dot with port", "GET", "http://example.com.:8080/x", "GET example.com:8080/x"},
		{"ipv6 with port", "GET", "http://[::1]:8080/x", "GET [::1]:8080/x"},
		{"ipv6 default port", "GET", "https://[::1]:443/x", "GET [::1]/x"},
		{"punycode kept", "GET", "https://xn--bcher-kva.example/", "GET xn--bcher-kva.example/"},
		{"unicode host to punycode", "GET", "https://bücher.example/", "GET xn--bcher-kva.example/"},
		{"unicode host upper case", "GET", "https://BÜCHER.Example:8080/", "GET xn--bcher-kva.example:8080/"},
		{"percent-encoded unicode host", "GET", "https://b%C3%BCcher.example/", "GET xn--bcher-kva.example/"},
		{"ideographic full stop", "GET", "https://bücher。example/", "GET xn--bcher-kva.example/"},
		{"unicode host with underscore label", "GET", "https://my_host.bücher.example/", "GET my_host.xn--bcher-kva.example/"},
		{"raw and encoded unicode path", "GET", "https://bücher.example/straße?q=ü", "GET xn--bcher-kva.example/stra%C3%9Fe?q=ü"},
		{"encoded unicode path", "GET", "https://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%BC", "GET xn--bcher-kva.example/stra%C3%9Fe?q=ü"},
		{"userinfo ignored", "GET", "https://user:pw@example.com/", "GET example.com/"},
		{"scheme ignored", "GET", "http://example.com/a", "GET example.com/a"},
		{"empty path", "GET", "https://example.com", "GET example.com/"},
		{"fragment ignored", "GET", "https://example.com/a#top", "GET example.com/a"},
		{"dot segments", "GET", "https://e.com/a/b/../c/./d", "GET e.com/a/c/d"},
		{"encoded dot segments", "GET", "https://e.com/a/%2e%2E/b", "GET e.com/b"},
		{"dot-dot above root", "GET", "https://e.com/../a", "GET e.com/a"},
		{"trailing dot-dot", "GET", "https://e.com/a/b/..", "GET e.com/a/"},
		{"dot-dot to root", "GET", "https://e.com/a/..", "GET e.com/"},
		{"dots inside names kept", "GET", "https://e.com/a..b/.c/..d", "GET e.com/a..b/.c/..d"},
		{"double slash kept", "GET", "https://e.com//a//b/", "GET e.com//a//b/"},
		{"case kept", "GET", "https://e.com/A/B", "GET e.com/A/B"},
		{"unreserved decoded", "GET", "https://e.com/%7e%41b%2D", "GET e.com/~Ab-"},
		{"sub-delims decoded", "GET", "https://e.com/a%3Ab%2Bc%3d", "GET e.com/a:b+c="},
		{"encoded slash kept", "GET", "https://e.com/a%2fb", "GET e.com/a%2Fb"},
		{"hex upper-cased", "GET", "https://e.com/caf%c3%a9", "GET e.com/caf%C3%A9"},
		{"raw non-ASCII encoded", "GET", "https://e.com/café", "GET e.com/caf%C3%A9"},
		{"encoded space", "GET", "https://e.com/a%20b", "GET e.com/a%20b"},
		{"stray percent", "GET", "https://e.com/100%25", "GET e.com/100%25"},
		{"encoded question mark", "GET", "https://e.com/a%3Fb", "GET e.com/a%3Fb"},
		{"plus in path is a plus", "GET", "https://e.com/a+b", "GET e.com/a+b"},
		{"method upper-cased", "post", "https://e.com/", "POST e.com/"},
		{"empty method is GET", "", "https://e.com/", "GET e.com/"},
		{"params sorted by name then value", "GET", "https://e.com/s?b=2&a=1&a=0", "GET e.com/s?a=0&a=1&b=2"},
		{"duplicates kept", "GET", "https://e.com/s?a=1&a=1", "GET e.com/s?a=1&a=1"},
		{"plus is a space", "GET", "https://www.amazon.com/s?k=airpods+pro", "GET www.amazon.com/s?k=airpods pro"},
		{"encoded space", "GET", "https://www.amazon.com/s?k=airpods%20pro", "GET www.amazon.com/s?k=airpods pro"},
		{"encoded plus stays a plus", "GET", "https://e.com/s?q=c%2B%2B", "GET e.com/s?q=c++"},
		{"ampersand in a value", "GET", "https://e.com/s?q=a%26b", "GET e.com/s?q=a%26b"},
		{"percent in a value", "GET", "https://e.com/s?q=100%25", "GET e.com/s?q=100%25"},
		{"bad escape kept literally", "GET", "https://e.com/s?q=%zz", "GET e.com/s?q=%25zz"},
		{"hash in a value", "GET", "https://e.com/s?q=%23x", "GET e.com/s?q=%23x"},
		{"equals in a name", "GET", "https://e.com/s?a%3Db=c=d", "GET e.com/s?a%3Db=c=d"},
		{"unicode value", "GET", "https://e.com/s?q=%E2%82%AC", "GET e.com/s?q=€"},
		{"newline in a value", "GET", "https://e.com/s?q=a%0Ab", "GET e.com/s?q=a%0Ab"},
		{"invalid utf-8 in a value", "GET", "https://e.com/s?q=%FF", "GET e.com/s?q=%FF"},
		{"name without value", "GET", "https://e.com/s?x", "GET e.com/s?x="},
		{"empty pieces skipped", "GET", "https://e.com/s?&&a=1&", "GET e.com/s?a=1"},
		{"semicolon is not a separator", "GET", "https://e.com/s?a=1;b=2", "GET e.com/s?a=1;b=2"},
		{"empty query", "GET", "https://e.com/s?", "GET e.com/s"},
	}
	var s Set // zero value: no rules
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := s.Key(Request{Method: tc.method, URL: mustURL(t, tc.url)})
			if got := k.String(); got != tc.want {
				t.Errorf("Key(%s %s) = %q, want %q", tc.method, tc.url, got, tc.want)
			}
			// A nil Set gives the same key.
			var ns *Set
			if got := ns.Key(Request{Method: tc.method, URL: mustURL(t, tc.url)}).String(); got != tc.want {
				t.Errorf("nil Set: Key = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKeyFields(t *testing.T) {
	var s Set
	k := s.Key(Request{Method: "GET", URL: mustURL(t, "https://Shop.Test:8443/a%7eb/?q=x+y&a=%26")})
	want := Key{Method: "GET", Host: "shop.test:8443", Path: "/a~b/", Params: []Param{{"a", "&"}, {"q", "x y"}}}
	if k.Method != want.Method || k.Host != want.Host || k.Path != want.Path || len(k.Params) != 2 ||
		k.Params[0] != want.Params[0] || k.Params[1] != want.Params[1] || k.Body != "" {
		t.Errorf("Key = %#v, want %#v", k, want)
	}
	if got := k.Base(); got != "GET shop.test:8443/a~b/" {
		t.Errorf("Base = %q", got)
	}
	// A request without URL does not panic.
	if got := s.Key(Request{}).String(); got != "GET /" {
		t.Errorf("Key of an empty request = %q", got)
	}
	// A URL built by hand with a raw (unescaped) path and odd host characters.
	k = s.Key(Request{URL: &url.URL{Host: "a/b?c", Path: "/x y#z"}})
	if got := k.String(); got != "GET a%2Fb%3Fc/x%20y%23z" {
		t.Errorf("hand-built URL key = %q", got)
	}
}

func TestKeyDropParams(t *testing.T) {
	s := loadSites(t, map[string]string{
		"_default.yaml": "drop_params: [\"utm_*\", gclid]\n",
		"amazon.yaml": `site: amazon
hosts: ["amazon.com", "*.amazon.com"]
drop_params: [ref, qid, "pd_rd_*", "*_ts"]
`,
	})
	tests := []struct{ url, want string }{
		{"https://www.amazon.com/s?k=v&utm_source=x&UTM_Medium=y&ref=a&refx=b&pd_rd_w=1&pd_rd_r=2&gclid=g&qid=1&load_ts=9",
			"GET www.amazon.com/s?k=v&refx=b"},
		{"https://amazon.com/s?ref=a&k=v", "GET amazon.com/s?k=v"},
		// amazon's drop_params do not apply to another site; _default's do.
		{"https://shop.test/s?ref=a&k=v&utm_campaign=c", "GET shop.test/s?k=v&ref=a"},
		// Names are matched decoded.
		{"https://www.amazon.com/s?%72ef=a&k=v", "GET www.amazon.com/s?k=v"},
		// A name equal to a pattern with a wildcard in the middle.
		{"https://www.amazon.com/s?x_ts=1&_ts=2&ts=3", "GET www.amazon.com/s?ts=3"},
	}
	for _, tc := range tests {
		if got := s.Key(Request{Method: "GET", URL: mustURL(t, tc.url)}).String(); got != tc.want {
			t.Errorf("Key(%s) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

// TestKeySortingStable checks that every order of the same parameters gives one key.
func TestKeySortingStable(t *testing.T) {
	params := []string{"b=2", "a=1", "a=0", "c=", "a=1", "b=10", "%61=x"}
	var s Set
	var want string
	permute(params, 0, func(p []string) {
		u := mustURL(t, "https://e.com/p?"+strings.Join(p, "&"))
		got := s.Key(Request{URL: u}).String()
		if want == "" {
			want = got
		}
		if got != want {
			t.Fatalf("order %v: key %q, want %q", p, got, want)
		}
	})
	if want != "GET e.com/p?a=0&a=1&a=1&a=x&b=10&b=2&c=" {
		t.Errorf("key = %q", want)
	}
}

func permute(a []string, i int, f func([]string)) {
	if i == len(a) {
		f(a)
		return
	}
	for j := i; j < len(a); j++ {
		a[i], a[j] = a[j], a[i]
		permute(a, i+1, f)
		a[i], a[j] = a[j], a[i]
	}
}

func TestKeyBody(t *testing.T) {
	s := loadSites(t, map[string]string{
		"_default.yaml": "body_drop: [\"*token*\", nonce]\n",
	})
	deep := strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1)
	okDeep := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	binary := []byte{0x00, 0xff, 0x10, '{', 0x80}
	multipart := "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--XyZ--\r\n"
	big := `{"a":"` + strings.Repeat("x", MaxStructuredBody) + `"}`
	tests := []struct {
		name, ct, body, want string
	}{
		{"empty", "application/json", "", ""},
		{"json sorted keys", "application/json", `{"quantity":"1","ASIN":"B0TEST"}`, `{"ASIN":"B0TEST","quantity":"1"}`},
		{"json whitespace and charset", "application/json; charset=utf-8", "{ \"b\" : 1 ,\n \"a\" : [ true , null , 1.50 ] }", `{"a":[true,null,1.50],"b":1}`},
		{"json by sniffing text/plain", "text/plain;charset=UTF-8", ` {"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"json by sniffing without type", "", `[{"b":1,"a":2}]`, `[{"a":2,"b":1}]`},
		{"json +json type", "application/vnd.api+json", `{"b":{"d":1,"c":2}}`, `{"b":{"c":2,"d":1}}`},
		{"json scalar with json type", "application/json", ` "x" `, `"x"`},
		{"body_drop recursive", "application/json",
			`{"csrfToken":"x","items":[{"id":1,"token":"y"},[{"Nonce":3,"n":4}]],"meta":{"auth_token":"z","n":2}}`,
			`{"items":[{"id":1},[{"n":4}]],"meta":{"n":2}}`},
		{"json strings re-escaped", "application/json", `{"a":"<x>&\u00e9\n\u0001\"\\\/"}`, `{"a":"<x>&é\n\u0001\"\\/"}`},
		{"json line separators escaped", "application/json", "{\"a\":\"x\u2028y\"}", `{"a":"x\u2028y"}`},
		{"json duplicate key: last wins", "application/json", `{"a":1,"a":2}`, `{"a":2}`},
		{"invalid json with json type", "application/json", `{"a":`, sha([]byte(`{"a":`))},
		{"data after json", "application/json", `{}{}`, sha([]byte(`{}{}`))},
		{"too deep", "application/json", deep, sha([]byte(deep))},
		{"deep enough", "application/json", okDeep, okDeep},
		{"form sorted with body_drop", "application/x-www-form-urlencoded", "b=2&a=1&authenticity_token=x&a=0&q=x+y%21", "a=0&a=1&b=2&q=x y!"},
		{"form special characters", "application/x-www-form-urlencoded; charset=UTF-8", "q=a%26b%25&n", "n=&q=a%26b%25"},
		{"form that looks like json stays a form", "application/x-www-form-urlencoded", `{"a":1}`, `{"a":1}=`},
		{"multipart by parts", "multipart/form-data; boundary=XyZ", multipart, "multipart:a=1"},
		{"multipart without boundary digested", "multipart/form-data", multipart, sha([]byte(multipart))},
		{"multipart other boundary digested", "multipart/form-data; boundary=other", multipart, sha([]byte(multipart))},
		{"multipart/mixed digested", "multipart/mixed; boundary=XyZ", multipart, sha([]byte(multipart))},
		{"binary digested", "application/octet-stream", string(binary), sha(binary)},
		{"text digested", "text/plain", "hello", sha([]byte("hello"))},
		{"too big for json", "application/json", big, sha([]byte(big))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Request{Method: "POST", URL: mustURL(t, "https://shop.test/cart/add"), Body: []byte(tc.body), ContentType: tc.ct}
			k := s.Key(r)
			if k.Body != tc.want {
				t.Errorf("Body = %q, want %q", k.Body, tc.want)
			}
			str := k.String()
			if tc.want == "" && strings.Contains(str, "#body:") {
				t.Errorf("String = %q has a body part", str)
			}
			if tc.want != "" && str != "POST shop.test/cart/add #body:"+tc.want {
				t.Errorf("String = %q", str)
			}
		})
	}
}

// TestKeySeedExamples checks the three keys shown in seed 003's docs/site-rules.md.
func TestKeySeedExamples(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		r    Request
		want string
	}{
		{Request{Method: "GET", URL: mustURL(t, "https://www.amazon.com/dp/B0FQFB8FMG")}, "GET www.amazon.com/dp/B0FQFB8FMG"},
		{Request{Method: "GET", URL: mustURL(t, "https://www.amazon.com/s?k=airpods+pro&utm_source=x")}, "GET www.amazon.com/s?k=airpods pro"},
		{Request{Method: "POST", URL: mustURL(t, "https://shop.test/cart/add"), ContentType: "application/json",
			Body: []byte(`{"quantity": "1", "ASIN": "B0TEST"}`)}, `POST shop.test/cart/add #body:{"ASIN":"B0TEST","quantity":"1"}`},
	}
	for _, tc := range tests {
		if got := s.Key(tc.r).String(); got != tc.want {
			t.Errorf("Key = %q, want %q", got, tc.want)
		}
	}
}

func TestKeyEndpoints(t *testing.T) {
	s := loadSites(t, map[string]string{
		"amazon.yaml": `site: amazon
hosts: ["amazon.com", "*.amazon.com"]
drop_params: [ref]
endpoints:
  - name: product
    match: "GET /*/dp/{asin}/**"
    key: "/dp/{asin}"
    keep_params: []
  - name: product-short
    match: "/dp/{asin}/**"
    key: "/dp/{asin}"
    keep_params: []
  - name: search
    match: "GET /s"
    host: "www.amazon.com"
    keep_params: [k, page]
    kind: search
    text_param: k
  - name: add_to_cart
    match: "POST /cart/add-to-cart/**"
    kind: stateful
    body_keep: [ASIN, quantity]
  - name: review
    match: "GET /product-reviews/{asin}/{page}"
    key: "/reviews/{page}/of/{asin}"
`,
	})
	tests := []struct {
		name     string
		method   string
		url      string
		ct, body string
		want     string
		endpoint string
	}{
		{"slug and ref segments mapped", "GET", "https://www.amazon.com/Apple-AirPods-Pro/dp/B0FQFB8FMG/ref=sr_1_1?crid=X&keywords=y", "", "", "GET www.amazon.com/dp/B0FQFB8FMG", "product"},
		{"no trailing segments", "GET", "https://www.amazon.com/Apple-AirPods-Pro/dp/B0FQFB8FMG", "", "", "GET www.amazon.com/dp/B0FQFB8FMG", "product"},
		{"short form, any method", "HEAD", "https://www.amazon.com/dp/B0FQFB8FMG?th=1", "", "", "HEAD www.amazon.com/dp/B0FQFB8FMG", "product-short"},
		{"keep_params beats drop and keeps only listed", "GET", "https://www.amazon.com/s?k=airpods+pro&crid=123&sprefix=air&ref=nb&page=2", "", "", "GET www.amazon.com/s?k=airpods pro&page=2", "search"},
		{"endpoint host limits it", "GET", "https://smile.amazon.com/s?k=x&crid=1&ref=a", "", "", "GET smile.amazon.com/s?crid=1&k=x", ""},
		{"method must match", "POST", "https://www.amazon.com/s?k=x&crid=1", "", "", "POST www.amazon.com/s?crid=1&k=x", ""},
		{"empty capture segment does not match", "GET", "https://www.amazon.com/x/dp//y", "", "", "GET www.amazon.com/x/dp//y", ""},
		{"body_keep", "POST", "https://www.amazon.com/cart/add-to-cart/ref=1", "application/json", `{"quantity":"1","ASIN":"B0","token":"t","session":"s","x":{"ASIN":"nested"}}`, `POST www.amazon.com/cart/add-to-cart/ref=1 #body:{"ASIN":"B0","quantity":"1"}`, "add_to_cart"},
		{"body_keep on a form", "POST", "https://www.amazon.com/cart/add-to-cart/", "application/x-www-form-urlencoded", "session=s&quantity=2&ASIN=B1", `POST www.amazon.com/cart/add-to-cart/ #body:ASIN=B1&quantity=2`, "add_to_cart"},
		{"captures reordered in the key", "GET", "https://www.amazon.com/product-reviews/B0X/3?ref=x", "", "", "GET www.amazon.com/reviews/3/of/B0X", "review"},
		{"other site untouched", "GET", "https://shop.test/Apple/dp/B0/x", "", "", "GET shop.test/Apple/dp/B0/x", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Request{Method: tc.method, URL: mustURL(t, tc.url), ContentType: tc.ct, Body: []byte(tc.body)}
			if got := s.Key(r).String(); got != tc.want {
				t.Errorf("Key = %q, want %q", got, tc.want)
			}
			e := s.Endpoint(r)
			got := ""
			if e != nil {
				got = e.Name
			}
			if got != tc.endpoint {
				t.Errorf("Endpoint = %q, want %q", got, tc.endpoint)
			}
		})
	}
}

func TestEndpointPatternGlobstars(t *testing.T) {
	ep, err := compileEndpointPattern("/**/a/**/b/**/{x}", "/{x}")
	if err != nil {
		t.Fatal(err)
	}
	caps, ok := ep.match("GET", "/q/a/r/s/b/t/z")
	if !ok || caps[0] != "z" {
		t.Errorf("match = %v, %v", caps, ok)
	}
	// Many segments and no match: the memo keeps this quick (no timing asserted).
	long := "/" + strings.Repeat("a/", 3000) + "c"
	if _, ok := ep.match("GET", long); ok {
		t.Error("matched a path without b")
	}
	if _, ok := ep.match("GET", "/a/b"); ok {
		t.Error("matched a path without a capture segment")
	}
}

func TestKeyDeterministic(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	r := Request{Method: "POST", URL: mustURL(t, "https://e.com/a?z=1&y=2&utm_source=q"), ContentType: "application/json",
		Body: []byte(`{"m":{"z":1,"y":2,"x":3,"w":4,"v":5,"u":6,"t":7},"a":[{"k":1,"j":2}]}`)}
	want := s.Key(r).String()
	for i := 0; i < 50; i++ {
		if got := s.Key(r).String(); got != want {
			t.Fatalf("run %d: %q, want %q", i, got, want)
		}
	}
	if want != `POST e.com/a?y=2&z=1 #body:{"a":[{"j":2,"k":1}],"m":{"t":7,"u":6,"v":5,"w":4,"x":3,"y":2,"z":1}}` {
		t.Errorf("key = %q", want)
	}
}
