package warc

// Spool.go: the temporary file an import streams HTTP bodies into, so that no body is ever
// held in memory whole (docs/import.md, "Memory").

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
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
//
// Small writes are gathered in memory (at most spoolBuffer bytes) and reach the file
// together: an import parks two records and often two small bodies per exchange, one
// system call each before. A read of bytes still gathered writes them first. Small reads
// are served from a window of the file read 256 KiB at a time (spoolWindow).
type Spool struct {
	f     *os.File
	path  string // "" once the name is removed
	size  int64
	Limit int64 // the spool never grows past it

	mu      sync.Mutex // guards buf and flushed against reads from other goroutines
	buf     []byte     // written, not yet in the file: the bytes from flushed to size
	flushed int64      // the file holds bytes [0, flushed)
	werr    error      // the first failed write of gathered bytes

	rmu    sync.Mutex // guards the read window; taken after mu, never before
	win    []byte     // bytes of the file from winOff (a prefix of winBuf)
	winOff int64
	winBuf []byte
}

// spoolWindow is how many bytes of the file a small read brings into memory at once (256
// KiB): an import reads its records and bodies back in about the order it parked them, a
// few hundred bytes at a time, so most reads are then served from the window without a
// system call.
const spoolWindow = 256 << 10

// spoolBuffer is how many written bytes a Spool gathers before writing them to its file.
const spoolBuffer = 64 << 10

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

// Write appends p. A write that fails to reach the file fails this or a later Write, or
// the read that needed its bytes.
func (s *Spool) Write(p []byte) (int, error) {
	if int64(len(p)) > s.Limit-s.size {
		return 0, ErrSpoolFull
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.werr != nil {
		return 0, s.werr
	}
	if len(s.buf)+len(p) <= spoolBuffer {
		if s.buf == nil {
			s.buf = make([]byte, 0, spoolBuffer)
		}
		s.buf = append(s.buf, p...)
		s.size += int64(len(p))
		return len(p), nil
	}
	if err := s.flushLocked(); err != nil {
		return 0, err
	}
	if len(p) < spoolBuffer {
		s.buf = append(s.buf, p...)
		s.size += int64(len(p))
		return len(p), nil
	}
	n, err := s.f.WriteAt(p, s.size)
	s.size += int64(n)
	s.flushed = s.size
	if err != nil {
		s.werr = fmt.Errorf("write spool: %w", err)
		return n, s.werr
	}
	return n, nil
}

// flushLocked writes the gathered bytes to the file; s.mu is held.
func (s *Spool) flushLocked() error {
	if s.werr != nil {
		return s.werr
	}
	if len(s.buf) == 0 {
		return nil
	}
	n, err := s.f.WriteAt(s.buf, s.flushed)
	s.flushed += int64(n)
	if err != nil {
		s.werr = fmt.Errorf("write spool: %w", err)
		return s.werr
	}
	s.buf = s.buf[:0]
	return nil
}

// Mark is the current end, where the next write goes.
func (s *Spool) Mark() int64 { return s.size }

// Since is the span from mark m to the current end.
func (s *Spool) Since(m int64) Span { return Span{Off: m, N: s.size - m} }

// Truncate drops everything after mark m (a region that turned out useless).
func (s *Spool) Truncate(m int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m >= s.size {
		return
	}
	s.size = m
	if m >= s.flushed {
		s.buf = s.buf[:m-s.flushed]
		return
	}
	s.buf = s.buf[:0]
	s.flushed = m
	_ = s.f.Truncate(m)
	s.rmu.Lock()
	if m < s.winOff+int64(len(s.win)) { // the bytes from m are written again later
		s.win = s.win[:max(0, m-s.winOff)]
	}
	s.rmu.Unlock()
}

// Section reads span sp. Bytes of it still gathered in memory are written to the file
// first; when that fails, reads of the section fail with the write's error.
func (s *Spool) Section(sp Span) *io.SectionReader {
	s.mu.Lock()
	var err error
	if sp.Off+sp.N > s.flushed {
		err = s.flushLocked()
	}
	s.mu.Unlock()
	if err != nil {
		return io.NewSectionReader(errReaderAt{err}, sp.Off, sp.N)
	}
	return io.NewSectionReader(spoolFile{s}, sp.Off, sp.N)
}

// spoolFile reads the spool's file through its read window.
type spoolFile struct{ s *Spool }

// ReadAt reads p from off: from the window when it holds those bytes, else, for a read of
// at most half a window, from a window read anew at off; a larger read goes to the file.
func (f spoolFile) ReadAt(p []byte, off int64) (int, error) {
	s := f.s
	if len(p) > spoolWindow/2 {
		return s.f.ReadAt(p, off)
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if off < s.winOff || off+int64(len(p)) > s.winOff+int64(len(s.win)) {
		if s.winBuf == nil {
			s.winBuf = make([]byte, spoolWindow)
		}
		n, err := s.f.ReadAt(s.winBuf, off)
		s.win, s.winOff = s.winBuf[:n], off
		if n < len(p) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return copy(p, s.win), err
		}
	}
	return copy(p, s.win[off-s.winOff:]), nil
}

// errReaderAt fails every read with its error.
type errReaderAt struct{ err error }

func (e errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, e.err }

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
