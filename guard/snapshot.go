package guard

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// maxSnapshotBytes bounds the text a snapshot is parsed from.
const maxSnapshotBytes = 4 << 20

// maxSnapshotNodes bounds the nodes kept from one snapshot.
const maxSnapshotNodes = 20000

// SnapNode is one element of a Playwright MCP accessibility snapshot that carries a ref.
type SnapNode struct {
	Ref   string // e12, or f1e3 inside a frame
	Role  string // ARIA role as printed: button, link, textbox, checkbox ...
	Name  string // accessible name ("" when the node has none), unescaped
	URL   string // a link's "/url:" child, when present
	Attrs []string
}

// Snapshot is the parsed form of a browser_snapshot answer.
type Snapshot struct {
	PageURL string              // the "- Page URL:" line, when present
	Nodes   map[string]SnapNode // by ref
}

var (
	refAttrRe = regexp.MustCompile(`^ref=([A-Za-z0-9_-]{1,40})$`)
	roleRe    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,40}$`)
)

// isRefSyntax reports whether s looks like a snapshot ref (e12, f1e3): letters and digits,
// starting with a letter, ending with a digit, at most 40 characters. CSS selectors and
// Playwright locators do not pass.
func isRefSyntax(s string) bool {
	if len(s) == 0 || len(s) > 40 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
			if i == 0 {
				return false
			}
		case r >= 'a' && r <= 'z':
		default:
			return false
		}
	}
	return s[len(s)-1] >= '0' && s[len(s)-1] <= '9'
}

// ParseSnapshot reads the nodes with refs out of a snapshot text (the YAML of
// browser_snapshot, possibly wrapped in Markdown sections). Lines that are not snapshot nodes
// are skipped; it never fails. Every node-line form Playwright (0.0.83) writes is read:
// `- role "name" [attr] [ref=e1]`, with `:` or `: text` after it, and the same key
// single-quoted by YAML (`- 'role "a: b" [ref=e1]': text`, quotes doubled inside). Names are
// JSON strings and may contain escaped quotes; nodes without a name have
// Name "". At most 4 MiB of text and 20000 nodes are read. ok is false when no node with a
// ref was found (the text was not a snapshot).
func ParseSnapshot(text string) (snap *Snapshot, ok bool) {
	if len(text) > maxSnapshotBytes {
		text = text[:maxSnapshotBytes]
	}
	snap = &Snapshot{Nodes: map[string]SnapNode{}}
	type open struct {
		indent int
		ref    string
	}
	var stack []open
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if rest, found := strings.CutPrefix(trimmed, "- Page URL: "); found && snap.PageURL == "" {
			snap.PageURL = strings.TrimSpace(rest)
			continue
		}
		if !strings.HasPrefix(trimmed, "- ") {
			continue
		}
		body := trimmed[2:]
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		if u, found := strings.CutPrefix(body, "/url: "); found {
			if len(stack) > 0 {
				if n, ok := snap.Nodes[stack[len(stack)-1].ref]; ok && n.URL == "" {
					n.URL = unquoteYAML(strings.TrimSpace(u))
					snap.Nodes[n.Ref] = n
				}
			}
			continue
		}
		if strings.HasPrefix(body, "'") {
			// Playwright single-quotes a node's key when YAML needs it (a name holding ": ",
			// " #", braces or a backtick): 'role "name" [ref=e1]' or 'role "name" [ref=e1]': text
			key, _, ok := readSingleQuoted(body)
			if !ok {
				continue
			}
			body = key
		}
		node, ok := parseNodeLine(body)
		if !ok {
			continue
		}
		if len(snap.Nodes) >= maxSnapshotNodes {
			break
		}
		snap.Nodes[node.Ref] = node
		stack = append(stack, open{indent: indent, ref: node.Ref})
	}
	return snap, len(snap.Nodes) > 0
}

// parseNodeLine parses `role "name" [attr] [ref=e1] [cursor=pointer]: text` (the part after
// "- "). Only lines with a ref are nodes.
func parseNodeLine(s string) (SnapNode, bool) {
	var n SnapNode
	i := strings.IndexAny(s, " :[")
	if i < 0 {
		i = len(s)
	}
	n.Role = s[:i]
	if !roleRe.MatchString(n.Role) {
		return n, false
	}
	s = strings.TrimLeft(s[i:], " ")
	if strings.HasPrefix(s, `"`) {
		name, rest, ok := readQuoted(s)
		if !ok {
			return n, false
		}
		n.Name = name
		s = strings.TrimLeft(rest, " ")
	}
	for strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			break
		}
		attr := s[1:end]
		if m := refAttrRe.FindStringSubmatch(attr); m != nil {
			n.Ref = m[1]
		} else if len(n.Attrs) < 16 {
			n.Attrs = append(n.Attrs, attr)
		}
		s = strings.TrimLeft(s[end+1:], " ")
	}
	if n.Ref == "" {
		return n, false
	}
	return n, true
}

// readQuoted reads a double-quoted string with backslash escapes from the start of s and
// returns it unescaped and the rest of s.
func readQuoted(s string) (string, string, bool) {
	esc := false
	for i := 1; i < len(s); i++ {
		switch {
		case esc:
			esc = false
		case s[i] == '\\':
			esc = true
		case s[i] == '"':
			raw := s[:i+1]
			var out string
			if err := json.Unmarshal([]byte(raw), &out); err != nil {
				if u, err := strconv.Unquote(raw); err == nil {
					out = u
				} else {
					out = strings.ReplaceAll(raw[1:len(raw)-1], `\"`, `"`)
				}
			}
			return out, s[i+1:], true
		}
	}
	return "", s, false
}

// readSingleQuoted reads a YAML single-quoted scalar ('...' with ” for a quote) from the
// start of s and returns it unescaped and the rest of s.
func readSingleQuoted(s string) (string, string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", s, false
}

// unquoteYAML removes the quotes of a YAML scalar when it is quoted.
func unquoteYAML(s string) string {
	if strings.HasPrefix(s, `"`) {
		if v, _, ok := readQuoted(s); ok {
			return v
		}
	}
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	return s
}

// refTracker keeps the latest snapshot and, for every ref ever seen, the generation of the
// last snapshot that showed it, so an old ref gets a clear refusal.
type refTracker struct {
	gen    int
	latest *Snapshot
	seen   map[string]int
	valid  bool // false after a page change with no new snapshot
}

func (t *refTracker) update(s *Snapshot) {
	t.gen++
	t.latest = s
	t.valid = true
	if t.seen == nil {
		t.seen = map[string]int{}
	}
	if len(t.seen) > 200000 {
		t.seen = map[string]int{}
	}
	for ref := range s.Nodes {
		t.seen[ref] = t.gen
	}
}

// invalidate marks the latest snapshot as out of date (the page changed).
func (t *refTracker) invalidate() { t.valid = false }

// lookup finds ref in the latest snapshot, or returns the refusal message for the agent.
func (t *refTracker) lookup(ref string) (SnapNode, string) {
	const fresh = " Take a fresh browser_snapshot and use a ref from it."
	if ref == "" {
		return SnapNode{}, "A ref from the latest browser_snapshot is required." + fresh
	}
	if !isRefSyntax(ref) {
		return SnapNode{}, "Only refs from the latest browser_snapshot (like e12) are accepted, not selectors or text." + fresh
	}
	if t.latest == nil {
		return SnapNode{}, "There is no snapshot of this page yet." + fresh
	}
	if !t.valid {
		return SnapNode{}, "The page changed since the latest snapshot, so ref " + ref + " may point elsewhere." + fresh
	}
	if n, ok := t.latest.Nodes[ref]; ok {
		return n, ""
	}
	if g, ok := t.seen[ref]; ok {
		return SnapNode{}, "Ref " + ref + " is stale: it is from snapshot " + strconv.Itoa(g) + ", the latest is snapshot " + strconv.Itoa(t.gen) + "." + fresh
	}
	return SnapNode{}, "Ref " + ref + " is not in the latest snapshot." + fresh
}
