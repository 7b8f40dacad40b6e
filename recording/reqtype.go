package recording

import (
	"bytes"
	"mime"
	"strings"
)

// RequestType returns the request Content-Type that e's matching key is computed with,
// body being e's request body (Bundle.RequestBody). It is e.ReqType, which the bundle
// writer fills with httpx.RequestKeyType: the media type, with the boundary for a
// multipart body. Recordings written before the boundary was kept (pab before 2026-12)
// hold "multipart/form-data" alone, which cannot split the body into its parts; for those
// the boundary is read from the body itself, whose first line is the first delimiter
// "--BOUNDARY" (RFC 2046 section 5.1.1: a body starting with the delimiter, no preamble,
// as every browser sends it), so that old recordings are keyed by their parts without a
// re-import. A body that does not start so keeps e.ReqType as it is (and is keyed by its
// digest).
func (e *Entry) RequestType(body []byte) string {
	if e.ReqType != "multipart/form-data" {
		return e.ReqType
	}
	if b := leadingBoundary(body); b != "" {
		if s := mime.FormatMediaType(e.ReqType, map[string]string{"boundary": b}); s != "" {
			return s
		}
	}
	return e.ReqType
}

// leadingBoundary returns the boundary of the delimiter line that body starts with
// ("--" BOUNDARY, then optional blanks, then CRLF or LF), or "" when body does not start
// with one of 1 to 70 characters (RFC 2046 section 5.1.1).
func leadingBoundary(body []byte) string {
	if !bytes.HasPrefix(body, []byte("--")) {
		return ""
	}
	line := body[2:min(len(body), 2+70+80)] // the boundary, blanks allowed after it, the line end
	i := bytes.IndexByte(line, '\n')
	if i < 0 {
		return ""
	}
	b := strings.TrimRight(string(line[:i]), " \t\r")
	if b == "" || len(b) > 70 {
		return ""
	}
	for _, c := range []byte(b) {
		if c < ' ' || c > '~' {
			return ""
		}
	}
	return b
}
