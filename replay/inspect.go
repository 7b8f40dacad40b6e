package replay

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/pab-dev/pab/rules"
)

// maxCandidates is how many near candidates Explain lists.
const maxCandidates = 5

// Steps of the lookup, as named in Explanation.Steps (Step.Step).
const (
	StepBlocked  = "blocked"
	StepExcluded = "excluded"
	StepExact    = "exact"
	StepSearch   = "search"
	StepPromo    = "promo"
	StepFuzzy    = "fuzzy"
	StepMiss     = "miss"
)

// Outcomes of a step (Step.Outcome).
const (
	OutcomeYes = "yes" // the step decided the answer
	OutcomeNo  = "no"  // the step was tried and found nothing
	OutcomeOff = "off" // the step does not apply to this request (fuzzy turned off)
)

// Step is one step of a lookup as Explain saw it, e.g.
//
//	{"step":"search","outcome":"yes","detail":"endpoint \"search\" (sites/shop.yaml:12): text \"pro airpods\": best \"AirPods Pro\" (e000003), similarity 1.00 ≥ 0.60"}
//
// Steps that do not concern the request (search and promo without such an endpoint) are
// left out.
type Step struct {
	Step    string `json:"step"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// Explanation is how the index answers one request (pab inspect). It marshals to JSON as
// shown by its tags.
type Explanation struct {
	// Method and URL are the request as looked up (URL normalized).
	Method string `json:"method"`
	URL    string `json:"url"`
	// Key is the request's normalized key.
	Key string `json:"key"`
	// Endpoint is the rules endpoint that applies to the request, if any.
	Endpoint *EndpointRef `json:"endpoint,omitempty"`
	// Steps are the lookup steps tried, in order, with their outcome.
	Steps []Step `json:"steps"`
	// Source is exact, search, promo, fuzzy, blocked or miss.
	Source Source `json:"source"`
	// Rule is where the rule that decided is written (Result.Rule), or "".
	Rule string `json:"rule,omitempty"`
	// Entry is the recorded exchange that answers, for exact, search, promo and fuzzy.
	Entry *EntryRef `json:"entry,omitempty"`
	// Candidates are, for fuzzy and miss, the nearest recorded exchanges: those with the same
	// method, host and path ranked by query parameters in common; when there are none,
	// those of the same method and host ranked by leading path segments in common.
	Candidates []Candidate `json:"candidates,omitempty"`
	// Refused are the recordings the matching policy turned down for this request, in the
	// order the steps met them, each with its reason (at most 50; RefusedMore counts the
	// rest): another page's parameters, a redirect to the request's own key.
	Refused     []Refusal `json:"refused,omitempty"`
	RefusedMore int       `json:"refused_more,omitempty"`
	// Note explains an unusual answer.
	Note string `json:"note,omitempty"`
}

// EndpointRef names an endpoint of the rules and where it is written.
type EndpointRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Match string `json:"match"`
	// Rule is "file:line" (see Result.Rule).
	Rule string `json:"rule"`
}

// EntryRef identifies a recorded exchange.
type EntryRef struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"`
	TS     string `json:"ts"`
}

// Candidate is a recorded exchange near a request, with its key and how near it is:
// Common is the number of query name=value pairs in common (same path) or of leading path
// segments in common (same host only).
type Candidate struct {
	EntryRef
	Key    string `json:"key"`
	Common int    `json:"common"`
	// SamePath is true when the candidate has the request's method, host and path.
	SamePath bool `json:"same_path"`
}

// Explain looks r up exactly as Lookup does, recording each step, and adds the normalized
// key, the endpoint and rule that applied and, for fuzzy and miss, the nearest candidates
// (at most 5, best first, ties in recording order).
func (ix *Index) Explain(r rules.Request) Explanation {
	res, l := ix.lookup(r, true)
	ex := Explanation{Method: strings.ToUpper(r.Method), Key: res.Key.String(), Source: res.Source,
		Rule: res.Rule, Steps: l.steps, Note: res.Note, Refused: l.refused, RefusedMore: l.refusedMore}
	if r.URL != nil {
		ex.URL = NormalizeURL(r.URL).String()
	}
	if l.ep != nil {
		ex.Endpoint = &EndpointRef{Name: l.ep.Name, Kind: l.ep.Kind, Match: l.ep.Match, Rule: ix.endpointLabel(l.ep)}
	}
	if res.Entry != nil {
		ex.Entry = &EntryRef{ID: res.Entry.ID, Method: res.Entry.Method, URL: res.Entry.URL, Status: res.Entry.Status, TS: res.Entry.TS}
		if res.Entry.Unresolved {
			ex.Note = noteUnresolved
		}
	}
	if l.methods == nil || (res.Source != SourceFuzzy && res.Source != SourceMiss) {
		return ex // blocked, excluded, or answered by a closer step
	}
	ex.Candidates = ix.candidates(l)
	return ex
}

func (ix *Index) candidates(l *lookup) []Candidate {
	type scored struct {
		p        int // position
		score    int
		samePath bool
	}
	var list []scored
	want := paramStrings(l.key)
	for _, k := range l.keys {
		for _, p := range ix.baseOf(k.Base()) {
			list = append(list, scored{p, commonParams(want, ix.entry(p).params), true})
		}
	}
	if len(list) == 0 {
		// every position of the host and method: only the ones shown are decoded
		segs := pathSegments(l.key.Path)
		for p := range ix.Len() {
			method, host, path := ix.keyOf(p)
			if host != l.key.Host || !slices.Contains(l.methods, method) {
				continue
			}
			if n := commonPrefix(segs, pathSegments(path)); n > 0 {
				list = append(list, scored{p, n, false}) // unrelated paths are no help
			}
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].score > list[j].score })
	var out []Candidate
	for _, s := range list {
		if len(out) == maxCandidates {
			break
		}
		ie := ix.entry(s.p)
		if ie.keyStr == damagedKey {
			continue // a saved index's damaged entry: never a candidate, as in a lookup
		}
		e := ie.e
		out = append(out, Candidate{
			EntryRef: EntryRef{ID: e.ID, Method: e.Method, URL: e.URL, Status: e.Status, TS: e.TS},
			Key:      ie.keyStr, Common: s.score, SamePath: s.samePath,
		})
	}
	return out
}

// keyOf returns the method, host and path of the key of position p; read from the saved
// index's record without decoding the entry (nor keeping it) when the index is read in
// place, so that a scan of every position does not decode every entry. The strings are
// for comparing only.
func (ix *Index) keyOf(p int) (method, host, path string) {
	if ix.d != nil {
		return ix.d.recordKey(p)
	}
	k := &ix.entries[p].key
	return k.Method, k.Host, k.Path
}

func pathSegments(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

func commonPrefix(a, b []string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Print writes the explanation for a person: the request, key and endpoint, one line per
// lookup step, one line per refused candidate with its reason, then the source, the rule
// that decided, the entry hit and the candidates.
func (ex Explanation) Print(w io.Writer) {
	fmt.Fprintf(w, "request:  %s %s\n", ex.Method, ex.URL)
	fmt.Fprintf(w, "key:      %s\n", ex.Key)
	if ex.Endpoint != nil {
		kind := ""
		if ex.Endpoint.Kind != "" {
			kind = ", kind " + ex.Endpoint.Kind
		}
		fmt.Fprintf(w, "endpoint: %s (match %q%s) at %s\n", ex.Endpoint.Name, ex.Endpoint.Match, kind, ex.Endpoint.Rule)
	} else {
		fmt.Fprintln(w, "endpoint: none")
	}
	fmt.Fprintln(w, "lookup:")
	for _, s := range ex.Steps {
		fmt.Fprintf(w, "  %-8s %-3s  %s\n", s.Step, s.Outcome, s.Detail)
	}
	if len(ex.Refused) > 0 {
		fmt.Fprintln(w, "refused (the matching policy: a miss rather than a wrong answer):")
		for _, rf := range ex.Refused {
			fmt.Fprintf(w, "  %s  %-6s %s  %s\n", rf.ID, rf.Step, rf.URL, rf.Reason)
		}
		if ex.RefusedMore > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", ex.RefusedMore)
		}
	}
	fmt.Fprintf(w, "source:   %s\n", ex.Source)
	if ex.Rule != "" {
		fmt.Fprintf(w, "rule:     %s\n", ex.Rule)
	}
	if ex.Entry != nil {
		fmt.Fprintf(w, "entry:    %s  %s %s  status %d  recorded %s\n", ex.Entry.ID, ex.Entry.Method, ex.Entry.URL, ex.Entry.Status, ex.Entry.TS)
	}
	if ex.Note != "" {
		fmt.Fprintf(w, "note:     %s\n", ex.Note)
	}
	if len(ex.Candidates) > 0 {
		what := "same path; the number is the query parameters in common"
		if !ex.Candidates[0].SamePath {
			what = "no recording has this path; the number is the leading path segments in common"
		}
		fmt.Fprintf(w, "nearest candidates (%s):\n", what)
		for _, c := range ex.Candidates {
			fmt.Fprintf(w, "  %2d  %s  %s (status %d)\n      key %s\n", c.Common, c.ID, c.URL, c.Status, c.Key)
		}
	} else if ex.Source == SourceMiss && ex.Note == "" {
		fmt.Fprintln(w, "nearest candidates: none (nothing recorded for this method and host shares a path segment)")
	}
}
