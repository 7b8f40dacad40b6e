// Package record is pab's record mode: an HTTP/HTTPS proxy (the MITM shell of
// internal/mitm, intercepting HTTPS with pab's CA like the replay proxy) that forwards
// every request to the real site, returns its answer to the client unchanged, and appends
// each exchange to a journal (a WARC file, see journal.go) as it completes. Build turns
// the journal into a bundle. Recorder is an http.Handler, the twin of replay.Server;
// Session runs one pab record session with it (session.go).
package record

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
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
	"time"

	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/tlsca"
)

// File names inside the recorder's work directory.
const (
	JournalFile = "journal.warc"     // the exchanges recorded so far (WARC 1.1)
	LogFile     = "record.log.jsonl" // one LogLine per request, appended
)

// DefaultMaxBody bounds each stored body (request or decoded response), in bytes: 256 MiB.
// A larger body is forwarded but its exchange is not stored (the log says so).
const DefaultMaxBody int64 = 256 << 20

// DefaultShutdownWait bounds how long Shutdown waits for exchanges in flight.
const DefaultShutdownWait = 10 * time.Second

// Options configure a Recorder.
type Options struct {
	// WorkDir holds the journal (JournalFile) and the log (LogFile); created if needed.
	// A journal left there by a killed recorder is recovered and appended to.
	WorkDir string
	// CA signs the per-host certificates of the HTTPS interception (required).
	CA *tlsca.CA
	// DisableHTTP2 turns HTTP/2 off inside tunnels (h2-only clients are answered 505);
	// by default clients may speak h2 to the recorder. Upstream requests are HTTP/1.1.
	DisableHTTP2 bool
	// IdleTimeout, ReadHeaderTimeout and HandshakeTimeout bound client connections and
	// tunnels as in mitm.Config (0: the mitm defaults).
	IdleTimeout, ReadHeaderTimeout, HandshakeTimeout time.Duration
	// Limits are the proxy shell's bounds in time and memory on streams, request bodies
	// and answers, the same as replay's (mitm.Limits; zero fields: their defaults,
	// docs/record.md "Bounds"). Their per-connection request rate also bounds the
	// upstream requests one client connection can cause.
	Limits mitm.Limits
	// Resolve maps "host:port" to the "addr:port" dialed instead (see ParseResolve).
	Resolve map[string]string
	// RootCAs verifies upstream TLS certificates; nil means the system roots.
	RootCAs *x509.CertPool
	// Redact removes personal data before anything is stored (see Redactor).
	Redact *Redactor
	// MaxBody bounds stored bodies; 0 means DefaultMaxBody.
	MaxBody int64
	// ShutdownWait bounds Shutdown's wait for exchanges in flight; 0 means DefaultShutdownWait.
	ShutdownWait time.Duration
	// OnStoreError, when set, is called once, when the journal first cannot be written or
	// synced (ENOSPC, EIO, ...): err names the journal file and the cause, stored is the
	// number of exchanges the journal holds. From then on every request gets a 503 (see
	// Recorder.StoreError). It runs on the goroutine that met the error and must not block.
	OnStoreError func(err error, stored int)
	// Debug receives the proxy shell's, goproxy's and net/http's warnings; nil discards
	// them.
	Debug io.Writer
	// Rules, when set, are the site rules in effect for the task (its repository's sites/
	// and its rules/, docs/rules.md): an exchange an `exclude` location matches is
	// forwarded as any other but not stored, and its log line ("not-stored") names the
	// pattern and where it is written. RuleRoot is the directory rule files are named
	// relative to in that note (the task repository); "" names them as loaded.
	Rules    *rules.Set
	RuleRoot string
}

// LogLine is one line of the record log (LogFile), JSON.
type LogLine struct {
	// Time is when the request arrived (RFC 3339, UTC, milliseconds).
	Time string `json:"time"`
	// Event is "stored" (the exchange is in the journal), "not-stored" (forwarded, not
	// stored; Note says why), "upstream-error" (no answer from upstream: the client got a
	// 502), "store-error" (the journal cannot be written; Note gives the error),
	// "refused" (not forwarded: the client got a 503 because the journal cannot be
	// written, or the proxy shell answered the request itself before it reached the
	// recorder, Status and Note saying how: a header over the bound, a request it cannot
	// read; mitm.Config.OnRefuse), "recovered" (a journal cut after a crash; Note says what) or
	// "started"/"stopped".
	Event  string `json:"event"`
	Method string `json:"method,omitempty"`
	// URL is the request URL after redaction.
	URL    string `json:"url,omitempty"`
	Status int    `json:"status,omitempty"`
	// Type is the resource type stored as RR-Resource-Type (recording.RequestResourceType:
	// "document", "stylesheet", "script", "image", "font", "media", "fetch", "manifest",
	// "other").
	Type string `json:"type,omitempty"`
	// Bytes is the stored (decoded) response body size.
	Bytes int64  `json:"bytes,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Stats counts what a Recorder did.
type Stats struct {
	Stored        int64 `json:"stored"`
	NotStored     int64 `json:"not_stored"`
	UpstreamError int64 `json:"upstream_error"`
	// Refused counts the requests answered 503 because the journal cannot be written.
	Refused int64 `json:"refused"`
}

// Recorder is the record-mode proxy. Create it with New, serve with Serve, stop with
// Shutdown, then build the bundle from JournalPath with Build.
type Recorder struct {
	opts    Options
	journal *journal
	logf    *os.File
	logMu   sync.Mutex
	tr      *http.Transport
	shell   *mitm.Server

	inflight sync.WaitGroup
	stopping atomic.Bool
	probed   sync.Map // host -> struct{}

	mu sync.Mutex

	stored, notStored, upErr, refused atomic.Int64
	storeErr                          atomic.Pointer[error] // the journal's first write or sync error
	stopSync                          chan struct{}
	// hardCtx ends every upstream request (forwarded or probe) when cancelled: Shutdown
	// cancels it once its wait is over.
	hardCtx      context.Context
	hardCancel   context.CancelFunc
	syncDone     chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
}

// New opens the work directory: it creates it, opens and locks the journal (recovering
// a partial last exchange, logged as "recovered") and opens the log. Recover tells what
// was kept.
func New(opts Options) (*Recorder, RecoverReport, error) {
	if opts.CA == nil {
		return nil, RecoverReport{}, errors.New("record: no CA")
	}
	if opts.WorkDir == "" {
		return nil, RecoverReport{}, errors.New("record: no work directory")
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.ShutdownWait <= 0 {
		opts.ShutdownWait = DefaultShutdownWait
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return nil, RecoverReport{}, fmt.Errorf("record: %w", err)
	}
	j, rep, err := openJournal(JournalPath(opts.WorkDir))
	if err != nil {
		return nil, rep, err
	}
	lf, err := os.OpenFile(LogPath(opts.WorkDir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		j.close()
		return nil, rep, fmt.Errorf("record: open log: %w", err)
	}
	r := &Recorder{opts: opts, journal: j, logf: lf,
		stopSync: make(chan struct{}), syncDone: make(chan struct{})}
	r.hardCtx, r.hardCancel = context.WithCancel(context.Background())
	j.onFail = r.fail
	if rep.Cut > 0 {
		r.log(LogLine{Time: recording.FormatTime(time.Now()), Event: "recovered",
			Note: fmt.Sprintf("journal cut at offset %d (%d bytes removed: %s); %d whole exchanges kept", rep.Size, rep.Cut, rep.Reason, rep.Exchanges)})
	}
	roots := opts.RootCAs
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	r.tr = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := opts.Resolve[strings.ToLower(addr)]; ok {
				addr = to
			}
			return dialer.DialContext(ctx, network, addr)
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DisableCompression:    true, // keep the upstream bytes (library-bugs.md G9)
		ForceAttemptHTTP2:     false,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
	}
	shell, err := mitm.New(mitm.Config{
		Handler: r,
		Direct: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "pab record is a proxy: send requests through it", http.StatusBadRequest)
		}),
		CA:                opts.CA,
		HTTP2:             !opts.DisableHTTP2,
		IdleTimeout:       opts.IdleTimeout,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		HandshakeTimeout:  opts.HandshakeTimeout,
		Limits:            recordLimits(opts.Limits),
		ErrorLog:          opts.Debug,
		OnRefuse:          r.shellRefused,
	})
	if err != nil {
		j.close()
		lf.Close()
		return nil, rep, fmt.Errorf("record: %w", err)
	}
	r.shell = shell
	go r.syncLoop()
	return r, rep, nil
}

// JournalPath is the journal's path in workDir.
func JournalPath(workDir string) string { return workDir + string(os.PathSeparator) + JournalFile }

// LogPath is the log's path in workDir.
func LogPath(workDir string) string { return workDir + string(os.PathSeparator) + LogFile }

// Stats returns the counts so far.
func (r *Recorder) Stats() Stats {
	return Stats{Stored: r.stored.Load(), NotStored: r.notStored.Load(), UpstreamError: r.upErr.Load(), Refused: r.refused.Load()}
}

// StoreError is the first error met writing or syncing the journal ("write journal PATH:
// no space left on device"), or nil. Once it is set the recorder answers every request
// with a 503 and stores nothing more; the journal keeps the exchanges stored before it.
func (r *Recorder) StoreError() error {
	if p := r.storeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records the journal's first write or sync error, logs it and tells
// Options.OnStoreError (the journal calls it once).
func (r *Recorder) fail(err error) {
	if !r.storeErr.CompareAndSwap(nil, &err) {
		return
	}
	stored := r.journal.stored()
	r.log(LogLine{Time: recording.FormatTime(time.Now()), Event: "store-error",
		Note: fmt.Sprintf("%v; %d exchanges stored; later requests are answered 503", err, stored)})
	if r.opts.OnStoreError != nil {
		r.opts.OnStoreError(err, stored)
	}
}

func (r *Recorder) syncLoop() {
	defer close(r.syncDone)
	t := time.NewTicker(syncEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.journal.sync()
		case <-r.stopSync:
			return
		}
	}
}

// Listen opens the proxy's listening socket; a port in use gives
// "listen ADDR: address already in use".
func Listen(addr string) (net.Listener, error) { return mitm.Listen(addr) }

// Serve answers proxy connections on ln until Shutdown; it then returns nil.
func (r *Recorder) Serve(ln net.Listener) error {
	r.mu.Lock()
	if r.stopping.Load() {
		r.mu.Unlock()
		ln.Close()
		return nil
	}
	r.mu.Unlock()
	r.log(LogLine{Time: recording.FormatTime(time.Now()), Event: "started", Note: "listening on " + ln.Addr().String()})
	err := r.shell.Serve(ln)
	if r.stopping.Load() {
		return nil
	}
	return err
}

// Shutdown stops the recording and drains it, within Options.ShutdownWait:
//
//  1. it stops accepting connections; a request that still arrives gets a 503;
//  2. it waits until every request in flight, plain HTTP or inside a tunnel, over
//     HTTP/1.1 or HTTP/2, has been answered (its exchange stored or logged as not
//     stored), and for the not-found probes; connections close once idle;
//  3. when the wait is over, upstream requests still running are cancelled (logged as
//     not stored) and every client connection is closed.
//
// It then fsyncs and closes the journal and the log. It returns an error when the
// journal may not end after its last whole exchange, or cannot be synced or closed; a
// write error met while recording is reported by StoreError (and Options.OnStoreError),
// not here, once the journal was cut back to its whole exchanges. Safe to call more than
// once.
func (r *Recorder) Shutdown() error {
	r.shutdownOnce.Do(func() {
		r.mu.Lock()
		r.stopping.Store(true)
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.ShutdownWait)
		defer cancel()
		drained := r.shell.Shutdown(ctx) == nil
		done := make(chan struct{})
		go func() { r.inflight.Wait(); close(done) }()
		timedOut := !drained
		if drained {
			select {
			case <-done:
			case <-ctx.Done():
				timedOut = true
			}
		}
		r.hardCancel() // ends upstream requests still running, probes included
		r.shell.Close()
		if timedOut {
			// Cancelled requests and closed connections end the exchanges still running;
			// give them a moment to be logged as not stored.
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		}
		r.tr.CloseIdleConnections()
		close(r.stopSync)
		<-r.syncDone
		st := r.Stats()
		r.log(LogLine{Time: recording.FormatTime(time.Now()), Event: "stopped",
			Note: fmt.Sprintf("%d stored, %d not stored, %d upstream errors, %d refused", st.Stored, st.NotStored, st.UpstreamError, st.Refused)})
		r.shutdownErr = r.journal.close()
		r.logMu.Lock()
		if err := r.logf.Close(); err != nil && r.shutdownErr == nil {
			r.shutdownErr = fmt.Errorf("record: close log: %w", err)
		}
		r.logMu.Unlock()
	})
	return r.shutdownErr
}

func (r *Recorder) log(l LogLine) {
	b, _ := json.Marshal(l)
	b = append(b, '\n')
	r.logMu.Lock()
	defer r.logMu.Unlock()
	_, _ = r.logf.Write(b)
}

// shellRefused logs a request the proxy shell answered itself (mitm.Config.OnRefuse): a
// "refused" line with the method and the URL as far as the shell read them (redacted),
// the status sent and the shell's note.
func (r *Recorder) shellRefused(x mitm.Refusal) {
	note := x.Note
	if x.URLCut {
		note += fmt.Sprintf("; URL cut (%d bytes of it read)", x.URLRead)
	}
	r.log(LogLine{Time: recording.FormatTime(x.Time), Event: "refused", Method: x.Method, URL: r.opts.Redact.String(x.URL),
		Status: x.Status, Note: note})
}

// refuse answers a request the recorder cannot store: 503, with the journal error and
// the number of exchanges stored, and a "refused" log line.
func (r *Recorder) refuse(req *http.Request, start time.Time, err error) *http.Response {
	r.refused.Add(1)
	u := req.URL.String()
	if req.URL.Host == "" {
		u = "http://" + req.Host + req.URL.RequestURI()
	}
	r.log(LogLine{Time: recording.FormatTime(start), Event: "refused", Method: req.Method, URL: r.opts.Redact.String(u),
		Type: recording.RequestResourceType(req.Header, req.URL.Path), Note: "the journal cannot be written"})
	if req.Body != nil {
		// a bounded read, so that a small body does not break the connection
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	}
	return textResponse(req, http.StatusServiceUnavailable,
		fmt.Sprintf("pab record: cannot store exchanges: %v; stop with Ctrl-C, %d exchanges were stored\n", err, r.journal.stored()))
}

// ServeHTTP forwards one proxied request (plain HTTP, or HTTPS inside a tunnel, over
// HTTP/1.1 or HTTP/2; r.URL absolute) upstream and writes the answer back unchanged but
// for its hop-by-hop fields; the exchange is stored once the answer's body has been
// read to its end.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	resp := r.handle(req)
	defer resp.Body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	mitm.RemoveHopByHop(h)
	for _, f := range []string{"Date", "Content-Type"} { // as upstream sent them, or absent
		if _, ok := resp.Header[f]; !ok {
			h[f] = nil
		}
	}
	delete(h, "Content-Length")
	// a HEAD answer keeps the length of the body a GET would get
	if resp.ContentLength >= 0 && (bodyAllowed(req.Method, resp.StatusCode) || req.Method == http.MethodHead && bodyAllowed(http.MethodGet, resp.StatusCode)) {
		h["Content-Length"] = []string{strconv.FormatInt(resp.ContentLength, 10)}
	}
	w.WriteHeader(resp.StatusCode)
	// a streamed body (chunked, server-sent events) is passed on as it comes
	streamed := resp.ContentLength < 0 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	_, _ = mitm.Copy(w, resp.Body, streamed)
}

// handle forwards one request and returns the upstream answer (or the recorder's own)
// with a body that records the exchange once it has been read to the end.
func (r *Recorder) handle(req *http.Request) *http.Response {
	start := time.Now()
	// stopping is checked and the exchange counted under mu, so that no Add can start
	// after Shutdown's Wait
	r.mu.Lock()
	if r.stopping.Load() {
		r.mu.Unlock()
		return textResponse(req, http.StatusServiceUnavailable, "pab record is stopping\n")
	}
	if err := r.StoreError(); err != nil {
		r.mu.Unlock()
		return r.refuse(req, start, err)
	}
	r.inflight.Add(1)
	r.mu.Unlock()
	if req.URL.Scheme == "" {
		req.URL.Scheme = "http"
	}
	if req.URL.Host == "" {
		req.URL.Host = req.Host
	}
	p := &pending{r: r, start: start, method: req.Method, typ: recording.RequestResourceType(req.Header, req.URL.Path),
		url: r.opts.Redact.String(req.URL.String()), host: strings.ToLower(req.URL.Host), scheme: req.URL.Scheme}
	if isUpgrade(req) {
		p.skip = "protocol upgrade (WebSocket) is not recorded"
		p.done(0, "")
		return textResponse(req, http.StatusNotImplemented, "pab record does not record WebSocket or other upgrades\n")
	}
	if req.ProtoMajor >= 2 && r.opts.DisableHTTP2 {
		p.skip = "HTTP/2 request: HTTP/2 is turned off"
		p.done(0, "")
		return textResponse(req, http.StatusHTTPVersionNotSupported, "pab record: HTTP/2 is turned off\n")
	}
	out, err := p.outbound(req)
	if err != nil {
		p.upstreamError(err)
		return textResponse(req, http.StatusBadRequest, "pab record: cannot read the request body\n")
	}
	// exclude (docs/rules.md): forwarded, so the person recording still sees the page (a
	// bot check to complete), but never stored
	if why := r.excluded(req.URL); why != "" {
		p.skip = why
	}
	// the upstream request ends with the client's, or when Shutdown's wait is over
	ctx, cancel := context.WithCancel(out.Context())
	stop := context.AfterFunc(r.hardCtx, cancel)
	p.cancel = func() { stop(); cancel() }
	resp, err := r.tr.RoundTrip(out.WithContext(ctx))
	if err != nil {
		p.upstreamError(err)
		return textResponse(req, http.StatusBadGateway, "pab record: upstream error: "+err.Error()+"\n")
	}
	p.resp = resp
	dest := strings.ToLower(req.Header.Get("Sec-Fetch-Dest"))
	if dest == "document" && strings.EqualFold(req.Header.Get("Sec-Fetch-Mode"), "navigate") &&
		(req.Method == http.MethodGet || req.Method == http.MethodPost) {
		if resp.StatusCode < 300 || resp.StatusCode >= 400 {
			p.page = req.Method
		}
		p.probeHeader = out.Header.Clone()
	}
	if !bodyAllowed(req.Method, resp.StatusCode) || resp.Body == nil || resp.Body == http.NoBody {
		if resp.Body != nil {
			resp.Body.Close()
		}
		resp.Body = http.NoBody
		p.finish(nil, nil)
		return resp
	}
	resp.Body = &captureBody{rc: resp.Body, p: p, max: r.opts.MaxBody}
	return resp
}

// excluded returns why u is not stored when an `exclude` location of the rules in effect
// matches it ("excluded by rules: exclude pattern \"www.shop.example/verify/**\"
// (sites/shop.yaml:7)"), else "".
func (r *Recorder) excluded(u *url.URL) string {
	if r.opts.Rules == nil {
		return ""
	}
	file, line, pat, ok := r.opts.Rules.ExcludedBy(u)
	if !ok {
		return ""
	}
	if root := r.opts.RuleRoot; root != "" {
		if rel, ok := pathx.Rel(root, file); ok {
			file = rel
		}
	}
	return fmt.Sprintf("excluded by rules: exclude pattern %q (%s:%d)", pat, file, line)
}

// probe requests, once per host, a path that cannot exist with the headers of the
// host's first document, so the site's own 404 page is recorded (page note
// NoteNotFoundProbe; Build puts a 404 HTML answer in manifest.not_found).
func (r *Recorder) probe(doc *pending) {
	if r.stopping.Load() || r.StoreError() != nil {
		return
	}
	if _, seen := r.probed.LoadOrStore(doc.host, struct{}{}); seen {
		return
	}
	u := probeURL(doc.scheme, doc.host)
	hdr := doc.probeHeader.Clone()
	for _, f := range []string{"If-None-Match", "If-Modified-Since", "Content-Type", "Content-Length", "Referer", "Origin"} {
		hdr.Del(f)
	}
	r.inflight.Add(1) // doc still holds its count, so this Add cannot race with Wait
	go func() {
		start := time.Now()
		// stored redacted like every other exchange (the host itself may be a redacted value)
		p := &pending{r: r, start: start, method: http.MethodGet, typ: recording.ResourceDocument, url: r.opts.Redact.String(u),
			host: doc.host, scheme: doc.scheme, page: http.MethodGet, note: NoteNotFoundProbe, reqHdr: hdr}
		ctx, cancel := context.WithTimeout(r.hardCtx, 2*time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			p.upstreamError(err)
			return
		}
		req.Header = hdr
		resp, err := r.tr.RoundTrip(req)
		if err != nil {
			p.upstreamError(err)
			return
		}
		p.resp = resp
		cb := &captureBody{rc: resp.Body, p: p, max: r.opts.MaxBody}
		_, _ = io.Copy(io.Discard, cb)
		cb.Close()
	}()
}

// probeURL is the not-found probe's URL for a site: /pab-not-found-HEX, HEX the first
// 6 bytes of the sha256 of the host (with port, lower case).
func probeURL(scheme, host string) string {
	sum := sha256.Sum256([]byte(host))
	return scheme + "://" + host + "/pab-not-found-" + hex.EncodeToString(sum[:6])
}

func isUpgrade(req *http.Request) bool {
	if req.Method == http.MethodConnect && req.ProtoMajor >= 2 {
		return true // extended CONNECT (RFC 8441): WebSocket over HTTP/2
	}
	for _, v := range req.Header.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "upgrade") {
				return true
			}
		}
	}
	return req.Header.Get("Upgrade") != ""
}

func textResponse(req *http.Request, status int, text string) *http.Response {
	return &http.Response{
		StatusCode:    status,
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Length": {strconv.Itoa(len(text))}},
		ContentLength: int64(len(text)),
		Body:          io.NopCloser(strings.NewReader(text)),
		Request:       req,
	}
}

func parseAbs(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute URL", s)
	}
	return u, nil
}

// ParseResolve parses a --resolve value HOST:PORT:ADDR as curl does: connections to
// HOST:PORT go to ADDR:PORT. ADDR may carry its own port (HOST:PORT:ADDR:PORT2, or
// [v6addr]:PORT2) to dial another port. It returns the "host:port" key (lower case) and
// the address dialed.
func ParseResolve(s string) (from, to string, err error) {
	host, rest, ok := strings.Cut(s, ":")
	port, addr, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || host == "" || addr == "" {
		return "", "", fmt.Errorf("--resolve %q: want HOST:PORT:ADDR", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("--resolve %q: bad port %q", s, port)
	}
	for _, c := range host { // a host name: letters, digits, '-', '.', '_'
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", "", fmt.Errorf("--resolve %q: %q is not a host name", s, host)
		}
	}
	from = strings.ToLower(net.JoinHostPort(host, port))
	if h, p, err := net.SplitHostPort(addr); err == nil && net.ParseIP(h) != nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", "", fmt.Errorf("--resolve %q: bad port %q", s, p)
		}
		return from, net.JoinHostPort(h, p), nil
	}
	ip := strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	if net.ParseIP(ip) == nil {
		return "", "", fmt.Errorf("--resolve %q: %q is not an IP address", s, addr)
	}
	return from, net.JoinHostPort(ip, port), nil
}

// ParseResolves is Options.Resolve from several ParseResolve values (a later one for the
// same HOST:PORT wins); the first bad value is the error, as ParseResolve gives it.
func ParseResolves(values []string) (map[string]string, error) {
	m := map[string]string{}
	for _, s := range values {
		from, to, err := ParseResolve(s)
		if err != nil {
			return nil, err
		}
		m[from] = to
	}
	return m, nil
}

// recordLimits is l with the per-connection request rate applied to HTTP/1.1 connections
// as well (mitm.Limits.RateHTTP1): each request pab record answers is one to the site, so
// a client connection forwards no more than the documented rate, whatever its protocol.
func recordLimits(l mitm.Limits) mitm.Limits {
	l.RateHTTP1 = true
	return l
}
