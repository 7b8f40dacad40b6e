package main

// TestHitRateTable measures how well replay answers an agent's requests that were never
// recorded verbatim, under three layers of rules: the generic rules only
// (sites/_default.yaml), plus the rules pab inferred from the recording
// (tasks/ID/rules/<site>.auto.yaml), plus a small hand-written rule file. The site is
// shopSite below, recorded through the built `pab record`; the table it logs is the one in
// docs/import.md, "Hit rates on a recorded test site".

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/tlsca"
)

// shopProducts are the products of shopSite: id, slug and name.
var shopProducts = []struct{ id, slug, name string }{
	{"40123", "desk-lamp-blue", "Blue desk lamp"},
	{"50777", "oak-reading-chair", "Oak reading chair"},
	{"61234", "wool-rug-grey", "Grey wool rug"},
}

// shopSite serves shop.test over TLS like a small web shop: product pages at
// /<slug>/p/<id> (any slug, any query) with <link rel="canonical" href="/p/<id>"> (and
// /p/<id> itself), a search /search?q=...&sort=..., name suggestions /suggest?prefix=...
// (JSON), a cart (GET /cart, POST /cart/add with a fresh form token from each product page)
// and a wishlist (GET /wishlist, POST /wishlist/add), both kept on the server, a beacon
// POST /collect answering 204, and versioned static files /static/app.js?v=... and
// /static/style.css?v=.... Every answer names itself (<meta name="page" content="...">,
// a comment in static files, a "page" member in JSON), which is how the test tells whether
// replay answered with the right recording. It returns the server and its CA's PEM path.
func shopSite(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	siteCA, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "site-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := siteCA.LeafFor("shop.test")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		cart     []string
		wishlist []string
		tokens   int
	)
	html := func(w http.ResponseWriter, page, title, head, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><meta name="page" content="%s"><title>%s</title>%s`+
			`<link rel="stylesheet" href="/static/style.css?v=20261101"><script src="/static/app.js?v=20261101"></script></head>`+
			`<body><h1>%s</h1>%s</body></html>`, page, title, head, title, body)
	}
	product := func(w http.ResponseWriter, r *http.Request, id string) {
		for _, p := range shopProducts {
			if p.id == id {
				mu.Lock()
				tokens++
				tok := formToken(tokens)
				mu.Unlock()
				html(w, "product:"+id, p.name, `<link rel="canonical" href="/p/`+id+`">`,
					`<p>`+p.name+`, item `+id+`.</p><form method="post" action="/cart/add"><input type="hidden" name="item" value="`+id+
						`"><input name="qty" value="1"><input type="hidden" name="token" value="`+tok+`"><button>Add to cart</button></form>`)
				return
			}
		}
		http.NotFound(w, r)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		var links []string
		for _, p := range shopProducts {
			links = append(links, `<a href="/`+p.slug+`/p/`+p.id+`?ref=home">`+p.name+`</a>`)
		}
		html(w, "home", "Test Shop", "", `<form action="/search"><input name="q"><input type="hidden" name="sort" value="relevance"></form>`+
			strings.Join(links, " "))
	})
	mux.HandleFunc("GET /p/{id}", func(w http.ResponseWriter, r *http.Request) { product(w, r, r.PathValue("id")) })
	mux.HandleFunc("GET /{slug}/p/{id}", func(w http.ResponseWriter, r *http.Request) { product(w, r, r.PathValue("id")) })
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		q := strings.ToLower(r.URL.Query().Get("q"))
		var hits []string
		for _, p := range shopProducts {
			all := true
			for _, word := range strings.Fields(q) {
				all = all && strings.Contains(strings.ToLower(p.name), word)
			}
			if all {
				hits = append(hits, `<a href="/`+p.slug+`/p/`+p.id+`?ref=search">`+p.name+`</a>`)
			}
		}
		words := strings.Fields(q)
		slices.Sort(words)
		html(w, "search:"+strings.Join(words, " "), "Results for "+q, "", strings.Join(hits, " "))
	})
	mux.HandleFunc("GET /cart", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		items := strings.Join(cart, ",")
		mu.Unlock()
		html(w, "cart:"+items, "Your cart", "", "<p>"+items+"</p>")
	})
	mux.HandleFunc("POST /cart/add", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		item := r.PostForm.Get("item") + "x" + r.PostForm.Get("qty")
		mu.Lock()
		cart = append(cart, item)
		mu.Unlock()
		html(w, "added:"+item, "Added to cart", "", "<p>"+item+"</p>")
	})
	mux.HandleFunc("GET /wishlist", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		items := strings.Join(wishlist, ",")
		mu.Unlock()
		html(w, "wishlist:"+items, "Your wishlist", "", "<p>"+items+"</p>")
	})
	mux.HandleFunc("POST /wishlist/add", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		wishlist = append(wishlist, r.PostForm.Get("item"))
		mu.Unlock()
		html(w, "wished:"+r.PostForm.Get("item"), "Saved to your wishlist", "", "")
	})
	mux.HandleFunc("GET /suggest", func(w http.ResponseWriter, r *http.Request) {
		prefix := strings.ToLower(r.URL.Query().Get("prefix"))
		var names []string
		for _, p := range shopProducts {
			if strings.Contains(" "+strings.ToLower(p.name), " "+prefix) { // a word of the name starts it
				names = append(names, `"`+p.name+`"`)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"page":"suggest:%s","names":[%s]}`, prefix, strings.Join(names, ","))
	})
	mux.HandleFunc("POST /collect", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /static/app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `/* page:app.js */ document.documentElement.dataset.ready = "yes";`)
	})
	mux.HandleFunc("GET /static/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, `/* page:style.css */ h1 { color: teal }`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, siteCA.CertPath()
}

// formToken is the form token of the n-th product page shopSite serves: 32 hex digits
// that look random.
func formToken(n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("token ", n)))
	return hex.EncodeToString(sum[:16])
}

// browserHeaders sets the Accept and Sec-Fetch-* headers Chromium sends for req: a page
// navigation for HTML pages, form posts and GETs alike, a subresource for static files, a
// fetch for the suggestion box and the beacon.
func browserHeaders(req *http.Request) {
	h := req.Header
	switch p := req.URL.Path; {
	case strings.HasPrefix(p, "/static/") && strings.HasSuffix(p, ".css"):
		h.Set("Accept", "text/css,*/*;q=0.1")
		h.Set("Sec-Fetch-Mode", "no-cors")
		h.Set("Sec-Fetch-Dest", "style")
	case strings.HasPrefix(p, "/static/"):
		h.Set("Accept", "*/*")
		h.Set("Sec-Fetch-Mode", "no-cors")
		h.Set("Sec-Fetch-Dest", "script")
	case p == "/suggest" || p == "/collect":
		h.Set("Accept", "application/json")
		h.Set("Sec-Fetch-Mode", "cors")
		h.Set("Sec-Fetch-Dest", "empty")
	default:
		h.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		h.Set("Sec-Fetch-Mode", "navigate")
		h.Set("Sec-Fetch-Dest", "document")
	}
}

// shopRequest is one request of the browse session or of the agent.
type shopRequest struct {
	method, path, body, contentType string
	// latest marks a URL recorded several times whose last copy is the right answer (the
	// agent asks for the URL itself; what counts is which copy answers).
	latest bool
	// want is the page marker of the right answer ("product:40123"), or "beacon" for a
	// beacon, which is right when blocked or answered by a recorded 204 of the beacon.
	want string
}

const formType = "application/x-www-form-urlencoded"

// browseSession is what a person did on shopSite while recording: the home page with its
// static files, two searches (the first typed into a box that suggests names as one
// types), three product pages reached with different slugs and tracking parameters, a
// look at the empty cart and wishlist, two additions to the cart (each with its page's
// form token) and one to the wishlist, beacons, and the cart and wishlist again.
var browseSession = []shopRequest{
	{method: "GET", path: "/"},
	{method: "GET", path: "/static/style.css?v=20261101"},
	{method: "GET", path: "/static/app.js?v=20261101"},
	{method: "GET", path: "/suggest?prefix=desk"},
	{method: "GET", path: "/suggest?prefix=desk+lamp"},
	{method: "GET", path: "/search?q=blue+desk+lamp&sort=relevance"},
	{method: "GET", path: "/desk-lamp-blue/p/40123?ref=search"},
	{method: "POST", path: "/collect", body: `{"ev":"view","item":"40123"}`, contentType: "application/json"},
	{method: "GET", path: "/search?q=oak+chair&sort=relevance"},
	{method: "GET", path: "/oak-reading-chair/p/50777?ref=search"},
	{method: "GET", path: "/wool-rug-grey/p/61234?ref=home"},
	{method: "GET", path: "/wishlist"},
	{method: "POST", path: "/wishlist/add", body: "item=61234", contentType: formType},
	{method: "GET", path: "/cart"},
	{method: "POST", path: "/cart/add", body: "item=40123&qty=1&token=" + formToken(2), contentType: formType},
	{method: "POST", path: "/collect", body: `{"ev":"add","item":"40123"}`, contentType: "application/json"},
	{method: "POST", path: "/cart/add", body: "item=50777&qty=2&token=" + formToken(3), contentType: formType},
	{method: "GET", path: "/cart"},
	{method: "GET", path: "/wishlist"},
}

// agentRequests are requests an agent makes on the same task, none recorded verbatim but
// the cart and the wishlist, recorded twice (empty, then full), whose later copy is right.
var agentRequests = []shopRequest{
	{method: "GET", path: "/?utm_source=newsletter&utm_medium=email", want: "home"},
	{method: "GET", path: "/p/40123", want: "product:40123"},
	{method: "GET", path: "/blue-desk-lamp-sale/p/40123", want: "product:40123"},
	{method: "GET", path: "/oak-reading-chair/p/50777?ref=mail", want: "product:50777"},
	{method: "GET", path: "/wool-rug-grey/p/61234?utm_campaign=spring&ref=banner", want: "product:61234"},
	{method: "GET", path: "/suggest?prefix=desk+la", want: "suggest:desk lamp"},
	{method: "GET", path: "/search?q=Lamp+Desk+Blue&sort=relevance", want: "search:blue desk lamp"},
	{method: "GET", path: "/search?q=chair+OAK&sort=relevance", want: "search:chair oak"},
	{method: "GET", path: "/cart", latest: true, want: "cart:40123x1,50777x2"},
	{method: "GET", path: "/wishlist", latest: true, want: "wishlist:61234"},
	{method: "POST", path: "/cart/add", body: "item=40123&qty=1&token=" + formToken(99), contentType: formType, want: "added:40123x1"},
	{method: "POST", path: "/collect", body: `{"ev":"view","item":"61234"}`, contentType: "application/json", want: "beacon"},
	{method: "GET", path: "/static/app.js?v=20261129", want: "app.js"},
	{method: "GET", path: "/static/style.css?v=20261129", want: "style.css"},
}

var pageMarker = regexp.MustCompile(`<meta name="page" content="([^"]*)">|/\* page:(\S+) \*/|^\{"page":"([^"]*)"`)

// hitCounts is one column of the table.
type hitCounts struct {
	exact, search, fuzzy, blocked, miss, right int
}

func TestHitRateTable(t *testing.T) {
	srv, siteCA := shopSite(t)
	repo := t.TempDir()
	p := startRecord(t, repo, srv, siteCA, "--task", "shop-hits")
	c := p.client(t)
	for _, r := range browseSession {
		req, err := http.NewRequest(r.method, "https://shop.test"+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		browserHeaders(req)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: status %d while recording", r.method, r.path, resp.StatusCode)
		}
	}
	p.stop(t)
	srv.Close()

	taskDir := filepath.Join(repo, "tasks", "shop-hits")
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	if err := recording.Unpack(filepath.Join(taskDir, "recording"), bundleDir); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(bundleDir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, a := range agentRequests {
		for _, e := range b.Entries {
			if e.Method == a.method && e.URL == "https://shop.test"+a.path && a.body == "" && !a.latest {
				t.Fatalf("agent request %s %s was recorded verbatim", a.method, a.path)
			}
		}
	}

	// The three layers: the inferred file alone on top of sites/, then the task's rules
	// directory with a hand-written shop.test.yaml added next to the inferred file.
	rulesDir := filepath.Join(taskDir, "rules")
	autos, _ := filepath.Glob(filepath.Join(rulesDir, "*.auto.yaml"))
	if len(autos) != 1 {
		t.Fatalf("want one inferred rule file in %s, got %v\n%s", rulesDir, autos, p.stdout)
	}
	auto, err := os.ReadFile(autos[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pab record:\n%s", p.stdout)
	t.Logf("inferred %s:\n%s", filepath.Base(autos[0]), auto)
	inferredDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(inferredDir, filepath.Base(autos[0])), auto, 0o644); err != nil {
		t.Fatal(err)
	}
	// What inference cannot know: the wishlist is a state page like the cart (the generic
	// latest rule covers carts, checkouts and baskets only).
	hand := "hosts: [\"shop.test\"]\nlatest: [\"*/wishlist\"]\n"
	if err := os.WriteFile(filepath.Join(rulesDir, "shop.test.yaml"), []byte(hand), 0o644); err != nil {
		t.Fatal(err)
	}
	sites := filepath.Join(repo, "sites")
	layers := []struct {
		name string
		dirs []string
	}{
		{"generic rules only", []string{sites}},
		{"+ inferred", []string{sites, inferredDir}},
		{"+ hand-written", []string{sites, rulesDir}},
	}

	cols := make([]hitCounts, len(layers))
	answers := make([][]string, len(agentRequests))
	for li, l := range layers {
		rs, err := rules.Load(l.dirs...)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := replay.NewIndex(b, rs)
		if err != nil {
			t.Fatal(err)
		}
		for ai, a := range agentRequests {
			u, err := url.Parse("https://shop.test" + a.path)
			if err != nil {
				t.Fatal(err)
			}
			res := ix.Lookup(rules.Request{Method: a.method, URL: u, Body: []byte(a.body), ContentType: a.contentType})
			got := ""
			switch res.Source {
			case replay.SourceExact:
				cols[li].exact++
			case replay.SourceSearch:
				cols[li].search++
			case replay.SourceFuzzy:
				cols[li].fuzzy++
			case replay.SourceBlocked:
				cols[li].blocked++
				got = "beacon"
			default:
				cols[li].miss++
			}
			if res.Entry != nil {
				got = answerMarker(t, b, res.Entry)
			}
			ok := got == a.want
			if ok {
				cols[li].right++
			}
			mark := "wrong"
			switch {
			case ok:
				mark = "right"
			case res.Entry == nil && res.Source != replay.SourceBlocked:
				mark = "none"
			}
			answers[ai] = append(answers[ai], string(res.Source)+" "+mark)
		}
	}

	var tb strings.Builder
	fmt.Fprintf(&tb, "| request | %s | %s | %s |\n|---|---|---|---|\n", layers[0].name, layers[1].name, layers[2].name)
	for ai, a := range agentRequests {
		req := a.method + " " + a.path
		if a.body != "" {
			req += " (" + a.body + ")"
		}
		fmt.Fprintf(&tb, "| `%s` | %s |\n", req, strings.Join(answers[ai], " | "))
	}
	row := func(name string, f func(hitCounts) int) {
		fmt.Fprintf(&tb, "| %s |", name)
		for _, c := range cols {
			fmt.Fprintf(&tb, " %d |", f(c))
		}
		tb.WriteString("\n")
	}
	row("exact", func(c hitCounts) int { return c.exact })
	row("search", func(c hitCounts) int { return c.search })
	row("fuzzy", func(c hitCounts) int { return c.fuzzy })
	row("blocked", func(c hitCounts) int { return c.blocked })
	row("miss", func(c hitCounts) int { return c.miss })
	row(fmt.Sprintf("right answer (of %d)", len(agentRequests)), func(c hitCounts) int { return c.right })
	t.Logf("hit rates for %d agent requests never recorded verbatim:\n%s", len(agentRequests), tb.String())

	if got := cols[2].right; got != len(agentRequests) {
		t.Errorf("with the hand-written rules %d of %d requests get the right answer, want all", got, len(agentRequests))
	}
	if cols[1].right < cols[0].right {
		t.Errorf("inferred rules answer %d requests right, fewer than the generic rules alone (%d)", cols[1].right, cols[0].right)
	}
	if cols[0].right == len(agentRequests) {
		t.Errorf("the generic rules answer every request right: the requests do not test the site rules")
	}
}

// answerMarker returns the page marker of e's recorded response ("product:40123"), or
// "beacon" for a 204 of the beacon path.
func answerMarker(t *testing.T, b *recording.Bundle, e *recording.Entry) string {
	t.Helper()
	if e.Status == http.StatusNoContent && strings.HasSuffix(e.URL, "/collect") {
		return "beacon"
	}
	resp, err := b.Response(e)
	if err != nil {
		t.Fatalf("response of %s: %v", e.ID, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := pageMarker.FindSubmatch(body)
	if m == nil {
		return "unmarked " + e.URL
	}
	return string(m[1]) + string(m[2]) + string(m[3])
}
