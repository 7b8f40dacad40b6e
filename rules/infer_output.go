package rules

// infer_output.go: inferred rules, output: the inferred rules of a site as a YAML rule file
// with its reasons (docs/rules.md, "Inferred rules").

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/textcut"
)

// file renders the site's rules, or returns nil when nothing was inferred.
func (st *siteRules) file() *InferredFile {
	if len(st.drop)+len(st.bodyDrop)+len(st.block)+len(st.exclude)+len(st.endpoints) == 0 {
		return nil
	}
	slices.Sort(st.hosts)
	byValue := func(a, b rule) int { return cmp.Compare(a.value, b.value) }
	for _, l := range [][]rule{st.drop, st.bodyDrop, st.block, st.exclude} {
		slices.SortStableFunc(l, byValue)
	}
	// Endpoints: searches (exact paths) before identity patterns, then by name; names
	// made unique.
	slices.SortStableFunc(st.endpoints, func(a, b rule) int {
		ka, kb := a.endpoint.Kind != KindSearch, b.endpoint.Kind != KindSearch
		if ka != kb {
			if ka {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.endpoint.Name, b.endpoint.Name), cmp.Compare(a.endpoint.Host, b.endpoint.Host), cmp.Compare(a.endpoint.Match, b.endpoint.Match))
	})
	taken := map[string]bool{}
	for _, r := range st.endpoints {
		n := r.endpoint.Name
		for i := 2; taken[n]; i++ {
			n = fmt.Sprintf("%s-%d", r.endpoint.Name, i)
		}
		taken[n] = true
		r.endpoint.Name = n
	}

	doc := &yaml.Node{Kind: yaml.MappingNode}
	doc.HeadComment = "Inferred by pab from this task's recording; rewritten on every import, do not edit.\n" +
		"Corrections go in " + st.name + ".yaml next to this file: hand-written rules win (docs/rules.md)."
	add := func(key string, v *yaml.Node) {
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	}
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	}
	list := func(rs []rule) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, r := range rs {
			item := str(r.value)
			item.LineComment = evidence(r.evidence)
			n.Content = append(n.Content, item)
		}
		return n
	}
	add("site", str(st.name))
	hosts := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, h := range st.hosts {
		hosts.Content = append(hosts.Content, str(h))
	}
	add("hosts", hosts)
	if len(st.drop) > 0 {
		add("drop_params", list(st.drop))
	}
	if len(st.bodyDrop) > 0 {
		add("body_drop", list(st.bodyDrop))
	}
	if len(st.block) > 0 {
		add("block", list(st.block))
	}
	if len(st.exclude) > 0 {
		add("exclude", list(st.exclude))
	}
	if len(st.endpoints) > 0 {
		eps := &yaml.Node{Kind: yaml.SequenceNode}
		for _, r := range st.endpoints {
			e := r.endpoint
			m := &yaml.Node{Kind: yaml.MappingNode, HeadComment: evidence(r.evidence)}
			kv := func(k string, v *yaml.Node) {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
			}
			kv("name", str(e.Name))
			kv("match", str(e.Match))
			if e.Host != "" {
				kv("host", str(e.Host))
			}
			if e.Key != "" {
				kv("key", str(e.Key))
			}
			if e.KeepParams != nil {
				kp := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
				for _, p := range e.KeepParams {
					kp.Content = append(kp.Content, str(p))
				}
				kv("keep_params", kp)
			}
			if e.Kind != "" {
				kv("kind", str(e.Kind))
			}
			if e.TextParam != "" {
				kv("text_param", str(e.TextParam))
			}
			eps.Content = append(eps.Content, m)
		}
		add("endpoints", eps)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}); err != nil {
		return nil
	}
	enc.Close()
	name := AutoFileName(st.name)
	f, err := ParseFile(name, buf.Bytes())
	if err != nil {
		return nil
	}
	return &InferredFile{Site: st.name, Hosts: slices.Clone(st.hosts), YAML: buf.Bytes(), File: f}
}

// short cuts a value for an evidence comment.
func short(v string) string { return cut(v, 32) }

// cut shortens s to about n bytes, marking the cut with "...".
func cut(v string, n int) string { return textcut.Cut(v, n, "...") }

// evidence makes s a one-line comment: valid UTF-8, no control characters, at most
// maxEvidence bytes.
func evidence(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			return ' '
		}
		return r
	}, s)
	return cut(s, maxEvidence)
}
