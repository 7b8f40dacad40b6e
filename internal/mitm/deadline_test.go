package mitm

import (
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts the deadline changes that reach the socket.
type countingConn struct {
	net.Conn
	reads, writes atomic.Int64
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.writes.Add(1)
	return c.Conn.SetWriteDeadline(t)
}

// loopbackPair is a loopback TCP connection: the accepted side, and its peer.
func loopbackPair(tb testing.TB) (net.Conn, net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		peer.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

// lazyPair is a lazyConn over a counted loopback TCP connection, and its peer.
func lazyPair(t *testing.T) (*lazyConn, *countingConn, net.Conn) {
	t.Helper()
	c, peer := loopbackPair(t)
	cc := &countingConn{Conn: c}
	return &lazyConn{Conn: cc}, cc, peer
}

// A keep-alive connection's write deadlines as the shell and net/http set them per answer
// (the answer's, then its clear) reach the socket once, not twice per answer; every
// answer's bytes are still written, and read deadlines reach the socket as asked.
func TestLazyDeadlineKeepAlive(t *testing.T) {
	c, cc, peer := lazyPair(t)
	buf := make([]byte, 16)
	const requests = 200
	for i := 0; i < requests; i++ {
		now := time.Now()
		c.SetReadDeadline(now.Add(10 * time.Second))
		if _, err := peer.Write([]byte("GET")); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "GET" {
			t.Fatalf("request %d: read %q %v", i, buf[:n], err)
		}
		c.SetReadDeadline(time.Time{})
		c.SetWriteDeadline(now.Add(30 * time.Second)) // the answer's
		if _, err := c.Write([]byte("200")); err != nil {
			t.Fatalf("request %d: write %v", i, err)
		}
		if n, err := peer.Read(buf); err != nil || string(buf[:n]) != "200" {
			t.Fatalf("request %d: peer read %q %v", i, buf[:n], err)
		}
		c.SetWriteDeadline(time.Time{})
	}
	if w := cc.writes.Load(); w > 2 {
		t.Errorf("%d answers changed the socket's write deadline %d times; want at most 2", requests, w)
	}
	if r := cc.reads.Load(); r != 2*requests {
		t.Errorf("%d requests changed the socket's read deadline %d times; want %d (as asked)", requests, r, 2*requests)
	}
}

// fill writes to c, whose peer reads nothing, until a write fails; it returns when the
// write failed, and its error.
func fill(c net.Conn) (time.Time, error) {
	chunk := make([]byte, 1<<20)
	var err error
	for i := 0; i < 256 && err == nil; i++ { // 256 MiB: more than the sockets hold
		_, err = c.Write(chunk)
	}
	return time.Now(), err
}

// A write ends at the deadline asked for, not at an earlier one still on the socket, and
// not much later.
func TestLazyDeadlineWriteEndsOnTime(t *testing.T) {
	c, _, _ := lazyPair(t)
	start := time.Now()
	c.SetWriteDeadline(start.Add(50 * time.Millisecond)) // on the socket
	want := start.Add(400 * time.Millisecond)
	c.SetWriteDeadline(want) // only kept: later than the socket's
	at, err := fill(c)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer reading nothing: %v, want a timeout", err)
	}
	if at.Before(want) {
		t.Errorf("write ended %v before the deadline asked for", want.Sub(at))
	} else if late := at.Sub(want); late > 10*time.Second {
		t.Errorf("write ended %v after the deadline asked for", late)
	}
}

// A cleared deadline lets a write wait past the earlier one still on the socket: it ends
// when the peer reads.
func TestLazyDeadlineWriteCleared(t *testing.T) {
	c, _, peer := lazyPair(t)
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)) // on the socket
	c.SetWriteDeadline(time.Time{})
	const size = 64 << 20 // more than the sockets hold
	read := make(chan int64, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // past the socket's deadline
		n, _ := io.Copy(io.Discard, peer)
		read <- n
	}()
	n, err := c.Write(make([]byte, size))
	if err != nil || n != size {
		t.Fatalf("write with the deadline cleared: %d %v, want %d bytes", n, err, size)
	}
	c.Close()
	if got := <-read; got != size {
		t.Errorf("peer read %d bytes, want %d", got, size)
	}
}

// An earlier deadline reaches the socket at once: a write under way is cut by it.
func TestLazyDeadlineEarlierCuts(t *testing.T) {
	c, _, _ := lazyPair(t)
	c.SetWriteDeadline(time.Now().Add(time.Hour))
	done := make(chan error, 1)
	go func() {
		_, err := fill(c)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the write is likely under way; if not, it starts past the deadline
	c.SetWriteDeadline(time.Unix(1, 0))
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write under way was not cut by an earlier deadline")
	}
}

// A write its deadline cut (the peer reads nothing) breaks the connection for writes: the
// next write, under a new deadline, fails at once with the same error (a TLS Close's
// close_notify does not wait on it).
func TestLazyDeadlineWriteCut(t *testing.T) {
	c, _, _ := lazyPair(t)
	c.SetWriteDeadline(time.Now().Add(time.Hour))
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := fill(c)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer reading nothing: %v, want a timeout", err)
	}
	c.SetWriteDeadline(time.Now().Add(time.Hour))
	start := time.Now()
	n, err2 := c.Write([]byte("close_notify"))
	if n != 0 || err2 == nil || err2.Error() != err.Error() {
		t.Errorf("write after the cut: %d %v, want 0 and %v", n, err2, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("write after the cut took %v", d)
	}
}

// BenchmarkDeadlineCycle is one keep-alive request's deadline changes as net/http and the
// shell make them (the header's read deadline and its clear, the end of the background
// read with a deadline long past and its clear, the answer's write deadline and its
// clear, the idle read deadline), with the request's read and the answer's write, on a
// loopback TCP connection: "socket" changes the socket's deadlines each time, "lazy"
// through lazyConn (its write deadlines lazily).
func BenchmarkDeadlineCycle(b *testing.B) {
	for _, lazy := range []bool{false, true} {
		name := "socket"
		if lazy {
			name = "lazy"
		}
		b.Run(name, func(b *testing.B) {
			c, peer := loopbackPair(b)
			if lazy {
				c = &lazyConn{Conn: c}
			}
			req, ans := []byte("G"), []byte("2")
			buf := make([]byte, 1)
			longAgo := time.Unix(1, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				peer.Write(req)
				now := time.Now()
				c.SetReadDeadline(now.Add(10 * time.Second))
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
				c.SetReadDeadline(time.Time{})
				c.SetReadDeadline(longAgo)
				c.SetReadDeadline(time.Time{})
				c.SetWriteDeadline(now.Add(30 * time.Second))
				if _, err := c.Write(ans); err != nil {
					b.Fatal(err)
				}
				c.SetWriteDeadline(time.Time{})
				c.SetReadDeadline(now.Add(120 * time.Second))
				if _, err := peer.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBoundedWriterArm: the deadline arm sets, read as the time since the connection's
// start on the monotonic clock, is d after a time between two time.Now taken around it,
// with a wall clock near theirs; a writer with no start takes time.Now as its start.
func TestBoundedWriterArm(t *testing.T) {
	const d = 30 * time.Second
	for _, born := range []time.Time{time.Now(), {}} {
		rec := &deadlineRecorder{}
		w := &boundedWriter{ResponseWriter: rec, born: born, d: d}
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		w.arm()
		t1 := time.Now()
		if len(rec.set) != 1 {
			t.Fatalf("born %v: %d deadlines set, want 1", born, len(rec.set))
		}
		n := rec.set[0].Add(-d)
		if n.Before(t0) || n.After(t1) {
			t.Errorf("born %v: deadline %v - %v, not between %v and %v", born, rec.set[0], d, t0, t1)
		}
		if wall := n.Round(0); wall.Before(t0.Round(0).Add(-time.Second)) || wall.After(t1.Round(0).Add(time.Second)) {
			t.Errorf("born %v: the deadline's wall clock %v - %v, not near %v", born, wall, d, t0.Round(0))
		}
		if !born.IsZero() && n.Sub(born) < 20*time.Millisecond {
			t.Errorf("the deadline is %v after the start, want at least 20ms + %v", rec.set[0].Sub(born), d)
		}
		// over HTTP/1.1 a deadline still three quarters of d away is kept
		w.arm()
		if len(rec.set) != 1 {
			t.Errorf("born %v: a second arm at once set %d deadlines, want the first kept", born, len(rec.set))
		}
	}
}

// deadlineRecorder is a ResponseWriter that records the write deadlines set on it.
type deadlineRecorder struct {
	httptest.ResponseRecorder
	set []time.Time
}

func (r *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	r.set = append(r.set, t)
	return nil
}
