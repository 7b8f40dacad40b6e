//go:build !linux

package task

import "os"

// fileIdentity gives no identity on this platform, so no hash stamp is used: every start
// hashes the recording.
func fileIdentity(fi os.FileInfo) (stampFile, bool) {
	return stampFile{}, false
}
