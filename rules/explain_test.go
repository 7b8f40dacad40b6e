package rules

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRuleOrigins checks that BlockedBy, ExcludedBy, LatestBy and XHRNotFoundFrom name the
// pattern that decided and the file and line it is written on, the winning file first.
func TestRuleOrigins(t *testing.T) {
	root := t.TempDir()
	sites := filepath.Join(root, "sites")
	task := filepath.Join(root, "task")
	writeFiles(t, sites, map[string]string{
		"_default.yaml": `# default
block:
  - tracker.test
  - "*/**/beacon"
latest: ["*/**/cart*"]
`,
		"shop.yaml": `hosts: [shop.test]
block:
  - "shop.test/batch/**"
exclude: ["*/checkpoint/**"]
xhr_not_found:
  content_type: application/json
  body: "{}"
`,
	})
	writeFiles(t, task, map[string]string{
		"shop.yaml": `hosts: [shop.test]
block: ["shop.test/batch/**", "shop.test/px"]
xhr_not_found: { content_type: text/plain, body: "none" }
`,
	})
	s, err := Load(sites, task)
	if err != nil {
		t.Fatal(err)
	}
	sitesShop, taskShop, def := filepath.Join(sites, "shop.yaml"), filepath.Join(task, "shop.yaml"), filepath.Join(sites, "_default.yaml")
	type origin struct {
		file    string
		line    int
		pattern string
		ok      bool
	}
	check := func(what string, got, want origin) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %+v, want %+v", what, got, want)
		}
	}
	by := func(f func(u string) (string, int, string, bool), raw string) origin {
		file, line, pat, ok := f(raw)
		return origin{file, line, pat, ok}
	}
	blocked := func(raw string) (string, int, string, bool) { return s.BlockedBy(mustURL(t, raw)) }
	excluded := func(raw string) (string, int, string, bool) { return s.ExcludedBy(mustURL(t, raw)) }
	latest := func(raw string) (string, int, string, bool) { return s.LatestBy(mustURL(t, raw)) }

	check("blocked tracker", by(blocked, "https://tracker.test/x"), origin{def, 3, "tracker.test", true})
	check("blocked beacon", by(blocked, "https://any.test/a/beacon"), origin{def, 4, "*/**/beacon", true})
	// Both shop files list the pattern: the task's (the winner) is named.
	check("blocked batch", by(blocked, "https://shop.test/batch/1"), origin{taskShop, 2, "shop.test/batch/**", true})
	check("blocked px", by(blocked, "https://shop.test/px"), origin{taskShop, 2, "shop.test/px", true})
	check("not blocked", by(blocked, "https://shop.test/"), origin{})
	check("excluded", by(excluded, "https://shop.test/checkpoint/1"), origin{sitesShop, 4, "*/checkpoint/**", true})
	check("excluded other host", by(excluded, "https://other.test/checkpoint/1"), origin{})
	check("latest", by(latest, "https://shop.test/gp/cart"), origin{def, 5, "*/**/cart*", true})
	check("not latest", by(latest, "https://shop.test/gp/carts/x"), origin{})
	for _, raw := range []string{"https://tracker.test/x", "https://shop.test/batch/1", "https://shop.test/"} {
		_, _, _, ok := s.BlockedBy(mustURL(t, raw))
		if ok != s.Blocked(mustURL(t, raw)) {
			t.Errorf("BlockedBy and Blocked disagree on %s", raw)
		}
	}

	file, line, ok := s.XHRNotFoundFrom("shop.test:8443")
	if file != taskShop || line != 3 || !ok {
		t.Errorf("XHRNotFoundFrom(shop.test) = %s:%d %v", file, line, ok)
	}
	if ct, _, _ := s.XHRNotFound("shop.test"); ct != "text/plain" {
		t.Errorf("XHRNotFound content type %q: the task file should win", ct)
	}
	if _, _, ok := s.XHRNotFoundFrom("other.test"); ok {
		t.Error("XHRNotFoundFrom(other.test): no rule gives one")
	}
	var nilSet *Set
	if _, _, _, ok := nilSet.BlockedBy(mustURL(t, "https://tracker.test/")); ok {
		t.Error("nil set blocks")
	}
	if _, _, ok := nilSet.XHRNotFoundFrom("x"); ok {
		t.Error("nil set has xhr_not_found")
	}
}

// TestRuleOriginsBuiltInCode: a File that was not parsed has no lines; its path is named.
func TestRuleOriginsBuiltInCode(t *testing.T) {
	f := &File{Path: "built.yaml", Block: []string{"x.test"}}
	s, err := build([]layerFile{{file: f, site: DefaultSite}})
	if err != nil {
		t.Fatal(err)
	}
	file, line, pat, ok := s.BlockedBy(mustURL(t, "https://x.test/"))
	if file != "built.yaml" || line != 0 || pat != "x.test" || !ok {
		t.Errorf("BlockedBy = %s %d %s %v", file, line, pat, ok)
	}
}

func TestRuleOriginsEmbedded(t *testing.T) {
	s, err := Load(filepath.Join(t.TempDir(), "missing"))
	if err != nil {
		t.Fatal(err)
	}
	file, line, pat, ok := s.BlockedBy(mustURL(t, "https://www.google-analytics.com/g/collect"))
	if file != EmbeddedDefaultPath || line == 0 || pat == "" || !ok {
		t.Errorf("BlockedBy = %s %d %s %v", file, line, pat, ok)
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("%s should not exist on disk", file)
	}
}
