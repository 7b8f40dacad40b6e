package replay

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pab-dev/pab/rules"
)

// search.go: the free-text steps of the lookup, between exact and fuzzy. Requests that an
// endpoint of kind search or promo matches are answered by the text of its text_param
// (docs/replay.md "Lookup order").
//
// Candidates are indexed per endpoint and key base (method, host, key path): a recording
// is a candidate for a request only when the same endpoint applied to it and it has the
// same method, host and key path (write a key template to make several paths one). For
// searches, an inverted index (word → candidates) limits the scoring to the candidates
// that share a word with the request's text, or have a word its unfinished last word
// starts.

// textKey identifies the candidates of one endpoint and key base.
type textKey struct {
	ep   *rules.Endpoint
	base string // rules.Key.Base() of the recordings
}

// textIndex is the search or promo candidates of one textKey.
type textIndex struct {
	cands []textCand
	post  map[string][]int32 // search: word → indices into cands, ascending
	vocab []string           // search: the words of post, sorted
	codes map[string][]int32 // promo: rules.NormCode of the code → indices, ascending
}

// textCand is one recording of a search or promo endpoint.
type textCand struct {
	ie   *indexed
	text rules.Text // search: the recorded text
	code string     // promo: the recorded code, normalized
	rest []string   // ie.params without the text_param pairs: the tie-breaker
}

// addText indexes ie, a recording of r that the search or promo endpoint ep matches; base
// is ie.key.Base(). Recordings without words in text_param (search) or without a code
// (promo) are not candidates.
func (ix *Index) addText(ep *rules.Endpoint, r rules.Request, ie *indexed, base string) {
	k := textKey{ep, base}
	if t := addTextTo(ix.texts[k], ep, r, ie); t != nil {
		ix.texts[k] = t
	}
}

// addTextTo adds ie, a recording of r that ep matches, to t (made when nil and ie is a
// candidate) and returns t.
func addTextTo(t *textIndex, ep *rules.Endpoint, r rules.Request, ie *indexed) *textIndex {
	raw, ok := rules.RequestText(r, ep.TextParam)
	if !ok {
		return t
	}
	c := textCand{ie: ie, rest: restParams(ie.params, ep.TextParam)}
	switch ep.Kind {
	case rules.KindSearch:
		if c.text = rules.ParseText(raw); c.text.Empty() {
			return t
		}
	case rules.KindPromo:
		if c.code = rules.NormCode(raw); c.code == "" {
			return t
		}
	}
	if t == nil {
		t = &textIndex{post: map[string][]int32{}, codes: map[string][]int32{}}
	}
	i := int32(len(t.cands))
	t.cands = append(t.cands, c)
	for _, w := range c.text.Set {
		t.post[w] = append(t.post[w], i)
	}
	if c.code != "" {
		t.codes[c.code] = append(t.codes[c.code], i)
	}
	return t
}

// finish sorts the vocabulary once every candidate is in.
func (t *textIndex) finish() {
	t.vocab = make([]string, 0, len(t.post))
	for w := range t.post {
		t.vocab = append(t.vocab, w)
	}
	sort.Strings(t.vocab)
}

// restParams drops the pairs of the parameter name from sorted "name\x00value" pairs.
func restParams(params []string, name string) []string {
	prefix := name + "\x00"
	out := make([]string, 0, len(params))
	for _, p := range params {
		if !strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// searchPick is a scored search candidate.
type searchPick struct {
	c      *textCand
	sim    float64
	prefix bool
	rest   int // other parameters in common
}

// better reports whether a ranks before b: higher similarity, then a prefix match, then
// more other parameters in common, then recording order (the earliest, or the last for
// latest URLs).
func (a searchPick) better(b searchPick, latest bool) bool {
	switch {
	case b.c == nil:
		return true
	case a.sim != b.sim:
		return a.sim > b.sim
	case a.prefix != b.prefix:
		return a.prefix
	case a.rest != b.rest:
		return a.rest > b.rest
	case latest:
		return a.c.ie.pos > b.c.ie.pos
	}
	return a.c.ie.pos < b.c.ie.pos
}

// search returns the best candidate that reaches min (or of which q is a prefix), and the
// best candidate of all scored, for explanations. want are the request's other pairs.
func (t *textIndex) search(q rules.Text, min float64, want []string, latest bool) (best, nearest searchPick) {
	for _, i := range t.touched(q, min) {
		c := &t.cands[i]
		p := searchPick{c: c, sim: rules.Similarity(q, c.text), prefix: rules.IsPrefix(q, c.text), rest: commonParams(want, c.rest)}
		if p.better(nearest, latest) {
			nearest = p
		}
		if (p.prefix || rules.Reaches(p.sim, min)) && p.better(best, latest) {
			best = p
		}
	}
	return best, nearest
}

// touched lists, ascending, the candidates that can reach min: every one when min is 0,
// else those sharing a word with q or holding a word that q's unfinished last word starts
// (the others have similarity 0 and q is no prefix of them).
func (t *textIndex) touched(q rules.Text, min float64) []int32 {
	if min <= 0 {
		all := make([]int32, len(t.cands))
		for i := range all {
			all[i] = int32(i)
		}
		return all
	}
	var out []int32
	for _, w := range q.Set {
		out = append(out, t.post[w]...)
	}
	if q.Open {
		p := q.Seq[len(q.Seq)-1]
		for i := sort.SearchStrings(t.vocab, p); i < len(t.vocab) && strings.HasPrefix(t.vocab[i], p); i++ {
			out = append(out, t.post[t.vocab[i]]...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// similarityOf is the endpoint's least similarity.
func similarityOf(ep *rules.Endpoint) float64 {
	if ep.Similarity != nil {
		return *ep.Similarity
	}
	return rules.DefaultSimilarity
}

// searchStep answers a request of a search endpoint with the recording of the most similar
// text (see Index).
func (ix *Index) searchStep(l *lookup) bool {
	ep := l.ep
	if ep == nil || ep.Kind != rules.KindSearch {
		return false
	}
	raw, _ := rules.RequestText(l.req, ep.TextParam)
	q := rules.ParseText(raw)
	if q.Empty() {
		l.step(StepSearch, OutcomeNo, "endpoint %q (%s): no words in %s", ep.Name, ix.endpointLabel(ep), ep.TextParam)
		return false
	}
	l.hasText = true
	min := similarityOf(ep)
	var near searchPick
	buckets := 0
	for _, k := range l.keys {
		t := ix.textsOf(ep, k.Base())
		if t == nil {
			continue
		}
		buckets++
		best, nearest := t.search(q, min, restParams(paramStrings(k), ep.TextParam), l.latest)
		if best.c != nil && best.c.ie.redirectsTo(k.String()) {
			ie := best.c.ie
			l.refuse(StepSearch, ie, fmt.Sprintf("a %d redirect to this request's own key (Location %s)", ie.e.Status, ie.loc.url))
			best = searchPick{}
		}
		if best.c != nil {
			l.hit, l.source = best.c.ie, SourceSearch
			if l.explain {
				how := fmt.Sprintf("similarity %.2f ≥ %.2f", best.sim, min)
				if !rules.Reaches(best.sim, min) {
					how = fmt.Sprintf("a prefix of it (similarity %.2f < %.2f)", best.sim, min)
				} else if best.prefix {
					how += ", a prefix of it"
				}
				l.step(StepSearch, OutcomeYes, "endpoint %q (%s): text %q: best %q (%s), %s%s",
					ep.Name, ix.endpointLabel(ep), q.Raw, best.c.text.Raw, best.c.ie.e.ID, how, headNote(l, k.Method))
			}
			return true
		}
		if nearest.better(near, l.latest) {
			near = nearest
		}
	}
	if l.explain {
		where := fmt.Sprintf("endpoint %q (%s): text %q: ", ep.Name, ix.endpointLabel(ep), q.Raw)
		switch {
		case buckets == 0:
			l.step(StepSearch, OutcomeNo, "%sno recorded search of this endpoint for %s", where, l.key.Base())
		case near.c == nil:
			l.step(StepSearch, OutcomeNo, "%sno recorded search shares a word with it", where)
		default:
			l.step(StepSearch, OutcomeNo, "%snearest %q (%s), similarity %.2f < %.2f", where, near.c.text.Raw, near.c.ie.e.ID, near.sim, min)
		}
	}
	return false
}

// pickCode returns the candidate among ids with the most other parameters in common with
// want, ties in recording order (the last for latest URLs).
func (t *textIndex) pickCode(ids []int32, want []string, latest bool) *textCand {
	var best *textCand
	bestRest := -1
	for _, i := range ids { // ascending: recording order
		c := &t.cands[i]
		r := commonParams(want, c.rest)
		if r > bestRest || (latest && r == bestRest) {
			best, bestRest = c, r
		}
	}
	return best
}

// promoStep answers a request of a promo endpoint: a recorded code with its recording, an
// unknown code with the recording of invalid_code (see Index).
func (ix *Index) promoStep(l *lookup) bool {
	ep := l.ep
	if ep == nil || ep.Kind != rules.KindPromo {
		return false
	}
	raw, _ := rules.RequestText(l.req, ep.TextParam)
	code := rules.NormCode(raw)
	if code == "" {
		l.step(StepPromo, OutcomeNo, "endpoint %q (%s): no code in %s", ep.Name, ix.endpointLabel(ep), ep.TextParam)
		return false
	}
	l.hasText = true
	invalid := rules.NormCode(ep.InvalidCode)
	for pass, look := range []string{code, invalid} {
		for _, k := range l.keys {
			t := ix.textsOf(ep, k.Base())
			if t == nil || len(t.codes[look]) == 0 {
				continue
			}
			c := t.pickCode(t.codes[look], restParams(paramStrings(k), ep.TextParam), l.latest)
			if c.ie.redirectsTo(k.String()) {
				l.refuse(StepPromo, c.ie, fmt.Sprintf("a %d redirect to this request's own key (Location %s)", c.ie.e.Status, c.ie.loc.url))
				continue
			}
			l.hit, l.source = c.ie, SourcePromo
			if pass == 0 {
				l.step(StepPromo, OutcomeYes, "endpoint %q (%s): code %q recorded: %s%s", ep.Name, ix.endpointLabel(ep), raw, c.ie.e.ID, headNote(l, k.Method))
			} else {
				l.step(StepPromo, OutcomeYes, "endpoint %q (%s): code %q never recorded: answered with the recording of invalid_code %q, %s%s",
					ep.Name, ix.endpointLabel(ep), raw, ep.InvalidCode, c.ie.e.ID, headNote(l, k.Method))
			}
			return true
		}
	}
	l.step(StepPromo, OutcomeNo, "endpoint %q (%s): code %q never recorded, and invalid_code %q was never recorded either",
		ep.Name, ix.endpointLabel(ep), raw, ep.InvalidCode)
	return false
}
