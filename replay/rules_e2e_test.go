package replay

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
)

// e2eTaskRules is the task's hand-written tasks/t1/rules/shop.yaml: it adds an endpoint
// and a volatile parameter on top of sites/shop.yaml.
const e2eTaskRules = `hosts: ["www.shop.test"]
drop_params: [session]
endpoints:
  - name: reviews
    match: "GET /product-reviews/{asin}/**"
    key: "/product-reviews/{asin}"
    keep_params: [pageNumber]
`

// writeShopBundle records shopExchanges (and a reviews page) with recording.NewBundleWriter,
// the writer pab import uses.
func writeShopBundle(t testing.TB) *recording.Bundle {
	t.Helper()
	exs := append(shopExchanges(), ex{method: "GET", url: "https://www.shop.test/product-reviews/B0AIRPODS/ref=cm_cr_dp_d_show_all_btm?pageNumber=1",
		status: 200, resType: "document", header: []string{"Content-Type: text/html"}, body: []byte("reviews of AirPods Pro")})
	dir := filepath.Join(t.TempDir(), "bundle")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	for i, x := range exs {
		reqH, respH := http.Header{}, http.Header{}
		if x.reqType != "" {
			reqH.Set("Content-Type", x.reqType)
		}
		for _, h := range x.header {
			n, v, _ := strings.Cut(h, ":")
			respH.Add(n, strings.TrimSpace(v))
		}
		if _, err := w.Add(recording.Exchange{Method: x.method, URL: x.url, Date: start.Add(time.Duration(i) * time.Second),
			ReqHeader: reqH, ReqBody: x.reqBody, Status: x.status, RespHeader: respH, Body: x.body, ResourceType: x.resType}); err != nil {
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
	return b
}

// TestProxyRulesEndToEnd replays a recording of searches, product pages with changing
// slugs, a cart and promo codes through the proxy (real TLS, a client trusting the CA) with
// hand-written rules in sites/ and a task's rules/, layered by rules.Load. Every request
// below differs from what was recorded; each is answered by the right record, and its log
// line names the source, the rule file and the endpoint.
func TestProxyRulesEndToEnd(t *testing.T) {
	b := writeShopBundle(t)
	ep := func(name string) string {
		return fmt.Sprintf("sites/shop.yaml:%d", lineOf(t, shopRules, "- name: "+name))
	}
	doc := map[string]string{"Sec-Fetch-Dest": "document"}
	xhr := map[string]string{"Sec-Fetch-Dest": "empty", "Accept": "application/json"}
	form := map[string]string{"Sec-Fetch-Dest": "empty", "Content-Type": "application/x-www-form-urlencoded"}
	jsn := map[string]string{"Sec-Fetch-Dest": "empty", "Content-Type": "application/json"}
	type step struct {
		method, url string
		hdr         map[string]string
		body        string
		status      int
		answer      string // the response body
		source      Source
		entry       string
		rule        string
		endpoint    string
	}
	steps := []step{
		{"GET", "https://www.shop.test/s?k=pro+airpods&ref=nb_sb_noss_2", doc, "", 200, "results AirPods Pro page 1", SourceSearch, "e000002", ep("search"), "search"},
		{"GET", "http://www.shop.test/s?k=AIRPODS+pro&page=2", doc, "", 200, "results AirPods Pro page 2", SourceSearch, "e000003", ep("search"), "search"},
		{"GET", "https://www.shop.test/AirPods-Pro-2-USB-C/dp/B0AIRPODS/ref=sr_1_2?crid=2X&th=1", doc, "", 200, "AirPods Pro $199.00", SourceExact, "e000005", ep("product"), "product"},
		{"GET", "https://www.shop.test/api/suggest?prefix=airp", xhr, "", 200, `["airpods","airpods pro"]`, SourceSearch, "e000006", ep("suggest"), "suggest"},
		{"POST", "https://www.shop.test/api/search", jsn, `{"query":{"text":"pro airpods"},"size":10}`, 200, `{"hits":["B0AIRPODS"]}`, SourceSearch, "e000018", ep("search_api"), "search_api"},
		{"POST", "https://www.shop.test/cart/add-to-cart/ref=dp_atc_btn", form, "token=fresh-999&ASIN=B0AIRPODS&quantity=1", 200, `{"ok":true}`, SourceExact, "e000009", ep("add_to_cart"), "add_to_cart"},
		{"POST", "https://www.shop.test/cart/add-to-cart/ref=dp_atc_btn", form, "ASIN=B0AIRPODS&quantity=5", 404, "", SourceMiss, "", ep("add_to_cart"), "add_to_cart"},
		{"GET", "https://www.shop.test/gp/cart/view.html?session=s1", doc, "", 200, "cart 1 AirPods Pro", SourceExact, "e000010", "sites/_default.yaml:3", ""},
		{"POST", "https://www.shop.test/cart/promo", jsn, `{"cart":"c9","code":"save10"}`, 200, `{"discount":10}`, SourcePromo, "e000011", ep("promo"), "promo"},
		{"POST", "https://www.shop.test/cart/promo", jsn, `{"cart":"c9","code":"WELCOME5"}`, 200, `{"error":"invalid code"}`, SourcePromo, "e000012", ep("promo"), "promo"},
		{"POST", "https://www.shop.test/api/wishlist", jsn, `{"asin":"B0AIRPODS","csrf_token":"t-new"}`, 200, `{"saved":true}`, SourceExact, "e000013", "", ""},
		{"GET", "https://www.shop.test/product-reviews/B0AIRPODS/ref=cm_cr_arp_d_paging_btm?pageNumber=1&session=zz", doc, "", 200, "reviews of AirPods Pro", SourceExact, "e000024", "tasks/t1/rules/shop.yaml:4", "reviews"},
		// a browser's page with a parameter no recording of the path has: a miss (the
		// matching policy), and the same request by fetch: fuzzy
		{"GET", "https://www.shop.test/list?cat=audio&sort=price&view=grid", doc, "", 404, "", SourceMiss, "", "", ""},
		{"GET", "https://www.shop.test/list?cat=audio&sort=price&view=grid", xhr, "", 200, "audio by price", SourceFuzzy, "e000014", "", ""},
		{"GET", "https://www.shop.test/static/app.js?v=20261129", map[string]string{"Sec-Fetch-Dest": "script"}, "", 200, "console.log(1)", SourceFuzzy, "e000016", "", ""},
		{"GET", "https://www.shop.test/s?k=airpods+max", doc, "", 404, "", SourceMiss, "", ep("search"), "search"},
		{"GET", "https://www.shop.test/api/unknown", xhr, "", 404, `{"error":"not recorded"}`, SourceMiss, "", fmt.Sprintf("sites/shop.yaml:%d", lineOf(t, shopRules, "xhr_not_found")), ""},
		{"GET", "https://www.shop.test/1/batch/1/OE/", nil, "", 204, "", SourceBlocked, "", "sites/shop.yaml:5", ""},
	}
	var runs [2][]LogLine
	for run := range runs {
		root, rs := shopRepo(t, map[string]string{"shop.yaml": e2eTaskRules})
		tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) { o.Rules, o.RuleRoot = rs, root })
		for _, s := range steps {
			var body []byte
			if s.body != "" {
				body = []byte(s.body)
			}
			r := tp.do(t, s.method, s.url, s.hdr, body)
			if r.status != s.status || (s.answer != "" || s.status != 404) && string(r.body) != s.answer {
				t.Errorf("%s %s: %d %q, want %d %q", s.method, s.url, r.status, r.body, s.status, s.answer)
			}
		}
		counts := tp.s.Counts()
		if counts.BySource[SourceSearch] != 4 || counts.BySource[SourcePromo] != 2 || counts.BySource[SourceMiss] != 4 {
			t.Errorf("counts = %+v", counts)
		}
		lines := tp.logLines(t)
		if len(lines) != len(steps) {
			t.Fatalf("%d log lines, want %d", len(lines), len(steps))
		}
		for i, s := range steps {
			l := lines[i]
			if l.Source != s.source || l.Entry != s.entry || l.Rule != s.rule || l.Endpoint != s.endpoint {
				t.Errorf("%s %s: log source %s entry %q rule %q endpoint %q; want %s %q %q %q",
					s.method, s.url, l.Source, l.Entry, l.Rule, l.Endpoint, s.source, s.entry, s.rule, s.endpoint)
			}
			lines[i].Time, lines[i].MS = "", 0
		}
		runs[run] = lines
	}
	for i := range runs[0] {
		if runs[0][i] != runs[1][i] {
			t.Errorf("line %d differs between runs:\n%+v\n%+v", i, runs[0][i], runs[1][i])
		}
	}
}
