package readlimit

import (
	"bufio"
	"bytes"
)

// LineReader reads the lines of a stream that may be hostile, holding at most one bounded
// line in memory: a line longer than the bound is read to its end and dropped, so the
// lines after it can still be read. It is the line reader of pab's JSONL readers (replay
// logs, guard traces, MCP messages on stdio).
type LineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewLineReader returns a LineReader over br for lines of at most max bytes (the "\n" or
// "\r\n" that ends a line not counted).
func NewLineReader(br *bufio.Reader, max int) *LineReader {
	return &LineReader{br: br, max: max, buf: make([]byte, 0, 512)}
}

// Next reads one line and returns it without its "\n" or "\r\n"; the slice is valid until
// the next call (a line that fits in br's buffer is not copied). A line longer than max
// comes back as nil with tooLong. An empty line is a non-nil empty slice. At the end of the
// input a last line without "\n" comes back with io.EOF, and nothing left is nil, false,
// io.EOF. A read error of br is returned as it is, with what was read of the line.
func (r *LineReader) Next() (line []byte, tooLong bool, err error) {
	limit := r.max + 2 // the line and its "\r\n"
	r.buf = r.buf[:0]
	size := 0
	var chunk []byte
	for {
		chunk, err = r.br.ReadSlice('\n')
		size += len(chunk)
		if err != bufio.ErrBufferFull {
			break
		}
		if size <= limit {
			r.buf = append(r.buf, chunk...)
		}
	}
	if size == 0 {
		return nil, false, err
	}
	line = chunk
	if size > len(chunk) {
		if size > limit {
			return nil, true, err
		}
		r.buf = append(r.buf, chunk...)
		line = r.buf
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > r.max {
		return nil, true, err
	}
	if line == nil {
		line = r.buf[:0]
	}
	return line, false, err
}
