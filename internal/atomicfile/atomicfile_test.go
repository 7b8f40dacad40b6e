package atomicfile

import (
	"os"
	"path/filepath"
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
