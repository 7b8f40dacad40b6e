// Package readlimit reads whole files and streams that may be hostile without trusting
// their size: at most a given number of bytes is read, and anything longer is refused
// with an error rather than cut short or held in memory.
package readlimit

import (
	"fmt"
	"io"
	"os"
)

// TooLargeError is the error of All and File for input longer than Max bytes. Path is
// the file's path for File, empty for All.
type TooLargeError struct {
	Path string
	Max  int64
}

// Error is "PATH: larger than MAX bytes", or "larger than MAX bytes" without a path.
func (e *TooLargeError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("larger than %d bytes", e.Max)
	}
	return fmt.Sprintf("%s: larger than %d bytes", e.Path, e.Max)
}

// All reads r to its end, at most max bytes (max ≥ 0). More than max bytes is a
// *TooLargeError (nothing is returned, and at most max+1 bytes were read); a read error
// is returned as it is.
func All(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooLargeError{Max: max}
	}
	return data, nil
}

// File reads the file at path, at most max bytes. A file that cannot be opened gives the
// *fs.PathError of os.Open; a read error is "read PATH: ..."; a file longer than max is a
// *TooLargeError naming path.
func File(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return named(path, f, max)
}

// named is All with its errors naming path: a *TooLargeError with Path set, or
// "read PATH: ...".
func named(path string, r io.Reader, max int64) ([]byte, error) {
	data, err := All(r, max)
	if tl, ok := err.(*TooLargeError); ok {
		tl.Path = path
		return nil, tl
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// OpenRegular opens path for reading after checking that it is a regular file (stat
// first, so that a FIFO or a device is refused rather than opened: opening a FIFO blocks).
// A path that is not one is "PATH is not a regular file"; a failed stat or open is the
// *fs.PathError of os.Stat or os.Open.
func OpenRegular(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return os.Open(path)
}

// Regular is File for a regular file only (OpenRegular).
func Regular(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return named(path, f, max)
}
