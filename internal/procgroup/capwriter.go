package procgroup

import (
	"io"
	"sync"
)

// CapWriter keeps what a child process writes to a pipe: it passes the first limit bytes
// written to it on to a writer and counts and drops the rest. Its Write never fails, so the
// copy from the pipe goes on and the child never blocks on a full pipe; the first error of
// the writer (a full disk) stops the passing on and is kept for Err. It is safe for
// concurrent use.
type CapWriter struct {
	mu             sync.Mutex
	w              io.Writer
	limit          int64
	written, total int64
	err            error
	stopped        bool
}

// NewCapWriter returns a CapWriter passing at most limit bytes to w.
func NewCapWriter(w io.Writer, limit int64) *CapWriter {
	return &CapWriter{w: w, limit: limit}
}

// Write passes what fits under the limit to the writer and returns len(p), nil.
func (c *CapWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return len(p), nil
	}
	c.total += int64(len(p))
	if c.err != nil || c.written >= c.limit {
		return len(p), nil
	}
	q := p
	if room := c.limit - c.written; int64(len(q)) > room {
		q = q[:room]
	}
	n, err := c.w.Write(q)
	c.written += int64(n)
	if err != nil {
		c.err = err
	}
	return len(p), nil
}

// Counts returns the bytes passed on to the writer and the bytes written to c (passed on
// and dropped).
func (c *CapWriter) Counts() (written, total int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written, c.total
}

// Err returns the writer's first error, or nil.
func (c *CapWriter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Stop ends the passing on: a later Write is dropped without being counted, so the writer is
// the caller's again (to append to or close). It returns Counts and Err as they were.
func (c *CapWriter) Stop() (written, total int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	return c.written, c.total, c.err
}
