package warc

// spool.go: the temporary file an import streams HTTP bodies into, so that no body is ever
// held in memory whole (docs/import.md, "Memory").

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// span is a byte range of a spool: n bytes from off.
type span struct {
	off, n int64
}

// errSpoolFull is returned when a write would take the spool past its limit.
var errSpoolFull = errors.New("spool limit reached")

// spool is an append-only temporary file of bodies. Its directory entry is removed as soon
// as it is created (where the system allows it), so nothing is left behind even when the
// process is killed. It is not safe for concurrent writes; reads (section) may run at any
// time.
type spool struct {
	f     *os.File
	path  string // "" once the name is removed
	size  int64
	limit int64 // the spool never grows past it
}

// newSpool creates an empty spool in dir, holding at most limit bytes.
func newSpool(dir string, limit int64) (*spool, error) {
	f, err := os.CreateTemp(dir, ".import-spool-*")
	if err != nil {
		return nil, fmt.Errorf("import: spool: %w", err)
	}
	s := &spool{f: f, path: f.Name(), limit: limit}
	if os.Remove(s.path) == nil {
		s.path = ""
	}
	return s, nil
}

// Write appends p.
func (s *spool) Write(p []byte) (int, error) {
	if int64(len(p)) > s.limit-s.size {
		return 0, errSpoolFull
	}
	n, err := s.f.WriteAt(p, s.size)
	s.size += int64(n)
	if err != nil {
		return n, fmt.Errorf("write spool: %w", err)
	}
	return n, nil
}

// mark is the current end, where the next write goes.
func (s *spool) mark() int64 { return s.size }

// since is the span from mark m to the current end.
func (s *spool) since(m int64) span { return span{off: m, n: s.size - m} }

// truncate drops everything after mark m (a region that turned out useless).
func (s *spool) truncate(m int64) {
	if m < s.size {
		s.size = m
		_ = s.f.Truncate(m)
	}
}

// section reads span sp.
func (s *spool) section(sp span) *io.SectionReader { return io.NewSectionReader(s.f, sp.off, sp.n) }

// readPrefix reads the first max bytes of sp (or all of it when shorter).
func (s *spool) readPrefix(sp span, max int64) ([]byte, error) {
	b := make([]byte, min(sp.n, max))
	if _, err := io.ReadFull(s.section(sp), b); err != nil {
		return nil, fmt.Errorf("read spool: %w", err)
	}
	return b, nil
}

// close closes and removes the file.
func (s *spool) close() {
	_ = s.f.Close()
	if s.path != "" {
		_ = os.Remove(s.path)
	}
}
