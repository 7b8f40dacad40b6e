package task

import (
	"os"
	"syscall"
)

// fileIdentity returns the device, inode and status-change time of fi (Name, Size and
// MTime left for the caller); ok is false when fi carries no syscall.Stat_t.
func fileIdentity(fi os.FileInfo) (stampFile, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stampFile{}, false
	}
	return stampFile{Dev: uint64(st.Dev), Ino: st.Ino, CTime: st.Ctim.Nano()}, true
}
