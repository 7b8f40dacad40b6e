package mitm

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestTunnelAuthority: a request inside a tunnel that names no host (HTTP/1.0 without
// Host; HTTP/2 without :authority or Host) gets the tunnel's CONNECT authority as its URL's
// host, with and without the refusal watch, and when the client sent its ClientHello with
// the CONNECT instead of waiting for the 200 (the early bytes the shell reads first).
func TestTunnelAuthority(t *testing.T) {
	t.Parallel()
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch=%v", watch), func(t *testing.T) {
			t.Parallel()
			g := startShell(t, func(c *Config) {
				c.OnRefuse = nil
				if watch {
					c.OnRefuse = func(Refusal) {}
				}
			})
			want := []string{}

			// HTTP/1.0 without Host, HTTP/1.1 in the tunnel
			tc := g.tunnel(t, "h1.test:8443", "http/1.1")
			resp, body, err := h1Exchange(t, tc, bufio.NewReader(tc), "GET /one HTTP/1.0\r\n\r\n")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("HTTP/1.0 without Host: %v %v", resp, err)
			}
			want = append(want, "GET https://h1.test:8443/one")
			if body != "ok GET https://h1.test:8443/one" {
				t.Errorf("HTTP/1.0 without Host answered %q", body)
			}

			// HTTP/2 without :authority
			h := newH2Conn(t, g.tunnel(t, "h2.test:443", "h2"))
			h.buf.Reset()
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"}, {Name: ":path", Value: "/two"}} {
				h.enc.WriteField(f)
			}
			if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.buf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			if res := h.readUntil(10*time.Second, answered(1)); res.status[1] != "200" {
				t.Fatalf("HTTP/2 without :authority: %+v", res)
			}
			want = append(want, "GET https://h2.test/two")

			// the ClientHello sent with the CONNECT
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			// the CONNECT goes out in one write with the ClientHello
			ec := tls.Client(&earlyClientConn{Conn: c,
				prefix: []byte("CONNECT early.test:443 HTTP/1.1\r\nHost: early.test:443\r\n\r\n")}, &tls.Config{RootCAs: g.ca.CertPool(), ServerName: "early.test",
				NextProtos: []string{"http/1.1"}})
			ec.SetDeadline(time.Now().Add(10 * time.Second))
			resp, _, err = h1Exchange(t, ec, bufio.NewReader(ec), "GET /three HTTP/1.0\r\n\r\n")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("early ClientHello: %v %v", resp, err)
			}
			want = append(want, "GET https://early.test/three")

			if got := g.h.requests(); !slices.Equal(got, want) {
				t.Errorf("the handler saw %q, want %q", got, want)
			}
		})
	}
}
