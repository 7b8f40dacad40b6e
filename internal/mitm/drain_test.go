package mitm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/testtool"
)

// TestShutdownDrains proves Shutdown is graceful: requests in flight over plain HTTP,
// inside HTTP/1.1 tunnels and inside HTTP/2 tunnels (the Handler has sent half of each
// answer and waits) are answered whole; Shutdown returns only after them, with nil; a
// new connection is refused meanwhile, an idle keep-alive connection is closed, and
// Serve returns nil.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	const each, size = 4, 256 << 10
	g := startShell(t)
	// an idle keep-alive connection, which Shutdown closes at once
	idle, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	ibr := bufio.NewReader(idle)
	if resp, _, err := h1Exchange(t, idle, ibr, "GET http://site.test/idle HTTP/1.1\r\nHost: site.test\r\n\r\n"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("idle connection's request: %v %v", resp, err)
	}

	type result struct {
		url, proto string
		status     int
		body       []byte
		err        error
	}
	h1, tr1 := g.client(false)
	h2, tr2 := g.client(true)
	defer tr1.CloseIdleConnections()
	defer tr2.CloseIdleConnections()
	var urls []string
	var clients []*http.Client
	for i := range each {
		urls = append(urls, fmt.Sprintf("http://plain.test/slow?n=%d&i=%d", size, i), fmt.Sprintf("https://h1.test/slow?n=%d&i=%d", size, i),
			fmt.Sprintf("https://h2.test/slow?n=%d&i=%d", size, i))
		clients = append(clients, h1, h1, h2)
	}
	results := make([]result, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			resp, err := clients[i].Get(u)
			if err != nil {
				results[i] = result{url: u, err: err}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results[i] = result{u, resp.Proto, resp.StatusCode, body, err}
		})
	}
	if !waitFor(20*time.Second, func() bool { return g.h.arrived.Load() == int32(len(urls)) }) {
		g.h.open()
		t.Fatalf("only %d of %d requests reached the handler", g.h.arrived.Load(), len(urls))
	}
	shut := shutdownAsync(g.s)
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-shut:
		g.h.open()
		t.Fatalf("Shutdown returned (%v) with %d requests in flight", err, len(urls))
	default:
	}
	if c, err := net.DialTimeout("tcp", g.addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted while shutting down")
	}
	if closed, _ := closedWithin(idle, 5*time.Second); !closed {
		t.Errorf("idle keep-alive connection not closed by Shutdown")
	}
	g.h.open()
	wg.Wait()
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the requests were answered")
	}
	want := payload(size)
	for i, r := range results {
		wantProto := "HTTP/1.1"
		if i%3 == 2 {
			wantProto = "HTTP/2.0"
		}
		if r.err != nil || r.status != 200 || !bytes.Equal(r.body, want) || r.proto != wantProto {
			t.Errorf("%s: %s %d, %d of %d bytes, %v", r.url, r.proto, r.status, len(r.body), size, r.err)
		}
	}
	select {
	case err := <-g.done:
		g.done <- err // for the cleanup
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Serve did not return after Shutdown")
	}
}

// TestShutdownTimesOut proves Shutdown gives up when its context ends: a request that
// does not finish is cut off, every connection is closed and ctx's error returned.
func TestShutdownTimesOut(t *testing.T) {
	t.Parallel()
	g := startShell(t)
	tc := g.tunnel(t, "site.test:443", "http/1.1")
	io.WriteString(tc, "GET /block HTTP/1.1\r\nHost: site.test\r\n\r\n")
	if !waitFor(10*time.Second, func() bool { return g.h.arrived.Load() == 1 }) {
		t.Fatal("request did not reach the handler")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := g.s.Shutdown(ctx); err == nil {
		t.Errorf("Shutdown returned nil with a request still running")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with a 300 ms context", d)
	}
	if closed, _ := closedWithin(tc, 5*time.Second); !closed {
		t.Errorf("tunnel still open after Shutdown's context ended")
	}
}

// TestShutdownClosesHandshakes proves tunnels still in their TLS handshake are not
// requests in flight: Shutdown closes them at once and returns nil, instead of waiting
// for their HandshakeTimeout.
func TestShutdownClosesHandshakes(t *testing.T) {
	t.Parallel()
	g := startShell(t, func(c *Config) { c.HandshakeTimeout = 30 * time.Second })
	var conns []net.Conn
	for range 5 {
		c, _ := g.connect(t, "site.test:443") // 200, and no ClientHello
		conns = append(conns, c)
	}
	start := time.Now()
	if err := <-shutdownAsync(g.s); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with 5 tunnels in their handshake", d)
	}
	for i, c := range conns {
		if closed, _ := closedWithin(c, 5*time.Second); !closed {
			t.Errorf("tunnel %d still open after Shutdown", i)
		}
	}
}

// TestIdleTimeoutShell proves IdleTimeout closes idle keep-alive connections: a plain
// one, an HTTP/1.1 tunnel and an HTTP/2 tunnel are closed by the server once idle for
// IdleTimeout (not before it, and within it plus 2 s; HTTP/2 a second more), while a
// connection that keeps sending requests (every 100 ms for longer than IdleTimeout)
// stays open. (Run again if it failed while the process stalled: see testtool.RetryStalled.)
func TestIdleTimeoutShell(t *testing.T) {
	t.Parallel()
	const idle, every = 1500 * time.Millisecond, 100 * time.Millisecond
	g := startShell(t, func(c *Config) { c.IdleTimeout = idle })
	// extra is how much later than IdleTimeout the connection may close (HTTP/2 sends
	// GOAWAY at IdleTimeout and closes a second later)
	checkIdle := func(t testtool.Attempt, c net.Conn, extra time.Duration, do func(i int) error) {
		// active: a request every 100 ms for 2 s (longer than IdleTimeout), on one connection
		for i := range 20 {
			if err := do(i); err != nil {
				t.Fatalf("request %d on an active connection: %v", i, err)
			}
			time.Sleep(every)
		}
		// the server's idle clock starts between before and after
		before := time.Now()
		if err := do(99); err != nil {
			t.Fatalf("last request: %v", err)
		}
		after := time.Now()
		closed, took := closedWithin(c, idle+extra+5*time.Second)
		switch {
		case !closed:
			t.Errorf("idle connection not closed")
		case after.Add(took).Sub(before) < idle:
			t.Errorf("closed %v after the last request was sent, IdleTimeout %v", after.Add(took).Sub(before), idle)
		case took > idle+extra+2*time.Second:
			t.Errorf("closed after %v idle, IdleTimeout %v", took, idle)
		}
	}
	h1 := func(t testtool.Attempt, c net.Conn, target string) func(int) error {
		br := bufio.NewReader(c)
		return func(i int) error {
			resp, body, err := h1Exchange(t, c, br, "GET "+target+"?i="+strconv.Itoa(i)+" HTTP/1.1\r\nHost: site.test\r\n\r\n")
			if err == nil && (resp.StatusCode != 200 || body == "") {
				err = fmt.Errorf("%d %q", resp.StatusCode, body)
			}
			return err
		}
	}
	testtool.RetryStalled(t, func(t testtool.Attempt) {
		// the three at once, each on its own goroutine
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			t := t.Sub("plain")
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			checkIdle(t, c, 0, h1(t, c, "http://site.test/idle"))
		})
		wg.Go(func() {
			t := t.Sub("h1 tunnel")
			tc := g.tunnel(t, "site.test:443", "http/1.1")
			defer tc.NetConn().Close()
			checkIdle(t, tc, 0, h1(t, tc, "/idle"))
		})
		wg.Go(func() {
			t := t.Sub("h2 tunnel")
			tc := g.tunnel(t, "site.test:443", "h2")
			defer tc.NetConn().Close()
			h := newH2Conn(t, tc)
			checkIdle(t, tc, time.Second, func(i int) error {
				id := uint32(2*i + 1)
				h.get(t, id, "site.test", "/idle")
				r := h.readUntil(10*time.Second, answered(id))
				if r.status[id] != "200" {
					return fmt.Errorf("stream %d: %+v", id, r)
				}
				return nil
			})
		})
	})
}
