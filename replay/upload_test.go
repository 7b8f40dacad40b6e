package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// uploadExchanges is the site recording plus two recorded uploads: 10 MiB with a
// Content-Length (more than one request keeps in memory) and 3 MiB sent chunked.
func uploadExchanges() (exs []ex, big, chunked []byte) {
	uploadOnce.Do(func() { uploadBig, uploadChunked = bigPayload(10<<20), bigPayload(3<<20+17) })
	big, chunked = uploadBig, uploadChunked
	exs = append(siteExchanges(),
		ex{method: "POST", url: "https://site.test/upload", reqType: "application/octet-stream", reqBody: big,
			status: 201, resType: "fetch", header: []string{"Content-Type: application/json"}, body: []byte(`{"stored":"big"}`)},
		ex{method: "POST", url: "http://plain.test/chunked", reqType: "application/octet-stream", reqBody: chunked,
			status: 201, resType: "fetch", header: []string{"Content-Type: application/json"}, body: []byte(`{"stored":"chunked"}`)})
	return exs, big, chunked
}

// the payloads of uploadExchanges, made once (slow under the race detector); read only
var (
	uploadOnce               sync.Once
	uploadBig, uploadChunked []byte
)

// post sends body (chunked when length is false) and returns the status and answer.
func (tp *testProxy) post(t testing.TB, u, ct string, body []byte, length bool) (int, string, error) {
	var rd io.Reader = bytes.NewReader(body)
	if !length {
		rd = io.MultiReader(rd) // hides the length: sent chunked
	}
	req, err := http.NewRequest("POST", u, rd)
	if err != nil {
		return 0, "", err
	}
	if !length {
		req.ContentLength = -1
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Accept", "application/json")
	resp, err := tp.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// checkBodiesReleased checks that no request body holds memory or a temporary file.
func checkBodiesReleased(t *testing.T, tp *testProxy, spill string) {
	t.Helper()
	if m, d := tp.s.bodyMem.used.Load(), tp.s.bodyDisk.used.Load(); m != 0 || d != 0 {
		t.Errorf("after the uploads %d bytes of bodies are held in memory and %d on disk", m, d)
	}
	if des, err := os.ReadDir(spill); err != nil || len(des) != 0 {
		t.Errorf("spill directory holds %v (%v)", des, err)
	}
}

// TestProxyConcurrentUploadsCapped sends uploads at once through the proxy, over HTTPS and
// plain HTTP, with and without a length, under a 16 MiB memory cap: large and crowded-out
// bodies go to temporary files, every one is still matched exactly, and nothing is held
// afterwards.
func TestProxyConcurrentUploadsCapped(t *testing.T) {
	exs, big, chunked := uploadExchanges()
	spill := t.TempDir()
	b := writeTestBundle(t, t.TempDir(), siteManifest(), exs)
	tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) { o.BodyMemory, o.SpillDir = 16<<20, spill })
	tp.tr.MaxConnsPerHost, tp.tr.MaxIdleConnsPerHost = 0, 16
	type upload struct {
		url, ct string
		body    []byte
		length  bool
		want    string
	}
	var ups []upload
	for range 4 {
		ups = append(ups,
			upload{"https://site.test/upload", "application/octet-stream", big, true, `{"stored":"big"}`},
			upload{"http://plain.test/chunked", "application/octet-stream", chunked, false, `{"stored":"chunked"}`},
			upload{"https://site.test/api/cart", "application/json", []byte(`{"qty":2,"id":1}`), true, `{"ok":true}`},
			upload{"https://site.test/api/cart", "application/json", []byte(`{"id":1,"qty":2}`), false, `{"ok":true}`})
	}
	var wg sync.WaitGroup
	errs := make([]string, len(ups))
	for i, u := range ups {
		wg.Go(func() {
			st, body, err := tp.post(t, u.url, u.ct, u.body, u.length)
			if err != nil || body != u.want {
				errs[i] = fmt.Sprintf("%s (%d bytes, length %v): %d %q %v", u.url, len(u.body), u.length, st, body, err)
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
	checkBodiesReleased(t, tp, spill)
	lines := tp.logLines(t)
	if len(lines) != len(ups) {
		t.Fatalf("%d log lines, want %d", len(lines), len(ups))
	}
	for _, l := range lines {
		if l.Source != SourceExact || l.Note != "" {
			t.Errorf("log line %+v, want exact with no note", l)
		}
	}
}

// TestProxyUploadRefusedOverCaps: with a 1 MiB memory cap and no temporary files, a body
// that does not fit in memory is read to the end and answered 413 with a log line that says
// why, with or without a Content-Length; a body that fits is matched as usual.
func TestProxyUploadRefusedOverCaps(t *testing.T) {
	b := writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges())
	spill := t.TempDir()
	tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) { o.BodyMemory, o.BodySpill, o.SpillDir = 1<<20, -1, spill })
	over := bigPayload(2 << 20)
	for _, length := range []bool{true, false} {
		for _, u := range []string{"https://site.test/upload", "http://plain.test/chunked"} {
			st, body, err := tp.post(t, u, "application/octet-stream", over, length)
			if err != nil || st != http.StatusRequestEntityTooLarge || !strings.HasPrefix(body, "pab replay: request body not kept: other requests use the caps of 1 MiB") {
				t.Errorf("%s, length %v: %d %q %v", u, length, st, body, err)
			}
		}
	}
	if st, body, err := tp.post(t, "https://site.test/api/cart", "application/json", []byte(`{"id":1,"qty":2}`), false); err != nil || st != 200 || body != `{"ok":true}` {
		t.Errorf("small body: %d %q %v", st, body, err)
	}
	checkBodiesReleased(t, tp, spill)
	lines := tp.logLines(t)
	if len(lines) != 5 {
		t.Fatalf("log %+v", lines)
	}
	for _, l := range lines[:4] {
		if l.Status != 413 || !strings.Contains(l.Note, "request body not kept") || !strings.HasSuffix(l.Note, "; answered 413") {
			t.Errorf("log line %+v", l)
		}
	}
	if lines[4].Source != SourceExact {
		t.Errorf("small body log line %+v", lines[4])
	}
}

// TestProxyUploadSpillsWhenMemoryFull: while a slow upload holds the whole memory cap, a
// small body goes to a temporary file and is matched exactly; without temporary files the
// same request is answered 413.
func TestProxyUploadSpillsWhenMemoryFull(t *testing.T) {
	for _, spillCap := range []int64{0, -1} {
		t.Run(fmt.Sprint("spill ", spillCap), func(t *testing.T) {
			b := writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges())
			spill := t.TempDir()
			tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) { o.BodyMemory, o.BodySpill, o.SpillDir = 1<<20, spillCap, spill })
			tp.tr.MaxIdleConnsPerHost = 4
			pr, pw := io.Pipe()
			req, _ := http.NewRequest("POST", "https://site.test/slow", pr)
			req.ContentLength = 1 << 20
			slow := make(chan error, 1)
			go func() {
				resp, err := tp.client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				slow <- err
			}()
			if _, err := pw.Write([]byte("first bytes")); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for tp.s.bodyMem.used.Load() != 1<<20 {
				if time.Now().After(deadline) {
					t.Fatalf("the slow upload holds %d bytes of memory", tp.s.bodyMem.used.Load())
				}
				time.Sleep(time.Millisecond)
			}
			st, body, err := tp.post(t, "https://site.test/api/cart", "application/json", []byte(`{"id":1,"qty":2}`), true)
			want, wantBody := 200, `{"ok":true}`
			if spillCap < 0 {
				want, wantBody = 413, "pab replay: request body not kept: other requests use the caps of 1 MiB of request bodies in memory and 0 MiB in temporary files\n"
			}
			if err != nil || st != want || body != wantBody {
				t.Errorf("small body while memory is full: %d %q %v, want %d %q", st, body, err, want, wantBody)
			}
			pw.Write(make([]byte, 1<<20-len("first bytes")))
			pw.Close()
			if err := <-slow; err != nil {
				t.Fatal(err)
			}
			checkBodiesReleased(t, tp, spill)
		})
	}
}

// TestProxyControlHostAnyCase: the control host is matched in any case and with a
// trailing dot, over plain HTTP and through CONNECT; look-alike hosts are site traffic.
func TestProxyControlHostAnyCase(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	for _, host := range []string{"rr.control", "RR.CONTROL", "rr.control.", "RR.Control.", "Rr.CoNtRoL:80"} {
		for _, scheme := range []string{"http", "https"} {
			h := host
			if scheme == "https" {
				h = strings.TrimSuffix(h, ":80")
			}
			u := scheme + "://" + h + "/stats"
			r := tp.get(t, u, nil)
			var c Counts
			if err := json.Unmarshal(r.body, &c); r.status != 200 || err != nil {
				t.Errorf("%s: %d %q, want the control /stats", u, r.status, r.body)
			}
		}
	}
	// through a raw CONNECT with that host, as a browser sends it
	tc := dialTunnel(t, tp, "RR.Control.:443", []string{"http/1.1"})
	fmt.Fprint(tc, "GET /health HTTP/1.1\r\nHost: RR.Control.\r\nConnection: close\r\n\r\n")
	if b, _ := io.ReadAll(tc); !bytes.HasPrefix(b, []byte("HTTP/1.1 200")) || !bytes.HasSuffix(b, []byte("\r\n\r\nok\n")) {
		t.Errorf("CONNECT RR.Control.:443, GET /health: %q", b)
	}
	for _, u := range []string{"http://rr.control.test/stats", "https://xrr.control/stats", "http://rr.control../stats"} {
		if r := tp.get(t, u, nil); r.status != 404 {
			t.Errorf("%s: %d %q, want a miss", u, r.status, r.body)
		}
	}
	lines := tp.logLines(t)
	if len(lines) != 3 {
		t.Errorf("log %+v: want only the 3 look-alike requests (control requests are not logged)", lines)
	}
}
