package replay

import (
	"net/http"
	"strings"
)

// revalidate.go: conditional requests (RFC 9110 section 13). A browser that visits a page a
// second time sends the validators of its cached copy (If-None-Match with the ETag,
// If-Modified-Since with the Last-Modified it was given); when they match the recorded
// answer, replay answers 304 Not Modified with no body, as the site did.

// Bounds on what is read of a conditional request's fields.
const (
	maxConditionBytes = 8 << 10 // the If-None-Match field values together
	maxConditionTags  = 64      // entity-tags in If-None-Match
)

// notModifiedFields are the recorded fields a 304 keeps (RFC 9110 section 15.4.5: those a
// 200 would carry among Content-Location, Date, ETag, Vary, Cache-Control and Expires; and
// Last-Modified, which guides cache updates), plus the CORS fields, so that a page's own
// conditional fetch still passes the CORS check. Everything else (Content-Type,
// Content-Security-Policy, Set-Cookie, ...) stays as the client's cached copy has it.
var notModifiedFields = []string{
	"Cache-Control", "Content-Location", "Date", "Etag", "Expires", "Last-Modified", "Vary",
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers",
}

// revalidate turns a, the recorded answer to r, into a 304 Not Modified when r's
// preconditions say the client's cached copy is current, and reports whether it did. The
// rules of RFC 9110 sections 13.1.2, 13.1.3 and 13.2.2, for GET and HEAD only (other methods
// are answered as recorded), and only when the recorded status is 2xx (section 13.1:
// preconditions are ignored for any other answer):
//
//   - If-None-Match, when present, decides alone: "*" matches any recorded answer, and a
//     list of entity-tags matches when one of them equals the recorded ETag by weak
//     comparison (W/ ignored on both sides, section 8.8.3.2). An ETag recorded without its
//     quotes is compared as written.
//   - Otherwise If-Modified-Since, one valid HTTP-date, matches when the recorded
//     Last-Modified (a valid HTTP-date) is no later than it, compared in whole seconds.
//
// The 304 keeps only notModifiedFields, has no body and no Content-Length, and a note for
// the log; its source stays the lookup's.
func revalidate(r *http.Request, a *answer) bool {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || a.status < 200 || a.status > 299 {
		return false
	}
	var why string
	if inm, ok := r.Header["If-None-Match"]; ok {
		if !noneMatchMatches(inm, a.header.Values("Etag")) {
			return false
		}
		why = "304: If-None-Match matches the recorded ETag"
	} else {
		ims := r.Header["If-Modified-Since"]
		if len(ims) != 1 || !notModifiedSince(ims[0], a.header.Values("Last-Modified")) {
			return false
		}
		why = "304: not modified since If-Modified-Since"
	}
	h := make(http.Header, len(notModifiedFields))
	for _, f := range notModifiedFields {
		if vs := a.header.Values(f); len(vs) > 0 {
			h[f] = vs
		}
	}
	a.status, a.header, a.fields, a.body, a.size = http.StatusNotModified, h, nil, nil, 0
	a.note = joinNote(a.note, why)
	return true
}

// noneMatchMatches evaluates If-None-Match field values against the recorded ETag values:
// true when the field is "*" or lists a tag that weakly matches the (single) recorded ETag.
func noneMatchMatches(field, recorded []string) bool {
	total := 0
	for _, v := range field {
		if total += len(v); total > maxConditionBytes {
			return false
		}
	}
	value := strings.TrimSpace(strings.Join(field, ","))
	if value == "*" {
		return true
	}
	if len(recorded) != 1 {
		return false
	}
	rec, ok := parseETags(recorded[0], 1)
	if !ok || len(rec) != 1 {
		return false
	}
	tags, ok := parseETags(value, maxConditionTags)
	if !ok {
		return false
	}
	for _, t := range tags {
		if t.matches(rec[0], true) {
			return true
		}
	}
	return false
}

// entityTag is an entity-tag (RFC 9110 section 8.8.3): opaque is the quoted string with its
// quotes, or an unquoted token as written (some servers send those; browsers echo them).
type entityTag struct {
	weak   bool
	opaque string
}

// matches compares two entity-tags: weak comparison when weak is set (the opaque tags are
// equal, W/ ignored), else strong (neither is weak and the opaque tags are equal);
// RFC 9110 section 8.8.3.2.
func (t entityTag) matches(o entityTag, weak bool) bool {
	if !weak && (t.weak || o.weak) {
		return false
	}
	return t.opaque == o.opaque
}

// parseETags reads a comma-separated list of at most max entity-tags, with optional
// white space and empty elements (RFC 9110 section 5.6.1). ok is false for a list it cannot
// read or one that is too long.
func parseETags(s string, max int) (tags []entityTag, ok bool) {
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i == len(s) {
			return tags, true
		}
		if len(tags) == max {
			return nil, false
		}
		var t entityTag
		if strings.HasPrefix(s[i:], "W/") {
			t.weak = true
			i += 2
		}
		start := i
		if i < len(s) && s[i] == '"' {
			end := strings.IndexByte(s[i+1:], '"')
			if end < 0 {
				return nil, false
			}
			i += end + 2
		} else {
			for i < len(s) && s[i] != ',' && s[i] != ' ' && s[i] != '\t' && s[i] != '"' {
				i++
			}
		}
		t.opaque = s[start:i]
		if t.opaque == "" || !etagBytes(t.opaque) {
			return nil, false
		}
		tags = append(tags, t)
		if i < len(s) && s[i] != ',' && s[i] != ' ' && s[i] != '\t' {
			return nil, false // junk right after a tag
		}
	}
}

// etagBytes reports an opaque tag of visible characters (etagc: 0x21 to 0x7E and obs-text,
// plus the enclosing quotes).
func etagBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// notModifiedSince reports whether the recorded Last-Modified (one valid HTTP-date) is no
// later than the If-Modified-Since date, at second precision (RFC 9110 section 13.1.3). An
// invalid or missing date on either side means "modified".
func notModifiedSince(since string, lastModified []string) bool {
	if len(lastModified) != 1 || len(since) > 64 {
		return false
	}
	ims, err := http.ParseTime(strings.TrimSpace(since))
	if err != nil {
		return false
	}
	lm, err := http.ParseTime(strings.TrimSpace(lastModified[0]))
	if err != nil {
		return false
	}
	return lm.Unix() <= ims.Unix()
}
