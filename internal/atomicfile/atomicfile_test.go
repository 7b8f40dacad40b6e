package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := Write(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(data) != "two" || fi.Mode().Perm() != 0o600 {
		t.Errorf("got %q %v", data, fi.Mode())
	}
	// A path whose directory is missing fails, names the path and leaves nothing behind.
	if err := Write(filepath.Join(dir, "no", "f"), []byte("x"), 0o644); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	// Renaming over a directory fails and removes the temporary file.
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o644); err == nil {
		t.Error("write over a directory succeeded")
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 2 {
		t.Errorf("left behind: %v", des)
	}
}

// TestWriteFromError: a fill that fails leaves the old file and no temporary file.
func TestWriteFromError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFrom(p, 0o644, func(w io.Writer) error {
		w.Write(bytes.Repeat([]byte("x"), 1<<20)) // more than the buffer: some reaches the file
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want boom naming %s", err, p)
	}
	if data, _ := os.ReadFile(p); string(data) != "old" {
		t.Errorf("the old file changed: %q", data[:min(len(data), 10)])
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Errorf("left behind: %v", des)
	}
}

// TestWriteJSON: two-space indent, HTML characters kept, a final newline; a value JSON
// cannot encode is an error naming the path, and nothing is written.
func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	if err := WriteJSON(p, map[string]any{"a": "<b>&", "n": []int{1}}, 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if want := "{\n  \"a\": \"<b>&\",\n  \"n\": [\n    1\n  ]\n}\n"; string(data) != want {
		t.Errorf("got %q, want %q", data, want)
	}
	q := filepath.Join(dir, "bad.json")
	if err := WriteJSON(q, map[string]any{"f": func() {}}, 0o644); err == nil || !strings.Contains(err.Error(), q) {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(q); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad.json was written: %v", err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("SyncDir of a missing directory succeeded")
	}
}
