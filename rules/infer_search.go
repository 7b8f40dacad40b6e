package rules

// infer_search.go: inferred rules, searches: endpoints whose text parameter is a search, for
// kind: search (docs/rules.md, "Inferred rules").

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

var suggestWords = []string{"autocomplete", "autosuggest", "complete", "completion", "suggest", "suggestions", "suggestion", "typeahead"}

func (inf *inferrer) searches() {
	type sKey struct{ site, host, path string }
	type sHit struct {
		names []string
		first map[string]string
		count map[string]int
	}
	hits := map[sKey]*sHit{}
	var order []sKey
	for _, o := range inf.obs {
		if !inf.usable(o) || o.method != "GET" || !is2xx(o.s.Status) {
			continue
		}
		if o.mt != "text/html" && o.mt != "application/xhtml+xml" && !isJSONType(o.mt) {
			continue
		}
		if inf.base != nil && inf.base.Endpoint(Request{Method: o.method, URL: o.u}) != nil {
			continue
		}
		segs := strings.Split(o.path[1:], "/")
		if slices.ContainsFunc(segs, func(s string) bool { return s != "" && !literalSegment(s) }) {
			continue
		}
		suggest := slices.ContainsFunc(segs, func(s string) bool {
			for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) }) {
				if slices.Contains(suggestWords, w) {
					return true
				}
			}
			return false
		})
		for _, p := range o.params {
			if !slices.Contains(searchParams, p.Name) || (p.Name == "prefix" && !suggest) {
				continue
			}
			if !hasLetter(p.Value) {
				continue
			}
			k := sKey{o.site, o.hostname, o.path}
			h := hits[k]
			if h == nil {
				h = &sHit{first: map[string]string{}, count: map[string]int{}}
				hits[k] = h
				order = append(order, k)
			}
			if _, ok := h.first[p.Name]; !ok {
				h.names = append(h.names, p.Name)
				h.first[p.Name] = p.Value
			}
			h.count[p.Name]++
		}
	}
	for _, k := range order {
		h := hits[k]
		// The most preferred name of the list wins.
		name := ""
		for _, n := range searchParams {
			if _, ok := h.first[n]; ok {
				name = n
				break
			}
		}
		match := "GET " + k.path
		if _, err := compileEndpointPattern(match, ""); err != nil {
			continue
		}
		base := "search"
		if segs := strings.FieldsFunc(k.path, func(r rune) bool { return r == '/' }); len(segs) > 0 {
			base = "search-" + safeSiteName(segs[len(segs)-1])
		}
		e := &Endpoint{Name: base, Match: match, Host: k.host, Kind: KindSearch, TextParam: name}
		ev := fmt.Sprintf("%d recorded searches in %s, e.g. %s=%s", h.count[name], name, name, short(h.first[name]))
		inf.sites[k.site].endpoints = append(inf.sites[k.site].endpoints, rule{endpoint: e, evidence: ev})
	}
}

func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}
