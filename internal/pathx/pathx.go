// Package pathx answers questions about paths: whether one lies inside a directory, the one
// home of that check (cache copies, rule files named relative to a repository, files an
// application names), and whether one is a regular file or a directory.
// It compares cleaned absolute paths lexically: it does not resolve symbolic links, so a
// caller that must not follow a link out of a folder opens through os.Root instead.
package pathx

import (
	"os"
	"path/filepath"
	"strings"
)

// Rel returns path relative to dir, slash-separated, and true when path is dir itself or
// lies under it; both are made absolute and clean first. Otherwise it returns "" and
// false (also when either cannot be made absolute).
func Rel(dir, path string) (string, bool) {
	d, err1 := filepath.Abs(dir)
	p, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return "", false
	}
	rel, err := filepath.Rel(d, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// Within reports whether path is dir or lies under it (Rel's second result).
func Within(path, dir string) bool {
	_, ok := Rel(dir, path)
	return ok
}

// IsRegularFile reports whether path is a regular file, symbolic links followed (os.Stat).
func IsRegularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// IsDir reports whether path is a directory, symbolic links followed (os.Stat).
func IsDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
