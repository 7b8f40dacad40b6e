package mitm

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// refusals collects what a shell reports to Config.OnRefuse.
type refusals struct {
	mu sync.Mutex
	rs []Refusal
}

func (r *refusals) add(x Refusal) { r.mu.Lock(); r.rs = append(r.rs, x); r.mu.Unlock() }

func (r *refusals) get() []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Refusal(nil), r.rs...)
}

// sendRaw writes raw on c while reading the answer (a server that refuses may stop reading
// before raw is sent) and returns the answer's status line.
func sendRaw(t *testing.T, c net.Conn, br *bufio.Reader, raw string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go io.WriteString(c, raw)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestRefusalsReported: every request the shell answers itself is reported once to
// OnRefuse with its method, its target made absolute (cut when long), the status and a
// note: a POST whose 9 MiB URL is over the header bound (431) on the listening socket, and
// inside an HTTP/1.1 tunnel a request without Host (400) after a good request on the same
// connection, which is not reported, and a bad protocol version (505); a bad CONNECT
// target (400); a field line over MaxFieldBytes over HTTP/2 (431). Requests the handler
// answers are not reported, and requests inside HTTP/1.1 tunnels still carry their TLS
// state.
func TestRefusalsReported(t *testing.T) {
	got := &refusals{}
	g := startShell(t, func(c *Config) { c.OnRefuse = got.add; c.Limits.MaxFieldBytes = 64 << 10 })
	g.h.open()

	// 1. plain-HTTP proxy request, URL of 9 MiB
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := "http://site.test/search?q=" + strings.Repeat("a", 9<<20)
	if st := sendRaw(t, c, bufio.NewReader(c), "POST "+long+" HTTP/1.1\r\nHost: site.test\r\nContent-Length: 0\r\n\r\n"); !strings.HasPrefix(st, "HTTP/1.1 431") {
		t.Errorf("9 MiB URL answered %q, want 431", st)
	}
	if !waitFor(5*time.Second, func() bool { return len(got.get()) == 1 }) {
		t.Fatalf("refusals %+v, want one", got.get())
	}
	r := got.get()[0]
	if r.Method != "POST" || r.Status != 431 || !r.URLCut || len(r.URL) > MaxRefusalHead || r.URLRead < 1<<20 || r.URLRead > 9<<20 || !strings.HasPrefix(r.URL, "http://site.test/search?q=aaaa") ||
		!strings.Contains(r.Note, "request header over") {
		t.Errorf("refusal %+v", Refusal{Method: r.Method, URL: r.URL[:min(len(r.URL), 40)], URLCut: r.URLCut, Status: r.Status, Note: r.Note})
	}

	// 2. inside an HTTP/1.1 tunnel: a good request, then one without Host
	tc := g.tunnel(t, "shop.test:443", "http/1.1")
	br := bufio.NewReader(tc)
	resp, body, err := h1Exchange(t, tc, br, "GET /ok HTTP/1.1\r\nHost: shop.test\r\n\r\n")
	if err != nil || resp.StatusCode != 200 || body != "ok GET https://shop.test/ok" {
		t.Fatalf("good request in the tunnel: %v %q %v", resp, body, err)
	}
	if st := sendRaw(t, tc, br, "PUT /cart?x=1 HTTP/1.1\r\n\r\n"); !strings.HasPrefix(st, "HTTP/1.1 400") {
		t.Errorf("no Host answered %q, want 400", st)
	}
	// 3. a bad protocol version in another tunnel
	tc2 := g.tunnel(t, "shop.test:8443", "http/1.1")
	if st := sendRaw(t, tc2, bufio.NewReader(tc2), "GET /v HTTP/9.1\r\nHost: shop.test\r\n\r\n"); !strings.HasPrefix(st, "HTTP/1.1 505") {
		t.Errorf("HTTP/9.1 answered %q, want 505", st)
	}
	// 4. a bad CONNECT target
	c3, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if st := sendRaw(t, c3, bufio.NewReader(c3), "CONNECT shop.test:99999 HTTP/1.1\r\nHost: shop.test\r\n\r\n"); !strings.HasPrefix(st, "HTTP/1.1 400") {
		t.Errorf("bad CONNECT answered %q, want 400", st)
	}
	// 5. HTTP/2: a field line over MaxFieldBytes
	cl, tr := g.client(true)
	req, _ := http.NewRequest("DELETE", "https://shop.test/item/7", nil)
	req.Header.Set("X-Big", strings.Repeat("b", 70<<10))
	resp, err = cl.Do(req)
	if err != nil || resp.StatusCode != 431 || resp.Proto != "HTTP/2.0" {
		t.Fatalf("big field over h2: %v %v", resp, err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()

	want := []struct {
		method, url string
		status      int
	}{
		{"POST", "http://site.test/search?q=aaaa", 431},
		{"PUT", "https://shop.test/cart?x=1", 400},
		{"GET", "https://shop.test:8443/v", 505},
		{"CONNECT", "shop.test:99999", 400},
		{"DELETE", "https://shop.test/item/7", 431},
	}
	if !waitFor(5*time.Second, func() bool { return len(got.get()) >= len(want) }) {
		t.Fatalf("refusals %d, want %d", len(got.get()), len(want))
	}
	rs := got.get()
	if len(rs) != len(want) {
		t.Errorf("%d refusals, want %d", len(rs), len(want))
	}
	for i, r := range rs {
		if i < len(want) && (r.Method != want[i].method || !strings.HasPrefix(r.URL, want[i].url) || r.Status != want[i].status) {
			t.Errorf("refusal %d: %s %.40s %d (note %q), want %v", i, r.Method, r.URL, r.Status, r.Note, want[i])
		}
		if r.Note == "" || r.Time.IsZero() {
			t.Errorf("refusal %d without note or time: %+v", i, r)
		}
	}
	if reqs := g.h.requests(); len(reqs) != 1 {
		t.Errorf("the handler saw %v, want only the good request", reqs)
	}
	if n := g.h.noTLS.Load(); n != 0 {
		t.Errorf("%d requests inside tunnels had no TLS state", n)
	}
}

// TestHandlerErrorsNotRefusals: a handler's own error answers (a 404 for a request it has
// no answer to), on one keep-alive connection, are not reported as refusals: the watch is
// off from the handler's start to the answer's end.
func TestHandlerErrorsNotRefusals(t *testing.T) {
	got := &refusals{}
	g := startShell(t, func(c *Config) {
		c.OnRefuse = got.add
		c.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "none", http.StatusNotFound) })
	})
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 3 {
		line := sendRaw(t, c, br, "GET http://site.test/missing HTTP/1.1\r\nHost: site.test\r\n\r\n")
		if line != "HTTP/1.1 404 Not Found" {
			t.Fatalf("request %d: %q", i, line)
		}
		resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(line+"\r\n"), br)), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if rs := got.get(); len(rs) != 0 {
		t.Errorf("a handler's 404s reported as refusals: %+v", rs)
	}
}

// TestRefusalHeadRequestLine: a watched connection keeps the request line of the request
// read since its last write, to its LF, however the reads split it, and not the header
// fields after it (a browser's kilobyte of them would be copied on every request); a write
// starts the next request's line; a line with no LF is kept up to MaxRefusalHead.
func TestRefusalHeadRequestLine(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	c := &watchConn{Conn: server}
	defer c.Close()
	read := func(chunks ...string) string {
		t.Helper()
		go func() {
			for _, ch := range chunks {
				client.Write([]byte(ch))
			}
		}()
		buf := make([]byte, 64<<10)
		want := len(strings.Join(chunks, ""))
		for got := 0; got < want; {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.freshLocked()
		return string(c.head)
	}
	fields := "Host: shop.test\r\nUser-Agent: " + strings.Repeat("u", 2000) + "\r\n\r\n"
	if h := read("GET /a?x=1 HTTP/1.1\r\n" + fields); h != "GET /a?x=1 HTTP/1.1\r\n" {
		t.Errorf("one read: kept %q, want the request line", h[:min(len(h), 80)])
	}
	go io.Copy(io.Discard, client)
	c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	if h := read("POST /b", "?y=2 HTTP/1.1", "\r\nHost: shop.test\r\n", fields); h != "POST /b?y=2 HTTP/1.1\r\n" {
		t.Errorf("a line in three reads after a write: kept %q", h[:min(len(h), 80)])
	}
	c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	long := "GET /" + strings.Repeat("l", 2*MaxRefusalHead)
	if h := read(long); h != long[:MaxRefusalHead] {
		t.Errorf("a line with no LF: kept %d bytes, want the first %d", len(h), MaxRefusalHead)
	}
}
