package warc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// This file is the one reader of the heads pab's own bundle readers parse by hand (replay's
// record lookup, merge, export, the audit's scan): a WARC record's header block (WARC 1.1
// Section 4) and the HTTP head at the start of its block. Records of files pab did not
// write are read by gowarc (reader.go).

// WARCHead is the parsed header block of one WARC record.
type WARCHead struct {
	// Fields are the named Fields in order; a folded continuation line (WARC 1.1 section
	// 4, LWS) is joined to the value before it with one space.
	Fields Fields
	// ContentLength is Content-Length: the length of the block in bytes.
	ContentLength int64
}

// ParseWARCHead parses the header lines of one record as readHead returns them: the
// version line ("WARC/1.1"), then "Name: value" fields. It fails on a missing version line,
// a line that is neither a field nor a continuation, and a missing or bad Content-Length.
// Of a field written more than once, the first is used (Fields.Get).
func ParseWARCHead(lines []string) (WARCHead, error) {
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "WARC/") {
		found := ""
		if len(lines) > 0 {
			found = lines[0]
		}
		return WARCHead{}, fmt.Errorf("no WARC version line where a record should start (found %.40q)", found)
	}
	h := WARCHead{Fields: make(Fields, 0, len(lines)-1)}
	for _, line := range lines[1:] {
		if (line[0] == ' ' || line[0] == '\t') && len(h.Fields) > 0 {
			last := &h.Fields[len(h.Fields)-1]
			last.Value = strings.TrimSpace(last.Value + " " + strings.Trim(line, " \t"))
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return WARCHead{}, fmt.Errorf("malformed warc header line %.60q", line)
		}
		h.Fields = append(h.Fields, Field{Name: strings.TrimSpace(name), Value: strings.Trim(value, " \t")})
	}
	if !h.Fields.Has("Content-Length") {
		return WARCHead{}, errors.New("no Content-Length")
	}
	v := h.Fields.Get("Content-Length")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return WARCHead{}, fmt.Errorf("bad Content-Length %q", v)
	}
	h.ContentLength = n
	return h, nil
}

// ReadHeadLines is readHead over r, which it reads through a buffer of its own (so it may
// read past the head).
func ReadHeadLines(r io.Reader, max int64, eofEnds bool) ([]string, int64, error) {
	return ReadHead(bufio.NewReaderSize(r, 4096), max, eofEnds)
}

// ReadHead reads header lines (CRLF or LF ended) from br up to and including the empty
// line that ends them, reading at most max bytes and nothing after the empty line. It
// returns the lines without their terminators (at least one) and the number of bytes
// consumed, empty line included. With eofEnds, the end of br at a line boundary also ends
// the header (a revisit block, or a response without body, may stop right after its last
// field).
func ReadHead(br *bufio.Reader, max int64, eofEnds bool) ([]string, int64, error) {
	var lines []string
	var n int64
	for {
		line, err := readBoundedLine(br, max-n)
		n += int64(len(line))
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return nil, 0, fmt.Errorf("header longer than %d bytes", max)
			}
			if err != io.EOF {
				return nil, 0, err
			}
			if line != "" || !eofEnds {
				return nil, 0, fmt.Errorf("%w after %d bytes", ErrTruncatedHead, n)
			}
			if len(lines) == 0 {
				return nil, 0, ErrEmptyHead
			}
			return lines, n, nil
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if len(lines) == 0 {
				return nil, 0, ErrEmptyHead
			}
			return lines, n, nil
		}
		lines = append(lines, line)
	}
}

// ReadHead's errors for a head the end of its input cuts short and for an empty head.
var (
	ErrTruncatedHead = errors.New("truncated header")
	ErrEmptyHead     = errors.New("empty header")
)

// errLineTooLong is readBoundedLine's error for a line past its bound.
var errLineTooLong = errors.New("line longer than the bound")

// readBoundedLine reads one line (with its terminator) of at most max bytes. At the end of
// br it returns what it read with io.EOF ("" and io.EOF when nothing was left).
func readBoundedLine(br *bufio.Reader, max int64) (string, error) {
	var b []byte
	for first := true; ; first = false {
		chunk, err := br.ReadSlice('\n')
		if first && err != bufio.ErrBufferFull {
			b = chunk // the whole line in one read: copied once, by string(b) below
		} else {
			b = append(b, chunk...)
		}
		if int64(len(b)) > max {
			return "", errLineTooLong
		}
		switch err {
		case nil:
			return string(b), nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(b) == 0 {
				return "", io.EOF
			}
			return string(b), io.EOF
		default:
			return "", err
		}
	}
}
