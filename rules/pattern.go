package rules

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// wildcardMatch reports whether s matches pattern, where `*` matches any run of bytes
// (including none) and every other byte matches itself, ASCII case ignored. It runs in
// O(len(pattern)*len(s)) at worst and allocates nothing.
func wildcardMatch(pattern, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0
	for sx < len(s) {
		if px < len(pattern) {
			c := pattern[px]
			if c == '*' {
				starPx, starSx = px, sx
				px++
				continue
			}
			if lower(c) == lower(s[sx]) {
				px++
				sx++
				continue
			}
		}
		if starPx < 0 {
			return false
		}
		px = starPx + 1
		starSx++
		sx = starSx
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// checkName validates a parameter or body field name pattern.
func checkName(s string) error {
	if s == "" {
		return errors.New("empty name")
	}
	return nil
}

// matchAnyName reports whether name matches one of the patterns.
func matchAnyName(patterns []string, name string) bool {
	for _, p := range patterns {
		if wildcardMatch(p, name) {
			return true
		}
	}
	return false
}

// hostPattern matches a request host. Without a colon it matches the host name alone (any
// port); with one, the host and port as they appear in the key ("localhost:8080").
type hostPattern struct {
	text     string // lower-cased
	withPort bool
}

func compileHostPattern(s string) (hostPattern, error) {
	if strings.TrimSpace(s) == "" {
		return hostPattern{}, errors.New("empty host")
	}
	if strings.ContainsAny(s, "/?# \t") {
		return hostPattern{}, errors.New("a host pattern holds no path, query or spaces")
	}
	// A bracketed IPv6 literal has colons inside the brackets; only a colon after the
	// closing bracket (or anywhere, without brackets) names a port.
	rest := s
	if i := strings.LastIndexByte(s, ']'); i >= 0 {
		rest = s[i+1:]
	}
	return hostPattern{text: asciiHostPattern(strings.ToLower(s)), withPort: strings.Contains(rest, ":")}, nil
}

func (h hostPattern) match(hostPort, hostname string) bool {
	if h.withPort {
		return wildcardMatch(h.text, hostPort)
	}
	return wildcardMatch(h.text, hostname)
}

// location is a compiled block, exclude or latest pattern.
//
// A pattern is a host ("fls-na.amazon.com", "*.doubleclick.net") or a host and path glob
// ("www.amazon.com/1/batch/**", "*/cart*"), matched with doublestar against the key's host
// and normalized path (no query). The host part is what comes before the first '/'.
// When the host part is only stars ("*", "**") the pattern means "any host of this site":
// it applies to the requests the file's hosts match (every request for _default). A pattern
// that spells out its host applies to that host, whichever file it is in, so a site file can
// block the third-party trackers its pages call.
type location struct {
	text      string // as written
	glob      string // host part lower-cased
	hostOnly  bool   // no '/': matches the host alone, any path
	siteLocal bool   // host part is only stars
	withPort  bool   // the host part names a port
}

func checkLocation(s string) error {
	_, err := compileLocation(s)
	return err
}

func compileLocation(s string) (location, error) {
	if strings.TrimSpace(s) == "" {
		return location{}, errors.New("empty pattern")
	}
	if strings.ContainsAny(s, " \t") {
		return location{}, errors.New("a location pattern holds no spaces")
	}
	if strings.Contains(s, "://") {
		return location{}, errors.New("write host or host/path, without a scheme")
	}
	host, path, hasPath := strings.Cut(s, "/")
	if host == "" {
		return location{}, errors.New("the pattern starts with a host (use * for any host of the site)")
	}
	g := asciiHostPattern(strings.ToLower(host))
	if strings.HasPrefix(g, "[") { // an IPv6 literal: its brackets are not a glob class
		g = strings.NewReplacer("[", `\[`, "]", `\]`).Replace(g)
	}
	if hasPath {
		g += "/" + path
	}
	if !doublestar.ValidatePattern(g) {
		return location{}, errors.New("bad glob")
	}
	rest := host
	if i := strings.LastIndexByte(host, ']'); i >= 0 {
		rest = host[i+1:]
	}
	return location{
		text:      s,
		glob:      g,
		hostOnly:  !hasPath,
		siteLocal: strings.Trim(host, "*") == "",
		withPort:  strings.Contains(rest, ":"),
	}, nil
}

// match reports whether the location matches a request with the given normalized host
// (with port when not default), host name (without port) and normalized path.
func (l location) match(hostPort, hostname, path string) bool {
	h := hostname
	if l.withPort {
		h = hostPort
	}
	if l.hostOnly {
		return doublestar.MatchUnvalidated(l.glob, h)
	}
	return doublestar.MatchUnvalidated(l.glob, h+path)
}

// endpointPattern is a compiled endpoint `match` ("[METHOD] /path") with its `key` template.
type endpointPattern struct {
	method   string // "" for any
	segments []segment
	captures []string
	key      []keyPart // nil: keep the request path
	// globstars counts ** segments.
	globstars int
}

type segmentKind uint8

const (
	segLiteral  segmentKind = iota
	segStar                 // one segment
	segGlobstar             // any number of segments
	segCapture              // one segment, captured
)

type segment struct {
	kind segmentKind
	text string // literal text or capture name
}

type keyPart struct {
	literal string
	capture int // index into captures, or -1
}

func isMethodChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isCaptureName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// compileEndpointPattern parses match ("[METHOD] /path") and the key template.
func compileEndpointPattern(match, key string) (*endpointPattern, error) {
	fields := strings.Fields(match)
	ep := &endpointPattern{}
	var path string
	switch len(fields) {
	case 1:
		path = fields[0]
	case 2:
		ep.method = strings.ToUpper(fields[0])
		for i := 0; i < len(ep.method); i++ {
			if !isMethodChar(ep.method[i]) {
				return nil, fmt.Errorf("match %q: bad method %q", match, fields[0])
			}
		}
		path = fields[1]
	default:
		return nil, fmt.Errorf("match %q: want \"[METHOD] /path\"", match)
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("match %q: the path starts with /", match)
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("match %q: the path holds no query; use keep_params", match)
	}
	for _, s := range strings.Split(path[1:], "/") {
		switch {
		case s == "*":
			ep.segments = append(ep.segments, segment{kind: segStar})
		case s == "**":
			ep.segments = append(ep.segments, segment{kind: segGlobstar})
			ep.globstars++
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			name := s[1 : len(s)-1]
			if !isCaptureName(name) {
				return nil, fmt.Errorf("match %q: bad capture %q", match, s)
			}
			if contains(ep.captures, name) {
				return nil, fmt.Errorf("match %q: capture {%s} used twice", match, name)
			}
			ep.captures = append(ep.captures, name)
			ep.segments = append(ep.segments, segment{kind: segCapture, text: name})
		case s == "." || s == "..":
			return nil, fmt.Errorf("match %q: dot segments are not allowed", match)
		case strings.ContainsAny(s, "*{}"):
			return nil, fmt.Errorf("match %q: segment %q mixes text with * or {}: a segment is text, *, ** or {name}", match, s)
		default:
			ep.segments = append(ep.segments, segment{kind: segLiteral, text: normPath("/" + s)[1:]})
		}
	}
	if key == "" {
		return ep, nil
	}
	if !strings.HasPrefix(key, "/") {
		return nil, fmt.Errorf("key %q: the template starts with /", key)
	}
	if strings.ContainsAny(key, "?#*") {
		return nil, fmt.Errorf("key %q: a key template is a path with {captures}", key)
	}
	rest := key
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return nil, fmt.Errorf("key %q: unbalanced }", key)
			}
			ep.key = append(ep.key, keyPart{literal: rest, capture: -1})
			break
		}
		if i > 0 {
			if strings.IndexByte(rest[:i], '}') >= 0 {
				return nil, fmt.Errorf("key %q: unbalanced }", key)
			}
			ep.key = append(ep.key, keyPart{literal: rest[:i], capture: -1})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("key %q: unbalanced {", key)
		}
		name := rest[i+1 : i+j]
		idx := -1
		for k, c := range ep.captures {
			if c == name {
				idx = k
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("key %q: capture {%s} is not in match %q", key, name, match)
		}
		ep.key = append(ep.key, keyPart{capture: idx})
		rest = rest[i+j+1:]
	}
	return ep, nil
}

// match matches a normalized path against the pattern. It returns the captured segments
// (nil when the pattern has none) and whether it matched.
func (ep *endpointPattern) match(method, path string) ([]string, bool) {
	if ep.method != "" && ep.method != method {
		return nil, false
	}
	m := segMatcher{pat: ep.segments, segs: strings.Split(path[1:], "/")}
	if len(ep.captures) > 0 {
		m.caps = make([]string, len(ep.captures))
	}
	if ep.globstars > 0 {
		m.failed = make([]bool, (len(m.pat)+1)*(len(m.segs)+1))
	}
	if !m.run(0, 0, 0) {
		return nil, false
	}
	return m.caps, true
}

// segMatcher matches pattern segments against path segments. A globstar tries the fewest
// segments first; failed states are remembered, so the work is at most
// len(pat)*len(segs) steps whatever the number of globstars.
type segMatcher struct {
	pat    []segment
	segs   []string
	caps   []string
	failed []bool // (pi, si) known not to match; nil when the pattern has no globstar
}

func (m *segMatcher) run(pi, si, capIdx int) bool {
	for pi < len(m.pat) {
		p := m.pat[pi]
		if p.kind == segGlobstar {
			for s := si; s <= len(m.segs); s++ {
				idx := (pi+1)*(len(m.segs)+1) + s
				if m.failed[idx] {
					continue
				}
				if m.run(pi+1, s, capIdx) {
					return true
				}
				m.failed[idx] = true
			}
			return false
		}
		if si == len(m.segs) {
			return false
		}
		seg := m.segs[si]
		switch p.kind {
		case segLiteral:
			if p.text != seg {
				return false
			}
		case segStar:
			if seg == "" {
				return false
			}
		case segCapture:
			if seg == "" {
				return false
			}
			m.caps[capIdx] = seg
			capIdx++
		}
		pi, si = pi+1, si+1
	}
	return si == len(m.segs)
}

// expand builds the key path from the template and the captures; with no template it
// returns path unchanged.
func (ep *endpointPattern) expand(path string, caps []string) string {
	if ep.key == nil {
		return path
	}
	var b strings.Builder
	for _, k := range ep.key {
		if k.capture >= 0 {
			b.WriteString(caps[k.capture])
		} else {
			b.WriteString(k.literal)
		}
	}
	return normPath(b.String())
}

// nameMatcher is a list of name patterns (drop_params, body_drop, keep_params, body_keep)
// compiled for matching: it reports exactly what matchAnyName reports for the same list,
// but checks the cheap forms first. Patterns without `*` go into a set of ASCII-lower-cased
// names, "lit*" (any number of trailing stars) into prefixes, "*lit" into suffixes, a
// pattern of stars alone matches every name, and only the rest is matched with
// wildcardMatch. The zero value matches nothing. A nameMatcher is read-only after
// compileNames and safe for concurrent use.
type nameMatcher struct {
	all      bool                // a pattern of stars alone: every name matches
	exact    map[string]struct{} // ASCII-lower-cased names
	maxExact int                 // longest name in exact
	prefixes []string            // ASCII-lower-cased
	suffixes []string            // ASCII-lower-cased
	general  []string            // as written; wildcardMatch ignores case
}

// compileNames compiles patterns; nil or empty gives a matcher that matches nothing.
func compileNames(patterns []string) *nameMatcher {
	m := &nameMatcher{}
	for _, p := range patterns {
		stars := strings.Count(p, "*")
		switch {
		case stars == 0:
			if m.exact == nil {
				m.exact = make(map[string]struct{})
			}
			m.exact[asciiLower(p)] = struct{}{}
			m.maxExact = max(m.maxExact, len(p))
		case stars == len(p):
			m.all = true
		default:
			lit := strings.Trim(p, "*")
			if strings.Count(lit, "*") > 0 {
				m.general = append(m.general, p)
				continue
			}
			lead := strings.HasPrefix(p, "*")
			trail := strings.HasSuffix(p, "*")
			switch {
			case trail && !lead:
				m.prefixes = append(m.prefixes, asciiLower(lit))
			case lead && !trail:
				m.suffixes = append(m.suffixes, asciiLower(lit))
			default: // "*lit*": a substring; rare, left to the general matcher
				m.general = append(m.general, p)
			}
		}
	}
	return m
}

// match reports whether name matches one of the compiled patterns, ASCII case ignored.
func (m *nameMatcher) match(name string) bool {
	if m == nil {
		return false
	}
	if m.all {
		return true
	}
	if len(m.exact) > 0 && len(name) <= m.maxExact {
		var buf [64]byte
		if len(name) <= len(buf) {
			b := buf[:len(name)]
			for i := 0; i < len(name); i++ {
				b[i] = lower(name[i])
			}
			if _, ok := m.exact[string(b)]; ok { // no allocation: the map index converts in place
				return true
			}
		} else if _, ok := m.exact[asciiLower(name)]; ok {
			return true
		}
	}
	for _, p := range m.prefixes {
		if len(name) >= len(p) && equalFoldASCII(name[:len(p)], p) {
			return true
		}
	}
	for _, s := range m.suffixes {
		if len(name) >= len(s) && equalFoldASCII(name[len(name)-len(s):], s) {
			return true
		}
	}
	for _, p := range m.general {
		if wildcardMatch(p, name) {
			return true
		}
	}
	return false
}

// empty reports whether the matcher matches no name at all.
func (m *nameMatcher) empty() bool {
	return m == nil || !m.all && len(m.exact) == 0 && len(m.prefixes) == 0 && len(m.suffixes) == 0 && len(m.general) == 0
}

// asciiLower lower-cases the ASCII letters of s and leaves every other byte as it is (the
// case folding wildcardMatch does).
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lower(b[j])
			}
			return string(b)
		}
	}
	return s
}

// equalFoldASCII reports whether s equals lowered (already ASCII-lower-cased) with ASCII
// case ignored in s; s and lowered have the same length.
func equalFoldASCII(s, lowered string) bool {
	for i := 0; i < len(s); i++ {
		if lower(s[i]) != lowered[i] {
			return false
		}
	}
	return true
}
