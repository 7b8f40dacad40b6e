package record

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/internal/mitm/mitmtest"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/tlsca"
)

// upstream is a site to record through the recorder: up.test over HTTPS and plain.test
// over HTTP. It counts the requests it gets for each path.
type upstream struct {
	secure, plain *httptest.Server
	ca            *tlsca.CA
	big           []byte
	resets, all   atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	ca, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "site-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.LeafFor("up.test")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ca: ca, big: []byte(strings.Repeat("body{margin:0}\n", 215000/15))}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.all.Add(1)
		switch r.URL.Path {
		case "/big.css":
			w.Header().Set("Content-Type", "text/css")
			w.Write(u.big)
		case "/upload":
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "got %d bytes", n)
		case "/reset":
			u.resets.Add(1)
			io.WriteString(w, "reset target")
		default:
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<title>page</title>page")
		}
	})
	u.secure = httptest.NewUnstartedServer(h)
	u.secure.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	u.secure.StartTLS()
	t.Cleanup(u.secure.Close)
	u.plain = httptest.NewServer(h)
	t.Cleanup(u.plain.Close)
	return u
}

// options are recorder Options that reach u.
func (u *upstream) options(o Options) Options {
	o.RootCAs = u.ca.CertPool()
	o.Resolve = map[string]string{"up.test:443": u.secure.Listener.Addr().String(), "plain.test:80": u.plain.Listener.Addr().String()}
	return o
}

// TestRecordTimeBounds proves Options.Limits and ReadHeaderTimeout reach the recorder's
// shell, so that record is bounded in time as replay is (TestReplayTimeBounds, the same
// mitmtest.CheckTimeBounds): 4 HTTP/2 connections (1 under the race detector) granting no flow-control window ask
// 250 streams each for a 215 KB stylesheet of the site, 4 slow HTTP/1.1 bodies (plain and
// in tunnels), 4 HTTP/2 POSTs without DATA and 4 header blocks kept open with empty
// CONTINUATION frames are each reset or closed within their bound (1 s, 2 s under the race detector) plus 2 s (5 s under
// the race detector), while
// a page is recorded; once they are over no request is still being answered. (Run again
// if it failed while the process stalled: see testtool.RetryStalled.)
func TestRecordTimeBounds(t *testing.T) {
	t.Parallel()
	d := time.Second
	if raceEnabled {
		d = 2 * time.Second // the race-instrumented proxy is several times slower
	}
	u := newUpstream(t)
	g := newRig(t, u.options(Options{ReadHeaderTimeout: d, Limits: mitm.Limits{WriteTimeout: d, BodyTimeout: d, MinBodyRate: 100}}))
	p := mitmtest.Proxy{Addr: g.addr, Roots: g.ca.CertPool()}
	cl := g.client()
	probe := func() error {
		st, body, err := getBody(cl, "https://up.test/page")
		if err != nil || st != 200 || body != "<title>page</title>page" {
			return fmt.Errorf("%d %q %v", st, body, err)
		}
		return nil
	}
	bounds := mitmtest.Bounds{WriteTimeout: d, BodyTimeout: d, ReadHeaderTimeout: d, MinBodyRate: 100, MaxStreams: mitm.DefaultMaxStreams}
	if raceEnabled {
		// the recorder opens a TLS connection to the site for each of 100 streams at
		// once, several times slower under the race detector, and the cut-offs wait for
		// the CPU
		bounds.Slack = 5 * time.Second
	}
	targets := mitmtest.Targets{Host: "up.test", BigPath: "/big.css", PostPath: "/upload", PlainPost: "http://plain.test/upload"}
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		conns := 4
		if raceEnabled {
			conns = 1 // the race-instrumented proxy is several times slower
		}
		mitmtest.CheckTimeBounds(t, p, bounds, targets, conns, 250, probe)
		if !waitUntil(10*time.Second, func() bool { return g.rec.shell.Active() == 0 }) {
			t.Errorf("%d requests still being answered after the attacks", g.rec.shell.Active())
		}
	})
}

// TestRecordRapidReset proves record forwards no more than the client could, with the
// default Limits: 30,000 HEADERS+RST_STREAM pairs on one HTTP/2 tunnel end with GOAWAY
// ENHANCE_YOUR_CALM, as in replay, and the site gets at most DefaultRequestBurst plus
// DefaultRequestRate per second of the connection's life of those requests; a page is
// recorded afterwards.
func TestRecordRapidReset(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	g := newRig(t, u.options(Options{}))
	p := mitmtest.Proxy{Addr: g.addr, Roots: g.ca.CertPool()}
	start := time.Now()
	sent, goAway, err := p.RapidReset("up.test", "/reset", 30000, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if goAway == nil || *goAway != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("%d HEADERS+RST_STREAM pairs sent: GOAWAY %v, want ENHANCE_YOUR_CALM", sent, goAway)
	}
	// the handlers held for the reset streams end with the connection
	waitUntil(10*time.Second, func() bool { return g.rec.shell.Active() == 0 })
	life := time.Since(start)
	bound := int64(mitm.DefaultRequestBurst) + int64(mitm.DefaultRequestRate*life.Seconds()) + 1
	t.Logf("%d pairs sent, GOAWAY %v; the site got %d of them in %v (bound %d)", sent, *goAway, u.resets.Load(), life, bound)
	if n := u.resets.Load(); n > bound {
		t.Errorf("the site got %d requests from one reset connection in %v, bound %d", n, life, bound)
	}
	if st, body, err := getBody(g.client(), "https://up.test/page"); err != nil || st != 200 || body != "<title>page</title>page" {
		t.Errorf("a page after the rapid reset: %d %q %v", st, body, err)
	}
}

// TestRecordFieldLine proves record's header bounds are replay's (TestReplayFieldLine):
// a 1,000,000-byte header field line gets 431 from the shell on plain HTTP and in a
// tunnel and is never forwarded; a 60,000-byte one is.
func TestRecordFieldLine(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	g := newRig(t, u.options(Options{}))
	for _, c := range []struct {
		name, host, target string
		conn               func() net.Conn
	}{
		{"plain", "plain.test", "http://plain.test/line", func() net.Conn {
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{"tunnel", "up.test", "/line", func() net.Conn { return g.tunnel(t, "up.test:443", "http/1.1") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := c.conn()
			br := bufio.NewReader(conn)
			for _, n := range []int{60000, 1000000} {
				before := u.all.Load()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nX-Line: %s\r\n\r\n", c.target, c.host, strings.Repeat("l", n))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%d-byte line: %v", n, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				over := n > mitm.DefaultMaxFieldBytes
				if got := resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge; got != over {
					t.Errorf("%d-byte line: %d (the bound is %d bytes)", n, resp.StatusCode, mitm.DefaultMaxFieldBytes)
				}
				if forwarded := u.all.Load() > before; forwarded == over {
					t.Errorf("%d-byte line: forwarded %v", n, forwarded)
				}
			}
		})
	}
}
