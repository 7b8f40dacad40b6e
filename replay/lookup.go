package replay

// This file is the lookup of a request in the Index: the steps blocked, exact and fuzzy
// (search and promo are in search.go), the memo of routes (rules.Route) and the explanations.

import (
	"fmt"
	"strings"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// commonParams counts the name=value pairs two sorted lists share (as multisets).
func commonParams(a, b []string) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			n++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return n
}

// lookup is the state of one Lookup.
type lookup struct {
	req        rules.Request
	key        rules.Key
	ep         *rules.Endpoint // the route's endpoint (rules.Route.Endpoint), or nil
	methods    []string        // the request's method, then GET for a HEAD
	keys       []rules.Key     // the request's key for each of methods
	latest     bool            // a latest pattern matches: ties go to the last recording
	latestRule string          // where that pattern is written
	latestPat  string
	hasText    bool         // a search or promo request carrying a text or code
	methodsBuf [2]string    // backing of methods
	keysBuf    [2]rules.Key // backing of keys
	hit        *indexed
	source     Source

	explain bool   // record steps (Explain); Lookup leaves it off and formats nothing
	steps   []Step // the steps tried, in order
	// refused are the candidates the matching policy turned down (Explain only; at most
	// maxRefused), refusedMore how many more there were.
	refused     []Refusal
	refusedMore int
	note        string // Result.Note of an answer the policy shaped (a skipped redirect)
}

// step records one step of the lookup when explaining; format is only formatted then.
func (l *lookup) step(name, outcome, format string, args ...any) {
	if l.explain {
		l.steps = append(l.steps, Step{Step: name, Outcome: outcome, Detail: fmt.Sprintf(format, args...)})
	}
}

// Lookup finds the answer for r in the order described on Index. r.URL must be absolute;
// its host is normalized (normalizeURL) before the rules see it. The result depends only on
// the index and r.
func (ix *Index) Lookup(r rules.Request) Result {
	res, _ := ix.lookup(r, false)
	return res
}

// lookup is Lookup, recording its steps when explain is set.
func (ix *Index) lookup(r rules.Request, explain bool) (Result, *lookup) {
	if r.URL != nil {
		r.URL = NormalizeURL(r.URL)
	}
	return ix.lookupNormalized(r, explain)
}

// lookupNormalized is lookup for a request whose URL is already normalizeURL's result (the
// proxy normalizes it once for the lookup and the log line).
func (ix *Index) lookupNormalized(r rules.Request, explain bool) (Result, *lookup) {
	r.Method = strings.ToUpper(r.Method)
	if r.URL == nil {
		key := ix.rs.Key(r)
		l := &lookup{req: r, key: key, explain: explain}
		l.step(StepMiss, OutcomeYes, "the request has no URL")
		return Result{Key: key, Source: SourceMiss, Note: "no URL"}, l
	}
	rt := ix.route(r)
	key := rt.Key(r)
	res := Result{Key: key}
	l := &lookup{req: r, key: key, explain: explain}
	if m := rt.Blocked; m != nil {
		res.Source, res.Rule = SourceBlocked, ix.label(m.File, m.Line)
		l.step(StepBlocked, OutcomeYes, "block pattern %q (%s) matches: answered 204 without a lookup", m.Pattern, res.Rule)
		return res, l
	}
	l.step(StepBlocked, OutcomeNo, "no block rule matches")
	if m := rt.Excluded; m != nil {
		res.Source, res.Note, res.Rule = SourceMiss, noteExcluded, ix.label(m.File, m.Line)
		l.step(StepExcluded, OutcomeYes, "exclude pattern %q (%s) matches: never stored, never replayed", m.Pattern, res.Rule)
		l.step(StepMiss, OutcomeYes, "excluded URLs always miss")
		return res, l
	}
	l.ep = rt.Endpoint
	l.methodsBuf[0], l.keysBuf[0] = key.Method, key
	l.methods, l.keys = l.methodsBuf[:1], l.keysBuf[:1]
	if g, ok := rt.GETKey(r); ok {
		// A HEAD is also looked up as the GET it stands for, under the GET's endpoint (the
		// route's Endpoint is the GET's when the HEAD has none).
		l.methods, l.keys = append(l.methods, "GET"), append(l.keys, g)
	}
	if m := rt.Latest; m != nil {
		l.latest, l.latestRule, l.latestPat = true, ix.label(m.File, m.Line), m.Pattern
	}
	switch {
	case ix.exactStep(l):
	case ix.searchStep(l):
	case ix.promoStep(l):
	case ix.fuzzyStep(l):
	default:
		res.Source = SourceMiss
		l.step(StepMiss, OutcomeYes, "nothing recorded matches: answered by request type")
	}
	if l.hit != nil {
		res.Source, res.Entry = l.source, l.hit.e
	}
	res.Note = joinNote(res.Note, l.note)
	if ix.d != nil {
		if bad := ix.d.bad.Load(); bad != nil {
			// a damaged record may have hidden a better answer: prefer a miss
			l.step(StepMiss, OutcomeYes, "%s", *bad)
			return Result{Key: key, Source: SourceMiss, Note: *bad}, l
		}
	}
	switch {
	case l.ep != nil:
		res.Endpoint, res.Rule = l.ep.Name, ix.endpointLabel(l.ep)
	case l.latest && l.hit != nil:
		res.Rule = l.latestRule
	}
	return res, l
}

// maxRoutes bounds the memo of routes; when full it starts again empty.
const maxRoutes = 1 << 14

// routeKey is what a rules.Route is computed from: the request's method and the parts of
// its URL that make the normalized host and path, never its query or body.
type routeKey struct{ method, host, path, rawPath, opaque string }

// route is the memo's value (Index.routes): the rules' route of one routeKey.
type route = rules.Route

// route returns the rules' route of r (rules.Set.Route; r.URL is normalized and not nil):
// the endpoint, the block, exclude and latest verdicts, and what the key needs. The rules
// are fixed for the index's life, so a route is computed once per distinct method, host
// and path and kept (up to maxRoutes): location patterns are globs tried one by one, which
// is most of a lookup's time otherwise.
func (ix *Index) route(r rules.Request) *rules.Route {
	u := r.URL
	k := routeKey{method: r.Method, host: u.Host, path: u.Path, rawPath: u.RawPath, opaque: u.Opaque}
	ix.routeMu.RLock()
	rt := ix.routes[k]
	ix.routeMu.RUnlock()
	if rt != nil {
		return rt
	}
	rt = ix.rs.Route(r)
	if len(k.method)+len(k.host)+len(k.path)+len(k.rawPath)+len(k.opaque) > maxMemoKey {
		return rt // decided again next time: see maxMemoKey
	}
	ix.routeMu.Lock()
	if ix.routes == nil || len(ix.routes) >= maxRoutes {
		ix.routes = make(map[routeKey]*route)
	}
	ix.routes[k] = rt
	ix.routeMu.Unlock()
	return rt
}

// headNote is added to a step's detail when a HEAD was answered by a recorded GET.
func headNote(l *lookup, m string) string {
	if m != l.key.Method {
		return " (a HEAD answered by the recorded " + m + ")"
	}
	return ""
}

// exactStep answers with a recording of the request's own key. Of several, those recorded
// with the request's scheme come first, then the others, each group in recording order
// (the last first for latest URLs). A redirect whose Location has this same key is skipped
// for the next capture; when every capture is such a redirect, the first whose Location is
// on the other scheme answers (it leads somewhere else), and a redirect to the very URL
// requested never does (docs/replay.md "Matching policy").
func (ix *Index) exactStep(l *lookup) bool {
	for _, k := range l.keys {
		ks := k.String()
		sp, dups, ok := ix.exactOf(ks)
		if !ok {
			continue
		}
		if ie := ix.entry(sp.first); sp.n == 1 && !ie.redirectsTo(ks) { // the usual case
			l.hit, l.source = ie, SourceExact
			l.step(StepExact, OutcomeYes, "%s has this key%s", ie.e.ID, headNote(l, k.Method))
			return true
		}
		one := [1]int{sp.first}
		positions := one[:]
		if sp.n > 1 {
			positions = dups
		}
		reqHTTPS := l.req.URL.Scheme == "https"
		mixed := false
		order := make([]*indexed, 0, len(positions))
		for pass := 0; pass < 2; pass++ { // the request's scheme first
			for i := range positions {
				p := positions[i]
				if l.latest {
					p = positions[len(positions)-1-i]
				}
				ie := ix.entry(p)
				if (ie.https == reqHTTPS) == (pass == 0) {
					order = append(order, ie)
				} else if pass == 0 {
					mixed = true
				}
			}
		}
		mixed = mixed && order[0].https == reqHTTPS
		var hit, fallback *indexed
		var skipped []string
		for _, ie := range order {
			if !ie.redirectsTo(ks) {
				hit = ie
				break
			}
			skipped = append(skipped, ie.e.ID)
			if fallback == nil && ie.loc.https != reqHTTPS {
				fallback = ie
				continue
			}
			if ie.loc.https != reqHTTPS {
				l.refuse(StepExact, ie, fmt.Sprintf("a %d redirect to its own key (Location %s): skipped for the next capture", ie.e.Status, ie.loc.url))
			} else {
				l.refuse(StepExact, ie, fmt.Sprintf("a %d redirect to the very URL requested (Location %s): never served", ie.e.Status, ie.loc.url))
			}
		}
		if hit != nil && fallback != nil {
			l.refuse(StepExact, fallback, fmt.Sprintf("a %d redirect to its own key (Location %s): skipped for the next capture", fallback.e.Status, fallback.loc.url))
		}
		if hit == nil && fallback != nil {
			hit = fallback
		}
		if hit == nil {
			l.note = joinNote(l.note, fmt.Sprintf("%s redirects to the very URL requested: not served", strings.Join(skipped, ", ")))
			l.step(StepExact, OutcomeNo, "%d recording(s) have key %s, and each redirects to the very URL requested: a miss rather than a redirect loop", sp.n, ks)
			continue
		}
		if len(skipped) > 0 && hit != fallback {
			l.note = joinNote(l.note, fmt.Sprintf("skipped %s: redirect to its own key", strings.Join(skipped, ", ")))
		}
		l.hit, l.source = hit, SourceExact
		if l.explain {
			l.step(StepExact, OutcomeYes, "%s", ix.exactDetail(l, k, sp, hit, fallback, mixed, skipped))
		}
		return true
	}
	if l.explain && len(l.steps) > 0 && l.steps[len(l.steps)-1].Step == StepExact {
		return false // the key was recorded, and every capture refused (said above)
	}
	l.step(StepExact, OutcomeNo, "no recording has key %s", l.key.String())
	return false
}

// exactDetail is the explanation of an exact hit.
func (ix *Index) exactDetail(l *lookup, k rules.Key, sp exactSpan, hit, fallback *indexed, mixed bool, skipped []string) string {
	id := hit.e.ID
	var why []string
	if mixed {
		scheme := "http"
		if hit.https {
			scheme = "https"
		}
		why = append(why, "recorded with both schemes: the request's ("+scheme+") first")
	}
	if hit == fallback {
		why = append(why, fmt.Sprintf("every capture redirects to its own key: %s leads to the other scheme (Location %s)", id, hit.loc.url))
	} else if len(skipped) > 0 {
		why = append(why, fmt.Sprintf("%s skipped, a redirect to its own key", strings.Join(skipped, ", ")))
	}
	extra := ""
	if len(why) > 0 {
		extra = " (" + strings.Join(why, "; ") + ")"
	}
	switch {
	case sp.n == 1:
		return fmt.Sprintf("%s has this key%s%s", id, extra, headNote(l, k.Method))
	case len(why) > 0 && l.latest:
		return fmt.Sprintf("%d recordings have this key; latest pattern %q (%s): %s%s%s", sp.n, l.latestPat, l.latestRule, id, extra, headNote(l, k.Method))
	case len(why) > 0:
		return fmt.Sprintf("%d recordings have this key: %s%s%s", sp.n, id, extra, headNote(l, k.Method))
	case l.latest:
		return fmt.Sprintf("%d recordings have this key; latest pattern %q (%s): the last, %s%s", sp.n, l.latestPat, l.latestRule, id, headNote(l, k.Method))
	}
	return fmt.Sprintf("%d recordings have this key: the earliest, %s%s", sp.n, id, headNote(l, k.Method))
}

// StaticType reports the request types whose fuzzy_min defaults to 0: images, fonts,
// style sheets and scripts.
func StaticType(t string) bool {
	return t == TypeImage || t == TypeFont || t == TypeStyle || t == TypeScript
}

// staticMime reports a recorded Content-Type (without parameters) of a static file.
func staticMime(mt string) bool { return StaticType(TypeOf(recording.ResourceTypeFromAccept(mt))) }

// defaultFuzzyMin is fuzzy_min when the endpoint sets none and the file is not static.
const defaultFuzzyMin = 0.5

// fuzzyStep finds the entry of the same method, host and key path with the most query
// name=value pairs in common (see Index for when it is allowed and the least share), under
// the matching policy: a recording that is not a static file may not answer a request whose
// parameters disagree with its own (paramConflict), unless the endpoint set fuzzy or
// fuzzy_min, or every recording of the path has one payload (samePayload); a browser's page
// (Request.Type document) is not answered with a recording that lacks one of its
// parameters, unless the endpoint opts in; and no recording answers with a redirect to the
// request's own key.
func (ix *Index) fuzzyStep(l *lookup) bool {
	ep, hasBody := l.ep, len(l.req.Body) > 0
	allowed := !hasBody && (l.key.Method == "GET" || l.key.Method == "HEAD")
	var why string
	switch {
	case ep != nil && ep.Kind == rules.KindStateful && hasBody:
		allowed, why = false, fmt.Sprintf("stateful endpoint %q: a request with a body matches only exactly", ep.Name)
	case ep != nil && ep.Fuzzy != nil:
		allowed, why = *ep.Fuzzy, fmt.Sprintf("endpoint %q sets fuzzy: %v", ep.Name, *ep.Fuzzy)
	case l.hasText:
		allowed, why = false, fmt.Sprintf("a %s request with a text is matched by its text only (fuzzy: true allows more)", ep.Kind)
	case hasBody:
		why = "off for requests with a body"
	case !allowed:
		why = "off for " + l.key.Method + " requests (on by default for GET and HEAD)"
	}
	if !allowed {
		l.step(StepFuzzy, OutcomeOff, "%s", why)
		return false
	}
	reqStatic := StaticType(TypeOf(recording.ResourceTypeFromPath(l.req.URL.Path)))
	minFor := func(ie *indexed) float64 {
		switch {
		case ep != nil && ep.FuzzyMin != nil:
			return *ep.FuzzyMin
		case reqStatic || ie.static:
			return 0
		}
		return defaultFuzzyMin
	}
	// An endpoint that sets fuzzy or fuzzy_min is its author's decision that other
	// parameters may answer: the lenient rule.
	optIn := ep != nil && (ep.FuzzyMin != nil || (ep.Fuzzy != nil && *ep.Fuzzy))
	// A page may not be answered with a recording that lacks a parameter it carries (a
	// listing's page=2 answered with page 1), unless the endpoint opts in.
	strictDoc := l.req.Type == TypeDocument && !optIn && !reqStatic
	seen, nearest, nearScore, nearWant, refused := false, -1, -1, 0, 0
	for _, k := range l.keys {
		ks := k.String()
		want := paramStrings(k)
		cands := ix.baseOf(k.Base())
		same := ix.samePayload(cands)
		var known map[string]bool // the parameter names of cands, for the refusals' reasons
		best, bestScore := -1, -1
		for _, p := range cands {
			seen = true
			ie := ix.entry(p)
			if ie.keyStr == ks {
				continue // a recording of the request's own key that the exact step refused
			}
			if strictDoc && !ie.static {
				if lack := lackingParam(want, ie.params); lack != "" {
					refused++
					if l.explain {
						if known == nil {
							known = ix.paramNames(cands)
						}
						why := fmt.Sprintf("a page request with %s, which this recording lacks", showText(lack))
						if !known[lack] {
							why = fmt.Sprintf("a page request with %s, a parameter no recording of %s has", showText(lack), k.Base())
						}
						l.refuse(StepFuzzy, ie, why+" (fuzzy or fuzzy_min on the endpoint allows it)")
					}
					continue
				}
			}
			if !(optIn || same || reqStatic || ie.static) && !paramsAgree(want, ie.params) {
				refused++
				if l.explain {
					why := paramConflict(want, ie.params)
					if why == "" {
						why = "its parameters differ from the request's"
					}
					l.refuse(StepFuzzy, ie, why)
				}
				continue
			}
			if ie.redirectsTo(ks) {
				refused++
				l.refuse(StepFuzzy, ie, fmt.Sprintf("a %d redirect to this request's own key (Location %s)", ie.e.Status, ie.loc.url))
				continue
			}
			s := commonParams(want, ie.params)
			if s > nearScore {
				nearest, nearScore, nearWant = p, s, len(want)
			}
			if len(want) > 0 && float64(s) < minFor(ie)*float64(len(want))-1e-9 {
				continue
			}
			// Positions ascend: ">" keeps the earliest of equals, ">=" the last.
			if s > bestScore || (l.latest && s == bestScore) {
				best, bestScore = p, s
			}
		}
		if best >= 0 {
			l.hit, l.source = ix.entry(best), SourceFuzzy
			if l.explain {
				l.step(StepFuzzy, OutcomeYes, "%s", fuzzyHitDetail(l, k, fuzzyWhy{reqStatic, optIn, same, len(cands), bestScore, len(want), refused, minFor(l.hit)}))
			}
			return true
		}
	}
	switch {
	case !seen:
		l.step(StepFuzzy, OutcomeNo, "no recording has method, host and path %s", l.key.Base())
	case !l.explain:
	case nearest < 0 && refused == 0:
		l.step(StepFuzzy, OutcomeNo, "no recording of %s but those of the request's own key, refused above", l.key.Base())
	case nearest < 0:
		what := fmt.Sprintf("all %d recordings", refused)
		if refused == 1 {
			what = "the one recording"
		}
		l.step(StepFuzzy, OutcomeNo, "%s of %s refused (listed under refused)", what, l.key.Base())
	default:
		ie := ix.entry(nearest)
		more := ""
		if refused > 0 {
			more = fmt.Sprintf("; %d refused (listed under refused)", refused)
		}
		l.step(StepFuzzy, OutcomeNo, "nearest %s has %d of %d parameters in common, below fuzzy_min %.2f%s",
			ie.e.ID, nearScore, nearWant, minFor(ie), more)
	}
	return false
}

// lackingParam returns the first parameter name of want that have lacks (both sorted
// paramStrings; the body pseudo-pair is not a parameter), or "" when have has every one.
func lackingParam(want, have []string) string {
	j := 0
	for _, s := range want {
		if strings.HasPrefix(s, bodyPair) {
			continue
		}
		n := pairName(s)
		for j < len(have) && pairName(have[j]) < n {
			j++
		}
		if j == len(have) || pairName(have[j]) != n {
			return n
		}
	}
	return ""
}

// paramNames returns the parameter names the recordings at positions carry.
func (ix *Index) paramNames(positions []int) map[string]bool {
	known := map[string]bool{}
	for _, p := range positions {
		for _, s := range ix.entry(p).params {
			known[pairName(s)] = true
		}
	}
	return known
}

// fuzzyWhy is what fuzzyStep found for its explanation of a hit: whether the request is for
// a static file, the endpoint opted in, or every candidate has one payload; the number of
// candidates, the hit's score (parameters in common) of the request's wanted ones, how many
// candidates were refused, and the fuzzy_min that applied to the hit.
type fuzzyWhy struct {
	reqStatic, optIn, same bool
	cands, score, want     int
	refused                int
	min                    float64
}

// fuzzyHitDetail is the explanation of a fuzzy hit l.hit for the key k.
func fuzzyHitDetail(l *lookup, k rules.Key, w fuzzyWhy) string {
	tie := "ties go to the earliest"
	if l.latest {
		tie = fmt.Sprintf("ties go to the last (latest pattern %q, %s)", l.latestPat, l.latestRule)
	}
	rule := ""
	switch {
	case w.reqStatic || l.hit.static:
		rule = "; a static file: other parameters may answer"
	case w.optIn:
		rule = fmt.Sprintf("; endpoint %q sets fuzzy or fuzzy_min: other parameters may answer", l.ep.Name)
	case w.same:
		rule = fmt.Sprintf("; all %d recordings of %s have one payload (digest %.12s…): other parameters may answer", w.cands, k.Base(), l.hit.e.Digest)
	}
	if w.refused > 0 {
		rule += fmt.Sprintf("; %d refused", w.refused)
	}
	return fmt.Sprintf("%s: %d of %d parameters in common, at least fuzzy_min %.2f; %s%s%s",
		l.hit.e.ID, w.score, w.want, w.min, tie, rule, headNote(l, k.Method))
}
