package mitm

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// lazyConn is a connection of the listening socket (a tunnel's too: its TLS runs over it)
// whose write deadline is changed lazily. The shell sets one per answer (bounds.go) and
// net/http clears it after the answer, and x/net/http2 sets and clears one around each
// write; each change is a change to the runtime's timers. lazyConn keeps the deadline
// asked for and changes the socket's only when the new one is earlier than the one on the
// socket (or there is none); a write that times out on a deadline earlier than the one
// asked for sets the one asked for and goes on. So a write still ends at the deadline
// asked for, never before, and a keep-alive answer seldom changes a timer: the socket's
// deadline is one set some seconds ago, and it passes once in a while, waking a write that
// goes on. Read deadlines go to the socket as they are: net/http ends its background read
// of every request with a deadline long past, which no laziness saves.
//
// A write cut by its deadline leaves the connection broken for writes: every later write
// fails at once with the same error. Its users end the connection then anyway (net/http
// closes it; a TLS connection's writes fail for good after a timeout, but its Close still
// sends close_notify, which could wait five more seconds on a client that reads nothing).
type lazyConn struct {
	net.Conn
	w deadline
	// authority is the CONNECT authority of the tunnel the connection became, or "".
	// Written before the tunnel's TLS handshake, read by the inner server after it.
	authority string

	cut atomic.Pointer[error] // the error of the write its deadline cut, or nil
}

// deadline is a deadline as asked for, and as set on the socket.
type deadline struct {
	mu   sync.Mutex
	want time.Time // asked for; zero: none
	set  time.Time // on the socket; zero: none
}

// ask records t as the deadline asked for (zero: none) and sets it on the socket with
// apply when it is earlier than the socket's or the socket has none. A later deadline, or
// none, is only recorded: the socket's passes first, and passed finds t then.
func (d *deadline) ask(t time.Time, apply func(time.Time) error) error {
	d.mu.Lock()
	d.want = t
	if t.IsZero() || !d.set.IsZero() && !t.Before(d.set) {
		d.mu.Unlock()
		return nil
	}
	err := d.applyLocked(t, apply)
	d.mu.Unlock()
	return err
}

// applyLocked sets t on the socket.
func (d *deadline) applyLocked(t time.Time, apply func(time.Time) error) error {
	if err := apply(t); err != nil {
		return err
	}
	d.set = t
	return nil
}

// passed is called after a write timed out: true when the deadline asked for has passed
// (the timeout is the caller's); else the deadline asked for is set on the socket and the
// write can go on.
func (d *deadline) passed(apply func(time.Time) error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.want.IsZero() && !time.Now().Before(d.want) {
		return true
	}
	return d.applyLocked(d.want, apply) != nil
}

// exact sets the deadline asked for on the socket when the socket's is another.
func (d *deadline) exact(apply func(time.Time) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.set.Equal(d.want) {
		return nil
	}
	return d.applyLocked(d.want, apply)
}

// timedOut reports whether err is a deadline's timeout.
func timedOut(err error) bool {
	if err == nil {
		return false
	}
	if oe, ok := err.(*net.OpError); ok && oe.Err == os.ErrDeadlineExceeded {
		return true
	}
	return errors.Is(err, os.ErrDeadlineExceeded)
}

func (c *lazyConn) Write(p []byte) (int, error) {
	if err := c.cut.Load(); err != nil {
		return 0, *err
	}
	done := 0
	for {
		n, err := c.Conn.Write(p[done:])
		done += n
		if !timedOut(err) {
			return done, err
		}
		if c.w.passed(c.Conn.SetWriteDeadline) {
			c.cutBy(err)
			return done, err
		}
	}
}

// ReadFrom is the socket's own ReadFrom (sendfile or splice for a plain TCP connection)
// under the write deadline asked for, set on the socket first: a ReadFrom that timed out
// may have taken bytes from r it did not send, so it cannot go on as Write does.
func (c *lazyConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	if err := c.cut.Load(); err != nil {
		return 0, *err
	}
	if err := c.w.exact(c.Conn.SetWriteDeadline); err != nil {
		return 0, err
	}
	n, err := rf.ReadFrom(r)
	if timedOut(err) {
		c.cutBy(err)
	}
	return n, err
}

// cutBy breaks the connection for writes with err, the error of the write its deadline cut.
func (c *lazyConn) cutBy(err error) {
	c.cut.Store(&err)
}

// CloseWrite half-closes the socket when it can (a TCP connection); else it does nothing.
func (c *lazyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *lazyConn) SetWriteDeadline(t time.Time) error {
	return c.w.ask(t, c.Conn.SetWriteDeadline)
}

func (c *lazyConn) SetDeadline(t time.Time) error {
	return errors.Join(c.Conn.SetReadDeadline(t), c.SetWriteDeadline(t))
}
