// Reading a .warc.gz as a series of gzip members (WARC 1.1 Annex D), knowing where each
// member starts, so that a damaged member can be skipped and a record's offset is its
// member's.

package warc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
)

// gzipError is a failure to decompress the gzip member starting at off.
type gzipError struct {
	off int64
	err error
}

func (e *gzipError) Error() string { return "gzip member: " + e.err.Error() }
func (e *gzipError) Unwrap() error { return e.err }

// member is one gzip member: compressed [cOff, cEnd), uncompressed [dStart, dEnd).
type member struct {
	cOff, cEnd   int64
	dStart, dEnd int64
	ended        bool
}

// memberReader is the uncompressed stream of a file of gzip members (RFC 1952 section
// 2.2), read member by member, keeping where each member starts and ends in both the
// file and the stream.
type memberReader struct {
	br          *bufio.Reader   // the compressed file; a ByteReader, so flate reads no further than a member
	cr          *countingReader // under br
	base        int64           // file offset of the first byte of cr
	zr          *gzip.Reader
	in          bool
	dpos        int64
	members     []member
	err         error
	trailing    int64
	trailingOff int64

	ahead *inflateAhead        // inflating in a goroutine (startInflateAhead), else nil
	event func(ev memberEvent) // told of each member's start and end (the goroutine's side)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// cpos is the file offset of the next compressed byte flate will take.
func (m *memberReader) cpos() int64 { return m.base + m.cr.n - int64(m.br.Buffered()) }

func (m *memberReader) Read(p []byte) (int, error) {
	if m.ahead != nil {
		return m.readAhead(p)
	}
	for zeros := 0; ; {
		if m.err != nil {
			return 0, m.err
		}
		if !m.in {
			magic, _ := m.br.Peek(2)
			if len(magic) == 0 {
				m.err = io.EOF
				return 0, io.EOF
			}
			start := m.cpos()
			if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
				// Data after the last member: blank padding is tolerated, anything else is refused.
				rest, err := io.ReadAll(io.LimitReader(m.br, 1<<20))
				if err != nil {
					m.err = &gzipError{off: start, err: err}
					return 0, m.err
				}
				if len(bytes.TrimLeft(rest, "\x00\r\n\t ")) > 0 {
					m.err = &gzipError{off: start, err: fmt.Errorf("%d bytes after the gzip member ending here are not gzip data (%q)", len(rest), ClipText(rest[:min(len(rest), 16)]))}
					return 0, m.err
				}
				m.trailing, m.trailingOff = int64(len(rest)), start
				m.err = io.EOF
				return 0, io.EOF
			}
			var err error
			if m.zr == nil {
				m.zr, err = gzip.NewReader(m.br)
			} else {
				err = m.zr.Reset(m.br)
			}
			if err != nil {
				m.err = &gzipError{off: start, err: err}
				return 0, m.err
			}
			m.zr.Multistream(false)
			m.members = append(m.members, member{cOff: start, dStart: m.dpos})
			m.in = true
			if m.event != nil {
				m.event(memberEvent{pos: m.dpos, start: true, mb: m.members[len(m.members)-1]})
			}
		}
		n, err := m.zr.Read(p)
		m.dpos += int64(n)
		cur := &m.members[len(m.members)-1]
		if err == io.EOF {
			cur.cEnd, cur.dEnd, cur.ended = m.cpos(), m.dpos, true
			m.in = false
			if m.event != nil {
				m.event(memberEvent{pos: m.dpos, mb: *cur})
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				err = fmt.Errorf("%w: the file ends inside a gzip member", ErrTruncated)
			}
			m.err = &gzipError{off: cur.cOff, err: err}
			return n, m.err
		}
		if n > 0 {
			return n, nil
		}
		if zeros++; zeros > 100 {
			m.err = &gzipError{off: cur.cOff, err: io.ErrNoProgress}
			return 0, m.err
		}
	}
}

// memberAt returns the member holding uncompressed position pos (or starting there).
func (m *memberReader) memberAt(pos int64) (member, bool) {
	for i := len(m.members) - 1; i >= 0; i-- {
		mb := m.members[i]
		if mb.dStart <= pos && (!mb.ended || pos < mb.dEnd || (pos == mb.dStart)) {
			return mb, true
		}
	}
	return member{}, false
}

// isBoundary reports whether a member ends at uncompressed position pos.
func (m *memberReader) isBoundary(pos int64) bool {
	for i := len(m.members) - 1; i >= 0; i-- {
		if m.members[i].ended && m.members[i].dEnd == pos {
			return true
		}
	}
	return false
}

// prune forgets members that end before pos.
func (m *memberReader) prune(pos int64) {
	i := 0
	for i < len(m.members)-1 && m.members[i].ended && m.members[i].dEnd < pos {
		i++
	}
	if i > 0 {
		m.members = append(m.members[:0], m.members[i:]...)
	}
}
