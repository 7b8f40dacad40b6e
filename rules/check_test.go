package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func problemLines(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestCheckFileEveryProblem: a file with many mistakes gets one problem per mistake, each
// naming file, line and field, where ParseFile stops at the first.
func TestCheckFileEveryProblem(t *testing.T) {
	src := `site: shop
hosts: [shop.test, "bad/host"]
drop_param: [ref]
drop_params: utm_source
block: ["ok.test", "shop.test/[x", "https://shop.test/y"]
latest: ["*/cart*"]
endpoints:
  - name: product
    match: "GET /{slug}/dp/{asin}"
    key: "/dp/{id}"
    similarity: 2
  - name: search
    match: "GET /s"
    kind: search
  - name: bad-match
    match: "GET /dp-*"
  - name: ok
    match: "GET /ok"
    fuzzy: "yes"
    colour: red
  - name: ok
    match: "GET /ok2"
xhr_not_found: {body: "{}"}
hosts: [again.test]
`
	want := []string{
		`x.yaml:2: hosts: "bad/host": a host pattern holds no path, query or spaces`,
		`x.yaml:3: drop_param: unknown field "drop_param" (known: site, hosts, drop_params, body_drop, block, exclude, latest, xhr_not_found, endpoints)`,
		`x.yaml:4: drop_params: want a list of strings, got a string`,
		`x.yaml:5: block: "shop.test/[x": bad glob`,
		`x.yaml:5: block: "https://shop.test/y": write host or host/path, without a scheme`,
		`x.yaml:8: endpoints[0].key: endpoint "product": key "/dp/{id}": capture {id} is not in match "GET /{slug}/dp/{asin}"`,
		`x.yaml:11: endpoints[0].similarity: want a number from 0 to 1, got 2`,
		`x.yaml:12: endpoints[1]: endpoint "search": kind search needs text_param`,
		`x.yaml:15: endpoints[2].match: endpoint "bad-match": match "GET /dp-*": segment "dp-*" mixes text with * or {}: a segment is text, *, ** or {name}`,
		`x.yaml:19: endpoints[3].fuzzy: want true or false, got a string`,
		`x.yaml:20: endpoints[3].colour: endpoint: unknown field "colour" (known: name, match, host, key, keep_params, kind, text_param, similarity, body_keep, invalid_code, fuzzy, fuzzy_min)`,
		`x.yaml:21: endpoints[4].name: endpoint "ok": name already used at line 17`,
		`x.yaml:23: xhr_not_found: content_type is required`,
		`x.yaml:24: hosts: already set at line 2`,
	}
	ps := CheckFile("x.yaml", []byte(src))
	if got := problemLines(ps); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// The first problem ParseFile reports is among them.
	_, err := ParseFile("x.yaml", []byte(src))
	if err == nil {
		t.Fatal("ParseFile accepted the file")
	}
}

// TestCheckFileAgreesWithParseFile: a file has problems exactly when ParseFile refuses it,
// and a file with a single problem gets ParseFile's own message.
func TestCheckFileAgreesWithParseFile(t *testing.T) {
	for _, tc := range []struct {
		src, want string
	}{
		{"", ""},
		{"hosts: [a.test]\nendpoints:\n  - name: p\n    match: GET /{a}\n    key: /x/{a}\n", ""},
		{"hosts: [a.test]\ndrop_params: [a, b\n", "x.yaml:2: did not find expected ',' or ']'"},
		{"hosts: [a]\n---\nhosts: [b]\n", "x.yaml:2: more than one YAML document"},
		{"- a\n", "x.yaml:1: want a mapping, got a list"},
		{"hosts: &h [a.test]\ndrop_params: *h\n", "x.yaml:2: drop_params: YAML aliases are not supported"},
		{"<<: {hosts: [a]}\n", "x.yaml:1: <<: merge keys (<<) are not supported"},
		{"endpoints: [a]\n", "x.yaml:1: endpoints[0]: endpoint: want a mapping, got a string"},
		{"endpoints:\n  - match: /a\n", "x.yaml:2: endpoints[0]: endpoint: field name is required"},
		{"endpoints:\n  - name: a\n    match: /a\n    match: /b\n", "x.yaml:4: endpoints[0].match: already set at line 3"},
		{"#" + strings.Repeat("x", MaxFileSize), "x.yaml: rule file is 1048577 bytes, more than the limit of 1048576"},
	} {
		ps := CheckFile("x.yaml", []byte(tc.src))
		_, err := ParseFile("x.yaml", []byte(tc.src))
		if (len(ps) == 0) != (err == nil) {
			t.Errorf("%q: CheckFile %v but ParseFile %v", tc.src, ps, err)
		}
		if got := strings.TrimSpace(problemLines(ps)); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestCheckDir: every file of a directory is checked, the naming rules of Load included,
// and a task's file may take its hosts from the sites directory below it.
func TestCheckDir(t *testing.T) {
	tmp := t.TempDir()
	sitesDir := filepath.Join(tmp, "sites")
	writeFiles(t, sitesDir, map[string]string{
		"_default.yaml":    "drop_params: [utm_*]\n",
		"shop.yaml":        "hosts: [shop.test]\n",
		"README.md":        "not a rule file",
		".hidden.yaml":     "junk: [",
		"bad.yaml":         "hosts: [bad.test]\nblock: [\"bad.test/[\"]\nexclude: 3\n",
		"named.yaml":       "site: other\nhosts: [named.test]\n",
		"nohosts.yaml":     "drop_params: [x]\n",
		"old.yml":          "hosts: [old.test]\n",
		"hosted.auto.yaml": "drop_params: [y]\n",
		"hosted.yaml":      "hosts: [hosted.test]\n",
	})
	ps, err := CheckDir(sitesDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		sitesDir + `/bad.yaml:2: block: "bad.test/[": bad glob`,
		sitesDir + "/bad.yaml:3: exclude: want a list of strings, got a number",
		sitesDir + `/named.yaml:1: site: "other" differs from the file name's site "named"`,
		sitesDir + `/nohosts.yaml: hosts: site "nohosts" has no hosts (here or in a lower layer), so its rules apply to no request`,
		sitesDir + "/old.yml: rule files end in .yaml: rename it old.yaml",
	}
	if got := problemLines(ps); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}

	taskDir := filepath.Join(tmp, "tasks", "t1", "rules")
	writeFiles(t, taskDir, map[string]string{
		"shop.yaml":     "endpoints:\n  - name: p\n    match: GET /p/{id}\n    key: /p/{id}\n",
		"_default.yaml": "hosts: [x.test]\n",
		"lone.yaml":     "endpoints:\n  - name: p\n    match: GET /p\n",
	})
	ps, err = CheckDir(taskDir, sitesDir)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		taskDir + "/_default.yaml:1: hosts: _default applies to every host and takes no hosts",
		taskDir + `/lone.yaml: hosts: site "lone" has no hosts (here or in a lower layer), so its rules apply to no request`,
	}
	if got := problemLines(ps); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("task problems:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}

	// A clean directory has no problems and loads; a missing one has none either.
	clean := filepath.Join(tmp, "clean")
	writeFiles(t, clean, map[string]string{"shop.yaml": "hosts: [shop.test]\n"})
	if ps, err := CheckDir(clean); err != nil || len(ps) != 0 {
		t.Errorf("clean dir: %v, %v", ps, err)
	}
	if _, err := Load(clean); err != nil {
		t.Errorf("clean dir does not load: %v", err)
	}
	if ps, err := CheckDir(filepath.Join(tmp, "missing")); err != nil || len(ps) != 0 {
		t.Errorf("missing dir: %v, %v", ps, err)
	}
}

// TestCheckDirSymlink: a symlink leading out of the directory is a problem, as in Load.
func TestCheckDirSymlink(t *testing.T) {
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside.yaml")
	if err := os.WriteFile(outside, []byte("hosts: [a.test]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "sites")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	ps, err := CheckDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].File != filepath.Join(dir, "a.yaml") || !strings.Contains(ps[0].Message, "escapes") {
		t.Errorf("problems %v, want one about the symlink", ps)
	}
	if _, err := Load(dir); err == nil {
		t.Error("Load accepted the symlink")
	}
}

// TestCheckShippedSites: the repository's own sites/ is clean.
func TestCheckShippedSites(t *testing.T) {
	ps, err := CheckDir(filepath.Join("..", "sites"))
	if err != nil || len(ps) != 0 {
		t.Errorf("sites/: %v %v", problemLines(ps), err)
	}
}
