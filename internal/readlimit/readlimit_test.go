package readlimit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	// exactly max bytes is read whole
	if data, err := File(p, 5); err != nil || string(data) != "12345" {
		t.Errorf("File(5) = %q, %v; want the whole file", data, err)
	}
	// one byte more than max is refused, naming the path and the bound
	data, err := File(p, 4)
	var tl *TooLargeError
	if !errors.As(err, &tl) || data != nil || err.Error() != p+": larger than 4 bytes" {
		t.Errorf("File(4) = %q, %v; want a TooLargeError %q", data, err, p+": larger than 4 bytes")
	}
	// a missing file is the open error
	if _, err := File(filepath.Join(dir, "none"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	// a directory opens but cannot be read: the error names the path
	if _, err := File(dir, 5); err == nil || !strings.Contains(err.Error(), "read "+dir) {
		t.Errorf("directory: %v, want a read error naming %s", err, dir)
	}
}

func TestAll(t *testing.T) {
	if data, err := All(strings.NewReader(""), 0); err != nil || len(data) != 0 {
		t.Errorf("All(empty, 0) = %q, %v", data, err)
	}
	_, err := All(strings.NewReader("ab"), 1)
	if err == nil || err.Error() != "larger than 1 bytes" {
		t.Errorf("All(ab, 1) = %v, want larger than 1 bytes", err)
	}
}
