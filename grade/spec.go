// Package grade scores one agent run: the agent's text answer and the JSON Lines log that
// pab replay wrote while the agent browsed. A task's tasks/<id>/grading.yaml says how (see
// docs/grading.md): fields an LLM judge extracts from the answer and the program compares
// (require), yes/no questions the judge answers (checks), requests the agent must or
// must not have made (trace), and, for a run through pab guard, what the guard's trace and
// result must show (guard). Grade writes a Result, saved as result.json and rendered as
// report.html.
package grade

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/yamlx"
)

// MaxGradingSize is the largest grading.yaml accepted, in bytes.
const MaxGradingSize = 1 << 20

// DefaultTolerance is the tolerance of a numeric equals when none is written.
const DefaultTolerance = 0.01

// Field types of extract.
const (
	TypeMoney   = "money"   // an amount of money; the judge copies it as written, pab parses it
	TypeNumber  = "number"  // a number
	TypeText    = "text"    // free text, compared ignoring case and spacing
	TypeBoolean = "boolean" // true or false
)

// Grading is a parsed grading.yaml.
type Grading struct {
	// Path is the file read, as given to ParseGrading; errors name it.
	Path string
	// Extract are the fields the judge extracts from the answer, in file order.
	Extract []*Field
	// Require are the program's comparisons of extracted fields, in file order.
	Require []*Require
	// Checks are yes/no questions the judge answers about the answer.
	Checks []*Check
	// Trace are assertions on the requests in the replay log.
	Trace []*TraceRule
	// NotExecutable are requests that, when the run made them, mean the run could not be
	// carried out as intended (a bot check the recording hit, a page that needs a sign-in):
	// the run is reported with status not_executable instead of a score.
	NotExecutable []*TraceRule
	// Guard grades a run made through pab guard from the guard's trace and result; nil
	// when the file has no guard section.
	Guard *GuardSpec
	// Warnings are lines "path:line: message" about what was read but should be written
	// otherwise (an old field name); the commands that read the file print them.
	Warnings []string
}

// Field is one entry of extract.
type Field struct {
	Name        string
	Type        string // TypeMoney, TypeNumber, TypeText or TypeBoolean
	Description string
	Line        int
}

// Require is one entry of require: tests on one extracted field. Numeric tests are set for
// money and number fields, text tests for text fields, EqualsBool for boolean fields.
type Require struct {
	// ID names the item in the result: the written id, else the field name (with "#2",
	// "#3" for later entries on the same field).
	ID    string
	Field string
	// Equals is the expected number (money, number); Tolerance is the allowed difference
	// (DefaultTolerance when not written).
	Equals    *float64
	Tolerance float64
	Min, Max  *float64
	// OneOfNum are the allowed numbers (money, number).
	OneOfNum []float64
	// EqualsText, OneOfText and Contains are the text tests, compared after NormText.
	EqualsText *string
	OneOfText  []string
	Contains   *string
	// EqualsBool is the expected boolean.
	EqualsBool *bool
	// Evidence is where the expected value appears in the recording; nil when not written.
	Evidence *Evidence
	Line     int
}

// Evidence is a require's evidence: a recorded URL and the text its response holds
// (grading.yaml `evidence:`; `source:` is its old name, still read, with a warning).
type Evidence struct {
	URL  string
	Text string
	Line int
}

// Check is one entry of checks: a yes/no question the judge answers about the answer.
type Check struct {
	ID       string
	Question string
	// Required is true when a "no" scores 0 (the default when no weight is written).
	Required bool
	// Weight is the partial credit of a check that is not required (> 0).
	Weight float64
	Line   int
}

// TraceRule is one entry of trace (or not_executable): exactly one of Must and MustNot is
// set.
type TraceRule struct {
	ID      string
	Reason  string // not_executable only: what the match means, for the report
	Must    *RequestMatch
	MustNot *RequestMatch
	Line    int
}

// RequestMatch selects replay log lines.
type RequestMatch struct {
	// Method matches case-insensitively; "" matches any method.
	Method string
	// URL is a glob over the full URL as logged ("https://host/path?query"): `*` matches any
	// run of characters, including none and "/"; every other character matches itself.
	URL string
	// Hit, when set, requires the request to have been answered from the recording (true:
	// exact, search, promo or fuzzy) or not (false: miss, blocked, preflight).
	Hit *bool
	// Status, when non-zero, is the HTTP status the replay answered.
	Status int
}

// LoadGrading reads and parses the grading file at path.
func LoadGrading(path string) (*Grading, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() > MaxGradingSize {
		return nil, fmt.Errorf("%s: file is %d bytes, more than the limit of %d", path, fi.Size(), MaxGradingSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseGrading(path, data)
}

// ParseGrading parses grading.yaml data; path names the file in errors, which read
// "path:line: message". Unknown fields, wrong types, tests that do not fit a field's type,
// duplicate ids and a grading with none of require, checks, trace and guard are errors.
func ParseGrading(path string, data []byte) (*Grading, error) {
	if !utf8.Valid(data) {
		line := 1 + bytes.Count(data[:firstInvalidUTF8(data)], []byte("\n"))
		return nil, fmt.Errorf("%s:%d: not UTF-8 text (save the file as UTF-8)", path, line)
	}
	doc, err := yamlx.Parse(path, data, MaxGradingSize)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, fmt.Errorf("%s: empty grading file: it needs at least one of require, checks, trace or guard", path)
	}
	p := &gparser{path: path, g: &Grading{Path: path}, ids: map[string]int{}}
	root := doc
	var pendingGuard *yaml.Node
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	err = yamlx.Fields(path, root, "grading", []string{"extract", "require", "checks", "trace", "not_executable", "guard"}, func(key string, v *yaml.Node) error {
		switch key {
		case "extract":
			return p.extract(v)
		case "require":
			return p.list(v, "require", p.require)
		case "checks":
			return p.list(v, "checks", p.check)
		case "trace":
			return p.list(v, "trace", func(n *yaml.Node) error { return p.trace(n, false) })
		case "not_executable":
			return p.list(v, "not_executable", func(n *yaml.Node) error { return p.trace(n, true) })
		case "guard":
			pendingGuard = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The guard section names its items after every written id is known.
	if pendingGuard != nil {
		if err := p.guardSection(pendingGuard); err != nil {
			return nil, err
		}
	}
	g := p.g
	if len(g.Require)+len(g.Checks)+len(g.Trace) == 0 && g.Guard == nil {
		return nil, fmt.Errorf("%s:%d: a grading needs at least one of require, checks, trace or guard", path, root.Line)
	}
	// Requires may come before extract in the file: check their fields now.
	for _, r := range p.pending {
		if err := p.checkRequire(r.node, r.req, r.tests); err != nil {
			return nil, err
		}
	}
	// Give requires without an id the field name, numbered when a field has several.
	seen := map[string]int{}
	for _, r := range g.Require {
		if r.ID != "" {
			continue
		}
		seen[r.Field]++
		id := r.Field
		if n := seen[r.Field]; n > 1 {
			id += "#" + strconv.Itoa(n)
		}
		if prev, ok := p.ids[id]; ok {
			return nil, fmt.Errorf("%s:%d: require on field %s gets the id %q, already used at line %d; give it an id", path, r.Line, r.Field, id, prev)
		}
		p.ids[id] = r.Line
		r.ID = id
	}
	return g, nil
}

// firstInvalidUTF8 returns the offset of the first byte that is not part of valid UTF-8.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

type gparser struct {
	path    string
	g       *Grading
	ids     map[string]int // item id -> line
	pending []pendingRequire
}

type pendingRequire struct {
	node  *yaml.Node
	req   *Require
	tests map[string]*yaml.Node
}

func (p *gparser) errf(n *yaml.Node, format string, args ...any) error {
	return yamlx.Errorf(p.path, n, format, args...)
}

func (p *gparser) list(v *yaml.Node, field string, item func(*yaml.Node) error) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return p.errf(v, "field %s: want a list, got %s", field, yamlx.KindName(v))
	}
	for _, n := range v.Content {
		if n.Kind == yaml.AliasNode {
			return p.errf(n, "field %s: YAML aliases are not supported", field)
		}
		if err := item(n); err != nil {
			return err
		}
	}
	return nil
}

func (p *gparser) str(field string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Tag == "!!map" {
		return "", p.errf(v, "field %s: want a string, got %s", field, yamlx.KindName(v))
	}
	return v.Value, nil
}

func (p *gparser) text(field string, v *yaml.Node) (string, error) {
	s, err := p.str(field, v)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", p.errf(v, "field %s: must not be empty", field)
	}
	return s, nil
}

func (p *gparser) num(field string, v *yaml.Node) (float64, error) {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") {
		return 0, p.errf(v, "field %s: want a number, got %s", field, yamlx.KindName(v))
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, p.errf(v, "field %s: want a finite number, got %q", field, v.Value)
	}
	return f, nil
}

func (p *gparser) boolean(field string, v *yaml.Node) (bool, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
		return false, p.errf(v, "field %s: want true or false, got %s", field, yamlx.KindName(v))
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		return false, p.errf(v, "field %s: want true or false, got %q", field, v.Value)
	}
	return b, nil
}

// id checks an item id: a name of letters, digits, '_', '-' and '.', unique in the file.
func (p *gparser) id(field string, v *yaml.Node) (string, error) {
	s, err := p.text(field, v)
	if err != nil {
		return "", err
	}
	if len(s) > 100 {
		return "", p.errf(v, "field %s: at most 100 characters", field)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", p.errf(v, "field %s: %q: use letters, digits, '_', '-' and '.'", field, s)
		}
	}
	if prev, ok := p.ids[s]; ok {
		return "", p.errf(v, "field %s: %q is already used at line %d", field, s, prev)
	}
	p.ids[s] = v.Line
	return s, nil
}

func (p *gparser) extract(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return p.errf(v, "field extract: want a mapping of field names, got %s", yamlx.KindName(v))
	}
	names := make([]string, 0, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		names = append(names, v.Content[i].Value)
	}
	return yamlx.Fields(p.path, v, "extract", names, func(name string, fv *yaml.Node) error {
		if err := checkName(name); err != nil {
			return p.errf(fv, "extract: field name %q: %v", name, err)
		}
		f := &Field{Name: name, Line: fv.Line}
		err := yamlx.Fields(p.path, fv, "extract field "+name, []string{"type", "description"}, func(key string, x *yaml.Node) error {
			var err error
			switch key {
			case "type":
				f.Type, err = p.str("type", x)
				if err == nil && f.Type != TypeMoney && f.Type != TypeNumber && f.Type != TypeText && f.Type != TypeBoolean {
					err = p.errf(x, "field type: want money, number, text or boolean, got %q", f.Type)
				}
			case "description":
				f.Description, err = p.text("description", x)
			}
			return err
		})
		if err != nil {
			return err
		}
		if f.Type == "" {
			return p.errf(fv, "extract field %s: type is missing (money, number, text or boolean)", name)
		}
		if f.Description == "" {
			return p.errf(fv, "extract field %s: description is missing (the judge reads it to find the value)", name)
		}
		p.g.Extract = append(p.g.Extract, f)
		return nil
	})
}

// checkName accepts extract field names the judge can return as JSON keys unambiguously.
func checkName(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("want 1 to 64 characters")
	}
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("use letters, digits and '_', starting with a letter or '_'")
		}
	}
	return nil
}

func (p *gparser) field(name string) *Field {
	for _, f := range p.g.Extract {
		if f.Name == name {
			return f
		}
	}
	return nil
}

var requireFields = []string{"id", "field", "equals", "tolerance", "min", "max", "one_of", "contains", "evidence", "source"}

func (p *gparser) require(n *yaml.Node) error {
	r := &Require{Line: n.Line, Tolerance: DefaultTolerance}
	tests := map[string]*yaml.Node{}
	err := yamlx.Fields(p.path, n, "require entry", requireFields, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "id":
			r.ID, err = p.id("id", v)
		case "field":
			r.Field, err = p.text("field", v)
		case "evidence", "source":
			if r.Evidence != nil {
				return p.errf(v, "require entry: give evidence once (source is its old name)")
			}
			r.Evidence, err = p.evidence(key, v)
			if err == nil && key == "source" {
				p.g.Warnings = append(p.g.Warnings, fmt.Sprintf("%s:%d: require.source is the old name of require.evidence; it is read the same (rename it to evidence)", p.path, v.Line))
			}
		default:
			tests[key] = v
		}
		return err
	})
	if err != nil {
		return err
	}
	if r.Field == "" {
		return p.errf(n, "require entry: field is missing (the name of an extract field)")
	}
	p.g.Require = append(p.g.Require, r)
	p.pending = append(p.pending, pendingRequire{node: n, req: r, tests: tests})
	return nil
}

// checkRequire reads a require's tests once the field's type is known.
func (p *gparser) checkRequire(n *yaml.Node, r *Require, tests map[string]*yaml.Node) error {
	f := p.field(r.Field)
	if f == nil {
		names := make([]string, 0, len(p.g.Extract))
		for _, f := range p.g.Extract {
			names = append(names, f.Name)
		}
		if len(names) == 0 {
			return p.errf(n, "require: field %q is not in extract (extract has no fields: add one)", r.Field)
		}
		return p.errf(n, "require: field %q is not in extract (extract has: %s)", r.Field, strings.Join(names, ", "))
	}
	allowed := map[string][]string{
		TypeMoney:   {"equals", "tolerance", "min", "max", "one_of"},
		TypeNumber:  {"equals", "tolerance", "min", "max", "one_of"},
		TypeText:    {"equals", "one_of", "contains"},
		TypeBoolean: {"equals"},
	}[f.Type]
	order := []string{"equals", "tolerance", "min", "max", "one_of", "contains"}
	nTests := 0
	for _, key := range order {
		v, ok := tests[key]
		if !ok {
			continue
		}
		okKey := false
		for _, a := range allowed {
			okKey = okKey || a == key
		}
		if !okKey {
			return p.errf(v, "require on %s: %s does not apply to a %s field (use %s)", r.Field, key, f.Type, strings.Join(allowed, ", "))
		}
		if key != "tolerance" {
			nTests++
		}
		var err error
		switch f.Type {
		case TypeMoney, TypeNumber:
			err = p.numTest(key, v, r, f.Type)
		case TypeText:
			err = p.textTest(key, v, r)
		case TypeBoolean:
			var b bool
			b, err = p.boolean(key, v)
			r.EqualsBool = &b
		}
		if err != nil {
			return err
		}
	}
	if nTests == 0 {
		return p.errf(n, "require on %s: no test (a %s field takes %s)", r.Field, f.Type, strings.Join(allowed, ", "))
	}
	if _, ok := tests["tolerance"]; ok && r.Equals == nil && r.OneOfNum == nil {
		return p.errf(tests["tolerance"], "require on %s: tolerance needs equals or one_of", r.Field)
	}
	if r.Min != nil && r.Max != nil && *r.Min > *r.Max {
		return p.errf(n, "require on %s: min %v is above max %v", r.Field, *r.Min, *r.Max)
	}
	return nil
}

// numValue reads a number, or for a money field also a string with an amount ("$278.00").
func (p *gparser) numValue(key string, v *yaml.Node, typ string) (float64, error) {
	if typ == TypeMoney && v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
		m, err := ParseMoney(v.Value)
		if err != nil {
			return 0, p.errf(v, "field %s: want an amount of money such as 54.23 or \"£54.23\", got %q", key, v.Value)
		}
		return m.Amount, nil
	}
	return p.num(key, v)
}

func (p *gparser) numTest(key string, v *yaml.Node, r *Require, typ string) error {
	switch key {
	case "equals", "min", "max":
		f, err := p.numValue(key, v, typ)
		if err != nil {
			return err
		}
		switch key {
		case "equals":
			r.Equals = &f
		case "min":
			r.Min = &f
		case "max":
			r.Max = &f
		}
	case "tolerance":
		f, err := p.num(key, v)
		if err != nil {
			return err
		}
		if f < 0 {
			return p.errf(v, "field tolerance: must not be negative, got %v", f)
		}
		r.Tolerance = f
	case "one_of":
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return p.errf(v, "field one_of: want a non-empty list, got %s", yamlx.KindName(v))
		}
		for _, x := range v.Content {
			f, err := p.numValue("one_of", x, typ)
			if err != nil {
				return err
			}
			r.OneOfNum = append(r.OneOfNum, f)
		}
	}
	return nil
}

func (p *gparser) textTest(key string, v *yaml.Node, r *Require) error {
	switch key {
	case "equals", "contains":
		s, err := p.text(key, v)
		if err != nil {
			return err
		}
		if key == "equals" {
			r.EqualsText = &s
		} else {
			r.Contains = &s
		}
	case "one_of":
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return p.errf(v, "field one_of: want a non-empty list, got %s", yamlx.KindName(v))
		}
		for _, x := range v.Content {
			s, err := p.text("one_of", x)
			if err != nil {
				return err
			}
			r.OneOfText = append(r.OneOfText, s)
		}
	}
	return nil
}

func (p *gparser) evidence(name string, v *yaml.Node) (*Evidence, error) {
	s := &Evidence{Line: v.Line}
	err := yamlx.Fields(p.path, v, name, []string{"url", "text"}, func(key string, x *yaml.Node) error {
		var err error
		switch key {
		case "url":
			s.URL, err = p.text("url", x)
			if err == nil && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
				err = p.errf(x, "field url: want an absolute http or https URL, got %q", s.URL)
			}
		case "text":
			s.Text, err = p.text("text", x)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.URL == "" || s.Text == "" {
		return nil, p.errf(v, "%s: needs both url and text", name)
	}
	return s, nil
}

func (p *gparser) check(n *yaml.Node) error {
	c := &Check{Line: n.Line}
	var required *bool
	hasWeight := false
	err := yamlx.Fields(p.path, n, "check", []string{"id", "question", "required", "weight"}, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "id":
			c.ID, err = p.id("id", v)
		case "question":
			c.Question, err = p.text("question", v)
		case "required":
			var b bool
			b, err = p.boolean("required", v)
			required = &b
		case "weight":
			c.Weight, err = p.num("weight", v)
			if err == nil && !(c.Weight > 0) {
				err = p.errf(v, "field weight: must be above 0, got %v", c.Weight)
			}
			hasWeight = true
		}
		return err
	})
	if err != nil {
		return err
	}
	if c.ID == "" {
		return p.errf(n, "check: id is missing")
	}
	if c.Question == "" {
		return p.errf(n, "check %s: question is missing", c.ID)
	}
	switch {
	case hasWeight && required != nil && *required:
		return p.errf(n, "check %s: a required check has no weight (a \"no\" scores 0); drop one of required and weight", c.ID)
	case hasWeight:
		c.Required = false
	case required != nil && !*required:
		c.Weight = 1 // not required and no weight written: partial credit of 1
	default:
		c.Required = true
	}
	p.g.Checks = append(p.g.Checks, c)
	return nil
}

func (p *gparser) trace(n *yaml.Node, notExec bool) error {
	t := &TraceRule{Line: n.Line}
	known := []string{"id", "must", "must_not"}
	what := "trace entry"
	if notExec {
		known = []string{"id", "reason", "when"}
		what = "not_executable entry"
	}
	err := yamlx.Fields(p.path, n, what, known, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "id":
			t.ID, err = p.id("id", v)
		case "reason":
			t.Reason, err = p.text("reason", v)
		case "must", "when":
			t.Must, err = p.match(key, v)
		case "must_not":
			t.MustNot, err = p.match(key, v)
		}
		return err
	})
	if err != nil {
		return err
	}
	if t.ID == "" {
		return p.errf(n, "%s: id is missing", what)
	}
	switch {
	case notExec && t.Must == nil:
		return p.errf(n, "not_executable %s: when is missing (the request that shows the run could not go on)", t.ID)
	case !notExec && (t.Must == nil) == (t.MustNot == nil):
		return p.errf(n, "trace %s: give exactly one of must and must_not", t.ID)
	}
	if notExec {
		p.g.NotExecutable = append(p.g.NotExecutable, t)
	} else {
		p.g.Trace = append(p.g.Trace, t)
	}
	return nil
}

func (p *gparser) match(field string, v *yaml.Node) (*RequestMatch, error) {
	m := &RequestMatch{}
	err := yamlx.Fields(p.path, v, field, []string{"method", "url", "hit", "status"}, func(key string, x *yaml.Node) error {
		var err error
		switch key {
		case "method":
			m.Method, err = p.text("method", x)
			if err == nil {
				for _, c := range m.Method {
					if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
						return p.errf(x, "field method: want an HTTP method such as GET or POST, got %q", m.Method)
					}
				}
				m.Method = strings.ToUpper(m.Method)
			}
		case "url":
			m.URL, err = p.text("url", x)
		case "hit":
			var b bool
			b, err = p.boolean("hit", x)
			m.Hit = &b
		case "status":
			var f float64
			f, err = p.num("status", x)
			if err == nil && (f != math.Trunc(f) || f < 100 || f > 999) {
				err = p.errf(x, "field status: want an HTTP status from 100 to 999, got %v", f)
			}
			m.Status = int(f)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.URL == "" {
		return nil, p.errf(v, "%s: url is missing (a glob over the full URL, e.g. \"*/cart/add*\")", field)
	}
	return m, nil
}
