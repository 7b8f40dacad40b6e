package crawl

// typed.go: typed URLs (pab check --crawl --typed FILE, docs/replay.md "Typed URLs"). A
// person or an agent types addresses the recording never saw: a listing's next page, a
// tracking parameter, index.html of a directory. The file says, for each, what the live
// site does with it; the crawl opens each in Chromium as a typed navigation and counts
// how replay's answer compares: the cost of the matching policy, measured.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/yamlx"
	"github.com/pab-dev/pab/recording"
)

// Bounds of a typed-URL file.
const (
	// MaxTypedFile is the largest typed-URL file read, in bytes.
	MaxTypedFile = 1 << 20
	// MaxTypedURLs is the most typed URLs one file may list.
	MaxTypedURLs = 2000
)

// Expectations of a typed URL that are not a recorded URL (TypedURL.Expect).
const (
	// ExpectMiss: the live site serves a page the recording does not hold (another page
	// of a listing, a later state): any recorded answer is wrong.
	ExpectMiss = "miss"
	// Expect404: the live site answers not found: any recorded answer is wrong.
	Expect404 = "404"
)

// Outcomes of a typed URL (TypedResult.Outcome).
const (
	// TypedRight: replay answered with the recording the live site's answer is.
	TypedRight = "right"
	// TypedWrong: replay answered with a recording that is not the live site's answer.
	TypedWrong = "wrong"
	// TypedNear: replay answered with a recording the file lists as near it (the same
	// listing at another length): not the live answer, close to it.
	TypedNear = "near"
	// TypedMiss: replay answered with no recording, and the live site's answer is not in
	// the recording: the miss is right.
	TypedMiss = "miss"
	// TypedLost: replay answered with no recording although the recording holds the live
	// site's answer: the cost of preferring a miss.
	TypedLost = "lost"
)

// typedOrder is the order of outcomes in totals.
var typedOrder = []string{TypedRight, TypedWrong, TypedNear, TypedMiss, TypedLost}

// TypedURL is one entry of a typed-URL file.
type TypedURL struct {
	// URL is the address typed: absolute http or https.
	URL string `json:"url"`
	// Expect is what the live site answers: a recorded URL (its recording is the live
	// answer), ExpectMiss or Expect404.
	Expect string `json:"expect"`
	// Near lists recorded URLs whose answer is close to the live one but not it.
	Near []string `json:"near,omitempty"`
	// Note says why, for a person (how the live site's answer was known).
	Note string `json:"note,omitempty"`
	// Line is the entry's line in the file.
	Line int `json:"line"`
}

// ParseTyped reads a typed-URL file (docs/replay.md "Typed URLs"): a YAML mapping with one
// field, urls, a list of mappings with url, expect, and optionally near and note. Every
// error is "path:line: message"; a file over MaxTypedFile bytes or with more than
// MaxTypedURLs entries, an empty list, a URL that is not absolute http(s), or an expect
// that is neither miss, 404 nor such a URL is an error. Whether the URLs of expect and
// near are recorded is checked against a recording by CheckTyped.
func ParseTyped(path string, data []byte) ([]TypedURL, error) {
	root, err := yamlx.Parse(path, data, MaxTypedFile)
	if err != nil {
		return nil, err
	}
	if root == nil || len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty file: want a mapping with urls", path)
	}
	var out []TypedURL
	var list *yaml.Node
	if err := yamlx.Fields(path, root.Content[0], "typed-URL file", []string{"urls"}, func(key string, v *yaml.Node) error {
		list = v
		return nil
	}); err != nil {
		return nil, err
	}
	if list == nil {
		return nil, fmt.Errorf("%s: no urls field", path)
	}
	if list.Kind != yaml.SequenceNode {
		return nil, yamlx.Errorf(path, list, "urls: want a list, got %s", yamlx.KindName(list))
	}
	if len(list.Content) == 0 {
		return nil, yamlx.Errorf(path, list, "urls: the list is empty")
	}
	if len(list.Content) > MaxTypedURLs {
		return nil, yamlx.Errorf(path, list, "urls: %d entries, more than the limit of %d", len(list.Content), MaxTypedURLs)
	}
	for _, n := range list.Content {
		t := TypedURL{Line: n.Line}
		err := yamlx.Fields(path, n, "urls entry", []string{"url", "expect", "near", "note"}, func(key string, v *yaml.Node) error {
			switch key {
			case "near":
				if v.Kind != yaml.SequenceNode {
					return yamlx.Errorf(path, v, "near: want a list of recorded URLs, got %s", yamlx.KindName(v))
				}
				for _, x := range v.Content {
					s, err := typedScalar(path, key, x)
					if err != nil {
						return err
					}
					if canon(s) == "" {
						return yamlx.Errorf(path, x, "near: %q is not an absolute http:// or https:// URL", s)
					}
					t.Near = append(t.Near, s)
				}
				return nil
			}
			s, err := typedScalar(path, key, v)
			if err != nil {
				return err
			}
			switch key {
			case "url":
				if canon(s) == "" {
					return yamlx.Errorf(path, v, "url: %q is not an absolute http:// or https:// URL", s)
				}
				t.URL = s
			case "expect":
				if s != ExpectMiss && s != Expect404 && canon(s) == "" {
					return yamlx.Errorf(path, v, "expect: %q: want a recorded URL (absolute http:// or https://), %s or %s", s, ExpectMiss, Expect404)
				}
				t.Expect = s
			case "note":
				t.Note = s
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		switch {
		case t.URL == "":
			return nil, yamlx.Errorf(path, n, "urls entry: no url")
		case t.Expect == "":
			return nil, yamlx.Errorf(path, n, "urls entry %s: no expect (a recorded URL, %s or %s)", t.URL, ExpectMiss, Expect404)
		}
		out = append(out, t)
	}
	return out, nil
}

// maxTypedField bounds one field of a typed-URL entry, in bytes.
const maxTypedField = 8 << 10

// typedScalar is the string value of a scalar field.
func typedScalar(path, key string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", yamlx.Errorf(path, v, "%s: want a string, got %s", key, yamlx.KindName(v))
	}
	if len(v.Value) > maxTypedField {
		return "", yamlx.Errorf(path, v, "%s: %d bytes, more than the limit of %d", key, len(v.Value), maxTypedField)
	}
	return strings.TrimSpace(v.Value), nil
}

// CheckTyped checks a parsed typed-URL file against the recording b: every URL of expect
// and near must be one that b holds a GET of (the same URL as replay logs it, the scheme
// ignored). The error names the file and line.
func CheckTyped(path string, urls []TypedURL, b *recording.Bundle) error {
	rec := newRecorded(b)
	for _, t := range urls {
		if t.Expect != ExpectMiss && t.Expect != Expect404 && !rec.has(canon(t.Expect)) {
			return fmt.Errorf("%s:%d: expect: %s is not a recorded GET (write %s when the recording lacks the live answer)", path, t.Line, t.Expect, ExpectMiss)
		}
		for _, n := range t.Near {
			if !rec.has(canon(n)) {
				return fmt.Errorf("%s:%d: near: %s is not a recorded GET", path, t.Line, n)
			}
		}
	}
	return nil
}

// TypedResult is what replay answered one typed URL.
type TypedResult struct {
	TypedURL
	// Outcome is one of the Typed* constants.
	Outcome string `json:"outcome"`
	// Source is how replay answered the typed URL's request (exact, fuzzy, ..., miss);
	// Served the recorded URLs that answered the page's document, hop by hop (a recorded
	// redirect, then the page it led to); Status the status the browser got.
	Source string   `json:"source,omitempty"`
	Served []string `json:"served,omitempty"`
	Status int      `json:"status,omitempty"`
	// Detail is the crawl's detail of the page (PageResult.Detail).
	Detail string `json:"detail,omitempty"`
}

// TypedTargetReport is a TypedReport with its target and file: what pab check --crawl
// --typed --json prints.
type TypedTargetReport struct {
	Target string `json:"target"`
	File   string `json:"file"`
	*TypedReport
}

// TypedReport is the result of Typed.
type TypedReport struct {
	URLs []TypedResult `json:"urls"`
	// Totals counts the URLs by outcome (every outcome listed, zeros too).
	Totals map[string]int `json:"totals"`
}

// Summary is the totals line: "typed: 20 URLs: right 12, wrong 1, near 1, miss 4, lost 2".
func (r *TypedReport) Summary() string {
	parts := make([]string, len(typedOrder))
	for i, o := range typedOrder {
		parts[i] = fmt.Sprintf("%s %d", o, r.Totals[o])
	}
	return fmt.Sprintf("typed: %d URLs: %s", len(r.URLs), strings.Join(parts, ", "))
}

// Print writes the report for a person: one row per URL (outcome, URL, expected, what
// replay answered), then the totals.
func (r *TypedReport) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTCOME\tURL\tEXPECTED\tANSWERED")
	for _, t := range r.URLs {
		ans := t.Source
		if len(t.Served) > 0 {
			ans += " with " + strings.Join(t.Served, " → ")
		}
		if t.Status != 0 {
			ans += fmt.Sprintf(" (%d)", t.Status)
		}
		o := t.Outcome
		if o == TypedWrong {
			o += " !"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o, t.URL, t.Expect, ans)
	}
	tw.Flush()
	fmt.Fprintln(w, r.Summary())
}

// Typed opens each typed URL in turn in a fresh page, as a URL typed in the address bar
// (a document request, Sec-Fetch-Dest: document), and reports replay's answer against what
// the file says the live site does. o is as for Run (Seeds, MaxPages and MaxLinks unused).
// The error is Run's: the browser cannot be reached, or ctx ended (with the report so far).
func Typed(ctx context.Context, o Options, urls []TypedURL) (*TypedReport, error) {
	if o.Bundle == nil || o.Tap == nil || o.CDP == "" {
		return nil, errors.New("crawl: needs a bundle, a log tap and a browser")
	}
	if o.PageTimeout <= 0 {
		o.PageTimeout = DefaultPageTimeout
	}
	rep := &TypedReport{URLs: []TypedResult{}}
	rec := newRecorded(o.Bundle)
	rec.clock = o.Clock
	tb, err := startTab(ctx, o)
	if err != nil {
		return nil, err
	}
	defer tb.close()
	for i, t := range urls {
		if err := ctx.Err(); err != nil {
			rep.count()
			return rep, err
		}
		u := canon(t.URL)
		v, _ := open(tb.ctx, &tb.cur, tb.mainFrame, u, o.PageTimeout, o.Tap, rec)
		pr := classify(v, queued{url: u}, rec)
		res := judgeTyped(t, v, pr, rec)
		rep.URLs = append(rep.URLs, res)
		if o.Progress != nil {
			o.Progress(i+1, len(urls)-i-1, pr)
		}
	}
	rep.count()
	return rep, nil
}

func (r *TypedReport) count() {
	r.Totals = map[string]int{}
	for _, o := range typedOrder {
		r.Totals[o] = 0
	}
	for _, t := range r.URLs {
		r.Totals[t.Outcome]++
	}
}

// judgeTyped compares replay's answer to the page's document (every hop of it) with what
// the file expects.
func judgeTyped(t TypedURL, v *visit, pr PageResult, rec *recorded) TypedResult {
	res := TypedResult{TypedURL: t, Source: pr.Source, Status: pr.Status, Detail: pr.Detail}
	docs := v.mainDocs()
	var served []string
	if len(docs) > 0 {
		for _, l := range docs[0].lines {
			if l == nil || !hitSource(l.Source) || l.Entry == "" {
				continue
			}
			if e := rec.b.ByID(l.Entry); e != nil {
				served = append(served, e.URL)
			}
		}
		if l := docs[0].lines[0]; l != nil {
			res.Source = string(l.Source)
		}
	}
	res.Served = served
	same := func(a, b string) bool { return schemeless(canon(a)) == schemeless(canon(b)) }
	has := func(list []string, u string) bool {
		for _, x := range list {
			if same(x, u) {
				return true
			}
		}
		return false
	}
	switch {
	case len(served) == 0 && (t.Expect == ExpectMiss || t.Expect == Expect404):
		res.Outcome = TypedMiss
	case len(served) == 0:
		res.Outcome = TypedLost
	case t.Expect != ExpectMiss && t.Expect != Expect404 && has(served, t.Expect):
		res.Outcome = TypedRight
	case func() bool {
		for _, n := range t.Near {
			if has(served, n) {
				return true
			}
		}
		return false
	}():
		res.Outcome = TypedNear
	default:
		res.Outcome = TypedWrong
	}
	return res
}
