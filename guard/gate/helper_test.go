package gate

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pab-dev/pab/guard/netpolicy"
	"github.com/pab-dev/pab/tlsca"
)

// Host names of the test sites: made up, mapped to loopback listeners by the gate's
// DialContext.
const (
	siteHost  = "jobs.gate.test"
	otherHost = "other.gate.test"
)

// testDeadline bounds every client exchange of the tests.
const testDeadline = 30 * time.Second

// Values typed in the runs of the tests (netpolicy.Policy.AddTyped).
const (
	typedEmail = "jane.doe@example.com"
	typedName  = "Zephyrine Quill"
)

var (
	caOnce          sync.Once
	caDir           string
	pabCA, sitesCA  *tlsca.CA
	caErr           error
	errNoRouteInTst = fmt.Errorf("no such test host")
)

func TestMain(m *testing.M) {
	code := m.Run()
	if caDir != "" {
		os.RemoveAll(caDir)
	}
	os.Exit(code)
}

// testCAs are pab's CA of the tests (the gate's and the upstream MITM's) and the CA of
// the loopback sites, both in a temporary directory (never the user's CA).
func testCAs(t testing.TB) (pab, sites *tlsca.CA) {
	t.Helper()
	caOnce.Do(func() {
		caDir, caErr = os.MkdirTemp("", "pab-gate-ca")
		if caErr != nil {
			return
		}
		if pabCA, caErr = tlsca.LoadOrCreate(filepath.Join(caDir, "pab")); caErr != nil {
			return
		}
		sitesCA, caErr = tlsca.LoadOrCreate(filepath.Join(caDir, "sites"))
	})
	if caErr != nil {
		t.Fatal(caErr)
	}
	return pabCA, sitesCA
}

// seenReq is one request as a site saw it.
type seenReq struct {
	method, url string
	proto       int
	header      http.Header
	body        string
}

// site is a loopback HTTPS site (HTTP/1.1 and h2) and a plain-HTTP one with one handler,
// answering for every host name. Paths:
//
//	/ws       a WebSocket handshake (RFC 6455 section 4.2.2), then echoes the bytes it gets
//	/wsonce   the same handshake, then echoes one read's bytes and closes the connection
//	/stream   "first\n", flushed, then "second\n" once release is closed
//	/hang     no answer until release is closed
//	/upload   reads 5 body bytes, signals gotFirst, reads the rest: "upload N"
//	else      reads the body: "ok METHOD PATH body=N"
type site struct {
	tls, plain *httptest.Server
	hits       atomic.Int64
	mu         sync.Mutex
	seen       []seenReq
	release    chan struct{}
	relOnce    sync.Once
	gotFirst   chan struct{}
	closeOnce  sync.Once
}

func newSite(t *testing.T) *site {
	t.Helper()
	_, sca := testCAs(t)
	s := &site{release: make(chan struct{}), gotFirst: make(chan struct{}, 1)}
	leaf, err := sca.LeafFor(siteHost)
	if err != nil {
		t.Fatal(err)
	}
	s.tls = httptest.NewUnstartedServer(s)
	s.tls.EnableHTTP2 = true
	s.tls.TLS = &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return sca.LeafFor(h.ServerName)
		},
		NextProtos: []string{"h2", "http/1.1"},
	}
	s.tls.StartTLS()
	s.plain = httptest.NewServer(s)
	t.Cleanup(s.close)
	return s
}

func (s *site) open() { s.relOnce.Do(func() { close(s.release) }) }

func (s *site) close() {
	s.closeOnce.Do(func() {
		s.open()
		s.tls.Close()
		s.plain.Close()
	})
}

func (s *site) requests() []seenReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenReq(nil), s.seen...)
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	sr := seenReq{method: r.Method, url: scheme + "://" + r.Host + r.RequestURI, proto: r.ProtoMajor, header: r.Header.Clone()}
	record := func() {
		s.mu.Lock()
		s.seen = append(s.seen, sr)
		s.mu.Unlock()
	}
	switch r.URL.Path {
	case "/ws", "/wsonce":
		record()
		wsEcho(w, r, r.URL.Path == "/wsonce")
	case "/stream":
		record()
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		<-s.release
		io.WriteString(w, "second\n")
	case "/hang":
		record()
		<-s.release
	case "/upload":
		record()
		first := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, first); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.gotFirst <- struct{}{}
		rest, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "upload %d", len(first)+len(rest))
	default:
		b, _ := io.ReadAll(r.Body)
		sr.body = string(b)
		record()
		fmt.Fprintf(w, "ok %s %s body=%d", r.Method, r.URL.Path, len(b))
	}
}

// wsEcho answers a WebSocket opening handshake and echoes raw bytes until the
// connection closes (the gate passes bytes; framing is not its business); once, it echoes
// one read's bytes and closes.
func wsEcho(w http.ResponseWriter, r *http.Request, once bool) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if !isWebSocket(r.Header) || key == "" {
		http.Error(w, "not a websocket handshake", http.StatusBadRequest)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(key))
	if brw.Flush() != nil {
		return
	}
	if once {
		b := make([]byte, 64<<10)
		if n, err := brw.Read(b); err == nil {
			c.Write(b[:n])
		}
		return
	}
	io.Copy(c, brw.Reader)
}

// wsAccept is the Sec-WebSocket-Accept of key (RFC 6455 section 4.2.2).
func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// dialSites maps the test host names to s's listeners (port 443 to the HTTPS one, 80
// to the plain one); any other address fails.
func (s *site) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	switch addr {
	case siteHost + ":443", otherHost + ":443":
		addr = s.tls.Listener.Addr().String()
	case siteHost + ":80", otherHost + ":80":
		addr = s.plain.Listener.Addr().String()
	default:
		return nil, fmt.Errorf("%s: %w", addr, errNoRouteInTst)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// rig is a site, the gate in front of it (direct, the site's CA trusted) and the run's
// Policy, whose refusals it keeps.
type rig struct {
	t      *testing.T
	site   *site
	gate   *Gate
	policy *netpolicy.Policy
	log    *syncBuffer

	mu       sync.Mutex
	refusals []netpolicy.Refusal
	clients  []*http.Transport
}

func newRig(t *testing.T, mode string, tweak ...func(*Options)) *rig {
	t.Helper()
	pca, sca := testCAs(t)
	r := &rig{t: t, site: newSite(t), log: &syncBuffer{}}
	r.policy = netpolicy.New(mode, []string{siteHost}, func(f netpolicy.Refusal) {
		r.mu.Lock()
		r.refusals = append(r.refusals, f)
		r.mu.Unlock()
	})
	o := Options{Policy: r.policy, CA: pca, UpstreamRoots: sca.CertPool(), DialContext: r.site.dial, ErrorLog: r.log}
	for _, f := range tweak {
		f(&o)
	}
	g, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	r.gate = g
	t.Cleanup(r.close)
	return r
}

// close closes the clients, the gate and the site.
func (r *rig) close() {
	r.mu.Lock()
	cl := r.clients
	r.clients = nil
	r.mu.Unlock()
	for _, tr := range cl {
		tr.CloseIdleConnections()
	}
	if err := r.gate.Close(); err != nil {
		r.t.Errorf("gate close: %v", err)
	}
	r.site.close()
}

func (r *rig) lastRefusals() []netpolicy.Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]netpolicy.Refusal(nil), r.refusals...)
}

// client is a Go client using the gate as its proxy and trusting pab's test CA; h2
// offers HTTP/2 inside the tunnels.
func (r *rig) client(h2 bool) *http.Client {
	return r.clientVia(r.gate.Addr(), h2)
}

func (r *rig) clientVia(proxy string, h2 bool) *http.Client {
	pca, _ := testCAs(r.t)
	tr := &http.Transport{
		Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
		TLSClientConfig:    &tls.Config{RootCAs: pca.CertPool()},
		ForceAttemptHTTP2:  h2,
		DisableCompression: true,
	}
	r.mu.Lock()
	r.clients = append(r.clients, tr)
	r.mu.Unlock()
	return &http.Client{Transport: tr, Timeout: testDeadline, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// answer is a response with its whole body.
type answer struct {
	code   int
	proto  int
	header http.Header
	body   string
}

// do sends req with c and reads the answer whole.
func do(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", req.Method, req.URL, err)
	}
	return answer{code: resp.StatusCode, proto: resp.ProtoMajor, header: resp.Header, body: string(b)}
}

func newReq(t *testing.T, method, u string, body io.Reader, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return req
}

// wantRefused checks that a is the gate's 403 for reason.
func wantRefused(t *testing.T, what string, a answer, reason string) {
	t.Helper()
	if a.code != http.StatusForbidden || a.header.Get(RefusedHeader) != "refused" ||
		a.body != "pab guard: refused at the wire ("+reason+")\n" || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Errorf("%s: got %d %s=%q %q, want the gate's 403 for %s", what, a.code, RefusedHeader, a.header.Get(RefusedHeader), a.body, reason)
	}
}

// waitFor polls cond until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond)
	}
}

// rawConn is a client connection to a proxy, read through a bufio.Reader.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

// dialRaw connects to the gate.
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testDeadline)) // a broken gate fails the test, not hangs it
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// tunnel opens a CONNECT tunnel to host:443 through the proxy at addr and does the TLS
// handshake with pab's test CA trusted, offering only HTTP/1.1.
func tunnel(t *testing.T, addr, host string) *rawConn {
	t.Helper()
	rc := dialRaw(t, addr)
	fmt.Fprintf(rc, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
	resp, err := http.ReadResponse(rc.br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %v %v", host, resp, err)
	}
	pca, _ := testCAs(t)
	tc := tls.Client(rc.Conn, &tls.Config{ServerName: host, RootCAs: pca.CertPool(), NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS in tunnel to %s: %v", host, err)
	}
	t.Cleanup(func() { tc.Close() })
	return &rawConn{Conn: tc, br: bufio.NewReader(tc)}
}

// syncBuffer is a strings.Builder safe for concurrent writes (the gate's ErrorLog).
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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
