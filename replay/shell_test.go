package replay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/pab-dev/pab/internal/testtool"
)

// watchedConn reports when a read from the connection first fails: the server closed it.
type watchedConn struct {
	net.Conn
	once   sync.Once
	closed chan time.Time
}

func watch(c net.Conn) *watchedConn { return &watchedConn{Conn: c, closed: make(chan time.Time, 1)} }

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.closed <- time.Now() })
	}
	return n, err
}

// idleClose waits for c to be closed by the server, reading what arrives; it returns when
// that was, or false when it was not within d.
func idleClose(c net.Conn, d time.Duration) (time.Time, bool) {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return time.Now(), !isTimeout(err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rawGet sends one GET on c and reads its answer from br.
func rawGet(c net.Conn, br *bufio.Reader, target, host string) (int, []byte, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, body, err
}

// TestReplayIdleTimeout proves Options.IdleTimeout reaches the replay proxy's shell: a
// plain keep-alive connection, an HTTP/1.1 tunnel and an HTTP/2 tunnel that keep sending
// requests (every 100 ms for 2 s, longer than the 1.5 s timeout) stay open, and once idle
// are closed by the server after IdleTimeout (not before it, within it plus 2 s; HTTP/2 a
// second more). (Run again if it failed while the process stalled: see testtool.RetryStalled.)
func TestReplayIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle, every = 1500 * time.Millisecond, 100 * time.Millisecond
	b := writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges())
	tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) { o.IdleTimeout = idle })
	// judge checks when an idle connection closed: the server's idle clock started
	// between before and after (around the last request); extra is how much later it
	// may close (HTTP/2 sends GOAWAY at IdleTimeout and closes a second later)
	judge := func(t testtool.Attempt, before, after, closedAt time.Time, closed bool, extra time.Duration) {
		switch {
		case !closed:
			t.Errorf("idle connection not closed")
		case closedAt.Sub(before) < idle:
			t.Errorf("closed %v after the last request was sent, IdleTimeout %v", closedAt.Sub(before), idle)
		case closedAt.Sub(after) > idle+extra+2*time.Second:
			t.Errorf("closed after %v idle, IdleTimeout %v", closedAt.Sub(after), idle)
		}
	}
	h1 := func(t testtool.Attempt, c net.Conn, target string, want []byte) {
		br := bufio.NewReader(c)
		for i := range 20 {
			st, body, err := rawGet(c, br, target, "site.test")
			if err != nil || st != 200 || !bytes.Equal(body, want) {
				t.Fatalf("request %d on an active connection: %d %q %v", i, st, body, err)
			}
			time.Sleep(every)
		}
		before := time.Now()
		if st, _, err := rawGet(c, br, target, "site.test"); err != nil || st != 200 {
			t.Fatalf("last request: %d %v", st, err)
		}
		after := time.Now()
		at, closed := idleClose(c, idle+5*time.Second)
		judge(t, before, after, at, closed, 0)
	}
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		// the three at once, each on its own goroutine
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			t := t.Sub("plain")
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h1(t, c, "http://plain.test/", []byte("plain http home"))
		})
		wg.Go(func() {
			t := t.Sub("h1 tunnel")
			h1(t, dialTunnel(t, tp, "site.test:443", []string{"http/1.1"}), "/style.css", []byte("h1{color:red}"))
		})
		wg.Go(func() {
			t := t.Sub("h2 tunnel")
			var dials atomic.Int32
			var wc *watchedConn
			tr := &http2.Transport{DialTLSContext: func(ctx context.Context, _, addr string, _ *tls.Config) (net.Conn, error) {
				dials.Add(1)
				wc = watch(dialTunnel(t, tp, addr, []string{"h2"}))
				return wc, nil
			}}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			var before, last time.Time
			for i := range 21 {
				if i > 0 {
					time.Sleep(every)
				}
				before = time.Now()
				resp, err := cl.Get("https://site.test/style.css")
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = time.Now()
				if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != "h1{color:red}" {
					t.Fatalf("request %d: %s %d %q", i, resp.Proto, resp.StatusCode, body)
				}
			}
			if n := dials.Load(); n != 1 {
				t.Fatalf("%d tunnels for 21 requests: an active HTTP/2 connection was closed", n)
			}
			select {
			case at := <-wc.closed:
				judge(t, before, last, at, true, time.Second)
			case <-time.After(idle + 6*time.Second):
				t.Errorf("idle HTTP/2 tunnel not closed")
			}
		})
	})
}

// largeExchanges are siteExchanges plus an 8 MiB payload over https and http.
func largeExchanges(size int) []ex {
	big := bigPayload(size)
	return append(siteExchanges(),
		ex{method: "GET", url: "https://site.test/large.bin", status: 200, resType: "other",
			header: []string{"Content-Type: application/octet-stream"}, body: big},
		ex{method: "GET", url: "http://plain.test/large.bin", status: 200, resType: "other",
			header: []string{"Content-Type: application/octet-stream"}, body: big})
}

// smallWindowTransport is a client through tp with a 4 KiB socket receive buffer and
// (over HTTP/2) a 64 KiB stream window, so that a server writing a large answer the
// client does not read blocks soon.
func smallWindowTransport(tp *testProxy, h2 bool) *http.Transport {
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	return &http.Transport{
		Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: tp.addr}),
		DialContext:        d.DialContext,
		TLSClientConfig:    &tls.Config{RootCAs: tp.ca.CertPool()},
		ForceAttemptHTTP2:  h2,
		DisableCompression: true,
		HTTP2:              &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 1 << 20},
	}
}

// TestReplayShutdownDrains proves replay's Shutdown is graceful: 8 MiB answers in flight
// over plain HTTP, an HTTP/1.1 tunnel and an HTTP/2 tunnel, which the clients have
// started to read and then stopped, are still sent whole once the clients read on;
// Shutdown returns nil only after them; a new connection is refused meanwhile; and the
// log has a line for each of them, without a "cut short" note.
func TestReplayShutdownDrains(t *testing.T) {
	t.Parallel()
	const size = 8 << 20
	b := writeTestBundle(t, t.TempDir(), siteManifest(), largeExchanges(size))
	tp := startProxyBundle(t, b, defaultTestRules)
	urls := []string{"http://plain.test/large.bin", "https://site.test/large.bin", "https://site.test/large.bin"}
	protos := []string{"HTTP/1.1", "HTTP/1.1", "HTTP/2.0"}
	var bodies []io.ReadCloser
	var heads [][]byte
	for i, u := range urls {
		tr := smallWindowTransport(tp, i == 2)
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != protos[i] {
			t.Fatalf("%s: %s %d", u, resp.Proto, resp.StatusCode)
		}
		head := make([]byte, 64<<10)
		if _, err := io.ReadFull(resp.Body, head); err != nil {
			t.Fatal(err)
		}
		bodies, heads = append(bodies, resp.Body), append(heads, head)
	}
	// (answers are counted and logged before they are written, so the counts cannot tell
	// whether they are still in flight: Shutdown not returning below does)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- tp.s.Shutdown(ctx)
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with 3 answers in flight", err)
	default:
	}
	if c, err := net.DialTimeout("tcp", tp.addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted while shutting down")
	}
	want := bigPayload(size)
	for i, body := range bodies {
		rest, err := io.ReadAll(body)
		if got := append(heads[i], rest...); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s over %s: %d of %d bytes, %v", urls[i], protos[i], len(got), size, err)
		}
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return after the answers were sent")
	}
	lines := tp.logLines(t)
	if len(lines) != len(urls) {
		t.Fatalf("%d log lines, want %d: %+v", len(lines), len(urls), lines)
	}
	for _, l := range lines {
		if l.Status != 200 || l.Source != SourceExact || l.Note != "" {
			t.Errorf("log line of an answer drained by Shutdown: %+v", l)
		}
	}
}

// response is one answer, for comparing HTTP/2 with HTTP/1.1.
type response struct {
	status int
	header http.Header
	body   []byte
}

// TestReplayHTTP2Streams proves a stock Go client (http.Transport, ForceAttemptHTTP2,
// through the CONNECT proxy) gets HTTP/2 from replay, that 16 requests run as concurrent
// streams of one connection (all 16 answers' headers arrive before any body is read),
// and that every answer is byte-identical to the HTTP/1.1 one: status, header fields,
// body.
func TestReplayHTTP2Streams(t *testing.T) {
	t.Parallel()
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	paths := []string{"/", "/style.css", "/img.png", "/search?q=shoes&page=1", "/search?q=boots&page=2&sort=new",
		"/cart", "/dup", "/empty", "/notmod", "/nope.png", "/unknown", "/api/unknown", "/gone", "/captcha/check",
		"/page?utm_source=x&id=7", "/app.js"}
	get := func(c *http.Client, p string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", "https://site.test"+p, nil)
		req.Header.Set("Sec-Fetch-Dest", "document")
		return c.Do(req)
	}
	// over HTTP/1.1 first
	h1 := map[string]response{}
	for _, p := range paths {
		resp, err := get(tp.client, p)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.ProtoMajor != 1 {
			t.Fatalf("%s over HTTP/1.1: %s %v", p, resp.Proto, err)
		}
		h1[p] = response{resp.StatusCode, resp.Header, body}
	}
	tp.tr.CloseIdleConnections()
	before := tp.s.Accepted()

	tr := &http.Transport{
		Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: tp.addr}),
		TLSClientConfig:    &tls.Config{RootCAs: tp.ca.CertPool()},
		ForceAttemptHTTP2:  true,
		MaxConnsPerHost:    1,
		DisableCompression: true,
		HTTP2:              &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10},
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var wg sync.WaitGroup
	heads := make(chan struct{}, len(paths))
	allHeads := make(chan struct{})
	var mu sync.Mutex
	h2 := map[string]response{}
	errs := make(chan error, len(paths))
	for _, p := range paths {
		wg.Go(func() {
			resp, err := get(c, p)
			if err != nil {
				errs <- fmt.Errorf("%s: %v", p, err)
				heads <- struct{}{}
				return
			}
			defer resp.Body.Close()
			heads <- struct{}{}
			<-allHeads // no body is read before every answer has begun
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.Proto != "HTTP/2.0" {
				errs <- fmt.Errorf("%s: %s %v", p, resp.Proto, err)
				return
			}
			mu.Lock()
			h2[p] = response{resp.StatusCode, resp.Header, body}
			mu.Unlock()
		})
	}
	timeout := time.After(20 * time.Second)
	for range paths {
		select {
		case <-heads:
		case <-timeout:
			close(allHeads)
			t.Fatal("the 16 answers did not all begin before any was read: the streams are not concurrent")
		}
	}
	close(allHeads)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := tp.s.Accepted() - before; n != 1 {
		t.Errorf("%d connections for 16 HTTP/2 requests, want 1", n)
	}
	for _, p := range paths {
		a, b := h1[p], h2[p]
		if a.status != b.status || !bytes.Equal(a.body, b.body) || !reflect.DeepEqual(a.header, b.header) {
			t.Errorf("%s: HTTP/1.1 %d %v %d bytes, HTTP/2 %d %v %d bytes", p, a.status, a.header, len(a.body), b.status, b.header, len(b.body))
		}
	}
	if len(h1) != 16 || h1["/img.png"].status != 200 || len(h1["/img.png"].body) != 300<<10 {
		t.Errorf("HTTP/1.1 answers: %d, img %d %d bytes", len(h1), h1["/img.png"].status, len(h1["/img.png"].body))
	}
	lines := tp.logLines(t)
	if len(lines) != 32 {
		t.Errorf("%d log lines, want 32", len(lines))
	}
}
