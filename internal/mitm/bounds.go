package mitm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of Limits.
const (
	// DefaultWriteTimeout bounds each write of an answer: every piece of at most
	// WriteChunk bytes (and the answer's last flush) must reach the client within it, so an
	// answer is sent at no less than WriteChunk bytes per DefaultWriteTimeout (about
	// 1 KiB/s). An HTTP/2 stream that misses it is reset (RST_STREAM INTERNAL_ERROR), an
	// HTTP/1.1 connection closed. It is also HTTP/2's WriteByteTimeout: a connection on
	// which nothing at all can be written for this long is closed.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultBodyTimeout is the grace period of a request body: its bytes must arrive
	// within DefaultBodyTimeout plus one second per MinBodyRate bytes, counted from the
	// start of the request (after its header).
	DefaultBodyTimeout = 30 * time.Second
	// DefaultMinBodyRate is the lowest average rate of a request body after its grace
	// period, in bytes per second (4 KiB/s).
	DefaultMinBodyRate = 4 << 10
	// DefaultMaxStreams is the HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS the shell
	// advertises: the streams one connection may have open at once (RFC 9113 section
	// 5.1.2). A stream over it is refused with RST_STREAM; more than 4 times as many
	// streams waiting for a handler (rapid reset) end the connection with GOAWAY
	// ENHANCE_YOUR_CALM.
	DefaultMaxStreams = 100
	// DefaultMaxActive bounds the requests being answered at once, over every connection.
	DefaultMaxActive = 512
	// DefaultMaxActiveBytes bounds the memory the requests being answered at once may
	// hold, counted as their header bytes plus ActiveRequestCost each: 64 MiB.
	DefaultMaxActiveBytes = 64 << 20
	// DefaultRequestRate and DefaultRequestBurst bound the requests handed to the Handler
	// per client connection: DefaultRequestBurst at once, then DefaultRequestRate per
	// second (a token bucket). A request over the rate waits for its turn.
	DefaultRequestRate  = 200
	DefaultRequestBurst = 500
	// DefaultMaxFieldBytes bounds one header field line (name and value, the Cookie
	// fields of an HTTP/2 request joined as one): a longer one is answered 431.
	DefaultMaxFieldBytes = 64 << 10
)

// WriteChunk is the largest piece of an answer written under one write deadline.
const WriteChunk = 32 << 10

// ActiveRequestCost is what one request being answered is counted to hold besides its
// header: its goroutine, the copy buffer and HTTP/2's stream buffers (64 KiB).
const ActiveRequestCost = 64 << 10

// reserveRequests and reserveBytes are admitted over MaxActive and MaxActiveBytes for
// connections that hold less than their fair share (see Server.admit), so that a new
// client is answered while others hold their shares.
const (
	reserveRequests = 128
	reserveBytes    = 16 << 20
)

// Limits are the shell's bounds in time and memory on requests, their bodies and their
// answers, applied alike to plain-HTTP proxy requests and to HTTP/1.1 and HTTP/2 inside
// tunnels (docs/replay.md "Connections"). A zero field takes its default. A negative
// WriteTimeout, BodyTimeout or RequestRate turns that bound off, and a negative
// MinBodyRate leaves a body BodyTimeout only (for tests).
type Limits struct {
	// WriteTimeout bounds each write of at most WriteChunk bytes of an answer (default
	// DefaultWriteTimeout).
	WriteTimeout time.Duration
	// BodyTimeout and MinBodyRate (bytes per second) bound the time to read a request
	// body: BodyTimeout plus one second per MinBodyRate bytes read (defaults
	// DefaultBodyTimeout, DefaultMinBodyRate). A body that is too slow ends with an
	// error for the Handler; the HTTP/1.1 connection is then closed, an HTTP/2 stream
	// reset once answered.
	BodyTimeout time.Duration
	MinBodyRate int
	// MaxStreams is the HTTP/2 concurrent streams per connection (default
	// DefaultMaxStreams).
	MaxStreams int
	// MaxActive and MaxActiveBytes bound the requests being answered at once over every
	// connection, in number and in bytes held (defaults DefaultMaxActive,
	// DefaultMaxActiveBytes). Over half of them each connection gets its fair share
	// (see Server.admit); a request refused is answered 503 with Retry-After: 1 and no
	// body.
	MaxActive      int
	MaxActiveBytes int64
	// RequestRate and RequestBurst bound the requests per client connection (defaults
	// DefaultRequestRate per second, DefaultRequestBurst at once). The bound applies to
	// HTTP/2 connections, where a client can open and reset streams faster than they are
	// answered (rapid reset), and to HTTP/1.1 connections (plain proxy requests and
	// HTTP/1.1 inside tunnels) only when RateHTTP1 is set: their requests come one at a
	// time, each after the answer before it, so a client cannot send them faster than the
	// Handler answers. Record sets it, since each request there becomes one to the site.
	RequestRate  float64
	RequestBurst int
	RateHTTP1    bool
	// MaxFieldBytes bounds one header field line (default DefaultMaxFieldBytes).
	MaxFieldBytes int
}

// withDefaults is l with its zero fields set to their defaults.
func (l Limits) withDefaults() Limits {
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.BodyTimeout == 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.MinBodyRate == 0 {
		l.MinBodyRate = DefaultMinBodyRate
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = DefaultMaxStreams
	}
	if l.MaxActive <= 0 {
		l.MaxActive = DefaultMaxActive
	}
	if l.MaxActiveBytes <= 0 {
		l.MaxActiveBytes = DefaultMaxActiveBytes
	}
	if l.RequestRate == 0 {
		l.RequestRate = DefaultRequestRate
	}
	if l.RequestBurst <= 0 {
		l.RequestBurst = DefaultRequestBurst
	}
	if l.MaxFieldBytes <= 0 {
		l.MaxFieldBytes = DefaultMaxFieldBytes
	}
	return l
}

// connState is what the shell keeps per client connection (the listening socket's or a
// tunnel's): its request rate and its requests being answered.
type connState struct {
	watch  *watchConn    // the connection when watched for refusals (refuse.go), or nil
	born   time.Time     // when the connection's context was made, with its monotonic reading
	rate   *rate.Limiter // nil: no rate bound
	done   chan struct{} // closed when an HTTP/2 connection ends
	active int           // requests being answered, under Server.adm.mu
	bytes  int64         // their cost, under Server.adm.mu
	mu     sync.Mutex
	resets int // HTTP/2 streams reset by the client before they reached the Handler
}

// holdReset bounds how long the handler of a stream reset early on a connection that
// resets many is kept.
const holdReset = 30 * time.Second

// earlyReset counts one more stream of the connection reset before the Handler saw it,
// and returns the count.
func (cs *connState) earlyReset() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.resets++
	return cs.resets
}

// connStateOf is the connState in ctx, or nil.
func connStateOf(ctx context.Context) *connState {
	cs, _ := ctx.Value(connStateKey{}).(*connState)
	return cs
}

type connStateKey struct{}

// newConnContext puts a new connState for c into a connection's context: one value that
// each request finds (connStateOf) with what the shell keeps per connection.
func (s *Server) newConnContext(ctx context.Context, c net.Conn) context.Context {
	cs := &connState{done: make(chan struct{}), born: time.Now()}
	cs.watch, _ = c.(*watchConn)
	if l := s.cfg.Limits; l.RequestRate > 0 {
		cs.rate = rate.NewLimiter(rate.Limit(l.RequestRate), l.RequestBurst)
	}
	return context.WithValue(ctx, connStateKey{}, cs)
}

// admission counts the requests being answered over every connection, and the
// connections that have one.
type admission struct {
	mu    sync.Mutex
	n     int   // requests
	bytes int64 // their cost
	busy  int   // connections with a request
}

// admit takes one request of cost bytes for cs; false when the shell is full. Up to
// half of MaxActive and MaxActiveBytes every request is admitted; over that, only a
// connection holding less than its fair share (the bounds divided among the connections
// with a request under way, this one counted) is, up to the bounds plus a reserve. So
// connections that fill the shell (answers stuck behind a zero window) cannot keep a new
// one from being answered: each keeps at most its share.
func (s *Server) admit(cs *connState, cost int64) bool {
	l := s.cfg.Limits
	a := &s.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	ok := a.n+1 <= l.MaxActive+reserveRequests && a.bytes+cost <= l.MaxActiveBytes+reserveBytes
	if ok && (a.n+1 > l.MaxActive/2 || a.bytes+cost > l.MaxActiveBytes/2) {
		busy := a.busy
		if cs.active == 0 {
			busy++
		}
		ok = cs.active < max(l.MaxActive/busy, 1) && cs.bytes+cost <= max(l.MaxActiveBytes/int64(busy), cost)
	}
	if !ok {
		s.refusedBusy.Add(1)
		return false
	}
	a.n++
	a.bytes += cost
	if cs.active == 0 {
		a.busy++
	}
	cs.active++
	cs.bytes += cost
	return true
}

func (s *Server) release(cs *connState, cost int64) {
	a := &s.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n--
	a.bytes -= cost
	cs.active--
	cs.bytes -= cost
	if cs.active == 0 {
		a.busy--
	}
}

// Active is the number of requests being answered now, over every connection.
func (s *Server) Active() int {
	s.adm.mu.Lock()
	defer s.adm.mu.Unlock()
	return s.adm.n
}

// RefusedBusy is the number of requests answered 503 because MaxActive or
// MaxActiveBytes was reached.
func (s *Server) RefusedBusy() int64 { return s.refusedBusy.Load() }

// headerCost is the bytes r's header is counted to hold: each field's name and value
// plus 32 (RFC 9113 section 6.5.2's accounting), with the request target. It also
// returns the longest field line (the request target is not one: its bound is the
// header's).
func headerCost(r *http.Request) (cost, longest int) {
	cost = len(r.Method) + len(r.RequestURI) + len(r.Host) + 32
	for k, vs := range r.Header {
		for _, v := range vs {
			n := len(k) + len(v)
			cost += n + 32
			longest = max(longest, n)
		}
	}
	return cost, longest
}

// serveBounded serves r, of the connection whose state is cs (connStateOf; nil when
// none), with h under the shell's Limits: the field-line bound, the
// connection's request rate, the global admission, and deadlines on the request body's
// reads and the answer's writes. A request whose client is gone before h would be called
// (an HTTP/2 stream reset, a connection closed) is not given to h.
func (s *Server) serveBounded(w http.ResponseWriter, r *http.Request, cs *connState, h http.HandlerFunc) {
	// The rare paths are functions of their own: this one is under every answer's writes,
	// and a goroutine whose stack an answer outgrows has it copied whole (then shrunk by
	// the collector, and copied again by the next answer).
	l := &s.cfg.Limits
	if cs == nil {
		cs = &connState{done: make(chan struct{}), born: time.Now()} // not from a connection of this shell's servers (tests)
	}
	bw := &boundedWriter{ResponseWriter: w, d: l.WriteTimeout, h2: r.ProtoMajor == 2, born: cs.born}
	// Over HTTP/1.1 no deadline of a previous answer is left on the connection: net/http
	// clears the write deadline once it has sent an answer (TestWriteDeadlineKeptAlive).
	if r.Body != nil && r.Body != http.NoBody && l.BodyTimeout > 0 {
		r = bw.boundBody(r, l)
	}
	defer bw.end()
	cost, longest := headerCost(r)
	if longest > l.MaxFieldBytes {
		s.refuseFieldLine(bw, r, longest)
		return
	}
	if cs.rate != nil && (r.ProtoMajor == 2 || l.RateHTTP1) {
		waitRate(cs)
	}
	if r.Context().Err() != nil {
		if r.ProtoMajor == 2 && cs.earlyReset() > 2*l.MaxStreams {
			holdRapidReset(cs)
		}
		return
	}
	total := int64(cost) + ActiveRequestCost
	if !s.admit(cs, total) {
		s.refuseBusy(bw, r)
		return
	}
	defer s.release(cs, total)
	h(bw, r)
}

// boundBody puts r's body under the Limits' body bounds (boundedBody) and returns the
// request to give the Handler: a shallow copy, as net/http looks at its own request's Body
// to decide whether to read an unread body's rest before answering.
//
//go:noinline
func (w *boundedWriter) boundBody(r *http.Request, l *Limits) *http.Request {
	w.body = &boundedBody{rc: r.Body, ctl: w.ctl(), start: time.Now(), grace: l.BodyTimeout, rate: l.MinBodyRate,
		h1: r.ProtoMajor == 1, sized: r.ContentLength >= 0}
	r = r.WithContext(r.Context())
	r.Body = w.body
	return r
}

// end ends the request's body bound and arms the answer's last flush (last).
func (w *boundedWriter) end() {
	if w.body != nil {
		w.body.finish()
	}
	w.last()
}

// refuseFieldLine answers 431 to a request with a header field line over MaxFieldBytes.
//
//go:noinline
func (s *Server) refuseFieldLine(bw *boundedWriter, r *http.Request, longest int) {
	l := &s.cfg.Limits
	s.logf.Printf("%s: %s request with a header field of %d bytes refused (at most %d)", r.RemoteAddr, r.Proto, longest, l.MaxFieldBytes)
	s.refuseRequest(r, http.StatusRequestHeaderFieldsTooLarge, "refused by the proxy shell: a header field line of "+strconv.Itoa(longest)+" bytes (at most "+strconv.Itoa(l.MaxFieldBytes)+")")
	if r.ProtoMajor == 1 {
		bw.Header().Set("Connection", "close")
	}
	msg := "pab: request header field line over " + strconv.Itoa(l.MaxFieldBytes) + " bytes\n"
	bw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	bw.Header().Set("Content-Length", strconv.Itoa(len(msg)))
	bw.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
	io.WriteString(bw, msg)
}

// waitRate waits for the connection's request rate: whatever the client does meanwhile,
// so a stream reset while it waits still holds its handler, and a rapid reset fills the
// connection's streams and ends with GOAWAY instead of becoming requests.
//
//go:noinline
func waitRate(cs *connState) {
	if d := cs.rate.Reserve().Delay(); d > 0 {
		time.Sleep(d)
	}
}

// holdRapidReset keeps a rapid reset's handler in its place until the connection ends (or
// holdReset passes), so that the client's further streams queue up in x/net/http2 and its
// own bound ends the connection with GOAWAY ENHANCE_YOUR_CALM.
//
//go:noinline
func holdRapidReset(cs *connState) {
	select {
	case <-cs.done:
	case <-time.After(holdReset):
	}
}

// refuseBusy answers 503 to a request the global admission turned away.
//
//go:noinline
func (s *Server) refuseBusy(bw *boundedWriter, r *http.Request) {
	s.refuseRequest(r, http.StatusServiceUnavailable, "refused by the proxy shell: too many requests under way (answered 503)")
	bw.Header().Set("Retry-After", "1")
	bw.Header().Set("Content-Length", "0")
	if r.ProtoMajor == 1 && bw.body != nil {
		bw.Header().Set("Connection", "close") // its body is not read
	}
	bw.WriteHeader(http.StatusServiceUnavailable)
}

// boundedWriter is the ResponseWriter a Handler is given: each write of at most
// WriteChunk bytes gets a deadline of d from its start.
type boundedWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController // made on first use (ctl)
	d     time.Duration
	armed time.Duration // the deadline set last, as the time since born; 0: none
	born  time.Time     // connState.born: arm reads the clock as the time since then
	body  *boundedBody  // the request's body, or nil
	h2    bool
}

// ctl is the ResponseController of w's ResponseWriter.
func (w *boundedWriter) ctl() *http.ResponseController {
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	return w.rc
}

// setWriteDeadline sets the write deadline of w's connection (HTTP/1.1) or stream
// (HTTP/2): directly when the ResponseWriter has the method, as net/http's both do (no
// ResponseController made per answer), else through one.
func (w *boundedWriter) setWriteDeadline(t time.Time) error {
	if d, ok := w.ResponseWriter.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return w.ctl().SetWriteDeadline(t)
}

// around runs f, a call that may make net/http read the rest of an HTTP/1.1 request body
// the Handler left unread (it does so before the answer's header): under the body's
// deadline, then noting whether the body ended.
func (w *boundedWriter) around(f func()) {
	b := w.body
	if b == nil || !b.h1 || b.done {
		f()
		return
	}
	b.arm()
	f()
	b.probe()
}

// arm sets the write deadline to d from now: over HTTP/2 always (done disarms it after
// each write), over HTTP/1.1 unless the one set is still three quarters of d away (a
// connection's deadline only matters to writes under way).
func (w *boundedWriter) arm() {
	if w.d <= 0 {
		return
	}
	at := w.since()
	if !w.h2 && w.armed-at > w.d*3/4 {
		return
	}
	w.armed = at + w.d
	_ = w.setWriteDeadline(w.born.Add(w.armed))
}

// since is the time since w.born, read from the monotonic clock alone (one clock read
// instead of time.Now's two, and durations compared instead of times: arm runs once per
// answer). A w.born not set is set to time.Now first.
func (w *boundedWriter) since() time.Duration {
	if w.born.IsZero() {
		w.born = time.Now()
	}
	return time.Since(w.born)
}

// done ends a write's deadline over HTTP/2, where the deadline is a timer that resets the
// stream when it fires, write under way or not: a Handler waiting between two writes (a
// stream of events, record waiting for the site) is not bounded by it.
func (w *boundedWriter) done() {
	if w.d > 0 && w.h2 {
		w.armed = 0
		_ = w.setWriteDeadline(time.Time{})
	}
}

func (w *boundedWriter) WriteHeader(code int) {
	// the header is sent with the first write or flush (or at once when 1xx)
	w.arm()
	w.around(func() { w.ResponseWriter.WriteHeader(code) })
	w.done()
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), WriteChunk)
		w.arm()
		var m int
		var err error
		w.around(func() { m, err = w.ResponseWriter.Write(p[:k]) })
		w.done()
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

func (w *boundedWriter) Flush() {
	w.arm()
	w.around(func() { _ = w.ctl().Flush() })
	w.done()
}

// last arms the deadline of the flush net/http does once the Handler returns: over
// HTTP/1.1 as any write's (unless the one set is still three quarters of d away, which is
// so for most answers: one deadline per answer, not one per write and one more for the
// flush), over HTTP/2 a new one (the stream's end stops its timer).
func (w *boundedWriter) last() {
	if w.d > 0 {
		if w.h2 {
			w.armed = 0
		}
		w.arm()
	}
}

func (w *boundedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ErrBodyTooSlow is the error a request body's Read returns once the body is later than
// Limits.BodyTimeout and Limits.MinBodyRate allow (errors.Is it).
var ErrBodyTooSlow = errors.New("request body too slow")

// boundedBody is a request body read under a deadline that grows with the bytes read:
// start + grace + read/rate.
type boundedBody struct {
	rc    io.ReadCloser
	ctl   *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int
	n     int64
	armed time.Time
	done  bool // EOF or an error seen
	err   error
	h1    bool
	sized bool // a Content-Length: a read of nothing never blocks
}

// arm sets the read deadline for what the body has read so far, unless set already.
func (b *boundedBody) arm() {
	if dl := b.deadline(); b.armed.IsZero() || dl.Sub(b.armed) >= time.Second {
		b.armed = dl
		_ = b.ctl.SetReadDeadline(dl)
	}
}

// probe notes, without blocking, whether net/http read the body to its end (a read of
// nothing gives io.EOF then), and if so clears the read deadline: from then on the
// connection's reads are net/http's own. A chunked body is not probed (reading nothing of
// it may wait for the next chunk's size): net/http reads the rest of an unread chunked
// body under the deadline, and a Handler that answers it for longer than the deadline
// without reading it may see its context end.
func (b *boundedBody) probe() {
	if b.done || !b.sized {
		return
	}
	if _, err := b.rc.Read(nil); err != nil {
		b.done = true
		_ = b.ctl.SetReadDeadline(time.Time{})
	}
}

func (b *boundedBody) deadline() time.Time {
	d := b.grace
	if b.rate > 0 {
		d += time.Duration(float64(b.n) / float64(b.rate) * float64(time.Second))
	}
	return b.start.Add(d)
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.done {
		dl := b.deadline()
		if !time.Now().Before(dl) {
			return 0, b.fail()
		}
		// re-armed when it moved by a second or more (a read-deadline change on HTTP/2
		// is a message to the connection's goroutine)
		b.arm()
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if err != nil && !b.done {
		b.done = true
		if err == io.EOF {
			_ = b.ctl.SetReadDeadline(time.Time{})
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, b.fail()
		}
	}
	return n, err
}

func (b *boundedBody) fail() error {
	b.done = true
	b.err = fmt.Errorf("%w: %d bytes in %v (at least %d bytes/s after %v)", ErrBodyTooSlow, b.n, time.Since(b.start).Round(time.Millisecond), b.rate, b.grace)
	return b.err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// finish runs when the Handler returns: a body not read to its end keeps a deadline, so
// that net/http's read of its rest (HTTP/1.1 keep-alive) is bounded too.
func (b *boundedBody) finish() {
	if b.done {
		return
	}
	dl := b.deadline()
	if !time.Now().Before(dl) {
		dl = time.Now()
	}
	if !dl.Equal(b.armed) {
		_ = b.ctl.SetReadDeadline(dl)
	}
}
