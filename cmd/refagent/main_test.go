package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanBuild: the plan's extracts and template give the answer; a page without the
// expected matches is an error, not a wrong answer.
func TestPlanBuild(t *testing.T) {
	p := &Plan{Get: []string{"http://x/"}, Answer: "{{.price}} | {{join .items \", \"}}\n", Extract: []Extract{
		{Name: "price", Page: "http://x/", After: "<h1>", Regexp: `<b>([^<]+)</b>`},
		{Name: "items", Page: "http://x/", Regexp: `<li>([^<]+)</li>`, All: true, Count: 2},
	}}
	got, err := p.build(map[string]string{"http://x/": "<b>no</b><h1><b>&pound;5</b><li>a &amp; b</li><li> c </li>"})
	if err != nil || got != "£5 | a & b, c\n" {
		t.Errorf("build: %q, %v", got, err)
	}
	for _, page := range []string{"<b>1</b><li>a</li><li>b</li>", "<h1><b>1</b><li>a</li>"} {
		if _, err := p.build(map[string]string{"http://x/": page}); err == nil {
			t.Errorf("page %q: no error", page)
		}
	}
}

// TestDemoPlans: the committed plans load.
func TestDemoPlans(t *testing.T) {
	for _, id := range []string{"books-sapiens-price", "archive-org-jobs", "lil-former-projects"} {
		if _, err := loadPlan(filepath.Join("..", "..", "tasks", id, "refagent.yaml")); err != nil {
			t.Error(err)
		}
	}
}

// FuzzLoadPlan: any plan file loads or is refused with an error; a loaded plan builds an
// answer or fails with an error, never a panic.
func FuzzLoadPlan(f *testing.F) {
	for _, id := range []string{"books-sapiens-price", "archive-org-jobs", "lil-former-projects"} {
		if data, err := os.ReadFile(filepath.Join("..", "..", "tasks", id, "refagent.yaml")); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("get: [a]\nanswer: '{{index .x 5}}'\nextract: [{name: x, page: a, regexp: '(.)', all: true}]\n"))
	f.Add([]byte("get: [a]\nanswer: '{{'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "plan.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := loadPlan(path)
		if err != nil {
			return
		}
		pages := map[string]string{}
		for _, u := range p.Get {
			pages[u] = strings.Repeat("<li>x</li>", 3)
		}
		p.build(pages)
	})
}
