package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
)

// TestExportWACZImportReplay: a task exported as WACZ verifies against its
// datapackage.json, imports into another repository as a new task, and that task replays
// every recorded page as an exact hit. The WARC export of the same task is stable.
func TestExportWACZImportReplay(t *testing.T) {
	dir := t.TempDir()
	wacz := filepath.Join(dir, "books.wacz")
	stdout, stderr, code := runPab(t, "export", "books-sapiens-price", "--wacz", wacz)
	if code != 0 || !strings.Contains(stdout, "30 exchanges") {
		t.Fatalf("export: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, err := recording.VerifyWACZ(wacz); err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(dir, "repo")
	if err := os.MkdirAll(filepath.Join(other, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runPab(t, "--repo", other, "import", "--task", "books-copy", wacz)
	if code != 0 || !strings.Contains(stdout, "30 exchanges") {
		t.Fatalf("import of the WACZ: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runPab(t, "--repo", other, "replay", "books-copy", "--check")
	if code != 0 || !strings.Contains(stdout, "exact          30  100.0%") {
		t.Errorf("replay of the imported WACZ: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// the WACZ itself as a replay target, as import and export take it
	stdout, stderr, code = runPab(t, "--repo", other, "replay", wacz, "--check")
	if code != 0 || !strings.Contains(stdout, "exact          30  100.0%") || !strings.Contains(stdout, "check: 30 requests (1 page, 29 other recorded exchanges)") {
		t.Errorf("replay of the WACZ file: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	var outs [][]byte
	for _, name := range []string{"a", "b"} {
		p := filepath.Join(dir, name, "books.warc.gz")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, stderr, code := runPab(t, "export", "books-sapiens-price", "--warc", p); code != 0 {
			t.Fatalf("export --warc: exit %d: %s", code, stderr)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, data)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("two WARC exports of the same task differ")
	}
}

// TestExportMistakes: each mistake gets one line on stderr starting "pab: ", exit 1, and
// leaves no file behind.
func TestExportMistakes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "books-sapiens-price"}, "exactly one of --warc"},
		{[]string{"export", "books-sapiens-price", "--warc", filepath.Join(dir, "a.warc"), "--wacz", filepath.Join(dir, "a.wacz")}, "exactly one of --warc"},
		{[]string{"export", "books-sapiens-price", "--wacz", filepath.Join(dir, "a.zip")}, "must end in .wacz"},
		{[]string{"export", "no-such-task", "--warc", filepath.Join(dir, "a.warc")}, `no task "no-such-task"`},
		{[]string{"export", "books-sapiens-price", "--warc", dir}, "not a regular file"},
		{[]string{"export", "books-sapiens-price", "--warc", filepath.Join(dir, "missing", "a.warc")}, "no such file"},
	} {
		_, stderr, code := runPab(t, tc.args...)
		msg := strings.TrimSpace(stderr)
		if code != 1 || !strings.HasPrefix(msg, "pab: ") || strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
			t.Errorf("pab %s: exit %d, stderr %q; want exit 1 and one line containing %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed exports left %d files in %s", len(ents), dir)
	}
}
