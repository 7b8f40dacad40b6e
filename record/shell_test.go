package record

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
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/tlsca"
)

// tunnel opens a CONNECT tunnel through the recorder to hostport and does the TLS
// handshake offering alpn; it is closed when the test ends.
func (g *rig) tunnel(t testing.TB, hostport string, alpn ...string) *tls.Conn {
	t.Helper()
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", hostport, resp, err)
	}
	if br.Buffered() > 0 {
		t.Fatalf("bytes after the CONNECT answer")
	}
	host, _, _ := net.SplitHostPort(hostport)
	tc := tls.Client(c, &tls.Config{RootCAs: g.ca.CertPool(), ServerName: host, NextProtos: alpn})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to %s through the recorder: %v", hostport, err)
	}
	tc.SetDeadline(time.Time{})
	if len(alpn) > 0 && tc.ConnectionState().NegotiatedProtocol != alpn[0] {
		t.Fatalf("ALPN %q, want %q", tc.ConnectionState().NegotiatedProtocol, alpn[0])
	}
	t.Cleanup(func() { tc.Close() })
	return tc
}

// h2Client is an HTTP/2 client whose every connection is a new tunnel through the
// recorder; dials counts them, and closed receives when a tunnel's read first fails.
type h2Client struct {
	*http.Client
	tr     *http2.Transport
	dials  atomic.Int32
	closed chan time.Time
}

func (g *rig) h2Client(t testing.TB) *h2Client {
	h := &h2Client{closed: make(chan time.Time, 16)}
	h.tr = &http2.Transport{DialTLSContext: func(_ context.Context, _, addr string, _ *tls.Config) (net.Conn, error) {
		h.dials.Add(1)
		return &closeWatch{Conn: g.tunnel(t, addr, "h2"), closed: h.closed}, nil
	}}
	h.Client = &http.Client{Transport: h.tr, Timeout: 20 * time.Second}
	t.Cleanup(h.tr.CloseIdleConnections)
	return h
}

// closeWatch sends the time to closed when a read first fails: the server closed it.
type closeWatch struct {
	net.Conn
	once   sync.Once
	closed chan time.Time
}

func (c *closeWatch) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.closed <- time.Now() })
	}
	return n, err
}

// rawGet sends one GET on c and reads the answer from br.
func rawGet(c net.Conn, br *bufio.Reader, target, host string) (int, string, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), err
}

// serverClosed waits up to d for the server to close c and returns when it did.
func serverClosed(c net.Conn, d time.Duration) (time.Time, bool) {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return time.Now(), !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// TestRecordIdleTimeout proves Options.IdleTimeout reaches the recorder's shell: a plain
// keep-alive connection, an HTTP/1.1 tunnel and an HTTP/2 tunnel that keep sending
// requests (every 100 ms for 2 s, longer than the 1.5 s timeout) stay open and are
// recorded, and once idle are closed by the server after IdleTimeout (not before it,
// within it plus 2 s; HTTP/2 a second more). (Run again if it failed while the process
// stalled: see testtool.RetryStalled.)
func TestRecordIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle, every = 1500 * time.Millisecond, 100 * time.Millisecond
	srv, siteCA := shopSite(t)
	plain := pageServer(t, 100)
	g := newRig(t, Options{IdleTimeout: idle, RootCAs: siteCA.CertPool(),
		Resolve: map[string]string{"shop.test:443": srv.Listener.Addr().String()}})
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
	h1 := func(t testtool.Attempt, c net.Conn, target func(i int) string, host string) {
		br := bufio.NewReader(c)
		var before, after time.Time
		for i := range 21 {
			if i > 0 {
				time.Sleep(every)
			}
			before = time.Now()
			if st, body, err := rawGet(c, br, target(i), host); err != nil || st != 200 || body == "" {
				t.Fatalf("request %d on an active connection: %d %q %v", i, st, body, err)
			}
			after = time.Now()
		}
		at, closed := serverClosed(c, idle+5*time.Second)
		judge(t, before, after, at, closed, 0)
	}
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		// the three at once, each on its own goroutine
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			t := t.Sub("plain")
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h1(t, c, func(i int) string { return fmt.Sprintf("%s/plain/%d", plain.URL, i) }, plain.Listener.Addr().String())
		})
		wg.Go(func() {
			t := t.Sub("h1 tunnel")
			h1(t, g.tunnel(t, "shop.test:443", "http/1.1"), func(i int) string { return fmt.Sprintf("/search?q=h1-%d", i) }, "shop.test")
		})
		wg.Go(func() {
			t := t.Sub("h2 tunnel")
			h := g.h2Client(t)
			var before, last time.Time
			for i := range 21 {
				if i > 0 {
					time.Sleep(every)
				}
				before = time.Now()
				st, body, err := getBody(h.Client, fmt.Sprintf("https://shop.test/search?q=h2-%d", i))
				if err != nil || st != 200 || !strings.Contains(body, fmt.Sprintf("results for h2-%d", i)) {
					t.Fatalf("request %d: %d %q %v", i, st, body, err)
				}
				last = time.Now()
			}
			if n := h.dials.Load(); n != 1 {
				t.Fatalf("%d tunnels for 21 requests: an active HTTP/2 connection was closed", n)
			}
			select {
			case at := <-h.closed:
				judge(t, before, last, at, true, time.Second)
			case <-time.After(idle + 6*time.Second):
				t.Errorf("idle HTTP/2 tunnel not closed")
			}
		})
	})
	if st := g.rec.Stats(); st.Stored < 63 {
		t.Errorf("stats %+v: the 63 requests were not all recorded", st)
	}
}

// slowSite serves plain HTTP and TLS (for slow.test, with its own CA): every answer is
// size bytes, half sent at once, the rest once open is called. arrived counts the
// requests that have started.
func slowSite(t *testing.T, size int) (plain *httptest.Server, secure *httptest.Server, siteCA *tlsca.CA, arrived *atomic.Int32, open func()) {
	t.Helper()
	arrived = &atomic.Int32{}
	release := make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(release) }) }
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		body := bytes.Repeat([]byte(r.URL.Path+"\n"), size/(len(r.URL.Path)+1)+1)[:size]
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.Write(body[:size/2])
		w.(http.Flusher).Flush()
		<-release
		w.Write(body[size/2:])
	})
	plain = httptest.NewServer(slow)
	t.Cleanup(plain.Close)
	siteCA, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "site-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := siteCA.LeafFor("slow.test")
	if err != nil {
		t.Fatal(err)
	}
	secure = httptest.NewUnstartedServer(slow)
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	t.Cleanup(open) // runs before the servers close
	return plain, secure, siteCA, arrived, open
}

// TestRecordShutdownDrainsAllProtocols proves the recorder's Shutdown drains requests in
// flight over every client protocol: slow exchanges over plain HTTP, HTTP/1.1 tunnels and
// HTTP/2 tunnels (upstream has sent half of each body) are answered whole and stored;
// Shutdown waits for them; a new connection is refused meanwhile (not merely unserved).
func TestRecordShutdownDrainsAllProtocols(t *testing.T) {
	t.Parallel()
	const each, size = 3, 64 << 10
	plain, secure, siteCA, arrived, open := slowSite(t, size)
	g := newRig(t, Options{Resolve: map[string]string{"slow.test:443": secure.Listener.Addr().String()}, RootCAs: siteCA.CertPool()})
	h1 := g.client()
	h2 := g.h2Client(t)
	var urls []string
	var clients []*http.Client
	for i := range each {
		urls = append(urls, fmt.Sprintf("%s/plain/%d", plain.URL, i), fmt.Sprintf("https://slow.test/h1/%d", i),
			fmt.Sprintf("https://slow.test/h2/%d", i))
		clients = append(clients, h1, h1, h2.Client)
	}
	type result struct {
		proto  string
		status int
		n      int
		err    error
	}
	results := make([]result, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			resp, err := clients[i].Get(u)
			if err != nil {
				results[i].err = err
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results[i] = result{resp.Proto, resp.StatusCode, len(body), err}
		})
	}
	if !waitUntil(20*time.Second, func() bool { return arrived.Load() == int32(len(urls)) }) {
		open()
		t.Fatalf("only %d of %d requests reached upstream", arrived.Load(), len(urls))
	}
	shut := make(chan error, 1)
	go func() { shut <- g.rec.Shutdown() }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-shut:
		open()
		t.Fatalf("Shutdown returned (%v) with %d exchanges in flight", err, len(urls))
	default:
	}
	if c, err := net.DialTimeout("tcp", g.addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted while stopping")
	}
	open()
	wg.Wait()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for i, r := range results {
		wantProto := "HTTP/1.1"
		if i%3 == 2 {
			wantProto = "HTTP/2.0"
		}
		if r.err != nil || r.status != 200 || r.n != size || r.proto != wantProto {
			t.Errorf("%s: %s %d, %d of %d bytes, %v", urls[i], r.proto, r.status, r.n, size, r.err)
		}
	}
	b, _, _ := g.build()
	for _, u := range urls {
		if e := entryByURL(b, u); e == nil || e.Size != size {
			t.Errorf("%s: entry %+v", u, e)
		}
	}
	if st := g.rec.Stats(); st.Stored != int64(len(urls)) || st.NotStored != 0 {
		t.Errorf("stats %+v", st)
	}
}

// waitUntil polls cond every 5 ms for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
