package mitm

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
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/pab-dev/pab/tlsca"
)

// seen is one request as the test Handler saw it.
type seen struct{ method, url string }

func (s seen) String() string { return s.method + " " + s.url }

// testHandler records every request it is given and answers "ok METHOD URL". Paths:
//
//	/slow?n=N   N bytes, half at once, the rest once release is closed
//	/block      blocks (ignoring cancellation) until release is closed
//	/big?n=N    N bytes (at most 4 MiB) at once, from one payload shared by every request
type testHandler struct {
	mu      sync.Mutex
	reqs    []seen
	release chan struct{}
	once    sync.Once
	blocked atomic.Int32 // /block handlers running
	maxBlk  atomic.Int32 // most /block handlers running at once
	arrived atomic.Int32 // /slow and /block requests that started
	noTLS   atomic.Int32 // requests inside a tunnel (https) without r.TLS
}

func (h *testHandler) open() { h.once.Do(func() { close(h.release) }) }

func (h *testHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.URL.Scheme == "https" && r.TLS == nil {
		h.noTLS.Add(1)
	}
	h.mu.Lock()
	h.reqs = append(h.reqs, seen{method: r.Method, url: r.URL.String()})
	h.mu.Unlock()
	size, _ := strconv.Atoi(r.URL.Query().Get("n"))
	switch r.URL.Path {
	case "/slow":
		h.arrived.Add(1)
		data := payload(size)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(data[:size/2])
		http.NewResponseController(w).Flush()
		<-h.release
		w.Write(data[size/2:])
	case "/big":
		h.arrived.Add(1)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(sharedPayload()[:size])
	case "/block":
		h.arrived.Add(1)
		n := h.blocked.Add(1)
		defer h.blocked.Add(-1)
		for {
			m := h.maxBlk.Load()
			if n <= m || h.maxBlk.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-h.release:
		case <-time.After(10 * time.Second):
		}
	default:
		// as a proxy Handler does with the fields it copies (record does)
		w.Header().Set("Connection", "keep-alive")
		RemoveHopByHop(w.Header())
		msg := "ok " + r.Method + " " + r.URL.String()
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		io.WriteString(w, msg)
	}
}

// requests is what the handler saw so far, as "METHOD URL" strings, apart from
// checkAlive's requests (host alive.test), which checkAlive checks itself.
func (h *testHandler) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []string{}
	for _, r := range h.reqs {
		if u, err := url.Parse(r.url); err == nil && u.Host == "alive.test" {
			continue
		}
		out = append(out, r.String())
	}
	return out
}

// sharedPayload is 4 MiB of payload, made once.
var sharedPayload = sync.OnceValue(func() []byte { return payload(4 << 20) })

// payload is n deterministic bytes.
func payload(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (the shell's ErrorLog).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is a running shell on a loopback port, with its CA, handler and error log.
type rig struct {
	s      *Server
	addr   string
	ca     *tlsca.CA
	h      *testHandler
	alive  atomic.Int64 // checkAlive calls (each opens two tunnels)
	errlog *syncBuffer
	done   chan error
}

// startShell serves a shell with a testHandler on 127.0.0.1:0; tweak adjusts the Config.
// The shell is closed when the test ends, and its error log is checked for panics.
func startShell(t testing.TB, tweak ...func(*Config)) *rig {
	t.Helper()
	return startShellOn(t, nil, tweak...)
}

// startShellOn is startShell with the listener wrapped by wrap (when not nil).
func startShellOn(t testing.TB, wrap func(net.Listener) net.Listener, tweak ...func(*Config)) *rig {
	t.Helper()
	ca, err := tlsca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{ca: ca, h: &testHandler{release: make(chan struct{})}, errlog: &syncBuffer{}, done: make(chan error, 1)}
	cfg := Config{Handler: g.h, CA: ca, HTTP2: true, ErrorLog: g.errlog}
	for _, f := range tweak {
		f(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.s, g.addr = s, ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	go func() { g.done <- s.Serve(ln) }()
	t.Cleanup(func() {
		g.h.open()
		s.Close()
		if err := <-g.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		g.checkNoPanic(t)
	})
	return g
}

// checkNoPanic fails t when the shell's log shows a recovered panic.
func (g *rig) checkNoPanic(t testing.TB) {
	t.Helper()
	if l := g.errlog.String(); strings.Contains(l, "panic") {
		t.Errorf("a goroutine panicked:\n%s", l)
	}
}

// client is an HTTP client through the shell that trusts its CA; h2 lets it speak HTTP/2
// inside tunnels.
func (g *rig) client(h2 bool) (*http.Client, *http.Transport) {
	tr := &http.Transport{
		Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: g.addr}),
		TLSClientConfig:    &tls.Config{RootCAs: g.ca.CertPool()},
		ForceAttemptHTTP2:  h2,
		DisableCompression: true,
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, tr
}

// checkAlive checks that the shell still answers a plain-HTTP proxy request, an HTTPS
// one over HTTP/1.1 and one over HTTP/2, each on a new connection, and that no goroutine
// panicked.
func (g *rig) checkAlive(t testing.TB) {
	t.Helper()
	g.alive.Add(1)
	for _, c := range []struct {
		url   string
		h2    bool
		proto string
	}{
		{"http://alive.test/plain", false, "HTTP/1.1"},
		{"https://alive.test/h1", false, "HTTP/1.1"},
		{"https://alive.test/h2", true, "HTTP/2.0"},
	} {
		cl, tr := g.client(c.h2)
		resp, err := cl.Get(c.url)
		if err != nil {
			t.Fatalf("proxy no longer answers %s: %v", c.url, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if err != nil || resp.StatusCode != 200 || string(body) != "ok GET "+c.url || resp.Proto != c.proto {
			t.Fatalf("%s after bad input: %s %d %q %v", c.url, resp.Proto, resp.StatusCode, body, err)
		}
	}
	g.checkNoPanic(t)
}

// connect opens a connection to the shell and sends CONNECT hostport; it returns the
// connection and a reader positioned after the 200 answer.
func (g *rig) connect(t testing.TB, hostport string) (net.Conn, *bufio.Reader) {
	t.Helper()
	return g.connectWith(t, &net.Dialer{}, hostport)
}

// connectWith is connect dialing with d.
func (g *rig) connectWith(t testing.TB, d *net.Dialer, hostport string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := d.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", hostport, resp, err)
	}
	return c, br
}

// tunnel opens a CONNECT tunnel to hostport and does the TLS handshake offering alpn.
func (g *rig) tunnel(t testing.TB, hostport string, alpn ...string) *tls.Conn {
	t.Helper()
	return g.tunnelWith(t, &net.Dialer{}, hostport, alpn...)
}

// tunnelWith is tunnel dialing with d.
func (g *rig) tunnelWith(t testing.TB, d *net.Dialer, hostport string, alpn ...string) *tls.Conn {
	t.Helper()
	c, br := g.connectWith(t, d, hostport)
	host, _, _ := net.SplitHostPort(hostport)
	tc := tls.Client(&readerConn{Conn: c, r: br}, &tls.Config{RootCAs: g.ca.CertPool(), ServerName: host, NextProtos: alpn})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the tunnel to %s: %v", hostport, err)
	}
	tc.SetDeadline(time.Time{})
	if len(alpn) > 0 && tc.ConnectionState().NegotiatedProtocol != alpn[0] {
		t.Fatalf("ALPN %q, want %q", tc.ConnectionState().NegotiatedProtocol, alpn[0])
	}
	// connectWith's cleanup closes the socket: tc.Close could wait 5 s to send its
	// close_notify to a server that no longer reads
	return tc
}

// readerConn reads through r (which may hold bytes already read from Conn).
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// closedWithin reports whether the peer closes c (EOF or reset) within d, reading and
// discarding what arrives meanwhile; it returns how long that took.
func closedWithin(c net.Conn, d time.Duration) (bool, time.Duration) {
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 32<<10)
	for {
		_, err := c.Read(buf)
		if err != nil {
			return !errors.Is(err, os.ErrDeadlineExceeded), time.Since(start)
		}
	}
}

// h1Exchange writes raw to c and reads one HTTP/1.1 response from br.
func h1Exchange(t testing.TB, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, raw); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body), err
}

// h2Conn is a raw HTTP/2 client connection: the preface and an empty SETTINGS are sent.
// fr reads, and writes on the test's goroutine; readUntil answers the server's SETTINGS
// and PINGs with ack, a second framer. Each frame is one Write to lw, so the frames of
// the two never interleave.
type h2Conn struct {
	c   net.Conn
	fr  *http2.Framer
	ack *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

// lockedWriter serializes Writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newH2Conn(t testing.TB, c net.Conn) *h2Conn {
	t.Helper()
	lw := &lockedWriter{w: c}
	h := &h2Conn{c: c, fr: http2.NewFramer(lw, c), ack: http2.NewFramer(lw, nil)}
	h.fr.AllowIllegalWrites = true // the tests send frames a client must not
	h.enc = hpack.NewEncoder(&h.buf)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = 1 << 20
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(lw, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	return h
}

// headerBlock encodes a GET of path on host with extra fields.
func (h *h2Conn) headerBlock(host, path string, extra ...hpack.HeaderField) []byte {
	h.buf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: host}, {Name: ":path", Value: path},
	}, extra...) {
		h.enc.WriteField(f)
	}
	return bytes.Clone(h.buf.Bytes())
}

// get sends a GET of path on stream id (END_STREAM, END_HEADERS).
func (h *h2Conn) get(t testing.TB, id uint32, host, path string) {
	t.Helper()
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.headerBlock(host, path),
		EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// h2Result is what a raw HTTP/2 connection received.
type h2Result struct {
	status  map[uint32]string // :status of each stream answered
	body    map[uint32]string
	rst     map[uint32]http2.ErrCode
	goAway  *http2.GoAwayFrame
	goAwayC http2.ErrCode
	closed  bool // the connection ended (EOF or reset)
}

// readUntil reads frames until stop says so, the connection ends, or d passes. It acks
// the server's SETTINGS and PINGs.
func (h *h2Conn) readUntil(d time.Duration, stop func(*h2Result) bool) *h2Result {
	res := &h2Result{status: map[uint32]string{}, body: map[uint32]string{}, rst: map[uint32]http2.ErrCode{}}
	h.c.SetReadDeadline(time.Now().Add(d))
	defer h.c.SetReadDeadline(time.Time{})
	for !stop(res) {
		f, err := h.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			res.closed = !(errors.As(err, &ne) && ne.Timeout())
			return res
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.ack.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				h.ack.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			res.status[f.StreamID] = f.PseudoValue("status")
		case *http2.DataFrame:
			res.body[f.StreamID] += string(f.Data())
			if n := uint32(len(f.Data())); n > 0 {
				h.ack.WriteWindowUpdate(0, n)
				if !f.StreamEnded() {
					h.ack.WriteWindowUpdate(f.StreamID, n)
				}
			}
		case *http2.RSTStreamFrame:
			res.rst[f.StreamID] = f.ErrCode
		case *http2.GoAwayFrame:
			res.goAway, res.goAwayC = f, f.ErrCode
		}
	}
	return res
}

// answered is a readUntil stop: stream id answered, or the connection gone away.
func answered(id uint32) func(*h2Result) bool {
	return func(r *h2Result) bool { _, ok := r.status[id]; return ok || r.goAway != nil }
}

// waitFor polls cond every 5 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// shutdownAsync calls Shutdown in a goroutine with a 20 s bound.
func shutdownAsync(s *Server) chan error {
	ch := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ch <- s.Shutdown(ctx)
	}()
	return ch
}

// smallSendBuffer is a listener whose connections have a 4 KiB send buffer, so that a
// client that does not read blocks the server's writes quickly.
type smallSendBuffer struct{ net.Listener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// smallReceiveBuffer is a dialer whose connections get a 4 KiB receive buffer before
// they connect (so the TCP window stays small).
var smallReceiveBuffer = &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return errors.Join(err, serr)
}}
