// Package procgroup runs a command as the leader of a process group of its own and ends
// the whole group, children it left behind included: SIGTERM, then SIGKILL after a grace
// period. It is the one home of this in pab (the agents of pab run and pab-pod, Chromium,
// @playwright/mcp under pab guard, CLI judges, the benchmarks' servers) and uses only the
// standard library, so the static helpers in deploy/ can use it too.
//
// A process group is POSIX's (setpgid(2)); a signal to a negative pid reaches every member
// (kill(2)). Linux only: Set's dieWithParent uses PR_SET_PDEATHSIG, and Alive reads /proc.
package procgroup

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Set makes cmd, when started, the leader of a new process group whose id is its pid.
// With dieWithParent the leader also gets SIGKILL should the thread that started it
// (in practice, pab) die without ending it (PR_SET_PDEATHSIG). When cmd was made with
// exec.CommandContext, the context's end kills the whole group, not only the leader.
// Call it before cmd.Start; it keeps any other SysProcAttr field already set.
func Set(cmd *exec.Cmd, dieWithParent bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if dieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if cmd.Cancel != nil {
		cmd.Cancel = func() error {
			if err := Kill(cmd.Process.Pid); err != nil {
				return cmd.Process.Kill()
			}
			return nil
		}
	}
}

// Signal sends sig to every member of the group pgid. A group that no longer exists is
// not an error.
func Signal(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return errors.New("procgroup: no process group")
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Kill sends SIGKILL to every member of the group pgid.
func Kill(pgid int) error { return Signal(pgid, syscall.SIGKILL) }

// Stop ends the group pgid whose leader's end arrives on exited (the value of the
// goroutine that waits for it: an error from cmd.Wait, an *os.ProcessState, ...): SIGTERM
// to the group, then, if the leader has not ended within grace, SIGKILL to the group. It
// returns the leader's value. Members that outlive the leader are not waited for (see
// KillRest).
func Stop[T any](pgid int, exited <-chan T, grace time.Duration) T {
	Signal(pgid, syscall.SIGTERM) //nolint:errcheck // a gone group ends the same way
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case v := <-exited:
		return v
	case <-t.C:
		Kill(pgid) //nolint:errcheck
		return <-exited
	}
}

// KillRest ends what is left of the group pgid once its leader is gone: SIGTERM, then
// SIGKILL when it has not emptied within grace (checked every 20 ms with Alive); at once
// when the group is already empty.
func KillRest(pgid int, grace time.Duration) {
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !Alive(pgid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	Kill(pgid) //nolint:errcheck
}

// Alive reports whether the group pgid has a member that still runs. A zombie (exited,
// not yet reaped by its new parent) still counts for kill(2) but runs no more, so it is
// read past in /proc/PID/stat; without /proc, any member counts.
func Alive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if state, pgrp, ok := parseStat(data); ok && pgrp == pgid && state != "Z" && state != "X" {
			return true
		}
	}
	return false
}

// parseStat reads the state and process group of a /proc/PID/stat line: "pid (comm)
// state ppid pgrp ...", comm possibly holding spaces and parentheses (proc(5)).
func parseStat(data []byte) (state string, pgrp int, ok bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", 0, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return "", 0, false
	}
	return string(f[0]), pgrp, true
}

// SignalName is the SIGXXX name of s for the signals a child is commonly ended by
// (SIGKILL, SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGHUP, SIGPIPE, SIGBUS, SIGQUIT), else
// "signal N".
func SignalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return "signal " + strconv.Itoa(int(s))
}
