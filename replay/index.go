package replay

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/warc"
)

// Index answers "which recorded exchange serves this request". It is built once per replay
// from the bundle and the rules in effect (keys are never stored in the recording, so a rule
// change takes effect on the next start), and is read-only afterwards: safe for concurrent
// use.
//
// Lookup order (docs/replay.md):
//
//  1. blocked: a block rule matches the URL; answered 204 without a lookup.
//  2. exact: an entry with the same key. The earliest recorded copy wins; for URLs that
//     match a "latest" rule (carts, checkouts) the last copy wins.
//     (Issue 3 adds "search" and "promo" steps here, between exact and fuzzy: see
//     Index.steps.)
//  3. fuzzy: only for GET and HEAD (requests without a body): an entry with the same method,
//     host and path whose query has the most name=value pairs in common with the request;
//     ties go to the earliest recorded (for "latest" URLs, the last recorded). An endpoint
//     of the rules may turn fuzzy matching off or on (`fuzzy`) and ask for a least share
//     of the request's parameters in common (`fuzzy_min`); by default any share will do.
//  4. miss: nothing recorded; the proxy answers by request type (miss.go).
//
// A HEAD request matches a recorded HEAD when there is one, else the recorded GET.
// URLs that an "exclude" rule matches are never indexed, so they always miss.
type Index struct {
	b  *warc.Bundle
	rs *rules.Set

	entries []*indexed           // recording order, excluded entries left out
	exact   map[string][]int     // key string → positions in entries, ascending
	base    map[string][]int     // key.Base() (method, host, path) → positions, ascending
	urls    map[string]int       // normalized "GET " + URL → first position (for not_found pages)
	skipped map[string]string    // entry id → why it is not indexed
	steps   []func(*lookup) bool // after exact, before fuzzy; see Lookup
}

// indexed is one entry with its key, computed at start.
type indexed struct {
	pos    int // position in entries (recording order)
	e      *warc.Entry
	key    rules.Key
	keyStr string
	params []string // "name=value" of key.Params, sorted
}

// Result is the answer of Index.Lookup.
type Result struct {
	// Source is SourceExact, SourceFuzzy, SourceBlocked or SourceMiss.
	Source string
	// Entry is the recorded exchange that answers (exact, fuzzy), else nil.
	Entry *warc.Entry
	// Key is the request's normalized key under the rules in effect.
	Key rules.Key
	// Note says why an answer is unusual ("excluded by rules"), or is empty.
	Note string
}

// NewIndex computes the key of every entry of b under rs and buckets them for lookup.
// Entries whose URL does not parse as an absolute http(s) URL, whose request body cannot be
// decoded, or that an exclude rule matches are left out (Skipped lists them). The index
// holds b: the bundle must stay open while the index is used.
func NewIndex(b *warc.Bundle, rs *rules.Set) (*Index, error) {
	if b == nil || rs == nil {
		return nil, fmt.Errorf("new index: bundle and rules are required")
	}
	ix := &Index{
		b:       b,
		rs:      rs,
		exact:   make(map[string][]int, len(b.Entries)),
		base:    make(map[string][]int),
		urls:    make(map[string]int, len(b.Entries)),
		skipped: map[string]string{},
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		u, err := parseTargetURL(e.URL)
		if err != nil {
			ix.skipped[e.ID] = err.Error()
			continue
		}
		if rs.Excluded(u) {
			ix.skipped[e.ID] = "excluded by rules"
			continue
		}
		body, err := b.RequestBody(e)
		if err != nil {
			ix.skipped[e.ID] = err.Error()
			continue
		}
		method := strings.ToUpper(e.Method)
		key := rs.Key(rules.Request{Method: method, URL: u, Body: body, ContentType: e.ReqType})
		ie := &indexed{pos: len(ix.entries), e: e, key: key, keyStr: key.String(), params: paramStrings(key.Params)}
		ix.entries = append(ix.entries, ie)
		ix.exact[ie.keyStr] = append(ix.exact[ie.keyStr], ie.pos)
		ix.base[key.Base()] = append(ix.base[key.Base()], ie.pos)
		uk := method + " " + u.String()
		if _, ok := ix.urls[uk]; !ok {
			ix.urls[uk] = ie.pos
		}
	}
	return ix, nil
}

// Len is the number of indexed entries.
func (ix *Index) Len() int { return len(ix.entries) }

// Skipped maps the id of every entry left out of the index to the reason.
func (ix *Index) Skipped() map[string]string {
	out := make(map[string]string, len(ix.skipped))
	for k, v := range ix.skipped {
		out[k] = v
	}
	return out
}

// Bundle is the bundle the index was built from.
func (ix *Index) Bundle() *warc.Bundle { return ix.b }

// Rules is the rule set the index was built with.
func (ix *Index) Rules() *rules.Set { return ix.rs }

// parseTargetURL parses a recorded or requested absolute URL and normalizes its host
// (normalizeURL).
func parseTargetURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: not an absolute http(s) URL", raw)
	}
	return normalizeURL(u), nil
}

// normalizeURL returns a copy of u with the scheme and host in lower case, a trailing dot
// dropped from the host name, and the scheme's default port (80 for http, 443 for https)
// removed; other ports stay, so https://site:8443/ and https://site/ are different hosts.
// An empty path becomes "/".
func normalizeURL(u *url.URL) *url.URL {
	c := *u
	c.Scheme = strings.ToLower(c.Scheme)
	host, port := c.Host, ""
	if h, p, err := net.SplitHostPort(c.Host); err == nil {
		host, port = h, p
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if (c.Scheme == "https" && port == "443") || (c.Scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		c.Host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		c.Host = "[" + host + "]"
	} else {
		c.Host = host
	}
	if c.Path == "" && c.Opaque == "" {
		c.Path = "/"
		c.RawPath = ""
	}
	c.Fragment, c.RawFragment = "", ""
	return &c
}

func paramStrings(ps []rules.Param) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name + "\x00" + p.Value
	}
	sort.Strings(out)
	return out
}

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

// lookup is the state of one Lookup, passed to the steps between exact and fuzzy.
type lookup struct {
	req     rules.Request
	key     rules.Key
	methods []string // the request's method, then GET for a HEAD
	latest  bool
	hit     *indexed
	source  string
}

// Lookup finds the answer for r in the order described on Index. r.URL must be absolute;
// its host is normalized (normalizeURL) before the rules see it. The result depends only on
// the index and r.
func (ix *Index) Lookup(r rules.Request) Result {
	res, _ := ix.lookup(r)
	return res
}

func (ix *Index) lookup(r rules.Request) (Result, *lookup) {
	r.Method = strings.ToUpper(r.Method)
	if r.URL != nil {
		r.URL = normalizeURL(r.URL)
	}
	key := ix.rs.Key(r)
	res := Result{Key: key}
	if r.URL == nil {
		res.Source = SourceMiss
		res.Note = "no URL"
		return res, nil
	}
	if ix.rs.Blocked(r.URL) {
		res.Source = SourceBlocked
		return res, nil
	}
	if ix.rs.Excluded(r.URL) {
		res.Source = SourceMiss
		res.Note = "excluded by rules"
		return res, nil
	}
	l := &lookup{req: r, key: key, methods: []string{key.Method}, latest: ix.rs.Latest(r.URL)}
	if key.Method == "HEAD" {
		l.methods = append(l.methods, "GET")
	}
	switch {
	case ix.exactStep(l):
	case ix.runSteps(l):
	case ix.fuzzyStep(l):
	default:
		res.Source = SourceMiss
		return res, l
	}
	res.Source = l.source
	res.Entry = l.hit.e
	return res, l
}

// withMethod is k with its method replaced (HEAD looked up as GET).
func withMethod(k rules.Key, m string) rules.Key {
	k.Method = m
	return k
}

func (ix *Index) exactStep(l *lookup) bool {
	for _, m := range l.methods {
		ps := ix.exact[withMethod(l.key, m).String()]
		if len(ps) == 0 {
			continue
		}
		p := ps[0]
		if l.latest {
			p = ps[len(ps)-1]
		}
		l.hit, l.source = ix.entries[p], SourceExact
		return true
	}
	return false
}

// runSteps runs the extra steps between exact and fuzzy (none yet).
func (ix *Index) runSteps(l *lookup) bool {
	for _, step := range ix.steps {
		if step(l) {
			return true
		}
	}
	return false
}

// fuzzyAllowed says whether a request may be answered by a fuzzy match: only GET and HEAD,
// the methods without a request body whose answer does not depend on one.
func fuzzyAllowed(method string) bool { return method == "GET" || method == "HEAD" }

// fuzzyStep finds the entry of the same method, host and path with the most query
// name=value pairs in common. An endpoint of the rules that applies to the request may
// switch fuzzy matching on or off (fuzzy) and ask for a least share of the request's
// parameters in common (fuzzy_min); without one, fuzzy matching is on for GET and HEAD
// and any share, even none, will do.
func (ix *Index) fuzzyStep(l *lookup) bool {
	allowed, min := fuzzyAllowed(l.key.Method), 0.0
	if ep := ix.rs.Endpoint(l.req); ep != nil {
		if ep.Fuzzy != nil {
			allowed = *ep.Fuzzy
		}
		if ep.FuzzyMin != nil {
			min = *ep.FuzzyMin
		}
	}
	if !allowed {
		return false
	}
	want := paramStrings(l.key.Params)
	for _, m := range l.methods {
		best, bestScore := -1, -1
		for _, p := range ix.base[withMethod(l.key, m).Base()] {
			s := commonParams(want, ix.entries[p].params)
			// Positions ascend: ">" keeps the earliest of equals, ">=" the last.
			if s > bestScore || (l.latest && s == bestScore) {
				best, bestScore = p, s
			}
		}
		if best >= 0 && (len(want) == 0 || float64(bestScore) >= min*float64(len(want))) {
			l.hit, l.source = ix.entries[best], SourceFuzzy
			return true
		}
	}
	return false
}

// entryForURL returns the first recorded GET of rawURL (normalized), or nil. It is used for
// a site's own 404 page (manifest not_found).
func (ix *Index) entryForURL(rawURL string) *warc.Entry {
	u, err := parseTargetURL(rawURL)
	if err != nil {
		return nil
	}
	if p, ok := ix.urls["GET "+u.String()]; ok {
		return ix.entries[p].e
	}
	// Fall back to the key: the recorded URL may differ in dropped parameters.
	if ps := ix.exact[ix.rs.Key(rules.Request{Method: "GET", URL: u}).String()]; len(ps) > 0 {
		return ix.entries[ps[0]].e
	}
	return nil
}
