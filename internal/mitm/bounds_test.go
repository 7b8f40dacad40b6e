package mitm

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/pab-dev/pab/internal/mitm/mitmtest"
	"github.com/pab-dev/pab/internal/testtool"
)

// streamEnd is how one HTTP/2 stream of a raw client ended, and when (from the start).
type streamEnd struct {
	status string        // the answer's :status, "" if none
	rst    http2.ErrCode // the RST_STREAM's code, when reset
	reset  bool
	ended  bool // END_STREAM seen (answered whole)
	at     time.Duration
}

// h2Streams reads frames on h until every stream in want has ended (RST_STREAM or
// END_STREAM), the connection ends, or d passes; it never grants flow-control window.
// It returns each stream's end, the GOAWAY's code (if any) and whether the connection
// ended.
func (h *h2Conn) h2Streams(start time.Time, d time.Duration, want int) (map[uint32]*streamEnd, *http2.ErrCode, bool) {
	ends := map[uint32]*streamEnd{}
	get := func(id uint32) *streamEnd {
		if ends[id] == nil {
			ends[id] = &streamEnd{}
		}
		return ends[id]
	}
	done := 0
	var goAway *http2.ErrCode
	h.c.SetReadDeadline(time.Now().Add(d))
	defer h.c.SetReadDeadline(time.Time{})
	for done < want {
		f, err := h.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			return ends, goAway, !(errors.As(err, &ne) && ne.Timeout())
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
			if s := f.PseudoValue("status"); s != "" {
				e.status = s
			}
			if f.StreamEnded() && !e.ended && !e.reset {
				e.ended, e.at = true, time.Since(start)
				done++
			}
		case *http2.DataFrame:
			e := get(f.StreamID)
			if f.StreamEnded() && !e.ended && !e.reset {
				e.ended, e.at = true, time.Since(start)
				done++
			}
		case *http2.RSTStreamFrame:
			e := get(f.StreamID)
			if !e.ended && !e.reset {
				e.reset, e.rst, e.at = true, f.ErrCode, time.Since(start)
				done++
			}
		case *http2.GoAwayFrame:
			c := f.ErrCode
			goAway = &c
		}
	}
	return ends, goAway, false
}

// zeroWindow opens an h2 tunnel whose client grants no flow-control window
// (SETTINGS_INITIAL_WINDOW_SIZE 0) and asks n streams for path; it returns the
// connection and when the last HEADERS was sent.
func (g *rig) zeroWindow(t testing.TB, n int, path string) (*h2Conn, time.Time) {
	t.Helper()
	tc := g.tunnel(t, "site.test:443", "h2")
	h := newH2Conn(t, tc)
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	defer tc.SetWriteDeadline(time.Time{})
	for i := range n {
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: h.headerBlock("site.test", path),
			EndStream: true, EndHeaders: true}); err != nil {
			t.Fatalf("stream %d: %v", 2*i+1, err)
		}
	}
	return h, time.Now()
}

// TestZeroWindowStreams proves an answer stuck behind a zero HTTP/2 flow-control window
// is reset within WriteTimeout: 2 connections (1 under the race detector) whose client sets
// SETTINGS_INITIAL_WINDOW_SIZE to 0 each open 250 streams for a 215 KB answer; every
// stream ends, refused or answered and reset (RST_STREAM INTERNAL_ERROR) within
// WriteTimeout (1 s) plus 2 s of its answer's header, with at most MaxStreams (100)
// answers of a connection under way at once; meanwhile the proxy answers normal
// requests, and afterwards no request is still being answered. (Run again if it failed
// while the process stalled: see testtool.RetryStalled.)
func TestZeroWindowStreams(t *testing.T) {
	t.Parallel()
	const wt, slack = time.Second, 2 * time.Second
	g := startShell(t, func(c *Config) { c.Limits.WriteTimeout = wt })
	p := mitmtest.Proxy{Addr: g.addr, Roots: g.ca.CertPool()}
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		conns, streams := 2, 250
		if raceEnabled {
			conns = 1 // the race-instrumented shell is several times slower
		}
		var wg sync.WaitGroup
		for c := range conns {
			h, sent, err := p.ZeroWindow("site.test", "/big?n=215000", streams)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer h.C.Close()
				res := h.Streams(sent, wt+slack+10*time.Second, streams, false, false)
				for id, e := range res.Ends {
					switch {
					case e.Status == "200" && e.Reset && e.Code == http2.ErrCodeInternal:
						if e.At-e.HeadAt > wt+slack {
							t.Errorf("conn %d stream %d reset %v after its answer's header, WriteTimeout %v", c, id, e.At-e.HeadAt, wt)
						}
					case e.Status == "" && e.Reset:
					default:
						t.Errorf("conn %d stream %d: %+v", c, id, *e)
					}
				}
				if len(res.Ends) != streams {
					t.Errorf("conn %d: %d of %d streams ended (GOAWAY %v, closed %v)", c, len(res.Ends), streams, res.GoAway, res.Closed)
				}
				if n := mitmtest.MaxOpen(res); n > DefaultMaxStreams {
					t.Errorf("conn %d: %d answers under way at once, at most %d", c, n, DefaultMaxStreams)
				}
			})
		}
		// the proxy answers meanwhile
		g.checkAlive(t)
		wg.Wait()
		if !waitFor(10*time.Second, func() bool { return g.s.Active() == 0 }) {
			t.Errorf("%d requests still being answered after every stream was reset", g.s.Active())
		}
	})
}

// TestZeroWindowEarliest proves the write deadline does not fire early: the first
// stream stuck behind a zero window is reset no earlier than WriteTimeout after its
// HEADERS was sent.
func TestZeroWindowEarliest(t *testing.T) {
	t.Parallel()
	const wt = 1500 * time.Millisecond
	g := startShell(t, func(c *Config) { c.Limits.WriteTimeout = wt })
	before := time.Now()
	h, _ := g.zeroWindow(t, 1, "/big?n=100000")
	ends, _, _ := h.h2Streams(before, wt+10*time.Second, 1)
	e := ends[1]
	if e == nil || !e.reset || e.rst != http2.ErrCodeInternal {
		t.Fatalf("stream 1: %+v", e)
	}
	if e.at < wt {
		t.Errorf("reset %v after the request was sent, before WriteTimeout %v", e.at, wt)
	}
}

// TestUnreadAnswerH1 proves the same bound over HTTP/1.1, plain and in a tunnel: a client
// that stops reading a 4 MiB answer (4 KiB buffers at both ends) is closed within
// WriteTimeout plus 2 s of the server's last progress, and normal requests are answered
// meanwhile.
func TestUnreadAnswerH1(t *testing.T) {
	t.Parallel()
	const wt = time.Second
	g := startShellOn(t, func(ln net.Listener) net.Listener { return smallSendBuffer{ln} }, func(c *Config) { c.Limits.WriteTimeout = wt })
	check := func(t *testing.T, c net.Conn, target string) {
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: site.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// read nothing: once the buffers are full the server's writes stall
		if !waitFor(10*time.Second, func() bool { return g.h.arrived.Load() > 0 }) {
			t.Fatal("the request never reached the handler")
		}
		g.checkAlive(t)
		time.Sleep(wt + 2*time.Second) // the server's deadline runs out while nothing is read
		if closed, _ := closedWithin(c, 10*time.Second); !closed {
			t.Fatal("connection still open")
		}
		if !waitFor(10*time.Second, func() bool { return g.s.Active() == 0 }) {
			t.Errorf("%d requests still being answered", g.s.Active())
		}
	}
	t.Run("plain", func(t *testing.T) {
		c, err := smallReceiveBuffer.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		check(t, c, "http://site.test/big?n=4194304")
	})
	t.Run("tunnel", func(t *testing.T) {
		tc := g.tunnelWith(t, smallReceiveBuffer, "site.test:443", "http/1.1")
		check(t, tc, "/big?n=4194304")
	})
}

// TestSlowBodies proves request bodies are bounded in time: with BodyTimeout 1 s and
// MinBodyRate 100 bytes/s, a 1,000-byte body sent a byte every 300 ms (HTTP/1.1, plain
// and in a tunnel) ends with the connection closed, and an HTTP/2 POST with a
// content-length and no DATA ends with its stream answered or reset, each no earlier
// than BodyTimeout and within BodyTimeout plus the bytes' allowance plus 2 s; normal
// requests are answered meanwhile, also on the same HTTP/2 connection. (Run again if it
// failed while the process stalled: see testtool.RetryStalled.)
func TestSlowBodies(t *testing.T) {
	t.Parallel()
	const bt, rate, slack = time.Second, 100, 2 * time.Second
	g := startShell(t, func(c *Config) { c.Limits.BodyTimeout, c.Limits.MinBodyRate = bt, rate })
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		var wg sync.WaitGroup
		h1 := func(name string, c net.Conn, target string) {
			wg.Go(func() {
				start := time.Now()
				if _, err := io.WriteString(c, "POST "+target+" HTTP/1.1\r\nHost: site.test\r\nContent-Length: 1000\r\n\r\n"); err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				var sent atomic.Int64
				stop := make(chan struct{})
				go func() {
					tick := time.NewTicker(300 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							c.SetWriteDeadline(time.Now().Add(time.Second))
							if _, err := c.Write([]byte("x")); err != nil {
								return
							}
							sent.Add(1)
						}
					}
				}()
				closed, _ := closedWithin(c, 20*time.Second)
				took := time.Since(start)
				close(stop)
				allow := bt + time.Duration(sent.Load())*time.Second/rate
				switch {
				case !closed:
					t.Errorf("%s: slow body's connection still open after %v", name, took)
				case took < bt:
					t.Errorf("%s: closed %v after the header, before BodyTimeout %v", name, took, bt)
				case took > allow+slack:
					t.Errorf("%s: closed %v after the header, allowed %v", name, took, allow)
				}
			})
		}
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h1("plain", c, "http://site.test/upload")
		tc := g.tunnel(t, "site.test:443", "http/1.1")
		h1("tunnel", tc, "/upload")
		// h2: a POST with a content-length and no DATA, then a GET on the same connection
		h2c := g.tunnel(t, "site.test:443", "h2")
		h := newH2Conn(t, h2c)
		start := time.Now()
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
			BlockFragment: h.headerBlockMethod("POST", "site.test", "/upload", hpack.HeaderField{Name: "content-length", Value: "1000"})}); err != nil {
			t.Fatal(err)
		}
		ends, goAway, closed := h.h2Streams(start, bt+slack+5*time.Second, 1)
		e := ends[1]
		switch {
		case e == nil:
			t.Errorf("h2: stream 1 not ended (GOAWAY %v, closed %v)", goAway, closed)
		case e.at < bt:
			t.Errorf("h2: stream ended %v after its header, before BodyTimeout %v: %+v", e.at, bt, *e)
		case e.at > bt+slack:
			t.Errorf("h2: stream ended %v after its header, BodyTimeout %v", e.at, bt)
		}
		h.get(t, 3, "site.test", "/after")
		if r := h.readUntil(10*time.Second, answered(3)); r.status[3] != "200" {
			t.Errorf("h2: request after the slow body on the same connection: %+v", r)
		}
		g.checkAlive(t)
		wg.Wait()
	})
}

// headerBlockMethod encodes a request header of method for path on host.
func (h *h2Conn) headerBlockMethod(method, host, path string, extra ...hpack.HeaderField) []byte {
	h.buf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: method}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: host}, {Name: ":path", Value: path},
	}, extra...) {
		h.enc.WriteField(f)
	}
	return append([]byte(nil), h.buf.Bytes()...)
}

// TestEmptyContinuation proves an HTTP/2 header block kept open with empty CONTINUATION
// frames is bounded: sent one every 100 ms, its connection is closed no earlier than
// ReadHeaderTimeout (1 s) after the HEADERS and within it plus 2 s; sent as a flood, it
// is closed after maxEmptyContinuations of them, at once. The same holds for the h2c
// (prior knowledge) connections of the listening socket. Normal requests are answered
// meanwhile. (Run again if it failed while the process stalled: see
// testtool.RetryStalled.)
func TestEmptyContinuation(t *testing.T) {
	t.Parallel()
	const rht, slack = time.Second, 2 * time.Second
	g := startShell(t, func(c *Config) { c.ReadHeaderTimeout = rht })
	open := func(t testing.TB, h2c bool) (*h2Conn, net.Conn) {
		if h2c {
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return newH2Conn(t, c), c
		}
		tc := g.tunnel(t, "site.test:443", "h2")
		return newH2Conn(t, tc), tc
	}
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		var wg sync.WaitGroup
		for _, h2c := range []bool{false, true} {
			// slow: one empty CONTINUATION every 100 ms
			h, c := open(t, h2c)
			block := h.headerBlock("site.test", "/never")
			start := time.Now()
			if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true}); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					tick := time.NewTicker(100 * time.Millisecond)
					defer tick.Stop()
					for i := 0; i < maxEmptyContinuations; i++ {
						select {
						case <-stop:
							return
						case <-tick.C:
							c.SetWriteDeadline(time.Now().Add(time.Second))
							if h.fr.WriteContinuation(1, false, nil) != nil {
								return
							}
						}
					}
				}()
				closed, _ := closedWithin(c, rht+slack+5*time.Second)
				took := time.Since(start)
				switch {
				case !closed:
					t.Errorf("h2c %v: slow empty CONTINUATIONs: connection still open after %v", h2c, took)
				case took < rht:
					t.Errorf("h2c %v: closed %v after the HEADERS, before ReadHeaderTimeout %v", h2c, took, rht)
				case took > rht+slack:
					t.Errorf("h2c %v: closed %v after the HEADERS, ReadHeaderTimeout %v", h2c, took, rht)
				}
			})
			// flood: closed after maxEmptyContinuations, well before ReadHeaderTimeout
			hf, cf := open(t, h2c)
			start2 := time.Now()
			wg.Go(func() {
				cf.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if hf.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hf.headerBlock("site.test", "/never"), EndStream: true}) != nil {
					return
				}
				for range 100000 {
					if hf.fr.WriteContinuation(1, false, nil) != nil {
						return
					}
				}
			})
			wg.Go(func() {
				closed, took := closedWithin(cf, 10*time.Second)
				if !closed || time.Since(start2) >= rht {
					t.Errorf("h2c %v: flood of empty CONTINUATIONs: closed %v after %v, want closed before ReadHeaderTimeout %v", h2c, closed, took, rht)
				}
			})
		}
		g.checkAlive(t)
		wg.Wait()
	})
	for _, r := range g.h.requests() {
		if strings.Contains(r, "/never") {
			t.Errorf("the handler was given %s", r)
		}
	}
}

// TestRapidResetDefaults proves, with the default Limits (the code path every command
// uses), that a rapid reset (HEADERS then RST_STREAM, 30,000 times on one HTTP/2
// connection) ends with GOAWAY ENHANCE_YOUR_CALM and that the Handler is given at most
// DefaultRequestBurst plus DefaultRequestRate per second of the connection's life of
// them, none after the client reset it; and that the proxy answers afterwards.
func TestRapidResetDefaults(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	g := startShell(t, func(c *Config) {
		inner := c.Handler
		c.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/reset") {
				calls.Add(1)
			}
			inner.ServeHTTP(w, r)
		})
	})
	if g.s.cfg.Limits != (Limits{}).withDefaults() {
		t.Fatalf("limits %+v, want the defaults", g.s.cfg.Limits)
	}
	tc := g.tunnel(t, "site.test:443", "h2")
	h := newH2Conn(t, tc)
	start := time.Now()
	sent := make(chan int, 1)
	go func() {
		tc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		n := 0
		defer func() { sent <- n }()
		block := h.headerBlock("site.test", "/reset")
		for i := range 30000 {
			id := uint32(2*i + 1)
			if h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}) != nil {
				return
			}
			if h.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
			n++
		}
	}()
	res := h.readUntil(30*time.Second, func(r *h2Result) bool { return r.goAway != nil })
	n := <-sent
	if res.goAway == nil || res.goAwayC != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("after %d HEADERS+RST_STREAM pairs: GOAWAY %v (%v), closed %v; %d given to the handler in %v", n, res.goAway, res.goAwayC, res.closed, calls.Load(), time.Since(start))
	}
	closedWithin(tc, 10*time.Second)
	// the handlers still waiting for their turn see their stream reset
	waitFor(10*time.Second, func() bool { return g.s.Active() == 0 })
	life := time.Since(start)
	bound := int64(DefaultRequestBurst) + int64(DefaultRequestRate*life.Seconds()) + 1
	t.Logf("%d pairs sent, GOAWAY %v; %d given to the handler in %v (bound %d)", n, res.goAwayC, calls.Load(), life, bound)
	if c := calls.Load(); c > bound {
		t.Errorf("the handler was given %d reset requests in %v, bound %d", c, life, bound)
	}
	g.checkAlive(t)
}

// TestFieldLineBound proves one bound on a header field line everywhere: a
// 1,000,000-byte field line (under MaxHeaderBytes) is answered 431 on plain HTTP, in an
// HTTP/1.1 tunnel (then the connection closes) and on an HTTP/2 stream (the connection
// stays usable), and never reaches the Handler; a 60,000-byte one does.
func TestFieldLineBound(t *testing.T) {
	t.Parallel()
	g := startShell(t)
	big := strings.Repeat("a", 1000000)
	h1 := func(t *testing.T, c net.Conn, target string) {
		br := bufio.NewReader(c)
		resp, _, err := h1Exchange(t, c, br, "GET "+target+"?ok HTTP/1.1\r\nHost: site.test\r\nX-Fine: "+strings.Repeat("f", 60000)+"\r\n\r\n")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("60,000-byte field: %v %v", resp, err)
		}
		resp, _, err = h1Exchange(t, c, br, "GET "+target+" HTTP/1.1\r\nHost: site.test\r\nX-Big: "+big+"\r\n\r\n")
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("1,000,000-byte field: %v %v", resp, err)
		}
		if closed, _ := closedWithin(c, 5*time.Second); !closed {
			t.Errorf("connection open after the 431")
		}
	}
	t.Run("plain", func(t *testing.T) {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h1(t, c, "http://site.test/line")
	})
	t.Run("tunnel", func(t *testing.T) { h1(t, g.tunnel(t, "site.test:443", "http/1.1"), "/line") })
	t.Run("h2", func(t *testing.T) {
		tc := g.tunnel(t, "site.test:443", "h2")
		h := newH2Conn(t, tc)
		// a first request read to its end, so that the server's SETTINGS are acked and
		// its DATA's window given back now: no frame may come between the frames of the
		// header block below
		h.get(t, 1, "site.test", "/before")
		const before = "ok GET https://site.test/before"
		if r := h.readUntil(10*time.Second, func(r *h2Result) bool { return r.body[1] == before || r.goAway != nil }); r.body[1] != before {
			t.Fatalf("h2 first request: %+v", r)
		}
		block := h.headerBlock("site.test", "/line", hpack.HeaderField{Name: "x-big", Value: big})
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			const chunk = 16 << 10
			if h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block[:chunk], EndStream: true}) != nil {
				return
			}
			for rest := block[chunk:]; len(rest) > 0; {
				n := min(chunk, len(rest))
				if h.fr.WriteContinuation(3, n == len(rest), rest[:n]) != nil {
					return
				}
				rest = rest[n:]
			}
		}()
		if r := h.readUntil(10*time.Second, answered(3)); r.status[3] != "431" {
			t.Fatalf("h2 1,000,000-byte field: %+v", r)
		}
		<-wrote
		tc.SetWriteDeadline(time.Time{})
		h.get(t, 5, "site.test", "/after")
		if r := h.readUntil(10*time.Second, answered(5)); r.status[5] != "200" {
			t.Errorf("h2 request after the 431: %+v", r)
		}
	})
	for _, r := range g.h.requests() {
		if strings.HasSuffix(r, "/line") {
			t.Errorf("the handler was given %s", r)
		}
	}
	g.checkAlive(t)
}

// TestAdmission proves the global bound on requests being answered: with MaxActive 4,
// four blocked requests on one HTTP/2 connection fill the shell, a fifth on it is
// answered 503 with Retry-After at once, a request on a new connection is still answered
// (the reserve), and once the four end the connection is served again.
func TestAdmission(t *testing.T) {
	t.Parallel()
	g := startShell(t, func(c *Config) { c.Limits.MaxActive = 4 })
	tc := g.tunnel(t, "site.test:443", "h2")
	h := newH2Conn(t, tc)
	for id := uint32(1); id <= 7; id += 2 {
		h.get(t, id, "site.test", "/block")
	}
	if !waitFor(10*time.Second, func() bool { return g.h.blocked.Load() == 4 }) {
		t.Fatalf("%d requests blocked, want 4", g.h.blocked.Load())
	}
	h.get(t, 9, "site.test", "/fifth")
	if r := h.readUntil(10*time.Second, answered(9)); r.status[9] != "503" {
		t.Fatalf("fifth request: %+v", r)
	}
	if g.s.RefusedBusy() != 1 {
		t.Errorf("RefusedBusy %d, want 1", g.s.RefusedBusy())
	}
	g.checkAlive(t)
	g.h.open()
	if !waitFor(10*time.Second, func() bool { return g.s.Active() == 0 }) {
		t.Fatalf("%d still active", g.s.Active())
	}
	h.get(t, 11, "site.test", "/sixth")
	if r := h.readUntil(10*time.Second, answered(11)); r.status[11] != "200" {
		t.Errorf("after the blocked requests ended: %+v", r)
	}
}

// TestLimitsDefaults proves the zero Limits are the documented defaults.
func TestLimitsDefaults(t *testing.T) {
	got := (Limits{}).withDefaults()
	want := Limits{WriteTimeout: 30 * time.Second, BodyTimeout: 30 * time.Second, MinBodyRate: 4096, MaxStreams: 100,
		MaxActive: 512, MaxActiveBytes: 64 << 20, RequestRate: 200, RequestBurst: 500, MaxFieldBytes: 65536}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
}

// TestUnreadSlowBody proves the body bound holds when the Handler never reads the body:
// net/http reads an unread body's rest (up to 256 KiB) before it writes the answer, and
// that read is bounded too. A 1,000-byte body sent a byte every 300 ms to a Handler that
// answers at once still gets its answer, and its connection is closed, within
// BodyTimeout (1 s) plus its bytes at MinBodyRate plus 2 s.
func TestUnreadSlowBody(t *testing.T) {
	t.Parallel()
	const bt, rate = time.Second, 100
	g := startShell(t, func(c *Config) {
		c.Limits.BodyTimeout, c.Limits.MinBodyRate = bt, rate
		c.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "not read") })
	})
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "POST http://site.test/upload HTTP/1.1\r\nHost: site.test\r\nContent-Length: 1000\r\n\r\n")
	var sent atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
				sent.Add(1)
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	closed, _ := closedWithin(c, 20*time.Second)
	took := time.Since(start)
	allow := bt + time.Duration(sent.Load())*time.Second/rate + 2*time.Second
	if resp.StatusCode != 200 || !closed || took > allow {
		t.Errorf("status %d, closed %v after %v (allowed %v)", resp.StatusCode, closed, took, allow)
	}
}

// TestPauseBetweenWrites proves the write deadline bounds writes, not the time between
// them: an answer written in two parts with twice WriteTimeout between them (a stream of
// events, record waiting for the site) reaches the client whole over HTTP/1.1 and
// HTTP/2, with no reset.
func TestPauseBetweenWrites(t *testing.T) {
	t.Parallel()
	const wt = 500 * time.Millisecond
	g := startShell(t, func(c *Config) {
		c.Limits.WriteTimeout = wt
		inner := c.Handler
		c.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/pause" {
				inner.ServeHTTP(w, r)
				return
			}
			io.WriteString(w, "first ")
			http.NewResponseController(w).Flush()
			time.Sleep(2 * wt)
			io.WriteString(w, "second")
		})
	})
	for _, h2 := range []bool{false, true} {
		cl, tr := g.client(h2)
		resp, err := cl.Get("https://site.test/pause")
		if err != nil {
			t.Fatalf("h2 %v: %v", h2, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if err != nil || string(body) != "first second" || (resp.ProtoMajor == 2) != h2 {
			t.Errorf("h2 %v: %s %q %v", h2, resp.Proto, body, err)
		}
	}
}

// TestRequestRateProtocols: the per-connection request rate holds back HTTP/2 streams
// always, and HTTP/1.1 requests (plain proxy requests and HTTPS tunnels) only with
// RateHTTP1 (record): 40 requests on one kept-alive HTTP/1.1 connection under a rate of 2
// a second after a burst of 2 all pass at once in replay's configuration, while with
// RateHTTP1, and on HTTP/2, no more than the burst plus the rate over the time taken do.
func TestRequestRateProtocols(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		url     string
		h2, h1r bool
		limited bool
	}{
		{"plain", "http://rate.test/x", false, false, false},
		{"tunnel-h1", "https://rate.test/x", false, false, false},
		{"plain-record", "http://rate.test/x", false, true, true},
		{"tunnel-h1-record", "https://rate.test/x", false, true, true},
		{"tunnel-h2", "https://rate.test/x", true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := startShell(t, func(cfg *Config) {
				cfg.Limits.RequestRate, cfg.Limits.RequestBurst, cfg.Limits.RateHTTP1 = 2, 2, c.h1r
			})
			cl, tr := g.client(c.h2)
			defer tr.CloseIdleConnections()
			const n = 40
			start := time.Now()
			done := 0
			for ; done < n; done++ {
				if c.limited && time.Since(start) > 3*time.Second {
					break // enough to tell: the rate holds it back
				}
				resp, err := cl.Get(c.url)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			life := time.Since(start)
			bound := 2 + int(2*life.Seconds()) + 1
			t.Logf("%d requests in %v (bound with the rate %d)", done, life, bound)
			if c.limited && done > bound {
				t.Errorf("%d requests in %v passed a rate of 2/s after a burst of 2", done, life)
			}
			if !c.limited && done != n {
				t.Errorf("%d of %d requests answered", done, n)
			}
			if !c.limited && done <= bound {
				t.Errorf("%d requests in %v: held back by the rate, which applies to HTTP/2 (and HTTP/1.1 in record) only", done, life)
			}
		})
	}
}

// TestWriteDeadlineKeptAlive: an answer on an HTTP/1.1 keep-alive connection sets the
// write deadline once (not once per write and again for the last flush), and no deadline
// of an earlier answer is left to cut the next one, while a slow client is still cut: on one
// connection (a plain-HTTP proxy connection and an HTTPS tunnel), an answer after the
// connection sat idle past the deadline the previous answer set (to a request with
// Expect: 100-continue, whose interim answer net/http writes before the Handler's), more
// answers, and then an answer the client does not read, whose write must end within
// WriteTimeout (plus slack for a loaded machine).
func TestWriteDeadlineKeptAlive(t *testing.T) {
	t.Parallel()
	const wt = 300 * time.Millisecond
	type cut struct {
		err   error
		after time.Duration
	}
	cuts := make(chan cut, 2)
	g := startShell(t, func(c *Config) {
		c.Limits.WriteTimeout = wt
		c.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/big" {
				b, _ := io.ReadAll(r.Body)
				io.WriteString(w, "small "+r.URL.Path+string(b))
				return
			}
			start := time.Now()
			chunk := make([]byte, 64<<10)
			var err error
			for i := 0; i < 1024 && err == nil; i++ { // 64 MiB: more than the sockets hold
				_, err = w.Write(chunk)
			}
			cuts <- cut{err, time.Since(start)}
		})
	})
	for _, tunnel := range []bool{false, true} {
		var c net.Conn
		base := "http://kept.test"
		if tunnel {
			c, base = g.tunnel(t, "kept.test:443"), ""
		} else {
			var err error
			if c, err = net.Dial("tcp", g.addr); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		br := bufio.NewReader(c)
		// get asks for path; with a body, it sends Expect: 100-continue and sends the body
		// only once the interim answer came (net/http writes it before any answer of the
		// Handler, so a deadline left over from an earlier answer would cut it).
		get := func(path, body string) {
			t.Helper()
			head := "GET " + base + path + " HTTP/1.1\r\nHost: kept.test\r\n"
			if body != "" {
				head += "Expect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
			}
			if _, err := io.WriteString(c, head+"\r\n"); err != nil {
				t.Fatalf("tunnel %v: %s: %v", tunnel, path, err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err == nil && body != "" {
				if resp.StatusCode != http.StatusContinue {
					t.Fatalf("tunnel %v: %s: %s, want 100 Continue", tunnel, path, resp.Status)
				}
				if _, err := io.WriteString(c, body); err != nil {
					t.Fatalf("tunnel %v: %s: %v", tunnel, path, err)
				}
				resp, err = http.ReadResponse(br, nil)
			}
			if err != nil {
				t.Fatalf("tunnel %v: %s: %v", tunnel, path, err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != "small "+path+body {
				t.Fatalf("tunnel %v: %s: %q %v", tunnel, path, got, err)
			}
		}
		get("/1", "")
		time.Sleep(2 * wt) // idle past the deadline /1's answer set
		get("/2", "body")
		time.Sleep(wt / 2)
		get("/3", "")
		get("/4", "")
		if _, err := io.WriteString(c, "GET "+base+"/big HTTP/1.1\r\nHost: kept.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case x := <-cuts:
			if x.err == nil || x.after > wt+2*time.Second {
				t.Errorf("tunnel %v: the unread answer's write ended after %v with %v; want an error within %v", tunnel, x.after, x.err, wt)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("tunnel %v: the unread answer's write did not end", tunnel)
		}
		c.Close()
	}
}
