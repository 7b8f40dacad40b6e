package rules

import (
	"net/url"
	"slices"

	"go.yaml.in/yaml/v3"
)

// explain.go tells which file (and line) a location pattern or an xhr_not_found comes
// from, for replay's log and pab inspect. It reuses the matching of Blocked, Excluded and
// Latest, so the pattern it names is the one that decided.

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

// locationBy finds the first pattern of list that matches u, in the order matchLocation
// tries them, and the file (winner first within a site) that lists it.
func (s *Set) locationBy(u *url.URL, field string, list func(*site) []location, fileList func(*File) []string) (file string, line int, pattern string, ok bool) {
	if s == nil || len(s.sites) == 0 {
		return "", 0, "", false
	}
	t := newTarget(u)
	for _, st := range s.sites {
		for _, l := range list(st) {
			if l.siteLocal && !st.applies(t.hostPort, t.hostname) {
				continue
			}
			if !l.match(t.hostPort, t.hostname, t.path) {
				continue
			}
			for _, f := range st.files {
				if i := slices.Index(fileList(f), l.text); i >= 0 {
					return f.Path, f.itemLine(field, i), l.text, true
				}
			}
			return "", 0, l.text, true // not reached: every pattern comes from a file
		}
	}
	return "", 0, "", false
}

// BlockedBy is Blocked with the reason: the `block` pattern that matches u as written, and
// the path (File.Path) and line of the rule file that lists it. When several files of a
// site list the same pattern, the winning one is named. line is 0 for files built in code.
func (s *Set) BlockedBy(u *url.URL) (file string, line int, pattern string, ok bool) {
	return s.locationBy(u, "block", func(st *site) []location { return st.block }, func(f *File) []string { return f.Block })
}

// ExcludedBy is Excluded with the `exclude` pattern and its file and line (see BlockedBy).
func (s *Set) ExcludedBy(u *url.URL) (file string, line int, pattern string, ok bool) {
	return s.locationBy(u, "exclude", func(st *site) []location { return st.exclude }, func(f *File) []string { return f.Exclude })
}

// LatestBy is Latest with the `latest` pattern and its file and line (see BlockedBy).
func (s *Set) LatestBy(u *url.URL) (file string, line int, pattern string, ok bool) {
	return s.locationBy(u, "latest", func(st *site) []location { return st.latest }, func(f *File) []string { return f.Latest })
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
