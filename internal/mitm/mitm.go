// Package mitm is the HTTP proxy shell that pab's replay and record share. It accepts
// client connections, takes CONNECT requests with goproxy (ConnectHijack), terminates
// each intercepted tunnel with TLS using pab's CA (a leaf certificate per SNI name), and
// serves the requests inside the tunnel with a net/http Server: HTTP/1.1, or HTTP/2
// (golang.org/x/net/http2's server) chosen by ALPN (RFC 7301), with bounded header size,
// header and handshake timeouts and an idle timeout. Plain-HTTP proxy requests
// (absolute-form request target, RFC 9112 section 3.2.2) reach the same handler as the
// requests inside tunnels, so whatever the shell enforces holds for both: also the
// bounds of Limits in time and memory on every stream, request body and answer
// (bounds.go) and the bound on HTTP/2 header blocks (h2.go).
//
// The shell never connects out: it has no transport and no dialer. What a request is
// answered with is the Handler's business (replay answers from a recording, record
// forwards upstream).
package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/pab-dev/pab/tlsca"
)

// Defaults of Config's bounds.
const (
	// DefaultMaxHeaderBytes bounds a request's header (request line and fields), 1 MiB.
	// A longer header is answered 431 and the connection closed (HTTP/1.1); over HTTP/2
	// it is the advertised SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 section 6.5.2).
	DefaultMaxHeaderBytes = 1 << 20
	// DefaultReadHeaderTimeout bounds the time to read a request's header, from the
	// connection's first byte or the end of the previous request.
	DefaultReadHeaderTimeout = 30 * time.Second
	// DefaultHandshakeTimeout bounds a tunnel's TLS handshake, counted from the 200
	// answer to its CONNECT.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection (a plain one or a tunnel, HTTP/1.1
	// or HTTP/2) on which no request has been active for this long.
	DefaultIdleTimeout = 2 * time.Minute
)

// Config configures a Server. Handler and CA are required.
type Config struct {
	// Handler answers every proxied request: plain-HTTP proxy requests, whose URL is
	// absolute as sent, and every request inside an intercepted tunnel, whose URL is made
	// absolute with scheme "https" and the request's Host (else the CONNECT authority)
	// as host, without a default port 443.
	// Requests inside a tunnel have r.TLS set; r.ProtoMajor is 2 over HTTP/2.
	Handler http.Handler
	// Direct answers requests made to the proxy itself rather than through it: an
	// origin-form request target (GET /stats) on the listening socket, and HTTP/2 with
	// prior knowledge on it (h2c, r.ProtoMajor 2 and r.TLS nil; RFC 9113 section 3.3),
	// which a proxy does not serve. Nil answers them 400.
	Direct http.Handler
	// CA signs the per-host leaf certificates (required).
	CA *tlsca.CA
	// HTTP2 offers h2 by ALPN inside tunnels, preferred to http/1.1. When false, only a
	// client that offers h2 and not http/1.1 is given h2 (so that it gets an HTTP answer,
	// typically the Handler's 505, rather than a failed handshake).
	HTTP2 bool
	// MaxHeaderBytes bounds request headers (default DefaultMaxHeaderBytes).
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading one request header (default
	// DefaultReadHeaderTimeout), on the listening socket and inside tunnels, and an
	// HTTP/2 header block from its HEADERS frame to its last CONTINUATION.
	ReadHeaderTimeout time.Duration
	// HandshakeTimeout bounds a tunnel's TLS handshake (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections and tunnels (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Limits bound requests, their bodies and answers in time and memory (zero fields:
	// their defaults).
	Limits Limits
	// OnRefuse, when set, is called once for every request the shell answers itself
	// instead of handing it to Handler (Refusal): an HTTP/1.x request net/http cannot read
	// (400, 417, 431 for a header over MaxHeaderBytes, 501, 505), a bad CONNECT target
	// (400), a header field line over Limits.MaxFieldBytes (431), a request refused
	// because the shell is full (503). It is called from the connection's goroutine, before
	// or while the answer is written, and holds up that connection (only) while it runs.
	// HTTP/2 streams that x/net/http2 itself ends (a header list over the bound, a
	// malformed header block) are not reported: it keeps their requests to itself.
	OnRefuse func(Refusal)
	// ErrorLog receives the shell's and net/http's warnings: malformed requests, failed
	// TLS handshakes (with the client address and CONNECT authority), HTTP/2 protocol
	// errors. Nil discards them.
	ErrorLog io.Writer
}

// Server is a running proxy shell. Make it with New, serve with Serve, stop with
// Shutdown (graceful) or Close.
type Server struct {
	cfg   Config
	proxy *goproxy.ProxyHttpServer
	outer *http.Server // the listening socket: CONNECT, plain-HTTP proxy requests, Direct
	inner *http.Server // every intercepted tunnel, after its TLS handshake
	tl    *tunnelListener
	logf  *log.Logger

	innerOnce sync.Once
	innerErr  chan error

	mu          sync.Mutex
	closed      bool
	handshaking map[net.Conn]struct{} // tunnels between CONNECT and the end of their handshake

	accepted    atomic.Int64
	tunnels     atomic.Int64
	handshakeN  atomic.Int64 // failed handshakes
	adm         admission    // requests being answered
	refusedBusy atomic.Int64 // requests answered 503 by admission
}

// New makes a Server from cfg; it does not listen yet.
func New(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("mitm: no handler")
	}
	if cfg.CA == nil {
		return nil, errors.New("mitm: no CA")
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Direct == nil {
		cfg.Direct = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this is a proxy: send requests through it", http.StatusBadRequest)
		})
	}
	errw := cfg.ErrorLog
	if errw == nil {
		errw = io.Discard
	}
	s := &Server{cfg: cfg, logf: log.New(errw, "mitm: ", log.LstdFlags), handshaking: map[net.Conn]struct{}{},
		innerErr: make(chan error, 1)}
	s.tl = newTunnelListener()

	p := goproxy.NewProxyHttpServer()
	p.Logger = log.New(errw, "goproxy: ", log.LstdFlags)
	p.Tr = nil
	p.ConnectDial = nil
	p.OnRequest().HandleConnectFunc(func(host string, _ *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
			s.tunnel(c, host)
		}}, host
	})
	s.proxy = p

	// The listening socket speaks HTTP/1.1, and HTTP/2 without TLS only so that an h2c
	// prior-knowledge client gets a framed answer from Direct instead of a closed socket.
	var outerProtos http.Protocols
	outerProtos.SetHTTP1(true)
	outerProtos.SetUnencryptedHTTP2(true)
	s.outer = &http.Server{
		Protocols:         &outerProtos,
		Handler:           http.HandlerFunc(s.route),
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          log.New(errw, "http: ", log.LstdFlags),
		HTTP2:             s.http2Config(),
		ConnContext:       s.newConnContext,
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.accepted.Add(1)
			}
			watchState(c, st)
		},
	}
	var innerProtos http.Protocols
	innerProtos.SetHTTP1(true)
	innerProtos.SetHTTP2(true) // only tunnels that negotiated h2 by ALPN use it
	s.inner = &http.Server{
		Protocols:         &innerProtos,
		Handler:           http.HandlerFunc(s.serveTunnel),
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          log.New(errw, "http (tunnel): ", log.LstdFlags),
		// net/http configures HTTP/2 for Serve only when TLSConfig allows h2; the
		// handshake itself is done by tunnel, with tlsConfig.
		TLSConfig: &tls.Config{NextProtos: []string{"h2", "http/1.1"}},
		HTTP2:     s.http2Config(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return s.newConnContext(tunnelContext(ctx, c), c)
		},
		ConnState: watchState,
	}
	if err := s.setupH2(s.outer, true); err != nil {
		return nil, fmt.Errorf("mitm: HTTP/2: %w", err)
	}
	if err := s.setupH2(s.inner, false); err != nil {
		return nil, fmt.Errorf("mitm: HTTP/2: %w", err)
	}
	return s, nil
}

// http2Config is the HTTP/2 configuration of both servers from the Limits.
func (s *Server) http2Config() *http.HTTP2Config {
	c := &http.HTTP2Config{MaxConcurrentStreams: s.cfg.Limits.MaxStreams}
	if s.cfg.Limits.WriteTimeout > 0 {
		c.WriteByteTimeout = s.cfg.Limits.WriteTimeout
	}
	return c
}

// Accepted is the number of client connections accepted on the listening sockets.
func (s *Server) Accepted() int64 { return s.accepted.Load() }

// Tunnels is the number of CONNECT tunnels whose TLS handshake succeeded.
func (s *Server) Tunnels() int64 { return s.tunnels.Load() }

// FailedHandshakes is the number of tunnels closed because their TLS handshake failed
// or timed out.
func (s *Server) FailedHandshakes() int64 { return s.handshakeN.Load() }

// Listen opens a TCP listening socket on addr ("host:port"). A port in use gives the
// one-line error "listen ADDR: address already in use".
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen %s: address already in use", addr)
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, oe.Err)
		}
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// Serve accepts proxy connections on ln until Shutdown or Close, then returns nil.
// It may be called for more than one listener.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		ln.Close()
		return nil
	}
	s.innerOnce.Do(func() {
		go func() { s.innerErr <- s.inner.Serve(s.tl) }()
	})
	err := s.outer.Serve(watchListener{Listener: ln, s: s})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and new tunnels, closes idle connections, and
// waits until every request in flight, plain or inside a tunnel, over HTTP/1.1 or
// HTTP/2 (GOAWAY, RFC 9113 section 6.8), has been answered; then the connections close.
// When ctx ends first, every connection is closed at once and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.markClosed()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = s.outer.Shutdown(ctx) }()
	go func() { defer wg.Done(); errs[1] = s.inner.Shutdown(ctx) }()
	// tunnels still in their handshake are not requests in flight
	s.closeHandshaking()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return err
	}
	return nil
}

// Close closes the listening sockets and every connection and tunnel at once.
func (s *Server) Close() error {
	s.markClosed()
	err := errors.Join(s.outer.Close(), s.inner.Close())
	s.closeHandshaking()
	return err
}

func (s *Server) markClosed() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.tl.Close()
}

func (s *Server) closeHandshaking() {
	s.mu.Lock()
	conns := make([]net.Conn, 0, len(s.handshaking))
	for c := range s.handshaking {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// route sends a request on the listening socket to goproxy (CONNECT), the Handler
// (absolute-form proxy requests) or Direct.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	cs := connStateOf(r.Context())
	enteredConn(cs, r)
	switch {
	case r.ProtoMajor >= 2:
		s.serveBounded(w, r, cs, s.cfg.Direct.ServeHTTP)
	case r.Method == http.MethodConnect:
		s.connect(w, r)
	case r.URL.IsAbs() && r.URL.Host != "":
		s.serveBounded(w, r, cs, func(w http.ResponseWriter, r *http.Request) { serveFramed(s.cfg.Handler, w, r) })
	default:
		s.serveBounded(w, r, cs, func(w http.ResponseWriter, r *http.Request) { serveFramed(s.cfg.Direct, w, r) })
	}
}

// connect answers a CONNECT request: the tunnel, or a refusal of a bad target. Apart from
// route, so that route's stack frame, under every request's answer, stays small (a
// goroutine's stack is grown by copying it whole once an answer needs more than it has).
//
//go:noinline
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	// The target as sent (RequestURI), not r.Host: for a request target that is not in
	// authority form (CONNECT /path) net/http takes r.Host from the Host field.
	if err := checkAuthority(r.RequestURI); err != nil {
		s.logf.Printf("%s: CONNECT %q refused: %v", r.RemoteAddr, r.RequestURI, err)
		s.refuseRequest(&http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: r.RequestURI}}, http.StatusBadRequest,
			"refused by the proxy shell: bad CONNECT target: "+err.Error())
		w.Header().Set("Connection", "close")
		http.Error(w, "pab: bad CONNECT target: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.proxy.ServeHTTP(earlyBytesWriter{w}, r)
}

// serveFramed calls h, closing an HTTP/1.x connection after the answer to a request
// with a Transfer-Encoding. RFC 9112 section 6.3 wants a server that gets both
// Transfer-Encoding and Content-Length to close the connection after answering (the
// two framings may disagree about where the next request starts: request smuggling);
// net/http drops the Content-Length and keeps the connection. As the Content-Length is
// gone by now, the shell closes after every chunked HTTP/1.x request, which browsers do
// not send.
func serveFramed(h http.Handler, w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || len(r.TransferEncoding) == 0 {
		h.ServeHTTP(w, r)
		return
	}
	cw := &closeWriter{ResponseWriter: w}
	h.ServeHTTP(cw, r)
	if !cw.wrote {
		w.Header().Set("Connection", "close") // net/http writes the header now
	}
}

// closeWriter sets "Connection: close" on the final answer, after whatever fields the
// Handler set (a proxy Handler removes the Connection field it copies).
type closeWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *closeWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		w.ResponseWriter.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *closeWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *closeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// checkAuthority checks a CONNECT request target: authority-form host:port (RFC 9110
// section 9.3.6, RFC 9112 section 3.2.3), the port 1 to 5 decimal digits from 1 to 65535,
// the host a name of at most 253 letters, digits, '-', '.' and '_', or an IP address
// (IPv6 in brackets, without a zone).
func checkAuthority(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("want host:port")
	}
	if host == "" {
		return errors.New("empty host")
	}
	if len(port) == 0 || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return fmt.Errorf("bad port %q", port)
	}
	if n, _ := strconv.Atoi(port); n < 1 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	if strings.HasPrefix(a, "[") {
		// SplitHostPort takes "[name]:port" too: brackets are for IPv6 only
		if !strings.Contains(host, ":") || net.ParseIP(host) == nil {
			return fmt.Errorf("bad host %q", host)
		}
		return nil
	}
	if len(host) > 253 {
		return fmt.Errorf("host of %d bytes", len(host))
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("bad host %q", host)
		}
	}
	return nil
}

// earlyBytesWriter is the ResponseWriter goproxy is given for a CONNECT. Its Hijack
// returns a connection that first yields the bytes the listening socket had already read
// past the CONNECT request: a client may send its ClientHello without waiting for the
// 200, and goproxy hands a ConnectHijack only the bare connection.
type earlyBytesWriter struct{ http.ResponseWriter }

func (w earlyBytesWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if wc, ok := c.(*watchConn); ok {
		c = wc.Conn // its watch ended with the CONNECT (enteredConn): one layer less under the tunnel's every read and write
	}
	if n := rw.Reader.Buffered(); n > 0 {
		early := make([]byte, n)
		io.ReadFull(rw.Reader, early) // buffered: no read from the connection
		c = &earlyConn{Conn: c, early: early}
	}
	return c, rw, nil
}

func (w earlyBytesWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// earlyConn is a hijacked connection whose first bytes were already read.
type earlyConn struct {
	net.Conn
	early []byte
}

func (c *earlyConn) Read(p []byte) (int, error) {
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

type tunnelKey struct{}

// tunnelContext puts a tunnel's CONNECT authority into its requests' context.
func tunnelContext(ctx context.Context, c net.Conn) context.Context {
	if wc, ok := c.(*watchConn); ok {
		return context.WithValue(ctx, tunnelKey{}, wc.authority)
	}
	if tc, ok := c.(*tls.Conn); ok {
		if lc := lazyOf(tc.NetConn()); lc != nil && lc.authority != "" {
			return context.WithValue(ctx, tunnelKey{}, lc.authority)
		}
	}
	return ctx
}

// lazyOf is the lazyConn under a hijacked connection c: c itself, or the one an earlyConn
// reads from; nil when there is none.
func lazyOf(c net.Conn) *lazyConn {
	if ec, ok := c.(*earlyConn); ok {
		c = ec.Conn
	}
	lc, _ := c.(*lazyConn)
	return lc
}

// tunnel answers the CONNECT on c, does the TLS handshake with a leaf for the client's
// SNI (else the CONNECT host) and hands the connection to the inner server.
func (s *Server) tunnel(c net.Conn, authority string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.handshaking[c] = struct{}{}
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		delete(s.handshaking, c)
		s.mu.Unlock()
	}
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		done()
		c.Close()
		return
	}
	// The TLS runs right over the socket's lazyConn (earlyBytesWriter took the listening
	// socket's watch off), which carries the CONNECT authority for tunnelContext.
	under := c
	if lc := lazyOf(c); lc != nil {
		lc.authority = authority
	} else {
		under = &lazyConn{Conn: c, authority: authority}
	}
	tc := tls.Server(under, s.tlsConfig(authority))
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	done()
	if err != nil {
		s.handshakeN.Add(1)
		s.logf.Printf("%s: TLS handshake in tunnel to %s: %v", c.RemoteAddr(), authority, err)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	s.tunnels.Add(1)
	var conn net.Conn = tc
	if st := tc.ConnectionState(); st.NegotiatedProtocol != "h2" && s.cfg.OnRefuse != nil {
		// HTTP/1.1: net/http's answers to requests it cannot read are seen in plain text
		// (the requests get their TLS state from the watchConn, serveTunnel)
		wc := &watchConn{Conn: tc, s: s, authority: authority, tls: &st}
		wc.armed.Store(true)
		conn = wc
	}
	if !s.tl.push(conn) {
		conn.Close()
	}
}

// tlsConfig is the TLS configuration of the tunnel to authority: TLS 1.2 or later, the
// leaf for the SNI name (else the CONNECT host) from the CA's cache, ALPN as Config.HTTP2
// says.
func (s *Server) tlsConfig(authority string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			name := hello.ServerName
			if name == "" {
				name = authority
			}
			cert, err := s.cfg.CA.LeafFor(name)
			if err != nil {
				return nil, err
			}
			return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert},
				NextProtos: s.alpn(hello.SupportedProtos)}, nil
		},
	}
}

// alpn is the server's ALPN list for a client offering offered.
func (s *Server) alpn(offered []string) []string {
	if s.cfg.HTTP2 {
		return []string{"h2", "http/1.1"}
	}
	if slices.Contains(offered, "h2") && !slices.Contains(offered, "http/1.1") {
		return []string{"h2"}
	}
	return []string{"http/1.1"}
}

// serveTunnel makes a tunnel request's URL absolute and hands it to the Handler. The host
// is the request's own (Host, or :authority over HTTP/2), as an origin server would see
// it, else the CONNECT authority; the default port 443 is left out.
func (s *Server) serveTunnel(w http.ResponseWriter, r *http.Request) {
	cs := connStateOf(r.Context())
	enteredConn(cs, r)
	if cs != nil && cs.watch != nil && r.TLS == nil {
		r.TLS = cs.watch.tls
	}
	host := r.Host
	if host == "" {
		host, _ = r.Context().Value(tunnelKey{}).(string)
	}
	r.URL.Scheme = "https"
	r.URL.Host = strings.TrimSuffix(host, ":443")
	s.serveBounded(w, r, cs, func(w http.ResponseWriter, r *http.Request) { serveFramed(s.cfg.Handler, w, r) })
}

// tunnelListener is the inner server's listener: tunnels whose handshake is done.
type tunnelListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newTunnelListener() *tunnelListener {
	return &tunnelListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to the inner server; false when the listener is closed.
func (l *tunnelListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *tunnelListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tunnelListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *tunnelListener) Addr() net.Addr { return tunnelAddr{} }

type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "mitm" }
func (tunnelAddr) String() string  { return "mitm-tunnels" }

// hopByHop are the hop-by-hop fields of RFC 9110 section 7.6.1, with the obsolete
// Proxy-Connection and Keep-Alive that clients still send.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// RemoveHopByHop deletes from h the hop-by-hop fields (RFC 9110 section 7.6.1: those
// Connection names, then Connection, Proxy-Connection, Keep-Alive, Proxy-Authenticate,
// Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade), as a proxy must before
// passing a message on. Modelled on net/http/httputil's removeHopByHopHeaders.
func RemoveHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto(f); f != "" {
				delete(h, f)
			}
		}
	}
	for _, f := range hopByHop {
		delete(h, f)
	}
}

// textproto canonicalizes a field name from a Connection list.
func textproto(f string) string {
	f = strings.TrimSpace(f)
	if f == "" {
		return ""
	}
	return http.CanonicalHeaderKey(f)
}
