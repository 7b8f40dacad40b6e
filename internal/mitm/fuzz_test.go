package mitm

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
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
