package rules

import (
	"net/url"
	"slices"

	"go.yaml.in/yaml/v3"
)

// explain.go holds the matching of the location patterns (block, exclude, latest) that
// Blocked, Excluded, Latest and Set.Route share, and tells which file (and line) a pattern
// or an xhr_not_found comes from, for replay's log and pab inspect: the pattern it names
// is the one that decided.

// noteLines records the line of each item of a list field (block, exclude, latest, ...) and
// the line of a mapping field's value (xhr_not_found), for Origin lookups. It is called by
// the parser for every top-level field.
func (f *File) noteLines(field string, v *yaml.Node) {
	if f.lines == nil {
		f.lines = map[string][]int{}
	}
	switch v.Kind {
	case yaml.SequenceNode:
		ls := make([]int, len(v.Content))
		for i, item := range v.Content {
			ls[i] = item.Line
		}
		f.lines[field] = ls
	default:
		f.lines[field] = []int{v.Line}
	}
}

// itemLine is the line of item i of field in f, or 0 when unknown (a File built in code).
func (f *File) itemLine(field string, i int) int {
	if ls := f.lines[field]; i < len(ls) {
		return ls[i]
	}
	return 0
}

// locKind is one of a site's location lists: block, exclude or latest.
type locKind struct {
	field  string                 // the rule file field that holds its patterns
	of     func(*site) []location // a site's combined list, in precedence order
	inFile func(*File) []string   // a file's patterns as written
}

var (
	locBlock   = &locKind{"block", func(st *site) []location { return st.block }, func(f *File) []string { return f.Block }}
	locExclude = &locKind{"exclude", func(st *site) []location { return st.exclude }, func(f *File) []string { return f.Exclude }}
	locLatest  = &locKind{"latest", func(st *site) []location { return st.latest }, func(f *File) []string { return f.Latest }}
)

// findLocation returns the first pattern of kind that matches t and the site that lists
// it, or nil: the sites in order (others by name, _default last), each site's list in
// precedence order. A pattern whose host part is only stars applies only to the requests
// its site's hosts match (whether the site applies is found once, when first needed).
func (s *Set) findLocation(t target, kind *locKind) (*site, *location) {
	if s == nil {
		return nil, nil
	}
	for _, st := range s.sites {
		applies, known := false, false
		list := kind.of(st)
		for i := range list {
			l := &list[i]
			if l.siteLocal {
				if !known {
					applies, known = st.applies(t.hostPort, t.hostname), true
				}
				if !applies {
					continue
				}
			}
			if l.match(t.hostPort, t.hostname, t.path) {
				return st, l
			}
		}
	}
	return nil, nil
}

// matchOf is findLocation with where the pattern is written: the first file of its site
// (winner first) that lists it, and its line there. It is nil when no pattern matches.
func (s *Set) matchOf(t target, kind *locKind) *Match {
	st, l := s.findLocation(t, kind)
	if l == nil {
		return nil
	}
	for _, f := range st.files {
		if i := slices.Index(kind.inFile(f), l.text); i >= 0 {
			return &Match{File: f.Path, Line: f.itemLine(kind.field, i), Pattern: l.text}
		}
	}
	return &Match{Pattern: l.text} // not reached: every pattern comes from a file
}

// locationBy is matchOf for u, as the four results of BlockedBy and friends.
func (s *Set) locationBy(u *url.URL, kind *locKind) (file string, line int, pattern string, ok bool) {
	m := s.matchOf(newTarget(u), kind)
	if m == nil {
		return "", 0, "", false
	}
	return m.File, m.Line, m.Pattern, true
}

// BlockedBy is Blocked with the reason: the `block` pattern that matches u as written, and
// the path (File.Path) and line of the rule file that lists it. When several files of a
// site list the same pattern, the winning one is named. line is 0 for files built in code.
// Set.Route gives the same verdict as a Match.
func (s *Set) BlockedBy(u *url.URL) (file string, line int, pattern string, ok bool) {
	return s.locationBy(u, locBlock)
}

// ExcludedBy is Excluded with the `exclude` pattern and its file and line (see BlockedBy).
func (s *Set) ExcludedBy(u *url.URL) (file string, line int, pattern string, ok bool) {
	return s.locationBy(u, locExclude)
}

// LatestBy is Latest with the `latest` pattern and its file and line (see BlockedBy).
func (s *Set) LatestBy(u *url.URL) (file string, line int, pattern string, ok bool) {
	return s.locationBy(u, locLatest)
}

// XHRNotFoundFrom names the rule file, and the line of its xhr_not_found, whose answer
// XHRNotFound(host) returns. ok is false when XHRNotFound has none.
func (s *Set) XHRNotFoundFrom(host string) (file string, line int, ok bool) {
	if s == nil {
		return "", 0, false
	}
	hp, hn := normHost(host)
	for _, st := range s.sites {
		if st.xhr == nil || !st.applies(hp, hn) {
			continue
		}
		for _, f := range st.files {
			if f.XHRNotFound == st.xhr {
				return f.Path, f.itemLine("xhr_not_found", 0), true
			}
		}
		return "", 0, true
	}
	return "", 0, false
}
