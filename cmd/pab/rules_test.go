package main

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tempRepo makes a task repository holding the demo task books-sapiens-price, the shipped
// sites/_default.yaml and the given extra files (path relative to the repository).
func tempRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, "tasks", "books-sapiens-price"), filepath.Join(root, "tasks", "books-sapiens-price"))
	def, err := os.ReadFile(filepath.Join(repoRoot, "sites", "_default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files["sites/_default.yaml"] = string(def)
	for name, data := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestReplayRefusesBadRules: replay does not start on a rule file with an unknown field, a
// value of the wrong type, a bad glob or match pattern, or a key capture that match lacks;
// the one-line error names the file, the line and the field.
func TestReplayRefusesBadRules(t *testing.T) {
	const head = "hosts: [books.toscrape.com]\n"
	for _, tc := range []struct {
		name, file, want string
	}{
		{"unknown field", head + "drop_param: [ref]\n", `sites/x.yaml:2: rule file: unknown field "drop_param"`},
		{"wrong type", head + "endpoints:\n  - name: p\n    match: GET /catalogue/{slug}\n    fuzzy_min: half\n", "sites/x.yaml:5: field fuzzy_min: want a number from 0 to 1, got a string"},
		{"bad glob", head + "latest:\n  - \"*/basket/[\"\n", `sites/x.yaml:3: field latest: "*/basket/[": bad glob`},
		{"bad pattern", head + "endpoints:\n  - name: p\n    match: GET /catalogue/page-*.html\n", `sites/x.yaml:3: endpoint "p": match "GET /catalogue/page-*.html": segment "page-*.html" mixes text`},
		{"capture absent from match", head + "endpoints:\n  - name: book\n    match: GET /catalogue/{slug}/index.html\n    key: /book/{id}\n", `sites/x.yaml:3: endpoint "book": key "/book/{id}": capture {id} is not in match`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tempRepo(t, map[string]string{"sites/x.yaml": tc.file})
			stdout, stderr, code := runPab(t, "--repo", root, "replay", "books-sapiens-price", "--check")
			msg := strings.TrimSpace(stderr)
			want := "pab: " + filepath.Join(root, filepath.FromSlash(tc.want[:len("sites/x.yaml")])) + tc.want[len("sites/x.yaml"):]
			if code != 1 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line starting %q", code, stdout, stderr, want)
			}
			// rules check reports the same problem, with the field spelled out.
			out, _, code := runPab(t, "--repo", root, "rules", "check")
			if code != 1 || !strings.Contains(out, filepath.Join(root, "sites", "x.yaml")+":") {
				t.Errorf("rules check: exit %d, output %q", code, out)
			}
		})
	}
	// A task's own rule file is checked too.
	root := tempRepo(t, map[string]string{"tasks/books-sapiens-price/rules/books.yaml": "hosts: books.toscrape.com\n"})
	_, stderr, code := runPab(t, "--repo", root, "replay", "books-sapiens-price", "--check")
	want := filepath.Join(root, "tasks", "books-sapiens-price", "rules", "books.yaml") + ":1: field hosts: want a list of strings, got a string"
	if code != 1 || strings.TrimSpace(stderr) != "pab: "+want {
		t.Errorf("task rules: exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// TestRulesCheck: every problem of every rule file is reported, one line each, with exit
// status 1; a clean repository (this one included) passes with exit status 0.
func TestRulesCheck(t *testing.T) {
	root := tempRepo(t, map[string]string{
		"sites/shop.yaml": `hosts: [shop.test]
drop_param: [ref]
block: ["shop.test/[", "ok.test"]
endpoints:
  - name: product
    match: "GET /{slug}/dp/{asin}"
    key: "/dp/{id}"
    similarity: 1.5
  - name: search
    match: GET /s
    kind: search
`,
		"sites/old.yml": "hosts: [old.test]\n",
		"tasks/books-sapiens-price/rules/shop.yaml": `endpoints:
  - name: cart
    match: GET /cart
    fuzzy: maybe
`,
		"tasks/books-sapiens-price/rules/lonely.yaml": "drop_params: [x]\n",
	})
	stdout, stderr, code := runPab(t, "--repo", root, "rules", "check")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	want := []struct{ file, line, field, msg string }{
		{"sites/old.yml", "", "", "rule files end in .yaml: rename it old.yaml"},
		{"sites/shop.yaml", "2", "drop_param", `unknown field "drop_param"`},
		{"sites/shop.yaml", "3", "block", `"shop.test/[": bad glob`},
		{"sites/shop.yaml", "5", "endpoints[0].key", `capture {id} is not in match`},
		{"sites/shop.yaml", "8", "endpoints[0].similarity", "want a number from 0 to 1, got 1.5"},
		{"sites/shop.yaml", "9", "endpoints[1]", "kind search needs text_param"},
		{"tasks/books-sapiens-price/rules/lonely.yaml", "", "hosts", `site "lonely" has no hosts`},
		{"tasks/books-sapiens-price/rules/shop.yaml", "4", "endpoints[0].fuzzy", "want true or false, got a string"},
	}
	if code != 1 || len(lines) != len(want) {
		t.Fatalf("exit %d, %d lines, want exit 1 and %d lines:\n%s\nstderr %s", code, len(lines), len(want), stdout, stderr)
	}
	for i, w := range want {
		prefix := filepath.Join(root, filepath.FromSlash(w.file))
		if w.line != "" {
			prefix += ":" + w.line
		}
		prefix += ": "
		if w.field != "" {
			prefix += w.field + ": "
		}
		ok := strings.HasPrefix(lines[i], prefix) && strings.Contains(lines[i][len(prefix):], w.msg)
		if !ok {
			t.Errorf("line %d: %q, want %s:%s: %s: ...%s...", i+1, lines[i], w.file, w.line, w.field, w.msg)
		}
	}
	if s := strings.TrimSpace(stderr); s != "pab: rules check: 8 problems in 5 rule files" {
		t.Errorf("stderr %q", stderr)
	}

	// One directory alone; a task's rules take their hosts from sites/.
	good := tempRepo(t, map[string]string{
		"sites/books.yaml":                           "hosts: [books.toscrape.com]\n",
		"tasks/books-sapiens-price/rules/books.yaml": "drop_params: [x]\n",
	})
	for _, args := range [][]string{{"rules", "check"}, {"rules", "check", filepath.Join(good, "tasks", "books-sapiens-price", "rules")}} {
		stdout, stderr, code := runPab(t, append([]string{"--repo", good}, args...)...)
		if code != 0 || stdout != "" || !strings.Contains(stderr, "no problems") {
			t.Errorf("pab %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	if _, stderr, code := runPab(t, "--repo", good, "rules", "check", filepath.Join(good, "missing")); code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("missing dir: exit %d, stderr %q", code, stderr)
	}

	// This repository's shipped rules are clean.
	if stdout, stderr, code := runPab(t, "rules", "check"); code != 0 || stdout != "" {
		t.Errorf("shipped rules: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestDocsWorkedExample replays the worked example of docs/rules.md: it writes the rule
// file shown there into a repository, builds a WARC holding the recording its table lists,
// imports it, and runs `pab inspect` for every request of the answers table, checking the
// key, the step that answers and the recording it answers with. So the example stays true
// to the code.
func TestDocsWorkedExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "rules.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## A worked example\n")
	if !ok {
		t.Fatal("docs/rules.md has no worked example")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(sec)
	if m == nil {
		t.Fatal("no rule file in the worked example")
	}
	root := tempRepo(t, map[string]string{"sites/shop.yaml": m[1]})

	// The recording: "| rN | `METHOD /path` [with `BODY`] ... |".
	recRow := regexp.MustCompile("(?m)^\\| r(\\d+) \\| `(\\w+) ([^`]+)`(?: with `([^`]+)`)?")
	var warcData bytes.Buffer
	n := 0
	for _, row := range recRow.FindAllStringSubmatch(sec, -1) {
		n++
		if row[1] != fmt.Sprint(n) {
			t.Fatalf("recording row r%s out of order", row[1])
		}
		writeExchange(&warcData, n, row[2], "https://www.shop.example"+row[3], row[4])
	}
	if n < 10 {
		t.Fatalf("only %d recording rows found", n)
	}
	warcPath := filepath.Join(t.TempDir(), "shop.warc")
	if err := os.WriteFile(warcPath, warcData.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runPab(t, "--repo", root, "import", "--task", "shop-hose", warcPath); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}

	// The answers: "| `METHOD URL [BODY]` | `KEY` | STEP: [rN] ... |".
	ansRow := regexp.MustCompile("(?m)^\\| `(\\w+) (\\S+)(?: ([^`]+))?` \\| `([^`]+)` \\| (\\w+): (?:(r\\d+)\\b)?")
	rows := ansRow.FindAllStringSubmatch(sec, -1)
	if want := strings.Count(sec, "\n| `"); len(rows) < 10 || len(rows) != want {
		t.Fatalf("%d answer rows read, of %d", len(rows), want)
	}
	field := regexp.MustCompile(`(?m)^(key|source|entry): +(\S.*)$`)
	for _, row := range rows {
		method, rawURL, body, wantKey, wantStep, wantRec := row[1], row[2], row[3], row[4], row[5], row[6]
		args := []string{"--repo", root, "inspect", "shop-hose", rawURL, "--method", method}
		if body != "" {
			ct := "application/x-www-form-urlencoded"
			if strings.HasPrefix(body, "{") {
				ct = "application/json"
			}
			args = append(args, "--body", body, "--content-type", ct)
		}
		out, stderr, code := runPab(t, args...)
		if code != 0 {
			t.Errorf("%s %s: exit %d: %s", method, rawURL, code, stderr)
			continue
		}
		got := map[string]string{}
		for _, f := range field.FindAllStringSubmatch(out, -1) {
			got[f[1]] = f[2]
		}
		wantSource := wantStep
		if wantSource == "block" {
			wantSource = "blocked"
		}
		wantEntry := ""
		if wantRec != "" {
			var i int
			fmt.Sscanf(wantRec, "r%d", &i)
			wantEntry = fmt.Sprintf("e%06d", i)
		}
		gotEntry, _, _ := strings.Cut(got["entry"], " ")
		if got["key"] != wantKey || got["source"] != wantSource || gotEntry != wantEntry {
			t.Errorf("%s %s %s: got key %q, source %q, entry %q; the docs say %q, %s, %s\n%s",
				method, rawURL, body, got["key"], got["source"], gotEntry, wantKey, wantSource, wantRec, out)
		}
	}
}

// writeExchange appends a WARC 1.0 response record and its request record (WARC 1.1
// sections 6.3 and 6.4) for one exchange; the response body names the exchange.
func writeExchange(w *bytes.Buffer, n int, method, target, body string) {
	u, _ := url.Parse(target)
	date := time.Date(2025, 1, 1, 0, 0, n, 0, time.UTC).Format(time.RFC3339)
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n", method, u.RequestURI(), u.Host)
	if body != "" {
		ct := "application/x-www-form-urlencoded"
		if strings.HasPrefix(body, "{") {
			ct = "application/json"
		}
		req += fmt.Sprintf("Content-Type: %s\r\nContent-Length: %d\r\n", ct, len(body))
	}
	req += "\r\n" + body
	payload := fmt.Sprintf("<html><title>r%d</title></html>", n)
	resp := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(payload), payload)
	respID := fmt.Sprintf("<urn:uuid:00000000-0000-4000-8000-%012d>", 2*n)
	reqID := fmt.Sprintf("<urn:uuid:00000000-0000-4000-8000-%012d>", 2*n+1)
	for _, r := range []struct{ typ, id, extra, block string }{
		{"response", respID, "", resp},
		{"request", reqID, "WARC-Concurrent-To: " + respID + "\r\n", req},
	} {
		fmt.Fprintf(w, "WARC/1.0\r\nWARC-Type: %s\r\nWARC-Record-ID: %s\r\nWARC-Date: %s\r\nWARC-Target-URI: %s\r\n%sContent-Type: application/http; msgtype=%s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			r.typ, r.id, date, target, r.extra, r.typ, len(r.block), r.block)
	}
}
