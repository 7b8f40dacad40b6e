package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/procgroup"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
)

// GuardStartTimeout bounds the wait for pab guard's "serving MCP on" line.
const GuardStartTimeout = 90 * time.Second

// guardServing matches the line pab guard prints on stderr once it serves MCP over HTTP.
var guardServing = regexp.MustCompile(`serving MCP on (http://\S+/mcp)`)

// Local is the Harness of pab run on this machine, for Batch and Collect: every task is
// opened once (task.Open: bundle, rules, index; grade.Prepare: card, grading, provenance)
// and shared by its runs; every run gets a fresh replay on a free loopback port, and a
// headless Chromium (Chrome set, GuardApp empty) or a pab guard child (GuardApp) through
// it. Set the fields before the first OpenTask; Local is safe for concurrent use.
type Local struct {
	// Repo is the task repository.
	Repo *task.Repo
	// Clock turns the page clock of every replay on.
	Clock bool
	// Warn receives task.Open's notes, grading warnings and "pab run: TASK: ..." notes.
	Warn io.Writer
	// Chrome is the Chromium to start for every run; with GuardApp it is passed on to pab
	// guard as --chrome ("": guard's default).
	Chrome string
	// GuardApp is pab guard's application file (absolute); GuardMCP its --browser-mcp
	// (""); PabExe the pab binary run as 'pab guard'.
	GuardApp, GuardMCP, PabExe string
	// OpenJudge opens the judge; it is called once per batch, when a run needs it, and its
	// error becomes a note of every such run ("judge: ...").
	OpenJudge func() (*grade.Cache, error)
	// Samples is grade.Options.Samples.
	Samples int
	// MCP (pab run --browser --mcp) starts @playwright/mcp for every run, attached to its
	// Chromium and serving HTTP, and hands it over ready (PAB_MCP_URL, PAB_MCP_TOKEN).
	MCP bool
	// MCPTimeout bounds the wait for a run's browser MCP server or pab guard to be ready
	// (0: MCPReadyTimeout).
	MCPTimeout time.Duration
	// NoSteps turns off the recording of the browser steps (steps.jsonl, screenshots,
	// view.html: pab run --view=false).
	NoSteps bool

	caOnce sync.Once
	ca     *tlsca.CA
	caErr  error

	judgeMu  sync.Mutex
	judge    *grade.Cache
	judgeErr error
	judged   bool
}

// RepoTasks are the tasks of a batch in repo: ids, or every task of the repository when ids
// is empty. Each must be a valid task id (task.ValidID) of a task of repo. Errors start
// with "run: " and name the id or the tasks directory.
func RepoTasks(repo *task.Repo, ids []string) ([]string, error) {
	if len(ids) == 0 {
		var err error
		if ids, err = repo.TaskIDs(); err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("run: no tasks in %s", repo.TasksDir())
		}
	}
	for _, id := range ids {
		if err := task.ValidID(id); err != nil {
			return nil, fmt.Errorf("run: %v (pab run takes task ids of the repository)", err)
		}
		if _, err := repo.Task(id); err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
	}
	return ids, nil
}

// UseGuard sets h up to run 'pab guard' (the binary pabExe) with the application file app
// for every run, browserMCP as its --browser-mcp and chrome as its --chrome. app is made
// absolute and must exist: else a *grade.FieldError on GuardApp.
func (h *Local) UseGuard(app, browserMCP, chrome, pabExe string) error {
	abs, err := filepath.Abs(app)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("run: %w", &grade.FieldError{Field: "GuardApp", Err: err})
	}
	h.GuardApp, h.GuardMCP, h.Chrome, h.PabExe = abs, browserMCP, chrome, pabExe
	return nil
}

func (h *Local) loadCA() (*tlsca.CA, error) {
	h.caOnce.Do(func() { h.ca, h.caErr = tlsca.LoadDefault() })
	return h.ca, h.caErr
}

// openJudge opens the judge once for the whole batch.
func (h *Local) openJudge() (*grade.Cache, error) {
	h.judgeMu.Lock()
	defer h.judgeMu.Unlock()
	if !h.judged {
		h.judge, h.judgeErr = h.OpenJudge()
		h.judged = true
	}
	return h.judge, h.judgeErr
}

// OpenTask opens the task's recording and reads its card and grading.
func (h *Local) OpenTask(ctx context.Context, id string) (Task, error) {
	o, err := task.Open(id, h.Repo, h.Warn)
	if err != nil {
		return nil, err
	}
	// Hashed once per task: every run of the batch is graded against the same files.
	p := grade.Prepare(o, h.Repo.Root, h.Warn)
	t := &localTask{h: h, o: o, p: p}
	t.locale, t.timezone = task.Locale(o.Bundle.Manifest, p.Card)
	for _, n := range p.Notes {
		fmt.Fprintf(h.Warn, "pab run: %s: %s\n", id, n)
	}
	return t, nil
}

// localTask is a task opened by Local.
type localTask struct {
	h                *Local
	o                *task.Opened
	p                *grade.Prepared
	locale, timezone string
	closeOnce        sync.Once
}

func (t *localTask) Prompt() string {
	if t.p.Card == nil {
		return ""
	}
	return t.p.Card.Prompt
}

func (t *localTask) Close() error {
	var err error
	t.closeOnce.Do(func() { err = t.o.Close() })
	return err
}

// Start starts a replay on a free loopback port, and a browser or guard through it.
func (t *localTask) Start(ctx context.Context, spec StartSpec) (*Services, error) {
	ca, err := t.h.loadCA()
	if err != nil {
		return nil, err
	}
	srv, err := replay.New(replay.Options{Bundle: t.o.Bundle, Index: t.o.Index, Rules: t.o.Rules, CA: ca, Clock: t.h.Clock})
	if err != nil {
		return nil, err
	}
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if p := t.p.Provenance; p != nil && p.Recording != "" {
		srv.SetRecording(p.Recording, p.RecordingOf)
	}
	srv.SetLog(spec.Log)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopReplay := func() error {
		err := srv.Close()
		if serr := <-served; err == nil && serr != nil {
			err = fmt.Errorf("replay: %w", serr)
		}
		return err
	}
	svc := &Services{Proxy: ln.Addr().String(), CAFile: ca.CertPath(), CASPKI: ca.SPKIHash(), Stop: stopReplay}
	timeout := t.h.MCPTimeout
	if timeout <= 0 {
		timeout = MCPReadyTimeout
	}
	var stop func()
	switch {
	case t.h.Chrome != "" && t.h.GuardApp == "":
		// Chromium as pab browser starts it (browser.Start: same flags, own process group,
		// fresh profile) with about:blank open; its stderr in browser.stderr (cut at 1 MiB).
		b, err := browser.Start(ctx, t.h.Chrome, browser.Options{Proxy: svc.Proxy, SPKI: svc.CASPKI,
			Locale: t.locale, Timezone: t.timezone}, "", filepath.Join(spec.Dir, "browser.stderr"))
		if err != nil {
			stopReplay()
			return nil, browserStartError(fmt.Errorf("%w (see browser.stderr)", err))
		}
		svc.CDPURL, stop = b.CDP, b.Stop
		if t.h.MCP {
			m, err := startPlaywrightMCP(ctx, t.h.Repo.Root, b.CDP, spec.Dir, timeout, t.h.steps(spec.Dir, b.CDP, ""))
			if err != nil {
				b.Stop()
				stopReplay()
				return nil, err
			}
			svc.MCPURL, svc.MCPToken = m.URL, m.Token
			stop = func() { m.stop(); b.Stop() }
		}
	case t.h.GuardApp != "":
		start := time.Now()
		gd, err := t.startGuard(ctx, svc.Proxy, spec.Dir)
		if err != nil {
			stopReplay()
			return nil, browserStartError(err)
		}
		m, err := readyMCP(ctx, gd.URL, "", start, timeout, gd.Stop, "pab guard",
			t.h.steps(spec.Dir, "", "no screenshot: pab guard owns this run's browser"))
		if err != nil {
			stopReplay()
			return nil, err
		}
		svc.MCPURL, svc.MCPToken, stop = m.URL, m.Token, m.stop
	}
	if stop != nil {
		svc.Stop = func() error {
			stop()
			return stopReplay()
		}
	}
	return svc, nil
}

// Grade grades the run as pab grade does.
func (t *localTask) Grade(ctx context.Context, logPath string, answer *grade.AnswerInfo) (*grade.Result, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if answer != nil {
		answer.File = filepath.Base(answer.File)
	}
	in := t.p.Input(answer)
	if in.Grading != nil && in.Grading.Guard != nil {
		// pab run --guard writes the guard's files next to the log (startGuard).
		dir := filepath.Dir(logPath)
		in.Guard, in.GuardError = grade.ReadGuardRun(filepath.Join(dir, grade.GuardTraceFile), filepath.Join(dir, grade.GuardResultFile))
		if in.Guard != nil {
			in.Guard.TraceFile, in.Guard.ResultFile = grade.GuardTraceFile, grade.GuardResultFile
		}
	}
	var judge *grade.Cache
	var judgeErr error
	if t.p.Problem == nil && grade.NeedsJudge(in.Grading, answer) {
		judge, judgeErr = t.h.openJudge()
	}
	// The log is streamed, as pab grade does: memory does not grow with it.
	res, err := grade.GradeLog(ctx, in, f, filepath.Base(logPath), grade.Options{Judge: judge, Samples: t.h.Samples})
	if err != nil {
		return nil, err
	}
	if judgeErr != nil {
		res.Notes = append(res.Notes, "judge: "+judgeErr.Error())
	}
	return res, nil
}

// guardChild is a pab guard child process started for one run.
type guardChild struct {
	URL   string
	Token string // the bearer token of its control API (guard.ControlTokenEnv)
	Stop  func()
}

// startGuard runs PabExe as 'pab guard --listen 127.0.0.1:0 --application APP --proxy
// ADDR' (trace and result in the run directory, stderr in guard.stderr) and waits for the
// MCP address it prints.
func (t *localTask) startGuard(ctx context.Context, proxy, dir string) (*guardChild, error) {
	h := t.h
	args := []string{"--repo", h.Repo.Root, "guard", "--listen", "127.0.0.1:0", "--application", h.GuardApp,
		"--proxy", proxy, "--trace", filepath.Join(dir, grade.GuardTraceFile), "--result", filepath.Join(dir, grade.GuardResultFile)}
	if h.Chrome != "" {
		args = append(args, "--chrome", h.Chrome)
	}
	if h.GuardMCP != "" {
		// the user chose a server the guard cannot hold below the page: say so to pab guard
		args = append(args, "--browser-mcp", h.GuardMCP, "--unprotected-browser")
	}
	c := exec.Command(h.PabExe, args...)
	c.Dir = dir
	// the control API's token: known to this process only (not on the command line, not in
	// guard.stderr, not in the agent's environment)
	token := guard.NewControlToken()
	c.Env = append(os.Environ(), guard.ControlTokenEnv+"="+token)
	w, err := procgroup.StartWatched(c, filepath.Join(dir, "guard.stderr"), 10<<20, guardServing)
	if err != nil {
		return nil, fmt.Errorf("guard: start %s guard: %w", h.PabExe, err)
	}
	u, err := w.Wait(ctx, GuardStartTimeout)
	if err != nil {
		w.Stop()
		var ee *procgroup.ExitedError
		switch {
		case errors.As(err, &ee):
			tail, _ := os.ReadFile(filepath.Join(dir, "guard.stderr"))
			return nil, fmt.Errorf("guard exited (%s) before serving MCP: %s", ee.Status, lastLine(string(tail)))
		case errors.Is(err, procgroup.ErrNoAddress):
			return nil, fmt.Errorf("guard printed no MCP address within %s (see guard.stderr)", GuardStartTimeout)
		}
		return nil, err
	}
	return &guardChild{URL: u, Token: token, Stop: func() { w.StopWithin(GuardStopGrace) }}, nil
}

// GuardStopGrace is how long a run's pab guard has between SIGTERM and SIGKILL. On SIGTERM
// it waits up to 5 s for MCP requests in flight (its MCP server's shutdown), then traces
// engine.ended and writes the trace's end and the result: its grace must outlast that
// wait, or a loaded machine loses the run's last events.
const GuardStopGrace = 15 * time.Second

// lastLine is the last non-blank line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// steps is the step recorder of a run in dir (newStepRecorder), nil with NoSteps.
func (h *Local) steps(dir, cdp, noShot string) *stepRecorder {
	if h.NoSteps {
		return nil
	}
	return newStepRecorder(dir, cdp, noShot)
}
