package replay

import (
	"fmt"
	"net"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// Index answers "which recorded exchange serves this request". It is computed from the
// bundle and the rules in effect (keys are never stored in the recording, so a rule change
// takes effect on the next start), or read in place from the saved index computed earlier
// under the same key (disk.go), and is read-only afterwards: safe for concurrent use.
//
// Lookup order (docs/replay.md):
//
//  1. blocked: a block rule matches the URL; answered 204 without a lookup.
//  2. exact: an entry with the same key. The earliest recorded copy wins; for URLs that
//     match a "latest" rule (carts, checkouts) the last copy wins. Copies recorded with the
//     request's scheme come first; a recorded redirect whose Location has its own key is
//     skipped for the next copy, and a redirect to the very URL requested never answers.
//  3. search: the request matches an endpoint of kind search and carries words in its
//     text_param: the recording of the same endpoint, method, host and key path whose text
//     is most similar (rules.Similarity, at least the endpoint's similarity, default 0.6), or
//     of which the request's text is a prefix (rules.IsPrefix, suggestion requests).
//  4. promo: the request matches an endpoint of kind promo and carries a code: the recording
//     of that code, or, for a code never recorded, the recording of invalid_code.
//  5. fuzzy: an entry with the same method, host and key path whose query has the most
//     name=value pairs in common with the request, at least fuzzy_min of the request's pairs
//     (default 0.5; 0 for static files). On by default for GET and HEAD without a body, off
//     for requests with a body, for search and promo requests that carry a text, and always
//     for a stateful endpoint's request with a body; an endpoint's `fuzzy` turns it on or off.
//     The matching policy (policy.go) refuses a recording that is not a static file when its
//     parameters disagree with the request's, unless the endpoint sets fuzzy or fuzzy_min or
//     every recording of the path has one payload.
//  6. miss: nothing recorded; the proxy answers by request type (miss.go).
//
// Ties in every step go to the earliest recording, or to the last one for "latest" URLs;
// they never depend on map order. A HEAD request matches a recorded HEAD when there is one,
// else the recorded GET. URLs that an "exclude" rule matches are never indexed, so they
// always miss.
type Index struct {
	b    *recording.Bundle
	rs   *rules.Set
	root string // rule file paths are shown relative to it (IndexOptions.RuleRoot)

	entries []*indexed                 // recording order, excluded entries left out
	exact   map[string]exactSpan       // key string → where its recordings are in entries
	dups    map[string][]int           // key string → every position, ascending, for keys recorded more than once
	base    map[string][]int           // key.Base() (method, host, path) → positions, ascending
	urls    map[string]int             // normalized "GET " + URL → first position (for not_found pages)
	skipped map[string]string          // entry id → why it is not indexed
	texts   map[textKey]*textIndex     // search and promo candidates per endpoint and key base
	labels  map[*rules.Endpoint]string // where each endpoint is written (label)
	d       *diskIndex                 // the lookup lists read in place (IndexOptions.Opened), else nil: the maps above

	routeMu sync.RWMutex
	routes  map[routeKey]*route // what the rules decide per method, host and path (route)

	// lookups of bodiless requests (lookupServed): by URL the first method, content type
	// and type asked for it, which is nearly always the only one (one string hashed per
	// request), and by resultKey the others
	results      readMostly[string, *servedResult]
	otherResults readMostly[resultKey, *servedResult]

	savedMu   sync.Mutex
	saved     string        // what NewIndex did with the saved index (SavedIndexState)
	savedDone chan struct{} // closed when the saved index is written (WaitSaved); nil when none is
	saveNow   chan struct{} // closed to write it before saveDelay (savedWritten)
	saveOnce  sync.Once
}

// resultKey identifies a bodiless request for the memo of lookup results: the lookup is
// a pure function of the method, the normalized URL and the content type.
type resultKey struct{ method, url, contentType, typ string }

// maxResults bounds the memo of lookup results by URL (Index.results), and a quarter of
// it the memo of the others (Index.otherResults); each, when full, starts again empty.
const maxResults = 1 << 14

// maxMemoKey bounds the bytes of a request a memo (routes, results) keeps it under: a
// client controls its URLs, and a longer one is decided again each time rather than
// kept. With maxResults and maxRoutes, the memos hold at most a few tens of MiB (the
// lookup memos at their fullest, every URL this long: 68 MiB, TestLookupServedMemoMemory).
const maxMemoKey = 1 << 10

// lookupServed is the lookup of a request the proxy serves (no explanation): r.URL is the
// request's (NormalizeURL'd here when the memo does not have it) and url is the normalized
// URL's String(). It returns the result with its key as a string (Result.Key.String(), for
// the log), the lineMemo of its log lines (nil when the result is not kept) and url again:
// the memo's copy of it when the result is kept (the one its log lines were encoded with,
// so that a line compared with them finds the same string, not equal bytes elsewhere in
// memory). The results of bodiless requests are kept (up to maxResults, each under
// maxMemoKey bytes of method, URL and content type), so a request served again costs one
// map lookup instead of its key, route, exact step and key string, its log line copies
// what the last one encoded, and its answer's recorded head is read from the result
// (servedResult.head) instead of looked up again. The result returned is shared:
// read-only but for its head.
func (ix *Index) lookupServed(r rules.Request, url string) *servedResult {
	if r.URL == nil || len(r.Body) != 0 || len(r.Method)+len(url)+len(r.ContentType) > maxMemoKey {
		if r.URL != nil {
			r.URL = NormalizeURL(r.URL)
		}
		res, _ := ix.lookupNormalized(r, false)
		return &servedResult{resultKey: resultKey{url: url}, res: res, keyStr: res.Key.String()}
	}
	if m, ok := ix.results.load(url); ok && m.method == r.Method && m.contentType == r.ContentType && m.typ == r.Type {
		return m
	}
	k := resultKey{r.Method, url, r.ContentType, r.Type}
	if m, ok := ix.otherResults.load(k); ok {
		return m
	}
	r.URL = NormalizeURL(r.URL)
	res, _ := ix.lookupNormalized(r, false)
	m := &servedResult{resultKey: k, res: res, keyStr: res.Key.String(), line: new(lineMemo)}
	if !ix.results.store(url, m, func(n int) bool { return n >= maxResults }) {
		// the URL's first is another request's, or this one's stored first by another
		if kept, ok := ix.results.load(url); ok && kept.resultKey == k {
			m = kept
		} else if !ix.otherResults.store(k, m, func(n int) bool { return n >= maxResults/4 }) {
			if kept, ok := ix.otherResults.load(k); ok {
				m = kept
			}
		}
	}
	return m
}

// lookupServedURL is lookupServed for the normalized URL's String() as bytes (appendURL):
// a request the memo holds is found without a string of its URL (the map is read with the
// bytes themselves), anything else goes through lookupServed.
func (ix *Index) lookupServedURL(r rules.Request, url []byte) *servedResult {
	if r.URL != nil && len(r.Body) == 0 && len(r.Method)+len(url)+len(r.ContentType) <= maxMemoKey {
		if rd := ix.results.read.Load(); rd != nil {
			if m, ok := (*rd)[string(url)]; ok && m.method == r.Method && m.contentType == r.ContentType && m.typ == r.Type {
				return m
			}
		}
	}
	return ix.lookupServed(r, string(url))
}

// servedResult is a lookup of lookupServed: the request it is the lookup of (its url the
// normalized URL's String()), the result, its key string and, when kept in the memo, the
// memo of its log lines and the recorded head of its answer.
//
// The fields every answer reads come first, res's Key (read by none) last: 3 of its 4 cache
// lines are read per answer, not all 4.
type servedResult struct {
	resultKey           // the request it is the lookup of
	keyStr    string    // res.Key.String()
	line      *lineMemo // nil when the result is not kept
	// head is res.Entry's parsed response head once the proxy answered with it
	// (Server.recordedAnswer), else nil
	head atomic.Pointer[responseHead]
	res  Result
}

// IndexOptions are the optional settings of NewIndex.
type IndexOptions struct {
	// RuleRoot, when set, is the directory (the task repository) that rule file paths are
	// shown relative to in Result.Rule, the log and explanations ("sites/shop.yaml:12").
	// Paths outside it are shown as loaded.
	RuleRoot string
	// SavedIndex, when set, is the path of a saved index file (docs/replay.md, "The saved
	// index"): when it holds the entries computed under SavedKey, NewIndex reads them from it
	// instead of computing them; otherwise it computes them and writes the file (through
	// internal/atomicfile; a write that fails only costs the next start a rebuild).
	// SavedIndexState says which happened.
	SavedIndex string
	// SavedKey is the identity of the recording, rules and pab the saved index must have
	// been computed from (SavedIndexKey); a file of another key is rebuilt and replaced.
	SavedKey SavedIndexKey
	// Opened, when set, is the saved index already opened (OpenSavedIndex, under the key of
	// the bundle's files and the rules) that the bundle was opened from
	// (recording.OpenBundleTable with its Table): NewIndex then reads every lookup from it in
	// place and computes nothing; SavedIndex and SavedKey are not used. It must stay open
	// while the index is used.
	Opened *SavedIndex
}

// indexed is one entry with its key, computed at start.
type indexed struct {
	pos    int // position in entries (recording order)
	e      *recording.Entry
	key    rules.Key // its Method, Host and Path (the parameters and body are in params and keyStr)
	keyStr string
	params []string // "name\x00value" of key.Params, plus the body as one pseudo-pair, sorted
	static bool     // the recorded Content-Type is an image, font, style sheet or script
	https  bool     // recorded with the https scheme
	loc    *redirectLoc
}

// redirectLoc is where a recorded 3xx answer to a GET or HEAD sends the client: its
// Location resolved against the recorded URL, with the key that URL has under the rules.
type redirectLoc struct {
	url   string // normalized absolute URL
	key   string // rules.Key.String() of a request of the entry's method for url
	https bool   // url's scheme is https
}

// redirectsTo reports whether ie is a recorded redirect whose Location has the key ks.
func (ie *indexed) redirectsTo(ks string) bool { return ie.loc != nil && ie.loc.key == ks }

// Result is the answer of Index.Lookup.
type Result struct {
	// Source is SourceExact, SourceSearch, SourcePromo, SourceFuzzy, SourceBlocked or
	// SourceMiss.
	Source Source
	// Entry is the recorded exchange that answers (exact, search, promo, fuzzy), else nil.
	Entry *recording.Entry
	// Note says why an answer is unusual ("excluded by rules", "skipped e000008: redirect
	// to its own key"), or is empty.
	Note string
	// Rule is where the rule that decided is written, "file:line" (file relative to
	// IndexOptions.RuleRoot when inside it; without ":line" when unknown): the endpoint that
	// applied to the request when there is one; otherwise the block pattern (blocked), the
	// exclude pattern (an excluded URL's miss) or the latest pattern (exact and fuzzy
	// answers of latest URLs). Empty when no rule decided.
	Rule string
	// Endpoint is the name of the endpoint that applied to the request, or "".
	Endpoint string
	// Key is the request's normalized key under the rules in effect. (Last: the proxy reads
	// the fields above on every answer, and its memo of results keeps them together.)
	Key rules.Key
}

// NewIndex computes the key of every entry of b under rs and buckets them for lookup:
// by key (exact), by method, host and key path (fuzzy), and by endpoint for search and
// promo candidates. Entries whose URL does not parse as an absolute http(s) URL, whose
// request body cannot be decoded, or that an exclude rule matches are left out (Skipped
// lists them). The index holds b: the bundle must stay open while the index is used. At
// most one IndexOptions is used.
func NewIndex(b *recording.Bundle, rs *rules.Set, opts ...IndexOptions) (*Index, error) {
	if b == nil || rs == nil {
		return nil, fmt.Errorf("new index: bundle and rules are required")
	}
	ix := &Index{
		b:       b,
		rs:      rs,
		exact:   make(map[string]exactSpan),
		dups:    map[string][]int{},
		base:    make(map[string][]int),
		urls:    make(map[string]int),
		skipped: map[string]string{},
		texts:   map[textKey]*textIndex{},
	}
	var opt IndexOptions
	if len(opts) > 0 {
		opt = opts[0]
	}
	ix.root = opt.RuleRoot
	ix.labels = map[*rules.Endpoint]string{}
	for _, f := range rs.Files() {
		for _, ep := range f.Endpoints {
			ix.labels[ep] = ix.label(ep.File, ep.Line)
		}
	}
	if opt.Opened != nil {
		if err := newDiskIndex(ix, opt.Opened); err != nil {
			return nil, err
		}
		ix.setSaved("loaded")
		return ix, nil
	}
	var why error
	if opt.SavedIndex != "" {
		// a bundle opened with its entries: the saved index is read in place all the same
		s, err := OpenSavedIndex(opt.SavedIndex, opt.SavedKey)
		if err == nil {
			if err = newDiskIndex(ix, s); err == nil {
				ix.setSaved("loaded")
				return ix, nil
			}
			s.Close()
		}
		why = err
	}
	n := b.Len()
	out := make([]built, n)
	ix.buildAll(out)
	kept := 0
	for i := range out {
		if out[i].skip == "" {
			kept++
		}
	}
	slab := make([]indexed, kept) // one allocation for every entry's index record
	ix.entries = make([]*indexed, 0, kept)
	for i := range out {
		o := &out[i]
		e := b.Entry(i)
		if o.skip != "" {
			ix.skipped[e.ID] = o.skip
			continue
		}
		pos := len(ix.entries)
		ie := &slab[pos]
		ie.pos, ie.e, ie.keyStr, ie.params, ie.static, ie.https, ie.loc = pos, e, o.keyStr, o.params, o.static, o.https, o.loc
		ie.key.Method, ie.key.Host, ie.key.Path = o.key.Method, o.key.Host, o.key.Path
		ix.entries = append(ix.entries, ie)
		if sp, ok := ix.exact[ie.keyStr]; ok {
			if sp.n == 1 {
				ix.dups[ie.keyStr] = []int{sp.first}
			}
			ix.dups[ie.keyStr] = append(ix.dups[ie.keyStr], pos)
			sp.last, sp.n = pos, sp.n+1
			ix.exact[ie.keyStr] = sp
		} else {
			ix.exact[ie.keyStr] = exactSpan{first: pos, last: pos, n: 1}
		}
		ix.base[o.base] = append(ix.base[o.base], pos)
		if _, ok := ix.urls[o.urlKey]; !ok {
			ix.urls[o.urlKey] = pos
		}
		if o.ep != nil {
			ix.addText(o.ep, o.r, ie, o.base)
		}
		o.r = rules.Request{} // let the request body go; the rest is saved
	}
	for _, t := range ix.texts {
		t.finish()
	}
	if opt.SavedIndex != "" && !b.FromTable() {
		ix.saveAsync(opt.SavedIndex, opt.SavedKey, out, why)
	}
	return ix, nil
}

// Close unmaps the saved index the index reads in place (IndexOptions.Opened), if any:
// no lookup may run afterwards.
func (ix *Index) Close() error {
	if ix.d != nil {
		return ix.d.s.Close()
	}
	return nil
}

// entry is the indexed entry at position p (0 <= p < Len()).
func (ix *Index) entry(p int) *indexed {
	if ix.d != nil {
		return ix.d.entry(ix, p)
	}
	return ix.entries[p]
}

// exactOf returns the positions of the recordings of key string ks, ascending, with their
// span; ok false when there are none.
func (ix *Index) exactOf(ks string) (sp exactSpan, positions []int, ok bool) {
	if ix.d != nil {
		ps := ix.d.run(ix.d.s.exact, ks, func(p int) bool { return ix.d.entry(ix, p).keyStr == ks })
		if len(ps) == 0 {
			return exactSpan{}, nil, false
		}
		return exactSpan{first: ps[0], last: ps[len(ps)-1], n: len(ps)}, ps, true
	}
	sp, ok = ix.exact[ks]
	if !ok {
		return sp, nil, false
	}
	if sp.n > 1 {
		return sp, ix.dups[ks], true
	}
	return sp, nil, true
}

// baseOf returns the positions of the recordings of key base b (method, host, key path),
// ascending.
func (ix *Index) baseOf(b string) []int {
	if ix.d != nil {
		return ix.d.run(ix.d.s.base, b, func(p int) bool { base, _ := ix.d.recordStrings(p); return base == b })
	}
	return ix.base[b]
}

// urlOf returns the first position of the URL key k ("METHOD " + normalized URL).
func (ix *Index) urlOf(k string) (int, bool) {
	if ix.d != nil {
		ps := ix.d.run(ix.d.s.urls, k, func(p int) bool { _, u := ix.d.recordStrings(p); return u == k })
		if len(ps) == 0 {
			return 0, false
		}
		return ps[0], true
	}
	p, ok := ix.urls[k]
	return p, ok
}

// textsOf returns the search or promo candidates of endpoint ep and key base b, or nil.
func (ix *Index) textsOf(ep *rules.Endpoint, b string) *textIndex {
	if ix.d != nil {
		return ix.d.textsOf(ix, ep, b)
	}
	return ix.texts[textKey{ep, b}]
}

// buildAll computes every entry's key and buckets into out. The keys are computed in
// parallel (the rules are read-only), then bucketed in recording order by NewIndex, so the
// index is the same whatever the number of workers.
func (ix *Index) buildAll(out []built) {
	ix.buildRange(out, 0, func(i int) (*recording.Entry, error) { return ix.b.Entry(i), nil })
}

// buildRange computes the keys and buckets of entries first to first+len(out)-1 into out,
// in parallel; entry gives entry i (an entry it cannot give is skipped with its error).
func (ix *Index) buildRange(out []built, first int, entry func(i int) (*recording.Entry, error)) {
	n := len(out)
	workers := min(runtime.GOMAXPROCS(0), max(1, n/2048))
	chunk := (n + workers - 1) / max(1, workers)
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			statics := map[string]bool{}
			for k := lo; k < hi; k++ {
				e, err := entry(first + k)
				if err != nil {
					out[k] = built{skip: err.Error()}
					continue
				}
				ix.build(e, &out[k], statics)
			}
		}()
	}
	wg.Wait()
}

// exactSpan is where the recordings of one key are: the first and last position in
// recording order, and how many there are.
type exactSpan struct{ first, last, n int }

// built is what NewIndex computes for one entry before bucketing it.
type built struct {
	skip   string // why the entry is left out of the index, or ""
	r      rules.Request
	key    rules.Key
	keyStr string
	base   string // key.Base()
	urlKey string // "METHOD " + normalized URL
	params []string
	static bool
	https  bool
	loc    *redirectLoc
	ep     *rules.Endpoint // the search or promo endpoint that applies, else nil
}

// build computes e's key and buckets into o. statics caches staticMime per Content-Type.
func (ix *Index) build(e *recording.Entry, o *built, statics map[string]bool) {
	u, err := parseTargetURL(e.URL)
	if err != nil {
		o.skip = err.Error()
		return
	}
	if ix.rs.Excluded(u) {
		o.skip = noteExcluded
		return
	}
	body, err := ix.b.RequestBody(e)
	if err != nil {
		o.skip = err.Error()
		return
	}
	method := strings.ToUpper(e.Method)
	o.r = rules.Request{Method: method, URL: u, Body: body, ContentType: e.RequestType(body)}
	o.key = ix.rs.Key(o.r)
	o.keyStr, o.base = o.key.String(), o.key.Base()
	o.params = paramStrings(o.key)
	st, ok := statics[e.Mime]
	if !ok {
		st = staticMime(e.Mime)
		statics[e.Mime] = st
	}
	o.static = st
	o.urlKey = method + " " + u.String()
	o.https = u.Scheme == "https"
	o.loc = ix.redirectOf(e, u, method)
	if ep := ix.rs.Endpoint(o.r); ep != nil && (ep.Kind == rules.KindSearch || ep.Kind == rules.KindPromo) {
		o.ep = ep
	}
}

// maxLocation bounds, in bytes, the Location values of recorded redirects that are read.
const maxLocation = 8 << 10

// redirectOf reads where a recorded 3xx answer to a GET or HEAD sends the client (its
// Location field resolved against the recorded URL u, RFC 9110 section 10.2.2), or nil for
// other answers, a missing or unreadable Location, or one that is not http(s).
func (ix *Index) redirectOf(e *recording.Entry, u *url.URL, method string) *redirectLoc {
	if e.Status < 300 || e.Status > 399 || e.Unresolved || (method != "GET" && method != "HEAD") {
		return nil
	}
	resp, err := ix.b.Response(e)
	if err != nil {
		return nil
	}
	raw := strings.TrimSpace(resp.Header.Get("Location"))
	if raw == "" || len(raw) > maxLocation {
		return nil
	}
	ref, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	abs := u.ResolveReference(ref)
	if (abs.Scheme != "http" && abs.Scheme != "https") || abs.Host == "" {
		return nil
	}
	abs = NormalizeURL(abs)
	k := ix.rs.Key(rules.Request{Method: method, URL: abs})
	return &redirectLoc{url: abs.String(), key: k.String(), https: abs.Scheme == "https"}
}

// Len is the number of indexed entries.
func (ix *Index) Len() int {
	if ix.d != nil {
		return ix.d.s.m2
	}
	return len(ix.entries)
}

// Skipped maps the id of every entry left out of the index to the reason.
func (ix *Index) Skipped() map[string]string {
	if ix.d != nil {
		return ix.d.skipped(ix)
	}
	out := make(map[string]string, len(ix.skipped))
	for k, v := range ix.skipped {
		out[k] = v
	}
	return out
}

// Bundle is the bundle the index was built from.
func (ix *Index) Bundle() *recording.Bundle { return ix.b }

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
	return NormalizeURL(u), nil
}

// NormalizeURL returns a copy of u as replay logs and keys it: the scheme and host in lower case, an
// internationalized host name in its A-label form (rules.ASCIIHost), a trailing dot
// dropped from the host name, and the scheme's default port (80 for http, 443 for https)
// removed; other ports stay, so https://site:8443/ and https://site/ are different hosts.
// An empty path becomes "/" and the fragment is dropped. The log's url field is
// NormalizeURL(request URL).String().
func NormalizeURL(u *url.URL) *url.URL {
	c := normalizedURL(u)
	return &c
}

// normalizedURL is NormalizeURL's copy as a value (kept off the heap by a caller that only
// reads it: answerFor, once per request).
func normalizedURL(u *url.URL) url.URL {
	c := *u
	if c.Scheme != "https" && c.Scheme != "http" { // as the shell and net/http set it, mostly
		c.Scheme = strings.ToLower(c.Scheme)
	}
	host, port := splitHostPort(c.Host)
	host, ascii := lowerHost(host)
	host = strings.TrimSuffix(host, ".")
	if !ascii {
		host = strings.TrimSuffix(rules.ASCIIHost(host), ".") // the A-label form browsers send
	}
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
	return c
}

// lowerHost is strings.ToLower(h), and whether that is all ASCII; one pass over a host
// that is already lower-case ASCII (as browsers send it), which is returned as it is.
func lowerHost(h string) (string, bool) {
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			l := strings.ToLower(h) // which may be ASCII when h is not (U+212A KELVIN SIGN is k)
			return l, !strings.ContainsFunc(l, func(r rune) bool { return r >= utf8.RuneSelf })
		}
	}
	return h, true
}

// urlString is u.String() for a URL NormalizeURL returned (so with no fragment), written
// directly when every byte of its host and path is one that String leaves as it is (the
// common case: the log's url field is written once per request); any other URL, one with a
// user, an opaque part or a raw path, goes through String. FuzzURLString compares the two.
func urlString(u *url.URL) string {
	if !plainURL(u) {
		return u.String()
	}
	var b strings.Builder
	b.Grow(len(u.Scheme) + len("://") + len(u.Host) + len(u.Path) + 1 + len(u.RawQuery))
	b.WriteString(u.Scheme)
	b.WriteString("://")
	b.WriteString(u.Host)
	b.WriteString(u.Path)
	if u.ForceQuery || u.RawQuery != "" {
		b.WriteByte('?')
		b.WriteString(u.RawQuery)
	}
	return b.String()
}

// appendURL appends urlString(u) to dst, without a string of it in the common case.
func appendURL(dst []byte, u *url.URL) []byte {
	if !plainURL(u) {
		return append(dst, u.String()...)
	}
	dst = append(append(append(append(dst, u.Scheme...), "://"...), u.Host...), u.Path...)
	if u.ForceQuery || u.RawQuery != "" {
		dst = append(append(dst, '?'), u.RawQuery...)
	}
	return dst
}

// plainURL reports whether urlString may write u directly: no opaque part, user, raw path
// or fragment, a scheme, a host and an absolute path, and every byte of host and path one
// that String leaves as it is.
func plainURL(u *url.URL) bool {
	return u.Opaque == "" && u.User == nil && u.RawPath == "" && !u.OmitHost && u.Fragment == "" && u.Scheme != "" && u.Host != "" &&
		len(u.Path) != 0 && u.Path[0] == '/' && plainURLPart(u.Host, urlHostPlain) && plainURLPart(u.Path, urlPathPlain)
}

// urlHostPlain and urlPathPlain are the bytes net/url writes unescaped in a host and in a
// path (RFC 3986 section 2.3's unreserved characters, and the sub-delimiters and ':', '@'
// and '/' that url.URL.EscapedPath keeps; for the host only letters, digits, '-', '.',
// '_', '~', ':' and the brackets of an IP literal): a narrower set than net/url's own, so
// urlString only writes directly what String would write the same.
var urlHostPlain, urlPathPlain = func() (h, p [256]bool) {
	for c := 0; c < 256; c++ {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		h[c] = alnum || strings.IndexByte("-._~:[]", byte(c)) >= 0
		p[c] = alnum || strings.IndexByte("-._~$&+,/:;=@", byte(c)) >= 0
	}
	return
}()

// plainURLPart reports whether every byte of s is plain in table.
func plainURLPart(s string, table [256]bool) bool {
	for i := 0; i < len(s); i++ {
		if !table[s[i]] {
			return false
		}
	}
	return true
}

// CanonicalURL parses raw and returns it as NormalizeURL writes it, or "" when raw is not
// an absolute http(s) URL.
func CanonicalURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
		return ""
	}
	return NormalizeURL(u).String()
}

// bodyPair is the prefix of the pseudo name=value pair that stands for a request body in
// indexed.params: a body counts as one more parameter, equal or not.
const bodyPair = "\x00#body\x00"

// paramStrings returns the key's query pairs as sorted "name\x00value" strings, plus the
// normalized body as one pseudo-pair when there is one.
func paramStrings(k rules.Key) []string {
	out := make([]string, 0, len(k.Params)+1)
	for _, p := range k.Params {
		out = append(out, p.Name+"\x00"+p.Value)
	}
	if k.Body != "" {
		out = append(out, bodyPair+k.Body)
	}
	sort.Strings(out)
	return out
}

// label renders a rule location "file:line", the file relative to the index's RuleRoot
// when it lies inside it (with forward slashes), else as loaded; "" for no file.
func (ix *Index) label(file string, line int) string {
	if file == "" {
		return ""
	}
	if ix.root != "" {
		if rel, ok := pathx.Rel(ix.root, file); ok {
			file = rel
		}
	}
	if line > 0 {
		return file + ":" + strconv.Itoa(line)
	}
	return file
}

// endpointLabel is label for an endpoint, computed once in NewIndex.
func (ix *Index) endpointLabel(ep *rules.Endpoint) string {
	if s, ok := ix.labels[ep]; ok {
		return s
	}
	return ix.label(ep.File, ep.Line)
}

// xhrRule is where the xhr_not_found answer for host is written, or "".
func (ix *Index) xhrRule(host string) string {
	file, line, ok := ix.rs.XHRNotFoundFrom(host)
	if !ok {
		return ""
	}
	return ix.label(file, line)
}

// entryForURL returns the first recorded GET of rawURL (normalized), or nil. It is used for
// a site's own 404 page (manifest not_found).
func (ix *Index) entryForURL(rawURL string) *recording.Entry {
	u, err := parseTargetURL(rawURL)
	if err != nil {
		return nil
	}
	if p, ok := ix.urlOf("GET " + u.String()); ok {
		return ix.entry(p).e
	}
	// Fall back to the key: the recorded URL may differ in dropped parameters.
	if sp, _, ok := ix.exactOf(ix.rs.Key(rules.Request{Method: "GET", URL: u}).String()); ok {
		return ix.entry(sp.first).e
	}
	return nil
}
