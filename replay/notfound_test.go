package replay

import (
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
)

// seedNotFoundRules are the sites of the seed's not_found example (issue 21): keys may be
// site names of these rules.
var seedNotFoundRules = map[string]string{
	"amazon.yaml": `hosts: ["*.amazon.com"]` + "\n",
	"books.yaml":  `hosts: ["books.toscrape.com", "bücher.example"]` + "\n",
}

// TestNotFoundSiteKey replays the seed's manifest, whose not_found is keyed by the site
// name "amazon": a missed document on a host of the site gets the recorded 404 page.
func TestNotFoundSiteKey(t *testing.T) {
	m := recording.Manifest{TaskID: "amazon-airpods", NotFound: map[string]string{"amazon": "https://www.amazon.com/rr-not-found-mgxy1k2a"}}
	exs := []ex{
		{method: "GET", url: "https://www.amazon.com/", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("home")},
		{method: "GET", url: "https://www.amazon.com/rr-not-found-mgxy1k2a", status: 404, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("<title>Amazon 404</title>dogs of amazon")},
		{method: "GET", url: "https://books.toscrape.com/", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("books")},
	}
	tp := startProxy(t, m, exs, seedNotFoundRules)
	doc := map[string]string{"Sec-Fetch-Dest": "document"}
	for _, u := range []string{"https://www.amazon.com/dp/B0XYZ", "https://smile.amazon.com/x"} {
		r := tp.get(t, u, doc)
		if r.status != 404 || string(r.body) != "<title>Amazon 404</title>dogs of amazon" {
			t.Errorf("%s: %d %q, want the site's own 404 page", u, r.status, r.body)
		}
	}
	// another site: the plain 404 page
	if r := tp.get(t, "https://books.toscrape.com/nope", doc); r.status != 404 || !strings.Contains(string(r.body), "Not in the recording") {
		t.Errorf("books miss: %d %q, want the plain 404 page", r.status, r.body)
	}
}

func TestNotFoundURL(t *testing.T) {
	rs := testRules(t, seedNotFoundRules)
	nf := map[string]string{
		"amazon":                "https://www.amazon.com/404",
		"www.amazon.com":        "https://www.amazon.com/host-404",
		"BÜCHER.example":        "https://xn--bcher-kva.example/404",
		"localhost:8080":        "http://localhost:8080/404",
		"books":                 "https://books.toscrape.com/404",
		"nosuch.example.:443":   "https://nosuch.example/404",
		"_default":              "https://default/404",
		"plain-unknown-sitekey": "https://x/404",
	}
	for _, tc := range []struct{ host, want string }{
		{"www.amazon.com", "https://www.amazon.com/host-404"}, // a host key wins over the site name
		{"www.amazon.com:443", "https://www.amazon.com/host-404"},
		{"smile.amazon.com", "https://www.amazon.com/404"},
		{"xn--bcher-kva.example", "https://xn--bcher-kva.example/404"}, // A-label compare
		{"books.toscrape.com", "https://books.toscrape.com/404"},
		{"localhost:8080", "http://localhost:8080/404"},
		{"localhost:9090", ""},
		{"nosuch.example", "https://nosuch.example/404"},
		{"other.test", ""}, // _default is not a site name
	} {
		got, ok := NotFoundURL(nf, rs, tc.host)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("NotFoundURL(%q) = %q, %v; want %q", tc.host, got, ok, tc.want)
		}
	}
	if _, ok := NotFoundURL(nil, rs, "www.amazon.com"); ok {
		t.Error("NotFoundURL of an empty not_found is ok")
	}
}

func TestNotFoundKeyProblems(t *testing.T) {
	rs := testRules(t, seedNotFoundRules)
	entries := []recording.Entry{{URL: "https://www.amazon.com/"}, {URL: "http://localhost:8080/x"}, {URL: "https://xn--bcher-kva.example/"}}
	nf := map[string]string{
		"amazon":         "https://www.amazon.com/404", // the seed's example: a site name
		"books":          "https://books.toscrape.com/404",
		"WWW.amazon.com": "https://www.amazon.com/404",
		"localhost":      "http://localhost:8080/404",
		"bücher.example": "https://xn--bcher-kva.example/404",
		"amazn":          "https://www.amazon.com/404",
		"www.ebay.com":   "https://www.ebay.com/404",
	}
	got := NotFoundKeyProblems(nf, entries, rs)
	if len(got) != 2 || !strings.HasPrefix(got[0], `not_found key "amazn" is neither`) || !strings.HasPrefix(got[1], `not_found key "www.ebay.com" is neither`) {
		t.Errorf("problems:\n%s", strings.Join(got, "\n"))
	}
	if got := NotFoundKeyProblems(map[string]string{"amazon": "u"}, nil, rs); got != nil {
		t.Errorf("site key flagged: %q", got)
	}
	if got := NotFoundKeyProblems(nil, entries, rs); got != nil {
		t.Errorf("empty not_found: %q", got)
	}
}
