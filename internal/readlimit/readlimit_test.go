package readlimit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

func TestRegular(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("abc"), 0o644)
	if data, err := Regular(p, 3); err != nil || string(data) != "abc" {
		t.Errorf("Regular = %q, %v", data, err)
	}
	if _, err := Regular(p, 2); err == nil || err.Error() != p+": larger than 2 bytes" {
		t.Errorf("Regular(2) = %v", err)
	}
	// a directory and a FIFO are refused before they are opened (a FIFO's open would block)
	if _, err := Regular(dir, 10); err == nil || err.Error() != dir+" is not a regular file" {
		t.Errorf("Regular(dir) = %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Regular(fifo, 10); err == nil || err.Error() != fifo+" is not a regular file" {
		t.Errorf("Regular(fifo) = %v", err)
	}
	if _, err := OpenRegular(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenRegular(missing) = %v", err)
	}
}
