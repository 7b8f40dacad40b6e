// Package yamlx holds the strict YAML reading shared by pab's configuration files (rule
// files, grading.yaml): one document, no aliases or merge keys, no unknown or repeated
// fields, and every error as "path:line: message".
package yamlx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse reads data as exactly one YAML document and returns its node. It returns (nil, nil)
// for an empty file or one holding only comments. Data over maxSize bytes, a second
// document, or a YAML syntax error is an error "path:line: message".
func Parse(path string, data []byte, maxSize int) (*yaml.Node, error) {
	if len(data) > maxSize {
		return nil, fmt.Errorf("%s: file is %d bytes, more than the limit of %d", path, len(data), maxSize)
	}
	var doc yaml.Node
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("yaml parser failed: %v", r)
			}
		}()
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&doc); err != nil {
			return err
		}
		var extra yaml.Node
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			if err != nil {
				return err
			}
			return fmt.Errorf("line %d: more than one YAML document", extra.Line)
		}
		return nil
	}()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, Error(path, err)
	}
	return &doc, nil
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// Error turns a yaml.v3 error into one line "path:line: message".
func Error(path string, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "yaml: "))
	// yaml.v3 counts lines from 0 for parser (not scanner) errors and leaves out "line 0".
	for _, p := range parserProblems {
		if strings.HasPrefix(msg, p) {
			line++
			break
		}
	}
	if line > 0 {
		return fmt.Errorf("%s:%d: %s", path, line, msg)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// parserProblems are the messages of yaml.v3's parser errors (parserc.go), whose line
// numbers are 0-based.
var parserProblems = []string{
	"did not find expected",
	"found duplicate %",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// Errorf returns the error "path:line: message" for node n.
func Errorf(path string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", path, n.Line, fmt.Sprintf(format, args...))
}

// KindName describes a node's type for error messages ("a mapping", "a list", "a number",
// "a string", ...).
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return "a string"
	}
	return "unknown YAML"
}

// Fields walks the mapping node n (what names it in errors), calling set for each key in
// order. It refuses a node that is not a mapping, keys that are not plain names, merge keys,
// aliases, repeated keys and keys not in known; set's error is returned as it is.
func Fields(path string, n *yaml.Node, what string, known []string, set func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return Errorf(path, n, "%s: want a mapping, got %s", what, KindName(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return Errorf(path, k, "%s: keys must be plain names, got %s", what, KindName(k))
		}
		if k.Tag == "!!merge" {
			return Errorf(path, k, "%s: merge keys (<<) are not supported", what)
		}
		if v.Kind == yaml.AliasNode {
			return Errorf(path, v, "field %s: YAML aliases are not supported", k.Value)
		}
		if prev, ok := seen[k.Value]; ok {
			return Errorf(path, k, "field %s: already set at line %d", k.Value, prev)
		}
		seen[k.Value] = k.Line
		found := false
		for _, x := range known {
			if x == k.Value {
				found = true
				break
			}
		}
		if !found {
			hint := ""
			if n.Style&yaml.FlowStyle != 0 && v.Tag == "!!null" && v.Value == "" {
				hint = "; a comma inside { } starts a new field: put the value before it in quotes"
			}
			return Errorf(path, k, "%s: unknown field %q (known: %s)%s", what, k.Value, strings.Join(known, ", "), hint)
		}
		if err := set(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}
