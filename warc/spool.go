package warc

// Spool.go: the temporary file an import streams HTTP bodies into, so that no body is ever
// held in memory whole (docs/import.md, "Memory").

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Span is a byte range of a spool: n bytes from off.
type Span struct {
	Off, N int64
}

// ErrSpoolFull is returned when a write would take the spool past its limit.
var ErrSpoolFull = errors.New("spool limit reached")

// Spool is an append-only temporary file of bodies. Its directory entry is removed as soon
// as it is created (where the system allows it), so nothing is left behind even when the
// process is killed. It is not safe for concurrent writes; reads (section) may run at any
// time.
type Spool struct {
	f     *os.File
	path  string // "" once the name is removed
	size  int64
	Limit int64 // the spool never grows past it
}

// NewSpool creates an empty spool in dir, holding at most limit bytes.
func NewSpool(dir string, limit int64) (*Spool, error) {
	f, err := os.CreateTemp(dir, ".import-spool-*")
	if err != nil {
		return nil, fmt.Errorf("import: spool: %w", err)
	}
	s := &Spool{f: f, path: f.Name(), Limit: limit}
	if os.Remove(s.path) == nil {
		s.path = ""
	}
	return s, nil
}

// Write appends p.
func (s *Spool) Write(p []byte) (int, error) {
	if int64(len(p)) > s.Limit-s.size {
		return 0, ErrSpoolFull
	}
	n, err := s.f.WriteAt(p, s.size)
	s.size += int64(n)
	if err != nil {
		return n, fmt.Errorf("write spool: %w", err)
	}
	return n, nil
}

// Mark is the current end, where the next write goes.
func (s *Spool) Mark() int64 { return s.size }

// Since is the span from mark m to the current end.
func (s *Spool) Since(m int64) Span { return Span{Off: m, N: s.size - m} }

// Truncate drops everything after mark m (a region that turned out useless).
func (s *Spool) Truncate(m int64) {
	if m < s.size {
		s.size = m
		_ = s.f.Truncate(m)
	}
}

// Section reads span sp.
func (s *Spool) Section(sp Span) *io.SectionReader { return io.NewSectionReader(s.f, sp.Off, sp.N) }

// ReadPrefix reads the first max bytes of sp (or all of it when shorter).
func (s *Spool) ReadPrefix(sp Span, max int64) ([]byte, error) {
	b := make([]byte, min(sp.N, max))
	if _, err := io.ReadFull(s.Section(sp), b); err != nil {
		return nil, fmt.Errorf("read spool: %w", err)
	}
	return b, nil
}

// Close closes and removes the file.
func (s *Spool) Close() {
	_ = s.f.Close()
	if s.path != "" {
		_ = os.Remove(s.path)
	}
}
