package main

// End-to-end tests: they build the pab binary, start `pab replay` on a free loopback port
// with a shipped demo task, and fetch its pages through the proxy with a Go client that
// trusts pab's CA, and with headless Chromium (Debian's chromium) driven by chromedp.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"

	"github.com/pab-dev/pab/internal/testtool"
)

var (
	pabBin   string // the pab binary built for these tests
	repoRoot string // this repository, holding sites/ and tasks/
	cacheDir string // $PAB_CACHE for every pab process the tests start
)

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "pab-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pabBin = filepath.Join(tmp, "pab")
	cacheDir = filepath.Join(tmp, "cache")
	if out, err := exec.Command("go", "build", "-o", pabBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build pab: %v\n%s", err, out)
		os.Exit(2)
	}
	repoRoot, _ = filepath.Abs("../..")
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// pabCmd returns a pab command run against this repository with the test cache.
func pabCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(pabBin, append([]string{"--repo", repoRoot}, args...)...)
	cmd.Env = append(os.Environ(), "PAB_CACHE="+cacheDir, "PAB_REPO=")
	return cmd
}

// replayProc is a running `pab replay`.
type replayProc struct {
	cmd    *exec.Cmd
	addr   string // host:port of the proxy
	caPath string
	log    string // path of its JSONL log
	stderr *bytes.Buffer
}

var listenLine = regexp.MustCompile(`on http://(127\.0\.0\.1:\d+)`)
var caLine = regexp.MustCompile(`pab replay: CA (\S+)`)

// startReplay starts `pab replay TARGET --listen 127.0.0.1:0 --log ... EXTRA...` and waits
// until it prints its address.
func startReplay(t *testing.T, target string, extra ...string) *replayProc {
	t.Helper()
	p := &replayProc{log: filepath.Join(t.TempDir(), "replay.jsonl"), stderr: &bytes.Buffer{}}
	p.cmd = pabCmd(append([]string{"replay", target, "--listen", "127.0.0.1:0", "--log", p.log}, extra...)...)
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	sc := bufio.NewScanner(errPipe)
	deadline := time.AfterFunc(60*time.Second, func() { p.cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		p.stderr.WriteString(line + "\n")
		if m := listenLine.FindStringSubmatch(line); m != nil {
			p.addr = m[1]
		}
		if m := caLine.FindStringSubmatch(line); m != nil {
			p.caPath = m[1]
		}
		if p.addr != "" && p.caPath != "" {
			break
		}
	}
	if p.addr == "" || p.caPath == "" {
		t.Fatalf("pab replay %s did not start:\n%s", target, p.stderr)
	}
	go io.Copy(io.Discard, errPipe)
	return p
}

// stop ends the replay with SIGINT (as Ctrl-C would), so the log is flushed.
func (p *replayProc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pab replay exited with %v\n%s", err, p.stderr)
		}
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("pab replay did not stop on SIGINT")
	}
}

// client returns an HTTP client that goes through the proxy and trusts only pab's CA.
func (p *replayProc) client(t *testing.T) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(p.caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", p.caPath)
	}
	proxyURL := &url.URL{Scheme: "http", Host: p.addr}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:              http.ProxyURL(proxyURL),
			TLSClientConfig:    &tls.Config{RootCAs: pool},
			DisableCompression: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}
}

// readLog reads the replay log after the replay stopped.
func (p *replayProc) readLog(t *testing.T) []replay.LogLine {
	t.Helper()
	f, err := os.Open(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := replay.ReadLog(f, p.log)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// openTaskBundle opens the unpacked bundle of a demo task (the same one pab replay serves).
func openTaskBundle(t *testing.T, id string) *recording.Bundle {
	t.Helper()
	t.Setenv("PAB_CACHE", cacheDir)
	repo := &task.Repo{Root: repoRoot}
	tgt, err := task.Resolve(id, repo)
	if err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(tgt.BundleDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestReplayServesRecordedPayloads fetches every recorded GET exchange of each demo task
// through a running `pab replay` and compares status and body bytes with the recording.
// The page clock is off, so that HTML documents too are served byte for byte.
func TestReplayServesRecordedPayloads(t *testing.T) {
	for _, id := range []string{"books-sapiens-price", "lil-former-projects", "archive-org-jobs"} {
		t.Run(id, func(t *testing.T) {
			p := startReplay(t, id, "--clock", "off")
			b := openTaskBundle(t, id)
			c := p.client(t)
			seen := map[string]bool{}
			checked := 0
			for i := range b.Entries {
				e := &b.Entries[i]
				if e.Method != http.MethodGet || e.Unresolved || seen[e.URL] {
					continue
				}
				seen[e.URL] = true // the earliest copy of a URL is the one replay answers
				u, err := url.Parse(e.URL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
					continue
				}
				want, err := b.Response(e)
				if err != nil {
					t.Fatalf("recorded response %s: %v", e.ID, err)
				}
				wantBody, err := io.ReadAll(want.Body)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.Get(e.URL)
				if err != nil {
					t.Fatalf("GET %s through the proxy: %v", e.URL, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("read %s: %v", e.URL, err)
				}
				if resp.StatusCode != e.Status {
					t.Errorf("GET %s: status %d, recorded %d", e.URL, resp.StatusCode, e.Status)
				}
				if !bytes.Equal(got, wantBody) {
					t.Errorf("GET %s: %d body bytes differ from the %d recorded", e.URL, len(got), len(wantBody))
				}
				if resp.ContentLength >= 0 && resp.ContentLength != int64(len(wantBody)) {
					t.Errorf("GET %s: Content-Length %d, body %d", e.URL, resp.ContentLength, len(wantBody))
				}
				checked++
			}
			if checked < 10 {
				t.Fatalf("only %d exchanges checked", checked)
			}
			p.stop(t)
			lines := p.readLog(t)
			if len(lines) < checked {
				t.Fatalf("log has %d lines for %d requests", len(lines), checked)
			}
			for _, l := range lines {
				if l.Source != "exact" {
					t.Errorf("log: %s %s answered from %q, want exact", l.Method, l.URL, l.Source)
				}
			}
			t.Logf("%s: %d exchanges fetched through the proxy, bodies equal", id, checked)
		})
	}
}

// TestReplayMissAnswers checks what the proxy answers for requests the recording lacks.
func TestReplayMissAnswers(t *testing.T) {
	p := startReplay(t, "books-sapiens-price")
	c := p.client(t)
	cases := []struct {
		url, accept, dest string
		status            int
		bodyHas           string
	}{
		{"http://books.toscrape.com/catalogue/category/books/poetry_23/index.html", "text/html", "document", 404, "<html"},
		{"http://books.toscrape.com/media/cache/none.jpg", "image/avif,image/webp,*/*", "image", 404, ""},
		{"https://books.toscrape.com/api/none", "application/json", "empty", 404, "{}"},
		{"https://www.google-analytics.com/collect?v=1", "*/*", "", 204, ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest("GET", tc.url, nil)
		req.Header.Set("Accept", tc.accept)
		if tc.dest != "" {
			req.Header.Set("Sec-Fetch-Dest", tc.dest)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: status %d, want %d", tc.url, resp.StatusCode, tc.status)
		}
		if tc.bodyHas == "" && len(body) != 0 {
			t.Errorf("GET %s: body %q, want empty", tc.url, body)
		}
		if tc.bodyHas != "" && !bytes.Contains(body, []byte(tc.bodyHas)) {
			t.Errorf("GET %s: body %q lacks %q", tc.url, body, tc.bodyHas)
		}
	}
	// a tracking parameter from sites/_default.yaml does not stop an exact match
	resp, err := c.Get("http://books.toscrape.com/?utm_source=newsletter&gclid=abc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("page with tracking parameters: status %d", resp.StatusCode)
	}
	p.stop(t)
	lines := p.readLog(t)
	if got := lines[len(lines)-1].Source; got != "exact" {
		t.Errorf("tracking parameters: source %q, want exact", got)
	}
}

// chromiumPath finds Debian's chromium; in CI (CI=true) its absence fails the test.
func chromiumPath(t *testing.T) string { return testtool.Chromium(t) }

// TestChromiumThroughReplay loads replayed pages in headless Chromium through pab replay and
// checks document.title and that the page and its subresources came from the recording.
func TestChromiumThroughReplay(t *testing.T) {
	chromiumPath(t)
	cases := []struct {
		task, url, title string
	}{
		{"lil-former-projects", "https://lil.law.harvard.edu/projects/", "Projects | Library Innovation Lab"},
		{"books-sapiens-price", "http://books.toscrape.com/", "All products | Books to Scrape - Sandbox"},
	}
	for _, tc := range cases {
		t.Run(tc.task, func(t *testing.T) {
			p := startReplay(t, tc.task)
			nctx := replayChrome(t, p.addr)
			resp, err := chromedp.RunResponse(nctx, chromedp.Navigate(tc.url))
			if err != nil {
				t.Fatalf("navigate %s: %v", tc.url, err)
			}
			if resp.Status != 200 {
				t.Errorf("navigate %s: status %d", tc.url, resp.Status)
			}
			// wait until every image has finished loading, so the log holds them
			if _, err := chromedp.Run(nctx, chromedp.Evaluate[bool](`new Promise(r => {
				const done = () => Array.from(document.images).every(i => i.complete);
				const tick = () => done() ? r(true) : setTimeout(tick, 50); tick(); })`, func(p *runtime.EvaluateParams) { t := true; p.AwaitPromise = &t })); err != nil {
				t.Fatalf("wait for images: %v", err)
			}
			title, err := chromedp.Run(nctx, chromedp.Title())
			if err != nil {
				t.Fatal(err)
			}
			if title != tc.title {
				t.Errorf("document.title = %q, want %q", title, tc.title)
			}
			chromedp.Cancel(nctx) // Chromium closes before the replay stops, so the log is whole
			p.stop(t)
			lines := p.readLog(t)
			var page bool
			sub := map[string]int{}
			for _, l := range lines {
				if l.URL == tc.url && l.Type == "document" && l.Source == "exact" && l.Status == 200 {
					page = true
					// Browsers send Fetch Metadata (Sec-Fetch-Dest) to HTTPS origins only.
					if want := map[bool]string{true: "document", false: ""}[strings.HasPrefix(l.URL, "https:")]; l.Dest != want {
						t.Errorf("%s: logged dest %q, want %q", l.URL, l.Dest, want)
					}
				}
				if l.Type != "document" && l.Source == "exact" && sameHost(l.URL, tc.url) {
					sub[l.Type]++
				}
			}
			if !page {
				t.Errorf("log has no exact document line for %s:\n%s", tc.url, dumpLog(lines))
			}
			if sub["image"] == 0 || sub["style"] == 0 {
				t.Errorf("log shows subresources answered exactly %v; want images and styles:\n%s", sub, dumpLog(lines))
			}
			t.Logf("%s: title %q, subresources answered exactly: %v", tc.task, title, sub)
			// pab grade reads the same log: one page opened (no subresource counted as a page).
			out := t.TempDir()
			if _, stderr, code := runPab(t, "grade", tc.task, "--log", p.log, "--out", out); code != 0 {
				t.Fatalf("pab grade: exit %d\n%s", code, stderr)
			}
			r := readResult(t, filepath.Join(out, "result.json"))
			if len(r.Pages.Opened) != 1 || r.Pages.Opened[0].URL != tc.url || r.Status != "not_scored" {
				t.Errorf("graded pages %+v, status %s; want just %s", r.Pages.Opened, r.Status, tc.url)
			}
		})
	}
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Hostname() == ub.Hostname()
}

func dumpLog(lines []replay.LogLine) string {
	var sb strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l)
		sb.Write(j)
		sb.WriteByte('\n')
	}
	return sb.String()
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	return string(out)
}
