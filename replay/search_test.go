package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// shopDefault is the _default.yaml of the shop tests: carts answered with their last copy
// (as the shipped _default.yaml does), one tracker host blocked.
const shopDefault = `drop_params: ["utm_*"]
block: ["tracker.test"]
latest: ["*/**/cart*", "*/**/cart*/**"]
`

// shopRules is sites/shop.yaml: every endpoint kind of docs/rules.md on an Amazon-like
// shop.
const shopRules = `site: shop
hosts: ["shop.test", "*.shop.test"]
drop_params: [ref, qid, sr, crid]
body_drop: ["*token*"]
block: ["www.shop.test/1/batch/**"]
xhr_not_found: { content_type: application/json, body: '{"error":"not recorded"}' }
endpoints:
  - name: product
    match: "GET /*/dp/{asin}/**"
    key: "/dp/{asin}"
    keep_params: []
  - name: search
    match: "GET /s"
    keep_params: [k, page]
    kind: search
    text_param: k
  - name: suggest
    match: "GET /api/suggest"
    kind: search
    text_param: prefix
  - name: search_api
    match: "POST /api/search"
    kind: search
    text_param: text
  - name: add_to_cart
    match: "POST /cart/add-to-cart/**"
    key: "/cart/add-to-cart"
    kind: stateful
    body_keep: [ASIN, quantity]
    fuzzy: true
  - name: promo
    match: "POST /cart/promo"
    kind: promo
    text_param: code
    invalid_code: BADCODE
  - name: thumbs
    match: "GET /thumbs/*"
    fuzzy_min: 1
`

// shopExchanges is the recording of the shop tests (ids e000001...).
func shopExchanges() []ex {
	html := []string{"Content-Type: text/html; charset=utf-8"}
	js := []string{"Content-Type: application/json"}
	get := func(u, body string) ex {
		return ex{method: "GET", url: u, status: 200, resType: "document", header: html, body: []byte(body)}
	}
	api := func(method, u, ct, reqBody, body string) ex {
		return ex{method: method, url: u, reqType: ct, reqBody: []byte(reqBody), status: 200, resType: "fetch", header: js, body: []byte(body)}
	}
	return []ex{
		/* e000001 */ get("https://www.shop.test/", "home"),
		/* e000002 */ get("https://www.shop.test/s?k=AirPods+Pro&ref=nb_sb_noss", "results AirPods Pro page 1"),
		/* e000003 */ get("https://www.shop.test/s?k=AirPods+Pro&page=2", "results AirPods Pro page 2"),
		/* e000004 */ get("https://www.shop.test/s?k=usb+c+cable", "results usb c cable"),
		/* e000005 */ get("https://www.shop.test/Apple-AirPods-Pro-2nd-Generation/dp/B0AIRPODS/ref=sr_1_1?th=1", "AirPods Pro $199.00"),
		/* e000006 */ api("GET", "https://www.shop.test/api/suggest?prefix=airpods", "", "", `["airpods","airpods pro"]`),
		/* e000007 */ api("GET", "https://www.shop.test/api/suggest?prefix=airpods+pro", "", "", `["airpods pro","airpods pro 2"]`),
		/* e000008 */ get("https://www.shop.test/gp/cart/view.html", "cart empty"),
		/* e000009 */ api("POST", "https://www.shop.test/cart/add-to-cart/ref=dp_atc", "application/x-www-form-urlencoded",
			"ASIN=B0AIRPODS&quantity=1&token=aaa111", `{"ok":true}`),
		/* e000010 */ get("https://www.shop.test/gp/cart/view.html", "cart 1 AirPods Pro"),
		/* e000011 */ api("POST", "https://www.shop.test/cart/promo", "application/json", `{"code":"SAVE10","cart":"c1"}`, `{"discount":10}`),
		/* e000012 */ api("POST", "https://www.shop.test/cart/promo", "application/json", `{"code":"BADCODE","cart":"c1"}`, `{"error":"invalid code"}`),
		/* e000013 */ api("POST", "https://www.shop.test/api/wishlist", "application/json", `{"asin":"B0AIRPODS","csrf_token":"t-111"}`, `{"saved":true}`),
		/* e000014 */ get("https://www.shop.test/list?cat=audio&sort=price", "audio by price"),
		/* e000015 */ get("https://www.shop.test/list?cat=audio&sort=rating", "audio by rating"),
		/* e000016 */ {method: "GET", url: "https://www.shop.test/static/app.js?v=1", status: 200, resType: "script",
			header: []string{"Content-Type: application/javascript"}, body: []byte("console.log(1)")},
		/* e000017 */ {method: "GET", url: "https://www.shop.test/img/logo?w=100", status: 200, resType: "image",
			header: []string{"Content-Type: image/png"}, body: []byte("PNG")},
		/* e000018 */ api("POST", "https://www.shop.test/api/search", "application/json", `{"query":{"text":"AirPods Pro"},"size":10}`, `{"hits":["B0AIRPODS"]}`),
		/* e000019 */ get("https://m.shop.test/s?k=airpods+pro", "mobile results airpods pro"),
		/* e000020 */ get("https://www.shop.test/cart/summary?view=full&step=1", "summary 1"),
		/* e000021 */ get("https://www.shop.test/cart/summary?view=full&step=2", "summary 2"),
		/* e000022 */ get("https://www.shop.test/thumbs/a?w=1&h=2", "thumb"),
		/* e000023 */ api("GET", "https://www.shop.test/api/suggest?prefix=usb+c+cable+braided", "", "", `["usb c cable braided"]`),
	}
}

// shopRepo writes a task repository holding sites/_default.yaml, sites/shop.yaml and the
// given task rule files (tasks/t1/rules/NAME), and loads its rules layered as replay does.
func shopRepo(t testing.TB, taskFiles map[string]string) (root string, rs *rules.Set) {
	t.Helper()
	root = t.TempDir()
	sites := filepath.Join(root, "sites")
	taskRules := filepath.Join(root, "tasks", "t1", "rules")
	for dir, files := range map[string]map[string]string{
		sites:     {"_default.yaml": shopDefault, "shop.yaml": shopRules},
		taskRules: taskFiles,
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rs, err := rules.Load(sites, taskRules)
	if err != nil {
		t.Fatal(err)
	}
	return root, rs
}

// lineOf is the 1-based line of the first line of content holding s.
func lineOf(t testing.TB, content, s string) int {
	t.Helper()
	for i, l := range strings.Split(content, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in rules", s)
	return 0
}

func shopIndex(t testing.TB) *Index {
	t.Helper()
	root, rs := shopRepo(t, nil)
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, shopExchanges())
	ix, err := NewIndex(b, rs, IndexOptions{RuleRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestLookupSteps goes through every step of the lookup order on the shop recording, with
// the rule and endpoint each answer names.
func TestLookupSteps(t *testing.T) {
	ix := shopIndex(t)
	ep := func(name string) string {
		return fmt.Sprintf("sites/shop.yaml:%d", lineOf(t, shopRules, "- name: "+name))
	}
	form, jsn := "application/x-www-form-urlencoded", "application/json"
	cases := []struct {
		name, method, url, body, ct string
		source                      Source
		entry                       string
		rule, endpoint              string
	}{
		// blocked
		{"block rule of the site", "GET", "https://www.shop.test/1/batch/1/OE/", "", "", SourceBlocked, "", "sites/shop.yaml:" + fmt.Sprint(lineOf(t, shopRules, "block:")), ""},
		{"block rule of _default", "GET", "https://tracker.test/p.gif", "", "", SourceBlocked, "", "sites/_default.yaml:2", ""},
		// exact, with key templates and dropped parameters
		{"home", "GET", "https://www.shop.test/?utm_source=mail", "", "", SourceExact, "e000001", "", ""},
		{"product slug and ref changed", "GET", "https://www.shop.test/AirPods-Pro-USB-C/dp/B0AIRPODS/ref=sr_1_3?crid=XYZ&th=2", "", "", SourceExact, "e000005", ep("product"), "product"},
		{"product without ref segment", "GET", "https://www.shop.test/x/dp/B0AIRPODS", "", "", SourceExact, "e000005", ep("product"), "product"},
		{"head of a product", "HEAD", "https://www.shop.test/y/dp/B0AIRPODS/", "", "", SourceExact, "e000005", ep("product"), "product"},
		{"other product misses", "GET", "https://www.shop.test/x/dp/B0OTHER", "", "", SourceMiss, "", ep("product"), "product"},
		{"recorded search, ref dropped", "GET", "https://www.shop.test/s?k=AirPods+Pro&ref=sr_pg_1", "", "", SourceExact, "e000002", ep("search"), "search"},
		{"cart: the last copy", "GET", "https://www.shop.test/gp/cart/view.html", "", "", SourceExact, "e000010", "sites/_default.yaml:3", ""},
		{"fresh token dropped by body_drop", "POST", "https://www.shop.test/api/wishlist", `{"csrf_token":"t-999","asin":"B0AIRPODS"}`, jsn, SourceExact, "e000013", "", ""},
		{"stateful: token left out by body_keep", "POST", "https://www.shop.test/cart/add-to-cart/ref=dp_atc_2", "token=zzz&quantity=1&ASIN=B0AIRPODS", form, SourceExact, "e000009", ep("add_to_cart"), "add_to_cart"},
		// search
		{"search: unrecorded wording", "GET", "https://www.shop.test/s?k=pro+airpods", "", "", SourceSearch, "e000002", ep("search"), "search"},
		{"search: case and punctuation", "GET", "https://www.shop.test/s?k=AIRPODS,+PRO!", "", "", SourceSearch, "e000002", ep("search"), "search"},
		{"search: other params break ties", "GET", "https://www.shop.test/s?k=pro+airpods&page=2", "", "", SourceSearch, "e000003", ep("search"), "search"},
		{"search: similar enough (2/3)", "GET", "https://www.shop.test/s?k=airpods+pro+case", "", "", SourceSearch, "e000002", ep("search"), "search"},
		{"search: too different (1/3), no fuzzy", "GET", "https://www.shop.test/s?k=airpods+max", "", "", SourceMiss, "", ep("search"), "search"},
		{"search: other host is another endpoint bucket", "GET", "https://m.shop.test/s?k=usb+cable", "", "", SourceMiss, "", ep("search"), "search"},
		{"search: no text, fuzzy refuses other searches", "GET", "https://www.shop.test/s?page=2", "", "", SourceMiss, "", ep("search"), "search"},
		{"search in a JSON body", "POST", "https://www.shop.test/api/search", `{"size":10,"query":{"text":"pro AirPods"}}`, jsn, SourceSearch, "e000018", ep("search_api"), "search_api"},
		{"suggestion: prefix of a word", "GET", "https://www.shop.test/api/suggest?prefix=airp", "", "", SourceSearch, "e000006", ep("suggest"), "suggest"},
		{"suggestion: prefix of the second word", "GET", "https://www.shop.test/api/suggest?prefix=airpods+p", "", "", SourceSearch, "e000007", ep("suggest"), "suggest"},
		{"suggestion: prefix below similarity", "GET", "https://www.shop.test/api/suggest?prefix=usb", "", "", SourceSearch, "e000023", ep("suggest"), "suggest"},
		{"suggestion: finished words are a prefix word by word", "GET", "https://www.shop.test/api/suggest?prefix=usb+c+", "", "", SourceSearch, "e000023", ep("suggest"), "suggest"},
		{"suggestion: a finished word is not completed", "GET", "https://www.shop.test/api/suggest?prefix=airpod+", "", "", SourceMiss, "", ep("suggest"), "suggest"},
		{"suggestion: unrelated", "GET", "https://www.shop.test/api/suggest?prefix=kindle", "", "", SourceMiss, "", ep("suggest"), "suggest"},
		// promo
		{"promo: known code", "POST", "https://www.shop.test/cart/promo", `{"code":"SAVE10","cart":"c2"}`, jsn, SourcePromo, "e000011", ep("promo"), "promo"},
		{"promo: known code, other case", "POST", "https://www.shop.test/cart/promo", `{"cart":"c1","code":" save10 "}`, jsn, SourcePromo, "e000011", ep("promo"), "promo"},
		{"promo: unknown code", "POST", "https://www.shop.test/cart/promo", `{"code":"FREESTUFF","cart":"c1"}`, jsn, SourcePromo, "e000012", ep("promo"), "promo"},
		{"promo: recorded exactly", "POST", "https://www.shop.test/cart/promo", `{"cart":"c1","code":"BADCODE"}`, jsn, SourceExact, "e000012", ep("promo"), "promo"},
		// stateful
		{"stateful: other quantity misses even with fuzzy: true", "POST", "https://www.shop.test/cart/add-to-cart/ref=x", "ASIN=B0AIRPODS&quantity=2&token=aaa111", form, SourceMiss, "", ep("add_to_cart"), "add_to_cart"},
		// fuzzy
		{"fuzzy: another value of a parameter refuses", "GET", "https://www.shop.test/list?cat=audio&sort=newest", "", "", SourceMiss, "", "", ""},
		{"fuzzy: 2 of 4 is enough", "GET", "https://www.shop.test/list?cat=audio&sort=rating&page=3&view=grid", "", "", SourceFuzzy, "e000015", "", ""},
		{"fuzzy: 1 of 3 is below 0.5", "GET", "https://www.shop.test/list?cat=audio&sort=newest&page=2", "", "", SourceMiss, "", "", ""},
		{"fuzzy: nothing in common", "GET", "https://www.shop.test/list?cat=video", "", "", SourceMiss, "", "", ""},
		{"fuzzy: no params at all refuses pages with some", "GET", "https://www.shop.test/list", "", "", SourceMiss, "", "", ""},
		{"fuzzy: static by extension, any share", "GET", "https://www.shop.test/static/app.js?v=2", "", "", SourceFuzzy, "e000016", "", ""},
		{"fuzzy: static by recorded mime", "GET", "https://www.shop.test/img/logo?w=200", "", "", SourceFuzzy, "e000017", "", ""},
		{"fuzzy: another step of a latest page refuses", "GET", "https://www.shop.test/cart/summary?view=full&step=3", "", "", SourceMiss, "", "", ""},
		{"fuzzy: fuzzy_min 1 of the endpoint", "GET", "https://www.shop.test/thumbs/a?w=1&h=3", "", "", SourceMiss, "", ep("thumbs"), "thumbs"},
		{"fuzzy: fuzzy_min 1 met", "GET", "https://www.shop.test/thumbs/a?w=1", "", "", SourceFuzzy, "e000022", ep("thumbs"), "thumbs"},
		{"fuzzy: off for a body", "POST", "https://www.shop.test/list?cat=audio&sort=price", "x=1", form, SourceMiss, "", "", ""},
		// miss
		{"miss: unknown path", "GET", "https://www.shop.test/nowhere", "", "", SourceMiss, "", "", ""},
	}
	// A second index of the same recording and rules: answers never depend on map order.
	ix2 := shopIndex(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := req(c.method, c.url, c.body, c.ct)
			res := ix.Lookup(r)
			id := ""
			if res.Entry != nil {
				id = res.Entry.ID
			}
			if res.Source != c.source || id != c.entry {
				ex := ix.Explain(r)
				var sb strings.Builder
				ex.Print(&sb)
				t.Fatalf("got %s %q, want %s %q\n%s", res.Source, id, c.source, c.entry, sb.String())
			}
			if res.Rule != c.rule || res.Endpoint != c.endpoint {
				t.Errorf("rule %q endpoint %q, want %q %q", res.Rule, res.Endpoint, c.rule, c.endpoint)
			}
			res2 := ix2.Lookup(r)
			if res2.Source != res.Source || res2.Entry != nil && res2.Entry.ID != id || res2.Rule != res.Rule {
				t.Errorf("second index: %s %v %s", res2.Source, res2.Entry, res2.Rule)
			}
			// Explain takes the same path as Lookup.
			if ex := ix.Explain(r); ex.Source != res.Source || ex.Rule != res.Rule || (ex.Entry != nil) != (res.Entry != nil) {
				t.Errorf("explain disagrees: %+v", ex)
			}
		})
	}
}

// TestRuleChangeTakesEffect: keys and candidates come from the rules at start, so a task
// rule file changes the answers of the same recording.
func TestRuleChangeTakesEffect(t *testing.T) {
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, shopExchanges())
	r := req("GET", "https://www.shop.test/s?k=airpods+max", "", "")
	_, rs := shopRepo(t, nil)
	ix, err := NewIndex(b, rs)
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.Lookup(r).Source; got != SourceMiss {
		t.Fatalf("without the task rule: %s", got)
	}
	task := `hosts: ["www.shop.test"]
endpoints:
  - name: search
    match: "GET /s"
    keep_params: [k, page]
    kind: search
    text_param: k
    similarity: 0.3
`
	root, rs := shopRepo(t, map[string]string{"shop.yaml": task})
	ix, err = NewIndex(b, rs, IndexOptions{RuleRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	res := ix.Lookup(r)
	if res.Source != SourceSearch || res.Entry.ID != "e000002" {
		t.Fatalf("with similarity 0.3: %s %v", res.Source, res.Entry)
	}
	if want := "tasks/t1/rules/shop.yaml:3"; res.Rule != want || res.Endpoint != "search" {
		t.Errorf("rule %q endpoint %q, want %q search (the task's file wins)", res.Rule, res.Endpoint, want)
	}
}

// TestSimilarityZero: similarity 0 makes every recorded search of the endpoint a candidate;
// the tie-breakers (other parameters, then recording order) decide.
func TestSimilarityZero(t *testing.T) {
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, shopExchanges())
	_, rs := shopRepo(t, map[string]string{"shop.yaml": `hosts: ["www.shop.test"]
endpoints:
  - name: search
    match: "GET /s"
    keep_params: [k, page]
    kind: search
    text_param: k
    similarity: 0
`})
	ix, err := NewIndex(b, rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ url, entry string }{
		{"https://www.shop.test/s?k=kindle", "e000002"},
		{"https://www.shop.test/s?k=kindle&page=2", "e000003"},
		{"https://www.shop.test/s?k=cable", "e000004"},
	} {
		res := ix.Lookup(req("GET", c.url, "", ""))
		if res.Source != SourceSearch || res.Entry.ID != c.entry {
			t.Errorf("%s: %s %v, want search %s", c.url, res.Source, res.Entry, c.entry)
		}
	}
}

// TestSearchTies: equally similar searches go to the earliest recording, or the last one
// on a latest page.
func TestSearchTies(t *testing.T) {
	exs := []ex{
		{method: "GET", url: "https://shop.test/s?q=red+shoes+sale", status: 200, body: []byte("1")},
		{method: "GET", url: "https://shop.test/s?q=sale+red+shoes", status: 200, body: []byte("2")},
		{method: "GET", url: "https://shop.test/cart/s?q=red+shoes+sale", status: 200, body: []byte("3")},
		{method: "GET", url: "https://shop.test/cart/s?q=sale+red+shoes", status: 200, body: []byte("4")},
	}
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, exs)
	rs := testRules(t, map[string]string{"_default.yaml": `latest: ["*/cart/**"]`, "shop.yaml": `hosts: [shop.test]
endpoints:
  - {name: s, match: "GET /s", kind: search, text_param: q}
  - {name: cs, match: "GET /cart/s", kind: search, text_param: q}
`})
	for i := 0; i < 5; i++ {
		ix, err := NewIndex(b, rs)
		if err != nil {
			t.Fatal(err)
		}
		if res := ix.Lookup(req("GET", "https://shop.test/s?q=Shoes+RED", "", "")); res.Entry == nil || res.Entry.ID != "e000001" {
			t.Errorf("tie: %v, want the earliest", res.Entry)
		}
		if res := ix.Lookup(req("GET", "https://shop.test/cart/s?q=Shoes+RED", "", "")); res.Entry == nil || res.Entry.ID != "e000004" {
			t.Errorf("latest tie: %v, want the last", res.Entry)
		}
	}
}

// TestExplainSteps checks the steps, rule and endpoint that pab inspect shows.
func TestExplainSteps(t *testing.T) {
	ix := shopIndex(t)
	searchAt := fmt.Sprintf("sites/shop.yaml:%d", lineOf(t, shopRules, "- name: search"))
	cases := []struct {
		method, url, body, ct string
		steps                 []string // "step outcome"
		details               []string // substrings of the step details, in order
	}{
		{"GET", "https://www.shop.test/s?k=pro+airpods", "", "",
			[]string{"blocked no", "exact no", "search yes"},
			[]string{"no block rule matches", "no recording has key GET www.shop.test/s?k=pro airpods",
				`endpoint "search" (` + searchAt + `): text "pro airpods": best "AirPods Pro" (e000002), similarity 1.00 ≥ 0.60`}},
		{"GET", "https://www.shop.test/s?k=airpods+max", "", "",
			[]string{"blocked no", "exact no", "search no", "fuzzy off", "miss yes"},
			[]string{"", "", `nearest "AirPods Pro" (e000002), similarity 0.33 < 0.60`, "matched by its text only", "answered by request type"}},
		{"GET", "https://www.shop.test/api/suggest?prefix=usb", "", "",
			[]string{"blocked no", "exact no", "search yes"},
			[]string{"", "", `best "usb c cable braided" (e000023), a prefix of it (similarity 0.25 < 0.60)`}},
		{"POST", "https://www.shop.test/cart/promo", `{"code":"FREESTUFF"}`, "application/json",
			[]string{"blocked no", "exact no", "promo yes"},
			[]string{"", "", `code "FREESTUFF" never recorded: answered with the recording of invalid_code "BADCODE", e000012`}},
		{"POST", "https://www.shop.test/cart/add-to-cart/x", "ASIN=B0AIRPODS&quantity=3", "application/x-www-form-urlencoded",
			[]string{"blocked no", "exact no", "fuzzy off", "miss yes"},
			[]string{"", "", `stateful endpoint "add_to_cart": a request with a body matches only exactly`, ""}},
		{"GET", "https://www.shop.test/gp/cart/view.html", "", "",
			[]string{"blocked no", "exact yes"},
			[]string{"", `2 recordings have this key; latest pattern "*/**/cart*/**" (sites/_default.yaml:3): the last, e000010`}},
		{"GET", "https://www.shop.test/list?cat=audio&sort=newest&page=2", "", "",
			[]string{"blocked no", "exact no", "fuzzy no", "miss yes"},
			[]string{"", "", "all 2 recordings of GET www.shop.test/list refused (listed under refused)", ""}},
		{"GET", "https://www.shop.test/list?cat=audio&sort=rating&page=3&view=grid&x=1", "", "",
			[]string{"blocked no", "exact no", "fuzzy no", "miss yes"},
			[]string{"", "", "nearest e000015 has 2 of 5 parameters in common, below fuzzy_min 0.50; 1 refused", ""}},
		{"GET", "https://www.shop.test/1/batch/x", "", "",
			[]string{"blocked yes"},
			[]string{`block pattern "www.shop.test/1/batch/**" (sites/shop.yaml:5) matches`}},
	}
	for _, c := range cases {
		ex := ix.Explain(req(c.method, c.url, c.body, c.ct))
		var got []string
		for _, s := range ex.Steps {
			got = append(got, s.Step+" "+s.Outcome)
		}
		if strings.Join(got, ", ") != strings.Join(c.steps, ", ") {
			t.Errorf("%s %s: steps %v, want %v", c.method, c.url, got, c.steps)
			continue
		}
		for i, d := range c.details {
			if !strings.Contains(ex.Steps[i].Detail, d) {
				t.Errorf("%s %s: step %s: %q, want it to hold %q", c.method, c.url, ex.Steps[i].Step, ex.Steps[i].Detail, d)
			}
		}
	}

	ex := ix.Explain(req("GET", "https://www.shop.test/s?k=pro+airpods", "", ""))
	var sb strings.Builder
	ex.Print(&sb)
	for _, want := range []string{
		"key:      GET www.shop.test/s?k=pro airpods\n",
		`endpoint: search (match "GET /s", kind search) at ` + searchAt + "\n",
		"  search   yes  endpoint \"search\"",
		"source:   search\n",
		"rule:     " + searchAt + "\n",
		"entry:    e000002  GET https://www.shop.test/s?k=AirPods+Pro&ref=nb_sb_noss  status 200",
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("print lacks %q:\n%s", want, sb.String())
		}
	}
	data, err := json.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	var back Explanation
	if err := json.Unmarshal(data, &back); err != nil || back.Endpoint == nil || back.Endpoint.Name != "search" ||
		len(back.Steps) != 3 || back.Steps[2].Outcome != OutcomeYes || back.Entry.ID != "e000002" {
		t.Errorf("JSON round trip: %s (%v)", data, err)
	}
}

// bigSearchIndex builds an index of n entries of which every tenth is a search of one
// endpoint, the others product pages.
func bigSearchIndex(b *testing.B, n int) *Index {
	words := make([]string, 500)
	for i := range words {
		words[i] = fmt.Sprintf("w%03dx", i)
	}
	exs := make([]ex, n)
	for i := range exs {
		u := fmt.Sprintf("https://big.test/p%d/item?id=%d&sort=asc&page=%d", i/100, i, i%7)
		if i%10 == 0 {
			j := i / 10
			u = fmt.Sprintf("https://big.test/s?q=%s+%s+%s&page=%d", words[j%500], words[(j/3)%500], words[(j/7)%500], j%3)
		}
		exs[i] = ex{method: "GET", url: u, status: 200, header: []string{"Content-Type: text/plain"}, body: []byte("x")}
	}
	bd := writeTestBundle(b, b.TempDir(), recording.Manifest{}, exs)
	rs := testRules(b, map[string]string{"big.yaml": `hosts: [big.test]
endpoints:
  - {name: search, match: "GET /s", keep_params: [q, page], kind: search, text_param: q}
`})
	ix, err := NewIndex(bd, rs)
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

// BenchmarkLookupSearch looks up an unrecorded wording among 10,000 recorded searches of
// an index of 100,000 entries.
func BenchmarkLookupSearch(b *testing.B) {
	ix := bigSearchIndex(b, 100000)
	// Search 1234 recorded "w234x w411x w176x": ask for the words in another order.
	r := req("GET", "https://big.test/s?q=W176X+w234x+W411X&page=9", "", "")
	if res := ix.Lookup(r); res.Source != SourceSearch {
		b.Fatal(res.Source)
	}
	b.ResetTimer()
	for b.Loop() {
		if res := ix.Lookup(r); res.Source != SourceSearch {
			b.Fatal(res.Source)
		}
	}
}

// BenchmarkLookupSearchPrefix is a one-letter suggestion request among the same searches:
// the prefix reaches every word that starts with it.
func BenchmarkLookupSearchPrefix(b *testing.B) {
	ix := bigSearchIndex(b, 100000)
	r := req("GET", "https://big.test/s?q=w2", "", "")
	if res := ix.Lookup(r); res.Source != SourceSearch {
		b.Fatal(res.Source)
	}
	b.ResetTimer()
	for b.Loop() {
		if res := ix.Lookup(r); res.Source != SourceSearch {
			b.Fatal(res.Source)
		}
	}
}
