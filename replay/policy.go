package replay

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/textcut"
)

// policy.go: the matching policy, "prefer a miss to a wrong answer" (docs/replay.md,
// "Matching policy"). A step that may answer with a recording other than the request's own
// (fuzzy) must not hand a page another page's answer:
//
//   - a recording that is not a static file (image, font, style sheet, script) answers only
//     when every query parameter it was recorded with has the same values in the request
//     (paramConflict): a request without parameters does not take a recording that has
//     some, and a parameter recorded with another value, or missing from the request,
//     refuses the recording. Parameters the request has and the recording lacks (a fresh
//     session id) do not refuse it; fuzzy_min still applies to them.
//   - a browser's page (Request.Type document; the proxy sets it for browserPage's
//     navigations) is stricter: a recording that lacks a parameter the request carries does not answer
//     it (a listing's page=2 is not its page 1; lackingParam), unless the endpoint sets
//     fuzzy or fuzzy_min or the file is static.
//   - the lenient rule (any parameters, at least fuzzy_min in common) stays for static files,
//     for endpoints whose author set fuzzy or fuzzy_min, and for a path whose recordings all
//     have one payload (samePayload): then the parameters evidently change nothing.
//     Parameters that a rule says are irrelevant (drop_params, keep_params) are not in the
//     key at all, so they never refuse anything.
//   - a recorded redirect whose Location has the request's own key never answers another
//     request of that key by fuzzy, search or promo, and the exact step skips it for the
//     next capture of the key (exactStep).
//
// Every refusal is listed by Explain (pab inspect), one line per candidate with its reason.

// maxRefused bounds the refused candidates an explanation lists; the rest are counted.
const maxRefused = 50

// Refusal is a recorded exchange that the matching policy refused to answer a request
// with, and why: "the request has no parameters; this recording has faq_id=252".
type Refusal struct {
	EntryRef
	// Key is the refused recording's key.
	Key string `json:"key"`
	// Step is the lookup step that refused it (exact, search, promo, fuzzy).
	Step string `json:"step"`
	// Reason says why, in one line.
	Reason string `json:"reason"`
}

// refuse records that step turned ie down, when explaining.
func (l *lookup) refuse(step string, ie *indexed, reason string) {
	if !l.explain {
		return
	}
	if len(l.refused) == maxRefused {
		l.refusedMore++
		return
	}
	e := ie.e
	l.refused = append(l.refused, Refusal{
		EntryRef: EntryRef{ID: e.ID, Method: e.Method, URL: e.URL, Status: e.Status, TS: e.TS},
		Key:      ie.keyStr, Step: step, Reason: reason,
	})
}

// samePayload reports whether the recordings at positions are at least two and all have
// the same status and the same payload digest: the parameters that tell them apart do not
// change the answer.
func (ix *Index) samePayload(positions []int) bool {
	if len(positions) < 2 {
		return false
	}
	first := ix.entry(positions[0]).e
	if first.Digest == "" || first.Unresolved {
		return false
	}
	for _, p := range positions[1:] {
		e := ix.entry(p).e
		if e.Digest != first.Digest || e.Status != first.Status || e.Unresolved {
			return false
		}
	}
	return true
}

// pairName is the name part of a "name\x00value" pair (the body pseudo-pair has name "").
func pairName(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// paramsAgree reports whether a recording with the parameters have may answer a request
// with the parameters want (both sorted paramStrings, so each name's pairs are adjacent):
// every name of have holds the same values in want, and a request without parameters
// takes only a recording without any. It allocates nothing; paramConflict says why not.
func paramsAgree(want, have []string) bool {
	if len(want) == 0 {
		return len(have) == 0
	}
	i := 0
	for j := 0; j < len(have); {
		name := pairName(have[j])
		je := j + 1
		for je < len(have) && pairName(have[je]) == name {
			je++
		}
		for i < len(want) && pairName(want[i]) < name {
			i++
		}
		ie := i
		for ie < len(want) && pairName(want[ie]) == name {
			ie++
		}
		if ie-i != je-j {
			return false
		}
		for k := 0; k < je-j; k++ {
			if want[i+k] != have[j+k] {
				return false
			}
		}
		i, j = ie, je
	}
	return true
}

// paramGroup is one parameter name of a key with its values, sorted.
type paramGroup struct {
	name   string
	values []string
}

// groupParams groups sorted "name\x00value" pairs (paramStrings) by name, in name order;
// the body pseudo-pair is returned apart.
func groupParams(pairs []string) (groups []paramGroup, body string, hasBody bool) {
	for _, s := range pairs {
		if b, ok := strings.CutPrefix(s, bodyPair); ok {
			body, hasBody = b, true
			continue
		}
		name, value, _ := strings.Cut(s, "\x00")
		if n := len(groups); n > 0 && groups[n-1].name == name {
			groups[n-1].values = append(groups[n-1].values, value)
			continue
		}
		groups = append(groups, paramGroup{name: name, values: []string{value}})
	}
	return groups, body, hasBody
}

// paramConflict says why a recording with the parameters have may not answer a request with
// the parameters want (both paramStrings), or "" when it may: every parameter of the
// recording must have the same values in the request, and a recorded body must be the
// request's. Parameters only the request has do not conflict.
func paramConflict(want, have []string) string {
	hg, hbody, hHasBody := groupParams(have)
	if len(want) == 0 && (len(hg) > 0 || hHasBody) {
		if len(hg) == 0 {
			return "the request has no parameters and no body; this recording has a request body"
		}
		return "the request has no parameters; this recording has " + showPairs(hg)
	}
	wg, wbody, wHasBody := groupParams(want)
	byName := make(map[string][]string, len(wg))
	for _, g := range wg {
		byName[g.name] = g.values
	}
	for _, g := range hg { // name order: the first conflict is the same every time
		got, ok := byName[g.name]
		switch {
		case !ok:
			return fmt.Sprintf("this recording has %s, which the request lacks", showPairs([]paramGroup{g}))
		case !equalStrings(got, g.values):
			return fmt.Sprintf("%s: the request has %s, this recording %s", showText(g.name), showValues(got), showValues(g.values))
		}
	}
	switch {
	case hHasBody && !wHasBody:
		return "this recording has a request body, the request none"
	case hHasBody && wbody != hbody:
		return "the request body differs from this recording's"
	}
	return ""
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// maxShown bounds, in bytes, each name or value a refusal reason shows.
const maxShown = 60

// showPairs renders up to three parameters as name=value, name=value.
func showPairs(gs []paramGroup) string {
	var parts []string
	n := 0
	for _, g := range gs {
		for _, v := range g.values {
			if n == 3 {
				return strings.Join(parts, "&") + "&…"
			}
			parts = append(parts, showText(g.name)+"="+showText(v))
			n++
		}
	}
	return strings.Join(parts, "&")
}

// showValues renders the values of one parameter: v, or v1|v2 for a repeated one.
func showValues(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = showText(v)
	}
	return strings.Join(out, "|")
}

// showText cuts s to maxShown bytes (at a rune boundary) and quotes it when it holds
// anything but printable characters, so that a reason stays one line.
func showText(s string) string {
	cut := false
	if len(s) > maxShown {
		s, cut = textcut.Prefix(s, maxShown), true
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) {
		s = fmt.Sprintf("%q", s)
	}
	if cut {
		s += "…"
	}
	return s
}
