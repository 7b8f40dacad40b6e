package guard

import (
	"regexp"
	"strings"
	"unicode"
)

// Grounding modes (grounding.mode of the application file).
const (
	GroundingLenient = "lenient" // a weak fill is typed and traced basis "weak" (default under fill_and_review)
	GroundingStrict  = "strict"  // a weak fill is asked of the owner first (default under auto_submit)
)

// WholeValue is one whole value of the owner's sources, the unit a typed value must come
// from: the value side of a "key: value" line or sentence, a line or sentence without a key,
// a whole answer, a whole material. Key is the label it stands under (the line's key, the
// answer's question), "" when it has none. Source is the index of the GroundingSource it
// was read from.
type WholeValue struct {
	Kind    string
	Key     string
	Text    string
	Context string // the line, sentence or answer Text is the value of (Text itself when it has no key)
	Source  int
	// Exact: only Text itself grounds, never a span of it (a whole material: its words
	// include its own labels, "Email" of "Email: ...", which are never values).
	Exact bool
}

// sentenceEndRe ends a sentence: . ! ? (or their CJK forms) and then space or the end.
var sentenceEndRe = regexp.MustCompile(`[.!?。！？](\s+|$)`)

// keyLineRe splits "key: value": a key of at most 60 characters without '.', ':' or a
// line break, then ": " (or a full-width colon) and the value.
var keyLineRe = regexp.MustCompile(`^([^.:\n：]{1,60})(?:: |：\s*)(\S.*)$`)

// splitKey returns the key and value of "key: value", or "" and s.
func splitKey(s string) (key, value string) {
	if m := keyLineRe.FindStringSubmatch(s); m != nil {
		return strings.TrimSpace(m[1]), strings.TrimSpace(m[2])
	}
	return "", strings.TrimSpace(s)
}

// sentences splits a line into its sentences (trimmed, end punctuation kept).
func sentences(line string) []string {
	var out []string
	rest := line
	for rest != "" {
		loc := sentenceEndRe.FindStringIndex(rest)
		if loc == nil {
			out = append(out, strings.TrimSpace(rest))
			break
		}
		end := loc[0] + len(string([]rune(rest[loc[0]:])[0]))
		out = append(out, strings.TrimSpace(rest[:end]))
		rest = rest[loc[1]:]
	}
	var kept []string
	for _, s := range out {
		if s != "" {
			kept = append(kept, s)
		}
	}
	return kept
}

// WholeValues lists the whole values of sources (GroundingSources of the application plus
// the owner's answers): for the profile and materials, every line's sentences (the value
// side when a sentence is "key: value", else the sentence), and a line with several
// sentences none of which has a key as a whole; for a material also the whole material; an
// answer (SourceAnswer sources of the form "question\nanswer" give the question as Key) and
// an owner's answer as a whole.
func WholeValues(sources []GroundingSource) []WholeValue {
	var out []WholeValue
	add := func(i int, kind, key, text, ctx string) {
		text = strings.TrimSpace(text)
		if text != "" {
			out = append(out, WholeValue{Kind: kind, Key: key, Text: text, Context: strings.TrimSpace(ctx), Source: i})
		}
	}
	for i, s := range sources {
		switch s.Kind {
		case SourceAnswer, SourceOwnerAnswer:
			if q, a, ok := strings.Cut(s.Text, "\n"); ok && s.Kind == SourceAnswer {
				add(i, s.Kind, strings.TrimSpace(q), a, a)
			} else {
				add(i, s.Kind, "", s.Text, s.Text)
			}
			continue
		}
		if s.Kind == SourceMaterial {
			add(i, s.Kind, "", s.Text, s.Text)
			if n := len(out); n > 0 && out[n-1].Source == i {
				out[n-1].Exact = true
			}
		}
		for _, line := range strings.Split(s.Text, "\n") {
			ss := sentences(line)
			keyed := false
			for _, sen := range ss {
				k, v := splitKey(sen)
				if k != "" {
					keyed = true
				}
				add(i, s.Kind, k, v, sen)
			}
			if len(ss) > 1 && !keyed {
				add(i, s.Kind, "", line, line)
			}
		}
	}
	return out
}

// atomicRe finds the tokens a value may not cut into: URLs, email addresses, phone numbers.
var atomicRe = regexp.MustCompile(`(?i)(?:https?://|www\.)[^\s<>"']+|[\p{L}\p{N}._%+-]+@[\p{L}\p{N}.-]+\.\p{L}{2,}|\+?\(?\d[\d ().-]{5,}\d`)

// runRe finds word runs joined by identifier punctuation ("150,000", "A-123", "v2.1").
var runRe = regexp.MustCompile(`[\p{L}\p{N}\p{M}](?:[\p{L}\p{N}\p{M}._,/#'’-]*[\p{L}\p{N}\p{M}])?`)

// tokens returns the byte ranges of the tokens of v: URLs, emails and phone numbers whole;
// runs holding a digit (amounts, ids) whole; other runs split into words (letters, digits,
// marks), each Chinese, Japanese or Korean character a token of its own.
func tokens(v string) [][2]int {
	var out [][2]int
	words := func(from, to int) {
		for _, m := range runRe.FindAllStringIndex(v[from:to], -1) {
			a, b := from+m[0], from+m[1]
			run := v[a:b]
			if strings.IndexFunc(run, unicode.IsDigit) >= 0 && strings.IndexFunc(run, isCJK) < 0 {
				out = append(out, [2]int{a, b})
				continue
			}
			start := -1
			for i, r := range run {
				switch {
				case isCJK(r):
					if start >= 0 {
						out = append(out, [2]int{a + start, a + i})
						start = -1
					}
					out = append(out, [2]int{a + i, a + i + len(string(r))})
				case isWordRune(r):
					if start < 0 {
						start = i
					}
				default:
					if start >= 0 {
						out = append(out, [2]int{a + start, a + i})
						start = -1
					}
				}
			}
			if start >= 0 {
				out = append(out, [2]int{a + start, b})
			}
		}
	}
	pos := 0
	for _, m := range atomicRe.FindAllStringIndex(v, -1) {
		end := m[1]
		for end > m[0] && strings.ContainsRune(".,;:!?)", rune(v[end-1])) {
			end--
		}
		words(pos, m[0])
		out = append(out, [2]int{m[0], end})
		pos = end
	}
	words(pos, len(v))
	return out
}

// isValueSpan reports whether value (trimmed of surrounding spaces) is, byte for byte,
// whole or a span of whole tokens (tokens) of whole, not across a line break.
func isValueSpan(value, whole string) bool { return valueSpanIn(value, whole, 0, len(whole)) }

// valueSpanIn is isValueSpan for an occurrence of value inside whole[lo:hi].
func valueSpanIn(value, whole string, lo, hi int) bool {
	v := strings.TrimSpace(value)
	if v == "" {
		return false
	}
	if v == whole {
		return lo <= 0 && hi >= len(whole)
	}
	if strings.Contains(v, "\n") {
		return false
	}
	toks := tokens(whole)
	for i := 0; i < len(whole); {
		j := strings.Index(whole[i:], v)
		if j < 0 {
			return false
		}
		a := i + j
		b := a + len(v)
		startOK, endOK := false, false
		for _, t := range toks {
			startOK = startOK || t[0] == a
			endOK = endOK || t[1] == b
		}
		if startOK && endOK && a >= lo && b <= hi {
			return true
		}
		i = a + 1
	}
	return false
}

// quoteRegion finds quote in ctx (its words in order, any white space between them, any
// case) and returns the byte range it covers.
func quoteRegion(ctx, quote string) (lo, hi int, ok bool) {
	words := strings.Fields(quote)
	if len(words) == 0 || len(quote) > 4000 {
		return 0, 0, false
	}
	for i, w := range words {
		words[i] = regexp.QuoteMeta(w)
	}
	re, err := regexp.Compile(`(?i)` + strings.Join(words, `\s+`))
	if err != nil {
		return 0, 0, false
	}
	m := re.FindStringIndex(ctx)
	if m == nil {
		return 0, 0, false
	}
	return m[0], m[1], true
}

// trimEnd drops the sentence punctuation at the end of a normalized text.
func trimEnd(s string) string { return strings.TrimRight(s, ".!?。！？ ") }

// stopWords carry no meaning of their own when a field's label is compared with a key.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`the a an and or of to in on at by for from with without about into
		you your yours we our us they their it its this that these those is are was were be been being
		do does did will would shall should can could may might must have has had not no yes any all
		now future currently current ever please tell what which who whom when where why how if
		there here more most other than then so such own same also just only very per one`) {
		stopWords[w] = true
	}
}

// meaningWords are the content words of s: normalized words of 3 or more characters that are
// not stop words (each Chinese, Japanese or Korean character counts).
func meaningWords(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(Normalize(s), func(r rune) bool { return !isWordRune(r) }) {
		rs := []rune(w)
		if (len(rs) >= 3 || isCJK(rs[0])) && !stopWords[w] {
			out = append(out, w)
		}
	}
	return out
}

// sharesMeaning reports whether a field's label and a key have a content word in common, by
// its first five letters ("authorized" and "authorization", "located" and "location").
// Either side empty: true (nothing to compare; not judged weak).
func sharesMeaning(label, key string) bool {
	lw, kw := meaningWords(label), meaningWords(key)
	if len(lw) == 0 || len(kw) == 0 {
		return true
	}
	stem := func(w string) string {
		rs := []rune(w)
		return string(rs[:min(len(rs), 5)])
	}
	for _, a := range lw {
		for _, b := range kw {
			if stem(a) == stem(b) {
				return true
			}
		}
	}
	return false
}

// GroundResult is how a fill was grounded: the kind of source (SourceProfile, ...), the key
// of the whole value it came from, and Weak when that key shares no meaning with the field's
// label (the guard cannot judge the semantics: the owner may be asked).
type GroundResult struct {
	Kind string
	Key  string
	Weak bool
}

// GroundValue decides whether value, typed into the field labelled field, is grounded in the
// owner's sources. quote (source_quote) must be text of one source (after Normalize, as a
// whole phrase, at least 2 characters); value must equal, byte for byte after trimming
// surrounding spaces, a whole value of that source (WholeValues) that the quote covers or
// lies in, or a span of whole tokens of it (isValueSpan: never inside an email, URL, phone
// number or other identifier, never across lines, never a label); and the quote must hold
// the value. Among the whole values that ground it, one whose key shares meaning with field
// is preferred; when none does the result is Weak. It returns the refusal message for the
// agent ("" when grounded), which never repeats the sources.
func GroundValue(value, quote, field string, sources []GroundingSource) (GroundResult, string) {
	q := Normalize(quote)
	if len([]rune(q)) < 2 {
		return GroundResult{}, "Every answer needs a source_quote: the exact words from the owner's profile, answers or materials that the value comes from."
	}
	inSource := make([]bool, len(sources))
	found := false
	for i, s := range sources {
		if containsPhrase(Normalize(s.Text), q) {
			inSource[i], found = true, true
		}
	}
	if !found {
		return GroundResult{}, "The source_quote is not words from the owner's profile, answers or materials. Quote them exactly, or call request_answer."
	}
	v := Normalize(value)
	if v == "" {
		return GroundResult{}, "The value is empty."
	}
	if !containsPhrase(q, v) {
		return GroundResult{}, "The value does not appear, as written, in the source_quote. Use the owner's value exactly, or call request_answer."
	}
	var best *GroundResult
	qq := trimEnd(q)
	for _, w := range WholeValues(sources) {
		if !inSource[w.Source] {
			continue
		}
		if w.Exact && strings.TrimSpace(value) != w.Text {
			continue // a whole material grounds only as itself
		}
		nc := trimEnd(Normalize(w.Context))
		switch {
		case containsPhrase(qq, nc):
			// the quote covers the whole value's line, sentence or answer: any span of it
			if !isValueSpan(value, w.Text) {
				continue
			}
		case containsPhrase(nc, qq):
			// the quote is part of it: the value must lie inside the quoted part
			lo, hi, ok := quoteRegion(w.Context, quote)
			off := strings.Index(w.Context, w.Text)
			if !ok || off < 0 || !valueSpanIn(value, w.Text, lo-off, hi-off) {
				continue
			}
		default:
			continue
		}
		r := GroundResult{Kind: w.Kind, Key: w.Key, Weak: !sharesMeaning(field, w.Key)}
		if best == nil || (best.Weak && !r.Weak) {
			best = &r
		}
		if !r.Weak {
			break
		}
	}
	if best == nil {
		return GroundResult{}, "The value is not one of the owner's values as written: type a whole value (the part after \"Label:\" in the profile, a whole answer, or a whole line or sentence), or whole words of it, exactly as the owner wrote it; never a label, part of an email, URL or number, or words across two lines. Or call request_answer."
	}
	return *best, ""
}

// Ground is GroundValue without a field label (never Weak): it returns the kind of the
// source that grounds value, or "" and the refusal message.
func Ground(value, quote string, sources []GroundingSource) (kind, refusal string) {
	r, refusal := GroundValue(value, quote, "", sources)
	return r.Kind, refusal
}

// groundingRefusal is Ground over sources of no particular kind (each a profile-like text).
func groundingRefusal(value, quote string, sources []string) string {
	src := make([]GroundingSource, len(sources))
	for i, s := range sources {
		src[i] = GroundingSource{Kind: SourceProfile, Text: s}
	}
	_, r := Ground(value, quote, src)
	return r
}
