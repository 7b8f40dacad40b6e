package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/tlsca"
)

// DefaultListen is the proxy's default address.
const DefaultListen = "127.0.0.1:8899"

// ControlHost is the host name of the proxy's own endpoints: http://rr.control/stats (JSON
// Counts), http://rr.control/log?tail=N (the last N log lines as JSON Lines, oldest first;
// N defaults to 100 and is capped by Options.LogTail) and http://rr.control/health ("ok"), over http or https through the proxy, or
// directly as http://PROXY-ADDR/stats. Control requests are neither logged nor counted.
// The host is matched in any case, with or without a trailing dot ("RR.Control." too);
// see IsControlHost.
const ControlHost = "rr.control"

// IsControlHost reports whether host (a URL host or Host header, with or without a port)
// names ControlHost: compared without case, a trailing dot ignored.
func IsControlHost(host string) bool {
	h := strings.TrimSuffix(hostname(host), ".")
	return len(h) == len(ControlHost) && strings.EqualFold(h, ControlHost)
}

// maxKeyBody bounds the part of a request body kept for the matching key. Longer bodies are
// still read to the end (and discarded) before answering; their key uses the first
// maxKeyBody bytes and the log line says so.
const maxKeyBody = 32 << 20

// maxMemBody is the largest request body one request keeps in memory; the kept part of a
// larger body goes to a temporary file (see Options.BodyMemory).
const maxMemBody = 8 << 20

// DefaultBodyMemory is Options.BodyMemory's default: 64 MiB of request bodies in memory,
// all requests together.
const DefaultBodyMemory int64 = 64 << 20

// DefaultBodySpill is Options.BodySpill's default: 1 GiB of request bodies in temporary
// files, all requests together.
const DefaultBodySpill int64 = 1 << 30

// DefaultIdleTimeout closes client connections and tunnels idle for this long.
const DefaultIdleTimeout = mitm.DefaultIdleTimeout

// DefaultShutdownWait bounds how long ListenAndServe waits, once its context ends, for the
// requests in flight to be answered before it closes every connection.
const DefaultShutdownWait = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Bundle is the recording to serve (required).
	Bundle *recording.Bundle
	// Rules are the site rules in effect; required unless Index is given.
	Rules *rules.Set
	// Index is the lookup index, built from Bundle (NewIndex); when nil, New builds it from
	// Bundle and Rules. Servers may share an index and its bundle.
	Index *Index
	// RuleRoot is IndexOptions.RuleRoot for the index New builds (unused with Index).
	RuleRoot string
	// CA signs the per-host certificates of the HTTPS interception (required).
	CA *tlsca.CA
	// Log, when set, receives one JSON line (LogLine) per proxied request. An open file of
	// the null device (os.DevNull) is not written at all.
	Log io.Writer
	// Listen is the address ListenAndServe listens on (default DefaultListen).
	Listen string
	// IdleTimeout closes a client connection or tunnel on which no request has been
	// active this long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request header (default
	// mitm.DefaultReadHeaderTimeout); HandshakeTimeout bounds a tunnel's TLS handshake
	// (default mitm.DefaultHandshakeTimeout).
	ReadHeaderTimeout, HandshakeTimeout time.Duration
	// Limits are the proxy shell's bounds in time and memory on streams, request bodies
	// and answers (mitm.Limits; zero fields: their defaults, docs/replay.md "Connections").
	Limits mitm.Limits
	// DisableHTTP2 turns HTTP/2 off inside tunnels: clients are offered http/1.1 only by
	// ALPN, and a client that speaks only h2 is answered 505. By default h2 is offered
	// and preferred (RFC 9113).
	DisableHTTP2 bool
	// ShutdownWait bounds ListenAndServe's drain of requests in flight once its context
	// ends (default DefaultShutdownWait).
	ShutdownWait time.Duration
	// BodyMemory bounds the request body bytes held in memory by all requests at once
	// (default DefaultBodyMemory). Replay reads every body before answering, and keeps up
	// to 32 MiB of it for the key: a body of at most 8 MiB is kept in memory while it
	// fits under BodyMemory; a larger one, or one that does not fit, goes to a temporary
	// file in SpillDir. The temporary files are read back for their key one at a time,
	// so request bodies take at most BodyMemory + 32 MiB of memory.
	BodyMemory int64
	// BodySpill bounds the request body bytes kept in temporary files by all requests at
	// once (default DefaultBodySpill; negative: none). A body that fits under neither cap
	// is read to the end and answered 413, and its log line says why.
	BodySpill int64
	// SpillDir is where request bodies are spilled ("" is os.TempDir()). The files are
	// removed as soon as they are created, so nothing is left behind.
	SpillDir string
	// Debug, when set, receives the proxy shell's, goproxy's and net/http's warnings (TLS
	// handshake errors, malformed requests, HTTP/2 protocol errors). Nil discards them.
	Debug io.Writer
	// Clock turns on the page clock (see Clock): every text/html answer whose body is HTML
	// (recorded, of any status with a body, the site's own 404 page and pab's own 404 page
	// included) gets a script that sets Date to the manifest's captured_from. A bundle
	// without captured_from (no exchanges) is served without it.
	Clock bool
	// DeterministicRandom, with Clock, also makes Math.random and crypto.getRandomValues
	// repeatable per page URL.
	DeterministicRandom bool
	// Recording, when set, is the lowercase hex sha256 identifying the recording served
	// (the task's recording.HashRecording, or a hash of the bundle's files), and RecordingOf says
	// which ("recording" or "bundle"): the log then starts with one LogHeader line naming
	// it, so that pab grade can tell a log written against another recording.
	Recording, RecordingOf string
	// LogTail is how many log lines http://rr.control/log?tail=N can return (default
	// DefaultLogTail). The lines are kept in memory whether or not Log is set, at most
	// DefaultLogTailBytes of them; the oldest go first.
	LogTail int
}

// Server is the replay proxy. Its ServeHTTP answers every request only from the recording
// (or with a miss); Serve runs it behind pab's MITM shell (internal/mitm), which answers
// plain-HTTP proxy requests and intercepts every CONNECT with pab's CA, over HTTP/1.1 and
// HTTP/2. It never opens an outbound connection: it has no transport and no dialer.
//
// Responses carry the recorded status and header fields, except hop-by-hop fields
// (Connection and the fields it names, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
// Upgrade), Alt-Svc (it advertises upstream endpoints that do not exist offline) and
// Content-Length, which is set to the payload size. No field is added: net/http's
// automatic Date and sniffed Content-Type are suppressed. Content-Encoding is sent as
// stored: the bundle writer removes it from every payload it decoded, so a stored
// Content-Encoding means the payload could not be decoded and is served as the encoded
// bytes it is (bundle-format.md, rule F4). The payload is streamed from the WARC file by
// offset, except for HTML documents that get the page clock (Options.Clock): those are
// read whole, rewritten by Clock.Inject, and their Content-Length is the rewritten size.
// HEAD answers carry no body; neither do 204 and 304 answers.
type Server struct {
	b    *recording.Bundle
	ix   *Index
	ca   *tlsca.CA
	opts Options

	shell  *mitm.Server
	debug  *log.Logger // Options.Debug (discarded when nil)
	logw   *logWriter
	tail   *logRing
	counts counter
	heads  headCache // parsed response heads of the entries served
	clock  *Clock    // nil when the page clock is off
	// clockMax bounds the documents the clock goes into (MaxClockDocument; tests lower it)
	clockMax int64
	// request bodies being read: bytes held in memory and in temporary files, and the
	// lock under which one spilled body at a time is read back for its key
	bodyMem, bodyDisk byteBudget
	spillMu           sync.Mutex

	closeOnce sync.Once
	closeErr  error
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
	if ix != nil && ix.b != opts.Bundle {
		// the answers are read from Bundle at the index's offsets, and the heads the index's
		// memo keeps are the bundle's (servedResult.head)
		return nil, errors.New("replay: the index is of another bundle than Options.Bundle")
	}
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
	if opts.ShutdownWait <= 0 {
		opts.ShutdownWait = DefaultShutdownWait
	}
	if opts.BodyMemory <= 0 {
		opts.BodyMemory = DefaultBodyMemory
	}
	if opts.BodySpill == 0 {
		opts.BodySpill = DefaultBodySpill
	}
	s := &Server{b: opts.Bundle, ix: ix, ca: opts.CA, opts: opts}
	debugOut := opts.Debug
	if debugOut == nil {
		debugOut = io.Discard
	}
	s.debug = log.New(debugOut, "replay: ", log.LstdFlags)
	s.bodyMem.max, s.bodyDisk.max = opts.BodyMemory, max(opts.BodySpill, 0)
	if opts.LogTail <= 0 {
		opts.LogTail = DefaultLogTail
	}
	s.tail = newLogRing(opts.LogTail)
	s.counts.other, s.counts.mu = newCounts(), &s.tail.mu
	if opts.Clock && opts.Bundle.Manifest.CapturedFrom != "" {
		from, err := time.Parse(time.RFC3339Nano, opts.Bundle.Manifest.CapturedFrom)
		if err != nil {
			return nil, fmt.Errorf("replay: page clock: manifest captured_from %q is not an RFC 3339 time", opts.Bundle.Manifest.CapturedFrom)
		}
		s.clock = NewClock(from, opts.DeterministicRandom)
		s.clockMax = MaxClockDocument
	}
	if opts.Log != nil {
		s.setLog(opts.Log)
	}
	shell, err := mitm.New(mitm.Config{
		Handler:           s,
		Direct:            http.HandlerFunc(s.serveDirect),
		CA:                opts.CA,
		HTTP2:             !opts.DisableHTTP2,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		HandshakeTimeout:  opts.HandshakeTimeout,
		IdleTimeout:       opts.IdleTimeout,
		Limits:            opts.Limits,
		ErrorLog:          opts.Debug,
		OnRefuse:          s.refused,
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	s.shell = shell
	return s, nil
}

// Index is the server's lookup index.
func (s *Server) Index() *Index { return s.ix }

// Clock returns the page clock replay injects into HTML documents, nil when it is off.
func (s *Server) Clock() *Clock { return s.clock }

// Counts returns the request counts so far (what http://rr.control/stats serves).
func (s *Server) Counts() Counts { return s.counts.snapshot() }

// Accepted is the number of client connections the proxy has accepted.
func (s *Server) Accepted() int64 { return s.shell.Accepted() }

// answer is what the proxy sends for one request, with the fields of its log line.
type answer struct {
	status int
	header http.Header // may be a recorded head's fields, shared: never edited in place
	// fields is header as answerFields lists it (the recorded head's, shared), or nil;
	// header is then shared too: edit it only through ownHeader
	fields []headerField
	body   io.Reader // nil for no body
	data   []byte    // the payload in memory, shared and read-only (instead of body), or nil
	size   int64     // payload bytes of body or data
	clen   []string  // Content-Length's value when it is clenOf, shared and read-only (the recorded head's)
	clenOf int64

	source   Source
	typ      string
	key      string
	entry    *recording.Entry
	entryID  string // entry.ID (from the recorded head: the entry itself is not read again)
	record   string
	note     string
	rule     string        // LogLine.Rule
	endpoint string        // LogLine.Endpoint
	url      string        // LogLine.URL (the normalized request URL) when already computed, else ""
	line     *lineMemo     // the lookup's memo of its log lines (lookupServed), or nil
	bodySize int64         // LogLine.BodySize: the request body's length
	ready    time.Duration // LogLine.MS: from the request's arrival to the answer decided (0: until finish)
	pooled   bool          // from answerPool: ServeHTTP puts it back once written
}

// answerPool holds the answers of recorded exchanges (recordedAnswer), used again once
// ServeHTTP has written and logged them.
var answerPool = sync.Pool{New: func() any { return new(answer) }}

// ownHeader returns a's header for editing: the header of a recorded answer (a.fields set)
// is its head's, shared by every answer of that entry (headCache), so it is cloned first and
// the list answer.write would copy instead is dropped.
func (a *answer) ownHeader() http.Header {
	if a.fields != nil {
		a.header, a.fields = a.header.Clone(), nil
	}
	return a.header
}

// ServeHTTP answers one proxied request (plain HTTP, or HTTPS inside a tunnel, over
// HTTP/1.1 or HTTP/2) from the recording; nothing is forwarded. r.URL must be absolute.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if IsControlHost(r.URL.Host) {
		s.control(w, r)
		return
	}
	a := s.answerFor(r)
	a.ready = time.Since(start) // the log's ms: writing the answer is not counted
	// Counted and logged before the answer is written: a client that has the answer can
	// read its count at rr.control/stats and its line at /log.
	s.finish(r, a, start)
	if err := a.write(w, r); err != nil {
		s.writeFailed(r, a, err)
	}
	if a.pooled {
		*a = answer{}
		answerPool.Put(a)
	}
}

// took is a.ready, or the time since start when a.ready is not set (the clock is read only
// then: it runs once per request).
func (a *answer) took(start time.Time) time.Duration {
	if a.ready != 0 {
		return a.ready
	}
	return time.Since(start)
}

// writeFailed reports an answer that could not be written whole (--debug). Apart from
// ServeHTTP, whose stack frame is under every answer's writes.
//
//go:noinline
func (s *Server) writeFailed(r *http.Request, a *answer, err error) {
	s.debug.Printf("%s %s: %v", r.Method, a.url, err)
}

// browserPage reports whether r is a page a browser navigates to: Sec-Fetch-Dest says
// document, iframe or frame (Fetch Metadata, sent to https origins only), or, with no
// Sec-Fetch-Dest (an http:// site), Accept names text/html first, as browsers' navigations
// do ("text/html,application/xhtml+xml,..."). A client that sends neither (curl's */*, a
// Go client) is not taken for a browser.
func browserPage(r *http.Request) bool {
	switch strings.ToLower(firstValue(r.Header, "Sec-Fetch-Dest")) {
	case "document", "iframe", "frame":
		return true
	case "":
		a := strings.TrimSpace(strings.ToLower(firstValue(r.Header, "Accept")))
		return strings.HasPrefix(a, "text/html")
	}
	return false
}

// answerFor reads the request body in full and decides the answer.
func (s *Server) answerFor(r *http.Request) *answer {
	var rb requestBody
	bodyErr := s.readBody(r, &rb)
	defer rb.close()
	total := rb.total
	typ := RequestType(r)
	u := normalizedURL(r.URL)
	var ubuf [256]byte // the URL's bytes for the memo, on the stack when it fits
	ub := appendURL(ubuf[:0], &u)
	switch {
	case bodyErr != nil:
		a := textAnswer(http.StatusBadRequest, "text/plain; charset=utf-8", "pab replay: cannot read the request body\n")
		a.typ, a.note = typ, "request body: "+bodyErr.Error()
		return a
	case rb.refused != "":
		a := textAnswer(http.StatusRequestEntityTooLarge, "text/plain; charset=utf-8", "pab replay: "+rb.refused+"\n")
		a.typ, a.note = typ, rb.refused+"; answered 413"
		return a
	case r.ProtoMajor >= 2 && s.opts.DisableHTTP2:
		a := unsupportedAnswer(http.StatusHTTPVersionNotSupported, noteHTTP2, r.Method, string(ub))
		a.typ = typ
		return a
	case isWebSocketUpgrade(r):
		a := unsupportedAnswer(http.StatusNotImplemented, noteWebSocket, r.Method, string(ub))
		a.typ = typ
		return a
	}
	body, done, err := rb.bytes(&s.spillMu)
	if err != nil {
		a := textAnswer(http.StatusRequestEntityTooLarge, "text/plain; charset=utf-8", "pab replay: request body not kept: "+err.Error()+"\n")
		a.typ, a.note = typ, "request body not kept: "+err.Error()+"; answered 413"
		return a
	}
	lookupType := typ
	if typ == TypeDocument && !browserPage(r) {
		lookupType = "" // the matching policy's stricter rule for pages is for a browser's
	}
	m := s.ix.lookupServedURL(rules.Request{Method: r.Method, URL: r.URL, Body: body, ContentType: firstValue(r.Header, "Content-Type"), Type: lookupType}, ub)
	res := &m.res
	urlStr := m.url
	body = nil
	done()
	var a *answer
	note := res.Note
	switch res.Source {
	case SourceBlocked:
		a = blockedAnswer()
	case SourceExact, SourceSearch, SourcePromo, SourceFuzzy:
		var err error
		a, err = s.recordedAnswer(res.Entry, &m.head, r)
		if err != nil {
			if errors.Is(err, recording.ErrUnresolvedRevisit) {
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
	a.key, a.line = m.keyStr, m.line
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
	a.bodySize = total
	return a
}

// firstValue is h.Get(key) for a key already in canonical form (CanonicalHeaderKey), without
// canonicalizing it again: it runs on every request (TestCanonicalKeys checks the keys
// given).
func firstValue(h http.Header, key string) string {
	if vs := h[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
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

// recordedAnswer reads entry e's response from the recording. The parsed head (status,
// replayed header fields, where the payload lies in data.warc) comes from kept when it
// holds it (a lookup's servedResult.head; nil: none), else from s.heads (and is then
// stored in kept), so a response served again is not parsed again; a small payload is
// kept in memory (headCache.smallBody), a larger one streamed from the WARC by offset.
func (s *Server) recordedAnswer(e *recording.Entry, kept *atomic.Pointer[responseHead], r *http.Request) (*answer, error) {
	var h *responseHead
	if kept != nil {
		h = kept.Load()
	}
	if h == nil {
		var err error
		if h, err = s.heads.get(s.b, e); err != nil {
			return nil, err
		}
		if kept != nil && h.reader == nil && h.bytes <= maxMemoHeadBytes { // a head with its own reader is used once
			kept.Store(h)
		}
	}
	a := answerPool.Get().(*answer)
	*a = answer{
		pooled:  true,
		status:  h.status,
		header:  h.header, // shared and read-only: cloned below before the clock edits it
		fields:  h.fields,
		size:    h.size,
		clen:    h.clen,
		clenOf:  h.size,
		entry:   e,
		entryID: h.entryID,
		record:  h.recordID,
		note:    h.note,
	}
	if revalidate(r, a) { // the client's cached copy is current: 304 (revalidate.go)
		return a, nil
	}
	if s.clock == nil || !h.clock {
		if a.data = s.heads.smallBody(h); a.data == nil {
			a.body = h.body()
		}
		return a, nil
	}
	a.body = h.body()
	{
		body, ok, err := readClockBody(a.body, a.size, s.clockMax)
		switch {
		case err != nil:
			return nil, fmt.Errorf("entry %s: read payload: %w", e.ID, err)
		case !ok:
			a.note = joinNote(a.note, fmt.Sprintf("clock: document of %d bytes is over %d, served without the clock", a.size, s.clockMax))
		default:
			var note string
			body, note = s.clock.Inject(a.ownHeader(), body)
			a.note = joinNote(a.note, note)
			a.body, a.data, a.size = nil, body, int64(len(body))
		}
	}
	return a, nil
}

// replayHeader copies the recorded header without hop-by-hop fields (mitm.RemoveHopByHop),
// Proxy-* fields, Content-Length (set to the payload size when answering) and Alt-Svc (see
// Server), and without fields whose name or value HTTP/1.1 does not allow (RFC 9110
// section 5). A stored Content-Encoding is kept: it describes a payload that could not be
// decoded.
func replayHeader(rec http.Header) http.Header {
	h := make(http.Header, len(rec))
	for name, vs := range rec {
		if !httpguts.ValidHeaderFieldName(name) {
			continue
		}
		cn := http.CanonicalHeaderKey(name)
		for _, v := range vs {
			if httpguts.ValidHeaderFieldValue(v) {
				h[cn] = append(h[cn], v)
			}
		}
	}
	mitm.RemoveHopByHop(h)
	for name := range h {
		if strings.HasPrefix(name, "Proxy-") {
			delete(h, name)
		}
	}
	delete(h, "Content-Length")
	delete(h, "Alt-Svc")
	return h
}

// write sends the answer: the recorded fields as they are (no Date or Content-Type added
// by net/http), an explicit Content-Length (the payload size), no body for HEAD, 1xx,
// 204 and 304. A payload in memory (a.data) is written at once, so that head and body
// leave together; a streamed one is copied through the shell's pooled buffer (mitm.Copy).
func (a *answer) write(w http.ResponseWriter, r *http.Request) error {
	// The rare paths are functions of their own (copyHeader, stream): this one is under
	// every answer's writes, where a goroutine's stack an answer outgrows is copied whole.
	h := w.Header()
	if a.fields != nil {
		for _, f := range a.fields {
			h[f.name] = f.values
		}
	} else {
		a.copyHeader(h)
	}
	if a.status == http.StatusNoContent || a.status == http.StatusNotModified || a.status < 200 {
		delete(h, "Content-Length")
		w.WriteHeader(a.status)
		return nil
	}
	if a.clen != nil && a.clenOf == a.size {
		h["Content-Length"] = a.clen
	} else {
		h["Content-Length"] = []string{strconv.FormatInt(a.size, 10)}
	}
	if r.Method == http.MethodHead || (a.body == nil && a.data == nil) || a.size == 0 {
		w.WriteHeader(a.status)
		return nil
	}
	w.WriteHeader(a.status)
	if a.data != nil {
		_, err := w.Write(a.data)
		return err
	}
	return a.stream(w)
}

// copyHeader sets a's header fields in h, and Date and Content-Type with no value when a
// has none (net/http then writes neither).
//
//go:noinline
func (a *answer) copyHeader(h http.Header) {
	for k, vs := range a.header {
		h[k] = vs
	}
	if _, ok := a.header["Date"]; !ok {
		h["Date"] = nil
	}
	if _, ok := a.header["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
}

// stream writes a's payload from a.body, its header sent already.
//
//go:noinline
func (a *answer) stream(w http.ResponseWriter) error {
	n, err := mitm.Copy(w, io.LimitReader(a.body, a.size), false)
	if err == nil && n < a.size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		// fewer bytes than the Content-Length sent: net/http closes the connection
		// (HTTP/1.1) or the client sees the stream end short (HTTP/2)
		return fmt.Errorf("payload cut short after %d of %d bytes: %w", n, a.size, err)
	}
	return nil
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
	u := a.url
	if u == "" {
		u = urlString(NormalizeURL(r.URL))
	}
	line := LogLine{
		Method:   r.Method,
		URL:      u,
		Key:      a.key,
		Type:     a.typ,
		Dest:     logDest(firstValue(r.Header, "Sec-Fetch-Dest")),
		Source:   a.source,
		Rule:     a.rule,
		Endpoint: a.endpoint,
		Status:   a.status,
		Record:   a.record,
		MS:       math.Round(float64(a.took(start).Microseconds())) / 1000,
		Note:     a.note,
		BodySize: a.bodySize,
	}
	if a.entry != nil {
		line.Entry = a.entryID
	}
	s.emit(line, start, a.source, a.typ, a.line)
}

// refused logs a request the proxy shell answered itself (mitm.Config.OnRefuse): a line
// with source "refused", the method and URL as far as the shell read them (a cut URL
// marks the line truncated, with URLSize how much of it was read), the status and the
// shell's note, type "other" (its header fields were not read), ms 0.
func (s *Server) refused(r mitm.Refusal) {
	line := LogLine{
		Method: r.Method,
		URL:    r.URL,
		Type:   TypeOther,
		Source: SourceRefused,
		Status: r.Status,
		Note:   r.Note,
	}
	if r.URLCut {
		line.Truncated, line.URLSize = true, max(r.URLRead, len(r.URL)+1)
	}
	s.emit(line, r.Time, SourceRefused, TypeOther, nil)
}

// lineBufs holds the buffers the proxy's log lines are encoded into (*[]byte): a line is
// copied into the tail and the log writer's queue, so its buffer is used again.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// emit counts an answer (source, typ) and writes its line, with the time at, to the
// in-memory tail and the log file: encoded once (its middle copied from memo when the
// memo holds it, see lineMemo), outside the lock, then counted, kept and queued under the
// tail's one lock (the counts and the log writer's queue share it).
func (s *Server) emit(line LogLine, at time.Time, source Source, typ string, memo *lineMemo) {
	bp := lineBufs.Get().(*[]byte)
	b, mid, ok := appendLogLineMid((*bp)[:0], line, &at, memo)
	s.tail.mu.Lock()
	s.counts.addLocked(source, typ)
	if ok {
		if mid != nil {
			s.tail.addMemoLocked(mid, at, line.MS, len(b))
		} else {
			s.tail.addLocked(b)
		}
		if s.logw != nil {
			s.logw.sendLocked(b)
		}
	}
	s.tail.mu.Unlock()
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		lineBufs.Put(bp)
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

// control answers http(s)://rr.control/...: /stats (JSON Counts), /log?tail=N (JSON
// Lines), /health ("ok").
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
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
	a.write(w, r)
}

// serveDirect answers requests made to the proxy itself rather than through it
// (GET http://PROXY-ADDR/stats): the control endpoints, and a 505 with a log line for
// HTTP/2 with prior knowledge (h2c), which a proxy does not serve.
func (s *Server) serveDirect(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor >= 2 {
		a := unsupportedAnswer(http.StatusHTTPVersionNotSupported, noteH2C, r.Method, r.RequestURI)
		a.typ = TypeOther
		s.finish(r, a, time.Now())
		a.write(w, r)
		return
	}
	s.control(w, r)
}

// Listen opens the proxy's listening socket (Options.Listen when addr is ""). A port in
// use gives the one-line error "listen ADDR: address already in use".
func (s *Server) Listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = s.opts.Listen
	}
	return mitm.Listen(addr)
}

// Serve answers proxy connections on l until Shutdown or Close; it then returns nil.
func (s *Server) Serve(l net.Listener) error { return s.shell.Serve(l) }

// ListenAndServe listens on Options.Listen and serves until ctx is done or Close is
// called; when ctx is done it drains the requests in flight (Shutdown, at most
// Options.ShutdownWait) and closes the server.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := s.Listen(s.opts.Listen)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownWait)
		defer cancel()
		err = s.Shutdown(sctx)
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
		s.setLog(w)
	}
}

// SetRecording sets Options.Recording and Options.RecordingOf; like SetLog, it must be
// called before the log is set and before Serve.
func (s *Server) SetRecording(hash, of string) {
	s.opts.Recording, s.opts.RecordingOf = hash, of
}

// setLog starts the log writer for w and queues the log's header line (Options.Recording).
// A w that is the null device (os.DevNull opened, as `pab replay --log /dev/null` does) gets
// no writer: its lines would be copied to a queue and written for nothing. The in-memory
// tail (rr.control/log) is kept either way.
func (s *Server) setLog(w io.Writer) {
	if isNullDevice(w) {
		return
	}
	s.logw = newLogWriterShared(w, &s.tail.mu)
	if h := encodeLogHeader(s.opts.Recording, s.opts.RecordingOf, time.Now()); h != nil {
		s.logw.send(h)
	}
}

// isNullDevice reports whether w is an open file of the null device (os.DevNull).
func isNullDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}

// Shutdown stops accepting connections and waits until every request in flight (plain
// HTTP and inside tunnels, HTTP/1.1 and HTTP/2) has been answered and logged, and the
// saved index this start computed is written (Index.WaitSaved), or ctx ends; then it
// closes every connection and flushes the log (see Close). It returns the
// first log write error.
func (s *Server) Shutdown(ctx context.Context) error {
	_ = s.shell.Shutdown(ctx) // on ctx's end it has closed every connection
	// the saved index a start computed may still be being written: let it end (within ctx),
	// so that the next start reads it
	select {
	case <-s.ix.savedWritten():
	case <-ctx.Done():
	}
	return s.Close()
}

// Close stops listening, closes every client connection (tunnels included) and flushes
// the log. It returns the first log write error. Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.shell.Close()
		if s.logw != nil {
			s.closeErr = s.logw.close()
		}
	})
	return s.closeErr
}
