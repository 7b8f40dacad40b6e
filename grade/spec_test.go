package grade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedExample is the grading format's example, as a task author writes it.
const seedExample = `extract:
  price: { type: money, description: "lowest price found, without shipping" }
  store: { type: text, description: the website selling at that price }

require:
  - field: price
    equals: 278.00
    source: { url: "https://www.bestbuy.com/site/sony-wh1000xm5/6505727.p", text: "$278.00" }
  - field: store
    one_of: ["Best Buy", "bestbuy.com"]

checks:
  - id: right_product
    question: Is the product in the answer a new, black Sony WH-1000XM5?
    required: true
  - id: says_shipping
    question: Does the answer say whether shipping is free?
    weight: 1

trace:
  - id: no_order
    must_not: { method: POST, url: "*/checkout/place*" }
  - id: added_to_cart
    must: { method: POST, url: "*/cart/add*", hit: true }
`

func TestParseGradingExample(t *testing.T) {
	g, err := ParseGrading("grading.yaml", []byte(seedExample))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Extract) != 2 || g.Extract[0].Name != "price" || g.Extract[0].Type != TypeMoney || g.Extract[1].Name != "store" {
		t.Errorf("extract %+v", g.Extract)
	}
	if len(g.Require) != 2 {
		t.Fatalf("require %+v", g.Require)
	}
	p := g.Require[0]
	if p.ID != "price" || p.Equals == nil || *p.Equals != 278 || p.Tolerance != DefaultTolerance || p.Evidence == nil || p.Evidence.Text != "$278.00" || p.Evidence.Line != 8 {
		t.Errorf("price require %+v %+v", p, p.Evidence)
	}
	if s := g.Require[1]; s.ID != "store" || len(s.OneOfText) != 2 || s.OneOfText[1] != "bestbuy.com" {
		t.Errorf("store require %+v", s)
	}
	if c := g.Checks[0]; !c.Required || c.Weight != 0 || c.Line != 13 {
		t.Errorf("check 0 %+v", c)
	}
	if c := g.Checks[1]; c.Required || c.Weight != 1 {
		t.Errorf("check 1 %+v", c)
	}
	if tr := g.Trace[0]; tr.MustNot == nil || tr.MustNot.Method != "POST" || tr.MustNot.URL != "*/checkout/place*" || tr.MustNot.Hit != nil {
		t.Errorf("trace 0 %+v", tr)
	}
	if tr := g.Trace[1]; tr.Must == nil || tr.Must.Hit == nil || !*tr.Must.Hit {
		t.Errorf("trace 1 %+v", tr)
	}
}

func TestParseGradingDefaultsAndExtensions(t *testing.T) {
	src := `require:
  - field: n
    min: 2
    max: 4
  - field: n
    one_of: [3, 5]
    tolerance: 0
  - id: cost_words
    field: cost
    equals: "1.299,00 €"
  - field: ok
    equals: false
checks:
  - id: soft
    question: Is it polite?
    required: false
extract:
  n: { type: number, description: a count }
  cost: { type: money, description: a cost }
  ok: { type: boolean, description: a flag }
not_executable:
  - id: captcha
    reason: the recording hit a bot check
    when: { url: "*/captcha*", status: 503 }
`
	g, err := ParseGrading("g.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, r := range g.Require {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "n,n#2,cost_words,ok" {
		t.Errorf("ids %v", ids)
	}
	if r := g.Require[2]; r.Equals == nil || *r.Equals != 1299 {
		t.Errorf("money equals from text: %+v", r)
	}
	if r := g.Require[1]; r.Tolerance != 0 || len(r.OneOfNum) != 2 {
		t.Errorf("one_of %+v", r)
	}
	if r := g.Require[3]; r.EqualsBool == nil || *r.EqualsBool {
		t.Errorf("bool %+v", r)
	}
	if c := g.Checks[0]; c.Required || c.Weight != 1 {
		t.Errorf("required: false without weight: %+v", c)
	}
	if len(g.NotExecutable) != 1 || g.NotExecutable[0].Must.Status != 503 || g.NotExecutable[0].Reason == "" {
		t.Errorf("not_executable %+v", g.NotExecutable)
	}
}

func TestParseGradingErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"empty", "", "g.yaml: empty grading file"},
		{"nothing to score", "extract:\n  a: {type: text, description: x}\n", "g.yaml:1: a grading needs at least one of require, checks, trace or guard"},
		{"unknown top field", "checks: []\nscore: 1\n", `g.yaml:2: grading: unknown field "score"`},
		{"unknown require field", "extract:\n  a: {type: text, description: x}\nrequire:\n  - field: a\n    equal: x\n", `g.yaml:5: require entry: unknown field "equal"`},
		{"wrong type", "extract:\n  a: {type: number, description: x}\nrequire:\n  - field: a\n    equals: lots\n", "g.yaml:5: field equals: want a number, got a string"},
		{"test not for type", "extract:\n  a: {type: number, description: x}\nrequire:\n  - field: a\n    contains: x\n", "g.yaml:5: require on a: contains does not apply to a number field"},
		{"field not extracted", "extract:\n  a: {type: number, description: x}\nrequire:\n  - field: b\n    equals: 1\n", `g.yaml:4: require: field "b" is not in extract (extract has: a)`},
		{"no test", "extract:\n  a: {type: number, description: x}\nrequire:\n  - field: a\n", "g.yaml:4: require on a: no test"},
		{"bad type", "extract:\n  a: {type: price, description: x}\nchecks: [{id: c, question: q}]\n", `g.yaml:2: field type: want money, number, text or boolean, got "price"`},
		{"no description", "extract:\n  a: {type: text}\nchecks: [{id: c, question: q}]\n", "g.yaml:2: extract field a: description is missing"},
		{"min above max", "extract:\n  a: {type: number, description: x}\nrequire:\n  - field: a\n    min: 5\n    max: 1\n", "g.yaml:4: require on a: min 5 is above max 1"},
		{"negative tolerance", "extract:\n  a: {type: number, description: x}\nrequire:\n  - field: a\n    equals: 1\n    tolerance: -1\n", "g.yaml:6: field tolerance: must not be negative"},
		{"check without id", "checks:\n  - question: q\n", "g.yaml:2: check: id is missing"},
		{"duplicate id", "checks:\n  - {id: a, question: q}\n  - {id: a, question: r}\n", `g.yaml:3: field id: "a" is already used at line 2`},
		{"required and weight", "checks:\n  - {id: a, question: q, required: true, weight: 2}\n", "g.yaml:2: check a: a required check has no weight"},
		{"zero weight", "checks:\n  - {id: a, question: q, weight: 0}\n", "g.yaml:2: field weight: must be above 0"},
		{"weight as string", "checks:\n  - {id: a, question: q, weight: heavy}\n", "g.yaml:2: field weight: want a number, got a string"},
		{"trace both", "trace:\n  - id: t\n    must: {url: a}\n    must_not: {url: b}\n", "g.yaml:2: trace t: give exactly one of must and must_not"},
		{"trace no url", "trace:\n  - id: t\n    must: {method: GET}\n", "g.yaml:3: must: url is missing"},
		{"trace hit string", "trace:\n  - id: t\n    must: {url: a, hit: yes please}\n", "g.yaml:3: field hit: want true or false, got a string"},
		{"bad method", "trace:\n  - id: t\n    must: {url: a, method: 'GET /'}\n", "g.yaml:3: field method: want an HTTP method"},
		{"source relative", "extract:\n  a: {type: text, description: x}\nrequire:\n  - field: a\n    equals: x\n    source: {url: /p, text: x}\n", `g.yaml:6: field url: want an absolute http or https URL, got "/p"`},
		{"source without text", "extract:\n  a: {type: text, description: x}\nrequire:\n  - field: a\n    equals: x\n    source: {url: 'http://a/'}\n", "g.yaml:6: source: needs both url and text"},
		{"money unreadable", "extract:\n  a: {type: money, description: x}\nrequire:\n  - field: a\n    equals: cheap\n", `g.yaml:5: field equals: want an amount of money such as 54.23 or "£54.23", got "cheap"`},
		{"not utf-8", "checks:\n  - {id: a, question: \"caf\xe9\"}\n", "g.yaml:2: not UTF-8 text"},
		{"no extract fields", "require:\n  - field: a\n    equals: 1\n", `require: field "a" is not in extract (extract has no fields: add one)`},
		{"syntax", "checks: [\n", "g.yaml:"},
		{"two documents", "checks: []\n---\nchecks: []\n", "more than one YAML document"},
		{"alias", "checks:\n  - &c {id: a, question: q}\n  - *c\n", "aliases are not supported"},
		{"list expected", "checks: {id: a}\n", "g.yaml:1: field checks: want a list, got a mapping"},
		{"comma in flow mapping", "extract:\n  a: { type: text, description: lowest price, without shipping }\nchecks: [{id: c, question: q}]\n", `unknown field "without shipping" (known: type, description); a comma inside { } starts a new field`},
		{"bad field name", "extract:\n  'a b': {type: text, description: x}\nchecks: [{id: c, question: q}]\n", `extract: field name "a b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseGrading("g.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant it to contain %q", err, c.want)
			}
		})
	}
}

func TestLoadGradingLimits(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("checks: []\n#"+strings.Repeat("x", MaxGradingSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadGrading(big); err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("big file: %v", err)
	}
	if _, err := LoadGrading(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

// The demo tasks' grading files parse.
func TestDemoGradings(t *testing.T) {
	files, _ := filepath.Glob("../tasks/*/grading.yaml")
	if len(files) < 3 {
		t.Fatalf("want the 3 demo tasks' grading.yaml, found %v", files)
	}
	for _, f := range files {
		if _, err := LoadGrading(f); err != nil {
			t.Error(err)
		}
	}
}

func FuzzParseGrading(f *testing.F) {
	f.Add([]byte(seedExample))
	f.Add([]byte("checks:\n  - {id: a, question: q, weight: 2}\n"))
	f.Add([]byte("extract:\n  a: {type: money, description: x}\nrequire:\n  - field: a\n    one_of: ['$1', 2]\n"))
	f.Add([]byte("not_executable:\n  - {id: x, when: {url: '*'}}\ntrace:\n  - {id: t, must: {url: '*', hit: true, status: 200}}\n"))
	f.Add([]byte("guard:\n  required_fields:\n    - {label: [a, 'b*'], source: [profile]}\n  uploads: [resume]\n  forbid: [submit]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseGrading("f.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(g.Require)+len(g.Checks)+len(g.Trace) == 0 && g.Guard == nil {
			t.Fatal("accepted a grading with nothing to score")
		}
		if gs := g.Guard; gs != nil && gs.EndStateID == "" {
			t.Fatal("guard section without an end-state item")
		}
		for _, r := range g.Require {
			if r.ID == "" {
				t.Fatal("require without id")
			}
		}
	})
}

// TestSeedGradingExample: seed 003's example field, with its description unquoted, is
// refused with the message docs/grading.md quotes, and the quoted fix it shows parses
// (issue 21).
func TestSeedGradingExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/grading.md")
	if err != nil {
		t.Fatal(err)
	}
	const seed = "  price: { type: money, description: lowest price found, without shipping }\n"
	const fixed = "  price: { type: money, description: \"lowest price found, without shipping\" }\n"
	const msg = `tasks/<id>/grading.yaml:2: extract field price: unknown field "without shipping" (known: type, description); a comma inside { } starts a new field: put the value before it in quotes`
	for _, s := range []string{seed, fixed, msg} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/grading.md does not show %q", s)
		}
	}
	rest := "checks: [{id: c, question: q}]\n"
	_, err = ParseGrading("tasks/<id>/grading.yaml", []byte("extract:\n"+seed+rest))
	if err == nil || err.Error() != msg {
		t.Errorf("seed example: error %v, want %s", err, msg)
	}
	g, err := ParseGrading("tasks/<id>/grading.yaml", []byte("extract:\n"+fixed+rest))
	if err != nil {
		t.Fatalf("the quoted fix: %v", err)
	}
	if len(g.Extract) != 1 || g.Extract[0].Description != "lowest price found, without shipping" {
		t.Errorf("the quoted fix: extract %+v", g.Extract)
	}
}

// TestRequireEvidence: require.evidence is read; source, its old name (the seed's), is read
// the same with one warning naming the file and line; both in one entry are an error.
func TestRequireEvidence(t *testing.T) {
	g, err := ParseGrading("grading.yaml", []byte(seedExample))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Warnings) != 1 || !strings.HasPrefix(g.Warnings[0], "grading.yaml:8: require.source is the old name of require.evidence") {
		t.Errorf("seed example (source:) warnings %q", g.Warnings)
	}
	doc := func(ev string) string {
		return "extract:\n  price: { type: money, description: the price }\nrequire:\n  - id: p\n    field: price\n    equals: 1\n" + ev
	}
	g, err = ParseGrading("g.yaml", []byte(doc(`    evidence: { url: "https://x.test/", text: "£1" }`+"\n")))
	if err != nil {
		t.Fatal(err)
	}
	if e := g.Require[0].Evidence; e == nil || e.URL != "https://x.test/" || e.Text != "£1" || e.Line != 7 || len(g.Warnings) != 0 {
		t.Errorf("evidence %+v, warnings %q", e, g.Warnings)
	}
	_, err = ParseGrading("g.yaml", []byte(doc(`    evidence: { url: "https://x.test/", text: "a" }`+"\n"+`    source: { url: "https://x.test/", text: "a" }`+"\n")))
	if err == nil || !strings.Contains(err.Error(), "g.yaml:8: require entry: give evidence once (source is its old name)") {
		t.Errorf("both: %v", err)
	}
	_, err = ParseGrading("g.yaml", []byte(doc(`    evidence: { url: "https://x.test/" }`+"\n")))
	if err == nil || !strings.Contains(err.Error(), "evidence: needs both url and text") {
		t.Errorf("no text: %v", err)
	}
}
