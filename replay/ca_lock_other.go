//go:build !unix

package replay

// lockDir is a no-op where flock(2) is not available: concurrent first starts may race.
func lockDir(path string) (func(), error) { return func() {}, nil }
