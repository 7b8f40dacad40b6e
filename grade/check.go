package grade

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pab-dev/pab/recording"
)

// maxSourceBody bounds the recorded response read to look for a source text, in bytes.
const maxSourceBody = 32 << 20

// SourceProblem is a require source that the recording does not back.
type SourceProblem struct {
	// Path and Line locate the source in grading.yaml.
	Path string
	Line int
	// Field is the require's field.
	Field string
	// Problem says what is wrong.
	Problem string
}

// String formats the problem as "path:line: require on FIELD: problem".
func (p SourceProblem) String() string {
	return fmt.Sprintf("%s:%d: require on %s: %s", p.Path, p.Line, p.Field, p.Problem)
}

// CheckSources checks every require source of g against the recording b: some recorded
// response for the source URL (scheme and fragment ignored) must hold the source text,
// looked for in the decoded payload as stored, in its visible text when it is HTML (entities
// decoded; case, spacing and Unicode forms ignored), and in its JSON string escapes undone
// (for values page scripts fill in). It returns one problem per failed source.
func CheckSources(g *Grading, b *recording.Bundle) []SourceProblem {
	var probs []SourceProblem
	for _, q := range g.Require {
		if q.Evidence == nil {
			continue
		}
		bad := func(format string, args ...any) {
			probs = append(probs, SourceProblem{Path: g.Path, Line: q.Evidence.Line, Field: q.Field, Problem: fmt.Sprintf(format, args...)})
		}
		want := sameURL(q.Evidence.URL)
		var found []*recording.Entry
		for i := range b.Len() {
			e := b.Entry(i)
			if sameURL(e.URL) == want {
				found = append(found, e)
			}
		}
		if len(found) == 0 {
			bad("evidence url %s is not in the recording%s", q.Evidence.URL, nearURLs(b, q.Evidence.URL))
			continue
		}
		var errs []string
		ok := false
		for _, e := range found {
			has, err := responseHolds(b, e, q.Evidence.Text)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", e.ID, err))
				continue
			}
			if has {
				ok = true
				break
			}
		}
		if !ok {
			msg := fmt.Sprintf("the recorded response for %s (%d exchange(s), status %d) does not hold the text %q", q.Evidence.URL, len(found), found[0].Status, q.Evidence.Text)
			if len(errs) > 0 {
				msg += " (" + strings.Join(errs, "; ") + ")"
			}
			bad("%s", msg)
		}
	}
	return probs
}

// sameURL reduces a URL to what a source is compared by: no scheme, no fragment.
func sameURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexByte(u, '#'); i >= 0 {
		u = u[:i]
	}
	host, path, _ := strings.Cut(u, "/")
	return strings.ToLower(host) + "/" + path
}

// nearURLs suggests recorded URLs on the same host whose path starts like the source's.
func nearURLs(b *recording.Bundle, u string) string {
	want := sameURL(u)
	host, _, _ := strings.Cut(want, "/")
	var near []string
	for i := range b.Len() {
		e := *b.Entry(i)
		s := sameURL(e.URL)
		if strings.HasPrefix(s, host+"/") && e.Method == "GET" && (e.ResourceType == "document" || strings.HasPrefix(e.Mime, "text/html")) {
			near = append(near, e.URL)
			if len(near) == 3 {
				break
			}
		}
	}
	if len(near) == 0 {
		return ""
	}
	return "; pages recorded on that host include " + strings.Join(near, ", ")
}

// responseHolds reports whether the recorded response of e holds text.
func responseHolds(b *recording.Bundle, e *recording.Entry, text string) (bool, error) {
	resp, err := b.Response(e)
	if err != nil {
		return false, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSourceBody))
	if err != nil {
		return false, err
	}
	return BodyHolds(body, resp.Header.Get("Content-Type"), text), nil
}

// BodyHolds reports whether a decoded response body holds text: as bytes, in the visible
// text of HTML, or inside JSON strings (after undoing \uXXXX, \/ and \" escapes); the last
// two compare after NormText.
func BodyHolds(body []byte, contentType, text string) bool {
	if strings.Contains(string(body), text) {
		return true
	}
	want := NormText(text)
	if want == "" {
		return false
	}
	s := string(body)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.Contains(NormText(s), want) {
		return true
	}
	ct := strings.ToLower(contentType)
	if strings.Contains(ct, "html") || looksLikeHTML(s) || strings.Contains(strings.ToLower(s[:min(len(s), 1024)]), "<html") {
		if strings.Contains(NormText(htmlText(s)), want) {
			return true
		}
	}
	return strings.Contains(NormText(jsonUnescape(s)), want)
}

var jsonEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}|\\[/"\\nrt]`)

// jsonUnescape undoes JSON string escapes wherever they appear in s.
func jsonUnescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return jsonEscape.ReplaceAllStringFunc(s, func(m string) string {
		switch m {
		case `\/`:
			return "/"
		case `\"`:
			return `"`
		case `\\`:
			return `\`
		case `\n`:
			return "\n"
		case `\r`:
			return "\r"
		case `\t`:
			return "\t"
		}
		n, err := strconv.ParseUint(m[2:], 16, 32)
		if err != nil {
			return m
		}
		r := rune(n)
		if !utf8.ValidRune(r) {
			return "\uFFFD"
		}
		return string(r)
	})
}
