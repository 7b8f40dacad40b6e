//go:build !unix

package filelock

import "fmt"

func lock(path string, wait bool) (func(), error) {
	return nil, fmt.Errorf("lock %s: %w", path, ErrUnsupported)
}
