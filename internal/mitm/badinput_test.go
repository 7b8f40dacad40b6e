package mitm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestH2BadFrames proves that HTTP/2 frames of the wrong kind inside an h2 tunnel end the
// connection with a GOAWAY carrying an error code (or reset the offending stream where
// RFC 9113 says a stream error), that a flood of PINGs nobody reads or of rapidly reset
// streams is cut off, that the handler never runs more than the advertised stream limit
// at once, and that the proxy keeps answering afterwards.
func TestH2BadFrames(t *testing.T) {
	t.Parallel()
	g := startShellOn(t, func(ln net.Listener) net.Listener { return smallSendBuffer{ln} })
	t.Run("frames", func(t *testing.T) { h2BadFrames(t, g) })
	// the rapid reset never ran more handlers at once than the 250 streams advertised
	if n := g.h.maxBlk.Load(); n > 250 {
		t.Errorf("%d handlers ran at once", n)
	}
	g.h.open()
	for _, r := range g.h.requests() {
		if !strings.HasSuffix(r, "/block") {
			t.Errorf("the handler was given %s", r)
		}
	}
	g.checkAlive(t)
}

// h2BadFrames runs TestH2BadFrames's cases at once, each in its own goroutine (each
// waits a second for the connection to close after its GOAWAY; t.Parallel would run
// only GOMAXPROCS of them at a time).
func h2BadFrames(t *testing.T, g *rig) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, c := range []h2Case{
		{name: "DATA on stream 0", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteData(0, false, []byte("hello"))
		}, code: http2.ErrCodeProtocol},
		{name: "CONTINUATION without HEADERS", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteContinuation(1, true, h.headerBlock("site.test", "/cont"))
		}, code: http2.ErrCodeProtocol},
		{name: "SETTINGS with bad length", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteRawFrame(http2.FrameSettings, 0, 0, []byte{0, 3, 0, 0, 0}) // 5 bytes, not a multiple of 6
		}, code: http2.ErrCodeFrameSize},
		{name: "SETTINGS on a stream", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteRawFrame(http2.FrameSettings, 0, 1, nil)
		}, code: http2.ErrCodeProtocol},
		{name: "PING with bad length", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteRawFrame(http2.FramePing, 0, 0, []byte{1, 2, 3})
		}, code: http2.ErrCodeFrameSize},
		{name: "WINDOW_UPDATE of 0 on the connection", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 0, 0})
		}, code: http2.ErrCodeProtocol},
		{name: "HEADERS on an even stream", send: func(t *testing.T, h *h2Conn) {
			h.get(t, 2, "site.test", "/even")
		}, code: http2.ErrCodeProtocol},
		{name: "HEADERS that depend on their own stream", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.headerBlock("site.test", "/self"),
				EndStream: true, EndHeaders: true, Priority: http2.PriorityParam{StreamDep: 1, Weight: 15}})
		}, rst: 1},
		{name: "PRIORITY on its own stream", send: func(t *testing.T, h *h2Conn) {
			h.fr.WritePriority(3, http2.PriorityParam{StreamDep: 3, Weight: 15})
		}, rst: 3},
		{name: "RST_STREAM on an idle stream", send: func(t *testing.T, h *h2Conn) {
			h.fr.WriteRSTStream(5, http2.ErrCodeCancel)
		}, code: http2.ErrCodeProtocol},
		{name: "flood of RST_STREAMs", send: func(t *testing.T, h *h2Conn) {
			for id := uint32(1); id < 2000; id += 2 {
				h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
		}, code: http2.ErrCodeProtocol},
		{name: "rapid reset", send: func(t *testing.T, h *h2Conn) {
			// streams opened and reset at once, their handlers still running (/block)
			for id := uint32(1); id < 4000; id += 2 {
				if h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.headerBlock("site.test", "/block"),
					EndStream: true, EndHeaders: true}) != nil {
					return
				}
				if h.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
					return
				}
			}

		}, code: http2.ErrCodeEnhanceYourCalm},
		{name: "flood of PINGs never read", small: true, send: func(t *testing.T, h *h2Conn) {
			// 10000 PINGs a write, up to 50 writes (the server gives up after 10000
			// unsent acks)
			var batch bytes.Buffer
			fr := http2.NewFramer(&batch, nil)
			for i := range 10000 {
				fr.WritePing(false, [8]byte{byte(i), byte(i >> 8)})
			}
			for range 50 {
				if _, err := h.c.Write(batch.Bytes()); err != nil {
					return // the server hung up
				}
			}
		}},
	} {
		wg.Go(func() { t.Run(c.name, func(t *testing.T) { h2BadFrame(t, g, c) }) })
	}
}

// h2BadFrame runs one case of TestH2BadFrames.
func h2BadFrame(t *testing.T, g *rig, c h2Case) {
	d := &net.Dialer{}
	if c.small {
		d = smallReceiveBuffer
	}
	tc := g.tunnelWith(t, d, "site.test:443", "h2")
	h := newH2Conn(t, tc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		c.send(t, h)
	}()
	if c.code == 0 && c.rst == 0 {
		<-done // nothing is read while flooding
	}
	res := h.readUntil(10*time.Second, func(r *h2Result) bool { return r.goAway != nil || c.rst != 0 && r.rst[c.rst] != 0 })
	<-done
	switch {
	case c.rst != 0:
		if res.rst[c.rst] != http2.ErrCodeProtocol && res.goAwayC != http2.ErrCodeProtocol {
			t.Errorf("want RST_STREAM or GOAWAY PROTOCOL_ERROR, got rst %v goaway %v closed %v", res.rst, res.goAway, res.closed)
		}
	case c.code != 0:
		if res.goAway == nil || res.goAwayC != c.code {
			t.Errorf("want GOAWAY %v, got goaway %v (%v) closed %v", c.code, res.goAway, res.goAwayC, res.closed)
		}
	default:
		if res.goAway == nil && !res.closed {
			t.Errorf("connection neither gone away nor closed")
		}
	}
	if c.rst == 0 {
		if closed, _ := closedWithin(tc, 5*time.Second); !closed {
			t.Errorf("connection still open after GOAWAY %v", res.goAwayC)
		}
	}
	g.checkAlive(t)
}

// h2Case is one case of TestH2BadFrames.
type h2Case struct {
	name  string
	small bool // the client's receive buffer is small: the server's writes block
	send  func(t *testing.T, h *h2Conn)
	code  http2.ErrCode // GOAWAY error code expected (0: any error, or the connection closed)
	rst   uint32        // else: the stream reset
}

// smuggle is one request-smuggling attempt: raw bytes that hold a first request and,
// under some reading of the framing, a second one (/smuggled).
type smuggle struct {
	name    string
	raw     string
	want    []string // the requests the handler must see, in order
	answers []int    // the statuses answered, in order
	// open: the connection may stay open, the framing being unambiguous (RFC 9112
	// section 2.2 lets a recipient take a bare LF as a line end, as net/http does)
	open bool
}

func smuggles(prefix string) []smuggle {
	p := prefix // "" inside a tunnel, "http://site.test" on plain HTTP
	second := "GET " + p + "/smuggled HTTP/1.1\r\nHost: site.test\r\n\r\n"
	first := "POST " + p + "/first HTTP/1.1\r\nHost: site.test\r\n"
	n := strconv.Itoa(len(second))
	posted := []string{"POST /first"}
	return []smuggle{
		// Content-Length says the second request is body, chunked says it is a request
		{name: "CL and TE", raw: first + "Content-Length: " + strconv.Itoa(5+len(second)) +
			"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + second, want: posted, answers: []int{200}},
		{name: "TE and CL", raw: first + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" +
			"5\r\nhello\r\n0\r\n\r\n" + second, want: posted, answers: []int{200}},
		{name: "TE obs-folded", raw: first + "Content-Length: " + strconv.Itoa(5+len(second)) +
			"\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + second, want: posted, answers: []int{200}},
		{name: "TE not chunked", raw: first + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + second,
			answers: []int{501}},
		{name: "TE twice", raw: first + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + second,
			answers: []int{501}},
		{name: "two Content-Lengths", raw: first + "Content-Length: 0\r\nContent-Length: " + n + "\r\n\r\n" + second,
			answers: []int{400}},
		{name: "Content-Length list", raw: first + "Content-Length: 0, " + n + "\r\n\r\n" + second,
			answers: []int{400}},
		{name: "CL obs-folded", raw: first + "Content-Length: 0\r\n " + n + "\r\n\r\n" + second,
			answers: []int{400}},
		{name: "obs-fold on the first field line", raw: "POST " + p + "/first HTTP/1.1\r\n Content-Length: " + n +
			"\r\nHost: site.test\r\n\r\n" + second, answers: []int{400}},
		{name: "bare LF before CL", raw: first + "X-A: a\nContent-Length: " + n + "\r\n\r\n" + second,
			want: posted, answers: []int{200}, open: true},
		{name: "bare CR", raw: first + "X-A: a\rContent-Length: " + n + "\r\n\r\n" + second,
			answers: []int{400}},
		{name: "space before colon", raw: first + "Content-Length : " + n + "\r\n\r\n" + second,
			answers: []int{400}},
		{name: "chunk size overflow", raw: first + "Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n" + second,
			want: posted, answers: []int{200}},
		{name: "chunk line with bare LF", raw: first + "Transfer-Encoding: chunked\r\n\r\n2;x\nxx\r\n0\r\n\r\n" + second,
			want: posted, answers: []int{200}},
	}
}

// TestSmuggling proves that ambiguous or malformed request framing, inside a tunnel and
// on plain HTTP, is answered 400 or ends the connection, and that no bytes of a request
// body are ever served as a second request: the handler sees exactly the requests
// expected (the test reads every answer until the connection closes).
func TestSmuggling(t *testing.T) {
	t.Parallel()
	g := startShell(t)
	for _, where := range []string{"tunnel", "plain"} {
		prefix := ""
		if where == "plain" {
			prefix = "http://site.test"
		}
		for _, c := range smuggles(prefix) {
			t.Run(where+"/"+c.name, func(t *testing.T) {
				var conn net.Conn
				if where == "tunnel" {
					conn = g.tunnel(t, "site.test:443", "http/1.1")
				} else {
					var err error
					if conn, err = net.Dial("tcp", g.addr); err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
				}
				before := len(g.h.requests())
				conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
				go io.WriteString(conn, c.raw)
				// answers until the connection closes or stays silent for half a second
				br := bufio.NewReader(conn)
				var statuses []int
				closed := false
				for {
					conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						closed = !errors.Is(err, os.ErrDeadlineExceeded)
						break
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					statuses = append(statuses, resp.StatusCode)
				}
				want := c.want
				if !closed && c.open {
					// answers come in order: a smuggled request, however slow, would be
					// answered before this one
					probe := "GET " + prefix + "/probe HTTP/1.1\r\nHost: site.test\r\n\r\n"
					resp, body, err := h1Exchange(t, conn, br, probe)
					if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(body, "/probe") {
						t.Fatalf("probe after the open answer: %v %q %v", resp, body, err)
					}
					want = append(slices.Clone(want), "GET /probe")
				}
				got := g.h.requests()[before:]
				for i := range got {
					got[i] = strings.Replace(got[i], "https://site.test", "", 1)
					got[i] = strings.Replace(got[i], "http://site.test", "", 1)
				}
				if !slices.Equal(got, want) {
					t.Errorf("handler saw %q, want %q", got, want)
				}
				if !slices.Equal(statuses, c.answers) {
					t.Errorf("answers %v, want %v", statuses, c.answers)
				}
				if !closed && !c.open {
					t.Errorf("connection left open")
				}
				g.checkAlive(t)
			})
		}
	}
	g.checkAlive(t)
}
