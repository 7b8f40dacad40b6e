package main

// HAR in and out with real producers (docs/import.md "HAR files"): Playwright's recordHar
// (playwright-core of tools/playwright-mcp with Debian's Chromium) of a loopback shop over
// HTTPS and HTTP/2, imported by pab import, checked by pab check --crawl, compared with
// Playwright's routeFromHAR on 20 typed URLs, exported by pab export --har and imported
// again.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	xhtml "golang.org/x/net/html"

	"github.com/pab-dev/pab/crawl"
	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/recording"
)

// harShop is the loopback site the HAR tests record: every answer names what it is, so a
// wrong answer shows.
func harShop() http.Handler {
	page := func(w http.ResponseWriter, status int, title, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<!doctype html><html><head><title>%s</title></head><body><h1>%s</h1>%s</body></html>", title, title, body)
	}
	var logo bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range 8 {
		img.Set(i, i, color.RGBA{200, 30, 30, 255})
	}
	png.Encode(&logo, img)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page(w, 200, "Shop home", `<img id="logo" src="/logo.png" alt="logo"><ul id="items"></ul>
<a href="/p/1">one</a> <a href="/p/2">two</a> <a href="/p/3">three</a> <a href="/form">form</a> <a href="/upload">upload</a> <a href="/gz">gz</a> <a href="/br">br</a>
<script>fetch('/api/items?page=1&_=' + Date.now()).then(r => r.json()).then(d => {
  for (const it of d.items) { const li = document.createElement('li'); li.textContent = it; document.getElementById('items').appendChild(li); }
});</script>`)
	})
	mux.HandleFunc("GET /logo.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(logo.Bytes())
	})
	mux.HandleFunc("GET /api/items", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("page"))
		if err != nil || n < 1 || n > 3 {
			http.Error(w, `{"error":"no such page"}`, 404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"page":%d,"items":["lamp %d","desk %d","chair %d"]}`, n, n, n, n)
	})
	mux.HandleFunc("GET /p/{id}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("id"))
		if err != nil || n < 1 || n > 5 {
			page(w, 404, "Not found", "<p>no such product</p>")
			return
		}
		page(w, 200, fmt.Sprintf("Product %d", n), fmt.Sprintf(`<p>product %d costs <span id="price">%d0.00</span></p><a href="/">home</a>`, n, n))
	})
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		page(w, 200, "Contact", `<form method="post" action="/thanks"><input id="name" name="name"><button id="send">send</button></form>`)
	})
	mux.HandleFunc("POST /thanks", func(w http.ResponseWriter, r *http.Request) {
		page(w, 200, "Thanks", fmt.Sprintf("<p>thanks, %s</p>", template(r.PostFormValue("name"))))
	})
	mux.HandleFunc("GET /upload", func(w http.ResponseWriter, r *http.Request) {
		page(w, 200, "Upload", `<form method="post" action="/uploaded" enctype="multipart/form-data"><input type="file" id="file" name="file"><button id="send">send</button></form>`)
	})
	mux.HandleFunc("POST /uploaded", func(w http.ResponseWriter, r *http.Request) {
		f, h, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(f)
		page(w, 200, "Uploaded", fmt.Sprintf("<p>got %s, %d bytes</p>", template(h.Filename), len(b)))
	})
	encoded := func(enc string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var buf bytes.Buffer
			var zw io.WriteCloser
			if enc == "gzip" {
				zw = gzip.NewWriter(&buf)
			} else {
				zw = brotli.NewWriter(&buf)
			}
			fmt.Fprintf(zw, "<!doctype html><html><head><title>%s page</title></head><body><h1>%s page</h1><p>%s</p><a href=\"/\">home</a></body></html>",
				enc, enc, strings.Repeat(enc+" text ", 50))
			zw.Close()
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Encoding", enc)
			w.Write(buf.Bytes())
		}
	}
	mux.HandleFunc("GET /gz", encoded("gzip"))
	mux.HandleFunc("GET /br", encoded("br"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		page(w, 404, "Not found", "<p>nothing here</p>")
	})
	return mux
}

// pageText is what a reader sees of an HTML page: its text outside script and style
// elements, white space collapsed (replay adds its page clock script to documents); any
// other body is itself.
func pageText(body string) string {
	if !strings.Contains(body, "<html") {
		return body
	}
	doc, err := xhtml.Parse(strings.NewReader(body))
	if err != nil {
		return body
	}
	var sb strings.Builder
	var walk func(n *xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode && (n.Data == "script" || n.Data == "style") {
			return
		}
		if n.Type == xhtml.TextNode {
			sb.WriteString(n.Data + " ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return strings.Join(strings.Fields(sb.String()), " ")
}

// template escapes s for HTML text.
func template(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// startTLSSite serves h over TLS with HTTP/2 on a loopback port and returns the server.
func startTLSSite(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// playwrightCore is tools/playwright-mcp's playwright-core; in CI its absence fails.
func playwrightCore(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot, "tools/playwright-mcp/node_modules/playwright-core")
	if _, err := os.Stat(filepath.Join(p, "package.json")); err != nil {
		testtool.Missing(t, "%s missing (npm ci --prefix tools/playwright-mcp; scripts/test.sh runs it)", p)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testtool.Missing(t, "node missing (apt-get install nodejs; scripts/test.sh installs it)")
	}
	testtool.Chromium(t)
	return p
}

// runPW runs testdata/har/pw.cjs with args and returns its stdout.
func runPW(t *testing.T, core string, args ...string) string {
	t.Helper()
	cmd := exec.Command("node", append([]string{"testdata/har/pw.cjs"}, args...)...)
	cmd.Env = append(os.Environ(), "PW_CORE="+core, "CHROMIUM="+testtool.Chromium(t))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("node pw.cjs %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("node pw.cjs %s: no end after 3 minutes\n%s", strings.Join(args, " "), errb.String())
	}
	return out.String()
}

// harRepo is an empty task repository.
func harRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"sites", "tasks"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var harLine = regexp.MustCompile(`HAR \S+: (\d+) entr(?:y|ies): (\d+) exchanges?`)

// importHAR runs pab import of file into task id of repo and checks that no entry was
// refused or left out; it returns stdout.
func importHAR(t *testing.T, repo, id, file string) string {
	t.Helper()
	stdout, stderr, code := runPab(t, "--repo", repo, "import", "--task", id, "--no-check", file)
	t.Logf("pab import %s:\n%s%s", filepath.Base(file), stdout, stderr)
	if code != 0 {
		t.Fatalf("pab import %s: exit %d\n%s%s", file, code, stdout, stderr)
	}
	m := harLine.FindStringSubmatch(stdout)
	if m == nil || m[1] != m[2] {
		t.Fatalf("pab import %s: entries and exchanges differ (refused or skipped entries):\n%s%s", file, stdout, stderr)
	}
	return stdout
}

// exchangeDigest is one exchange as the round trip compares it: method, URL, status,
// header fields (names canonical, values) and the body's SHA-256.
func exchangeDigests(t *testing.T, repo, id string) []string {
	t.Helper()
	dir := filepath.Join(repo, "tasks", id, "recording")
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out []string
	for i := range b.Entries {
		e := &b.Entries[i]
		he, err := recording.HAREntry(b, e)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := he.Response.Content.Body()
		sum := sha256.Sum256(body)
		reqBody := []byte(nil)
		if he.Request.PostData != nil {
			reqBody, _ = he.Request.PostData.Body()
		}
		qsum := sha256.Sum256(reqBody)
		var hs []string
		for _, h := range he.Request.Headers {
			hs = append(hs, "> "+h.Name+": "+h.Value)
		}
		for _, h := range he.Response.Headers {
			hs = append(hs, "< "+h.Name+": "+h.Value)
		}
		sort.Strings(hs)
		out = append(out, fmt.Sprintf("%s %s %d body %s req %s notcaptured %v\n%s", e.Method, e.URL, e.Status,
			hex.EncodeToString(sum[:8]), hex.EncodeToString(qsum[:8]), e.Unresolved, strings.Join(hs, "\n")))
	}
	return out
}

// TestHARPlaywright: a HAR that Playwright's recordHar wrote (.zip, bodies attached) of
// the loopback shop imports with no entry refused, pab check --crawl finds no
// wrong-looking page, pab answers 20 typed URLs at least as well as routeFromHAR and never
// wrongly, and pab export --har re-imports to the same recording and routeFromHAR serves
// the same page text from it.
func TestHARPlaywright(t *testing.T) {
	core := playwrightCore(t)
	site := startTLSSite(t, harShop())
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	resolve := "MAP shop.test:443 127.0.0.1:" + port
	dir := t.TempDir()
	capture := filepath.Join(dir, "shop.zip")
	runPW(t, core, "record", capture, "https://shop.test", resolve)

	// what the live site answers to the 20 typed URLs: the truth
	typed := []struct{ path, kind string }{
		{"/", "recorded"}, {"/p/1", "recorded"}, {"/p/2", "recorded"}, {"/p/3", "recorded"},
		{"/gz", "recorded"}, {"/br", "recorded"}, {"/logo.png", "recorded"}, {"/form", "recorded"},
		{"/?utm_source=newsletter&utm_medium=email", "volatile"}, {"/p/1?utm_campaign=spring", "volatile"},
		{"/p/2?fbclid=IwAR0abc123", "volatile"}, {"/gz?gclid=Cj0KCQ", "volatile"},
		{"/api/items?page=1&_=1764999999999", "volatile"}, {"/br?_=1765000000000", "volatile"},
		{"/p/4", "never"}, {"/p/5", "never"}, {"/api/items?page=2", "never"}, {"/nowhere", "never"},
		{"/p/1/reviews", "never"}, {"/api/items?page=3&_=1", "never"},
	}
	live := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, site.Listener.Addr().String())
		}}}
	type answer struct {
		status int
		body   string
	}
	truth := map[string]answer{}
	var urls []string
	for _, u := range typed {
		full := "https://shop.test" + u.path
		urls = append(urls, full)
		req, _ := http.NewRequest("GET", full, nil)
		req.Header.Set("Accept-Encoding", "gzip, br")
		resp, err := live.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = resp.Body
		switch resp.Header.Get("Content-Encoding") {
		case "br":
			body = brotli.NewReader(resp.Body)
		case "gzip":
			if body, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := io.ReadAll(body)
		resp.Body.Close()
		truth[full] = answer{resp.StatusCode, string(b)}
	}
	site.Close() // from here on, nothing reaches the site

	repo := harRepo(t)
	importHAR(t, repo, "shop", capture)

	// pab check --crawl: no wrong-looking page
	var rep crawl.TargetReport
	stdout, stderr, code := runPab(t, "--repo", repo, "check", "shop", "--crawl", "--json")
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("pab check --crawl: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	if rep.Wrong != 0 || code != 0 || rep.Seeds == 0 {
		t.Errorf("pab check --crawl: exit %d, %d seeds, %d wrong-looking pages:\n%s", code, rep.Seeds, rep.Wrong, stdout)
	}

	// the 20 typed URLs: pab replay, and routeFromHAR falling back to a 404 server
	notFound := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	defer notFound.Close()
	_, nfPort, _ := net.SplitHostPort(notFound.Listener.Addr().String())
	urlsFile := filepath.Join(dir, "urls.json")
	ub, _ := json.Marshal(urls)
	os.WriteFile(urlsFile, ub, 0o644)
	pwAnswers := map[string]answer{}
	for _, line := range strings.Split(strings.TrimSpace(runPW(t, core, "serve", capture, urlsFile, "MAP * 127.0.0.1:"+nfPort)), "\n") {
		var a struct {
			URL    string
			Status int
			Body   []byte
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("routeFromHAR line %q: %v", line, err)
		}
		pwAnswers[a.URL] = answer{a.Status, string(a.Body)}
	}
	rp := startReplay(t, "shop", "--repo", repo)
	client := rp.client(t)
	pabAnswers := map[string]answer{}
	for _, u := range urls {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
		req.Header.Set("Sec-Fetch-Dest", "document")
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pabAnswers[u] = answer{resp.StatusCode, string(b)}
	}
	verdict := func(u string, a answer) string {
		want := truth[u]
		switch {
		case want.status == 200 && a.status == 200 && pageText(a.body) == pageText(want.body):
			return "right"
		case want.status != 200 && a.status >= 400:
			return "right" // a miss where the site has nothing
		case a.status >= 400 || a.status == 0:
			return "miss"
		default:
			return "WRONG"
		}
	}
	var table strings.Builder
	table.WriteString("| typed URL | kind | site | pab | routeFromHAR |\n|---|---|---|---|---|\n")
	count := map[string]map[string]int{"pab": {}, "pw": {}}
	for i, u := range urls {
		p, w := verdict(u, pabAnswers[u]), verdict(u, pwAnswers[u])
		count["pab"][p]++
		count["pw"][w]++
		fmt.Fprintf(&table, "| `%s` | %s | %d | %s (%d) | %s (%d) |\n", strings.TrimPrefix(u, "https://shop.test"), typed[i].kind,
			truth[u].status, p, pabAnswers[u].status, w, pwAnswers[u].status)
	}
	for _, k := range []string{"right", "WRONG", "miss"} {
		fmt.Fprintf(&table, "| **%s** | | | %d | %d |\n", k, count["pab"][k], count["pw"][k])
	}
	t.Logf("20 typed URLs:\n%s", table.String())
	if count["pab"]["WRONG"] != 0 || count["pab"]["right"] < count["pw"]["right"] {
		t.Errorf("pab: %d right, %d wrong; routeFromHAR: %d right", count["pab"]["right"], count["pab"]["WRONG"], count["pw"]["right"])
	}

	// the run as a HAR: 20 entries, each with its lookup step; every hit holds the page
	// pab served, and it imports again
	rp.stop(t)
	runHAR := filepath.Join(dir, "run.har")
	if _, stderr, code := runPab(t, "--repo", repo, "export", "shop", "--har", runHAR, "--log", rp.log); code != 0 {
		t.Fatalf("pab export --har --log: exit %d: %s", code, stderr)
	}
	rf, err := os.Open(runHAR)
	if err != nil {
		t.Fatal(err)
	}
	if probs, err := har.Validate(rf); err != nil || len(probs) != 0 {
		t.Errorf("run HAR: %v %q", err, probs)
	}
	rf.Seek(0, 0)
	hr, err := har.NewReader(rf, har.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		e, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		a := pabAnswers[e.Request.URL]
		body, _ := e.Response.Content.Body()
		switch {
		case e.Pab == nil || e.Pab.Source == "":
			t.Errorf("run HAR %s: no _pab source", e.Request.URL)
		case e.Response.Status != a.status:
			t.Errorf("run HAR %s: status %d, pab answered %d", e.Request.URL, e.Response.Status, a.status)
		case e.Pab.Source != "miss" && pageText(string(body)) != pageText(a.body):
			t.Errorf("run HAR %s (%s): body %.80q, pab served %.80q", e.Request.URL, e.Pab.Source, pageText(string(body)), pageText(a.body))
		}
	}
	rf.Close()
	if n != len(urls) {
		t.Errorf("run HAR: %d entries, want %d", n, len(urls))
	}
	importHAR(t, repo, "shop-run", runHAR)
	// routeFromHAR serves from the run's HAR the pages pab served
	for _, line := range strings.Split(strings.TrimSpace(runPW(t, core, "serve", runHAR, urlsFile, "MAP * 127.0.0.1:"+nfPort)), "\n") {
		var x struct {
			URL    string
			Status int
			Body   []byte
			Error  string
		}
		json.Unmarshal([]byte(line), &x)
		if a := pabAnswers[x.URL]; a.status == 200 && (x.Status != 200 || pageText(string(x.Body)) != pageText(a.body)) {
			t.Errorf("routeFromHAR of the run's HAR, %s: %d %.80q (error %q); pab served %.80q", x.URL, x.Status, pageText(string(x.Body)), x.Error, pageText(a.body))
		}
	}

	// the round trip: export, import again, the same exchanges
	exported := filepath.Join(dir, "exported.har")
	if _, stderr, code := runPab(t, "--repo", repo, "export", "shop", "--har", exported); code != 0 {
		t.Fatalf("pab export --har: exit %d: %s", code, stderr)
	}
	f, err := os.Open(exported)
	if err != nil {
		t.Fatal(err)
	}
	probs, err := har.Validate(f)
	f.Close()
	if err != nil || len(probs) != 0 {
		t.Errorf("exported HAR: %v %q", err, probs)
	}
	// both load whole in Chromium DevTools' HAR importer (har_devtools_test.go)
	devtoolsCheck(t, exported, runHAR)
	importHAR(t, repo, "shop-again", exported)
	a, b := exchangeDigests(t, repo, "shop"), exchangeDigests(t, repo, "shop-again")
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("the round trip changed the recording:\nbefore:\n%s\nafter:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	// routeFromHAR serves the same page text from pab's HAR as from Playwright's
	recorded := urls[:8]
	ub, _ = json.Marshal(recorded)
	os.WriteFile(urlsFile, ub, 0o644)
	again := runPW(t, core, "serve", exported, urlsFile, "MAP * 127.0.0.1:"+nfPort)
	for _, line := range strings.Split(strings.TrimSpace(again), "\n") {
		var x struct {
			URL    string
			Status int
			Body   []byte
		}
		json.Unmarshal([]byte(line), &x)
		if want := pwAnswers[x.URL]; x.Status != want.status || pageText(string(x.Body)) != pageText(want.body) {
			t.Errorf("routeFromHAR of the exported HAR, %s: %d %.80q; from Playwright's own HAR: %d %.80q", x.URL, x.Status, pageText(string(x.Body)), want.status, pageText(want.body))
		}
	}
}

// freeLoopbackPort returns a loopback port that was free a moment ago (mitmdump takes a
// port number, not a listener).
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// TestHARMitmproxy: the same visit of the shop through mitmproxy (Debian's mitmdump 8.1.1
// with its har_dump addon: 8.1.1 has no savehar) gives a HAR that imports with no entry
// refused and that pab check --crawl finds nothing wrong with.
func TestHARMitmproxy(t *testing.T) {
	core := playwrightCore(t)
	mitmdump, err := exec.LookPath("mitmdump")
	if err != nil {
		testtool.Missing(t, "mitmdump missing (apt-get install mitmproxy; scripts/test.sh installs it)")
	}
	site := startTLSSite(t, harShop())
	dir := t.TempDir()
	capture := filepath.Join(dir, "mitm.har")
	port := freeLoopbackPort(t)
	cmd := exec.Command(mitmdump, "--listen-host", "127.0.0.1", "--listen-port", port, "--ssl-insecure", "-q",
		"--set", "confdir="+filepath.Join(dir, "mitmconf"), "-s", "testdata/har/har_dump.py", "--set", "hardump="+capture)
	var mout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &mout, &mout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	}()
	// ready when it accepts connections
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("mitmdump ended: %v\n%s", err, mout.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mitmdump did not listen on %s\n%s", port, mout.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	runPW(t, core, "browse", "127.0.0.1:"+port, "https://"+site.Listener.Addr().String())
	cmd.Process.Signal(os.Interrupt) // har_dump writes the HAR when mitmdump ends
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("mitmdump did not end on SIGINT\n%s", mout.String())
	}
	site.Close()
	if _, err := os.Stat(capture); err != nil {
		t.Fatalf("no HAR from mitmdump: %v\n%s", err, mout.String())
	}
	repo := harRepo(t)
	importHAR(t, repo, "shop-mitm", capture)
	var rep crawl.TargetReport
	stdout, stderr, code := runPab(t, "--repo", repo, "check", "shop-mitm", "--crawl", "--json")
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("pab check --crawl: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	if rep.Wrong != 0 || code != 0 || rep.Seeds == 0 {
		t.Errorf("pab check --crawl: exit %d, %d seeds, %d wrong-looking pages:\n%s", code, rep.Seeds, rep.Wrong, stdout)
	}
}

// TestHARBodyNotCaptured: a HAR response whose body the capture left out is imported as
// such: replay answers it as a miss (never an empty 200), pab stats counts it, pab audit
// names it, and the run's HAR says which answers had no recorded body.
func TestHARBodyNotCaptured(t *testing.T) {
	repo := harRepo(t)
	if _, stderr, code := runPab(t, "--repo", repo, "replay", "testdata/har/handmade.har"); code == 0 ||
		!strings.Contains(stderr, "the file is a HAR, which is replayed once imported into a task (pab import --task ID testdata/har/handmade.har)") {
		t.Errorf("pab replay FILE.har: exit %d, %s", code, stderr)
	}
	importHAR(t, repo, "handmade", "testdata/har/handmade.har")
	rp := startReplay(t, "handmade", "--repo", repo)
	client := rp.client(t)
	for _, u := range []string{"http://shop.test/", "http://shop.test/api/items"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 404, false: 200}[strings.HasSuffix(u, "items")]; resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", u, resp.StatusCode, want)
		}
	}
	rp.stop(t)
	stdout, stderr, code := runPab(t, "--repo", repo, "stats", rp.log)
	if code != 0 || !strings.Contains(stdout, "misses on recorded exchanges whose body is not in the recording (body not captured, or a revisit without its original): 1") {
		t.Errorf("pab stats: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runPab(t, "--repo", repo, "audit", "handmade")
	if code == 0 || !strings.Contains(stdout+stderr, "a HAR response whose body was not captured") {
		t.Errorf("pab audit: exit %d\n%s%s", code, stdout, stderr)
	}
	runHAR := filepath.Join(t.TempDir(), "run.har")
	if _, stderr, code := runPab(t, "--repo", repo, "export", "handmade", "--har", runHAR, "--log", rp.log); code != 0 {
		t.Fatalf("pab export --har --log: exit %d: %s", code, stderr)
	}
	devtoolsCheck(t, runHAR) // the miss without a body too
	f, err := os.Open(runHAR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hr, err := har.NewReader(f, har.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		e, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %s %v text %v", e.Request.URL, e.Response.Status, e.Pab.Source, e.Pab.BodyNotCaptured, e.Response.Content.HasText()))
	}
	want := []string{"http://shop.test/ 200 exact false text true", "http://shop.test/api/items 404 miss true text false"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("run HAR entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
