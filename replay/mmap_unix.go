//go:build unix

package replay

import (
	"fmt"
	"os"
	"syscall"
)

// mapping is a file mapped read-only into memory (mapFile), or read into it where the
// platform has no mmap.
type mapping struct {
	data []byte
	fi   os.FileInfo // the file mapped, nil when unknown
}

// mapFile maps the regular file path read-only (at most limit bytes; an empty file maps to
// no bytes). The mapping stays valid after the file is replaced or removed (the saved
// index is replaced by rename, never written in place).
func mapFile(path string, limit int64) (mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return mapping{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return mapping{}, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return mapping{}, fmt.Errorf("%s: not a regular file", path)
	case fi.Size() > limit:
		return mapping{}, fmt.Errorf("%s: %d bytes, more than %d", path, fi.Size(), limit)
	case fi.Size() == 0:
		return mapping{fi: fi}, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return mapping{}, fmt.Errorf("map %s: %w", path, err)
	}
	return mapping{data: data, fi: fi}, nil
}

// close unmaps the file.
func (m mapping) close() error {
	if m.data == nil {
		return nil
	}
	return syscall.Munmap(m.data)
}
