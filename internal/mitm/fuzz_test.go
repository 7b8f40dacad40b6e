package mitm

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// FuzzCheckAuthority checks what checkAuthority lets through to goproxy and the tunnel:
// every accepted CONNECT target is host:port with a decimal port from 1 to 65535 and a
// non-empty host; net/http parses "CONNECT target" with URL.Host equal to the target (so
// goproxy's host and the shell's check agree); and it is a valid URL authority, so the
// tunnel's request URLs built from it parse back to the same host.
func FuzzCheckAuthority(f *testing.F) {
	for _, s := range []string{
		"site.test:443", "127.0.0.1:8443", "[::1]:443", "[::ffff:1.2.3.4]:1", "a:65535",
		"foo", "host:99999", "host:0", "host:+443", ":443", "/path", "user@host:443",
		"[site.test]:443", "[fe80::1%25eth0]:443", "ho%41st:443", "a b:443", "host:443/",
		"http://site.test:443", "xn--bcher-kva.test:443", "under_score.test:80", "host:00443",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, a string) {
		if checkAuthority(a) != nil {
			return
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			t.Fatalf("%q accepted: %v, host %q", a, err, host)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
			t.Fatalf("%q accepted with port %q", a, port)
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("CONNECT " + a + " HTTP/1.1\r\nHost: " + a + "\r\n\r\n")))
		if err != nil {
			t.Fatalf("%q accepted, but net/http refuses it: %v", a, err)
		}
		if req.URL.Host != a || req.RequestURI != a {
			t.Fatalf("%q accepted, but net/http reads host %q, target %q", a, req.URL.Host, req.RequestURI)
		}
		u, err := url.Parse("https://" + a + "/x")
		if err != nil || u.Host != a || u.Port() != port {
			t.Fatalf("%q accepted, but as a URL authority: %v host %q port %q", a, err, u.Host, u.Port())
		}
	})
}

// FuzzH2Watch checks the HTTP/2 frame follower of h2Watch: for any bytes after the
// preface, read in pieces of any sizes, it never panics, its state is the same as when
// the bytes come in one piece, and, when the bytes are whole frames, it is inside a
// header block exactly when the last HEADERS, or a CONTINUATION after it, had no
// END_HEADERS (a walk over the frames written from RFC 9113 section 4.1). Seeded with
// frames written by x/net/http2's Framer.
func FuzzH2Watch(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	fr.AllowIllegalWrites = true
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("abc")})
	fr.WriteContinuation(1, false, nil)
	fr.WriteContinuation(1, true, []byte("de"))
	fr.WriteData(1, true, []byte("body"))
	f.Add(seed.Bytes(), uint8(3))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		s := &Server{cfg: Config{ReadHeaderTimeout: time.Hour}, logf: log.New(io.Discard, "", 0)}
		whole := &h2Watch{Conn: nopConn{}, s: s}
		whole.follow(b)
		whole.stop()
		split := &h2Watch{Conn: nopConn{}, s: s}
		n := int(step%17) + 1
		for i := 0; i < len(b); i += n {
			split.follow(b[i:min(i+n, len(b))])
		}
		split.stop()
		if whole.inBlock != split.inBlock || whole.empty != split.empty || whole.hdrN != split.hdrN || whole.skip != split.skip {
			t.Fatalf("state differs: whole %v %d %d %d, in pieces of %d %v %d %d %d", whole.inBlock, whole.empty, whole.hdrN, whole.skip,
				n, split.inBlock, split.empty, split.hdrN, split.skip)
		}
		// a walk over whole frames (RFC 9113 section 4.1: 24-bit length, type, flags,
		// stream), when the bytes are whole frames
		inBlock, i := false, 0
		for i+9 <= len(b) {
			length := int(b[i])<<16 | int(b[i+1])<<8 | int(b[i+2])
			typ, flags := http2.FrameType(b[i+3]), http2.Flags(b[i+4])
			switch {
			case typ == http2.FrameHeaders:
				inBlock = flags&http2.FlagHeadersEndHeaders == 0
			case typ == http2.FrameContinuation && flags&http2.FlagContinuationEndHeaders != 0:
				inBlock = false
			}
			i += 9 + length
		}
		if i == len(b) && whole.inBlock != inBlock {
			t.Fatalf("in a header block: follower %v, whole-frame walk %v", whole.inBlock, inBlock)
		}
	})
}

// nopConn is a net.Conn that does nothing (the follower only closes it).
type nopConn struct{ net.Conn }

func (nopConn) Close() error         { return nil }
func (nopConn) RemoteAddr() net.Addr { return &net.TCPAddr{} }
