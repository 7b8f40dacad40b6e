package record

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/rules"
)

// TestRecordExclude: an exchange an `exclude` location of the rules in effect matches is
// forwarded (the browser gets the page: a bot check the person completes) but not stored,
// and record.log.jsonl says so, naming the pattern and its file and line (issue 21,
// docs/rules.md). Other exchanges of the site are stored as usual.
func TestRecordExclude(t *testing.T) {
	srv, siteCA := shopSite(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	from, to, err := ParseResolve(fmt.Sprintf("shop.test:443:127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	sites := filepath.Join(root, "sites")
	os.MkdirAll(sites, 0o755)
	os.WriteFile(filepath.Join(sites, "shop.yaml"), []byte("hosts: [\"shop.test\"]\nexclude:\n  - \"shop.test/search\"\n"), 0o644)
	rs, err := rules.Load(sites)
	if err != nil {
		t.Fatal(err)
	}
	g := newRig(t, Options{Resolve: map[string]string{from: to}, RootCAs: siteCA.CertPool(), Rules: rs, RuleRoot: root})
	c := g.client()
	for _, u := range []string{"https://shop.test/", "https://shop.test/search?q=lamp"} {
		req, _ := http.NewRequest("GET", u, nil)
		resp, err := c.Do(nav(req))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("%s through the recorder: %d %q", u, resp.StatusCode, body)
		}
		if strings.Contains(u, "search") && !strings.Contains(string(body), "results for lamp") {
			t.Errorf("the excluded page did not reach the browser: %q", body)
		}
	}
	l := g.logFor("https://shop.test/search?q=lamp")
	if l.Event != "not-stored" || l.Note != `excluded by rules: exclude pattern "shop.test/search" (sites/shop.yaml:3)` {
		t.Errorf("log line of the excluded page: %+v", l)
	}
	if st := g.rec.Stats(); st.NotStored != 1 {
		t.Errorf("stats %+v: want 1 not stored", st)
	}
	b, _, _ := g.build()
	if e := entryByURL(b, "https://shop.test/search?q=lamp"); e != nil {
		t.Errorf("the excluded exchange was stored: %+v", e)
	}
	if e := entryByURL(b, "https://shop.test/"); e == nil {
		t.Error("the home page was not stored")
	}
	for _, p := range b.Pages {
		if strings.Contains(p.URL, "/search") {
			t.Errorf("the excluded page is a page of pages.jsonl: %+v", p)
		}
	}
}
