// Package httpx holds the one reading of an HTTP field value that several packages make the
// same way: a Content-Type's media type.
package httpx

import "strings"

// MediaType returns the media type of a Content-Type value (RFC 9110 section 8.3.1) without
// its parameters, trimmed and in lower case: "text/html" for "Text/HTML; charset=utf-8".
// It never fails: a value mime.ParseMediaType would refuse gives what stands before its
// first ';' all the same (the same answer ParseMediaType gives for a valid value), and ""
// gives "".
func MediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.TrimSpace(strings.ToLower(mt))
}
