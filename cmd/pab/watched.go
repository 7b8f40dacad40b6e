package main

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

	"github.com/pab-dev/pab/internal/procgroup"
)

// watchedChild is a child process (Chromium, pab guard) started in its own process group,
// whose stderr is copied to a log file (cut at a limit) and scanned for the first line that
// matches a pattern: the line where the child says where it listens.
type watchedChild struct {
	pgid    int
	exited  chan error    // the child's Wait result; whoever reads it puts it back
	found   chan string   // the pattern's first submatch, sent once
	logDone chan struct{} // closed when stderr reached EOF and the log is closed
	pr      *os.File

	mu   sync.Mutex
	tail []string // the last stderr lines, for messages
}

// errNoAddress is watchedChild.wait's error when the timeout passed without the line.
var errNoAddress = errors.New("printed no address")

// childExitedError is watchedChild.wait's error when the child exited before the line.
type childExitedError struct {
	status string   // how it ended ("exit status 1", "status 0")
	tail   []string // its last stderr lines
}

func (e *childExitedError) Error() string {
	return fmt.Sprintf("exited (%s) before printing its address: %q", e.status, e.tail)
}

// startWatched starts c in a process group of its own (killed with pab should pab die) with
// stderr through a pipe of its own, so that Wait returns when the child exits even while
// its helper processes still hold the pipe. Stderr is copied to logPath, cut at limit bytes
// ("" discards it), and scanned for re.
func startWatched(c *exec.Cmd, logPath string, limit int64, re *regexp.Regexp) (*watchedChild, error) {
	procgroup.Set(c, true)
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
	w := &watchedChild{pgid: c.Process.Pid, exited: make(chan error, 1), found: make(chan string, 1), logDone: make(chan struct{}), pr: pr}
	go func() { w.exited <- c.Wait() }()
	go w.copyStderr(logPath, limit, re)
	return w, nil
}

func (w *watchedChild) copyStderr(logPath string, limit int64, re *regexp.Regexp) {
	defer close(w.logDone)
	var out io.Writer = io.Discard
	if logPath != "" {
		if f, err := os.Create(logPath); err == nil {
			defer f.Close()
			out = &limitWriter{w: f, n: limit}
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

// wait returns the first submatch of the pattern, or childExitedError, errNoAddress after
// timeout, or ctx's error. It does not stop the child.
func (w *watchedChild) wait(ctx context.Context, timeout time.Duration) (string, error) {
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
		return "", &childExitedError{status: exitStatus(err), tail: tail}
	case <-timer.C:
		return "", errNoAddress
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stop ends the child's process group (stopGroup) and waits up to five seconds for its log.
func (w *watchedChild) stop() {
	stopGroup(w.pgid, w.exited)
	select {
	case <-w.logDone:
	case <-time.After(5 * time.Second):
	}
	w.pr.Close()
}
