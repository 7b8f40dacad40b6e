package mitm

// This file reports the requests the shell answers itself, before the Handler sees them
// (Config.OnRefuse): net/http's answers to HTTP/1.x requests it cannot read (400, 417,
// 431, 501, 505), seen on the connection they are written to, and the shell's own refusals
// (a bad CONNECT target, a header field line over MaxFieldBytes, 503 when the shell is
// full).

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Refusal is one request the shell answered itself instead of handing it to the Handler.
type Refusal struct {
	// Time is when the answer was written (for net/http's refusals) or decided.
	Time time.Time
	// Method is the request method as read, at most MaxRefusalMethod bytes of token
	// characters (RFC 9110 section 9.1); "" when none could be read.
	Method string
	// URL is the request target made absolute as the Handler would have seen it
	// (https://CONNECT-authority/path inside a tunnel; as sent for a plain-HTTP proxy
	// request; the authority for CONNECT), cut to what was read of it: at most
	// MaxRefusalHead bytes of the request. "" when no target was read.
	URL string
	// URLCut says the request target was longer than what was kept of it; URLRead is then
	// how many bytes of the request the shell had read from its target on when it
	// refused it (so at least len(URL)+1, counted as URL has it, and less than the target
	// itself when the shell stopped reading first: a header over the bound).
	URLCut  bool
	URLRead int
	// Status is the HTTP status code sent (400, 417, 431, 501, 503, 505, ...).
	Status int
	// Note says why, in a few words ("request header over 1048576 bytes", net/http's
	// reason such as "400 Bad Request: malformed Host header").
	Note string
}

// MaxRefusalHead is how many bytes of a refused request's start the shell keeps to name its
// method and target: a longer target is cut (Refusal.URLCut).
const MaxRefusalHead = 8 << 10

// MaxRefusalMethod bounds Refusal.Method.
const MaxRefusalMethod = 64

// refuse reports r to Config.OnRefuse, if set.
func (s *Server) refuse(r Refusal) {
	if s.cfg.OnRefuse == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	s.cfg.OnRefuse(r)
}

// refuseRequest reports a parsed request the shell answered with status itself.
func (s *Server) refuseRequest(r *http.Request, status int, note string) {
	if s.cfg.OnRefuse == nil {
		return
	}
	u := ""
	if r.URL != nil {
		u = r.URL.String()
	}
	n, cut := len(u), false
	if len(u) > MaxRefusalHead {
		u, cut = u[:MaxRefusalHead], true
	}
	x := Refusal{Method: cutMethod(r.Method), URL: u, URLCut: cut, Status: status, Note: note}
	if cut {
		x.URLRead = n
	}
	s.refuse(x)
}

// cutMethod returns m when it is a token of at most MaxRefusalMethod bytes, else "".
func cutMethod(m string) string {
	if m == "" || len(m) > MaxRefusalMethod {
		return ""
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return ""
		}
	}
	return m
}

// watchListener wraps every connection of the listening socket in a lazyConn (its
// deadlines), and that in a watchConn when refusals are reported.
type watchListener struct {
	net.Listener
	s *Server
}

func (l watchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	c = &lazyConn{Conn: c}
	if l.s.cfg.OnRefuse == nil {
		return c, nil
	}
	wc := &watchConn{Conn: c, s: l.s}
	wc.armed.Store(true)
	return wc, nil
}

// watchConn is an HTTP/1.x connection of the shell's servers (the listening socket's, or a
// tunnel's after its TLS handshake, tls then being its state) whose requests are followed:
// it keeps the bytes read since its last write up to the first LF, at most MaxRefusalHead
// (the request line of the request the client sent once it had the previous answer), and
// a write made between
// requests (from the end of an answer, http.StateIdle, or the connection's start, until a
// handler of the shell is entered) is net/http answering a request it refused: it is
// reported with the method and target read. A client that pipelines requests may have
// its refused request reported without them.
type watchConn struct {
	net.Conn
	s         *Server
	authority string               // a tunnel's CONNECT authority; "" on the listening socket
	tls       *tls.ConnectionState // a tunnel's TLS state; nil on the listening socket

	off    atomic.Bool   // a CONNECT took the connection over: nothing more to follow
	armed  atomic.Bool   // between requests: a write now is net/http refusing one
	writes atomic.Uint64 // writes so far: what was read before the last one is not the next request

	// A handler's writes take no lock: only reads (one at a time, net/http's) and a
	// refusal's write do.
	mu       sync.Mutex
	head     []byte // the request line read since the last write, to its LF (when seen is writes)
	lineDone bool   // head holds its LF
	read     int    // the bytes read since the last write (when seen is writes)
	seen     uint64 // writes when head was started
	reported bool   // this refusal was reported
}

func (c *watchConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.off.Load() {
		c.mu.Lock()
		c.freshLocked()
		c.read += n
		if !c.lineDone && len(c.head) < MaxRefusalHead {
			// the request line only (refusal reads no more): a browser's header fields,
			// a kilobyte or more, are not copied on every request
			part := p[:min(n, MaxRefusalHead-len(c.head))]
			if i := bytes.IndexByte(part, '\n'); i >= 0 {
				part, c.lineDone = part[:i+1], true
			}
			c.head = append(c.head, part...)
		}
		c.mu.Unlock()
	}
	return n, err
}

// freshLocked empties head when a write came after it was started: what is read from a
// write on is the next request (a client sends it once it has the answer; net/http may
// read its first byte before the connection is idle again). Called under c.mu.
func (c *watchConn) freshLocked() {
	if w := c.writes.Load(); w != c.seen {
		c.head, c.read, c.seen, c.lineDone = c.head[:0], 0, w, false
	}
}

func (c *watchConn) Write(p []byte) (int, error) {
	if c.off.Load() {
		return c.Conn.Write(p)
	}
	if c.armed.Load() {
		if r := c.refused(p); r != nil {
			c.report(r)
		}
	}
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// refused returns the refusal a write p made between requests is, once per request (nil
// for the next writes of the same answer, or when p is not an error answer).
//
//go:noinline
func (c *watchConn) refused(p []byte) *Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed.Load() || c.reported {
		return nil
	}
	c.reported = true
	c.freshLocked()
	return c.refusal(p)
}

// report hands r to the shell's refusal hook. Apart from Write, whose stack frame is
// under every answer's writes.
//
//go:noinline
func (c *watchConn) report(r *Refusal) {
	c.s.refuse(*r)
}

// ReadFrom lets net/http send an answer's body with the connection's own ReadFrom
// (sendfile on a plain TCP connection) as it does without the watch. It is only called
// while a handler answers, never between requests.
func (c *watchConn) ReadFrom(r io.Reader) (int64, error) {
	if !c.off.Load() {
		c.writes.Add(1)
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite half-closes the connection when the one beneath can (a TCP connection, a
// TLS one), as net/http does before closing after an error answer (such as its 431), so
// that the client reads the answer rather than a reset; else it does nothing.
func (c *watchConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// refusal reads the refused request from c.head and net/http's answer from its first
// write w ("HTTP/1.1 431 Request Header Fields Too Large\r\n..."); nil when w is not a
// status line. Called under c.mu.
func (c *watchConn) refusal(w []byte) *Refusal {
	line, _, _ := bytes.Cut(w, []byte("\r\n"))
	rest, ok := bytes.CutPrefix(line, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 3 {
		return nil
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil
	}
	r := &Refusal{Status: status, Note: "refused by the proxy shell: " + string(rest[:min(len(rest), 256)])}
	if status == http.StatusRequestHeaderFieldsTooLarge {
		r.Note = "refused by the proxy shell: request header over " + strconv.Itoa(c.s.cfg.MaxHeaderBytes) + " bytes"
	}
	head := c.head
	reqLine, _, complete := bytes.Cut(head, []byte("\n"))
	method, target, hasTarget := bytes.Cut(bytes.TrimRight(reqLine, "\r"), []byte(" "))
	r.Method = cutMethod(string(method))
	if r.Method == "" || !hasTarget {
		return r
	}
	target, _, ended := bytes.Cut(target, []byte(" "))
	r.URLCut = !ended && !complete
	t := string(target)
	switch {
	case c.authority != "" && strings.HasPrefix(t, "/"):
		t = "https://" + strings.TrimSuffix(c.authority, ":443") + t
	case c.authority != "" && t == "*":
		t = "https://" + strings.TrimSuffix(c.authority, ":443")
	}
	r.URL = t
	if r.URLCut {
		r.URLRead = len(t) + c.read - len(head)
	}
	return r
}

// rearm starts following the connection's next request.
func (c *watchConn) rearm() {
	c.mu.Lock()
	c.reported = false
	c.mu.Unlock()
	c.armed.Store(true)
}

// entered says a handler of the shell has the connection's request: it is not refused.
func (c *watchConn) entered() {
	c.armed.Store(false)
}

// watchState follows an HTTP/1.x connection's state: idle means the answer was sent and
// the next request starts.
func watchState(c net.Conn, st http.ConnState) {
	if wc, ok := c.(*watchConn); ok && st == http.StateIdle {
		wc.rearm()
	}
}

// enteredConn marks the watchConn of r's connection (cs, connStateOf; nil when none), if
// any, as having reached a handler; a CONNECT ends the watch (the connection becomes a
// tunnel, watched inside its TLS).
func enteredConn(cs *connState, r *http.Request) {
	if cs == nil {
		return
	}
	if wc := cs.watch; wc != nil {
		wc.entered()
		if r.Method == http.MethodConnect {
			wc.off.Store(true)
		}
	}
}
