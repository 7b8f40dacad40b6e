package record

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
)

// TestUpstreamFailures records answers that go wrong upstream: the client gets what the
// upstream gave, the journal keeps only whole exchanges and the log says what was left out.
func TestUpstreamFailures(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, req *http.Request) {
		switch req.URL.Path {
		case "/reset":
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n")
			c.Write(bytes.Repeat([]byte("x"), 100))
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST
			}
			c.Close()
		case "/short":
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 50\r\n\r\nonly ten b")
			c.Close()
		case "/long":
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello world")
			c.Close()
		case "/badgzip":
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: 12\r\n\r\nnot gzip at!")
		case "/badbr":
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: br\r\nContent-Length: 8\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff")
		case "/http10":
			fmt.Fprint(c, "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>old server</html>")
			c.Close()
		case "/loop":
			fmt.Fprint(c, "HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n")
		case "/big":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", 10<<20)
			c.Write(bytes.Repeat([]byte("b"), 10<<20))
		case "/upload":
			n, _ := io.Copy(io.Discard, req.Body)
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%d", len(fmt.Sprint(n)), n)
		case "/head":
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1234\r\n\r\n")
		case "/longurl":
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 8\r\n\r\nlong url")
		}
	})
	deadAddr := refusingAddr(t)

	g := newRig(t, Options{MaxBody: 1 << 20})
	c := g.client()
	c.Transport.(*http.Transport).DisableKeepAlives = true
	base := "http://" + addr
	fetch := func(method, path string, body io.Reader) (int, []byte, error) {
		req, _ := http.NewRequest(method, base+path, body)
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}

	if _, b, err := fetch("GET", "/reset", nil); err == nil {
		t.Errorf("reset mid-body reached the client whole: %d bytes", len(b))
	}
	if _, _, err := fetch("GET", "/short", nil); err == nil {
		t.Error("lying (too long) Content-Length reached the client as a whole body")
	}
	if _, b, err := fetch("GET", "/long", nil); err != nil || string(b) != "hello" {
		t.Errorf("/long: %q %v", b, err)
	}
	// a URL too long for a WARC header (warc.ErrHeaderTooLarge) is answered, not stored,
	// and the journal stays readable for the exchanges after it
	longURL := "/longurl?q=" + strings.Repeat("q", 70_000)
	if _, b, err := fetch("GET", longURL, nil); err != nil || string(b) != "long url" {
		t.Errorf("long URL: %q %v", b, err)
	}
	if _, b, err := fetch("GET", "/badgzip", nil); err != nil || string(b) != "not gzip at!" {
		t.Errorf("/badgzip: client got %q %v, want the upstream bytes", b, err)
	}
	fetch("GET", "/badbr", nil)
	if st, b, err := fetch("GET", "/http10", nil); err != nil || st != 200 || string(b) != "<html>old server</html>" {
		t.Errorf("/http10: %d %q %v", st, b, err)
	}
	follow := g.client()
	follow.CheckRedirect = nil
	if _, err := follow.Get(base + "/loop"); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("redirect loop: %v", err)
	}
	if _, b, err := fetch("GET", "/big", nil); err != nil || len(b) != 10<<20 {
		t.Errorf("/big: %d bytes, %v", len(b), err)
	}
	if _, b, err := fetch("POST", "/upload", bytes.NewReader(make([]byte, 2<<20))); err != nil || string(b) != fmt.Sprint(2<<20) {
		t.Errorf("/upload: %q %v", b, err)
	}
	if st, _, err := fetch("HEAD", "/head", nil); err != nil || st != 200 {
		t.Errorf("HEAD: %d %v", st, err)
	}
	// the HEAD answer keeps the site's Content-Length (the size a GET would get)
	if req, _ := http.NewRequest("HEAD", base+"/head", nil); req != nil {
		if resp, err := c.Do(req); err != nil || resp.ContentLength != 1234 {
			t.Errorf("HEAD Content-Length: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
	}
	req, _ := http.NewRequest("GET", "http://"+deadAddr+"/", nil)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Errorf("refused upstream: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	b, _, dir := g.build()
	for _, p := range recording.Audit(dir) {
		t.Errorf("audit: %+v", p)
	}
	for path, want := range map[string]string{
		"/reset":   "not-stored",
		"/short":   "not-stored",
		"/long":    "stored",
		"/badgzip": "not-stored",
		"/badbr":   "not-stored",
		"/http10":  "stored",
		"/loop":    "stored",
		"/big":     "not-stored",
		"/upload":  "not-stored",
		"/head":    "stored",
	} {
		l := g.logFor(base + path)
		if l.Event != want {
			t.Errorf("%s: log %+v, want %s", path, l, want)
		}
		e := entryByURL(b, base+path)
		if (e != nil) != (want == "stored") {
			t.Errorf("%s: entry %+v, want stored=%v", path, e, want == "stored")
		}
	}
	for path, note := range map[string]string{"/reset": "incomplete", "/short": "incomplete", "/badgzip": "cannot be decoded",
		"/badbr": "cannot be decoded", "/big": "larger than 1048576", "/upload": "request body larger than"} {
		if l := g.logFor(base + path); !strings.Contains(l.Note, note) {
			t.Errorf("%s: note %q, want %q", path, l.Note, note)
		}
	}
	if l := g.logFor(base + longURL); l.Event != "not-stored" || !strings.Contains(l.Note, "more than the limit of 65536") || entryByURL(b, base+longURL) != nil {
		t.Errorf("long URL: log event %s note %.200q", l.Event, l.Note)
	}
	if l := g.logFor("http://" + deadAddr + "/"); l.Event != "upstream-error" {
		t.Errorf("refused upstream log %+v", l)
	}
	loops := 0
	for _, e := range b.Entries {
		if e.URL == base+"/loop" {
			loops++
			if e.Status != 302 {
				t.Errorf("loop entry status %d", e.Status)
			}
		}
	}
	if loops != 10 { // net/http gives up after 10 requests
		t.Errorf("loop exchanges = %d, want 10", loops)
	}
	old := entryByURL(b, base+"/http10")
	r, err := b.Response(old)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(r.Body); r.Proto != "HTTP/1.0" || string(body) != "<html>old server</html>" {
		t.Errorf("http/1.0 stored as %s %q", r.Proto, body)
	}
	if e := entryByURL(b, base+"/head"); e.Method != "HEAD" || e.Size != 0 {
		t.Errorf("HEAD entry %+v", e)
	}
}

// TestShutdownWithStreamInFlight: a response that never ends does not keep Shutdown
// from returning; it is logged as not stored, and what finished is stored.
func TestShutdownWithStreamInFlight(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, req *http.Request) {
		if req.URL.Path == "/done" {
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\ndone")
			return
		}
		// goproxy forwards a plain-HTTP body through net/http's 4 KB buffer: start with more
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", 8192, bytes.Repeat([]byte("x"), 8192))
		for {
			if _, err := fmt.Fprint(c, "5\r\ntick\n\r\n"); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	g := newRig(t, Options{ShutdownWait: 100 * time.Millisecond})
	c := g.client()
	resp, err := c.Get("http://" + addr + "/done")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp, err = c.Get("http://" + addr + "/forever")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	b, _, _ := g.build() // Shutdown, then Build
	resp.Body.Close()
	if len(b.Entries) != 1 || b.Entries[0].URL != "http://"+addr+"/done" {
		t.Errorf("entries %+v", b.Entries)
	}
	if l := g.logFor("http://" + addr + "/forever"); l.Event != "not-stored" {
		t.Errorf("endless stream log %+v", l)
	}
	// a request after Shutdown finds no proxy
	if _, err := c.Get("http://" + addr + "/done"); err == nil {
		t.Error("proxy still answering after Shutdown")
	}
}
