package rules

import "net/url"

// route.go turns a request into its Route: everything the rules decide from its method,
// host and path (the applicable sites, the endpoint, the block, exclude and latest
// verdicts), computed in one call, and the matching key computed from it.

// Match is a location pattern (block, exclude or latest) that matches a request, and where
// it is written.
type Match struct {
	// File is the path (File.Path) of the rule file that lists the pattern; when several
	// files of a site list it, the winning one.
	File string
	// Line is the 1-based line of the pattern in File, 0 for a file built in code.
	Line int
	// Pattern is the pattern as written ("*.google-analytics.com", "*/cart*").
	Pattern string
}

// Route is what the rules decide about a request from its method, host and path alone
// (never its query or body), as Set.Route computes it. A Route is read-only once made and
// safe for concurrent use; replay keeps one per distinct method, host and path.
type Route struct {
	// Method is the request's method upper-cased ("" is GET).
	Method string
	// Host and Path are the request's normalized host ("name" or "name:port", see HostKey)
	// and path, as the key writes them before an endpoint's key template applies.
	Host, Path string
	// Site is the name of the first site other than _default whose hosts match (see
	// Set.Site), or "" when only _default applies.
	Site string
	// Endpoint is the endpoint that applies to the request (see Set.Endpoint), or nil; for
	// a HEAD without one, the GET's, since a HEAD is also answered as the GET it stands for.
	Endpoint *Endpoint
	// Blocked, Excluded and Latest are the block, exclude and latest patterns that match,
	// or nil (see Set.BlockedBy). Excluded is only looked for when the request is not
	// blocked, and Latest only when it is neither blocked nor excluded.
	Blocked, Excluded, Latest *Match

	hostname string
	sites    []*site   // applicable: other sites by name, _default last
	ep       *Endpoint // the request's own endpoint, for Key
	caps     []string  // ep's captures
	getEp    *Endpoint // for a HEAD: the GET's endpoint, for GETKey
	getCaps  []string
}

// Route computes r's route in one pass: the target is normalized once, the applicable
// sites found once, the endpoints matched (for a HEAD also as a GET), and the location
// patterns tried in the order Blocked, Excluded and Latest try them. r.URL may be nil (an
// empty host and the path "/"). Route never fails; a nil Set gives a route with no site,
// endpoint or verdict.
func (s *Set) Route(r Request) *Route {
	rt := &Route{}
	s.resolve(rt, r)
	if s == nil || len(s.sites) == 0 {
		return rt
	}
	t := target{hostPort: rt.Host, hostname: rt.hostname, path: rt.Path}
	rt.Blocked = s.matchOf(t, locBlock)
	if rt.Blocked == nil {
		rt.Excluded = s.matchOf(t, locExclude)
	}
	if rt.Blocked == nil && rt.Excluded == nil {
		rt.Latest = s.matchOf(t, locLatest)
	}
	return rt
}

// resolve fills rt with what r's key and endpoint need: the method, the normalized target,
// the applicable sites and site name, and the endpoints.
func (s *Set) resolve(rt *Route, r Request) {
	t := newTarget(r.URL)
	rt.Method, rt.Host, rt.hostname, rt.Path = normMethod(r.Method), t.hostPort, t.hostname, t.path
	rt.sites = s.applicable(nil, t.hostPort, t.hostname)
	if len(rt.sites) > 0 && !rt.sites[0].isDefault {
		rt.Site = rt.sites[0].name
	}
	rt.ep, rt.caps = endpointFor(rt.sites, rt.Method, t.hostPort, t.hostname, t.path)
	rt.Endpoint = rt.ep
	if rt.Method == "HEAD" {
		rt.getEp, rt.getCaps = endpointFor(rt.sites, "GET", t.hostPort, t.hostname, t.path)
		if rt.Endpoint == nil {
			rt.Endpoint = rt.getEp
		}
	}
}

// Key computes the matching key of r under rt (see Set.Key): r is the request rt was made
// from, or one with the same method, host and path (only its query, body and content type
// are read). When the request's own endpoint applies, its key template replaces the path,
// its keep_params replaces drop_params and its body_keep limits the body's top-level
// fields. Key never fails: a body it cannot read as structured data is keyed by digest.
func (rt *Route) Key(r Request) Key {
	return keyOf(r, rt.Method, rt.Host, rt.Path, rt.sites, rt.ep, rt.caps)
}

// GETKey is, for the route of a HEAD, the key of the GET the HEAD stands for (r's query
// and body under the GET's endpoint); ok is false for any other method.
func (rt *Route) GETKey(r Request) (k Key, ok bool) {
	if rt.Method != "HEAD" {
		return Key{}, false
	}
	return keyOf(r, "GET", rt.Host, rt.Path, rt.sites, rt.getEp, rt.getCaps), true
}

// keyOf is the one computation of a key: r's query and body for method, under the
// applicable sites sts and the endpoint ep (nil for none) with its captures, the host and
// path already normalized.
func keyOf(r Request, method, host, path string, sts []*site, ep *Endpoint, caps []string) Key {
	u := r.URL
	if u == nil {
		u = &url.URL{}
	}
	k := Key{Method: method, Host: host, Path: path}

	var keep func(string) bool
	switch {
	case ep != nil && ep.KeepParams != nil:
		keepList := ep.KeepParams
		keep = func(name string) bool { return matchAnyName(keepList, name) }
	default:
		for _, st := range sts {
			if len(st.drop) > 0 {
				keep = func(name string) bool {
					for _, st := range sts {
						if st.dropM.match(name) {
							return false
						}
					}
					return true
				}
				break
			}
		}
	}
	k.Params = parseParams(u.RawQuery, keep)
	sortParams(k.Params)

	var bf bodyFilter
	var dropBuf [maxSites]*nameMatcher
	bf.drop = dropBuf[:0]
	for _, st := range sts {
		if len(st.bodyDrop) > 0 {
			bf.drop = append(bf.drop, st.bodyDropM)
		}
	}
	if ep != nil {
		bf.keep = ep.BodyKeep
		k.Path = ep.pat.expand(path, caps)
	}
	k.Body = normBody(r.Body, r.ContentType, &bf)
	return k
}

// Endpoint returns the endpoint that applies to r, or nil: the first whose match (and host,
// when set) fits, trying the sites whose hosts match r's host by name and _default last,
// and within a site the winning file's endpoints first. A HEAD gets its own endpoint only
// (Route.Endpoint falls back to the GET's).
func (s *Set) Endpoint(r Request) *Endpoint {
	t := newTarget(r.URL)
	var buf [maxSites]*site
	e, _ := endpointFor(s.applicable(buf[:0], t.hostPort, t.hostname), normMethod(r.Method), t.hostPort, t.hostname, t.path)
	return e
}

// Key computes the matching key of r under the rules that apply to its host (see Key and
// docs/rules.md): Route(r).Key(r) without the location verdicts. When an endpoint applies,
// its key template replaces the path, its keep_params replaces drop_params and its
// body_keep limits the body's top-level fields. Key never fails: a request it cannot read
// as structured data is keyed by digest.
func (s *Set) Key(r Request) Key {
	t := newTarget(r.URL)
	method := normMethod(r.Method)
	var buf [maxSites]*site
	sts := s.applicable(buf[:0], t.hostPort, t.hostname)
	ep, caps := endpointFor(sts, method, t.hostPort, t.hostname, t.path)
	return keyOf(r, method, t.hostPort, t.path, sts, ep, caps)
}
