package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/pathx"
)

// maxProblemsPerFile bounds the problems reported for one file.
const maxProblemsPerFile = 100

// Problem is one thing wrong with a rule file, as found by CheckFile and CheckDir.
type Problem struct {
	// File is the path of the rule file.
	File string
	// Line is the 1-based line of the problem, 0 when it concerns the whole file.
	Line int
	// Field names what is wrong: a top-level field ("hosts", "xhr_not_found.content_type"),
	// an endpoint ("endpoints[1]", 0-based in file order) or one of its fields
	// ("endpoints[1].key"); "" for the file as a whole (YAML syntax, size, name).
	Field string
	// Message says what is wrong, on one line.
	Message string
}

// String renders the problem as "FILE:LINE: field: message", leaving out the line when it
// is 0 and the field when it is empty.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// CheckFile checks the rule file data read from path and returns every problem found, in
// file order; none when ParseFile accepts it. Where ParseFile stops at the first problem,
// CheckFile goes on: each top-level field, each list item and each endpoint is checked on
// its own, and within an endpoint a bad optional field is set aside so that the rest is
// still checked. The messages are ParseFile's. At most 100 problems are reported per file.
// It does not check what depends on the file's name or on other files (see CheckDir).
func CheckFile(path string, data []byte) []Problem {
	_, perr := ParseFile(path, data)
	if perr == nil {
		return nil
	}
	c := &checker{p: &fileParser{path: path}, path: path}
	if len(data) <= MaxFileSize {
		if root, ok := decodeOne(data); ok {
			c.root(root)
		}
	}
	if len(c.problems) == 0 {
		// A YAML syntax error, a second document, a file too large: ParseFile's one error.
		c.add(perr, "")
	}
	slices.SortStableFunc(c.problems, func(a, b Problem) int { return a.Line - b.Line })
	if len(c.problems) > maxProblemsPerFile {
		c.problems = c.problems[:maxProblemsPerFile]
	}
	return c.problems
}

// decodeOne decodes data as exactly one YAML document, as ParseFile does; ok is false
// when it cannot (syntax error, several documents, empty file).
func decodeOne(data []byte) (root *yaml.Node, ok bool) {
	defer func() {
		if recover() != nil {
			root, ok = nil, false
		}
	}()
	var doc, extra yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, false
	}
	return doc.Content[0], true
}

// checker collects the problems of one file by running the parser on parts of it.
type checker struct {
	p        *fileParser
	path     string
	problems []Problem
}

// add records a parser error under field. The error's "path:line: " prefix gives the line.
// A leading "field NAME: " is cut from the message; outside endpoints NAME is the field.
func (c *checker) add(err error, field string) {
	line, msg := c.split(err)
	if name, tail, ok := fieldPrefix(msg); ok {
		msg = tail
		if !strings.HasPrefix(field, "endpoints[") {
			field = name
		}
	}
	msg = strings.TrimPrefix(msg, "rule file: ")
	c.problems = append(c.problems, Problem{File: c.path, Line: line, Field: field, Message: msg})
}

// split cuts a parser error "path:line: message" (or "path: message") into line and
// message.
func (c *checker) split(err error) (line int, msg string) {
	msg = err.Error()
	rest, ok := strings.CutPrefix(msg, c.path+":")
	if !ok {
		return 0, msg
	}
	num, tail, found := strings.Cut(rest, ": ")
	if n, err := strconv.Atoi(num); found && err == nil {
		return n, tail
	}
	return 0, strings.TrimPrefix(rest, " ")
}

// fieldPrefix splits "field NAME: rest".
func fieldPrefix(msg string) (name, rest string, ok bool) {
	after, ok := strings.CutPrefix(msg, "field ")
	if !ok {
		return "", "", false
	}
	name, rest, ok = strings.Cut(after, ": ")
	if !ok || name == "" || strings.ContainsAny(name, " \"") {
		return "", "", false
	}
	return name, rest, true
}

// mapping and sequence make the small documents the parser is run on.
func mapping(content ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: content}
}

func sequence(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
}

// listFields are the top-level fields whose items are checked one by one.
var listFields = []string{"hosts", "drop_params", "body_drop", "block", "exclude", "latest"}

// root checks the top-level mapping field by field: the key first (known, plain, not
// repeated, no alias), then the value, list items and endpoints one at a time.
func (c *checker) root(root *yaml.Node) {
	if root.Kind != yaml.MappingNode {
		if err := c.p.file(root, &File{}); err != nil {
			c.add(err, "")
		}
		return
	}
	nop := func(string, *yaml.Node) error { return nil }
	first := map[string]int{} // field name -> index of its first pair
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		// The key alone: plain name, known, no alias, no merge key, not a repeat.
		pair := mapping(k, v)
		if j, ok := first[k.Value]; ok && k.Kind == yaml.ScalarNode {
			pair = mapping(root.Content[j], root.Content[j+1], k, v)
		}
		if err := c.p.fields(pair, "rule file", fileFields, nop); err != nil {
			c.add(err, k.Value)
			continue
		}
		first[k.Value] = i
		switch {
		case k.Value == "endpoints" && v.Kind == yaml.SequenceNode:
			c.endpoints(k, v)
		case slices.Contains(listFields, k.Value) && v.Kind == yaml.SequenceNode:
			for _, item := range v.Content {
				if err := c.p.file(mapping(k, sequence(item)), &File{}); err != nil {
					c.add(err, k.Value)
				}
			}
		default:
			if err := c.p.file(mapping(k, v), &File{}); err != nil {
				c.add(err, k.Value)
			}
		}
	}
}

// endpoints checks each endpoint alone, and that names are unique.
func (c *checker) endpoints(k, list *yaml.Node) {
	names := map[string]int{}
	for i, item := range list.Content {
		field := fmt.Sprintf("endpoints[%d]", i)
		c.endpoint(k, item, field)
		name := scalarField(item, "name")
		if name == "" {
			continue
		}
		if prev, ok := names[name]; ok {
			c.problems = append(c.problems, Problem{File: c.path, Line: item.Line, Field: field + ".name",
				Message: fmt.Sprintf("endpoint %q: name already used at line %d", name, prev)})
			continue
		}
		names[name] = item.Line
	}
}

// endpoint checks one endpoint, reporting every bad field: after a problem with an optional
// field, that field is set aside and the endpoint checked again.
func (c *checker) endpoint(k, item *yaml.Node, field string) {
	cur := item
	if item.Kind == yaml.MappingNode {
		cp := *item
		cp.Content = slices.Clone(item.Content)
		cur = &cp
	}
	for range maxProblemsPerFile {
		err := c.p.file(mapping(k, sequence(cur)), &File{})
		if err == nil {
			return
		}
		line, name, removable := c.blame(err)
		if name == "" {
			c.add(err, field)
		} else {
			c.add(err, field+"."+name)
		}
		if !removable || cur.Kind != yaml.MappingNode || !removeField(cur, name, line) {
			return
		}
	}
}

// blame returns the line of a parser error about one endpoint, the endpoint field it is
// about ("" when it is about the endpoint as a whole), and whether that field can be set
// aside to check the rest: not name or match, whose absence is a problem of its own, unless
// the field is a repeated key.
func (c *checker) blame(err error) (line int, field string, removable bool) {
	line, msg := c.split(err)
	if rest, ok := strings.CutPrefix(msg, "endpoint "); ok {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			rest = rest[len(q):]
		}
		msg = strings.TrimPrefix(rest, ": ")
	} else {
		msg = strings.TrimPrefix(msg, "endpoint: ")
	}
	if unknown, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if q, err := strconv.QuotedPrefix(unknown); err == nil {
			field, _ = strconv.Unquote(q)
		}
	} else if name, rest, ok := fieldPrefix(msg); ok {
		field = name
		if strings.HasPrefix(rest, "already set at line ") {
			return line, field, true
		}
	} else if strings.HasPrefix(msg, `match "`) {
		field = "match"
	} else if strings.HasPrefix(msg, `key "`) {
		field = "key"
	}
	return line, field, field != "" && field != "name" && field != "match"
}

// removeField removes the pair with key name from mapping m: the first whose key or value
// is on line, else the last. It reports whether a pair was removed.
func removeField(m *yaml.Node, name string, line int) bool {
	onLine := func(i int) bool { return m.Content[i].Line == line || m.Content[i+1].Line == line }
	at := -1
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == name && (at < 0 || !onLine(at)) {
			at = i
		}
	}
	if at < 0 {
		return false
	}
	m.Content = slices.Delete(m.Content, at, at+2)
	return true
}

// scalarField returns the value of a scalar field of mapping m, "" when absent.
func scalarField(m *yaml.Node, name string) string {
	if m.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == name && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}

// fieldLine returns the line of a top-level field of data, 0 when it cannot tell.
func fieldLine(data []byte, name string) int {
	root, ok := decodeOne(data)
	if !ok || root.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == name {
			return root.Content[i].Line
		}
	}
	return 0
}

// CheckDir checks every rule file of dir (the files ending in .yaml or .yml, hidden files
// skipped) and returns every problem found, sorted by file and line; none means rules.Load
// accepts dir on top of base. Besides each file's content (CheckFile) it checks what Load
// checks for a directory: the .yaml extension, the file name (<site>.yaml or
// <site>.auto.yaml), that a `site` field equals the file's site name, that _default takes
// no hosts, and that every other site has hosts in dir or in one of the base directories
// (the lower layers: the repository's sites/ under a task's rules/). Files are read as Load
// reads them: regular files of at most MaxFileSize bytes, symlinks only within dir.
//
// The error is for dir itself: it cannot be opened or listed. A missing dir has no
// problems, as Load skips it.
func CheckDir(dir string, base ...string) ([]Problem, error) {
	root, names, err := listRulesDir(dir)
	if err != nil || root == nil {
		return nil, err
	}
	defer root.Close()

	var problems []Problem
	hosted := map[string]bool{}     // sites with hosts in dir
	noHosts := map[string]Problem{} // first file of a site without hosts
	var siteOrder []string
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		stem, isYAML := strings.CutSuffix(name, ".yaml")
		if !isYAML {
			var isYML bool
			if stem, isYML = strings.CutSuffix(name, ".yml"); !isYML {
				continue
			}
			problems = append(problems, Problem{File: path, Message: "rule files end in .yaml: rename it " + stem + ".yaml"})
		}
		site, _ := strings.CutSuffix(stem, ".auto")
		if site == "" {
			problems = append(problems, Problem{File: path, Message: "a rule file is named <site>.yaml or <site>.auto.yaml"})
			continue
		}
		data, err := readRuleFile(root, name, path)
		if err != nil {
			problems = append(problems, fileProblem(path, err))
			continue
		}
		if ps := CheckFile(path, data); len(ps) > 0 {
			problems = append(problems, ps...)
			continue
		}
		f, _ := ParseFile(path, data)
		if f.Site != "" && f.Site != site {
			problems = append(problems, Problem{File: path, Line: fieldLine(data, "site"), Field: "site",
				Message: fmt.Sprintf("%q differs from the file name's site %q", f.Site, site)})
		}
		switch {
		case site == DefaultSite && len(f.Hosts) > 0:
			problems = append(problems, Problem{File: path, Line: fieldLine(data, "hosts"), Field: "hosts",
				Message: "_default applies to every host and takes no hosts"})
		case site == DefaultSite:
		case len(f.Hosts) > 0:
			hosted[site] = true
		default:
			if _, ok := noHosts[site]; !ok {
				noHosts[site] = Problem{File: path, Field: "hosts",
					Message: fmt.Sprintf("site %q has no hosts (here or in a lower layer), so its rules apply to no request", site)}
				siteOrder = append(siteOrder, site)
			}
		}
	}
	for _, site := range siteOrder {
		if hosted[site] || baseHasHosts(base, site) {
			continue
		}
		problems = append(problems, noHosts[site])
	}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	if len(problems) == 0 {
		// Whatever else Load refuses is reported too, so that a clean check means a clean load.
		// A problem of a lower layer is left to the check of its own directory.
		if _, err := Load(append(slices.Clone(base), dir)...); err != nil {
			p := fileProblem(dir, err)
			if pathx.Within(p.File, dir) {
				problems = append(problems, p)
			}
		}
	}
	return problems, nil
}

// baseHasHosts reports whether a rule file of site in one of dirs lists hosts. A file
// that exists but cannot be read or parsed counts as having hosts, so that its mistake is
// reported once, by the check of its own directory, rather than as missing hosts here.
func baseHasHosts(dirs []string, site string) bool {
	for _, dir := range dirs {
		for _, name := range []string{site + ".yaml", site + ".auto.yaml"} {
			root, err := os.OpenRoot(dir)
			if err != nil {
				continue
			}
			_, statErr := root.Lstat(name)
			data, err := readRuleFile(root, name, filepath.Join(dir, name))
			root.Close()
			if statErr != nil {
				continue
			}
			if err != nil {
				return true
			}
			if f, err := ParseFile(name, data); err != nil || len(f.Hosts) > 0 {
				return true
			}
		}
	}
	return false
}

// fileProblem turns a "path: message" or "path:line: message" error into a Problem;
// other errors name fallback as the file.
func fileProblem(fallback string, err error) Problem {
	msg := err.Error()
	// The path is what precedes the first ": " or ":<digits>: ".
	if i := strings.Index(msg, ": "); i > 0 {
		head, tail := msg[:i], msg[i+2:]
		if j := strings.LastIndexByte(head, ':'); j > 0 {
			if n, err := strconv.Atoi(head[j+1:]); err == nil {
				return Problem{File: head[:j], Line: n, Message: tail}
			}
		}
		if !strings.Contains(head, " ") {
			return Problem{File: head, Message: tail}
		}
	}
	return Problem{File: fallback, Message: msg}
}
