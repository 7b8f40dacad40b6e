package mitm

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// bigHeaderRequest is a request whose header holds one 2 MiB field line.
func bigHeaderRequest(target string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: site.test\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n"
}

// expect431 writes raw on c (in the background: the server stops reading) and checks
// the answer is a 431 and that c is closed after it.
func expect431(t *testing.T, c net.Conn, raw string) {
	t.Helper()
	go func() {
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, raw) // fails once the server hangs up
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a 2 MiB header: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("2 MiB header: status %d, want 431", resp.StatusCode)
	}
	if closed, _ := closedWithin(c, 5*time.Second); !closed {
		t.Errorf("connection still open after the 431")
	}
}

// TestHeaderTooLarge proves MaxHeaderBytes holds everywhere: a 2 MiB header line gets 431
// and a closed connection inside an HTTP/1.1 tunnel and on plain HTTP, an HTTP/2 header
// list of 2 MiB gets 431 or a stream or connection error, the handler never sees any of
// them, and the proxy answers normal requests afterwards.
func TestHeaderTooLarge(t *testing.T) {
	t.Parallel()
	g := startShell(t)
	t.Run("tunnel", func(t *testing.T) {
		tc := g.tunnel(t, "site.test:443", "http/1.1")
		expect431(t, tc, bigHeaderRequest("/big-header"))
		g.checkAlive(t)
	})
	t.Run("plain", func(t *testing.T) {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		expect431(t, c, bigHeaderRequest("http://site.test/big-header"))
		g.checkAlive(t)
	})
	t.Run("connect", func(t *testing.T) {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		expect431(t, c, "CONNECT site.test:443 HTTP/1.1\r\nHost: site.test:443\r\nX-Big: "+strings.Repeat("a", 2<<20)+"\r\n\r\n")
		g.checkAlive(t)
	})
	t.Run("h2", func(t *testing.T) {
		tc := g.tunnel(t, "site.test:443", "h2")
		h := newH2Conn(t, tc)
		// 256 fields of 8 KiB: 2 MiB of header list in HEADERS and CONTINUATION frames
		var extra []hpack.HeaderField
		for i := range 256 {
			extra = append(extra, hpack.HeaderField{Name: "x-big-" + strings.Repeat("b", i%7+1), Value: strings.Repeat("v", 8<<10)})
		}
		block := h.headerBlock("site.test", "/big-header", extra...)
		go func() {
			tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			const chunk = 16 << 10
			first := block[:chunk]
			rest := block[chunk:]
			if h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true}) != nil {
				return
			}
			for len(rest) > 0 {
				n := min(chunk, len(rest))
				if h.fr.WriteContinuation(1, n == len(rest), rest[:n]) != nil {
					return
				}
				rest = rest[n:]
			}
		}()
		res := h.readUntil(10*time.Second, func(r *h2Result) bool {
			_, st := r.status[1]
			_, rst := r.rst[1]
			return st || rst || r.goAway != nil
		})
		switch {
		case res.status[1] == "431":
		case res.rst[1] != 0, res.goAway != nil && res.goAwayC != http2.ErrCodeNo, res.closed:
			t.Logf("h2 2 MiB header list: rst %v goaway %v closed %v", res.rst, res.goAwayC, res.closed)
		default:
			t.Fatalf("h2 2 MiB header list: status %q rst %v goaway %v closed %v", res.status[1], res.rst, res.goAway, res.closed)
		}
		if res.status[1] == "431" && res.goAway == nil {
			// the connection stays usable after a 431 on one stream
			tc.SetWriteDeadline(time.Time{})
			h.get(t, 3, "site.test", "/after")
			if r := h.readUntil(10*time.Second, answered(3)); r.status[3] != "200" || r.body[3] != "ok GET https://site.test/after" {
				t.Errorf("request after the 431 on the same connection: %+v", r)
			}
		}
		g.checkAlive(t)
	})
	for _, r := range g.h.requests() {
		if strings.Contains(r, "big-header") {
			t.Errorf("the handler was given a request over the header limit: %s", r)
		}
	}
	g.checkAlive(t)
}

// TestBadConnectLines proves malformed CONNECT requests are refused (400, or net/http's
// own 4xx) without a tunnel being opened, and that the proxy keeps answering after each.
func TestBadConnectLines(t *testing.T) {
	t.Parallel()
	const rht = 2 * time.Second
	g := startShell(t, func(c *Config) { c.ReadHeaderTimeout = rht })
	for _, c := range []struct {
		name string
		raw  string
		want int // expected status; 0: 400, or closed without an answer (by rht)
	}{
		// shorter than "PRI * HTTP/2.0": net/http waits for more (h2c preface check)
		{"bare CONNECT", "CONNECT\r\n", 0},
		{"no target", "CONNECT\r\nHost: site.test:443\r\n\r\n", 400},
		{"no version", "CONNECT site.test:443\r\n\r\n", 400},
		{"no port", "CONNECT foo HTTP/1.1\r\nHost: foo\r\n\r\n", 400},
		{"port out of range", "CONNECT host:99999 HTTP/1.1\r\nHost: host:99999\r\n\r\n", 400},
		{"port zero", "CONNECT host:0 HTTP/1.1\r\nHost: host:0\r\n\r\n", 400},
		{"signed port", "CONNECT host:+443 HTTP/1.1\r\nHost: host:+443\r\n\r\n", 400},
		{"empty host", "CONNECT :443 HTTP/1.1\r\nHost: :443\r\n\r\n", 400},
		{"path target", "CONNECT /etc/passwd HTTP/1.1\r\nHost: site.test:443\r\n\r\n", 400},
		{"path target no host", "CONNECT /x HTTP/1.1\r\n\r\n", 400},
		{"absolute URL target", "CONNECT http://site.test:443/ HTTP/1.1\r\nHost: site.test:443\r\n\r\n", 400},
		{"userinfo", "CONNECT user@site.test:443 HTTP/1.1\r\nHost: site.test:443\r\n\r\n", 400},
		{"1 MiB target", "CONNECT " + strings.Repeat("a", 1<<20+10) + ".test:443 HTTP/1.1\r\n\r\n", 400},
		{"2 MiB target", "CONNECT " + strings.Repeat("a", 2<<20) + ".test:443 HTTP/1.1\r\n\r\n", 431},
		{"bracketed name", "CONNECT [site.test]:443 HTTP/1.1\r\nHost: site.test:443\r\n\r\n", 400},
		{"control byte", "CONNECT site\x01.test:443 HTTP/1.1\r\nHost: site.test:443\r\n\r\n", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go func() {
				conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(conn, c.raw)
			}()
			start := time.Now()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "CONNECT"})
			if c.want == 0 {
				// closed before the 10 s read deadline: bounded by ReadHeaderTimeout
				if d := time.Since(start); err == nil && resp.StatusCode != 400 || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("answer %v, %v after %v; want a 400 or the connection closed by the %v ReadHeaderTimeout", resp, err, d, rht)
				}
				g.checkAlive(t)
				return
			}
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("status %d, want %d", resp.StatusCode, c.want)
			}
			if closed, _ := closedWithin(conn, 5*time.Second); !closed {
				t.Errorf("connection still open after a refused CONNECT")
			}
			g.checkAlive(t)
		})
	}
	if n, f := g.s.Tunnels(), g.s.FailedHandshakes(); n != 2*g.alive.Load() || f != 0 {
		t.Errorf("%d tunnels and %d failed handshakes: tunnels were opened for malformed CONNECTs", n-2*g.alive.Load(), f)
	}
	if r := g.h.requests(); len(r) != 0 {
		t.Errorf("the handler saw %q", r)
	}
	g.checkAlive(t)
}

// TestBadClientHellos proves that what follows a CONNECT's 200 when it is not a usable
// TLS ClientHello (random bytes, a truncated ClientHello, a TLS 1.0-only client, an SNI
// name with characters no host has) fails the handshake, closes the tunnel, is counted
// by FailedHandshakes, and leaves the proxy answering.
func TestBadClientHellos(t *testing.T) {
	t.Parallel()
	const hsTimeout = time.Second
	g := startShell(t, func(c *Config) { c.HandshakeTimeout = hsTimeout })
	// a real ClientHello, to cut short
	var hello []byte
	{
		a, b := net.Pipe()
		go func() {
			tls.Client(a, &tls.Config{ServerName: "site.test", InsecureSkipVerify: true}).Handshake()
		}()
		buf := make([]byte, 4096)
		b.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := b.Read(buf)
		if err != nil || n < 50 {
			t.Fatalf("ClientHello: %d bytes %v", n, err)
		}
		hello = buf[:n]
		a.Close()
		b.Close()
	}
	for _, c := range []struct {
		name  string
		raw   []byte      // bytes sent after the 200
		tls   *tls.Config // else a TLS client with this config
		waits bool        // the server waits for more bytes: closed by HandshakeTimeout
	}{
		{name: "random bytes", raw: payload(600)},
		{name: "HTTP instead of TLS", raw: []byte("GET / HTTP/1.1\r\nHost: site.test\r\n\r\n")},
		{name: "truncated ClientHello", raw: hello[:len(hello)/2], waits: true},
		{name: "ClientHello record header only", raw: hello[:5], waits: true},
		{name: "TLS 1.0 only", tls: &tls.Config{ServerName: "site.test", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10, InsecureSkipVerify: true}},
		{name: "TLS 1.1 only", tls: &tls.Config{ServerName: "site.test", MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true}},
		{name: "SNI with bad characters", tls: &tls.Config{ServerName: "bad!name$.test", InsecureSkipVerify: true}},
		{name: "SNI with a space", tls: &tls.Config{ServerName: "bad name.test", InsecureSkipVerify: true}},
		{name: "SNI over-long", tls: &tls.Config{ServerName: strings.Repeat("a", 250) + ".test", InsecureSkipVerify: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := g.s.FailedHandshakes()
			start := time.Now() // the server's handshake clock starts after this
			conn, br := g.connect(t, "site.test:443")
			sent := time.Now()
			if c.tls != nil {
				tc := tls.Client(&readerConn{Conn: conn, r: br}, c.tls)
				tc.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err == nil {
					t.Fatalf("handshake succeeded (%s)", tc.ConnectionState().ServerName)
				}
			} else {
				conn.Write(c.raw)
			}
			closed, _ := closedWithin(conn, hsTimeout+10*time.Second)
			d := time.Since(start)
			switch {
			case !closed:
				t.Fatalf("tunnel still open %v after a bad handshake", d)
			case c.waits && d < hsTimeout:
				t.Errorf("incomplete ClientHello: closed after %v, before the handshake timeout %v", d, hsTimeout)
			case time.Since(sent) > hsTimeout+3*time.Second:
				t.Errorf("closed %v after the 200, handshake timeout %v", time.Since(sent), hsTimeout)
			}
			if !waitFor(5*time.Second, func() bool { return g.s.FailedHandshakes() == before+1 }) {
				t.Errorf("FailedHandshakes %d, want %d", g.s.FailedHandshakes(), before+1)
			}
			g.checkAlive(t)
		})
	}
	if n := g.s.Tunnels() - 2*g.alive.Load(); n != 0 {
		t.Errorf("%d bad handshakes counted as established tunnels", n)
	}
	if r := g.h.requests(); len(r) != 0 {
		t.Errorf("the handler saw %q", r)
	}
	g.checkAlive(t)
}

// TestEarlyClientHello proves a client that sends its ClientHello in the same write as
// the CONNECT (without waiting for the 200) still gets its tunnel: the bytes the
// listening socket had already read are not lost.
func TestEarlyClientHello(t *testing.T) {
	t.Parallel()
	g := startShell(t)
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ec := &earlyClientConn{Conn: c, prefix: []byte("CONNECT site.test:443 HTTP/1.1\r\nHost: site.test:443\r\n\r\n")}
	tc := tls.Client(ec, &tls.Config{RootCAs: g.ca.CertPool(), ServerName: "site.test", NextProtos: []string{"http/1.1"}})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with the ClientHello sent along with the CONNECT: %v", err)
	}
	resp, body, err := h1Exchange(t, tc, bufio.NewReader(tc), "GET /early HTTP/1.1\r\nHost: site.test\r\n\r\n")
	if err != nil || resp.StatusCode != 200 || body != "ok GET https://site.test/early" {
		t.Fatalf("request in the tunnel: %v %q %v", resp, body, err)
	}
}

// earlyClientConn sends prefix with its first Write and strips the proxy's CONNECT answer
// before the first Read.
type earlyClientConn struct {
	net.Conn
	prefix []byte
	br     *bufio.Reader
}

func (c *earlyClientConn) Write(p []byte) (int, error) {
	if c.prefix != nil {
		b := append(c.prefix, p...)
		c.prefix = nil
		if _, err := c.Conn.Write(b); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *earlyClientConn) Read(p []byte) (int, error) {
	if c.br == nil {
		c.br = bufio.NewReader(c.Conn)
		resp, err := http.ReadResponse(c.br, &http.Request{Method: "CONNECT"})
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, io.ErrUnexpectedEOF
		}
	}
	return c.br.Read(p)
}
