package grade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/internal/procgroup"
)

const (
	// judgeCLIMaxStdout bounds a CLI judge's answer (bytes); more is an error.
	judgeCLIMaxStdout = 1 << 20
	// judgeCLIStderrTail is how much of a CLI judge's stderr is kept (the last bytes).
	judgeCLIStderrTail = 4 << 10
	// judgeCLIWaitDelay is how long Wait waits for output pipes after the shell
	// exited or its group was killed (a background child may still hold them).
	judgeCLIWaitDelay = 500 * time.Millisecond
)

// cliJudge runs a command line with `sh -c` in its own process group, the
// prompt on stdin; stdout (at most 1 MiB) is the answer. The environment
// passes through, plus PAB_JUDGE_MODEL when a model is configured.
type cliJudge struct {
	name    string
	command string
	model   string
	timeout time.Duration
}

func newCLIJudge(cfg JudgeConfig) (*cliJudge, error) {
	model := strings.TrimSpace(cfg.Model)
	command := strings.TrimSpace(cfg.Command)
	if command == "" {
		if !onPath("claude", cfg.Env("PATH")) {
			return nil, errors.New(`judge: no judge to ask: the default judge runs "claude -p" (Claude Code's CLI), which is not on PATH, and neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set; set one of them (the API judge), install Claude Code, or give --judge cli --judge-cmd CMD`)
		}
		command = DefaultJudgeCommand
		if model != "" {
			command += " --model " + judgeShellQuote(model)
		}
	}
	return &cliJudge{name: "cli/" + command, command: command, model: model, timeout: cfg.Timeout}, nil
}

// Name is "cli/<command line>".
func (j *cliJudge) Name() string { return j.name }

// Ask runs the command once. A non-zero exit, a timeout (which kills the
// whole process group), more than 1 MiB on stdout or an empty stdout is an
// error naming the command, with the tail of stderr.
func (j *cliJudge) Ask(ctx context.Context, prompt string) (Reply, error) {
	runCtx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()

	cmd := exec.CommandContext(runCtx, "sh", "-c", j.command)
	// the context's end kills the whole group, so children of the shell die too
	procgroup.Set(cmd, false)
	cmd.WaitDelay = judgeCLIWaitDelay
	cmd.Stdin = strings.NewReader(prompt)
	cmd.Env = os.Environ()
	if j.model != "" {
		cmd.Env = append(cmd.Env, "PAB_JUDGE_MODEL="+j.model)
	}
	stdout := &judgeCapped{limit: judgeCLIMaxStdout, onOverflow: cancel}
	stderr := &judgeTail{limit: judgeCLIStderrTail}
	cmd.Stdout = stdout
	cmd.Stderr = stderr

	err := cmd.Run()
	// The shell is gone; children it left behind (a background job holding stdout) are
	// killed with the group, whatever happened.
	if cmd.Process != nil {
		_ = procgroup.Kill(cmd.Process.Pid)
	}
	// Output pipes still held by such a child are closed after WaitDelay: the command
	// itself succeeded, and what it printed before exiting is the reply.
	if errors.Is(err, exec.ErrWaitDelay) && runCtx.Err() == nil {
		err = nil
	}
	tail := strings.TrimSpace(stderr.String())
	withTail := func(msg string) error {
		if tail != "" {
			msg += "; stderr: " + tail
		}
		return fmt.Errorf("judge %s: %s", j.name, msg)
	}
	switch {
	case stdout.Overflowed():
		return Reply{}, withTail(fmt.Sprintf("command %q wrote more than %d bytes to stdout", j.command, judgeCLIMaxStdout))
	case ctx.Err() != nil:
		return Reply{}, fmt.Errorf("judge %s: command %q stopped: %w", j.name, j.command, ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return Reply{}, withTail(fmt.Sprintf("command %q timed out after %v (process group killed)", j.command, j.timeout))
	case err != nil:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return Reply{}, withTail(fmt.Sprintf("command %q failed: %v", j.command, exitErr.ProcessState))
		}
		return Reply{}, withTail(fmt.Sprintf("command %q: %v", j.command, err))
	}
	text := strings.TrimSpace(stdout.String())
	if text == "" {
		return Reply{}, withTail(fmt.Sprintf("command %q printed nothing on stdout", j.command))
	}
	return Reply{Text: text, Model: j.model}, nil
}

// judgeShellQuote quotes s for sh as one word.
func judgeShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// judgeCapped keeps up to limit bytes; a write past the limit fails, marks
// the overflow and calls onOverflow (once).
type judgeCapped struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	limit      int
	over       bool
	onOverflow func()
}

func (c *judgeCapped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.over {
		return 0, errJudgeStdoutTooLarge
	}
	if c.buf.Len()+len(p) > c.limit {
		c.over = true
		if c.onOverflow != nil {
			c.onOverflow()
		}
		return 0, errJudgeStdoutTooLarge
	}
	return c.buf.Write(p)
}

// Overflowed reports whether more than limit bytes were offered.
func (c *judgeCapped) Overflowed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.over
}

func (c *judgeCapped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

var errJudgeStdoutTooLarge = fmt.Errorf("judge: command output exceeds %d bytes", judgeCLIMaxStdout)

// judgeTail keeps the last limit bytes written to it.
type judgeTail struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

func (t *judgeTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
	}
	return len(p), nil
}

func (t *judgeTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "�")
}

// onPath reports whether an executable file name is in one of the directories of path
// (a $PATH value), as exec.LookPath finds it.
func onPath(name, path string) bool {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
