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
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

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
// stalled: see retryStalled.)
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
	judge := func(t attemptTB, before, after, closedAt time.Time, closed bool, extra time.Duration) {
		switch {
		case !closed:
			t.Errorf("idle connection not closed")
		case closedAt.Sub(before) < idle:
			t.Errorf("closed %v after the last request was sent, IdleTimeout %v", closedAt.Sub(before), idle)
		case closedAt.Sub(after) > idle+extra+2*time.Second:
			t.Errorf("closed after %v idle, IdleTimeout %v", closedAt.Sub(after), idle)
		}
	}
	h1 := func(t attemptTB, c net.Conn, target func(i int) string, host string) {
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
	retryStalled(t, func(t attemptTB) {
		// the three at once, each on its own goroutine
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			t := t.sub("plain")
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h1(t, c, func(i int) string { return fmt.Sprintf("%s/plain/%d", plain.URL, i) }, plain.Listener.Addr().String())
		})
		wg.Go(func() {
			t := t.sub("h1 tunnel")
			h1(t, g.tunnel(t, "shop.test:443", "http/1.1"), func(i int) string { return fmt.Sprintf("/search?q=h1-%d", i) }, "shop.test")
		})
		wg.Go(func() {
			t := t.sub("h2 tunnel")
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

// The machine the tests run on is shared: another job can keep this process off the
// CPU for seconds, and a test that bounds timeouts from both sides then fails for no
// fault of the code. retryStalled runs such a test again when, and only when, it failed
// while the process was seen stalled; a failure on a machine that did not stall, or
// three stalled failures in a row, is reported. (The same helper as internal/mitm's
// stall_test.go: test files cannot share code across packages.)

// stallLimit is the stall after which a failed attempt is run again: well under the
// tests' 2 s slack, above the scheduling noise of a busy race-instrumented process.
const stallLimit = 500 * time.Millisecond

// stallMonitor measures the longest time a 10 ms ticker came late: how long the
// process was not scheduled.
type stallMonitor struct {
	stop, done chan struct{}
	max        atomic.Int64
}

func startStallMonitor() *stallMonitor {
	m := &stallMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		const tick = 10 * time.Millisecond
		last := time.Now()
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(tick):
			}
			now := time.Now()
			if late := now.Sub(last) - tick; late > time.Duration(m.max.Load()) {
				m.max.Store(int64(late))
			}
			last = now
		}
	}()
	return m
}

// end stops the monitor and returns the longest stall seen.
func (m *stallMonitor) end() time.Duration {
	close(m.stop)
	<-m.done
	return time.Duration(m.max.Load())
}

// attemptTB is the testing.TB of one attempt: it collects errors instead of failing
// the test (Fatal ends the calling goroutine, as in a test); everything else, Logf,
// Cleanup and TempDir included, goes to the test.
type attemptTB struct {
	testing.TB
	prefix string
	a      *attemptErrs
}

type attemptErrs struct {
	mu   sync.Mutex
	errs []string
}

func (t attemptTB) add(s string) {
	t.a.mu.Lock()
	t.a.errs = append(t.a.errs, t.prefix+s)
	t.a.mu.Unlock()
}

func (t attemptTB) Helper()                      {}
func (t attemptTB) Error(args ...any)            { t.add(fmt.Sprint(args...)) }
func (t attemptTB) Errorf(f string, args ...any) { t.add(fmt.Sprintf(f, args...)) }
func (t attemptTB) Fail()                        { t.add("failed") }
func (t attemptTB) FailNow()                     { t.add("failed"); runtime.Goexit() }
func (t attemptTB) Fatal(args ...any)            { t.add(fmt.Sprint(args...)); runtime.Goexit() }
func (t attemptTB) Fatalf(f string, args ...any) { t.add(fmt.Sprintf(f, args...)); runtime.Goexit() }
func (t attemptTB) Failed() bool {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	return len(t.a.errs) > 0
}

// sub is t with its errors prefixed by name (one of several scenarios of an attempt).
func (t attemptTB) sub(name string) attemptTB {
	return attemptTB{TB: t.TB, prefix: t.prefix + name + ": ", a: t.a}
}

// retryStalled runs attempt (on a goroutine of its own) up to three times, while it
// fails and the process stalled longer than stallLimit meanwhile; the errors of the last
// attempt are reported.
func retryStalled(t *testing.T, attempt func(t attemptTB)) {
	t.Helper()
	for i := 1; ; i++ {
		at := attemptTB{TB: t, a: &attemptErrs{}}
		m := startStallMonitor()
		done := make(chan struct{})
		go func() {
			defer close(done)
			attempt(at)
		}()
		<-done
		stall := m.end()
		if len(at.a.errs) == 0 {
			return
		}
		if stall < stallLimit || i == 3 {
			for _, e := range at.a.errs {
				t.Error(e)
			}
			if stall >= stallLimit {
				t.Logf("the process stalled up to %v in each of %d attempts", stall, i)
			}
			return
		}
		t.Logf("attempt %d failed while the process stalled for %v; again. Errors:\n%s", i, stall, strings.Join(at.a.errs, "\n"))
	}
}
