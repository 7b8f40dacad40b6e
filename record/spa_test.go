package record

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"crypto/tls"

	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/browser/cdpalloc"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/tlsca"
)

// TestRecordSPANavigation (issue 21): real headless Chromium opens a single-page app
// through the recorder; the app moves to /app/item/42 with history.pushState and then
// fetches its data. pages.jsonl gets /app (fetched GET) and /app/item/42 (fetched none),
// while the stylesheet that loads a font (the font's Referer is the stylesheet) and the
// not-found probe add no page of their own.
func TestRecordSPANavigation(t *testing.T) {
	chrome := testtool.Chromium(t)
	siteCA, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "site-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := siteCA.LeafFor("spa.test")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>SPA</title><link rel="stylesheet" href="/app.css"></head><body>
<p id="state">list</p><script>
setTimeout(function () {
  history.pushState({}, "", "/app/item/42");
  fetch("/api/item/42").then(function (r) { return r.json(); }).then(function (d) {
    document.getElementById("state").textContent = "item " + d.id;
  });
}, 50);
</script></body></html>`)
	})
	mux.HandleFunc("GET /app.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, `@font-face { font-family: f; src: url("/f.woff2") format("woff2"); } body { font-family: f; }`)
	})
	mux.HandleFunc("GET /f.woff2", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "font/woff2")
		w.Write([]byte("not really a font"))
	})
	mux.HandleFunc("GET /api/item/42", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": 42}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(404)
		fmt.Fprint(w, "<title>404</title>")
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	from, to, err := ParseResolve(fmt.Sprintf("spa.test:443:127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	g := newRig(t, Options{Resolve: map[string]string{from: to}, RootCAs: siteCA.CertPool()})

	opts := cdpalloc.Options(chrome, browser.Options{Proxy: g.addr, SPKI: g.ca.SPKIHash(), Profile: t.TempDir()})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	tctx, tcancel := context.WithTimeout(ctx, 90*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx, chromedp.Navigate("https://spa.test/app"),
		chromedp.Poll[chromedp.Void](`document.getElementById("state").textContent === "item 42"`)); err != nil {
		t.Fatalf("browse the app: %v", err)
	}
	loc, err := chromedp.Run(tctx, chromedp.Evaluate[string](`location.pathname`))
	if err != nil || loc != "/app/item/42" {
		t.Fatalf("location after pushState: %q %v", loc, err)
	}
	cancel()
	// the probe and the font finish on their own time: wait until both are journaled
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		seen := map[string]bool{}
		for _, l := range g.logLines() {
			seen[l.URL] = true
		}
		if seen[probeURL("https", "spa.test")] && seen["https://spa.test/api/item/42"] && seen["https://spa.test/f.woff2"] {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, rep, _ := g.build()
	if entryByURL(b, "https://spa.test/f.woff2") == nil {
		t.Error("the stylesheet's font was not recorded: the test does not show that a stylesheet's requests add no page")
	}
	var got []string
	for _, p := range b.Pages {
		got = append(got, p.Fetched+" "+p.URL+" "+p.Note)
	}
	want := map[string]bool{
		"GET https://spa.test/app ":                                 true,
		"none https://spa.test/app/item/42 ":                        true,
		"GET " + probeURL("https", "spa.test") + " not-found-probe": true,
	}
	if len(got) != len(want) || rep.ScriptPages != 1 {
		t.Errorf("pages %q (script pages %d), want %v", got, rep.ScriptPages, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected page %q; all pages %q", g, got)
		}
	}
}
