package procgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"time"
)

// Watched is a child process started in a process group of its own (Set, dieWithParent)
// whose stderr is copied to a log file (cut at a limit) and scanned for the first line that
// matches a pattern: the line where the child says where it listens (Chromium's
// "DevTools listening on ws://...", pab guard's MCP address).
type Watched struct {
	pgid    int
	exited  chan error    // the child's Wait result; whoever reads it puts it back
	found   chan string   // the pattern's first submatch, sent once
	logDone chan struct{} // closed when stderr reached EOF and the log is closed
	pr      *os.File

	mu   sync.Mutex
	tail []string // the last stderr lines, for messages
}

// ErrNoAddress is Watched.Wait's error when its timeout passed without the line.
var ErrNoAddress = errors.New("printed no address")

// ExitedError is Watched.Wait's error when the child exited before printing the line.
type ExitedError struct {
	// Status says how it ended ("exit status 1", "status 0", "signal: killed").
	Status string
	// Tail holds its last stderr lines (at most five).
	Tail []string
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("exited (%s) before printing its address: %q", e.Status, e.Tail)
}

// StartWatched starts c in a process group of its own (killed should pab die) with stderr
// through a pipe of its own, so that Wait returns when the child exits even while its
// helper processes still hold the pipe. Stderr is copied to logPath, cut at limit bytes
// ("" discards it), and scanned for re, whose first submatch Wait returns. c.Stderr must
// be unset.
func StartWatched(c *exec.Cmd, logPath string, limit int64, re *regexp.Regexp) (*Watched, error) {
	Set(c, true)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.Stderr = pw
	err = c.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	w := &Watched{pgid: c.Process.Pid, exited: make(chan error, 1), found: make(chan string, 1), logDone: make(chan struct{}), pr: pr}
	go func() { w.exited <- c.Wait() }()
	go w.copyStderr(logPath, limit, re)
	return w, nil
}

func (w *Watched) copyStderr(logPath string, limit int64, re *regexp.Regexp) {
	defer close(w.logDone)
	var out io.Writer = io.Discard
	if logPath != "" {
		if f, err := os.Create(logPath); err == nil {
			defer f.Close()
			out = NewCapWriter(f, limit)
		}
	}
	sc := bufio.NewScanner(w.pr)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(out, line)
		if !found {
			if m := re.FindStringSubmatch(line); m != nil {
				found = true
				w.found <- m[1]
			}
		}
		w.mu.Lock()
		if len(w.tail) == 5 {
			w.tail = w.tail[1:]
		}
		w.tail = append(w.tail, line)
		w.mu.Unlock()
	}
	io.Copy(out, w.pr) // the rest of an over-long line
}

// Wait returns the first submatch of the pattern, or an *ExitedError, ErrNoAddress after
// timeout, or ctx's error. It does not stop the child.
func (w *Watched) Wait(ctx context.Context, timeout time.Duration) (string, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case s := <-w.found:
		return s, nil
	case err := <-w.exited:
		w.exited <- err
		select {
		case s := <-w.found: // printed just before exiting
			return s, nil
		case <-w.logDone:
		case <-time.After(2 * time.Second): // a helper process still holds stderr
		}
		w.mu.Lock()
		tail := append([]string(nil), w.tail...)
		w.mu.Unlock()
		return "", &ExitedError{Status: ExitStatus(err), Tail: tail}
	case <-timer.C:
		return "", ErrNoAddress
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Exited receives the child's Wait result once it has exited. Whoever reads the value must
// send it back (the channel holds one), so that Stop and other readers see it too.
func (w *Watched) Exited() chan error { return w.exited }

// DefaultStopGrace is how long Stop lets the child's group end after SIGTERM before
// SIGKILL.
const DefaultStopGrace = 5 * time.Second

// Stop ends the child's process group (SIGTERM, SIGKILL after DefaultStopGrace, then
// SIGKILL to members left behind) and waits up to five seconds for its log to be written
// out.
func (w *Watched) Stop() { w.StopWithin(DefaultStopGrace) }

// StopWithin is Stop with grace between SIGTERM and SIGKILL: for a child whose own
// shutdown (answering requests in flight, then writing its files) may take longer than
// DefaultStopGrace.
func (w *Watched) StopWithin(grace time.Duration) {
	err := Stop(w.pgid, w.exited, grace)
	w.exited <- err
	Kill(w.pgid) //nolint:errcheck // helpers left in the group, if any
	select {
	case <-w.logDone:
	case <-time.After(5 * time.Second):
	}
	w.pr.Close()
}

// ExitStatus describes a process's end, as exec.Cmd.Wait returned it, for a message:
// "status 0" for nil, else the error's text ("exit status 2", "signal: killed").
func ExitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// Pgid is the child's process group id (its pid).
func (w *Watched) Pgid() int { return w.pgid }
