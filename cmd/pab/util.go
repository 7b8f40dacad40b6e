package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/warc"
)

func statSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// humanBytes formats n bytes with a decimal unit ("1.5 MB").
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// joinArgs joins command-line arguments for a message.
func joinArgs(args []string) string {
	return strings.Join(args, " ")
}

// isRegularFile reports whether path is a regular file (links followed).
func isRegularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// cacheWorkDir makes a fresh temporary directory in the repository's cache.
func cacheWorkDir(repo *task.Repo, prefix string) (string, error) {
	if err := os.MkdirAll(repo.CacheDir(), 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(repo.CacheDir(), prefix)
}

// isRecordingDir reports whether dir holds a published recording's archive: data.warc.gz
// (format 3), warc.tar.gz (format 2) or bundle.tar.gz (format 1), whole or in parts.
func isRecordingDir(dir string) bool {
	for _, name := range []string{warc.RecordingDataFile, warc.RecordingDataPart(0), warc.RecordingWARCFile, warc.RecordingWARCFile + ".000", warc.RecordingEntriesFile, warc.Format1File, warc.Format1File + ".000"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// debugWriter is w when --debug is on, else nil (warnings discarded).
func debugWriter(on bool, w io.Writer) io.Writer {
	if on {
		return w
	}
	return nil
}

// isDirPath reports whether path is a directory (links followed).
func isDirPath(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
