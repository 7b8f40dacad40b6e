package grade

import (
	"strings"
	"testing"
)

func TestKappa(t *testing.T) {
	cases := []struct {
		yy, yn, ny, nn int
		want           float64
		ok             bool
	}{
		{20, 5, 10, 15, 0.4, true}, // po 0.7, pe 0.5
		{1, 0, 1, 1, 0.4, true},
		{5, 0, 0, 5, 1, true},
		{0, 5, 5, 0, -1, true},
		{4, 0, 0, 0, 0, false}, // both always yes: undefined
	}
	for _, c := range cases {
		k, ok := Kappa(c.yy, c.yn, c.ny, c.nn)
		if ok != c.ok || (ok && k != c.want) {
			t.Errorf("Kappa(%d,%d,%d,%d) = %v, %v; want %v, %v", c.yy, c.yn, c.ny, c.nn, k, ok, c.want, c.ok)
		}
	}
}

func TestReadLabels(t *testing.T) {
	good := `{"task":"t","answer":"x","verdicts":{"a":true,"b":"no","c":"PASS"}}

{"task":"t","result":"r.json","verdicts":{"a":false}}`
	ls, err := ReadLabels(strings.NewReader(good), "l.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[1].Line != 3 || !ls[0].Verdicts["a"] || ls[0].Verdicts["b"] || !ls[0].Verdicts["c"] {
		t.Errorf("labels %+v", ls)
	}
	for _, c := range []struct{ in, want string }{
		{"", "l.jsonl: no labels"},
		{`{"task":"t","answer":"x"}`, "l.jsonl:1: verdicts is missing"},
		{`{"task":"t","verdicts":{"a":true}}`, "l.jsonl:1: give exactly one of answer, answer_file and result"},
		{`{"task":"t","answer":"x","answer_file":"f","verdicts":{"a":true}}`, "exactly one of"},
		{`{"answer":"x","verdicts":{"a":true}}`, "l.jsonl:1: task is missing"},
		{`{"task":"t","answer":"x","verdicts":{"a":1}}`, "verdict a: want true or false, got a number"},
		{`{"task":"t","answer":"x","verdicts":{"a":true},"extra":1}`, `unknown field "extra"`},
		{"\n\nnot json", "l.jsonl:3: not a label"},
	} {
		if _, err := ReadLabels(strings.NewReader(c.in), "l.jsonl"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadLabels(%q): %v, want %q", c.in, err, c.want)
		}
	}
}

func TestBodyHolds(t *testing.T) {
	html := []byte(`<html><body><p class="price_color">&pound;54.23</p><h3>Sapiens:   A Brief
	History</h3><script>var d = {"price":"\u00a312.00","url":"https:\/\/a\/b"};</script></body></html>`)
	for text, want := range map[string]bool{
		"£54.23":                   true, // entity decoded in the visible text
		"sapiens: a brief history": true, // case and spacing ignored
		"£12.00":                   true, // inside a JSON string with \u escapes
		"https://a/b":              true, // \/ undone
		"£99.99":                   false,
	} {
		if got := BodyHolds(html, "text/html", text); got != want {
			t.Errorf("BodyHolds(%q) = %v", text, got)
		}
	}
}

func FuzzReadLabels(f *testing.F) {
	f.Add(`{"task":"t","answer":"x","verdicts":{"a":true}}`)
	f.Add(`{"task":"t","result":"r","verdicts":{"a":"yes"}}` + "\n{}")
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := ReadLabels(strings.NewReader(s), "f")
		if err == nil {
			for _, l := range ls {
				if l.Task == "" || len(l.Verdicts) == 0 || l.Line < 1 {
					t.Fatalf("accepted %+v", l)
				}
			}
		}
	})
}

func FuzzBodyHolds(f *testing.F) {
	f.Add([]byte(`<p>&pound;5</p>`), "£5")
	f.Add([]byte(`{"a":"\u00e9\ud83d"}`), "é")
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		// Text that is in the body as bytes is always found.
		if strings.Contains(string(body), text) && !BodyHolds(body, "text/html", text) {
			t.Fatalf("%q is in the body but not found", text)
		}
		_ = jsonUnescape(string(body))
	})
}
