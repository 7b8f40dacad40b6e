package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestWriteNew: the file is created with its mode and data; an existing path is refused
// (fs.ErrExist) and left as it was; a fill that fails returns its error as it is and leaves
// no partial file.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "new")
	fill := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := WriteNew(p, 0o600, fill("one")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(data) != "one" || fi.Mode().Perm() != 0o600 {
		t.Errorf("got %q %v, want \"one\" -rw-------", data, fi.Mode())
	}
	if err := WriteNew(p, 0o644, fill("two")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("over an existing file: err = %v, want fs.ErrExist", err)
	}
	if data, _ := os.ReadFile(p); string(data) != "one" {
		t.Errorf("the existing file changed: %q", data)
	}
	boom := errors.New("boom")
	q := filepath.Join(dir, "failed")
	err := WriteNew(q, 0o644, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if err != boom {
		t.Errorf("err = %v, want boom as it is", err)
	}
	if _, err := os.Stat(q); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed fill left %s behind (%v)", q, err)
	}
}

// noTemp fails when dir holds anything but the names given.
func noTemp(t *testing.T, dir string, want ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

func TestWriteNoReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "card")
	if err := WriteNoReplace(p, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	if err := WriteNoReplace(p, []byte("two"), 0o644); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), p) {
		t.Errorf("over an existing file: err = %v, want fs.ErrExist naming %s", err, p)
	}
	if data, _ := os.ReadFile(p); string(data) != "one" {
		t.Errorf("the existing file changed: %q", data)
	}
	noTemp(t, dir, "card")

	// writers racing for one name: exactly one wins, its file whole
	q := filepath.Join(dir, "raced")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := WriteNoReplace(q, bytes.Repeat([]byte{'a' + byte(i)}, 4096), 0o644)
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, fs.ErrExist) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	data, _ := os.ReadFile(q)
	if wins != 1 || len(data) != 4096 || bytes.Count(data, data[:1]) != 4096 {
		t.Errorf("%d writers won; file is %d bytes", wins, len(data))
	}
	noTemp(t, dir, "card", "raced")
}

func TestWriteIn(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteIn(root, "a.yaml", []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteIn(root, "a.yaml", []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "a.yaml"))
	fi, _ := os.Stat(filepath.Join(dir, "a.yaml"))
	if string(data) != "two" || fi.Mode().Perm() != 0o600 {
		t.Errorf("got %q %v", data, fi.Mode())
	}
	// neither a name nor a link may lead out of the root
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../escape.yaml", "out/escape.yaml"} {
		if err := WriteIn(root, name, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: err = %v, want a refusal naming %s", name, err, dir)
		}
	}
	noTemp(t, outside)
	noTemp(t, dir, "a.yaml", "out")
}

func TestPending(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.stdout")
	os.WriteFile(p, []byte("old"), 0o644)
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("new "))
	if data, _ := os.ReadFile(p); string(data) != "old" {
		t.Errorf("visible before Commit: %q", data)
	}
	f.Write([]byte("output"))
	if err := f.Commit(0o640); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(data) != "new output" || fi.Mode().Perm() != 0o640 {
		t.Errorf("got %q %v", data, fi.Mode())
	}
	if err := f.Commit(0o644); err == nil {
		t.Error("a second Commit succeeded")
	}
	f.Abort() // does nothing after Commit
	if _, err := os.Stat(p); err != nil {
		t.Errorf("Abort after Commit removed the file: %v", err)
	}

	g, err := Create(filepath.Join(dir, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("partial"))
	g.Abort()
	noTemp(t, dir, "agent.stdout")
	if _, err := Create(filepath.Join(dir, "missing", "x")); err == nil || !strings.Contains(err.Error(), "missing/x") {
		t.Errorf("Create in a missing directory: %v", err)
	}
}
