// Package mitmtest holds hostile clients of pab's proxy shell (internal/mitm), written
// with golang.org/x/net/http2's Framer on real sockets, for the tests of replay and
// record and for bench/slowstreams: answers stuck behind a zero HTTP/2 flow-control
// window, slow request bodies over HTTP/1.1 and HTTP/2, header blocks kept open with
// empty CONTINUATION frames, rapid reset. Each returns what the server did and when.
// For tests and benchmarks only.
package mitmtest

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Proxy is a proxy to attack: its address and the CA its tunnels' certificates chain to.
type Proxy struct {
	Addr  string
	Roots *x509.CertPool
}

// Dial opens a TCP connection to the proxy.
func (p Proxy) Dial() (net.Conn, error) {
	return net.DialTimeout("tcp", p.Addr, 10*time.Second)
}

// Tunnel opens a CONNECT tunnel to host:443 and does the TLS handshake offering alpn
// (which the server must choose).
func (p Proxy) Tunnel(host, alpn string) (*tls.Conn, error) {
	c, err := p.Dial()
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("CONNECT: %s", resp.Status)
	}
	if err == nil && br.Buffered() > 0 {
		err = errors.New("bytes after the CONNECT answer")
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	tc := tls.Client(c, &tls.Config{RootCAs: p.Roots, ServerName: host, NextProtos: []string{alpn}})
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	if got := tc.ConnectionState().NegotiatedProtocol; got != alpn {
		c.Close()
		return nil, fmt.Errorf("ALPN %q, want %q", got, alpn)
	}
	c.SetDeadline(time.Time{})
	return tc, nil
}

// H2 is a raw HTTP/2 client connection (the preface and a SETTINGS frame sent).
type H2 struct {
	C   net.Conn
	Fr  *http2.Framer
	ack *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

// lockedWriter makes each frame one whole Write, from any goroutine.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// NewH2 starts HTTP/2 on c with the given settings.
func NewH2(c net.Conn, settings ...http2.Setting) (*H2, error) {
	lw := &lockedWriter{w: c}
	h := &H2{C: c, Fr: http2.NewFramer(lw, c), ack: http2.NewFramer(lw, nil)}
	h.Fr.AllowIllegalWrites = true
	h.Fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.Fr.MaxHeaderListSize = 1 << 20
	h.enc = hpack.NewEncoder(&h.buf)
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	defer c.SetWriteDeadline(time.Time{})
	if _, err := io.WriteString(lw, http2.ClientPreface); err != nil {
		return nil, err
	}
	return h, h.Fr.WriteSettings(settings...)
}

// Block encodes a request header: method, https, host, path, extra fields.
func (h *H2) Block(method, host, path string, extra ...hpack.HeaderField) []byte {
	h.buf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: method}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: host}, {Name: ":path", Value: path},
	}, extra...) {
		h.enc.WriteField(f)
	}
	return bytes.Clone(h.buf.Bytes())
}

// StreamEnd is how one stream ended and when, from the start given to Streams.
type StreamEnd struct {
	Status string        // the answer's :status ("" without an answer)
	Reset  bool          // ended by RST_STREAM
	Code   http2.ErrCode // its code
	Ended  bool          // ended by END_STREAM
	Body   int           // DATA bytes received
	HeadAt time.Duration // when the answer's header came
	At     time.Duration // when the stream ended
}

// Result is what Streams saw.
type Result struct {
	Ends   map[uint32]*StreamEnd
	GoAway *http2.ErrCode
	Closed bool          // the connection ended (EOF or reset)
	At     time.Duration // when reading stopped
}

// Streams reads frames until want streams have ended, a GOAWAY came (with stopOnGoAway),
// the connection ended or d passed. It acks SETTINGS and PINGs; with grant it gives back
// the flow-control window of the DATA received, else none.
func (h *H2) Streams(start time.Time, d time.Duration, want int, grant, stopOnGoAway bool) Result {
	res := Result{Ends: map[uint32]*StreamEnd{}}
	get := func(id uint32) *StreamEnd {
		if res.Ends[id] == nil {
			res.Ends[id] = &StreamEnd{}
		}
		return res.Ends[id]
	}
	done := 0
	h.C.SetReadDeadline(time.Now().Add(d))
	defer h.C.SetReadDeadline(time.Time{})
	end := func(e *StreamEnd) {
		if !e.Ended && !e.Reset {
			e.At = time.Since(start)
			done++
		}
	}
	for done < want && !(stopOnGoAway && res.GoAway != nil) {
		f, err := h.Fr.ReadFrame()
		if err != nil {
			var ne net.Error
			res.Closed = !(errors.As(err, &ne) && ne.Timeout())
			break
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
			e := get(f.StreamID)
			if s := f.PseudoValue("status"); s != "" && e.Status == "" {
				e.Status, e.HeadAt = s, time.Since(start)
			}
			if f.StreamEnded() {
				end(e)
				e.Ended = true
			}
		case *http2.DataFrame:
			e := get(f.StreamID)
			e.Body += len(f.Data())
			if n := uint32(len(f.Data())); grant && n > 0 {
				h.ack.WriteWindowUpdate(0, n)
				if !f.StreamEnded() {
					h.ack.WriteWindowUpdate(f.StreamID, n)
				}
			}
			if f.StreamEnded() {
				end(e)
				e.Ended = true
			}
		case *http2.RSTStreamFrame:
			e := get(f.StreamID)
			if !e.Ended && !e.Reset {
				end(e)
				e.Reset, e.Code = true, f.ErrCode
			}
		case *http2.GoAwayFrame:
			c := f.ErrCode
			res.GoAway = &c
		}
	}
	res.At = time.Since(start)
	return res
}

// ZeroWindow opens an HTTP/2 tunnel to host whose client grants no flow-control window
// (SETTINGS_INITIAL_WINDOW_SIZE 0) and sends n GETs of path on it; it returns the
// connection and when the last HEADERS left. Read it with Streams(sent, d, n, false).
func (p Proxy) ZeroWindow(host, path string, n int) (*H2, time.Time, error) {
	tc, err := p.Tunnel(host, "h2")
	if err != nil {
		return nil, time.Time{}, err
	}
	h, err := NewH2(tc, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	if err != nil {
		tc.Close()
		return nil, time.Time{}, err
	}
	tc.SetWriteDeadline(time.Now().Add(20 * time.Second))
	defer tc.SetWriteDeadline(time.Time{})
	block := h.Block(http.MethodGet, host, path)
	for i := range n {
		if err := h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			tc.Close()
			return nil, time.Time{}, err
		}
	}
	return h, time.Now(), nil
}

// PostNoData opens an HTTP/2 tunnel to host and sends on stream 1 the HEADERS of a POST
// of path with a content-length of size and no DATA; it returns the connection and when
// the HEADERS left.
func (p Proxy) PostNoData(host, path string, size int) (*H2, time.Time, error) {
	tc, err := p.Tunnel(host, "h2")
	if err != nil {
		return nil, time.Time{}, err
	}
	h, err := NewH2(tc)
	if err != nil {
		tc.Close()
		return nil, time.Time{}, err
	}
	block := h.Block(http.MethodPost, host, path, hpack.HeaderField{Name: "content-length", Value: fmt.Sprint(size)})
	if err := h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
		tc.Close()
		return nil, time.Time{}, err
	}
	return h, time.Now(), nil
}

// SlowBody sends on c (a plain connection to the proxy, then target is an absolute URL,
// or an HTTP/1.1 tunnel) the header of a POST of size bytes, then one byte every
// `every` until the server closes c or stop is closed. It returns when the header left,
// when the server closed c (zero if it did not within limit) and the bytes sent.
func SlowBody(c net.Conn, target, host string, size int, every, limit time.Duration) (sent time.Time, closed time.Time, n int) {
	sent = time.Now()
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", target, host, size); err != nil {
		return sent, time.Now(), 0
	}
	var mu sync.Mutex
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	}()
	ok, at := ClosedWithin(c, limit)
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	if !ok {
		return sent, time.Time{}, n
	}
	return sent, at, n
}

// ClosedWithin reads and discards from c until the peer closes it (EOF or reset) or d
// passes; it returns whether it was closed and when.
func ClosedWithin(c net.Conn, d time.Duration) (bool, time.Time) {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 32<<10)
	for {
		if _, err := c.Read(buf); err != nil {
			return !errors.Is(err, os.ErrDeadlineExceeded), time.Now()
		}
	}
}

// EmptyContinuation opens an HTTP/2 tunnel to host, sends a GET's HEADERS without
// END_HEADERS, then count empty CONTINUATION frames, one every `every` (all at once
// when every is 0), until the server closes the connection; it returns when the HEADERS
// left and when the connection was closed (zero if not within limit). started, when not
// nil, is called once the HEADERS left or the attempt failed.
func (p Proxy) EmptyContinuation(host string, count int, every, limit time.Duration, started func()) (sent, closed time.Time, err error) {
	if started != nil {
		var once sync.Once
		defer once.Do(started)
		started0 := started
		started = func() { once.Do(started0) }
	}
	tc, err := p.Tunnel(host, "h2")
	if err != nil {
		return
	}
	defer tc.Close()
	h, err := NewH2(tc)
	if err != nil {
		return
	}
	sent = time.Now()
	if err = h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.Block(http.MethodGet, host, "/"), EndStream: true}); err != nil {
		return
	}
	if started != nil {
		started()
	}
	go func() {
		tc.SetWriteDeadline(time.Now().Add(limit))
		for range count {
			if every > 0 {
				time.Sleep(every)
			}
			if h.Fr.WriteContinuation(1, false, nil) != nil {
				return
			}
		}
	}()
	if ok, at := ClosedWithin(tc, limit); ok {
		closed = at
	}
	return sent, closed, nil
}

// RapidReset opens an HTTP/2 tunnel to host and sends n pairs of a GET of path's
// HEADERS and its RST_STREAM (CANCEL), reading meanwhile; it returns the pairs sent and
// the GOAWAY's code, if one came within limit.
func (p Proxy) RapidReset(host, path string, n int, limit time.Duration) (int, *http2.ErrCode, error) {
	tc, err := p.Tunnel(host, "h2")
	if err != nil {
		return 0, nil, err
	}
	defer tc.Close()
	h, err := NewH2(tc)
	if err != nil {
		return 0, nil, err
	}
	sentc := make(chan int, 1)
	go func() {
		tc.SetWriteDeadline(time.Now().Add(limit))
		k := 0
		defer func() { sentc <- k }()
		block := h.Block(http.MethodGet, host, path)
		for i := range n {
			id := uint32(2*i + 1)
			if h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}) != nil {
				return
			}
			if h.Fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
			k++
		}
	}()
	res := h.Streams(time.Now(), limit, 1<<30, true, true)
	tc.Close()
	return <-sentc, res.GoAway, nil
}

// TB is the part of testing.TB the checks use (testtool.Attempt has it too).
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// Bounds are the bounds the proxy under test was started with (mitm.Config's
// ReadHeaderTimeout and Limits, without defaults).
type Bounds struct {
	WriteTimeout, BodyTimeout, ReadHeaderTimeout time.Duration
	MinBodyRate                                  int // bytes per second
	MaxStreams                                   int
	// Slack is how much later than its bound a client may be cut off (0: DefaultSlack).
	Slack time.Duration
}

// Targets are what the attacks ask for.
type Targets struct {
	Host      string // an HTTPS host, reached by CONNECT Host:443
	BigPath   string // a GET on Host whose answer has a body
	PostPath  string // a POST target on Host
	PlainPost string // an absolute http:// URL to POST to on the listening socket
}

// DefaultSlack is how much later than its bound a client may be cut off: the tests run
// on a shared, loaded machine.
const DefaultSlack = 2 * time.Second

// CheckTimeBounds runs, all at once against p, conns of each: HTTP/2 tunnels that grant
// no flow-control window and ask `streams` GETs of BigPath (whose answers the proxy
// begins, header first, then cannot send); HTTP/1.1 bodies sent a byte every 300 ms,
// half on the listening socket (PlainPost) and half in tunnels; HTTP/2 POSTs with a
// content-length of 1,000 and no DATA; header blocks kept open with an empty
// CONTINUATION every 100 ms. It checks that each ends within its bound plus b.Slack (and
// not before it): every zero-window stream ends, refused or reset within WriteTimeout of
// its answer's header (before the header the time is the Handler's: record's wait for
// the site), with at most MaxStreams answers of a connection under way at once; each
// slow body's connection is closed within BodyTimeout plus its bytes at MinBodyRate;
// each POST stream ends within BodyTimeout; each header block's connection is closed
// within ReadHeaderTimeout. probe is called while they run and after; its error is
// reported.
func CheckTimeBounds(t TB, p Proxy, b Bounds, tg Targets, conns, streams int, probe func() error) {
	t.Helper()
	slack := b.Slack
	if slack <= 0 {
		slack = DefaultSlack
	}
	var wg, ready sync.WaitGroup // ready: every attack is under way
	ready.Add(4 * conns)
	for i := range conns {
		wg.Go(func() {
			h, sent, err := p.ZeroWindow(tg.Host, tg.BigPath, streams)
			ready.Done()
			if err != nil {
				t.Errorf("zero window %d: %v", i, err)
				return
			}
			defer h.C.Close()
			res := h.Streams(sent, b.WriteTimeout+slack+10*time.Second, streams, false, false)
			answered := 0
			for id, e := range res.Ends {
				if e.Status != "" && e.Status != "503" {
					answered++
				}
				// the answer's writes are bounded from its header on; before it, the
				// time is the Handler's (record waits for the site)
				if e.At-e.HeadAt > b.WriteTimeout+slack {
					t.Errorf("zero window %d: stream %d ended %v after its answer's header, WriteTimeout %v", i, id, e.At-e.HeadAt, b.WriteTimeout)
				}
			}
			if len(res.Ends) < streams {
				t.Errorf("zero window %d: %d of %d streams ended within %v; GOAWAY %v, closed %v", i, len(res.Ends), streams, res.At, res.GoAway, res.Closed)
			}
			if n := MaxOpen(res); n > b.MaxStreams {
				t.Errorf("zero window %d: %d answers under way at once, at most %d streams", i, n, b.MaxStreams)
			}
			t.Logf("zero window %d: %d streams answered (as others were reset), %d refused", i, answered, streams-answered)
		})
		wg.Go(func() {
			var c net.Conn
			var err error
			target := tg.PlainPost
			host := ""
			if i%2 == 0 {
				c, err = p.Dial()
				if u, perr := httpURLHost(target); perr == nil {
					host = u
				}
			} else {
				c, err = p.Tunnel(tg.Host, "http/1.1")
				target, host = tg.PostPath, tg.Host
			}
			ready.Done()
			if err != nil {
				t.Errorf("slow body %d: %v", i, err)
				return
			}
			defer c.Close()
			sent, closed, n := SlowBody(c, target, host, 1000, 300*time.Millisecond, b.BodyTimeout+slack+10*time.Second)
			allow := b.BodyTimeout + time.Duration(n)*time.Second/time.Duration(max(b.MinBodyRate, 1))
			switch {
			case closed.IsZero():
				t.Errorf("slow body %d (%s): connection still open after %v", i, target, time.Since(sent))
			case closed.Sub(sent) < b.BodyTimeout:
				t.Errorf("slow body %d (%s): closed %v after the header, before BodyTimeout %v", i, target, closed.Sub(sent), b.BodyTimeout)
			case closed.Sub(sent) > allow+slack:
				t.Errorf("slow body %d (%s): closed %v after the header, allowed %v", i, target, closed.Sub(sent), allow)
			}
		})
		wg.Go(func() {
			h, sent, err := p.PostNoData(tg.Host, tg.PostPath, 1000)
			ready.Done()
			if err != nil {
				t.Errorf("h2 POST %d: %v", i, err)
				return
			}
			defer h.C.Close()
			res := h.Streams(sent, b.BodyTimeout+slack+10*time.Second, 1, true, false)
			e := res.Ends[1]
			switch {
			case e == nil:
				t.Errorf("h2 POST %d: stream not ended after %v (GOAWAY %v, closed %v)", i, res.At, res.GoAway, res.Closed)
			case e.At < b.BodyTimeout:
				t.Errorf("h2 POST %d: stream ended %v after its header, before BodyTimeout %v: %+v", i, e.At, b.BodyTimeout, *e)
			case e.At > b.BodyTimeout+slack:
				t.Errorf("h2 POST %d: stream ended %v after its header, BodyTimeout %v", i, e.At, b.BodyTimeout)
			}
		})
		wg.Go(func() {
			sent, closed, err := p.EmptyContinuation(tg.Host, 10, 100*time.Millisecond, b.ReadHeaderTimeout+slack+10*time.Second, ready.Done)
			switch {
			case err != nil:
				t.Errorf("empty CONTINUATION %d: %v", i, err)
			case closed.IsZero():
				t.Errorf("empty CONTINUATION %d: connection still open", i)
			case closed.Sub(sent) < b.ReadHeaderTimeout:
				t.Errorf("empty CONTINUATION %d: closed %v after the HEADERS, before ReadHeaderTimeout %v", i, closed.Sub(sent), b.ReadHeaderTimeout)
			case closed.Sub(sent) > b.ReadHeaderTimeout+slack:
				t.Errorf("empty CONTINUATION %d: closed %v after the HEADERS, ReadHeaderTimeout %v", i, closed.Sub(sent), b.ReadHeaderTimeout)
			}
		})
	}
	ready.Wait()
	if err := probe(); err != nil {
		t.Errorf("a normal request while under attack: %v", err)
	}
	wg.Wait()
	if err := probe(); err != nil {
		t.Errorf("a normal request after the attacks: %v", err)
	}
}

// MaxOpen is the most answers a client saw under way at once: header received, stream not
// ended. (A stream ends on the wire before the server starts another in its place, so
// the client sees no more than the server has.)
func MaxOpen(res Result) int {
	type ev struct {
		at time.Duration
		d  int
	}
	var evs []ev
	for _, e := range res.Ends {
		if e.Status != "" {
			evs = append(evs, ev{e.HeadAt, +1}, ev{e.At, -1})
		}
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.d, b.d)
	})
	n, most := 0, 0
	for _, e := range evs {
		n += e.d
		most = max(most, n)
	}
	return most
}

// httpURLHost is the host of an absolute http:// URL.
func httpURLHost(u string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	return req.URL.Host, nil
}
