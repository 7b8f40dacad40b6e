package record

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/tlsca"
)

const ssn = "123-45-6789"

// shopSite is a TLS test site for shop.test, with a certificate from its own CA (the
// --upstream-ca of a recording). It returns the server and the CA.
func shopSite(t *testing.T) (*httptest.Server, *tlsca.CA) {
	t.Helper()
	siteCA, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "site-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := siteCA.LeafFor("shop.test")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("<p>same catalogue text</p>\n", 100)
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "secret-session-id"})
		fmt.Fprintf(w, "<html><head><title>Shop home</title></head><body><h1>Welcome jane@example.org</h1><p>SSN %s</p>%s</body></html>", ssn, big)
	})
	mux.HandleFunc("/copy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, big)
	})
	mux.HandleFunc("/copy2", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, big)
	})
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><title>Search</title><body>results for %s</body></html>", r.URL.Query().Get("q"))
	})
	mux.HandleFunc("POST /cart", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><title>Cart</title><body>cart: %s</body></html>", body)
	})
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, "console.log('compressed script');")
		zw.Close()
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		for i := range 3 {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<html><title>Not here</title><body>shop 404</body></html>")
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, siteCA
}

func nav(req *http.Request) *http.Request {
	req.Header.Set("Sec-Fetch-Dest", "document")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Accept-Encoding", "gzip, br")
	return req
}

func TestRecordShop(t *testing.T) {
	srv, siteCA := shopSite(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	from, to, err := ParseResolve(fmt.Sprintf("shop.test:443:127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	red, err := NewRedactor([]string{"jane@example.org", `re:\d{3}-\d{2}-\d{4}`})
	if err != nil {
		t.Fatal(err)
	}
	g := newRig(t, Options{Resolve: map[string]string{from: to}, RootCAs: siteCA.CertPool(), Redact: red})
	c := g.client()

	get := func(req *http.Request) (*http.Response, []byte) {
		t.Helper()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	req, _ := http.NewRequest("GET", "https://shop.test/", nil)
	req.Header.Set("Cookie", "session=old-cookie")
	req.Header.Set("Authorization", "Bearer token-xyz")
	resp, body := get(nav(req))
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("jane@example.org")) || resp.Header.Get("Set-Cookie") == "" {
		t.Fatalf("home through the recorder: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	req, _ = http.NewRequest("GET", "https://shop.test/search?q=lamp", nil)
	get(nav(req))
	req, _ = http.NewRequest("POST", "https://shop.test/cart", strings.NewReader("item=lamp&qty=2"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	get(nav(req))
	req, _ = http.NewRequest("GET", "https://shop.test/app.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Sec-Fetch-Dest", "script")
	resp, body = get(req)
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("client did not get the upstream gzip: %v", resp.Header)
	}
	if zr, err := gzip.NewReader(bytes.NewReader(body)); err != nil {
		t.Fatalf("client body is not the upstream gzip: %v", err)
	} else if plain, _ := io.ReadAll(zr); string(plain) != "console.log('compressed script');" {
		t.Fatalf("gzip body: %q", plain)
	}
	req, _ = http.NewRequest("GET", "https://shop.test/stream", nil)
	if _, body = get(req); string(body) != "chunk 0\nchunk 1\nchunk 2\n" {
		t.Fatalf("chunked body %q", body)
	}
	for _, p := range []string{"/copy", "/copy2"} {
		req, _ = http.NewRequest("GET", "https://shop.test"+p, nil)
		get(req)
	}

	b, rep, dir := g.build()
	for _, p := range recording.Audit(dir) {
		t.Errorf("audit: %+v", p)
	}
	if rep.Pages != 4 { // home, search, cart, probe
		t.Errorf("pages = %d, want 4: %+v", rep.Pages, b.Pages)
	}
	probe := probeURL("https", "shop.test")
	if got := b.Manifest.NotFound["shop.test"]; got != probe {
		t.Errorf("not_found = %v, want %s", b.Manifest.NotFound, probe)
	}
	want := map[string]string{"https://shop.test/": "GET", "https://shop.test/search?q=lamp": "GET", "https://shop.test/cart": "POST", probe: "GET"}
	for _, p := range b.Pages {
		if want[p.URL] != p.Fetched {
			t.Errorf("page %+v unexpected", p)
		}
		if p.URL == probe && p.Note != NoteNotFoundProbe {
			t.Errorf("probe page note %q", p.Note)
		}
		if p.URL == "https://shop.test/" && p.Title != "Shop home" {
			t.Errorf("home title %q", p.Title)
		}
	}
	js := entryByURL(b, "https://shop.test/app.js")
	if js == nil || js.ResourceType != replay.TypeScript {
		t.Fatalf("app.js entry %+v", js)
	}
	jr, err := b.Response(js)
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := io.ReadAll(jr.Body); string(plain) != "console.log('compressed script');" {
		t.Errorf("stored app.js not decoded: %q", plain)
	}
	cart := entryByURL(b, "https://shop.test/cart")
	if cart == nil || cart.Method != "POST" || cart.ReqBody == "" {
		t.Fatalf("cart entry %+v", cart)
	}
	if e := entryByURL(b, "https://shop.test/copy2"); e == nil || e.RevisitOf == "" {
		t.Errorf("identical 2.7 KB payload not a revisit: %+v", e)
	}
	data, err := os.ReadFile(filepath.Join(dir, "archive", "data.warc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"old-cookie", "token-xyz", "secret-session-id", "jane@example.org", ssn, "jane%40example.org"} {
		if bytes.Contains(data, []byte(leak)) {
			t.Errorf("data.warc holds %q", leak)
		}
	}
	for _, must := range []string{"Set-Cookie: REDACTED", "Welcome REDACTED", "SSN REDACTED", "RR-Original-Content-Encoding: gzip", "RR-Resource-Type: document"} {
		if !bytes.Contains(data, []byte(must)) {
			t.Errorf("data.warc lacks %q", must)
		}
	}
	if l := g.logFor("https://shop.test/stream"); l.Event != "stored" || l.Bytes != 24 {
		t.Errorf("stream log %+v", l)
	}

	// The journal is a plain WARC: `pab import` reads the same exchanges and payloads.
	imp := filepath.Join(t.TempDir(), "imported")
	if _, err := recording.ImportWARCs([]string{JournalPath(g.work)}, imp, recording.ImportOptions{TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	ib, err := recording.OpenBundle(imp)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	if len(ib.Entries) != len(b.Entries) {
		t.Fatalf("import of the journal: %d entries, bundle %d", len(ib.Entries), len(b.Entries))
	}
	// The not-found probe runs beside the browsing, so its place among the records varies:
	// entries are matched by method and URL, not by position.
	imported := map[string]recording.Entry{}
	for _, ie := range ib.Entries {
		imported[ie.Method+" "+ie.URL] = ie
	}
	for i, e := range b.Entries {
		ie, ok := imported[e.Method+" "+e.URL]
		if !ok {
			t.Errorf("entry %d (%s %s) not in the import of the journal", i, e.Method, e.URL)
			continue
		}
		if ie.URL != e.URL || ie.Method != e.Method || ie.Status != e.Status || ie.Digest != e.Digest || ie.ReqBody != e.ReqBody || ie.ResourceType != e.ResourceType {
			t.Errorf("entry %d: imported %+v, built %+v", i, ie, e)
		}
	}
}

func TestParseResolve(t *testing.T) {
	for _, c := range []struct{ in, from, to string }{
		{"shop.test:443:127.0.0.1", "shop.test:443", "127.0.0.1:443"},
		{"Shop.Test:443:127.0.0.1:8443", "shop.test:443", "127.0.0.1:8443"},
		{"h:80:[::1]:81", "h:80", "[::1]:81"},
		{"h:80:::1", "h:80", "[::1]:80"},
	} {
		from, to, err := ParseResolve(c.in)
		if err != nil || from != c.from || to != c.to {
			t.Errorf("ParseResolve(%q) = %q %q %v, want %q %q", c.in, from, to, err, c.from, c.to)
		}
	}
	for _, bad := range []string{"", "h", "h:443", "h:x:127.0.0.1", "h:443:not-an-ip", ":443:127.0.0.1", "h:70000:127.0.0.1", "h:1:127.0.0.1:0"} {
		if _, _, err := ParseResolve(bad); err == nil {
			t.Errorf("ParseResolve(%q) accepted", bad)
		}
	}
}

func TestRedactor(t *testing.T) {
	r, err := NewRedactor([]string{"a b&c", `re:\d{3}-\d{2}-\d{4}`})
	if err != nil {
		t.Fatal(err)
	}
	in := "x a b&c y a+b%26c z a%20b&c 123-45-6789 w a b&amp;c"
	got := r.String(in)
	if strings.Contains(got, "a b") || strings.Contains(got, "123-") || strings.Count(got, Redacted) != 5 {
		t.Errorf("redacted %q", got)
	}
	if _, err := NewRedactor([]string{"re:("}); err == nil {
		t.Error("bad regexp accepted")
	}
	if _, err := NewRedactor([]string{"re:x*"}); err == nil {
		t.Error("empty-matching regexp accepted")
	}
	if _, err := NewRedactor([]string{""}); err == nil {
		t.Error("empty value accepted")
	}
	var none *Redactor
	if none.String("abc") != "abc" {
		t.Error("nil redactor changed text")
	}
}
