package warc

// resync.go: finding where a record really ends when its WARC Content-Length is wrong
// (WARC 1.1 section 5.1: a record is its header, Content-Length block bytes and CRLF CRLF).
// warcio and jwarc warn and read on at the next record; so does Reader, unless Strict.
// One boundary finder serves both the in-memory path (reader.go) and the streamed path
// (reader_stream.go): it looks at most ResyncWindow bytes back into the block as
// Content-Length gives it and ResyncWindow bytes forward into the stream.

import (
	"bufio"
	"bytes"
	"encoding"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/pab-dev/pab/internal/words"
)

// ResyncWindow bounds how far, each way from where Content-Length says a block ends, a
// Reader looks for the real end of the record: 64 KiB. A record whose real end is not
// within it is refused with ErrContentLength.
const ResyncWindow = 64 << 10

// recordVersions are the version lines that start a record (WARC 1.1 section 4; the
// pre-ISO drafts 0.17 and 0.18).
var recordVersions = [][]byte{[]byte("WARC/1.0"), []byte("WARC/1.1"), []byte("WARC/0.17"), []byte("WARC/0.18")}

// startsRecord reports whether b begins with a WARC version line: one of recordVersions
// followed by a line end (CR or LF).
func startsRecord(b []byte) bool {
	for _, v := range recordVersions {
		if len(b) > len(v) && bytes.HasPrefix(b, v) && (b[len(v)] == '\r' || b[len(v)] == '\n') {
			return true
		}
	}
	return false
}

// boundary is a real record end found by findBoundary, in positions relative to where
// Content-Length says the block ends (0): the block really ends at end, and the next
// record (or the end of the stream) starts at next; the bytes between are the end marker.
type boundary struct {
	end, next int
	how       string // "the next WARC/1.0 line", "the gzip member boundary", ...
}

// findBoundary looks for the real end of a record. tail is the last bytes of the block as
// Content-Length gives it, ahead the bytes after it (at most ResyncWindow each); eof means
// nothing follows ahead. memberEnd, when hasMember, is where the record's own gzip member
// ends; that boundary is preferred when a record (or the end of the stream) starts there.
// Otherwise the line starting a record nearest to 0 wins (forward on a tie), and at the
// end of the stream, the end of the stream.
func findBoundary(tail, ahead []byte, eof bool, memberEnd int, hasMember bool) (boundary, bool) {
	buf := make([]byte, 0, len(tail)+len(ahead))
	buf = append(append(buf, tail...), ahead...)
	base := len(tail)
	at := func(p int) boundary {
		end := p - markerLen(buf[:base+p], base+p)
		if end < -base {
			end = -base
		}
		return boundary{end: end, next: p}
	}
	if hasMember && memberEnd >= -base && memberEnd <= len(ahead) && memberEnd != 0 {
		if i := base + memberEnd; (i == len(buf) && eof) || startsRecord(buf[i:]) {
			b := at(memberEnd)
			b.how = "the gzip member boundary"
			return b, true
		}
	}
	// A record start inside the tail whose own record reaches past 0 (or whose header
	// does not end within the buffer) is the record Content-Length ran into: the latest
	// such start wins. Else the record start nearest to 0 wins (forward on a tie).
	best, found := boundary{}, false
	straddle := false
	dist := func(p int) int {
		if p < 0 {
			return -p
		}
		return p
	}
	for i := 0; i < len(buf); {
		j := bytes.Index(buf[i:], []byte("\nWARC/"))
		if j < 0 {
			break
		}
		s := i + j + 1
		i = s
		p := s - base
		if !startsRecord(buf[s:]) || p == 0 {
			continue
		}
		st := false
		if p < 0 {
			end, ok := recordEndAt(buf, s)
			st = !ok || end-base >= 0
		}
		if !found || (st && p < 0) || (!straddle && (dist(p) < dist(best.next) || (dist(p) == dist(best.next) && p > 0))) {
			best, found, straddle = at(p), true, straddle || st
			nl := bytes.IndexAny(buf[s:], "\r\n")
			best.how = "the next " + string(buf[s:s+nl]) + " line"
		}
		if p > 0 {
			break // later starts are further away
		}
	}
	if !found && eof && len(ahead) > 0 {
		best, found = at(len(ahead)), true
		best.how = "the end of the file"
	}
	if found && best.end == 0 {
		return boundary{}, false // nothing to correct: not this finder's case
	}
	return best, found
}

// recordEndAt reads the WARC header of the record starting at buf[s:] and returns where
// the record ends by its Content-Length (block and CRLF CRLF); ok is false when the
// header does not end within buf or has no readable Content-Length.
func recordEndAt(buf []byte, s int) (int, bool) {
	cl := int64(-1)
	for i := s; i < len(buf); {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return 0, false
		}
		line := bytes.TrimRight(buf[i:i+j], "\r")
		i += j + 1
		if len(line) == 0 {
			if cl < 0 || cl > int64(len(buf)) {
				return 0, false
			}
			return i + int(cl) + 4, true
		}
		if name, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")) {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err == nil && n >= 0 {
				cl = n
			}
		}
	}
	return 0, false
}

// markerLen is the length of the end marker that ends b[:n]: CRLF CRLF, CR CR LF CR CR LF,
// or else any run of up to 4 CR and LF bytes.
func markerLen(b []byte, n int) int {
	b = b[:n]
	for _, m := range []string{"\r\r\n\r\r\n", "\r\n\r\n"} {
		if bytes.HasSuffix(b, []byte(m)) {
			return len(m)
		}
	}
	k := 0
	for k < 4 && k < len(b) && (b[len(b)-1-k] == '\r' || b[len(b)-1-k] == '\n') {
		k++
	}
	return k
}

// resyncResult is what endRecord did to a block: its real length, and the bytes after
// Content-Length's end that belong to it (stray) or the count cut off its end (cut).
type resyncResult struct {
	size  int64
	stray []byte
	cut   int
}

// endHasher feeds a block digest and keeps its state as it was 1 to 4 bytes before the
// end of the cl-byte block, so that endRecord can tell whether a block shorter by those
// bytes has the recorded digest (a Content-Length that took in part of the end marker).
type endHasher struct {
	h     hash.Hash
	cl, n int64
	saved [5][]byte // saved[k]: the state after cl-k bytes
}

func (e *endHasher) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		k := e.cl - e.n // bytes left to the end
		if k >= 1 && k <= 4 {
			if m, ok := e.h.(encoding.BinaryMarshaler); ok {
				e.saved[k], _ = m.MarshalBinary()
			}
		}
		step := int64(len(p))
		if k > 4 && e.n+step > e.cl-4 {
			step = k - 4
		} else if k >= 1 && k <= 4 {
			step = 1
		}
		_, _ = e.h.Write(p[:step])
		e.n += step
		p = p[step:]
	}
	return total, nil
}

// matchesShort reports whether the block without its last k bytes has digest d.
func (e *endHasher) matchesShort(d Digest, k int) bool {
	if e == nil || k < 1 || k > 4 || e.saved[k] == nil || e.n != e.cl || bytes.Equal(e.h.Sum(nil), d.Sum) {
		return false
	}
	h := d.Hash()
	u, ok := h.(encoding.BinaryUnmarshaler)
	if !ok || u.UnmarshalBinary(e.saved[k]) != nil {
		return false
	}
	return bytes.Equal(h.Sum(nil), d.Sum)
}

// endRecord reads the end marker after a block of cl bytes that ends at r.pos (WARC 1.1
// Section 5.1, CRLF CRLF). tail is the last bytes of the block as read (at most
// ResyncWindow; nil when they were not kept). A short, long or LF-only run of newlines
// followed by the end of the file, of the gzip member or by the next record is accepted
// with a warning (warcio does the same). Any other byte after the block means
// Content-Length is wrong: Strict refuses the record (ErrContentLength), else the record's
// real end is found (findBoundary), the stream is put there, and the correction is
// returned with a file and a record warning. The result is nil when the block stands.
func (r *Reader) endRecord(rec *Record, start, cl int64, tail []byte, shortOK func(k int) bool) (*resyncResult, error) {
	blockEnd := r.pos
	ahead, err := r.br.Peek(ResyncWindow)
	eof := err == io.EOF
	if err != nil && !eof && err != io.ErrShortBuffer {
		return nil, err
	}
	n := 0
	for n < len(ahead) && (ahead[n] == '\r' || ahead[n] == '\n') {
		n++
	}
	marker, next := ahead[:n], ahead[n:]
	take := func(k int) {
		_, _ = r.br.Discard(k)
		r.pos += int64(k)
	}
	clipped := marker[:min(len(marker), 8)]
	switch {
	case string(marker) == "\r\n\r\n":
		take(4)
		return nil, nil
	case string(marker) == "\r\r\n\r\r\n" && ((len(next) == 0 && eof) || bytes.HasPrefix(next, []byte("WARC/"))):
		r.warnOnce("end-crcrlf", start, "record ends with CR CR LF CR CR LF, not CRLF CRLF")
		take(n)
		return nil, nil
	case len(next) == 0 && eof:
		r.warnOnce("end-eof", start, fmt.Sprintf("the last record ends with %d newline bytes (%q), not CRLF CRLF", n, clipped))
		take(n)
		return nil, nil
	case r.gz != nil && r.gz.isBoundary(blockEnd) && n == 0:
		r.warnOnce("end-member", start, "record has no CRLF CRLF end marker; its gzip member ends after the block")
		return nil, nil
	case len(next) == 0 && !eof:
		take(n) // a long run of newlines: Next skips the rest as blank bytes between records
		return nil, nil
	case bytes.HasPrefix(next, []byte("WARC/")) && n < 4 && !r.Strict && shortOK != nil && cutsMarker(tail, marker) && shortOK(4-n):
		// Content-Length took in the first bytes of the end marker: the block digest
		// matches the block without them.
		k := 4 - n
		take(n)
		what := fmt.Sprintf("WARC Content-Length %d is %d %s too long for the record; block taken as %d bytes (resynchronised at the next WARC/ line; the block digest matches)", cl, k, words.Plural(k, "byte"), cl-int64(k))
		r.warn(start, "%s", what)
		rec.Warnings = append(rec.Warnings, what)
		r.resyncs++
		return &resyncResult{size: cl - int64(k), cut: k}, nil
	case bytes.HasPrefix(next, []byte("WARC/")):
		r.warnOnce("end-"+string(clipped), start, fmt.Sprintf("record is followed by %d newline bytes (%q), not CRLF CRLF", n, clipped))
		take(n)
		return nil, nil
	}
	where := "byte " + strconv.FormatInt(blockEnd, 10)
	if r.gz != nil {
		where = "uncompressed offset " + strconv.FormatInt(blockEnd, 10)
	}
	refuse := func(extra string) error {
		return fmt.Errorf("%w: Content-Length %d, but the block is followed by %q, not CRLF CRLF (at %s)%s",
			ErrContentLength, cl, ClipText(ahead[:min(len(ahead), 5+min(n, 8))]), where, extra)
	}
	if r.Strict {
		return nil, refuse("")
	}
	memberEnd, hasMember := 0, false
	if r.gz != nil {
		if m, ok := r.gz.memberAt(start); ok && m.dStart == start && m.ended {
			memberEnd, hasMember = int(m.dEnd-blockEnd), true
		}
	}
	if int64(len(tail)) > cl {
		tail = tail[int64(len(tail))-cl:]
	}
	b, ok := findBoundary(tail, ahead, eof, memberEnd, hasMember)
	if !ok && !eof && len(ahead) == ResyncWindow {
		// Beyond the window: read on line by line, up to MaxBlockSize, to the next record
		// start, and drop what lies between (the record may lack bytes or carry extra ones).
		limit := max(r.MaxBlockSize, ResyncWindow)
		n, found, err := r.skipToRecord(limit)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, refuse(fmt.Sprintf("; no record starts in the %d bytes after it", n))
		}
		what := fmt.Sprintf("WARC Content-Length %d does not match the record, and no record starts within %d bytes; block taken as %d bytes and the %d bytes up to the next record (%s) dropped", cl, ResyncWindow, cl, n, r.where(r.pos))
		r.warn(start, "%s", what)
		rec.Warnings = append(rec.Warnings, what)
		r.resyncs++
		return nil, nil
	}
	if !ok {
		return nil, refuse(fmt.Sprintf("; no record starts within %d bytes", ResyncWindow))
	}
	res := &resyncResult{size: cl + int64(b.end)}
	var what string
	if b.end > 0 {
		res.stray = append([]byte(nil), ahead[:b.end]...)
		take(b.next)
		what = fmt.Sprintf("WARC Content-Length %d is %d %s short of the record; block taken as %d bytes", cl, b.end, words.Plural(b.end, "byte"), res.size)
	} else {
		res.cut = -b.end
		if b.next < 0 {
			r.unread(tail[len(tail)+b.next:])
		} else {
			take(b.next)
		}
		what = fmt.Sprintf("WARC Content-Length %d is %d %s too long for the record; block taken as %d bytes", cl, -b.end, words.Plural(-b.end, "byte"), res.size)
	}
	what += " (resynchronised at " + b.how + ")"
	r.warn(start, "%s", what)
	rec.Warnings = append(rec.Warnings, what)
	r.resyncs++
	return res, nil
}

// cutsMarker reports whether the block's last bytes and the newlines after it make one
// CRLF CRLF end marker.
func cutsMarker(tail, marker []byte) bool {
	k := 4 - len(marker)
	return k > 0 && len(tail) >= k && string(tail[len(tail)-k:])+string(marker) == "\r\n\r\n"
}

// skipToRecord reads lines from the stream until the next one starts a record (left
// unread), at most limit bytes; it returns the bytes read and whether a record start came.
func (r *Reader) skipToRecord(limit int64) (int64, bool, error) {
	var n int64
	lineStart := false // the caller looked at the bytes here already
	for n <= limit {
		if lineStart {
			if b, _ := r.br.Peek(10); startsRecord(b) {
				return n, true, nil
			}
		}
		line, err := r.br.ReadSlice('\n')
		n += int64(len(line))
		r.pos += int64(len(line))
		switch err {
		case nil:
			lineStart = true
		case bufio.ErrBufferFull:
			lineStart = false
		case io.EOF:
			return n, false, nil
		default:
			return n, false, err
		}
	}
	return n, false, nil
}

// unread puts b back in front of the stream (r.pos moves back by len(b)).
func (r *Reader) unread(b []byte) {
	buffered, _ := r.br.Peek(r.br.Buffered())
	nb := make([]byte, 0, len(b)+len(buffered)+len(r.pb.buf))
	nb = append(append(append(nb, b...), buffered...), r.pb.buf...)
	r.pb.buf = nb
	r.br.Reset(r.pb)
	r.pos -= int64(len(b))
}

// pushbackReader reads buf, then r.
type pushbackReader struct {
	buf []byte
	r   io.Reader
}

func (p *pushbackReader) Read(b []byte) (int, error) {
	if len(p.buf) > 0 {
		n := copy(b, p.buf)
		p.buf = p.buf[n:]
		if len(p.buf) == 0 {
			p.buf = nil
		}
		return n, nil
	}
	return p.r.Read(b)
}

// tailRing keeps the last bytes written to it (at most its capacity).
type tailRing struct {
	buf  []byte
	next int
	full bool
}

func newTailRing(size int) *tailRing { return &tailRing{buf: make([]byte, size)} }

func (t *tailRing) reset() { t.next, t.full = 0, false }

func (t *tailRing) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= len(t.buf) {
		copy(t.buf, p[len(p)-len(t.buf):])
		t.next, t.full = 0, true
		return n, nil
	}
	k := copy(t.buf[t.next:], p)
	if k < len(p) {
		copy(t.buf, p[k:])
		t.full = true
	}
	t.next = (t.next + len(p)) % len(t.buf)
	if t.next == 0 && len(p) > 0 {
		t.full = true
	}
	return n, nil
}

// bytes returns the kept bytes in order.
func (t *tailRing) bytes() []byte {
	if !t.full {
		return append([]byte(nil), t.buf[:t.next]...)
	}
	out := make([]byte, 0, len(t.buf))
	return append(append(out, t.buf[t.next:]...), t.buf[:t.next]...)
}
