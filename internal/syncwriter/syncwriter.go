// Package syncwriter serializes writes to one io.Writer from many goroutines, so that
// each Write reaches it whole (log lines, JSON-RPC messages) and never interleaved.
package syncwriter

import (
	"io"
	"sync"
)

// Writer passes each Write to W under a mutex. Its zero value with W set is ready to use;
// W must not be changed while writes may happen.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// New returns a Writer in front of w.
func New(w io.Writer) *Writer { return &Writer{W: w} }

// Write writes p to W while holding the lock, returning W's result.
func (s *Writer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}

// Locked runs f while holding the lock that Write takes: to read an in-memory W (a
// bytes.Buffer) while writers may be running.
func (s *Writer) Locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}
