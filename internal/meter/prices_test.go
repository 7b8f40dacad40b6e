package meter

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultPrices: the shipped table loads, is dated, and prices the models the agents'
// CLIs and the judges use.
func TestDefaultPrices(t *testing.T) {
	p := DefaultPrices()
	if p.Taken == "" || len(p.Models) < 10 {
		t.Fatalf("table %+v", p)
	}
	for _, m := range []string{"claude-sonnet-5-5", "claude-opus-5", "claude-haiku-4-5", "claude-sonnet-4-5-20250929", "gpt-5.5", "gpt-5.4-mini", "gpt-5-2025-08-07"} {
		if _, _, ok := p.Lookup(m); !ok {
			t.Errorf("no price for %s", m)
		}
	}
	for name, pr := range p.Models {
		if pr.Input <= 0 || pr.Output <= pr.Input || pr.CacheRead >= pr.Input {
			t.Errorf("%s: implausible price %+v", name, pr)
		}
	}
}

// TestLookup: exact names and dated snapshots match; nothing else does (a newer model whose
// name starts with an older one's has no price).
func TestLookup(t *testing.T) {
	p, err := ParsePrices("p.yaml", []byte("taken: 2026-12-06\nmodels:\n  claude-sonnet-5: {input: 2, output: 10, cache_read: 0.2, cache_write: 2.5}\n  gpt-5: {input: 1, output: 8, cache_read: 0.1, cache_write: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]string{
		"claude-sonnet-5": "claude-sonnet-5", "claude-sonnet-5-20260630": "claude-sonnet-5", "gpt-5-2025-08-07": "gpt-5",
		"claude-sonnet-5-5": "", "claude-sonnet-5-5-20261001": "", "gpt-5.5": "", "gpt-5-mini": "", "": "", "claude-sonnet-5-2026": "",
	} {
		_, got, ok := p.Lookup(model)
		if got != want || ok != (want != "") {
			t.Errorf("%q: priced as %q (%v), want %q", model, got, ok, want)
		}
	}
	var nilTable *PriceTable
	if _, _, ok := nilTable.Lookup("gpt-5"); ok {
		t.Error("a nil table priced a model")
	}
}

// TestCost: each token class at its price; OpenAI's cached tokens taken out of its input;
// Anthropic's 1-hour cache writes at their own price; a long prompt at the long-context
// price for the whole call.
func TestCost(t *testing.T) {
	p := Price{Input: 2, Output: 10, CacheRead: 0.5, CacheWrite: 3, CacheWrite1h: 4,
		LongContext: &LongContext{AbovePromptTokens: 1000, Price: Price{Input: 20, Output: 100, CacheRead: 5, CacheWrite: 30}}}
	cases := []struct {
		c    Call
		want float64
	}{
		{Call{API: APIMessages, tokens: tokens{100, 10, 50, 30, 10}}, (100*2 + 10*10 + 50*0.5 + 20*3 + 10*4) / 1e6},
		{Call{API: APIResponses, tokens: tokens{100, 10, 40, 0, 0}}, (60*2 + 10*10 + 40*0.5) / 1e6},
		{Call{API: APIChatCompletions, tokens: tokens{10, 1, 40, 0, 0}}, (0 + 1*10 + 40*0.5) / 1e6}, // cached > input: input 0
		{Call{API: APIMessages, tokens: tokens{900, 10, 100, 1, 0}}, (900*20 + 10*100 + 100*5 + 1*30) / 1e6},
	}
	for i, c := range cases {
		if got := p.Cost(&c.c); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}

// TestBadPriceFiles: each mistake is an error naming the file, the line and what was
// expected.
func TestBadPriceFiles(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"", "empty price file"},
		{"models: {a: {input: 1, output: 1, cache_read: 0, cache_write: 0}}", "taken: missing"},
		{"taken: yesterday\nmodels: {}", "p.yaml:1: taken: want a date"},
		{"taken: 2026-12-06\nmodels: {}", "models: missing or empty"},
		{"taken: 2026-12-06\nmodels:\n  a: {input: 1, output: 1, cache_read: 0}", "p.yaml:3: models.a: missing cache_write"},
		{"taken: 2026-12-06\nmodels:\n  a:\n    input: -1", "p.yaml:4: models.a.input: want a price"},
		{"taken: 2026-12-06\nmodels:\n  a:\n    input: one", "p.yaml:4: models.a.input: want a price"},
		{"taken: 2026-12-06\nmodels:\n  a:\n    input: .inf", "want a price"},
		{"taken: 2026-12-06\nmodels:\n  a:\n    inputs: 1", `p.yaml:4: models.a: unknown field "inputs"`},
		{"taken: 2026-12-06\nmodels:\n  a: {input: 1, output: 1, cache_read: 0, cache_write: 0}\n  a: {input: 1, output: 1, cache_read: 0, cache_write: 0}", "p.yaml:4: field a: already set at line 3"},
		{"taken: 2026-12-06\nmodels:\n  claude-*: {input: 1, output: 1, cache_read: 0, cache_write: 0}", "not a model name"},
		{"taken: 2026-12-06\nmodels:\n  a: {input: 1, output: 1, cache_read: 0, cache_write: 0, long_context: {input: 1, output: 1, cache_read: 0, cache_write: 0}}", "missing above_prompt_tokens"},
		{"taken: 2026-12-06\nmodels:\n  a: {input: 1, output: 1, cache_read: 0, cache_write: 0, long_context: {above_prompt_tokens: -3, input: 1, output: 1, cache_read: 0, cache_write: 0}}", "want a whole number"},
		{"taken: 2026-12-06\ncurrency: EUR\nmodels: {}", `unknown field "currency"`},
		{"taken: 2026-12-06\nmodels: [a]", "models: want a mapping"},
		{"- a\n- b", "price file: want a mapping"},
		{"taken: 2026-12-06\n---\ntaken: 2026-12-07", "more than one YAML document"},
	} {
		_, err := ParsePrices("p.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestLoadPrices: a user's file is read from disk (a copy of the shipped one, edited); a
// file too large, missing or not a regular file is an error.
func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prices.yaml")
	edited := strings.Replace(string(defaultPrices), "taken: 2026-12-06", "taken: 2027-01-02", 1) +
		"  my-model: {input: 1, output: 2, cache_read: 0.1, cache_write: 0}\n"
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := OpenPrices(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := p.Lookup("my-model"); !ok || p.Taken != "2027-01-02" || p.Path != path {
		t.Errorf("table %s %s %v", p.Path, p.Taken, ok)
	}
	if p, err := OpenPrices(""); err != nil || p.Path != DefaultPricesFile {
		t.Errorf("default: %v %v", p, err)
	}
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, make([]byte, MaxPriceFileSize+1), 0o644)
	for _, bad := range []string{big, filepath.Join(dir, "none.yaml"), dir} {
		if _, err := LoadPrices(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
