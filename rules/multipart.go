package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime"
	"mime/multipart"
	"strings"
)

// MaxMultipartParts is the most parts a multipart/form-data body may have to be keyed by
// its parts; a body with more is keyed by digest, like any body that is not read.
const MaxMultipartParts = 1000

// multipartPrefix starts the key body of a multipart/form-data request keyed by its parts.
const multipartPrefix = "multipart:"

// multipartBody returns the key body of a multipart/form-data request from its parts, and
// false when the body is not one well-formed multipart body with the Content-Type's
// boundary (RFC 7578; RFC 2046 section 5.1.1), or has more than MaxMultipartParts parts.
// The caller digests the raw bytes then.
//
// The boundary is chosen afresh by the browser on every send, so it never counts: the key
// is the parts in the order sent, each written "name=value" for a field and
// "name=#file:FILENAME:sha256:HEX" for a file (a part whose Content-Disposition has a
// filename parameter, even empty), HEX the lower-case SHA-256 of the file's bytes, joined
// by '&' after "multipart:". Names, values and file names are escaped as query parameters
// are in Key.String, which always escapes '#', so a field's value never reads as a file.
// Field names are filtered like form fields (body_drop; body_keep). A part's own headers
// other than Content-Disposition (its Content-Type) do not count, nor do the preamble and
// the epilogue. The body is at most MaxStructuredBody bytes (normBody's bound), which
// bounds every part.
func multipartBody(body []byte, contentType string, f *bodyFilter) (string, bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		return "", false
	}
	boundary := params["boundary"]
	if boundary == "" || len(boundary) > 70 { // RFC 2046 section 5.1.1: 1 to 70 characters
		return "", false
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var b strings.Builder
	b.Grow(len(body)/2 + len(multipartPrefix))
	b.WriteString(multipartPrefix)
	n, written := 0, 0
	for {
		p, err := mr.NextRawPart() // raw: a part's Content-Transfer-Encoding is not applied
		// Only the close delimiter gives io.EOF itself; a body cut short wraps it.
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", false
		}
		if n++; n > MaxMultipartParts {
			return "", false
		}
		name, filename, isFile, ok := partDisposition(p.Header.Get("Content-Disposition"))
		if !ok {
			return "", false
		}
		content, err := io.ReadAll(p)
		if err != nil {
			return "", false
		}
		if !f.empty() && !f.kept(name, true) {
			continue
		}
		if written > 0 {
			b.WriteByte('&')
		}
		written++
		writeEscaped(&b, name, &escName)
		b.WriteByte('=')
		if !isFile {
			writeEscaped(&b, string(content), &escValue)
			continue
		}
		sum := sha256.Sum256(content)
		b.WriteString("#file:")
		writeEscaped(&b, filename, &escValue)
		b.WriteString(":sha256:")
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	return b.String(), true
}

// partDisposition reads a part's Content-Disposition (RFC 7578 section 4.2: "form-data"
// with a name and, for files, a filename; RFC 2231 encoded parameters are decoded). A part
// without the field has an empty name; a field that does not parse makes ok false.
func partDisposition(cd string) (name, filename string, isFile, ok bool) {
	if strings.TrimSpace(cd) == "" {
		return "", "", false, true
	}
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		return "", "", false, false
	}
	filename, isFile = params["filename"]
	return params["name"], filename, isFile, true
}
