//go:build !unix

package replay

import (
	"os"

	"github.com/pab-dev/pab/internal/readlimit"
)

// mapping is a file read into memory: this platform's build maps nothing (mmap_unix.go).
type mapping struct {
	data []byte
	fi   os.FileInfo // the file mapped, nil when unknown
}

// mapFile reads the regular file path (at most limit bytes).
func mapFile(path string, limit int64) (mapping, error) {
	data, err := readlimit.File(path, limit)
	return mapping{data: data}, err
}

func (m mapping) close() error { return nil }
