package replay

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/internal/mitm/mitmtest"
	"github.com/pab-dev/pab/internal/testtool"
)

// TestReplayTimeBounds proves Options.Limits and ReadHeaderTimeout reach the replay
// proxy's shell and bound every stream and body in time (mitmtest.CheckTimeBounds, with
// WriteTimeout, BodyTimeout and ReadHeaderTimeout of 1 s (2 s under the race
// detector) and MinBodyRate 100 bytes/s):
// 4 HTTP/2 connections (1 under the race detector) granting no flow-control window ask 250 streams each for a
// recorded 300 KiB image, 4 slow HTTP/1.1 bodies (plain and in tunnels), 4 HTTP/2 POSTs
// without DATA and 4 header blocks kept open with empty CONTINUATION frames are each
// reset or closed within their bound plus 2 s, while a recorded page is answered; and
// once they are over no request is still being answered. (Run again if it failed while
// the process stalled: see testtool.RetryStalled.)
func TestReplayTimeBounds(t *testing.T) {
	t.Parallel()
	d := time.Second
	if raceEnabled {
		d = 2 * time.Second // the race-instrumented proxy is several times slower
	}
	b := writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges())
	tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) {
		o.ReadHeaderTimeout = d
		o.Limits = mitm.Limits{WriteTimeout: d, BodyTimeout: d, MinBodyRate: 100}
	})
	p := mitmtest.Proxy{Addr: tp.addr, Roots: tp.ca.CertPool()}
	probe := func() error {
		resp, err := tp.client.Get("https://site.test/style.css")
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "h1{color:red}" {
			return fmt.Errorf("%d %q %v", resp.StatusCode, body, err)
		}
		return nil
	}
	bounds := mitmtest.Bounds{WriteTimeout: d, BodyTimeout: d, ReadHeaderTimeout: d, MinBodyRate: 100, MaxStreams: mitm.DefaultMaxStreams}
	targets := mitmtest.Targets{Host: "site.test", BigPath: "/img.png", PostPath: "/api/cart", PlainPost: "http://plain.test/upload"}
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		conns := 4
		if raceEnabled {
			conns = 1 // the race-instrumented proxy is several times slower
		}
		mitmtest.CheckTimeBounds(t, p, bounds, targets, conns, 250, probe)
		if !waitUntilTrue(10*time.Second, func() bool { return tp.s.shell.Active() == 0 }) {
			t.Errorf("%d requests still being answered after the attacks", tp.s.shell.Active())
		}
	})
}

// TestReplayFieldLine proves replay's header bounds are the shell's, the same as
// record's (TestRecordFieldLine): a 1,000,000-byte header field line gets 431 on plain
// HTTP and in a tunnel, and a 60,000-byte one is answered by replay.
func TestReplayFieldLine(t *testing.T) {
	t.Parallel()
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	for _, c := range []struct {
		name   string
		conn   func() net.Conn
		target string
	}{
		{"plain", func() net.Conn {
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}, "http://plain.test/"},
		{"tunnel", func() net.Conn { return dialTunnel(t, tp, "plain.test:443", []string{"http/1.1"}) }, "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := c.conn()
			br := bufio.NewReader(conn)
			for _, n := range []int{60000, 1000000} {
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: plain.test\r\nX-Line: %s\r\n\r\n", c.target, strings.Repeat("l", n))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%d-byte line: %v", n, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got431 := resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge; got431 != (n > mitm.DefaultMaxFieldBytes) {
					t.Errorf("%d-byte line: %d (the bound is %d bytes)", n, resp.StatusCode, mitm.DefaultMaxFieldBytes)
				}
			}
		})
	}
}

// waitUntilTrue polls cond every 10 ms for up to d.
func waitUntilTrue(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestReplayRapidReset proves replay ends a rapid reset as record does
// (TestRecordRapidReset), with the default Limits: 30,000 HEADERS+RST_STREAM pairs on one
// HTTP/2 tunnel get GOAWAY ENHANCE_YOUR_CALM, and a recorded page is answered afterwards.
func TestReplayRapidReset(t *testing.T) {
	t.Parallel()
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	p := mitmtest.Proxy{Addr: tp.addr, Roots: tp.ca.CertPool()}
	sent, goAway, err := p.RapidReset("site.test", "/style.css", 30000, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if goAway == nil || *goAway != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("%d HEADERS+RST_STREAM pairs sent: GOAWAY %v, want ENHANCE_YOUR_CALM", sent, goAway)
	}
	resp, err := tp.client.Get("https://site.test/style.css")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "h1{color:red}" {
		t.Errorf("after the rapid reset: %d %q", resp.StatusCode, body)
	}
}
