package rules

// infer_volatile.go: inferred rules, volatile parameters: query and body fields that change on
// every visit, to drop from the key (docs/rules.md, "Inferred rules").

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/internal/jsonx"
)

// field is a query parameter or a request body field of one sample.
type field struct {
	name, leaf, value string
}

func (inf *inferrer) baseDrops(o *obs, name string, body bool) bool {
	if inf.base == nil {
		return false
	}
	var buf [maxSites]*site
	for _, st := range inf.base.applicable(buf[:0], o.hostPort, o.hostname) {
		list := st.drop
		if body {
			list = st.bodyDrop
		}
		if matchAnyName(list, name) {
			return true
		}
	}
	return false
}

// queryFields and bodyFields list o's parameters not already dropped by base.
func (inf *inferrer) queryFields(o *obs) []field {
	var out []field
	for _, p := range o.params {
		if !inf.baseDrops(o, p.Name, false) {
			out = append(out, field{name: p.Name, leaf: p.Name, value: p.Value})
		}
	}
	return out
}

func (inf *inferrer) bodyFields(o *obs) []field {
	b := o.s.ReqBody
	if len(b) == 0 || len(b) > MaxStructuredBody {
		return nil
	}
	var out []field
	mt := httpx.MediaType(o.s.ReqContentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		for _, p := range parseParams(string(b), nil) {
			out = append(out, field{name: p.Name, leaf: p.Name, value: p.Value})
		}
	case isJSONType(mt) || looksLikeJSON(b):
		if jsonx.Depth(b, MaxJSONDepth) > MaxJSONDepth {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil
		}
		flatten(v, "", "", &out)
	}
	kept := out[:0]
	for _, f := range out {
		if !inf.baseDrops(o, f.leaf, true) {
			kept = append(kept, f)
		}
	}
	return kept
}

// flatten lists the scalar members of a JSON value: name is the dotted path, leaf the
// member name (array elements have the leaf of their array).
func flatten(v any, path, leaf string, out *[]field) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			flatten(x[k], path+"."+k, k, out)
		}
	case []any:
		for i, e := range x {
			flatten(e, path+"."+strconv.Itoa(i), leaf, out)
		}
	case string:
		if leaf != "" {
			*out = append(*out, field{name: path, leaf: leaf, value: x})
		}
	case json.Number:
		if leaf != "" {
			*out = append(*out, field{name: path, leaf: leaf, value: x.String()})
		}
	}
}

// volatileCase is the evidence gathered for one parameter name at one request path.
type volatileCase struct {
	site, leaf, where string
	values            []string
	times             []time.Time
	allRandom         bool
	allStamps         bool
	unchanged         int  // groups where other values left the response unchanged
	changed           bool // a group where another value changed the response
}

// why is the evidence that c's parameter is volatile: its values are timestamps near the
// recording, or random-looking and all distinct, or other values left the response
// unchanged (unless the name matters elsewhere on the site); "" when none holds.
func (c *volatileCase) why(matters bool) string {
	distinct := len(c.values) >= 2
	seenVals := map[string]bool{}
	for _, v := range c.values {
		if seenVals[v] {
			distinct = false
		}
		seenVals[v] = true
	}
	switch {
	case c.allStamps:
		return fmt.Sprintf("epoch time within a day of the recording (%s)", short(c.values[0]))
	case c.allRandom && distinct:
		return fmt.Sprintf("%d loads, a new random-looking value each time (%s, %s)", len(c.values), short(c.values[0]), short(c.values[1]))
	case c.unchanged > 0 && !matters:
		return fmt.Sprintf("other values left the response unchanged (%s, %s)", short(c.values[0]), short(c.values[len(c.values)-1]))
	}
	return ""
}

// volatileRestKey is everything of a request but its field fs[i], in a stable form: the
// method, host, path and the field's name, the other fields of fs, then those of other.
func volatileRestKey(method, hostPort, path string, fs []field, i int, other []field) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\x00%s\x00%s\x00%s", method, hostPort, path, fs[i].name)
	for j, g := range fs {
		if j != i {
			fmt.Fprintf(&sb, "\x00%s=%s", g.name, g.value)
		}
	}
	sb.WriteString("\x01")
	for _, g := range other {
		fmt.Fprintf(&sb, "\x00%s=%s", g.name, g.value)
	}
	return sb.String()
}

func (inf *inferrer) volatile() {
	for _, body := range []bool{false, true} {
		inf.volatileKind(body)
	}
}

// volatileKind finds the volatile parameters of the query (body false) or of the body
// (true) and adds them to the sites' drop (bodyDrop) rules with their evidence.
func (inf *inferrer) volatileKind(body bool) {
	type groupKey struct{ site, method, host, path, name string }
	cases := map[groupKey]*volatileCase{}
	var order []groupKey
	type restEntry struct {
		value, digest string
		size          int64
		status        int
	}
	rest := map[string][]restEntry{} // key: group + everything else of the request
	var restOrder []string
	restCase := map[string]groupKey{}
	for _, o := range inf.obs {
		if !inf.usable(o) {
			continue
		}
		var fs, other []field
		if body {
			fs, other = inf.bodyFields(o), inf.queryFields(o)
		} else {
			fs, other = inf.queryFields(o), inf.bodyFields(o)
		}
		for i, f := range fs {
			if f.leaf == "" || strings.Contains(f.leaf, "*") || slices.Contains(searchParams, f.leaf) {
				continue
			}
			gk := groupKey{o.site, o.method, o.hostPort, o.path, f.name}
			c := cases[gk]
			if c == nil {
				c = &volatileCase{site: o.site, leaf: f.leaf, where: o.method + " " + o.hostPort + o.path, allRandom: true, allStamps: true}
				cases[gk] = c
				order = append(order, gk)
			}
			c.values = append(c.values, f.value)
			c.times = append(c.times, o.s.Time)
			c.allRandom = c.allRandom && looksRandom(f.value)
			c.allStamps = c.allStamps && nearTimestamp(f.value, o.s.Time)
			rk := volatileRestKey(o.method, o.hostPort, o.path, fs, i, other)
			if _, ok := rest[rk]; !ok {
				restOrder = append(restOrder, rk)
				restCase[rk] = gk
			}
			rest[rk] = append(rest[rk], restEntry{value: f.value, digest: o.digest, size: o.size, status: o.s.Status})
		}
	}
	for _, rk := range restOrder {
		list := rest[rk]
		if len(list) > maxCompared {
			list = list[:maxCompared]
		}
		c := cases[restCase[rk]]
		for i := 1; i < len(list); i++ {
			for j := 0; j < i; j++ {
				a, b := list[j], list[i]
				if a.value == b.value || !is2xx(a.status) || !is2xx(b.status) {
					continue
				}
				if a.digest == b.digest && a.size >= unchangedMinBytes {
					c.unchanged++
				} else if a.digest != b.digest {
					c.changed = true
				}
			}
		}
	}
	// A name whose other values changed a response anywhere on the site is not dropped for
	// leaving some other response unchanged: drop_params applies to every path of the site.
	type siteName struct{ site, leaf string }
	matters := map[siteName]bool{}
	for _, gk := range order {
		if c := cases[gk]; c.changed {
			matters[siteName{c.site, strings.ToLower(c.leaf)}] = true
		}
	}
	type found struct{ leaf, evidence string }
	bySite := map[string][]found{}
	for _, gk := range order {
		c := cases[gk]
		why := c.why(matters[siteName{c.site, strings.ToLower(c.leaf)}])
		if why == "" {
			continue
		}
		bySite[c.site] = append(bySite[c.site], found{leaf: c.leaf, evidence: c.where + ": " + why})
	}
	for site, fs := range bySite {
		st := inf.sites[site]
		for _, f := range fs {
			list := &st.drop
			if body {
				list = &st.bodyDrop
			}
			if slices.ContainsFunc(*list, func(r rule) bool { return strings.EqualFold(r.value, f.leaf) }) {
				continue
			}
			*list = append(*list, rule{value: f.leaf, evidence: f.evidence})
		}
	}
}

// looksRandom reports whether v looks like a generated token: a UUID, a hex string of 16
// or more digits with letters and digits, or a base64-like token of 20 or more characters
// mixing upper case, lower case and digits with frequent changes between them.
func looksRandom(v string) bool {
	if len(v) < 16 || len(v) > 4096 {
		return false
	}
	hexOnly, digit, upper, lower, other := true, false, false, false, false
	changes, prev := 0, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		cls := 0
		switch {
		case '0' <= c && c <= '9':
			digit, cls = true, 1
		case 'a' <= c && c <= 'z':
			lower, cls = true, 2
		case 'A' <= c && c <= 'Z':
			upper, cls = true, 3
		case c == '-' || c == '_' || c == '+' || c == '/' || c == '=':
			cls = 4
		default:
			other = true
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '-') {
			hexOnly = false
		}
		if i > 0 && cls != prev {
			changes++
		}
		prev = cls
	}
	if other {
		return false
	}
	if hexOnly {
		n := len(strings.ReplaceAll(v, "-", ""))
		return n >= 16 && digit && (lower || upper) && entropy(v) >= 3
	}
	classes := 0
	for _, b := range []bool{digit, upper, lower} {
		if b {
			classes++
		}
	}
	return len(v) >= 20 && classes == 3 && changes*3 >= len(v) && entropy(v) >= 4
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	var n [256]int
	for i := 0; i < len(s); i++ {
		n[s[i]]++
	}
	h := 0.0
	for _, c := range n {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// nearTimestamp reports whether v is Unix time in seconds (10 digits) or milliseconds (13
// digits) within timestampWindow of t.
func nearTimestamp(v string, t time.Time) bool {
	if t.IsZero() || (len(v) != 10 && len(v) != 13) {
		return false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return false
	}
	var vt time.Time
	if len(v) == 10 {
		vt = time.Unix(n, 0)
	} else {
		vt = time.UnixMilli(n)
	}
	d := vt.Sub(t)
	return d <= timestampWindow && d >= -timestampWindow
}
