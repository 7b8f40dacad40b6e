// Package httpx holds the one reading of an HTTP field value that several packages make the
// same way: a Content-Type's media type, and the part of a request's Content-Type a
// recording keeps for the matching key.
package httpx

import (
	"mime"
	"strings"
)

// MediaType returns the media type of a Content-Type value (RFC 9110 section 8.3.1) without
// its parameters, trimmed and in lower case: "text/html" for "Text/HTML; charset=utf-8".
// It never fails: a value mime.ParseMediaType would refuse gives what stands before its
// first ';' all the same (the same answer ParseMediaType gives for a valid value), and ""
// gives "".
func MediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.TrimSpace(strings.ToLower(mt))
}

// RequestKeyType returns what a recording keeps of a request's Content-Type for the
// matching key (docs/bundle-format.md, entries' "reqType"): the media type as MediaType
// gives it, and for a multipart type (RFC 2046 section 5.1.1) its boundary parameter too,
// "multipart/form-data; boundary=XYZ" (quoted when it must be), because the body cannot
// be split into its parts without it. A multipart value without a boundary, or whose
// parameters do not parse, gives the media type alone.
func RequestKeyType(ct string) string {
	mt := MediaType(ct)
	if !strings.HasPrefix(mt, "multipart/") {
		return mt
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil || params["boundary"] == "" {
		return mt
	}
	if s := mime.FormatMediaType(mt, map[string]string{"boundary": params["boundary"]}); s != "" {
		return s
	}
	return mt
}
