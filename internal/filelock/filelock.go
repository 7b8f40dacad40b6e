// Package filelock takes advisory whole-file locks (flock(2)) that serialise writers across
// processes: the CA's creation, and every command that writes a task's recording.
//
// A lock is held on a separate lock file (created if missing, never removed, so that two
// processes can never hold locks on two different inodes of one name). Locks are released
// when the returned function is called or when the process exits, whatever way it exits.
// Where flock(2) does not exist, Lock and TryLock return ErrUnsupported.
package filelock

import "errors"

// ErrLocked is returned by TryLock when another process (or another open of the same file in
// this process) holds the lock.
var ErrLocked = errors.New("locked by another process")

// ErrUnsupported is returned where the platform has no flock(2).
var ErrUnsupported = errors.New("file locks are not supported on this platform")

// Lock takes an exclusive lock on the file at path, creating it (mode 0600) if missing, and
// blocks until it is granted. It returns the function that releases it (safe to call once).
// Errors name path.
func Lock(path string) (unlock func(), err error) { return lock(path, true) }

// TryLock is Lock that does not wait: when the lock is held elsewhere it returns ErrLocked
// (wrapped, naming path) at once.
func TryLock(path string) (unlock func(), err error) { return lock(path, false) }
