package replay

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/net/http/httpguts"

	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/warc"
)

// DefaultListen is the proxy's default address.
const DefaultListen = "127.0.0.1:8899"

// ControlHost is the host name of the proxy's own endpoints: http://rr.control/stats (JSON
// Counts), http://rr.control/log?tail=N (the last N log lines as JSON Lines, oldest first;
// N defaults to 100 and is capped by Options.LogTail) and http://rr.control/health ("ok"), over http or https through the proxy, or
// directly as http://PROXY-ADDR/stats. Control requests are neither logged nor counted.
const ControlHost = "rr.control"

// maxKeyBody bounds the part of a request body kept for the matching key. Longer bodies are
// still read to the end (and discarded) before answering; their key uses the first
// maxKeyBody bytes and the log line says so.
const maxKeyBody = 32 << 20

// DefaultIdleTimeout closes client connections idle for this long.
const DefaultIdleTimeout = 2 * time.Minute

// Options configure a Server.
type Options struct {
	// Bundle is the recording to serve (required).
	Bundle *warc.Bundle
	// Rules are the site rules in effect; required unless Index is given.
	Rules *rules.Set
	// Index is the lookup index; when nil, New builds it from Bundle and Rules.
	Index *Index
	// RuleRoot is IndexOptions.RuleRoot for the index New builds (unused with Index).
	RuleRoot string
	// CA signs the per-host certificates of the HTTPS interception (required).
	CA *CA
	// Log, when set, receives one JSON line (LogLine) per proxied request.
	Log io.Writer
	// Listen is the address ListenAndServe listens on (default DefaultListen).
	Listen string
	// IdleTimeout closes a client connection idle this long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Debug, when set, receives goproxy's and net/http's warnings (TLS handshake errors,
	// malformed requests). Nil discards them.
	Debug io.Writer
	// Clock turns on the page clock (see Clock): every recorded 2xx text/html answer whose
	// body is HTML gets a script that sets Date to the manifest's captured_from. A bundle
	// without captured_from (no exchanges) is served without it.
	Clock bool
	// DeterministicRandom, with Clock, also makes Math.random and crypto.getRandomValues
	// repeatable per page URL.
	DeterministicRandom bool
	// LogTail is how many log lines http://rr.control/log?tail=N can return (default
	// DefaultLogTail). The lines are kept in memory whether or not Log is set.
	LogTail int
}

// Server is the replay proxy: an HTTP proxy (goproxy) that answers plain HTTP requests
// and intercepts every CONNECT with pab's CA (MITM), answering every request only from
// the recording. It never opens an outbound connection: its transport and CONNECT dialer
// refuse, and every request is answered by the replay handler.
//
// Responses carry the recorded status and header fields, except hop-by-hop fields
// (Connection and the fields it names, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
// Upgrade), Content-Encoding (payloads are stored decoded), Alt-Svc (it advertises
// upstream endpoints that do not exist offline) and Content-Length, which is set to the
// payload size. The payload is streamed from the WARC file, except for HTML documents that
// get the page clock (Options.Clock): those are read whole, rewritten by Clock.Inject, and
// their Content-Length is the rewritten size. HEAD answers carry no body;
// neither do 204 and 304 answers. Answers are always HTTP/1.1.
type Server struct {
	b    *warc.Bundle
	ix   *Index
	ca   *CA
	opts Options

	proxy  *goproxy.ProxyHttpServer
	server *http.Server
	logw   *logWriter
	tail   *logRing
	counts counter
	heads  headCache // parsed response heads of the entries served
	clock  *Clock    // nil when the page clock is off
	// clockMax bounds the documents the clock goes into (MaxClockDocument; tests lower it)
	clockMax int64

	mu        sync.Mutex
	conns     map[*trackedConn]struct{}
	closed    bool
	closeErr  error
	closeOnce sync.Once

	dials    atomic.Int64 // outbound dials attempted (always refused)
	accepted atomic.Int64 // client connections accepted
}

// New makes a Server; it does not listen yet (see Listen, Serve, ListenAndServe).
func New(opts Options) (*Server, error) {
	if opts.Bundle == nil {
		return nil, errors.New("replay: no bundle")
	}
	if opts.CA == nil {
		return nil, errors.New("replay: no CA")
	}
	ix := opts.Index
	if ix == nil {
		if opts.Rules == nil {
			return nil, errors.New("replay: no rules and no index")
		}
		var err error
		if ix, err = NewIndex(opts.Bundle, opts.Rules, IndexOptions{RuleRoot: opts.RuleRoot}); err != nil {
			return nil, err
		}
	}
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	s := &Server{b: opts.Bundle, ix: ix, ca: opts.CA, opts: opts, conns: map[*trackedConn]struct{}{}}
	s.counts.c = newCounts()
	if opts.LogTail <= 0 {
		opts.LogTail = DefaultLogTail
	}
	s.tail = newLogRing(opts.LogTail)
	if opts.Clock && opts.Bundle.Manifest.CapturedFrom != "" {
		from, err := time.Parse(time.RFC3339Nano, opts.Bundle.Manifest.CapturedFrom)
		if err != nil {
			return nil, fmt.Errorf("replay: page clock: manifest captured_from %q is not an RFC 3339 time", opts.Bundle.Manifest.CapturedFrom)
		}
		s.clock = NewClock(from, opts.DeterministicRandom)
		s.clockMax = MaxClockDocument
	}
	if opts.Log != nil {
		s.logw = newLogWriter(opts.Log)
	}
	debug := opts.Debug
	if debug == nil {
		debug = io.Discard
	}

	p := goproxy.NewProxyHttpServer()
	p.Logger = log.New(debug, "goproxy: ", log.LstdFlags)
	// Never dial: every request is answered by s.handle, and these refuse if anything tries.
	p.Tr = &http.Transport{Proxy: nil, DialContext: s.refuseDial, DialTLSContext: s.refuseDial}
	p.ConnectDial = nil
	p.ConnectDialWithReq = func(_ *http.Request, network, addr string) (net.Conn, error) {
		return s.refuseDial(context.Background(), network, addr)
	}
	// HTTP/2 is accepted only to answer it with a clear 505 (see tlsConfig): clients that
	// can speak HTTP/1.1 are always given HTTP/1.1 by ALPN.
	p.AllowHTTP2 = true
	p.NonproxyHandler = http.HandlerFunc(s.serveDirect)
	p.OnRequest().HandleConnectFunc(func(host string, _ *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		return &goproxy.ConnectAction{Action: goproxy.ConnectMitm, TLSConfig: s.tlsConfig}, host
	})
	p.OnRequest().DoFunc(s.handle)
	s.proxy = p

	// HTTP/2 without TLS (prior knowledge) is accepted on the listener only to answer it
	// with a clear 505, properly framed.
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	s.server = &http.Server{
		Protocols:         &protos,
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       opts.IdleTimeout,
		ErrorLog:          log.New(debug, "http: ", log.LstdFlags),
		ConnState:         s.connState,
	}
	return s, nil
}

// Index is the server's lookup index.
func (s *Server) Index() *Index { return s.ix }

// Counts returns the request counts so far (what http://rr.control/stats serves).
func (s *Server) Counts() Counts { return s.counts.snapshot() }

func (s *Server) refuseDial(_ context.Context, network, addr string) (net.Conn, error) {
	s.dials.Add(1)
	return nil, fmt.Errorf("pab replay never connects out (refused %s dial to %s)", network, addr)
}

// tlsConfig is the MITM TLS configuration for a CONNECT to host. The leaf certificate is
// chosen per handshake from the client's SNI (else the CONNECT host) and cached by the CA.
// ALPN offers only http/1.1, except to a client that offers h2 and not http/1.1: that one
// gets h2, so that its requests reach the handler and are answered 505 with a log line
// instead of failing the handshake.
func (s *Server) tlsConfig(host string, _ *goproxy.ProxyCtx) (*tls.Config, error) {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			name := hello.ServerName
			if name == "" {
				name = host
			}
			cert, err := s.ca.LeafFor(name)
			if err != nil {
				return nil, err
			}
			protos := []string{"http/1.1"}
			if slices.Contains(hello.SupportedProtos, "h2") && !slices.Contains(hello.SupportedProtos, "http/1.1") {
				protos = []string{"h2"}
			}
			return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: protos}, nil
		},
	}, nil
}

// answer is what the proxy sends for one request, with the fields of its log line.
type answer struct {
	status int
	header http.Header
	body   io.Reader // nil for no body
	size   int64     // payload bytes of body

	source   string
	typ      string
	key      string
	entry    *warc.Entry
	record   string
	note     string
	rule     string // LogLine.Rule
	endpoint string // LogLine.Endpoint
	url      string // LogLine.URL (the normalized request URL) when already computed, else ""
}

// handle is the goproxy request handler: every request (plain HTTP, MITM HTTPS, HTTP/2)
// ends here and gets an answer from the recording; nothing is forwarded.
func (s *Server) handle(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	start := time.Now()
	if hostname(r.URL.Host) == ControlHost {
		return r, s.controlResponse(r)
	}
	a := s.answerFor(r)
	resp := a.response(r)
	s.finish(r, a, start)
	return r, resp
}

// answerFor reads the request body in full and decides the answer.
func (s *Server) answerFor(r *http.Request) *answer {
	body, total, bodyErr := readBody(r)
	typ := RequestType(r)
	u := normalizeURL(r.URL)
	urlStr := u.String()
	switch {
	case bodyErr != nil:
		a := textAnswer(http.StatusBadRequest, "text/plain; charset=utf-8", "pab replay: cannot read the request body\n")
		a.typ, a.note = typ, "request body: "+bodyErr.Error()
		return a
	case r.ProtoMajor >= 2:
		a := unsupportedAnswer(http.StatusHTTPVersionNotSupported, noteHTTP2, r.Method, urlStr)
		a.typ = typ
		return a
	case isWebSocketUpgrade(r):
		a := unsupportedAnswer(http.StatusNotImplemented, noteWebSocket, r.Method, urlStr)
		a.typ = typ
		return a
	}
	res, _ := s.ix.lookupNormalized(rules.Request{Method: r.Method, URL: u, Body: body, ContentType: r.Header.Get("Content-Type")}, false)
	var a *answer
	note := res.Note
	switch res.Source {
	case SourceBlocked:
		a = blockedAnswer()
	case SourceExact, SourceSearch, SourcePromo, SourceFuzzy:
		var err error
		a, err = s.recordedAnswer(res.Entry, r)
		if err != nil {
			if errors.Is(err, warc.ErrUnresolvedRevisit) {
				note = noteUnresolved
			} else {
				note = "cannot read the recording: " + err.Error()
			}
			a = s.missAnswer(r, typ, urlStr)
		} else {
			a.source = res.Source
		}
	}
	if a == nil {
		if isPreflight(r) {
			a = preflightAnswer(r)
		} else {
			a = s.missAnswer(r, typ, urlStr)
		}
	}
	if a.source != SourcePreflight {
		a.endpoint = res.Endpoint
		if res.Rule != "" || a.source != SourceMiss {
			a.rule = res.Rule // a miss keeps the xhr_not_found it was answered with
		}
	}
	if a.typ == "" {
		a.typ = typ
	}
	a.key = res.Key.String()
	if note != "" {
		a.note = joinNote(note, a.note)
	}
	if total > maxKeyBody {
		a.note = joinNote(a.note, fmt.Sprintf("request body of %d bytes matched on its first %d", total, maxKeyBody))
	}
	if headerHasToken(r.Header, "Upgrade", "h2c") {
		a.note = joinNote(a.note, "h2c upgrade ignored: answered over HTTP/1.1")
	}
	a.url = urlStr
	return a
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// readBody reads the whole request body: up to maxKeyBody bytes are kept for the key, the
// rest is read and discarded. It returns the kept bytes and the total length. Reading the
// body is also what sends "100 Continue" to a client that asked for it (Expect).
func readBody(r *http.Request) ([]byte, int64, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, 0, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxKeyBody+1))
	total := int64(len(body))
	if err == nil && total > maxKeyBody {
		var n int64
		n, err = io.Copy(io.Discard, r.Body)
		total += n
		body = body[:maxKeyBody]
	}
	return body, total, err
}

// recordedAnswer reads entry e's response from the recording. The parsed head (status,
// replayed header fields, where the payload lies in data.warc) comes from s.heads, so a
// response served again is not parsed again; the payload is always streamed from the
// WARC by offset.
func (s *Server) recordedAnswer(e *warc.Entry, r *http.Request) (*answer, error) {
	h, err := s.heads.get(s.b, e)
	if err != nil {
		return nil, err
	}
	a := &answer{
		status: h.status,
		header: h.header.Clone(),
		body:   h.body(),
		size:   h.size,
		entry:  e,
		record: h.recordID,
	}
	if s.clock != nil && h.clock {
		body, ok, err := readClockBody(a.body, a.size, s.clockMax)
		switch {
		case err != nil:
			return nil, fmt.Errorf("entry %s: read payload: %w", e.ID, err)
		case !ok:
			a.note = fmt.Sprintf("clock: document of %d bytes is over %d, served without the clock", a.size, s.clockMax)
		default:
			body, a.note = s.clock.Inject(a.header, body)
			a.body, a.size = bytes.NewReader(body), int64(len(body))
		}
	}
	return a, nil
}

// maxCachedHeads bounds the response heads a Server keeps parsed (a few hundred bytes
// each); when full, the cache starts again empty.
const maxCachedHeads = 1 << 14

// responseHead is the parsed head of one recorded response, shared read-only by every
// answer of its entry.
type responseHead struct {
	status   int
	header   http.Header // replayHeader of the recorded fields; cloned per answer
	clock    bool        // wantsClock of the recorded status and fields
	size     int64
	recordID string
	ra       io.ReaderAt // data.warc, read at off
	off      int64
	reader   io.Reader // the payload reader, when not a section of ra (then never cached)
}

// body returns a reader of the payload with its own position.
func (h *responseHead) body() io.Reader {
	if h.ra != nil {
		return io.NewSectionReader(h.ra, h.off, h.size)
	}
	return h.reader
}

// headCache keeps the parsed response heads of the entries served; safe for concurrent use.
type headCache struct {
	mu sync.RWMutex
	m  map[*warc.Entry]*responseHead
}

// get returns e's response head from the cache, or reads it from b (warc.Bundle.Response)
// and keeps it. Errors are not kept: the next request tries again.
func (c *headCache) get(b *warc.Bundle, e *warc.Entry) (*responseHead, error) {
	c.mu.RLock()
	h := c.m[e]
	c.mu.RUnlock()
	if h != nil {
		return h, nil
	}
	resp, err := b.Response(e)
	if err != nil {
		return nil, err
	}
	if resp.Status < 200 || resp.Status > 999 {
		return nil, fmt.Errorf("entry %s: recorded status %d cannot be replayed", e.ID, resp.Status)
	}
	h = &responseHead{status: resp.Status, header: replayHeader(resp.Header), clock: wantsClock(resp.Status, resp.Header),
		size: resp.Size, recordID: resp.RecordID}
	sr, ok := resp.Body.(*io.SectionReader)
	if !ok {
		h.reader = resp.Body
		return h, nil
	}
	h.ra, h.off, _ = sr.Outer()
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedHeads {
		c.m = make(map[*warc.Entry]*responseHead)
	}
	c.m[e] = h
	c.mu.Unlock()
	return h, nil
}

// dropFields are recorded response fields never replayed (see Server).
var dropFields = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true, "Transfer-Encoding": true,
	"Upgrade": true, "Content-Encoding": true, "Content-Length": true, "Alt-Svc": true,
}

// replayHeader copies the recorded header without hop-by-hop, encoding and length fields,
// and without fields whose name or value HTTP/1.1 does not allow (RFC 9110 section 5).
func replayHeader(rec http.Header) http.Header {
	drop := map[string]bool{}
	for _, v := range rec.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				drop[http.CanonicalHeaderKey(f)] = true
			}
		}
	}
	h := make(http.Header, len(rec))
	for name, vs := range rec {
		cn := http.CanonicalHeaderKey(name)
		if dropFields[cn] || drop[cn] || strings.HasPrefix(cn, "Proxy-") || !httpguts.ValidHeaderFieldName(name) {
			continue
		}
		for _, v := range vs {
			if httpguts.ValidHeaderFieldValue(v) {
				h[cn] = append(h[cn], v)
			}
		}
	}
	return h
}

// response turns the answer into the *http.Response goproxy writes: HTTP/1.1, an explicit
// Content-Length (the payload size), no body for HEAD, 1xx, 204 and 304.
func (a *answer) response(r *http.Request) *http.Response {
	resp := &http.Response{
		StatusCode: a.status,
		Status:     statusLine(a.status),
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     a.header,
		Request:    r,
		Body:       http.NoBody,
	}
	if a.status == http.StatusNoContent || a.status == http.StatusNotModified || a.status < 200 {
		resp.Header.Del("Content-Length")
		return resp
	}
	resp.Header.Set("Content-Length", strconv.FormatInt(a.size, 10))
	resp.ContentLength = a.size
	if r.Method == http.MethodHead || a.body == nil || a.size == 0 {
		return resp
	}
	resp.Body = io.NopCloser(io.LimitReader(a.body, a.size))
	return resp
}

func statusLine(code int) string {
	text := http.StatusText(code)
	if text == "" {
		text = "Status " + strconv.Itoa(code)
	}
	return strconv.Itoa(code) + " " + text
}

// finish counts the answer and queues its log line.
func (s *Server) finish(r *http.Request, a *answer, start time.Time) {
	s.counts.add(a.source, a.typ)
	u := a.url
	if u == "" {
		u = normalizeURL(r.URL).String()
	}
	line := LogLine{
		Time:     logTime(start),
		Method:   r.Method,
		URL:      u,
		Key:      a.key,
		Type:     a.typ,
		Dest:     logDest(r.Header.Get("Sec-Fetch-Dest")),
		Source:   a.source,
		Rule:     a.rule,
		Endpoint: a.endpoint,
		Status:   a.status,
		Record:   a.record,
		MS:       math.Round(float64(time.Since(start).Microseconds())) / 1000,
		Note:     a.note,
	}
	if a.entry != nil {
		line.Entry = a.entry.ID
	}
	// Encoded once, here, for both the in-memory tail and the log file.
	b := encodeLogLine(line)
	if b == nil {
		return
	}
	s.tail.add(b)
	if s.logw != nil {
		s.logw.send(b)
	}
}

// logDest is the Sec-Fetch-Dest value for the log: lower case, at most 32 bytes of letters
// and hyphens (the header's token syntax); anything else is left out.
func logDest(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	if len(v) > 32 {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 'a' || c > 'z') && c != '-' {
			return ""
		}
	}
	return v
}

// controlResponse answers http(s)://rr.control/...: /stats (JSON Counts), /log?tail=N
// (JSON Lines), /health ("ok").
func (s *Server) controlResponse(r *http.Request) *http.Response {
	var a *answer
	switch r.URL.Path {
	case "/stats":
		data, _ := json.Marshal(s.counts.snapshot())
		a = textAnswer(http.StatusOK, "application/json", string(data)+"\n")
	case "/health":
		a = textAnswer(http.StatusOK, "text/plain; charset=utf-8", "ok\n")
	case "/log":
		n := defaultTailLines
		if v := r.URL.Query().Get("tail"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 0 {
				a = textAnswer(http.StatusBadRequest, "text/plain; charset=utf-8", "pab replay control: tail must be a number of lines from 0\n")
				break
			}
		}
		a = textAnswer(http.StatusOK, "application/jsonl", string(s.tail.tail(n)))
	default:
		a = textAnswer(http.StatusNotFound, "text/plain; charset=utf-8", "pab replay control: /stats, /log?tail=N, /health\n")
	}
	if r.Body != nil {
		io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}
	return a.response(r)
}

// serveDirect answers requests made to the proxy itself rather than through it
// (GET http://PROXY-ADDR/stats): the control endpoints, and a 505 for an HTTP/2 preface.
func (s *Server) serveDirect(w http.ResponseWriter, r *http.Request) {
	var resp *http.Response
	if r.Method == "PRI" || r.ProtoMajor >= 2 {
		a := unsupportedAnswer(http.StatusHTTPVersionNotSupported, noteHTTP2, r.Method, r.RequestURI)
		a.typ = TypeOther
		s.finish(r, a, time.Now())
		resp = a.response(r)
	} else {
		resp = s.controlResponse(r)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// Listen opens the proxy's listening socket. A port in use gives the one-line error
// "listen ADDR: address already in use".
func (s *Server) Listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = s.opts.Listen
	}
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

// Serve answers proxy connections on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		l.Close()
		return nil
	}
	err := s.server.Serve(&trackedListener{Listener: l, s: s})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ListenAndServe listens on Options.Listen and serves until ctx is done or Close is
// called, then closes the server.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := s.Listen(s.opts.Listen)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	select {
	case <-ctx.Done():
		err = s.Close()
		<-done
		return err
	case err := <-done:
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		return err
	}
}

// SetLog makes w receive the JSON log (one LogLine per request), as Options.Log does. It
// must be called at most once, before Serve; it lets a caller open its log file only once
// Listen succeeded.
func (s *Server) SetLog(w io.Writer) {
	if s.logw == nil && w != nil {
		s.logw = newLogWriter(w)
	}
}

// Close stops listening, closes every client connection (MITM tunnels included) and
// flushes the log. It returns the first log write error. Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.server.Close()
		s.mu.Lock()
		conns := make([]*trackedConn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		if s.logw != nil {
			s.closeErr = s.logw.close()
		}
	})
	return s.closeErr
}

// trackedListener registers every accepted connection so Close can close hijacked ones
// (goproxy's MITM tunnels outlive net/http's knowledge of them).
type trackedListener struct {
	net.Listener
	s *Server
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.accepted.Add(1)
	tc := &trackedConn{Conn: c, s: l.s, idle: l.s.opts.IdleTimeout}
	l.s.mu.Lock()
	closed := l.s.closed
	if !closed {
		l.s.conns[tc] = struct{}{}
	}
	l.s.mu.Unlock()
	if closed {
		c.Close()
		return nil, net.ErrClosed
	}
	return tc, nil
}

// trackedConn is a client connection. Once net/http has handed it to goproxy (hijacked,
// for CONNECT), every read and write pushes its deadline idle ahead, so a tunnel nobody
// uses is closed after the idle timeout; before that, net/http's own timeouts apply.
type trackedConn struct {
	net.Conn
	s        *Server
	idle     time.Duration
	hijacked atomic.Bool
	once     sync.Once
}

func (c *trackedConn) Read(p []byte) (int, error) {
	if c.hijacked.Load() {
		c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Read(p)
}

func (c *trackedConn) Write(p []byte) (int, error) {
	if c.hijacked.Load() {
		c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Write(p)
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

func (s *Server) connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*trackedConn); ok && st == http.StateHijacked {
		tc.hijacked.Store(true)
	}
}
