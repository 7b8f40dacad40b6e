//go:build !pab_lite

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/procgroup"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
)

// guardStartTimeout bounds the wait for pab guard's "serving MCP on" line.
const guardStartTimeout = 90 * time.Second

// guardServing matches the line pab guard prints on stderr once it serves MCP over HTTP.
var guardServing = regexp.MustCompile(`serving MCP on (http://\S+/mcp)`)

func newRunCmd(g *globalFlags) *cobra.Command {
	var (
		agent, out, label, guardApp, guardMCP, chrome, clock, collect string
		jobs, repeat                                                  int
		timeout, grace                                                time.Duration
		resume, browser, proxyEnv                                     bool
		jf                                                            judgeFlags
	)
	cmd := &cobra.Command{
		Use:   "run --agent CMD [TASK...] | --collect DIR",
		Short: "Run an agent on many tasks, several times each, grade every run and summarize",
		Long: `run runs an agent on tasks (default: every task of the repository), --repeat times
each, --jobs at a time. Every run gets a fresh replay of its task on a free loopback
port with its own log, optionally a fresh headless Chromium through it (--browser, CDP
endpoint in PAB_CDP_URL) or a pab guard in front of such a browser (--guard APP.yaml,
MCP endpoint in PAB_MCP_URL), then the agent command (sh -c, in the run directory, in
its own process group) with the task in its environment (PAB_TASK_ID, PAB_PROMPT,
PAB_PROMPT_FILE, PAB_PROXY, PAB_CA_FILE, PAB_ANSWER_FILE, ...; see docs/run.md).
--timeout kills the agent's whole process group; whatever the agent left running is
killed when it exits. Then the run is graded as pab grade does (same judge flags).

Output in --out (default runs/<UTC time>): <task>/<repeat>/ with replay.jsonl,
answer.txt, prompt.txt, agent.stdout, agent.stderr, run.json, result.json and
report.html; summary.json and index.html for the batch (pass rate and pass@k per task
and overall, over all runs: a run that did not pass counts against it; infrastructure
failures (status error) and runs that opened no page (no_browsing) are counted and named
apart). An apply task run with --guard is graded from the guard's trace and result.
--resume finishes a batch in --out: finished runs are kept, the others run again. Ctrl-C stops cleanly: running agents are killed and marked interrupted, the
summary is written, and pab exits with status 130.

--collect DIR grades and summarizes run directories written elsewhere (the Kubernetes
job of docs/deploy.md), exactly as a local batch.

Exit status: 0 when every run ended (whatever the scores), 1 on an error before the
runs, 130 when interrupted.`,
		Example: `  go build -o bin/refagent ./cmd/refagent
  pab run --agent "$PWD/bin/refagent --plans $PWD/tasks" --repeat 2 --jobs 2 \
      --judge cli --judge-cmd docs/examples/judge.sh books-sapiens-price archive-org-jobs
  pab run --browser --proxy-env=false --timeout 15m --repeat 3 --jobs 4 \
      --agent "$PWD/claude-playwright.sh"        # the script is in docs/run.md
  pab run --resume --out runs/20261129T215400Z --agent ./my-agent.sh
  pab run --collect /mnt/results --judge api`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			if jf.samples < 1 || jf.samples > 25 {
				return fmt.Errorf("--samples: want 1 to 25, got %d", jf.samples)
			}
			clockOn, err := clockSetting(clock, cmd.Flags().Changed("clock"), os.Getenv("RR_CLOCK"))
			if err != nil {
				return err
			}
			h := &runHarness{g: g, repo: repo, jf: &jf, clock: clockOn, errOut: cmd.ErrOrStderr()}
			live := stdoutIsTerminal(cmd.OutOrStdout())
			if collect != "" {
				for _, name := range []string{"agent", "out", "resume", "browser", "guard", "repeat", "timeout", "grace", "proxy-env"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("run: --%s does not go with --collect (it grades runs already made)", name)
					}
				}
				if len(args) > 0 {
					return errors.New("run --collect: takes no TASK arguments (the tasks are the directories of DIR)")
				}
				sum, err := batch.Collect(ctx, batch.CollectConfig{Harness: h, Dir: collect, Jobs: jobs,
					Progress: cmd.OutOrStdout(), Live: live, Label: label})
				return runOutcome(cmd, sum, collect, err)
			}
			if agent == "" {
				return errors.New("run: --agent CMD is required (the agent command, run with sh -c; see docs/run.md)")
			}
			if browser && guardApp != "" {
				return errors.New("run: give --browser or --guard, not both (guard starts its own browser)")
			}
			if timeout < 0 {
				return fmt.Errorf("run: --timeout %s: want 0 (none) or more", timeout)
			}
			tasks := args
			if len(tasks) == 0 {
				if tasks, err = repo.TaskIDs(); err != nil {
					return err
				}
				if len(tasks) == 0 {
					return fmt.Errorf("run: no tasks in %s", repo.TasksDir())
				}
			}
			for _, id := range tasks {
				if err := task.ValidID(id); err != nil {
					return fmt.Errorf("run: %v (pab run takes task ids of the repository)", err)
				}
				if _, err := repo.Task(id); err != nil {
					return fmt.Errorf("run: %w", err)
				}
			}
			if browser {
				if h.chrome, err = findChromium(chrome); err != nil {
					return err
				}
			}
			if guardApp != "" {
				if h.guardApp, err = filepath.Abs(guardApp); err != nil {
					return err
				}
				if _, err := os.Stat(h.guardApp); err != nil {
					return fmt.Errorf("run: --guard: %w", err)
				}
				if h.pabExe, err = os.Executable(); err != nil {
					return fmt.Errorf("run: --guard needs pab's own path: %w", err)
				}
				h.chrome, h.guardMCP = chrome, guardMCP
			} else if guardMCP != "" {
				return errors.New("run: --guard-browser-mcp needs --guard")
			}
			if out == "" {
				out = filepath.Join("runs", time.Now().UTC().Format("20060102T150405Z"))
			}
			sum, err := batch.Batch(ctx, batch.Config{Harness: h, Tasks: tasks, Repeat: repeat, Jobs: jobs,
				Agent: agent, Timeout: timeout, Grace: grace, Out: out, Resume: resume, ProxyEnv: proxyEnv,
				Progress: cmd.OutOrStdout(), Live: live, Label: label})
			return runOutcome(cmd, sum, out, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "the agent command, run with sh -c in the run directory (see docs/run.md for its environment)")
	f.IntVar(&jobs, "jobs", 1, "runs at once")
	f.IntVar(&repeat, "repeat", 1, "runs per task")
	f.DurationVar(&timeout, "timeout", 0, "time limit of one agent run (e.g. 10m; 0: none); the agent's process group is killed")
	f.DurationVar(&grace, "grace", batch.DefaultGrace, "time between SIGTERM and SIGKILL when the agent's process group is stopped")
	f.StringVar(&out, "out", "", "batch directory (default runs/<UTC time>)")
	f.BoolVar(&resume, "resume", false, "finish the batch in --out: keep its finished runs, run the others")
	f.BoolVar(&browser, "browser", false, "start a headless Chromium through each run's replay and hand its CDP endpoint over (PAB_CDP_URL)")
	f.StringVar(&guardApp, "guard", "", "start pab guard with this application file in front of each run's replay and hand its MCP endpoint over (PAB_MCP_URL)")
	f.StringVar(&guardMCP, "guard-browser-mcp", "", `with --guard: the browser MCP server guard starts instead of @playwright/mcp ("CMD ARGS", pab guard --browser-mcp)`)
	f.StringVar(&chrome, "chrome", "", "Chromium executable for --browser and --guard (default: chromium on PATH)")
	f.BoolVar(&proxyEnv, "proxy-env", true, "also set HTTP_PROXY/HTTPS_PROXY (and lower-case) to the replay for the agent; turn off for agents that call an LLM API themselves")
	f.StringVar(&clock, "clock", "on", "page clock of each replay: on or off, as for pab replay (env RR_CLOCK=off)")
	f.StringVar(&label, "label", "", "name of the agent in summary.json and index.html (default: the --agent command)")
	f.StringVar(&collect, "collect", "", "grade and summarize the run directories in DIR (a Kubernetes job's results) instead of running an agent")
	jf.add(cmd)
	return cmd
}

// runOutcome prints where the batch is and maps the batch's end to pab's exit status.
func runOutcome(cmd *cobra.Command, sum *batch.Summary, out string, err error) error {
	if sum != nil {
		// The pass rate over every run, then the infrastructure failures and the runs
		// that opened no page, each naming runs to look at.
		for _, l := range sum.Lines() {
			fmt.Fprintln(cmd.OutOrStdout(), "pab run:", l)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "pab run: wrote %s and %s\n", filepath.Join(out, batch.FileSummary), filepath.Join(out, batch.FileIndex))
	}
	if errors.Is(err, batch.ErrInterrupted) {
		return exitError{code: 130, msg: "interrupted; finished runs are kept (--resume " + "--out " + out + " runs the rest)"}
	}
	return err
}

// stdoutIsTerminal reports whether w is a character device (a terminal).
func stdoutIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runHarness opens tasks for batch.Batch and batch.Collect: one session (bundle, rules, index)
// per task, shared by its runs; a replay server per run.
type runHarness struct {
	g      *globalFlags
	repo   *task.Repo
	jf     *judgeFlags
	clock  bool
	errOut io.Writer
	chrome string // --browser: Chromium to start; with --guard: passed on as --chrome
	// guardApp is --guard's application file (absolute); guardMCP its --browser-mcp; pabExe
	// this program.
	guardApp, guardMCP, pabExe string

	caOnce sync.Once
	ca     *tlsca.CA
	caErr  error

	judgeMu  sync.Mutex
	judge    *grade.Cache
	judgeErr error
	judged   bool
}

func (h *runHarness) loadCA() (*tlsca.CA, error) {
	h.caOnce.Do(func() { h.ca, h.caErr = tlsca.LoadDefault() })
	return h.ca, h.caErr
}

// openJudge opens the judge once for the whole batch.
func (h *runHarness) openJudge() (*grade.Cache, error) {
	h.judgeMu.Lock()
	defer h.judgeMu.Unlock()
	if !h.judged {
		h.judge, h.judgeErr = h.jf.open(h.repo)
		h.judged = true
	}
	return h.judge, h.judgeErr
}

// OpenTask opens the task's recording and reads its card and grading.
func (h *runHarness) OpenTask(ctx context.Context, id string) (batch.Task, error) {
	s, err := openSession(h.g, id, h.errOut)
	if err != nil {
		return nil, err
	}
	t := &runTask{h: h, s: s, titles: pageTitles(s.bundle)}
	if tk := s.target.Task; tk != nil {
		if card, err := tk.Card(); err == nil {
			t.title, t.prompt = card.Title, card.Prompt
			if c := card.Capture; c != nil {
				t.locale, t.timezone = c.Locale, c.Timezone
			}
		} else {
			t.problem = fmt.Errorf("task card: %w", err)
		}
		var sha string
		t.grading, t.gradingFile, sha, err = gradingWithHash(tk, h.errOut)
		if err != nil && t.problem == nil {
			t.problem = err
		}
		t.gradingSHA = sha
	}
	// Hashed once per task: every run of the batch is graded against the same files.
	var notes []string
	t.prov, notes = provenance(s, t.gradingSHA)
	for _, n := range notes {
		fmt.Fprintf(h.errOut, "pab run: %s: %s\n", id, n)
	}
	if l := s.bundle.Manifest.Locale; l != "" {
		t.locale = l
	}
	if z := s.bundle.Manifest.Timezone; z != "" {
		t.timezone = z
	}
	return t, nil
}

// runTask is an opened task.
type runTask struct {
	h                *runHarness
	s                *session
	title, prompt    string
	locale, timezone string
	grading          *grade.Grading
	gradingFile      string
	gradingSHA       string
	prov             *grade.Provenance // what every run of the task is graded against
	problem          error
	titles           map[string]string
	closeOnce        sync.Once
}

func (t *runTask) Prompt() string { return t.prompt }

func (t *runTask) Close() error {
	var err error
	t.closeOnce.Do(func() { err = t.s.bundle.Close() })
	return err
}

// Start starts a replay on a free loopback port, and a browser or guard through it.
func (t *runTask) Start(ctx context.Context, spec batch.StartSpec) (*batch.Services, error) {
	ca, err := t.h.loadCA()
	if err != nil {
		return nil, err
	}
	srv, err := replay.New(replay.Options{Bundle: t.s.bundle, Index: t.s.index, Rules: t.s.rules, CA: ca, Clock: t.h.clock})
	if err != nil {
		return nil, err
	}
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if p := t.prov; p != nil && p.Recording != "" {
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
	svc := &batch.Services{Proxy: ln.Addr().String(), CAFile: ca.CertPath(), CASPKI: ca.SPKIHash(), Stop: stopReplay}
	switch {
	case t.h.chrome != "" && t.h.guardApp == "":
		b, err := startRunBrowser(ctx, t.h.chrome, browser.Options{Proxy: svc.Proxy, SPKI: svc.CASPKI,
			Locale: t.locale, Timezone: t.timezone}, spec.Dir)
		if err != nil {
			stopReplay()
			return nil, err
		}
		svc.CDPURL = b.cdp
		svc.Stop = func() error {
			b.stop()
			return stopReplay()
		}
	case t.h.guardApp != "":
		gd, err := t.startGuard(ctx, svc.Proxy, spec.Dir)
		if err != nil {
			stopReplay()
			return nil, err
		}
		svc.MCPURL = gd.url
		svc.Stop = func() error {
			gd.stop()
			return stopReplay()
		}
	}
	return svc, nil
}

// Grade grades the run as pab grade does.
func (t *runTask) Grade(ctx context.Context, logPath string, answer *grade.AnswerInfo) (*grade.Result, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if answer != nil {
		answer.File = filepath.Base(answer.File)
	}
	in := grade.Input{Task: t.s.target.Name, Title: t.title, Prompt: t.prompt, Answer: answer,
		Rules: t.s.rules, Titles: t.titles, FramesOf: frameLookup(t.s.bundle), Grading: t.grading,
		GradingFile: t.gradingFile, GradingError: t.problem, Provenance: t.prov}
	if t.grading != nil && t.grading.Guard != nil {
		// pab run --guard writes the guard's files next to the log (startGuard).
		dir := filepath.Dir(logPath)
		in.Guard, in.GuardError = grade.ReadGuardRun(filepath.Join(dir, grade.GuardTraceFile), filepath.Join(dir, grade.GuardResultFile))
		if in.Guard != nil {
			in.Guard.TraceFile, in.Guard.ResultFile = grade.GuardTraceFile, grade.GuardResultFile
		}
	}
	var judge *grade.Cache
	var judgeErr error
	if t.problem == nil && needsJudge(t.grading, answer) {
		judge, judgeErr = t.h.openJudge()
	}
	// The log is streamed, as pab grade does: memory does not grow with it.
	res, err := grade.GradeLog(ctx, in, f, filepath.Base(logPath), grade.Options{Judge: judge, Samples: t.h.jf.samples})
	if err != nil {
		return nil, err
	}
	if judgeErr != nil {
		res.Notes = append(res.Notes, "judge: "+judgeErr.Error())
	}
	return res, nil
}

// runBrowser is a Chromium started for one run.
type runBrowser struct {
	cdp  string
	stop func()
}

// startRunBrowser starts Chromium as pab browser does (browser.Start: same flags, own
// process group, fresh profile) with about:blank open, and returns its DevTools address
// with a function that stops the browser and removes the profile. Chromium's stderr goes to
// dir/browser.stderr (cut at 1 MiB).
func startRunBrowser(ctx context.Context, exe string, o browser.Options, dir string) (*runBrowser, error) {
	p, err := browser.Start(ctx, exe, o, "", filepath.Join(dir, "browser.stderr"))
	if err != nil {
		return nil, fmt.Errorf("%w (see browser.stderr)", err)
	}
	return &runBrowser{cdp: p.CDP, stop: p.Stop}, nil
}

// runGuard is a pab guard child process started for one run.
type runGuard struct {
	url   string
	token string // the bearer token of its control API (guard.ControlTokenEnv)
	stop  func()
}

// startGuard runs this pab binary as 'pab guard --listen 127.0.0.1:0 --application APP
// --proxy ADDR' (trace and result in the run directory, stderr in guard.stderr) and waits
// for the MCP address it prints.
func (t *runTask) startGuard(ctx context.Context, proxy, dir string) (*runGuard, error) {
	args := []string{"--repo", t.h.repo.Root, "guard", "--listen", "127.0.0.1:0", "--application", t.h.guardApp,
		"--proxy", proxy, "--trace", filepath.Join(dir, grade.GuardTraceFile), "--result", filepath.Join(dir, grade.GuardResultFile)}
	if t.h.chrome != "" {
		args = append(args, "--chrome", t.h.chrome)
	}
	if t.h.guardMCP != "" {
		args = append(args, "--browser-mcp", t.h.guardMCP)
	}
	c := exec.Command(t.h.pabExe, args...)
	c.Dir = dir
	// the control API's token: known to this process only (not on the command line, not in
	// guard.stderr, not in the agent's environment)
	token := guard.NewControlToken()
	c.Env = append(os.Environ(), guard.ControlTokenEnv+"="+token)
	w, err := procgroup.StartWatched(c, filepath.Join(dir, "guard.stderr"), 10<<20, guardServing)
	if err != nil {
		return nil, fmt.Errorf("guard: start %s guard: %w", t.h.pabExe, err)
	}
	u, err := w.Wait(ctx, guardStartTimeout)
	if err != nil {
		w.Stop()
		var ee *procgroup.ExitedError
		switch {
		case errors.As(err, &ee):
			tail, _ := os.ReadFile(filepath.Join(dir, "guard.stderr"))
			return nil, fmt.Errorf("guard exited (%s) before serving MCP: %s", ee.Status, lastLine(string(tail)))
		case errors.Is(err, procgroup.ErrNoAddress):
			return nil, fmt.Errorf("guard printed no MCP address within %s (see guard.stderr)", guardStartTimeout)
		}
		return nil, err
	}
	return &runGuard{url: u, token: token, stop: w.Stop}, nil
}

// lastLine is the last non-blank line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
