//go:build unix

package replay

import (
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on the file at path (created if missing) and returns
// the function that releases it. It blocks while another process or goroutine holds it.
func lockDir(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
