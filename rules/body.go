package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/internal/jsonx"
)

const (
	// MaxStructuredBody is the largest body, in bytes, parsed as JSON or as a form; larger
	// bodies are keyed by digest.
	MaxStructuredBody = 4 << 20
	// MaxJSONDepth is the deepest nesting of JSON arrays and objects parsed; deeper bodies
	// are keyed by digest.
	MaxJSONDepth = 64
)

// bodyFilter decides which body fields count: drop patterns (body_drop, at any depth) and,
// when keep is non-nil, an allow-list of top-level field names (body_keep).
type bodyFilter struct {
	drop []*nameMatcher // compiled body_drop lists, one per rule source
	keep []string
}

func (f *bodyFilter) dropped(name string) bool {
	for _, d := range f.drop {
		if d.match(name) {
			return true
		}
	}
	return false
}

func (f *bodyFilter) kept(name string, top bool) bool {
	if top && f.keep != nil && !matchAnyName(f.keep, name) {
		return false
	}
	return !f.dropped(name)
}

func (f *bodyFilter) empty() bool {
	return len(f.drop) == 0 && f.keep == nil
}

func isJSONType(mt string) bool {
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

// normBody returns the key's body:
//   - "" for an empty body;
//   - application/x-www-form-urlencoded: the fields, filtered and sorted like query
//     parameters, rendered "a=1&b=x y" (see Key.String);
//   - multipart/form-data: "multipart:" and its parts in order, whatever the boundary
//     (multipartBody); a malformed body is digested;
//   - JSON (a JSON media type, or any other type except forms and multipart when the body
//     starts with '{' or '['): canonical JSON, compact, object keys sorted, numbers as
//     written, fields filtered; a body that is not valid JSON is digested;
//   - anything else (other multipart types, binary, text, bodies over MaxStructuredBody or
//     deeper than MaxJSONDepth): "sha256:" and the lower-case hex SHA-256 of the bytes.
func normBody(body []byte, contentType string, f *bodyFilter) string {
	if len(body) == 0 {
		return ""
	}
	if len(body) <= MaxStructuredBody {
		mt := httpx.MediaType(contentType)
		switch {
		case mt == "application/x-www-form-urlencoded":
			return formBody(body, f)
		case mt == "multipart/form-data":
			if s, ok := multipartBody(body, contentType, f); ok {
				return s
			}
		case strings.HasPrefix(mt, "multipart/"):
		case isJSONType(mt) || looksLikeJSON(body):
			if s, ok := canonicalJSON(body, f); ok {
				return s
			}
		}
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func looksLikeJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

func formBody(body []byte, f *bodyFilter) string {
	var keep func(string) bool
	if !f.empty() {
		keep = func(name string) bool { return f.kept(name, true) }
	}
	ps := parseParams(string(body), keep)
	sortParams(ps)
	var b strings.Builder
	b.Grow(len(body))
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		writeParam(&b, p)
	}
	return b.String()
}

// canonicalJSON parses body as one JSON value and writes it back canonically. It reports
// false when body is not a single valid JSON value or is nested deeper than MaxJSONDepth.
func canonicalJSON(body []byte, f *bodyFilter) (string, bool) {
	if jsonx.Depth(body, MaxJSONDepth) > MaxJSONDepth {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(body))
	writeJSON(&b, v, f, true)
	return b.String(), true
}

func writeJSON(b *strings.Builder, v any, f *bodyFilter, top bool) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(string(x))
	case string:
		writeJSONString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e, f, false)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			if f.kept(k, top) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			writeJSON(b, x[k], f, false)
		}
		b.WriteByte('}')
	}
}

// writeJSONString writes s as a JSON string: '"' and '\\' escaped, control characters and
// U+2028, U+2029 as \uXXXX (\n, \r, \t short forms), everything else as UTF-8. Strings from
// the decoder are valid UTF-8 (invalid bytes became U+FFFD).
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			b.WriteString(s[start:i])
			b.WriteString(`\u202`)
			b.WriteByte(upperHex[r&15])
			i += size
			start = i
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		}
		i++
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}
