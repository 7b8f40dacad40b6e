// Package gate is the guard's wire gate: the MITM proxy that every request of the guard's
// browser passes (Chromium runs with --proxy-server=http://ADDR and trusts pab's CA by
// SPKI). It is the wire half of docs/guard.md's "Enforcement below the page"; the other
// half is the browser's network layer (guard/devtools). Both ask the same
// netpolicy.Policy.
//
// For each request the gate builds a netpolicy.Request from what is really on the wire
// (method, absolute URL, every header field, Cookie included; whether it is a WebSocket
// opening handshake or a frame's document load) and asks Policy.Decide at
// netpolicy.LayerWire. A refused request is answered 403 by the gate itself and nothing of
// it is forwarded; an allowed one is forwarded (httputil.ReverseProxy) to the real site, or
// through an upstream HTTP proxy (a pab replay or pab record proxy), and its answer
// streamed back.
//
// The proxy shell (CONNECT, TLS with pab's CA per host, HTTP/1.1 and h2 inside tunnels,
// plain-HTTP proxy requests, header size and time bounds) is internal/mitm, the one
// replay and record use. Requests whose header exceeds the shell's bound
// (mitm.DefaultMaxHeaderBytes, 1 MiB) are answered 431 by the shell before the gate sees
// them: they are never forwarded, but the Policy is not asked and OnRefuse not called.
//
// WebSocket: an HTTP/1.1 opening handshake (Upgrade: websocket), in a tunnel or as a
// plain-HTTP proxy request, is decided like any request (Request.WebSocket set) and, when
// allowed, passed through: the upstream's 101 Switching Protocols is relayed and the two
// connections are joined until either side closes or the gate closes. WebSocket over
// HTTP/2 (extended CONNECT, RFC 8441) is not offered: Go's HTTP/2 server does not
// advertise SETTINGS_ENABLE_CONNECT_PROTOCOL, so Chromium opens its WebSockets over
// HTTP/1.1; an extended CONNECT that reaches the gate anyway is answered 502 unforwarded.
// Other upgrades (h2c) are not passed: the Upgrade field is dropped and the request goes
// on as a plain one.
package gate

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pab-dev/pab/guard/netpolicy"
	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/tlsca"
)

// DefaultResponseHeaderTimeout bounds the wait for an upstream answer's header, from the
// end of the request's writing (Options.ResponseHeaderTimeout).
const DefaultResponseHeaderTimeout = 60 * time.Second

// RefusedHeader is the header field of the gate's own 403 answers (value "refused"): a
// refused request is told apart from a site's 403 by it.
const RefusedHeader = "X-Pab-Guard"

// Options configure a Gate. Policy and CA are required.
type Options struct {
	// Policy decides every request (at netpolicy.LayerWire) and reports refusals to its
	// OnRefuse function; the gate itself traces nothing.
	Policy *netpolicy.Policy
	// CA signs the gate's leaf certificates, one per host name of the browser's tunnels
	// (the browser trusts it by SPKI).
	CA *tlsca.CA
	// Upstream is the host:port of an HTTP proxy to forward every allowed request
	// through: a pab replay or pab record proxy (itself a MITM with pab's CA). HTTPS
	// requests go through a CONNECT tunnel to it, plain-HTTP ones as absolute-form
	// requests. "" forwards to the real sites directly; the environment's proxy settings
	// (HTTPS_PROXY, ...) are never used.
	Upstream string
	// UpstreamRoots verifies the TLS certificates of the sites (as presented by Upstream
	// when it is set). Nil: CA's certificate when Upstream is set, else the system roots.
	UpstreamRoots *x509.CertPool
	// DialContext opens the gate's outgoing connections (to Upstream when set, else to the
	// sites' host:port). Nil: a net.Dialer with a 30 s connect timeout.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResponseHeaderTimeout bounds the wait for an upstream answer's header once the
	// request is written; past it the browser gets a 502. 0: DefaultResponseHeaderTimeout.
	// Bodies (streamed answers, server-sent events, WebSockets) are not bounded.
	ResponseHeaderTimeout time.Duration
	// ErrorLog receives the shell's and the forwarding's warnings (malformed requests,
	// failed handshakes, upstream errors: method and host, never the URL). Nil discards
	// them.
	ErrorLog io.Writer
}

// Gate is a running wire gate. Make it with Start, stop it with Close. Its methods are
// safe for concurrent use.
type Gate struct {
	policy *netpolicy.Policy
	shell  *mitm.Server
	addr   string
	tr     *http.Transport
	rp     *httputil.ReverseProxy
	logf   *log.Logger

	// hard ends every forwarded request (and joined WebSocket) when Close cancels it.
	hard       context.Context
	hardCancel context.CancelFunc
	serveDone  chan struct{}
	serveErr   error

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup

	refused, forwarded atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// Start makes a Gate from o, listens on 127.0.0.1 on a free port and serves until Close.
// It fails when Policy or CA is nil, when Upstream is not host:port, or when it cannot
// listen.
func Start(o Options) (*Gate, error) {
	if o.Policy == nil {
		return nil, errors.New("gate: no policy")
	}
	if o.CA == nil {
		return nil, errors.New("gate: no CA")
	}
	if o.Upstream != "" {
		if h, p, err := net.SplitHostPort(o.Upstream); err != nil || h == "" || p == "" {
			return nil, fmt.Errorf("gate: upstream %q: want host:port", o.Upstream)
		}
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	errw := o.ErrorLog
	if errw == nil {
		errw = io.Discard
	}
	g := &Gate{policy: o.Policy, logf: log.New(errw, "gate: ", log.LstdFlags), serveDone: make(chan struct{})}
	g.hard, g.hardCancel = context.WithCancel(context.Background())

	roots := o.UpstreamRoots
	if roots == nil && o.Upstream != "" {
		roots = o.CA.CertPool()
	}
	dial := o.DialContext
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	g.tr = &http.Transport{
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true, // WebSocket handshakes still go over HTTP/1.1 (net/http picks it)
		DisableCompression:     true, // the browser's Accept-Encoding and the site's bytes pass as they are
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    30 * time.Second,
		ExpectContinueTimeout:  time.Second,
		ResponseHeaderTimeout:  o.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: 1 << 20,
	}
	if o.Upstream != "" {
		g.tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: o.Upstream})
	}
	g.rp = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    g.tr,
		BufferPool:   bufferPool{},
		ErrorLog:     g.logf,
		ErrorHandler: g.upstreamError,
	}

	shell, err := mitm.New(mitm.Config{
		Handler: http.HandlerFunc(g.serve),
		Direct: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "pab guard's wire gate is a proxy: send requests through it", http.StatusBadRequest)
		}),
		CA:       o.CA,
		HTTP2:    true,
		ErrorLog: o.ErrorLog,
	})
	if err != nil {
		g.hardCancel()
		return nil, fmt.Errorf("gate: %w", err)
	}
	g.shell = shell
	ln, err := mitm.Listen("127.0.0.1:0")
	if err != nil {
		g.hardCancel()
		return nil, fmt.Errorf("gate: %w", err)
	}
	g.addr = ln.Addr().String()
	go func() {
		g.serveErr = shell.Serve(ln)
		close(g.serveDone)
	}()
	return g, nil
}

// Addr is the gate's listening address, "127.0.0.1:PORT" (the browser's
// --proxy-server=http://ADDR).
func (g *Gate) Addr() string { return g.addr }

// Refused is the number of requests the Policy refused at the gate so far.
func (g *Gate) Refused() int64 { return g.refused.Load() }

// Forwarded is the number of requests the Policy allowed and the gate forwarded so far
// (whatever the upstream then answered, a failure included).
func (g *Gate) Forwarded() int64 { return g.forwarded.Load() }

// Close closes everything at once: the listening socket, every client connection and
// tunnel, every request being forwarded and every joined WebSocket, then the idle
// upstream connections. It returns once every request handler of the gate has returned.
// Calls after the first return the first's result.
func (g *Gate) Close() error {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		g.hardCancel()
		err := g.shell.Close()
		<-g.serveDone
		g.inflight.Wait()
		g.tr.CloseIdleConnections()
		g.closeErr = errors.Join(err, g.serveErr)
	})
	return g.closeErr
}

// serve is the shell's Handler: r's URL is absolute (internal/mitm makes it so).
func (g *Gate) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		textAnswer(w, http.StatusServiceUnavailable, "pab guard: the wire gate is closing")
		return
	}
	g.inflight.Add(1)
	g.mu.Unlock()
	defer g.inflight.Done()

	if r.Method == http.MethodConnect {
		// extended CONNECT (RFC 8441) inside an h2 tunnel: only with GODEBUG=http2xconnect=1
		textAnswer(w, http.StatusBadGateway, "pab guard: WebSocket over HTTP/2 (extended CONNECT) is not passed")
		return
	}
	req := netpolicy.Request{
		Method:     r.Method,
		URL:        r.URL.String(),
		Header:     r.Header,
		Navigation: isNavigation(r.Header),
		WebSocket:  isWebSocket(r.Header),
		HasBody:    r.ContentLength != 0,
	}
	if v := g.policy.Decide(netpolicy.LayerWire, req, ""); !v.Allow {
		g.refused.Add(1)
		refuse(w, v)
		return
	}
	g.forwarded.Add(1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(g.hard, cancel)
	defer stop()
	hw := &hijackCloser{ResponseWriter: w, hard: g.hard}
	defer hw.stop()
	g.rp.ServeHTTP(hw, r.WithContext(ctx))
}

// hijackCloser is the ResponseWriter the ReverseProxy gets: a connection it hijacks for a
// WebSocket is closed when the gate closes. Cancelling the request closes only the
// upstream side; once the upstream has ended its half (or the cancel's close is read as
// the upstream's end), the ReverseProxy waits for the browser's side to end too, which
// neither net/http nor the shell closes for a hijacked connection.
type hijackCloser struct {
	http.ResponseWriter
	hard   context.Context
	stopFn func() bool
}

// Hijack hijacks the connection and arranges its close on the gate's Close.
func (w *hijackCloser) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.stopFn = context.AfterFunc(w.hard, func() { c.Close() })
	return c, brw, nil
}

// Unwrap gives http.ResponseController the shell's ResponseWriter (flushes, deadlines).
func (w *hijackCloser) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// stop forgets the hijacked connection once the handler has returned (it closed it).
func (w *hijackCloser) stop() {
	if w.stopFn != nil {
		w.stopFn()
	}
}

// refuse writes the gate's 403 for a refused request; the request's body is never read.
func refuse(w http.ResponseWriter, v netpolicy.Verdict) {
	w.Header().Set(RefusedHeader, "refused")
	textAnswer(w, http.StatusForbidden, "pab guard: refused at the wire ("+v.Reason+")")
}

// textAnswer writes a short text/plain answer (msg and a newline), not to be cached.
func textAnswer(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(msg)+1))
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

// upstreamError is the ReverseProxy's ErrorHandler: no answer from upstream (dial, TLS,
// response header timeout, a refused protocol switch) is a 502 with a text body. The log
// and the body name the method and host, never the URL.
func (g *Gate) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if r.Context().Err() == nil {
		g.logf.Printf("%s %s: upstream error: %v", r.Method, r.URL.Host, err)
	}
	for k := range w.Header() {
		delete(w.Header(), k)
	}
	textAnswer(w, http.StatusBadGateway, "pab guard: upstream error: "+err.Error())
}

// rewrite makes the outgoing request from the browser's: the absolute URL exactly as
// decided (ReverseProxy drops unparsable query parameters; the gate does not), the Host as
// sent, the forwarding fields as sent (ReverseProxy drops them; the gate adds none), no
// Proxy-* field, no request trailers, and no Upgrade other than websocket. The
// hop-by-hop fields ReverseProxy has removed already (and put back Connection and Upgrade
// of a protocol switch).
func rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	pr.Out.Host = pr.In.Host
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v, ok := pr.In.Header[k]; ok {
			pr.Out.Header[k] = append([]string(nil), v...)
		}
	}
	for k := range pr.Out.Header {
		if strings.HasPrefix(strings.ToLower(k), "proxy-") {
			delete(pr.Out.Header, k)
		}
	}
	pr.Out.Trailer = nil
	if pr.Out.Header.Get("Upgrade") != "" && !isWebSocket(pr.In.Header) {
		pr.Out.Header.Del("Upgrade")
		pr.Out.Header.Del("Connection")
	}
}

// isWebSocket reports whether h is a WebSocket opening handshake's (RFC 6455 section 4.1:
// Upgrade: websocket with Connection: Upgrade).
func isWebSocket(h http.Header) bool {
	return hasToken(h["Upgrade"], "websocket") && hasToken(h["Connection"], "upgrade")
}

// isNavigation reports whether h is a frame's document load's: Sec-Fetch-Mode: navigate,
// or Sec-Fetch-Dest document, iframe or frame.
func isNavigation(h http.Header) bool {
	if strings.EqualFold(strings.TrimSpace(h.Get("Sec-Fetch-Mode")), "navigate") {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("Sec-Fetch-Dest"))) {
	case "document", "iframe", "frame":
		return true
	}
	return false
}

// hasToken reports whether one of the comma-separated lists vs holds token (any case).
func hasToken(vs []string, token string) bool {
	for _, v := range vs {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// bufferPool lends ReverseProxy the shell's pooled 32 KiB copy buffers.
type bufferPool struct{}

func (bufferPool) Get() []byte { return *mitm.Buffer() }

func (bufferPool) Put(b []byte) { mitm.PutBuffer(&b) }
