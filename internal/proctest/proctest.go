// Package proctest holds the test helpers that check whether a process has ended, for the
// tests of every package that starts process groups (pab run, the pod agent, the guard's
// child, the CLI judge). Linux /proc is read; elsewhere a process counts as gone when
// kill(pid, 0) fails.
package proctest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Alive reports whether pid exists and is neither a zombie (exited, not yet reaped) nor
// dead (state Z or X in /proc/PID/stat).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// Field 3, after "(comm)", is the state.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// GoneWithin reports whether pid has ended (see Alive) within d, looking every 20 ms.
// SIGKILL is delivered at once but a process takes a moment to exit, so one look right
// after a kill can still find it running: tests wait with this instead.
func GoneWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !Alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
