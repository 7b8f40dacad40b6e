package rules

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/yamlx"
)

// MaxFileSize is the largest rule file accepted, in bytes.
const MaxFileSize = 1 << 20

// File is one parsed rule file (YAML, see docs/rules.md). Lists keep the order of the file;
// patterns have been checked but are stored as written.
type File struct {
	// Path is where the file was read from, as given to ParseFile; errors and explanations
	// name it.
	Path string
	// Site is the optional `site` field: a name for the rules, which must equal the file's
	// base name without .yaml / .auto.yaml when the file is loaded from a directory.
	Site string
	// Hosts are host name patterns (`*` matches any run of characters, case ignored). A
	// pattern with a colon also names the port ("localhost:8080").
	Hosts []string
	// DropParams are query parameter name patterns left out of the key (`*` wildcards, case
	// ignored).
	DropParams []string
	// BodyDrop are request body field name patterns left out of the key, at any depth of a
	// JSON body and among form fields (`*` wildcards, case ignored).
	BodyDrop []string
	// Block, Exclude and Latest are location patterns: a host ("fls-na.amazon.com") or a
	// host/path glob ("www.amazon.com/1/batch/**", doublestar syntax). See Set.Blocked.
	Block   []string
	Exclude []string
	Latest  []string
	// XHRNotFound is the answer for a missed API call; nil when the file has none.
	XHRNotFound *XHRNotFound
	// Endpoints are parsed and checked, and used by the key for match, key and keep_params.
	Endpoints []*Endpoint
	// Digest is the SHA-256 of the bytes ParseFile parsed: what a cache keyed on the rules
	// in effect (the saved lookup index) hashes, so that it names what was loaded, not
	// what the path holds by the time it looks.
	Digest [sha256.Size]byte

	lines map[string][]int // line of each item of a list field, by field name (explain.go)
}

// XHRNotFound is the `xhr_not_found` field: the body and content type replay sends, with
// status 404, for an API request it cannot answer.
type XHRNotFound struct {
	ContentType string
	Body        string
}

// Endpoint kinds (the `kind` field).
const (
	KindSearch   = "search"   // free text, matched by word-set similarity of TextParam
	KindStateful = "stateful" // changes state: a request with a body only matches exactly
	KindPromo    = "promo"    // unknown codes get the answer recorded for InvalidCode
)

// Endpoint is one entry of `endpoints`: a request pattern and how requests that match it are
// keyed and looked up. Optional numbers and booleans are nil when absent so that defaults
// (which depend on the request) can be told apart from written values.
type Endpoint struct {
	// Name identifies the endpoint in logs and explanations; unique within a file.
	Name string
	// Match is "[METHOD] /path": `*` is one path segment, `**` any number of segments and
	// `{x}` one segment captured as x.
	Match string
	// Host, when set, is a host pattern the request host must match.
	Host string
	// Key, when set, replaces the path in the key: a path template using the captures of
	// Match ("/dp/{asin}").
	Key string
	// KeepParams, when non-nil, is the allow-list of query parameter name patterns kept in
	// the key; it beats drop_params. An empty non-nil list keeps no parameter.
	KeepParams []string
	// Kind is "", KindSearch, KindStateful or KindPromo.
	Kind string
	// TextParam names the parameter (query or body field) holding the free text of a search
	// or the code of a promo endpoint.
	TextParam string
	// Similarity is the least word-set similarity, 0 to 1, of a search; nil means 0.6.
	Similarity *float64
	// BodyKeep, when non-nil, lists the body field name patterns that count in the key.
	BodyKeep []string
	// InvalidCode is the promo code whose recording answers unknown codes.
	InvalidCode string
	// Fuzzy allows same-path matching with other parameters; nil means on for requests
	// without a body.
	Fuzzy *bool
	// FuzzyMin is the share of parameters, 0 to 1, a fuzzy match must have in common; nil
	// means 0.5.
	FuzzyMin *float64
	// Line is the line of the endpoint in its file.
	Line int
	// File is the path of the file the endpoint comes from.
	File string

	pat  *endpointPattern
	host *hostPattern
}

// ParseFile parses the rule file data read from path (path is only used in errors and
// File.Path). It is strict: unknown fields, wrong types, bad patterns, YAML aliases, more
// than one document and files larger than MaxFileSize are errors of one line of the form
// "path:line: what is wrong". An empty file is a valid file with no rules.
func ParseFile(path string, data []byte) (f *File, err error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: rule file is %d bytes, more than the limit of %d", path, len(data), MaxFileSize)
	}
	doc, err := yamlx.Parse(path, data, MaxFileSize)
	if err != nil {
		return nil, err
	}
	f = &File{Path: path, Digest: sha256.Sum256(data)}
	if doc == nil {
		return f, nil // empty file or comments only
	}
	p := &fileParser{path: path}
	if err := p.file(doc, f); err != nil {
		return nil, err
	}
	return f, nil
}

type fileParser struct {
	path string
}

func (p *fileParser) errf(n *yaml.Node, format string, args ...any) error {
	return yamlx.Errorf(p.path, n, format, args...)
}

// kindName describes a node's type for error messages.
func kindName(n *yaml.Node) string { return yamlx.KindName(n) }

// fields walks a mapping node, calling set for each key; it refuses duplicates, aliases and
// unknown keys.
func (p *fileParser) fields(n *yaml.Node, what string, known []string, set func(key string, v *yaml.Node) error) error {
	return yamlx.Fields(p.path, n, what, known, set)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var fileFields = []string{"site", "hosts", "drop_params", "body_drop", "block", "exclude", "latest", "xhr_not_found", "endpoints"}

func (p *fileParser) file(doc *yaml.Node, f *File) error {
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	return p.fields(root, "rule file", fileFields, func(key string, v *yaml.Node) error {
		f.noteLines(key, v)
		var err error
		switch key {
		case "site":
			f.Site, err = p.str(key, v)
		case "hosts":
			f.Hosts, err = p.list(key, v, p.checkHost)
		case "drop_params":
			f.DropParams, err = p.list(key, v, checkName)
		case "body_drop":
			f.BodyDrop, err = p.list(key, v, checkName)
		case "block":
			f.Block, err = p.list(key, v, checkLocation)
		case "exclude":
			f.Exclude, err = p.list(key, v, checkLocation)
		case "latest":
			f.Latest, err = p.list(key, v, checkLocation)
		case "xhr_not_found":
			f.XHRNotFound, err = p.xhrNotFound(v)
		case "endpoints":
			f.Endpoints, err = p.endpoints(v)
		}
		return err
	})
}

// str reads a scalar as a string. Numbers are taken as written ("1.0" stays "1.0"); null
// and booleans are refused so that a typo cannot become the word "true".
func (p *fileParser) str(field string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Tag == "!!bool" {
		return "", p.errf(v, "field %s: want a string, got %s", field, kindName(v))
	}
	return v.Value, nil
}

// list reads a sequence of strings, checking each with check. `[]` gives an empty non-nil
// slice; a null value is refused.
func (p *fileParser) list(field string, v *yaml.Node, check func(string) error) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, p.errf(v, "field %s: want a list of strings, got %s", field, kindName(v))
	}
	out := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		s, err := p.str(field, item)
		if err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(s); err != nil {
				return nil, p.errf(item, "field %s: %q: %v", field, s, err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *fileParser) float01(field string, v *yaml.Node) (*float64, error) {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") {
		return nil, p.errf(v, "field %s: want a number from 0 to 1, got %s", field, kindName(v))
	}
	x, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || !(x >= 0 && x <= 1) {
		return nil, p.errf(v, "field %s: want a number from 0 to 1, got %s", field, v.Value)
	}
	return &x, nil
}

func (p *fileParser) boolean(field string, v *yaml.Node) (*bool, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
		return nil, p.errf(v, "field %s: want true or false, got %s", field, kindName(v))
	}
	b, err := strconv.ParseBool(v.Value)
	if err != nil {
		return nil, p.errf(v, "field %s: want true or false, got %s", field, v.Value)
	}
	return &b, nil
}

func (p *fileParser) checkHost(s string) error {
	_, err := compileHostPattern(s)
	return err
}

func (p *fileParser) xhrNotFound(v *yaml.Node) (*XHRNotFound, error) {
	x := &XHRNotFound{}
	seenType := false
	err := p.fields(v, "xhr_not_found", []string{"content_type", "body"}, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "content_type":
			x.ContentType, err = p.str("xhr_not_found.content_type", v)
			seenType = true
		case "body":
			x.Body, err = p.str("xhr_not_found.body", v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !seenType || strings.TrimSpace(x.ContentType) == "" {
		return nil, p.errf(v, "field xhr_not_found: content_type is required")
	}
	return x, nil
}

var endpointFields = []string{"name", "match", "host", "key", "keep_params", "kind", "text_param", "similarity", "body_keep", "invalid_code", "fuzzy", "fuzzy_min"}

func (p *fileParser) endpoints(v *yaml.Node) ([]*Endpoint, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, p.errf(v, "field endpoints: want a list of endpoints, got %s", kindName(v))
	}
	names := map[string]int{}
	var out []*Endpoint
	for _, item := range v.Content {
		e := &Endpoint{Line: item.Line, File: p.path}
		err := p.fields(item, "endpoint", endpointFields, func(key string, v *yaml.Node) error {
			var err error
			switch key {
			case "name":
				e.Name, err = p.str(key, v)
			case "match":
				e.Match, err = p.str(key, v)
			case "host":
				e.Host, err = p.str(key, v)
				if err == nil {
					if herr := p.checkHost(e.Host); herr != nil {
						err = p.errf(v, "field host: %q: %v", e.Host, herr)
					}
				}
			case "key":
				e.Key, err = p.str(key, v)
			case "keep_params":
				e.KeepParams, err = p.list(key, v, checkName)
			case "kind":
				e.Kind, err = p.str(key, v)
				if err == nil && e.Kind != KindSearch && e.Kind != KindStateful && e.Kind != KindPromo {
					err = p.errf(v, "field kind: want search, stateful or promo, got %q", e.Kind)
				}
			case "text_param":
				e.TextParam, err = p.str(key, v)
			case "similarity":
				e.Similarity, err = p.float01(key, v)
			case "body_keep":
				e.BodyKeep, err = p.list(key, v, checkName)
			case "invalid_code":
				e.InvalidCode, err = p.str(key, v)
			case "fuzzy":
				e.Fuzzy, err = p.boolean(key, v)
			case "fuzzy_min":
				e.FuzzyMin, err = p.float01(key, v)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := p.checkEndpoint(item, e); err != nil {
			return nil, err
		}
		if prev, ok := names[e.Name]; ok {
			return nil, p.errf(item, "endpoint %q: name already used at line %d", e.Name, prev)
		}
		names[e.Name] = item.Line
		out = append(out, e)
	}
	return out, nil
}

func (p *fileParser) checkEndpoint(n *yaml.Node, e *Endpoint) error {
	if strings.TrimSpace(e.Name) == "" {
		return p.errf(n, "endpoint: field name is required")
	}
	if e.Match == "" {
		return p.errf(n, "endpoint %q: field match is required", e.Name)
	}
	pat, err := compileEndpointPattern(e.Match, e.Key)
	if err != nil {
		return p.errf(n, "endpoint %q: %v", e.Name, err)
	}
	e.pat = pat
	switch e.Kind {
	case KindSearch, KindPromo:
		if e.TextParam == "" {
			return p.errf(n, "endpoint %q: kind %s needs text_param", e.Name, e.Kind)
		}
	}
	if e.Kind == KindPromo && e.InvalidCode == "" {
		return p.errf(n, "endpoint %q: kind promo needs invalid_code", e.Name)
	}
	return nil
}
