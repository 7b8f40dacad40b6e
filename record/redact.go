package record

import (
	"bytes"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces every redacted value.
const Redacted = "REDACTED"

// Redactor removes personal data from what is stored: each literal value or regular
// expression match is replaced by Redacted. It is safe for concurrent use.
type Redactor struct {
	lits [][]byte
	res  []*regexp.Regexp
}

// NewRedactor compiles redaction specs. A spec starting with "re:" is a Go regular
// expression (RE2 syntax, https://pkg.go.dev/regexp/syntax), e.g. `re:\d{3}-\d{2}-\d{4}`;
// any other spec is a literal value, also matched in its URL query-escaped,
// path-escaped and HTML-escaped forms. An empty spec, or a regular expression that does
// not compile or matches the empty string, is an error naming the spec.
func NewRedactor(specs []string) (*Redactor, error) {
	r := &Redactor{}
	for _, s := range specs {
		if expr, ok := strings.CutPrefix(s, "re:"); ok {
			re, err := regexp.Compile(expr)
			if err != nil {
				return nil, fmt.Errorf("redact %q: %w", s, err)
			}
			if re.MatchString("") {
				return nil, fmt.Errorf("redact %q: the expression matches the empty string", s)
			}
			r.res = append(r.res, re)
			continue
		}
		if s == "" {
			return nil, fmt.Errorf("redact: empty value")
		}
		for _, v := range []string{s, url.QueryEscape(s), url.PathEscape(s), html.EscapeString(s)} {
			if !slices.ContainsFunc(r.lits, func(b []byte) bool { return string(b) == v }) {
				r.lits = append(r.lits, []byte(v))
			}
		}
	}
	// longer values first, so a value that contains another is replaced whole
	slices.SortStableFunc(r.lits, func(a, b []byte) int { return len(b) - len(a) })
	return r, nil
}

// Empty reports whether the redactor removes nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.lits)+len(r.res) == 0 }

// Bytes returns b with every literal and match replaced by Redacted; b itself is not
// changed. It returns b when there is nothing to replace.
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() || len(b) == 0 {
		return b
	}
	out := b
	for _, l := range r.lits {
		if bytes.Contains(out, l) {
			out = bytes.ReplaceAll(out, l, []byte(Redacted))
		}
	}
	for _, re := range r.res {
		if re.Match(out) {
			out = re.ReplaceAllLiteral(out, []byte(Redacted))
		}
	}
	return out
}

// String is Bytes for a string.
func (r *Redactor) String(s string) string {
	if r.Empty() || s == "" {
		return s
	}
	return string(r.Bytes([]byte(s)))
}
