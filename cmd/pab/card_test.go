package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
)

// TestTasksCardUnknownField: a task.yaml with a field pab does not know (the seed's
// `difficulty: easy`) is listed by `pab tasks` and replayed, with one warning line on
// stderr; a typo of a known field is refused with a suggestion (issue 21).
func TestTasksCardUnknownField(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sites"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyTask(t, "books-sapiens-price", root)
	card := filepath.Join(root, "tasks", "books-sapiens-price", "task.yaml")
	data, err := os.ReadFile(card)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(data), "\n")
	if err := os.WriteFile(card, append(data, "difficulty: easy\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	warning := "tasks/books-sapiens-price/task.yaml:" + strconv.Itoa(lines+1) + `: unknown field "difficulty" ignored`

	stdout, stderr, code := runPab(t, "--repo", root, "tasks")
	if code != 0 || !strings.Contains(stdout, "Price of a book on Books to Scrape") || strings.TrimSpace(stderr) != warning {
		t.Errorf("pab tasks: exit %d\nstdout %s\nstderr %q, want %q", code, stdout, stderr, warning)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stderr, code = runPab(t, "--repo", root, "replay", "books-sapiens-price", "--listen", ln.Addr().String(), "--log", filepath.Join(t.TempDir(), "log.jsonl"))
	if !strings.Contains(stderr, warning+"\n") || strings.Contains(stderr, "task.yaml: line") || !strings.Contains(stderr, "address already in use") {
		t.Errorf("pab replay: exit %d, stderr %q; want the warning, then the listen error", code, stderr)
	}

	if err := os.WriteFile(card, append(data, "promt: x\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runPab(t, "--repo", root, "tasks")
	if code == 0 || !strings.Contains(stderr, `unknown field "promt"; did you mean "prompt"?`) {
		t.Errorf("pab tasks with a typo: exit %d, stderr %q", code, stderr)
	}
}

// TestAuditNotFoundKeys: pab audit accepts not_found keys that are a host of the recording
// or a site name (the seed's `"books"`), and flags any other key (issue 21).
func TestAuditNotFoundKeys(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sites"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sites", "books.yaml"), []byte("hosts: [books.toscrape.com]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyTask(t, "books-sapiens-price", root)
	manifest := filepath.Join(root, "tasks", "books-sapiens-price", "recording", "manifest.json")
	write := func(notFound string) {
		t.Helper()
		m := `{"task_id": "books-sapiens-price", "captured_from": "2018-11-11T22:56:36.000Z", "captured_to": "2018-11-11T22:56:36.000Z", "not_found": ` + notFound + `, "format": ` + strconv.Itoa(recording.RecordingFormat) + `}` + "\n"
		if err := os.WriteFile(manifest, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"books": "http://books.toscrape.com/rr-not-found", "BOOKS.toscrape.com": "http://books.toscrape.com/rr-not-found", "bookz": "http://books.toscrape.com/rr-not-found"}`)
	stdout, stderr, code := runPab(t, "--repo", root, "audit", "books-sapiens-price")
	if code != 1 || strings.Count(stdout, "not_found key") != 1 || !strings.Contains(stdout, manifest+`: not_found key "bookz" is neither a host of the recording nor a site of the rules`) {
		t.Errorf("audit: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	write(`{"books": "http://books.toscrape.com/rr-not-found", "books.toscrape.com:80": "http://books.toscrape.com/rr-not-found"}`)
	for _, target := range []string{"books-sapiens-price", filepath.Join(root, "tasks", "books-sapiens-price"), filepath.Dir(manifest)} {
		if stdout, stderr, code := runPab(t, "--repo", root, "audit", target); code != 0 || !strings.Contains(stdout, "no problems") {
			t.Errorf("audit %s: exit %d\nstdout %s\nstderr %s", target, code, stdout, stderr)
		}
	}
}

// TestAuditNotFoundKeysBundle: for a bundle directory the site names are those of its own
// rules/ directory, as pab replay layers them.
func TestAuditNotFoundKeysBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := recording.Unpack(filepath.Join(repoRoot, "tasks", "books-sapiens-price", "recording"), dir); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(dir, recording.ManifestFile)
	data, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["not_found"] = map[string]string{"books": "http://books.toscrape.com/rr-not-found"}
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runPab(t, "audit", dir)
	if code != 1 || !strings.Contains(stdout, mpath+`: not_found key "books" is neither`) {
		t.Errorf("audit without rules/: exit %d\n%s", code, stdout)
	}
	if err := os.MkdirAll(filepath.Join(dir, "rules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules", "books.yaml"), []byte("hosts: [books.toscrape.com]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, _, code := runPab(t, "audit", dir); code != 0 || !strings.Contains(stdout, "no problems") {
		t.Errorf("audit with rules/books.yaml: exit %d\n%s", code, stdout)
	}
}
