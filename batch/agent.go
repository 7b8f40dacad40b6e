package batch

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/procgroup"
)

// MaxOutput is how much of the agent's stdout and of its stderr is kept, in bytes each; the
// rest is counted and dropped, with a note at the end of the file.
const MaxOutput = 10 << 20

// DefaultGrace is how long an agent's process group has between SIGTERM and SIGKILL.
const DefaultGrace = 5 * time.Second

// outputDrain bounds the wait for the agent's output pipes to close once its process group
// was killed (a process that left the group may still hold them).
const outputDrain = 5 * time.Second

// cappedFile writes the first limit bytes to a pending file (atomicfile.Pending), counts
// the rest, and on finish appends a note and commits the file. Its Write never fails (a
// procgroup.CapWriter: the agent never blocks on a full pipe); the first write error is
// kept (later writes are dropped) and returned by finish.
type cappedFile struct {
	*procgroup.CapWriter
	f     *atomicfile.Pending
	limit int64
}

func newCappedFile(path string, limit int64) (*cappedFile, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	return &cappedFile{CapWriter: procgroup.NewCapWriter(f, limit), f: f, limit: limit}, nil
}

// finish notes dropped bytes and commits the file; it returns the total bytes written to
// it (kept and dropped) and the first error. A copy into c still going (a process that
// left the agent's group holds the pipe) writes nothing after it.
func (c *cappedFile) finish() (int64, error) {
	written, total, err := c.Stop()
	if err == nil && total > written {
		_, err = fmt.Fprintf(c.f, "\n[pab: output cut at %d bytes; %d more bytes dropped]\n", c.limit, total-written)
	}
	if err != nil {
		c.f.Abort()
		return total, fmt.Errorf("write %s: %w", c.f.Path(), err)
	}
	return total, c.f.Commit(0o644)
}

// abort removes the pending file.
func (c *cappedFile) abort() {
	c.Stop()
	c.f.Abort()
}

// agentSpec is how to start the agent.
type agentSpec struct {
	command string   // run with sh -c
	dir     string   // working directory
	env     []string // full environment
	timeout time.Duration
	grace   time.Duration
	stdout  io.Writer
	stderr  io.Writer
}

// agentEnd is how the agent ended.
type agentEnd struct {
	exitCode    int // -1 when a signal ended it
	signal      string
	timedOut    bool
	interrupted bool // ctx ended (Ctrl-C) before the agent did
	started     time.Time
	ended       time.Time
	err         error // the agent could not be started or waited for
}

// runAgent runs the agent with sh -c in its own process group and waits for it. When the
// time limit passes or ctx ends, the whole group gets SIGTERM, then SIGKILL after the grace
// period. After the agent's own exit, whatever is left of its group is killed too (SIGTERM,
// then SIGKILL), so no child outlives the run.
func runAgent(ctx context.Context, a agentSpec) agentEnd {
	c := exec.Command("/bin/sh", "-c", a.command)
	c.Dir = a.dir
	c.Env = a.env
	c.Stdin = nil
	// Pdeathsig: killed with pab, should pab itself be killed without a chance to clean up.
	procgroup.Set(c, true)
	// Pipes of our own: Wait on the process alone, and the copy ends when every holder of
	// the write ends (the group) is gone.
	outR, outW, err := os.Pipe()
	if err != nil {
		return agentEnd{exitCode: -1, err: err, started: time.Now(), ended: time.Now()}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return agentEnd{exitCode: -1, err: err, started: time.Now(), ended: time.Now()}
	}
	c.Stdout, c.Stderr = outW, errW
	end := agentEnd{started: time.Now()}
	err = c.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		end.ended = time.Now()
		end.exitCode = -1
		end.err = fmt.Errorf("start agent: %w", err)
		return end
	}
	pgid := c.Process.Pid
	var copies sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		w io.Writer
	}{{outR, a.stdout}, {errR, a.stderr}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			io.Copy(p.w, p.r)
		}()
	}
	exited := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := c.Process.Wait()
		exited <- st
	}()

	var timeout <-chan time.Time
	if a.timeout > 0 {
		t := time.NewTimer(a.timeout)
		defer t.Stop()
		timeout = t.C
	}
	var st *os.ProcessState
	select {
	case st = <-exited:
	case <-timeout:
		end.timedOut = true
		st = procgroup.Stop(pgid, exited, a.grace)
	case <-ctx.Done():
		end.interrupted = true
		st = procgroup.Stop(pgid, exited, a.grace)
	}
	end.ended = time.Now()
	// Children that outlive the agent: the same treatment, then the output is drained.
	procgroup.KillRest(pgid, a.grace)
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputDrain):
		// a process that left the group (setsid) still holds a pipe: stop reading
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	end.exitCode = -1
	if st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			end.signal = procgroup.SignalName(ws.Signal())
		} else {
			end.exitCode = st.ExitCode()
		}
	}
	return end
}
