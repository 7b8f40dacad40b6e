package warc

// decode.go: turning a recorded HTTP body into the payload a browser would see:
// chunked transfer coding removed (RFC 9112 section 7.1) when the body really is chunked,
// then content codings removed (RFC 9110 section 8.4): gzip, deflate, br, zstd.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// MaxDecodedSize bounds a decoded payload: 256 MiB. A body that decodes to more (a
// "zip bomb") is left encoded and DecodePayload returns ErrDecodedTooLarge.
const MaxDecodedSize int64 = 256 << 20

var (
	// ErrDecodedTooLarge: the decoded payload would be larger than the limit.
	ErrDecodedTooLarge = errors.New("decoded payload too large")
	// ErrUnsupportedEncoding: a content coding this package cannot decode (e.g. "compress").
	ErrUnsupportedEncoding = errors.New("unsupported content coding")
)

// DecodePayload returns the payload of an HTTP message body as recorded, with the
// header it was recorded with:
//
//   - Transfer-Encoding chunked is removed only when the body parses as chunks; many
//     tools store the body already de-chunked while keeping the header. A body that
//     parses as chunks but is cut short (it ends inside a chunk or before the last chunk)
//     is de-chunked too, keeping the data it holds (bundle-format.md, rule F3).
//   - The Content-Encoding codings (gzip and x-gzip, deflate as zlib or raw deflate, br,
//     zstd; identity ignored) are removed in reverse order of application.
//
// origEncoding is the Content-Encoding removed ("gzip", "br", "gzip, br"), "" when none.
// When a coding cannot be removed (corrupt data, unsupported coding, more than
// MaxDecodedSize bytes), err says why, decoded is the body with only the chunked framing
// removed, and origEncoding is "": the caller keeps the bytes as recorded.
func DecodePayload(header http.Header, body []byte) (decoded []byte, origEncoding string, err error) {
	return DecodePayloadLimit(header, body, MaxDecodedSize)
}

// DecodePayloadLimit is DecodePayload with a bound, in bytes, on the decoded size.
func DecodePayloadLimit(header http.Header, body []byte, limit int64) (decoded []byte, origEncoding string, err error) {
	if HasToken(header.Values("Transfer-Encoding"), "chunked") {
		var buf bytes.Buffer
		dc := NewChunkDecoder(&buf)
		_, _ = dc.Write(body) // a bytes.Buffer does not fail
		if dc.OK() || dc.Truncated() {
			body = buf.Bytes()
		}
	}
	codings := ContentCodings(header)
	if len(codings) == 0 {
		return body, "", nil
	}
	orig := strings.Join(codings, ", ")
	if len(body) == 0 {
		return body, orig, nil
	}
	out := body
	for i := len(codings) - 1; i >= 0; i-- {
		src := out
		var buf bytes.Buffer
		err := DecodeOneTo(codings[i], func() io.Reader { return bytes.NewReader(src) }, &buf, buf.Reset, limit, memoryZstdWindow(limit))
		if err != nil {
			return body, "", fmt.Errorf("content-encoding %s: %w", codings[i], err)
		}
		out = buf.Bytes()
		if out == nil {
			out = []byte{}
		}
	}
	return out, orig, nil
}

// memoryZstdWindow is the largest zstd window DecodePayloadLimit accepts for a limit.
func memoryZstdWindow(limit int64) uint64 { return min(uint64(limit)+1, 1<<30) }

// ContentCodings lists the Content-Encoding codings of header in the order they were
// applied, lower case, "identity" left out.
func ContentCodings(header http.Header) []string {
	var codings []string
	for _, v := range header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	return codings
}

func HasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// SinkError is a failure of the writer a decoder writes to (a full disk), as opposed to a
// failure of the coded data: it stops an import instead of keeping the body as recorded.
type SinkError struct{ Err error }

func (e *SinkError) Error() string { return e.Err.Error() }
func (e *SinkError) Unwrap() error { return e.Err }

// sinkWriter remembers the first error of w, so a copy can tell a writer failure from a
// reader failure.
type sinkWriter struct {
	w   io.Writer
	err error
}

func (s *sinkWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}

// DecodeOneTo removes one content coding from the bytes open returns (a fresh reader on
// each call: a deflate body is read a second time as raw deflate when it is not zlib),
// writing at most limit decoded bytes to dst; reset discards what was written to dst so
// far. zstd frames with a window above maxWindow bytes are refused. An error of dst comes
// back as a *sinkError; any other error means the data does not decode.
func DecodeOneTo(coding string, open func() io.Reader, dst io.Writer, reset func(), limit int64, maxWindow uint64) error {
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(open())
		if err != nil {
			return err
		}
		n, err := copyLimit(dst, zr, limit)
		if errors.Is(err, gzip.ErrHeader) && n > 0 {
			// Bytes after the last gzip member that are not gzip: browsers ignore them too.
			return nil
		}
		return err
	case "deflate":
		// RFC 9110 says zlib; some servers send raw deflate.
		if zr, err := zlib.NewReader(open()); err == nil {
			_, err := copyLimit(dst, zr, limit)
			var se *SinkError
			if err == nil || errors.Is(err, ErrDecodedTooLarge) || errors.As(err, &se) {
				return err
			}
			reset()
		}
		_, err := copyLimit(dst, flate.NewReader(open()), limit)
		return err
	case "br":
		_, err := copyLimit(dst, brotli.NewReader(open()), limit)
		return err
	case "zstd":
		zr, err := zstd.NewReader(open(), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(min(uint64(limit)+1, maxWindow)), zstd.WithDecoderMaxWindow(maxWindow))
		if err != nil {
			return err
		}
		defer zr.Close()
		_, err = copyLimit(dst, zr, limit)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			err = fmt.Errorf("%w: %v", ErrDecodedTooLarge, err)
		}
		return err
	default:
		return fmt.Errorf("%w %q", ErrUnsupportedEncoding, coding)
	}
}

// copyLimit copies r to dst and fails with ErrDecodedTooLarge when r holds more than limit
// bytes (limit+1 of them may have been written). It returns the bytes written.
func copyLimit(dst io.Writer, r io.Reader, limit int64) (int64, error) {
	sw := &sinkWriter{w: dst}
	n, err := io.Copy(sw, io.LimitReader(r, limit+1))
	if sw.err != nil {
		return n, &SinkError{sw.err}
	}
	if err != nil {
		return n, err
	}
	if n > limit {
		return n, fmt.Errorf("%w: more than %d bytes", ErrDecodedTooLarge, limit)
	}
	return n, nil
}

// Dechunk removes chunked transfer coding (RFC 9112 section 7.1) as browsers read it: hex
// chunk sizes with optional extensions, CRLF or bare LF line ends, the last chunk and
// trailer fields, also trailer fields after the empty line that ends the trailer section
// and a body cut inside the trailer (bundle-format.md, rule F2). ok is false, and b should
// be taken as already de-chunked, unless the whole body parses as chunks: the data may end
// right after a complete chunk (a capture cut before the last chunk), and after the last
// chunk only trailer field lines and blank bytes may follow. It is ChunkDecoder (the
// streaming form the import uses) run over b.
func Dechunk(b []byte) (out []byte, ok bool) {
	var buf bytes.Buffer
	buf.Grow(len(b))
	dc := NewChunkDecoder(&buf)
	dc.Write(b) // a bytes.Buffer does not fail
	if !dc.OK() {
		return nil, false
	}
	return buf.Bytes(), true
}
