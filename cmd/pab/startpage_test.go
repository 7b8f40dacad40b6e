package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// writeHeritrixBundle writes a bundle shaped like a Heritrix crawl whose pages.jsonl starts
// badly: a 302 to a host the crawl never fetched, a page with no recording, a recorded 404,
// an image, then a 301 to a recorded HTML page. Only the last page starts a browser well.
func writeHeritrixBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "heritrix-bundle")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "heritrix-test"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2008, 4, 30, 20, 48, 25, 0, time.UTC)
	html := http.Header{"Content-Type": {"text/html"}}
	for _, ex := range []recording.Exchange{
		{URL: "http://heritrix.test/", Status: 302, RespHeader: http.Header{"Location": {"http://elsewhere.test/"}}},
		{URL: "http://heritrix.test/gone", Status: 404, RespHeader: html, Body: []byte("<html><title>gone</title></html>")},
		{URL: "http://heritrix.test/logo.png", Status: 200, RespHeader: http.Header{"Content-Type": {"image/png"}}, Body: []byte("\x89PNG")},
		{URL: "http://heritrix.test/start", Status: 301, RespHeader: http.Header{"Location": {"/home"}}},
		{URL: "http://heritrix.test/home", Status: 200, RespHeader: html, Body: []byte("<html><head><title>home</title></head><body>home</body></html>")},
	} {
		ex.Date = at
		if _, err := w.Add(ex); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"http://heritrix.test/", "http://heritrix.test/unrecorded", "http://heritrix.test/gone",
		"http://heritrix.test/logo.png", "http://heritrix.test/start", "http://heritrix.test/home"} {
		if err := w.AddPage(recording.Page{URL: u, TS: recording.FormatTime(at), Fetched: "GET"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStartPage: the first page that replay answers with a 2xx HTML document, after recorded
// redirects; the first page when none does; "" without pages.
func TestStartPage(t *testing.T) {
	b, err := recording.OpenBundle(writeHeritrixBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rs, err := rules.Load()
	if err != nil {
		t.Fatal(err)
	}
	ix, err := replay.NewIndex(b, rs)
	if err != nil {
		t.Fatal(err)
	}
	if got := startPage(ix, b); got != "http://heritrix.test/start" {
		t.Errorf("start page %q, want http://heritrix.test/start (its 301 leads to a recorded page)", got)
	}
	all := b.Pages
	b.Pages = all[:4] // no page answers 2xx HTML: the first, as before
	if got := startPage(ix, b); got != "http://heritrix.test/" {
		t.Errorf("start page without a good one %q, want the first page", got)
	}
	b.Pages = nil
	if got := startPage(ix, b); got != "" {
		t.Errorf("start page without pages %q", got)
	}
	b.Pages = all
}

// TestBrowserStartPage: pab browser on the Heritrix-shaped bundle opens the page that
// replay answers (its tab ends on the recorded /home), not the redirect to a host the
// recording lacks.
func TestBrowserStartPage(t *testing.T) {
	chromiumPath(t)
	cmd := pabCmd("browser", writeHeritrixBundle(t))
	ws, _ := startPabBrowser(t, cmd)
	allocCtx, cancelAlloc := remote.NewAllocator(context.Background(), ws, remote.NoModifyURL)
	defer cancelAlloc()
	bctx, cancelB := chromedp.NewContext(allocCtx)
	defer cancelB()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	const want = "http://heritrix.test/home"
	var urls []string
	for {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("list targets: %v", err)
		}
		urls = urls[:0]
		for _, in := range infos {
			if in.Type == "page" {
				urls = append(urls, in.URL)
				if in.URL == want {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no tab on %s; tabs: %q", want, urls)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startPabBrowser starts cmd (a `pab browser` command), stops it when the test ends
// (SIGINT, then SIGKILL after 30 s), and waits at most 90 s for the CDP endpoint it prints;
// it returns the endpoint and what it printed on stderr until then.
func startPabBrowser(t *testing.T, cmd *exec.Cmd) (ws, stderr string) {
	t.Helper()
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	var out bytes.Buffer
	deadline := time.AfterFunc(90*time.Second, func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(errPipe)
	for ws == "" && sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if m := cdpLine.FindStringSubmatch(sc.Text()); m != nil {
			ws = m[1]
		}
	}
	deadline.Stop()
	go func() { io.Copy(io.Discard, errPipe); done <- cmd.Wait() }()
	if ws == "" {
		t.Fatalf("pab browser printed no CDP endpoint:\n%s", &out)
	}
	return ws, out.String()
}
