package main

// Tests of `pab record` as a user runs it: the built binary records a local TLS site
// (shop.test, served by httptest with a certificate from its own CA, reached through
// --resolve and trusted through --upstream-ca), is stopped with SIGINT or killed, and
// the recording is replayed with `pab replay` once the site is gone.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/browser/cdpalloc"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/tlsca"
	"github.com/pab-dev/pab/warc"
)

// testShop serves shop.test over TLS: a home page with a stylesheet, a gzip script that
// writes into the page, a search form (GET), a cart form (POST, sets a cookie), a chunked
// page, a slow endpoint and a 404 page. It returns the server and its CA's PEM path.
func testShop(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	siteCA, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "site-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := siteCA.LeafFor("shop.test")
	if err != nil {
		t.Fatal(err)
	}
	html := func(w http.ResponseWriter, status int, title, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<!doctype html><html><head><title>%s</title><link rel="stylesheet" href="/style.css"></head><body>%s</body></html>`, title, body)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "visitor", Value: "v-12345", Path: "/"})
		html(w, 200, "Test Shop", `<h1>Test Shop</h1><p id="js">no script</p><script src="/app.js"></script>
<form action="/search" method="get"><input name="q" id="q"><button id="go">Search</button></form>
<form action="/cart" method="post"><input type="hidden" name="item" value="lamp"><input name="qty" id="qty" value="2"><button id="add">Add to cart</button></form>`)
	})
	mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, "h1 { color: green }")
	})
	mux.HandleFunc("GET /app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, `document.getElementById("js").textContent = "script ran from gzip";`)
		zw.Close()
	})
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		html(w, 200, "Search", "<h1>Results for "+r.URL.Query().Get("q")+"</h1><p>Brass lamp, 40 EUR</p>")
	})
	mux.HandleFunc("POST /cart", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		http.SetCookie(w, &http.Cookie{Name: "cart", Value: "c-999", Path: "/"})
		html(w, 200, "Cart", "<h1>Cart</h1><p>"+r.PostForm.Get("qty")+" x "+r.PostForm.Get("item")+"</p>")
	})
	mux.HandleFunc("GET /news", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		for i := range 3 {
			fmt.Fprintf(w, "<p>news part %d</p>\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		for {
			if _, err := w.Write([]byte("tick\n")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		html(w, 404, "Not found", "<h1>No such page in the test shop</h1>")
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, siteCA.CertPath()
}

// recordProc is a running `pab record`.
type recordProc struct {
	cmd    *exec.Cmd
	addr   string
	stdout *bytes.Buffer
	stderr *syncBuffer // written by the copying goroutine while the test reads it
	done   chan error
}

var recordLine = regexp.MustCompile(`on http://(127\.0\.0\.1:\d+)`)

func pabIn(repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(pabBin, append([]string{"--repo", repo}, args...)...)
	cmd.Env = append(os.Environ(), "PAB_CACHE="+cacheDir, "PAB_REPO=")
	return cmd
}

func startRecord(t *testing.T, repo string, srv *httptest.Server, siteCA string, extra ...string) *recordProc {
	t.Helper()
	return startRecordWith(t, repo, srv, siteCA, nil, extra...)
}

// startRecordWith is startRecord with env added to pab record's environment.
func startRecordWith(t *testing.T, repo string, srv *httptest.Server, siteCA string, env []string, extra ...string) *recordProc {
	t.Helper()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	args := append([]string{"record", "--listen", "127.0.0.1:0",
		"--resolve", fmt.Sprintf("shop.test:443:127.0.0.1:%d", port), "--upstream-ca", siteCA}, extra...)
	p := &recordProc{cmd: pabIn(repo, args...), stdout: &bytes.Buffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout = p.stdout
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		fmt.Fprintln(p.stderr, sc.Text())
		if m := recordLine.FindStringSubmatch(sc.Text()); m != nil {
			p.addr = m[1]
			break
		}
	}
	if p.addr == "" {
		p.cmd.Wait()
		t.Fatalf("pab record did not start:\n%s", p.stderr)
	}
	go func() {
		io.Copy(p.stderr, errPipe)
		p.done <- p.cmd.Wait()
	}()
	return p
}

// stop sends SIGINT and waits for the recording to be written.
func (p *recordProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("pab record exited with %v\n%s", err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("pab record did not stop on SIGINT:\n%s", p.stderr)
	}
}

func (p *recordProc) client(t *testing.T) *http.Client {
	rp := &replayProc{addr: p.addr, caPath: filepath.Join(cacheDir, "ca", tlsca.CertFile)}
	return rp.client(t)
}

// TestRecordKill9 kills the recorder (SIGKILL) while a response is streaming: the journal
// holds every finished exchange as whole WARC records, and `pab record --finish` turns it
// into a bundle.
func TestRecordKill9(t *testing.T) {
	srv, siteCA := testShop(t)
	repo := t.TempDir()
	out := filepath.Join(t.TempDir(), "bundle")
	p := startRecord(t, repo, srv, siteCA, "--task", "killed", "--out", out)
	c := p.client(t)
	for _, path := range []string{"/", "/style.css", "/app.js", "/search?q=lamp", "/news"} {
		resp, err := c.Get("https://shop.test" + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c.Timeout = 0
	resp, err := c.Get("https://shop.test/slow")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	resp.Body.Close()

	journal := filepath.Join(out+".record", "journal.warc")
	r, err := warc.OpenReader(journal)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("journal after kill -9 is not whole: %v", err)
		}
		if len(rec.Warnings) > 0 {
			t.Errorf("record at %d: %v", rec.Offset, rec.Warnings)
		}
		if rec.Type == "response" {
			urls = append(urls, rec.TargetURI)
		}
	}
	r.Close()
	// five pages and the not-found probe started by the first document; the probe may
	// or may not have finished before the kill
	if len(urls) < 5 || len(urls) > 6 {
		t.Fatalf("journal holds %d responses: %v", len(urls), urls)
	}
	cmd := pabIn(repo, "record", "--task", "killed", "--out", out, "--finish")
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pab record --finish: %v\n%s", err, res)
	}
	b, err := recording.OpenBundle(out)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Entries) != len(urls) {
		t.Errorf("bundle has %d entries, journal %d", len(b.Entries), len(urls))
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Errorf("journal left after --finish: %v", err)
	}
}

// browse runs the shop visit in Chromium through proxy and returns each page's text.
func browse(t *testing.T, chrome, proxy string) []string {
	t.Helper()
	spki := strings.TrimSpace(run(t, pabCmd("ca", "--spki")))
	opts := cdpalloc.Options(chrome, browser.Options{Proxy: proxy, SPKI: spki, Profile: t.TempDir()})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, ncancel := context.WithTimeout(ctx, 90*time.Second)
	defer ncancel()
	var texts []string
	text := func() chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			s, err := chromedp.Evaluate[string](`document.title + " | " + document.body.innerText`)(ctx, tg)
			if err != nil {
				return err
			}
			texts = append(texts, s)
			return nil
		})
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate("https://shop.test/"),
		chromedp.WaitVisible(chromedp.ID("go")),
		chromedp.Poll[chromedp.Void](`document.getElementById("js").textContent !== "no script"`),
		text(),
		chromedp.SendKeys(chromedp.ID("q"), "lamp"),
		chromedp.Click(chromedp.ID("go")),
		chromedp.WaitVisible(chromedp.Search(`//h1[starts-with(., "Results")]`)),
		text(),
		chromedp.Navigate("https://shop.test/"),
		chromedp.WaitVisible(chromedp.ID("add")),
		chromedp.Click(chromedp.ID("add")),
		chromedp.WaitVisible(chromedp.Search(`//h1[.="Cart"]`)),
		text(),
		chromedp.Navigate("https://shop.test/news"),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "news part 2")]`)),
		text(),
	)
	if err != nil {
		t.Fatalf("browse through %s: %v (texts so far %q)", proxy, err, texts)
	}
	return texts
}

// TestChromiumRecordThenReplay records the shop with headless Chromium through `pab
// record`, stops it with SIGINT (the recording becomes tasks/shop-rec/recording), stops
// the site, and browses the same way through `pab replay`: the page texts match.
func TestChromiumRecordThenReplay(t *testing.T) {
	chrome := chromiumPath(t)
	srv, siteCA := testShop(t)
	repo := t.TempDir()
	p := startRecord(t, repo, srv, siteCA, "--task", "shop-rec", "--redact", "v-12345")
	live := browse(t, chrome, p.addr)
	p.stop(t)
	srv.Close()
	if !strings.Contains(p.stdout.String(), "recorded ") {
		t.Fatalf("pab record output:\n%s\n%s", p.stdout, p.stderr)
	}
	want := []string{"script ran from gzip", "Results for lamp", "2 x lamp", "news part 2"}
	for i, w := range want {
		if !strings.Contains(live[i], w) {
			t.Fatalf("live page %d text %q lacks %q", i, live[i], w)
		}
	}
	recDir := filepath.Join(repo, "tasks", "shop-rec", "recording")
	if _, err := os.Stat(filepath.Join(recDir, recording.ManifestFile)); err != nil {
		t.Fatalf("no recording written: %v\n%s", err, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(repo, "tasks", "shop-rec", "task.yaml")); err != nil {
		t.Errorf("no task.yaml: %v", err)
	}

	rp := &replayProc{log: filepath.Join(t.TempDir(), "replay.jsonl"), stderr: &bytes.Buffer{}}
	rp.cmd = pabIn(repo, "replay", "shop-rec", "--listen", "127.0.0.1:0", "--log", rp.log)
	errPipe, _ := rp.cmd.StderrPipe()
	if err := rp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.stop(t) })
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		rp.stderr.WriteString(sc.Text() + "\n")
		if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
			rp.addr = m[1]
			break
		}
	}
	if rp.addr == "" {
		t.Fatalf("pab replay did not start:\n%s", rp.stderr)
	}
	go io.Copy(io.Discard, errPipe)
	replayed := browse(t, chrome, rp.addr)
	for i := range live {
		if replayed[i] != live[i] {
			t.Errorf("page %d: replayed text %q, live %q", i, replayed[i], live[i])
		}
	}
	rp.stop(t)
	misses := 0
	for _, l := range rp.readLog(t) {
		if l.Source == "miss" && strings.Contains(l.URL, "shop.test") {
			misses++
			t.Logf("miss: %s %s", l.Method, l.URL)
		}
	}
	if misses > 0 {
		t.Errorf("%d shop.test requests missed in replay", misses)
	}
	for _, p := range recording.AuditRecording(recDir, filepath.Join(t.TempDir(), "audit")) {
		t.Errorf("audit: %+v", p)
	}
	// the bundle inside the task holds no cookie and no redacted value
	tmp := t.TempDir()
	if err := recording.Unpack(recDir, tmp); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tmp, recording.WARCFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"v-12345", "c-999"} {
		if bytes.Contains(data, []byte(leak)) {
			t.Errorf("recording holds %q", leak)
		}
	}
	b, err := recording.OpenBundle(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Manifest.NotFound["shop.test"] == "" {
		t.Errorf("manifest.not_found = %v", b.Manifest.NotFound)
	}
	t.Logf("recorded %d exchanges, %d pages", len(b.Entries), len(b.Pages))
}

// TestRecordTaskTwice: the first recording of a task becomes tasks/ID/recording; the
// second is merged into it (as pab import merges), so both visits are answered.
func TestRecordTaskTwice(t *testing.T) {
	srv, siteCA := testShop(t)
	repo := t.TempDir()
	visit := func(paths ...string) *recordProc {
		p := startRecord(t, repo, srv, siteCA, "--task", "twice")
		c := p.client(t)
		for _, path := range paths {
			resp, err := c.Get("https://shop.test" + path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		p.stop(t)
		return p
	}
	visit("/", "/search?q=lamp")
	recDir := filepath.Join(repo, "tasks", "twice", "recording")
	if !strings.Contains(visit().stderr.String(), "nothing was recorded") {
		t.Error("an empty recording was not reported")
	}
	if _, err := os.Stat(filepath.Join(recDir, recording.ManifestFile)); err != nil {
		t.Fatalf("first recording not in the task: %v", err)
	}
	first, err := recording.CountRecordingEntries(recDir)
	if err != nil {
		t.Fatal(err)
	}
	p := visit("/news")
	if !strings.Contains(p.stdout.String(), "merged with the existing recording") {
		t.Fatalf("second recording was not merged:\n%s\n%s", p.stdout, p.stderr)
	}
	merged := filepath.Join(t.TempDir(), "bundle")
	if err := recording.Unpack(recDir, merged); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(merged)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	urls := map[string]bool{}
	for _, e := range b.Entries {
		urls[e.URL] = true
	}
	if len(b.Entries) != first+1 || !urls["https://shop.test/search?q=lamp"] || !urls["https://shop.test/news"] {
		t.Errorf("merged recording: %d entries (first had %d), urls %v", len(b.Entries), first, urls)
	}
	if probs := recording.Audit(merged); len(probs) != 0 {
		t.Errorf("merged recording fails the audit: %v", probs)
	}
}

func TestRecordUserMistakes(t *testing.T) {
	repo := t.TempDir()
	bad := filepath.Join(t.TempDir(), "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"record"}, "--task ID is required"},
		{[]string{"record", "--task", "../x"}, "task"},
		{[]string{"record", "--task", "x", "--resolve", "shop.test:443"}, "want HOST:PORT:ADDR"},
		{[]string{"record", "--task", "x", "--redact", "re:("}, "redact"},
		{[]string{"record", "--task", "x", "--upstream-ca", bad}, "holds no PEM certificate"},
		{[]string{"record", "--task", "x", "--upstream-ca", bad + ".missing"}, "no such file"},
	} {
		out, err := pabIn(repo, c.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
			t.Errorf("pab %s: %v\n%s\nwant one line with %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}
