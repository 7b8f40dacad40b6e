package warc

// chunked.go: removing chunked transfer coding from a stream, with exactly the rules of
// Dechunk, so that an import can de-chunk a body of any size without holding it in memory.

import "io"

// States of chunkDecoder.
const (
	ckSizeStart  = iota // at the start of a chunk-size line
	ckSizeDigits        // in the hex digits of a chunk-size line
	ckSizeBlank         // blanks after the digits
	ckSizeCR            // a CR after the digits or blanks: only LF may follow
	ckExt               // a chunk extension (after ';'), up to LF
	ckData              // chunk data
	ckDataEnd           // after chunk data: CRLF, LF or the end
	ckDataCR            // a CR after chunk data: only LF may follow
	ckTrailer           // a trailer field line (lineLen bytes of it so far)
	ckRest              // after the empty line that ends the trailer: blanks only
	ckFailed            // not chunked: the rest is ignored
)

// ChunkDecoder removes chunked transfer coding (RFC 9112 section 7.1) from a stream written
// to it in pieces of any size, with the rules of Dechunk: the de-chunked data goes to w as it
// is found, and ok, once the stream has been written whole, says whether all of it parsed as
// chunks (Dechunk's ok). From the first byte that does not fit, the rest is ignored and ok
// is false; the caller then discards what went to w. Write fails only when w fails. Memory
// is constant whatever the size of the stream.
type ChunkDecoder struct {
	w      io.Writer
	state  int
	chunks int    // complete chunks of data seen
	digits int    // hex digits of the current size line
	size   uint64 // the current size line's value
	left   uint64 // data bytes of the current chunk still to come
	sized  bool   // a chunk-size line has been read whole
	// the current trailer line: its length, whether its last byte is CR, and where its
	// first ':' is (-1: none yet)
	lineLen int
	lastCR  bool
	colon   int
	err     error // from w
	// what a browser accepts that the strict grammar does not, met so far (repairs)
	ext, bareLF, lateTrailer bool
	extCR                    bool // the last byte of a chunk extension was CR
	afterChunk               bool // a chunk's data and its line end were read whole
}

func NewChunkDecoder(w io.Writer) *ChunkDecoder { return &ChunkDecoder{w: w} }

// Write consumes p; it returns len(p) unless w fails.
func (c *ChunkDecoder) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := len(p)
	for len(p) > 0 && c.state != ckFailed {
		if c.state == ckData {
			k := uint64(len(p))
			if k > c.left {
				k = c.left
			}
			if _, err := c.w.Write(p[:k]); err != nil {
				c.err = err
				return n - len(p), err
			}
			p = p[k:]
			c.left -= k
			if c.left == 0 {
				c.chunks++
				c.state = ckDataEnd
			}
			continue
		}
		c.step(p[0])
		p = p[1:]
	}
	return n, nil
}

// step feeds one byte outside chunk data.
func (c *ChunkDecoder) step(b byte) {
	switch c.state {
	case ckSizeStart:
		if v, ok := hexValue(b); ok {
			c.state, c.digits, c.size = ckSizeDigits, 1, uint64(v)
			return
		}
		c.state = ckFailed
	case ckSizeDigits:
		if v, ok := hexValue(b); ok {
			if c.digits++; c.digits > 15 {
				c.state = ckFailed
				return
			}
			c.size = c.size<<4 | uint64(v)
			return
		}
		c.afterDigits(b)
	case ckSizeBlank:
		c.afterDigits(b)
	case ckSizeCR:
		if b == '\n' {
			c.sizeLineEnd()
			return
		}
		c.state = ckFailed
	case ckExt:
		if b == '\n' {
			if !c.extCR {
				c.bareLF = true
			}
			c.sizeLineEnd()
			return
		}
		c.extCR = b == '\r'
	case ckDataEnd:
		switch b {
		case '\r':
			c.state = ckDataCR
		case '\n':
			c.bareLF = true
			c.state, c.afterChunk = ckSizeStart, true
		default:
			c.state = ckFailed
		}
	case ckDataCR:
		if b == '\n' {
			c.state, c.afterChunk = ckSizeStart, true
			return
		}
		c.state = ckFailed
	case ckTrailer:
		if b != '\n' {
			if b == ':' && c.colon < 0 {
				c.colon = c.lineLen
			}
			c.lineLen++
			c.lastCR = b == '\r'
			return
		}
		if !c.lastCR {
			c.bareLF = true
		}
		// the field is the line without one trailing CR
		if c.lineLen == 0 || (c.lineLen == 1 && c.lastCR) {
			c.state = ckRest
			return
		}
		if c.colon <= 0 {
			c.state = ckFailed
			return
		}
		c.lineLen, c.lastCR, c.colon = 0, false, -1
	case ckRest:
		switch b {
		case '\r', '\n', '\t', ' ':
		default:
			// a trailer field after the empty line that ended the trailer section (some
			// servers send their trailer late): read as one more trailer line
			c.lateTrailer = true
			c.state, c.lineLen, c.lastCR, c.colon = ckTrailer, 1, false, -1
			if b == ':' {
				c.colon = 0
			}
		}
	}
}

// afterDigits handles a byte after a size line's digits (or the blanks after them).
func (c *ChunkDecoder) afterDigits(b byte) {
	switch b {
	case ' ', '\t':
		c.state = ckSizeBlank
	case '\r':
		c.state = ckSizeCR
	case ';':
		c.state, c.ext, c.extCR = ckExt, true, false
	case '\n':
		c.bareLF = true
		c.sizeLineEnd()
	default:
		c.state = ckFailed
	}
}

func (c *ChunkDecoder) sizeLineEnd() {
	c.sized = true
	if c.size == 0 {
		c.state, c.lineLen, c.lastCR, c.colon = ckTrailer, 0, false, -1
		return
	}
	c.state, c.left = ckData, c.size
}

// OK reports, once the whole stream was written, whether it parsed as chunks.
func (c *ChunkDecoder) OK() bool {
	if c.err != nil {
		return false
	}
	switch c.state {
	case ckSizeStart:
		return c.chunks > 0
	case ckDataEnd, ckRest:
		return true
	case ckTrailer:
		// after the last chunk, also cut inside a trailer line (a record cut there holds
		// all of the data); a line after the trailer section's end only when it reads as a
		// field so far (name and colon), not as other bytes after the body
		return c.lineLen == 0 || !c.lateTrailer || c.colon > 0
	}
	return false
}

// Repairs names, once the whole stream was written and OK, what it holds that RFC 9112's
// grammar does not allow but browsers accept, each a few words for the import's warning:
// bare LF line ends, trailer fields after the empty line that ends the trailer section,
// a stream cut inside a trailer line. Chunk extensions are allowed (RFC 9112 section
// 7.1.1) and named too, as they are rare enough to be worth a mention. Nil when none.
func (c *ChunkDecoder) Repairs() []string {
	var r []string
	if c.ext {
		r = append(r, "chunk extensions ignored")
	}
	if c.bareLF {
		r = append(r, "bare LF line ends")
	}
	if c.lateTrailer {
		r = append(r, "trailer fields after the trailer's closing empty line")
	}
	if c.state == ckTrailer && c.lineLen > 0 {
		r = append(r, "cut inside a trailer field")
	}
	return r
}

// Broken reports, once the whole stream was written, whether it is chunked framing that
// does not parse to the end: at least one chunk of data read whole and its line end, then
// a byte that fits no rule. (A body that fails earlier is taken as already de-chunked, rule
// F2.) Such a body is stored as recorded, framing and all, and noted as such.
func (c *ChunkDecoder) Broken() bool {
	return c.err == nil && c.state == ckFailed && c.chunks > 0 && c.afterChunk
}

// Truncated reports, once the whole stream was written, whether it is chunked data cut
// short: at least one chunk-size line was read, nothing failed to parse, and the stream
// ended before the last chunk (size 0), for example inside a chunk's data. What went to w
// is then every data byte the stream holds (bundle-format.md, rule F3).
func (c *ChunkDecoder) Truncated() bool {
	if c.err != nil || !c.sized {
		return false
	}
	switch c.state {
	case ckFailed, ckRest:
		return false
	case ckTrailer:
		return false // after the last chunk: all of the data is there (ok)
	}
	return true
}

func hexValue(b byte) (byte, bool) {
	switch {
	case '0' <= b && b <= '9':
		return b - '0', true
	case 'a' <= b && b <= 'f':
		return b - 'a' + 10, true
	case 'A' <= b && b <= 'F':
		return b - 'A' + 10, true
	}
	return 0, false
}
