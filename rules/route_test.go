package rules

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestRoute checks that one Route call gives the verdicts BlockedBy, ExcludedBy and
// LatestBy give (with their short-cuts), the site, the endpoint (a HEAD borrowing the
// GET's), and keys equal to Set.Key's, a HEAD's GET key under the GET's endpoint.
func TestRoute(t *testing.T) {
	root := t.TempDir()
	sites := filepath.Join(root, "sites")
	writeFiles(t, sites, map[string]string{
		"_default.yaml": `drop_params: ["utm_*"]
block: [tracker.test, "*/**/beacon"]
latest: ["*/**/cart*"]
`,
		"shop.yaml": `hosts: [shop.test]
drop_params: [sid]
exclude: ["*/checkpoint/**", "*/**/beacon"]
latest: ["*/checkpoint/**"]
endpoints:
  - name: item
    match: "GET /item/{id}"
    key: "/item/{id}"
    keep_params: [color]
  - name: post
    match: "POST /api/{op}"
    body_keep: [q]
`,
	})
	s, err := Load(sites)
	if err != nil {
		t.Fatal(err)
	}
	def, shop := filepath.Join(sites, "_default.yaml"), filepath.Join(sites, "shop.yaml")
	type want struct {
		site, endpoint        string
		blocked, excl, latest string // "file:line pattern", or ""
		key, getKey           string
	}
	str := func(m *Match) string {
		if m == nil {
			return ""
		}
		return fmt.Sprintf("%s:%d %s", m.File, m.Line, m.Pattern)
	}
	for _, c := range []struct {
		method, url, body, ct string
		want                  want
	}{
		{"GET", "https://shop.test/item/7?color=red&utm_source=x&size=9", "", "",
			want{site: "shop", endpoint: "item", key: "GET shop.test/item/7?color=red"}},
		{"HEAD", "https://shop.test/item/7?color=red&size=9", "", "",
			want{site: "shop", endpoint: "item", key: "HEAD shop.test/item/7?color=red&size=9", getKey: "GET shop.test/item/7?color=red"}},
		{"GET", "https://shop.test/checkpoint/a?sid=1&b=2", "", "",
			want{site: "shop", excl: shop + ":3 */checkpoint/**", key: "GET shop.test/checkpoint/a?b=2"}},
		{"GET", "https://shop.test/x/beacon", "", "",
			want{site: "shop", blocked: def + ":2 */**/beacon", key: "GET shop.test/x/beacon"}},
		{"GET", "https://other.test/gp/cart?utm_x=1&sid=2", "", "",
			want{latest: def + ":3 */**/cart*", key: "GET other.test/gp/cart?sid=2"}},
		{"POST", "https://shop.test/api/find", `{"q":"x","ts":1}`, "application/json",
			want{site: "shop", endpoint: "post", key: `POST shop.test/api/find #body:{"q":"x"}`}},
		{"get", "https://TRACKER.test:443/p", "", "",
			want{blocked: def + ":2 tracker.test", key: "GET tracker.test/p"}},
	} {
		r := Request{Method: c.method, URL: mustURL(t, c.url), Body: []byte(c.body), ContentType: c.ct}
		rt := s.Route(r)
		ep := ""
		if rt.Endpoint != nil {
			ep = rt.Endpoint.Name
		}
		got := want{site: rt.Site, endpoint: ep, blocked: str(rt.Blocked), excl: str(rt.Excluded), latest: str(rt.Latest), key: rt.Key(r).String()}
		if g, ok := rt.GETKey(r); ok {
			got.getKey = g.String()
		} else if rt.Method == "HEAD" {
			t.Errorf("%s %s: no GET key for a HEAD", c.method, c.url)
		}
		if got != c.want {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.method, c.url, got, c.want)
		}
		if k := s.Key(r).String(); k != got.key {
			t.Errorf("%s %s: Set.Key %s, Route.Key %s", c.method, c.url, k, got.key)
		}
		if g, ok := rt.GETKey(r); ok {
			gr := r
			gr.Method = "GET"
			if k := s.Key(gr).String(); k != g.String() {
				t.Errorf("%s %s: Set.Key of the GET %s, GETKey %s", c.method, c.url, k, g.String())
			}
		}
		// The verdicts are those of the single calls, with Route's short-cuts.
		u := r.URL
		bf, bl, bp, bok := s.BlockedBy(u)
		if (rt.Blocked != nil) != bok || (bok && (rt.Blocked.File != bf || rt.Blocked.Line != bl || rt.Blocked.Pattern != bp)) {
			t.Errorf("%s: Route.Blocked %+v, BlockedBy %s %d %s %v", c.url, rt.Blocked, bf, bl, bp, bok)
		}
		if bok != s.Blocked(u) {
			t.Errorf("%s: Blocked and BlockedBy disagree", c.url)
		}
		if _, _, _, eok := s.ExcludedBy(u); !bok && (rt.Excluded != nil) != eok {
			t.Errorf("%s: Route.Excluded %+v, ExcludedBy %v", c.url, rt.Excluded, eok)
		}
		if _, _, _, lok := s.LatestBy(u); rt.Blocked == nil && rt.Excluded == nil && (rt.Latest != nil) != lok {
			t.Errorf("%s: Route.Latest %+v, LatestBy %v", c.url, rt.Latest, lok)
		}
		if (rt.Blocked != nil || rt.Excluded != nil) && rt.Latest != nil {
			t.Errorf("%s: latest looked for though blocked or excluded", c.url)
		}
		if ownEp := s.Endpoint(r); rt.Method != "HEAD" && ownEp != rt.Endpoint {
			t.Errorf("%s: Set.Endpoint %v, Route.Endpoint %v", c.url, ownEp, rt.Endpoint)
		}
	}
	// A HEAD gets its own endpoint from Set.Endpoint (none here), the GET's from Route.
	head := Request{Method: "HEAD", URL: mustURL(t, "https://shop.test/item/7")}
	if s.Endpoint(head) != nil || s.Route(head).Endpoint == nil {
		t.Errorf("HEAD: Set.Endpoint %v, Route.Endpoint %v", s.Endpoint(head), s.Route(head).Endpoint)
	}
	if _, ok := s.Route(Request{Method: "GET", URL: mustURL(t, "https://shop.test/")}).GETKey(head); ok {
		t.Error("GETKey of a GET route: ok")
	}
}

// TestRouteNoRules checks a nil and an empty Set, and a request without a URL: a route
// with no site, endpoint or verdict, and the key Set.Key gives.
func TestRouteNoRules(t *testing.T) {
	var nilSet *Set
	for _, s := range []*Set{nilSet, {}} {
		for _, r := range []Request{{Method: "HEAD"}, {URL: mustURL(t, "https://a.test/x?b=1")}} {
			rt := s.Route(r)
			if rt.Site != "" || rt.Endpoint != nil || rt.Blocked != nil || rt.Excluded != nil || rt.Latest != nil {
				t.Errorf("%+v: route %+v", r, rt)
			}
			if rt.Key(r).String() != s.Key(r).String() {
				t.Errorf("%+v: Route.Key %s, Set.Key %s", r, rt.Key(r).String(), s.Key(r).String())
			}
		}
	}
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	r := Request{Method: "head"}
	if k := s.Route(r).Key(r).String(); k != "HEAD /" || k != s.Key(r).String() {
		t.Errorf("no URL: key %s, Set.Key %s", k, s.Key(r).String())
	}
}

// TestRouteConcurrent reads one Route from many goroutines, as replay's memo shares it
// (run with -race).
func TestRouteConcurrent(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	r := Request{Method: "HEAD", URL: mustURL(t, "https://www.example.test/p?utm_source=x&a=1")}
	rt := s.Route(r)
	want := s.Key(r).String()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if k := rt.Key(r).String(); k != want {
					t.Errorf("key %s, want %s", k, want)
					return
				}
				if _, ok := rt.GETKey(r); !ok {
					t.Error("no GET key")
					return
				}
			}
		}()
	}
	wg.Wait()
}
