package rules

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Request is what the key is computed from. URL is absolute (its scheme is ignored);
// Body is the whole request body; ContentType is the request's Content-Type header.
// Type is the request's resource type under replay's log names ("document", "image",
// "api", ...; replay.RequestType, from Sec-Fetch-Dest and the other request fields; the
// proxy gives "document" only for a browser's navigation), "" when not known: the key ignores it, and replay's fuzzy step reads it (a document takes
// no recording that lacks a parameter it carries, docs/replay.md "Matching policy").
type Request struct {
	Method      string
	URL         *url.URL
	Body        []byte
	ContentType string
	Type        string
}

// Param is one query parameter, name and value percent-decoded ('+' read as a space).
type Param struct {
	Name, Value string
}

// Key is the matching key of a request (see docs/rules.md). Two requests with equal
// String() are answered by the same recording.
type Key struct {
	// Method is upper-case ("GET").
	Method string
	// Host is lower-case, without a trailing dot, without port 80 or 443, with any other
	// port ("localhost:8080"). An internationalized name is in its A-label (punycode) form,
	// as browsers send it: "bücher.example" is "xn--bcher-kva.example" (ASCIIHost).
	Host string
	// Path is the normalized path: percent-encoding canonical, dot segments resolved,
	// never empty, case kept. An endpoint `key` template replaces it.
	Path string
	// Params are the kept query parameters, sorted by name then value; duplicates kept.
	Params []Param
	// Body is the normalized body: canonical JSON, sorted form fields, "sha256:<hex>" of
	// other bodies, "" when there is none.
	Body string
}

// String renders the key on one line:
//
//	METHOD host/path[?name=value&...][ #body:BODY]
//
// e.g. "GET www.amazon.com/s?k=airpods pro" or
// "POST shop.test/cart/add #body:{\"ASIN\":\"B0TEST\",\"quantity\":\"1\"}".
//
// Parameter names and values are shown decoded, so a space is a space and "+" is a plus
// sign. To keep the line unambiguous these bytes are percent-encoded in them: '%', '&', '#',
// '=' (in names only), bytes that are not valid UTF-8 and characters that are not printable
// (controls, line breaks; a plain space stays). A parameter with no value is shown "name=".
// The host is shown as in Key.Host with the same treatment of unsafe bytes plus '/', '?',
// '@' and space. The path is already percent-encoded. A form body is shown like the query.
func (k Key) String() string {
	n := len(k.Method) + len(k.Host) + len(k.Path) + len(k.Body) + 16
	for _, p := range k.Params {
		n += len(p.Name) + len(p.Value) + 2
	}
	var b strings.Builder
	b.Grow(n)
	k.writeBase(&b)
	for i, p := range k.Params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		writeParam(&b, p)
	}
	if k.Body != "" {
		b.WriteString(" #body:")
		b.WriteString(k.Body)
	}
	return b.String()
}

// Base is the method, host and path of the key ("GET www.amazon.com/s"): requests with the
// same Base are candidates for a fuzzy match.
func (k Key) Base() string {
	var b strings.Builder
	b.Grow(len(k.Method) + len(k.Host) + len(k.Path) + 1)
	k.writeBase(&b)
	return b.String()
}

func (k Key) writeBase(b *strings.Builder) {
	writeEscaped(b, k.Method, &escMethod)
	b.WriteByte(' ')
	writeEscaped(b, k.Host, &escHost)
	writeEscaped(b, k.Path, &escPath)
}

func writeParam(b *strings.Builder, p Param) {
	writeEscaped(b, p.Name, &escName)
	b.WriteByte('=')
	writeEscaped(b, p.Value, &escValue)
}

const upperHex = "0123456789ABCDEF"

// escapeSet marks the ASCII bytes writeEscaped shows as themselves: printable ASCII
// (space included) except the special bytes it was built from.
type escapeSet [utf8.RuneSelf]bool

func newEscapeSet(special string) (t escapeSet) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = strings.IndexByte(special, byte(c)) < 0
	}
	return t
}

// The bytes each part of a key escapes besides controls (see Key.String).
var (
	escMethod = newEscapeSet(" %")
	escHost   = newEscapeSet("%/?#@ ")
	escPath   = newEscapeSet(" #?")
	escName   = newEscapeSet("%&#=")
	escValue  = newEscapeSet("%&#")
)

// writeEscaped writes s, percent-encoding the ASCII bytes that plain does not mark,
// invalid UTF-8 and runes that are not printable.
func writeEscaped(b *strings.Builder, s string, plain *escapeSet) {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b.WriteString(s[start:i])
			pctByte(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError && unicode.IsPrint(r) {
			i += size
			continue
		}
		b.WriteString(s[start:i])
		for j := 0; j < size; j++ {
			pctByte(b, s[i+j])
		}
		i += size
		start = i
	}
	b.WriteString(s[start:])
}

func pctByte(b *strings.Builder, c byte) {
	b.WriteByte('%')
	b.WriteByte(upperHex[c>>4])
	b.WriteByte(upperHex[c&15])
}

// normMethod upper-cases the method; an empty method is GET.
func normMethod(m string) string {
	if m == "" {
		return "GET"
	}
	for i := 0; i < len(m); i++ {
		if 'a' <= m[i] && m[i] <= 'z' {
			return strings.ToUpper(m)
		}
	}
	return m
}

// normHost returns the key's host (see Key.Host) and the host name alone (no port).
func normHost(h string) (hostPort, hostname string) {
	if h == "" {
		return "", ""
	}
	if hasUpper(h) {
		h = strings.ToLower(h)
	}
	name, port := h, ""
	if strings.HasPrefix(h, "[") { // IPv6 literal: the port follows "]:"
		if i := strings.LastIndex(h, "]:"); i >= 0 {
			name, port = h[:i+1], h[i+2:]
		}
	} else if i := strings.IndexByte(h, ':'); i >= 0 && strings.Count(h, ":") == 1 {
		name, port = h[:i], h[i+1:]
	}
	if strings.HasSuffix(name, ".") && !strings.HasPrefix(name, "[") {
		name = strings.TrimRight(name, ".")
	}
	if !isASCII(name) {
		// An internationalized name: the A-label form browsers send (ASCIIHost), then
		// the trailing dot its mapping may have made ("bücher。" is "xn--bcher-kva.").
		name = strings.TrimRight(ASCIIHost(name), ".")
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err == nil && n >= 0 && allDigits(port) {
			if n == 80 || n == 443 {
				port = ""
			} else {
				port = strconv.Itoa(n)
			}
		}
	}
	if port == "" {
		return name, name
	}
	return name + ":" + port, name
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// pathSafe reports the bytes a normalized path shows as themselves: RFC 3986 unreserved
// characters, sub-delims, ':', '@' and '/'. Every other byte is percent-encoded.
var pathSafe = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~!$&'()*+,;=:@/" {
		t[c] = true
	}
	return t
}()

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// urlPath returns the escaped path of u as sent.
func urlPath(u *url.URL) string {
	if u == nil {
		return "/"
	}
	if u.Opaque != "" {
		return u.Opaque
	}
	return u.EscapedPath()
}

// normPath normalizes an escaped path:
//   - every %XX is decoded except %2F (an encoded slash is not a separator), then every byte
//     outside pathSafe is encoded again with upper-case hex, so "%7e", "~" and "%7E" are
//     one path and "a b", "a%20b" are one path; a '%' not followed by two hex digits is
//     taken literally (encoded as %25);
//   - dot segments are resolved (RFC 3986 section 5.2.4), after decoding, so %2E%2E is "..";
//   - an empty path is "/", a path not starting with '/' gets one; case is kept, and
//     repeated slashes and a trailing slash stay as they are.
func normPath(p string) string {
	if p == "" {
		return "/"
	}
	if !pathIsCanonical(p) {
		var b strings.Builder
		b.Grow(len(p) + 8)
		if p[0] != '/' {
			b.WriteByte('/')
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if c == '%' && i+2 < len(p) {
				hi, ok1 := unhex(p[i+1])
				lo, ok2 := unhex(p[i+2])
				if ok1 && ok2 {
					d := hi<<4 | lo
					i += 2
					if d == '/' || !pathSafe[d] {
						pctByte(&b, d)
					} else {
						b.WriteByte(d)
					}
					continue
				}
			}
			if pathSafe[c] {
				b.WriteByte(c)
			} else {
				pctByte(&b, c)
			}
		}
		p = b.String()
	}
	if hasDotSegment(p) {
		p = removeDotSegments(p)
	}
	return p
}

// pathIsCanonical reports whether p starts with '/' and has only pathSafe bytes.
func pathIsCanonical(p string) bool {
	if p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if !pathSafe[p[i]] {
			return false
		}
	}
	return true
}

func hasDotSegment(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '.' || (i > 0 && p[i-1] != '/') {
			continue
		}
		j := i + 1
		if j < len(p) && p[j] == '.' {
			j++
		}
		if j == len(p) || p[j] == '/' {
			return true
		}
	}
	return false
}

// removeDotSegments resolves "." and ".." in a path that starts with '/'. A ".." above the
// root is dropped; a path ending in a dot segment ends in '/'.
func removeDotSegments(p string) string {
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

// parseParams splits a query string or a form body into parameters the way the WHATWG URL
// standard's application/x-www-form-urlencoded parser does: split on '&' (not ';'), skip
// empty pieces, cut at the first '=', read '+' as a space, decode %XX (a '%' without two hex
// digits stays as it is). Bytes that are not UTF-8 are kept.
func parseParams(q string, keep func(name string) bool) []Param {
	if q == "" {
		return nil
	}
	n := strings.Count(q, "&") + 1
	out := make([]Param, 0, n)
	for q != "" {
		var piece string
		piece, q, _ = strings.Cut(q, "&")
		if piece == "" {
			continue
		}
		name, value, _ := strings.Cut(piece, "=")
		name = formDecode(name)
		if keep != nil && !keep(name) {
			continue
		}
		out = append(out, Param{Name: name, Value: formDecode(value)})
	}
	return out
}

func formDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s):
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b = append(b, hi<<4|lo)
				i += 2
			} else {
				b = append(b, c)
			}
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func sortParams(ps []Param) {
	slices.SortStableFunc(ps, func(a, b Param) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Value, b.Value)
	})
}
