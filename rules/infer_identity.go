package rules

// infer_identity.go: inferred rules, page identity: <link rel="canonical"> and the parameters
// it leaves out (docs/rules.md, "Inferred rules").

import (
	"fmt"
	"slices"
	"strings"
)

// idSegment reports whether a path segment looks like an identifier rather than a word
// or a slug: digits only (3 or more), an ASIN-like code of upper-case letters and digits
// (8 to 20, with digits), a code like Target's "A-12345678", or a UUID or hex id.
func idSegment(s string) bool {
	if len(s) < 3 || len(s) > 64 {
		return false
	}
	if allDigits(s) {
		return true
	}
	if looksRandom(s) {
		return true
	}
	upDigits, digits := true, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if '0' <= c && c <= '9' {
			digits++
		} else if !('A' <= c && c <= 'Z') {
			upDigits = false
		}
	}
	if upDigits && digits > 0 && len(s) >= 8 && len(s) <= 20 {
		return true
	}
	if pfx, num, ok := strings.Cut(s, "-"); ok && len(pfx) >= 1 && len(pfx) <= 3 && len(num) >= 4 && allDigits(num) {
		for i := 0; i < len(pfx); i++ {
			if !('A' <= pfx[i] && pfx[i] <= 'Z') {
				return false
			}
		}
		return true
	}
	return false
}

// canonicalID returns the anchor segment and the id of a canonical path: the last id-like
// segment and the literal segment before it.
func canonicalID(path string) (anchor, id string, ok bool) {
	segs := strings.Split(normPath(path)[1:], "/")
	for i := len(segs) - 1; i >= 1; i-- {
		if idSegment(segs[i]) && !idSegment(segs[i-1]) && segs[i-1] != "" {
			return segs[i-1], segs[i], true
		}
	}
	return "", "", false
}

func (inf *inferrer) identity() {
	type idKey struct{ site, host, anchor string }
	type hit struct {
		o          *obs
		id         string
		suffixed   bool // segments after the id
		canonQuery []string
	}
	hits := map[idKey][]hit{}
	var order []idKey
	for _, o := range inf.obs {
		if !inf.usable(o) || o.page == nil || o.page.canonical == nil || !is2xx(o.s.Status) || o.method != "GET" {
			continue
		}
		if inf.base != nil && inf.base.Endpoint(Request{Method: o.method, URL: o.u}) != nil {
			continue
		}
		anchor, id, ok := canonicalID(urlPath(o.page.canonical))
		if !ok || !literalSegment(anchor) || !literalSegment(id) {
			continue
		}
		segs := strings.Split(o.path[1:], "/")
		at := -1
		for i := 1; i < len(segs); i++ {
			if segs[i-1] == anchor && segs[i] == id {
				at = i
				break
			}
		}
		if at < 0 {
			continue
		}
		var cq []string
		for _, p := range parseParams(o.page.canonical.RawQuery, nil) {
			if !slices.Contains(cq, p.Name) && !strings.Contains(p.Name, "*") && p.Name != "" {
				cq = append(cq, p.Name)
			}
		}
		slices.Sort(cq)
		k := idKey{o.site, o.hostname, anchor}
		if _, ok := hits[k]; !ok {
			order = append(order, k)
		}
		hits[k] = append(hits[k], hit{o: o, id: id, suffixed: at < len(segs)-1, canonQuery: cq})
	}
	for _, k := range order {
		list := hits[k]
		urls := map[string]bool{}
		suffixed := false
		var cq []string
		agree := true
		for i, h := range list {
			urls[h.o.path+"?"+h.o.u.RawQuery] = true
			suffixed = suffixed || h.suffixed
			if i == 0 {
				cq = h.canonQuery
			} else if !slices.Equal(cq, h.canonQuery) {
				agree = false
			}
		}
		if !agree || len(urls) < inf.opts.MinAgree {
			continue
		}
		match := "GET /**/" + k.anchor + "/{id}"
		if suffixed {
			match += "/**"
		}
		key := "/" + k.anchor + "/{id}"
		pat, err := compileEndpointPattern(match, key)
		if err != nil {
			continue
		}
		// Every page of this host the pattern matches must say it is /anchor/{id}.
		contradicted := false
		for _, o := range inf.obs {
			if o.hostname != k.host || !inf.usable(o) || o.page == nil || !is2xx(o.s.Status) {
				continue
			}
			caps, ok := pat.match(o.method, o.path)
			if !ok {
				continue
			}
			if o.page.canonical == nil {
				continue
			}
			if a, id, ok := canonicalID(urlPath(o.page.canonical)); !ok || a != k.anchor || id != caps[0] {
				contradicted = true
				break
			}
		}
		if contradicted {
			continue
		}
		keep := cq
		if keep == nil {
			keep = []string{}
		}
		e := &Endpoint{Name: "page-" + safeSiteName(k.anchor), Match: match, Host: k.host, Key: key, KeepParams: keep}
		ids := map[string]bool{}
		for _, h := range list {
			ids[h.id] = true
		}
		ev := fmt.Sprintf("%d recorded URLs of %d pages name their canonical /%s/{id}, e.g. %s -> %s", len(urls), len(ids), k.anchor, cut(list[0].o.s.URL, 60), cut(list[0].o.page.canonical.String(), 60))
		inf.sites[k.site].endpoints = append(inf.sites[k.site].endpoints, rule{endpoint: e, evidence: ev})
	}
}

// literalSegment reports whether s can stand as a literal segment of an endpoint match.
func literalSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "*{} \t") && s != "**"
}
