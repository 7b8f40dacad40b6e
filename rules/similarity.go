package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/internal/jsonx"
)

// DefaultSimilarity is the least word-set similarity of a search when the endpoint sets no
// `similarity`.
const DefaultSimilarity = 0.6

// MaxTextLen bounds, in bytes, the part of a free text (search query, promo code) that
// ParseText reads; the rest is ignored.
const MaxTextLen = 4096

// Text is a free text prepared for word-set matching (ParseText). The zero Text has no
// words.
type Text struct {
	// Raw is the text as given (at most MaxTextLen bytes).
	Raw string
	// Seq are the words in the order written, lower-case, repeats kept.
	Seq []string
	// Set are the distinct words, sorted by byte order.
	Set []string
	// Open is true when the text ends inside a word (its last byte is part of a word): the
	// last word may be unfinished, as in a search box's suggestion request ("airp").
	Open bool
}

// isWordRune reports whether r belongs to a word: letters, digits and other numbers, and
// combining marks (so "é" written as e + U+0301 stays one word).
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r)
}

// ParseText splits s into words: maximal runs of letters, numbers and combining marks,
// lower-cased (Unicode simple case mapping, strings.ToLower). Everything else (spaces,
// punctuation, symbols) separates words and is dropped, so case, punctuation and word
// order do not change Text.Set. Bytes that are not UTF-8 separate words.
func ParseText(s string) Text {
	if len(s) > MaxTextLen {
		s = s[:MaxTextLen]
	}
	t := Text{Raw: s}
	start := -1
	for i, r := range s {
		word := r != utf8.RuneError && isWordRune(r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			t.Seq = append(t.Seq, strings.ToLower(s[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		t.Seq = append(t.Seq, strings.ToLower(s[start:]))
		t.Open = true
	}
	if len(t.Seq) > 0 {
		t.Set = append([]string(nil), t.Seq...)
		sort.Strings(t.Set)
		n := 1
		for _, w := range t.Set[1:] {
			if w != t.Set[n-1] {
				t.Set[n] = w
				n++
			}
		}
		t.Set = t.Set[:n]
	}
	return t
}

// Empty reports whether t has no words.
func (t Text) Empty() bool { return len(t.Seq) == 0 }

// Norm is the words of t in order, joined by one space ("AirPods  Pro!" → "airpods pro").
func (t Text) Norm() string { return strings.Join(t.Seq, " ") }

func hasWord(sorted []string, w string) bool {
	i := sort.SearchStrings(sorted, w)
	return i < len(sorted) && sorted[i] == w
}

// Completion returns the word of r that finishes q's last word, or "": when q is Open and
// its last word p is not a word of r, the shortest word of r that is not in q and starts
// with p (ties: the first in byte order). "airp" is completed by "airpods".
func (q Text) Completion(r Text) string {
	if !q.Open || len(q.Seq) == 0 {
		return ""
	}
	p := q.Seq[len(q.Seq)-1]
	if hasWord(r.Set, p) {
		return ""
	}
	best := ""
	for i := sort.SearchStrings(r.Set, p); i < len(r.Set) && strings.HasPrefix(r.Set[i], p); i++ {
		w := r.Set[i]
		if w == p || hasWord(q.Set, w) {
			continue
		}
		if best == "" || len(w) < len(best) { // r.Set is sorted: the first of a length wins
			best = w
		}
	}
	return best
}

// Similarity is the word-set similarity of a request's text q to a recorded text r, from 0
// to 1: the Jaccard index |Q ∩ R| / |Q ∪ R| of their word sets (Text.Set), where Q is q's
// set with its last word replaced by its completion in r (Text.Completion) when it has
// one. "pro airpods" and "AirPods Pro" have similarity 1; "airpods pro" and "airpods pro
// case" 2/3; "airp" and "airpods" 1. Either text without words gives 0.
func Similarity(q, r Text) float64 {
	inter, union := overlap(q, r)
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

// overlap returns |Q ∩ R| and |Q ∪ R| as Similarity defines them.
func overlap(q, r Text) (inter, union int) {
	if len(q.Set) == 0 || len(r.Set) == 0 {
		return 0, 0
	}
	i, j := 0, 0
	for i < len(q.Set) && j < len(r.Set) {
		switch c := strings.Compare(q.Set[i], r.Set[j]); {
		case c == 0:
			inter++
			i++
			j++
		case c < 0:
			i++
		default:
			j++
		}
	}
	if q.Completion(r) != "" {
		inter++ // the unfinished word is replaced by a word of r that q did not have
	}
	return inter, len(q.Set) + len(r.Set) - inter
}

// Reaches reports whether a similarity reaches the least similarity min, allowing for
// rounding (1e-9): 3 of 5 words reaches 0.6.
func Reaches(sim, min float64) bool { return sim >= min-1e-9 }

// IsPrefix reports whether q is a prefix of r in the way a search box's suggestion request
// is a prefix of the query finally typed: q has words, r has at least as many, the words of
// q equal the first words of r in order, except that when q is Open its last word need only
// be a prefix of the corresponding word of r. "airp" and "airpods p" are prefixes of
// "AirPods Pro"; "airpods " (not open) is a prefix of "airpods pro" but not of
// "airpodsx"; "pro airp" is not a prefix of "airpods pro" (order counts here).
func IsPrefix(q, r Text) bool {
	n := len(q.Seq)
	if n == 0 || n > len(r.Seq) {
		return false
	}
	for i := 0; i < n-1; i++ {
		if q.Seq[i] != r.Seq[i] {
			return false
		}
	}
	if q.Open {
		return strings.HasPrefix(r.Seq[n-1], q.Seq[n-1])
	}
	return q.Seq[n-1] == r.Seq[n-1]
}

// NormCode normalizes a promo code for comparison: surrounding white space removed,
// letters lower-cased (codes are compared without regard to case: "save10" is "SAVE10").
func NormCode(s string) string {
	if len(s) > MaxTextLen {
		s = s[:MaxTextLen]
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// RequestText returns the value of the parameter name in r, exactly as named (case
// counts): the first query parameter of that name ('+' read as a space, %XX decoded), else
// the first form field of that name of an application/x-www-form-urlencoded body, else
// the first member of that name, at any depth in document order, of a JSON body whose
// value is a string or a number (written as in the body). ok is false when there is none;
// bodies over MaxStructuredBody, deeper than MaxJSONDepth or not valid JSON give none.
func RequestText(r Request, name string) (value string, ok bool) {
	if name == "" {
		return "", false
	}
	if r.URL != nil {
		if v, ok := formValue(r.URL.RawQuery, name); ok {
			return v, true
		}
	}
	if len(r.Body) == 0 || len(r.Body) > MaxStructuredBody {
		return "", false
	}
	mt := httpx.MediaType(r.ContentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		return formValue(string(r.Body), name)
	case strings.HasPrefix(mt, "multipart/"):
		return "", false
	case isJSONType(mt) || looksLikeJSON(r.Body):
		return jsonMember(r.Body, name)
	}
	return "", false
}

// formValue finds the first field called name in a query string or form body.
func formValue(q, name string) (string, bool) {
	for q != "" {
		var piece string
		piece, q, _ = strings.Cut(q, "&")
		n, v, _ := strings.Cut(piece, "=")
		if formDecode(n) == name {
			return formDecode(v), true
		}
	}
	return "", false
}

// jsonMember finds the first object member called name whose value is a string or a
// number, at any depth, in document order.
func jsonMember(body []byte, name string) (string, bool) {
	if jsonx.Depth(body, MaxJSONDepth+1) > MaxJSONDepth {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct{ obj, wantKey bool }
	var stack []frame
	capture := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return "", false
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				stack = append(stack, frame{obj: d == '{', wantKey: d == '{'})
			default:
				stack = stack[:top]
				if top > 0 && stack[top-1].obj {
					stack[top-1].wantKey = true
				}
			}
			capture = false
			continue
		}
		if top >= 0 && stack[top].obj && stack[top].wantKey {
			k, _ := tok.(string)
			capture = k == name
			stack[top].wantKey = false
			continue
		}
		if capture {
			switch v := tok.(type) {
			case string:
				return v, true
			case json.Number:
				return v.String(), true
			}
			capture = false
		}
		if top >= 0 && stack[top].obj {
			stack[top].wantKey = true
		}
	}
}
