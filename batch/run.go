package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/meter"
)

// ErrInterrupted is returned by Batch when ctx ended (Ctrl-C) before every run did; the
// summary is written all the same.
var ErrInterrupted = errors.New("interrupted")

// Harness opens the tasks of a batch; pab's command line implements it with the replay,
// browser, guard and grade packages.
type Harness interface {
	// OpenTask opens the task with this id for the runs of a batch; it is called once per
	// task and the Task is shared by its runs, from several goroutines.
	OpenTask(ctx context.Context, id string) (Task, error)
}

// Task is an opened task. Its methods are called concurrently by the task's runs.
type Task interface {
	// Prompt is the task's prompt, as handed to the agent.
	Prompt() string
	// Start starts what one run needs: a fresh replay on a free loopback port writing its
	// log to log, and a browser or guard when the batch asks for them. Services.Stop ends
	// them all. Batch only.
	Start(ctx context.Context, spec StartSpec) (*Services, error)
	// Grade grades one run: the replay log at logPath and the answer (never nil: an empty
	// answer when the agent wrote none). Only failures of pab itself (the log cannot be
	// read) are errors; a failed judge is a Result with status error.
	Grade(ctx context.Context, logPath string, answer *grade.AnswerInfo) (*grade.Result, error)
	// Close releases the task once its runs are done.
	Close() error
}

// StartSpec is one run as Task.Start sees it.
type StartSpec struct {
	Task   string
	Repeat int
	// Dir is the run directory (absolute).
	Dir string
	// Log receives the replay log (JSON Lines).
	Log io.Writer
}

// Services are what Task.Start started for one run, and what the agent is told about them.
type Services struct {
	// Proxy is the replay proxy's address, host:port.
	Proxy string
	// CAFile is the path of pab's CA certificate (PEM); CASPKI its base64 SHA-256 SPKI hash.
	CAFile, CASPKI string
	// CDPURL is the browser's DevTools WebSocket URL (--browser), else empty.
	CDPURL string
	// MCPURL is the run's browser MCP endpoint, ready (streamable HTTP: pab guard for
	// --guard, @playwright/mcp for --browser --mcp), else empty; MCPToken its bearer token.
	MCPURL, MCPToken string
	// Stop ends everything that was started and returns the first error, such as a replay
	// log that could not be written.
	Stop func() error
}

// Config is one batch.
type Config struct {
	Harness Harness
	// Tasks are the task ids, in the order they are run and listed.
	Tasks []string
	// Repeat is how many runs each task gets (at least 1); Jobs how many run at once.
	Repeat, Jobs int
	// Agent is the agent command, run with sh -c in the run directory.
	Agent string
	// Timeout limits each agent run (0: none); Grace is the time between SIGTERM and
	// SIGKILL (0: DefaultGrace).
	Timeout, Grace time.Duration
	// Out is the batch directory.
	Out string
	// Resume keeps the finished runs already in Out and runs the rest.
	Resume bool
	// ProxyEnv also sets HTTP_PROXY, HTTPS_PROXY (and lower-case) to the replay for the agent.
	ProxyEnv bool
	// Env is the environment the agent's variables are added to (nil: os.Environ()).
	Env []string
	// Progress receives the progress: a live line when Live, else one line per run.
	Progress io.Writer
	Live     bool
	// Label names the agent in the summary (default: Agent).
	Label string
	// Meter, when set, meters the agent's and the judge's model calls (usage.go).
	Meter *MeterConfig
}

// job is one run to do.
type job struct {
	task   string
	repeat int
}

// errWantOne is the error of a count below one.
var errWantOne = errors.New("want at least 1")

// Batch runs the agent on every task Repeat times, Jobs at a time, and writes summary.json
// and index.html into Out. A failed run never stops the others; it ends with a status in
// its run.json. When ctx ends, no new run starts, running agents are stopped and their runs
// marked interrupted, the summary is written and ErrInterrupted returned. An error before
// any run started (a bad Out, Out already holding a batch without Resume) is returned as is;
// a bad Repeat, Jobs, Agent or Out is a *grade.FieldError naming the field.
func Batch(ctx context.Context, cfg Config) (*Summary, error) {
	if cfg.Repeat < 1 {
		return nil, fmt.Errorf("run: %w", &grade.FieldError{Field: "Repeat", Value: strconv.Itoa(cfg.Repeat), Err: errWantOne})
	}
	if cfg.Jobs < 1 {
		return nil, fmt.Errorf("run: %w", &grade.FieldError{Field: "Jobs", Value: strconv.Itoa(cfg.Jobs), Err: errWantOne})
	}
	if strings.TrimSpace(cfg.Agent) == "" {
		return nil, fmt.Errorf("run: %w", &grade.FieldError{Field: "Agent", Err: errors.New("the agent command is required")})
	}
	if len(cfg.Tasks) == 0 {
		return nil, errors.New("run: no tasks")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if err := checkTaskIDs(cfg.Tasks); err != nil {
		return nil, err
	}
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return nil, fmt.Errorf("run: %w", &grade.FieldError{Field: "Out", Value: cfg.Out, Err: err})
	}
	cfg.Out = out
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("run: %w", &grade.FieldError{Field: "Out", Err: err})
	}
	if !cfg.Resume {
		if used, err := holdsBatch(out, cfg.Tasks); err != nil {
			return nil, fmt.Errorf("run: %w", &grade.FieldError{Field: "Out", Err: err})
		} else if used != "" {
			return nil, fmt.Errorf("run: %s already holds runs (%s): pass --resume to finish that batch, or another --out", out, used)
		}
	}

	infos := map[job]*Info{}
	var todo []job
	remaining := map[string]int{}
	for _, t := range cfg.Tasks {
		for k := 1; k <= cfg.Repeat; k++ {
			j := job{t, k}
			if cfg.Resume {
				in, err := readInfo(runDir(out, j))
				if err == nil && in != nil && in.Finished && in.Status != StatusError {
					infos[j] = in
					continue
				}
			}
			todo = append(todo, j)
			remaining[t]++
		}
	}

	b := &batch{cfg: cfg, tasks: map[string]*taskSlot{}, remaining: remaining}
	prog := newProgress(cfg.Progress, cfg.Live, len(todo), len(infos))
	prog.start()
	b.pool(ctx, todo, cfg.Jobs, prog, infos, b.runOne)
	b.closeAll()
	prog.stop()

	label := cfg.Label
	if label == "" {
		label = cfg.Agent
	}
	sum := summarize(out, label, cfg.Tasks, cfg.Repeat, infos)
	if err := sum.Write(out); err != nil {
		return sum, fmt.Errorf("run: %w", err)
	}
	if ctx.Err() != nil {
		return sum, ErrInterrupted
	}
	return sum, nil
}

// checkTaskIDs refuses ids that cannot be a directory name, and duplicates.
func checkTaskIDs(ids []string) error {
	seen := map[string]bool{}
	for _, id := range ids {
		if !validDirName(id) {
			return fmt.Errorf("run: task id %q cannot name a run directory", id)
		}
		if seen[id] {
			return fmt.Errorf("run: task %s is given twice (use --repeat)", id)
		}
		seen[id] = true
	}
	return nil
}

func validDirName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 200 && !strings.ContainsAny(s, "/\\\x00") && !strings.HasPrefix(s, ".")
}

// holdsBatch names what in out belongs to a batch already (summary.json or a run
// directory of one of the tasks), or "".
func holdsBatch(out string, tasks []string) (string, error) {
	if _, err := os.Stat(filepath.Join(out, FileSummary)); err == nil {
		return FileSummary, nil
	}
	for _, t := range tasks {
		ents, err := os.ReadDir(filepath.Join(out, t))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if len(ents) > 0 {
			return t + "/", nil
		}
	}
	return "", nil
}

func runDir(out string, j job) string {
	return filepath.Join(out, j.task, strconv.Itoa(j.repeat))
}

// batch is the state shared by the runs of one Batch.
type batch struct {
	cfg       Config
	mu        sync.Mutex
	tasks     map[string]*taskSlot
	remaining map[string]int // runs still to do per task; the task closes at 0
}

type taskSlot struct {
	once sync.Once
	t    Task
	err  error
}

// task opens (once) the task of j.
func (b *batch) task(ctx context.Context, id string) (Task, error) {
	b.mu.Lock()
	s := b.tasks[id]
	if s == nil {
		s = &taskSlot{}
		b.tasks[id] = s
	}
	b.mu.Unlock()
	s.once.Do(func() {
		s.t, s.err = b.cfg.Harness.OpenTask(ctx, id)
		if s.err == nil && s.t == nil {
			s.err = errors.New("harness returned no task")
		}
	})
	return s.t, s.err
}

// release notes that a run of id is done; the last one closes the task.
func (b *batch) release(id string) {
	b.mu.Lock()
	b.remaining[id]--
	var s *taskSlot
	if b.remaining[id] == 0 {
		s = b.tasks[id]
		delete(b.tasks, id)
	}
	b.mu.Unlock()
	if s != nil && s.t != nil {
		s.t.Close()
	}
}

// closeAll closes the tasks still open (runs skipped by an interruption).
func (b *batch) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, s := range b.tasks {
		if s.t != nil {
			s.t.Close()
		}
		delete(b.tasks, id)
	}
}

// runOne does one run from start to end and returns its final Info, also written to
// run.json when the disk allows.
// pool runs do for the jobs in order on n workers (at least one), putting each result into
// infos and telling prog. When ctx ends, no more jobs start; those are left out of infos
// (interrupted runs are left for --resume).
func (b *batch) pool(ctx context.Context, todo []job, n int, prog *progress, infos map[job]*Info, do func(context.Context, job) *Info) {
	var mu sync.Mutex
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range min(n, max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				prog.begin()
				in := do(ctx, j)
				mu.Lock()
				infos[j] = in
				mu.Unlock()
				prog.end(j, in)
			}
		}()
	}
dispatch:
	for _, j := range todo {
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
			break dispatch
		case jobs <- j:
		}
	}
	close(jobs)
	wg.Wait()
}

func (b *batch) runOne(ctx context.Context, j job) *Info {
	defer b.release(j.task)
	dir := runDir(b.cfg.Out, j)
	in := &Info{Format: InfoFormat, Task: j.task, Repeat: j.repeat, Status: StatusRunning, AnswerBytes: -1}
	fail := func(format string, a ...any) *Info {
		in.Status, in.Finished, in.ErrorKind = StatusError, true, ErrorHarness
		in.Error = fmt.Sprintf(format, a...)
		if in.Started == "" {
			in.Started = utc(time.Now())
		}
		if err := atomicfile.WriteJSON(filepath.Join(dir, FileInfo), in, 0o644); err != nil {
			in.Notes = append(in.Notes, err.Error())
		}
		return in
	}
	// A run done again (--resume) starts from an empty directory.
	if err := os.RemoveAll(dir); err != nil {
		return fail("clear run directory: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("make run directory: %v", err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, FileInfo), in, 0o644); err != nil {
		return fail("%v", err)
	}
	t, err := b.task(ctx, j.task)
	if err != nil {
		return fail("open task %s: %v", j.task, err)
	}
	prompt := t.Prompt()
	promptFile := filepath.Join(dir, FilePrompt)
	if err := atomicfile.Write(promptFile, []byte(prompt), 0o644); err != nil {
		return fail("%v", err)
	}
	logPath := filepath.Join(dir, FileLog)
	logFile, err := newLogFile(logPath)
	if err != nil {
		return fail("%v", err)
	}
	svc, err := t.Start(ctx, StartSpec{Task: j.task, Repeat: j.repeat, Dir: dir, Log: logFile})
	if err != nil {
		logFile.abort()
		in = fail("start: %v", err)
		var se *StartError
		if errors.As(err, &se) && se.Kind != "" {
			// the agent was never started: no model call was spent on this run
			in.ErrorKind = se.Kind
			if werr := atomicfile.WriteJSON(filepath.Join(dir, FileInfo), in, 0o644); werr != nil {
				in.Notes = append(in.Notes, werr.Error())
			}
		}
		return in
	}
	stdout, err := newCappedFile(filepath.Join(dir, FileStdout), MaxOutput)
	if err != nil {
		svc.Stop()
		logFile.abort()
		return fail("%v", err)
	}
	stderr, err := newCappedFile(filepath.Join(dir, FileStderr), MaxOutput)
	if err != nil {
		stdout.abort()
		svc.Stop()
		logFile.abort()
		return fail("%v", err)
	}
	answerPath := filepath.Join(dir, FileAnswer)
	var m *meter.Meter
	var meterEnv [][2]string
	if b.cfg.Meter != nil {
		if m, meterEnv, err = startMeter(b.cfg.Meter); err != nil {
			stdout.abort()
			stderr.abort()
			svc.Stop()
			logFile.abort()
			return fail("usage meter: %v", err)
		}
	}
	env := agentEnv(b.cfg.Env, b.cfg.ProxyEnv, j, dir, prompt, promptFile, answerPath, svc, meterEnv)
	end := runAgent(ctx, agentSpec{command: b.cfg.Agent, dir: dir, env: env, timeout: b.cfg.Timeout,
		grace: b.cfg.Grace, stdout: stdout, stderr: stderr})
	var agentUsage meter.Usage
	if m != nil {
		agentUsage = stopMeter(m)
	}

	var problems []string
	if err := svc.Stop(); err != nil {
		problems = append(problems, err.Error())
	}
	if err := logFile.finish(); err != nil {
		problems = append(problems, err.Error())
	}
	var serr error
	if in.StdoutBytes, serr = stdout.finish(); serr != nil {
		problems = append(problems, serr.Error())
	}
	if in.StderrBytes, serr = stderr.finish(); serr != nil {
		problems = append(problems, serr.Error())
	}
	in.Started, in.Ended = utc(end.started), utc(end.ended)
	in.DurationMS = end.ended.Sub(end.started).Milliseconds()
	if end.err == nil {
		code := end.exitCode
		in.ExitCode = &code
	} else {
		problems = append(problems, end.err.Error())
	}
	in.Signal, in.TimedOut = end.signal, end.timedOut
	if end.interrupted {
		in.Status, in.Finished = StatusInterrupted, false
		in.Error = "stopped by an interrupt (Ctrl-C) before the agent finished; --resume runs it again"
		in.Notes = append(in.Notes, problems...)
		if err := atomicfile.WriteJSON(filepath.Join(dir, FileInfo), in, 0o644); err != nil {
			in.Notes = append(in.Notes, err.Error())
		}
		return in
	}
	if b.cfg.Timeout > 0 && end.timedOut {
		in.Error = fmt.Sprintf("the agent ran past --timeout %s; its process group was killed", b.cfg.Timeout)
	}
	finishRun(ctx, t, dir, in, problems)
	if m != nil {
		if err := recordUsage(b.cfg.Meter, dir, in, agentUsage); err != nil {
			in.Notes = append(in.Notes, "usage: "+err.Error())
		}
		if err := atomicfile.WriteJSON(filepath.Join(dir, FileInfo), in, 0o644); err != nil {
			in.Notes = append(in.Notes, err.Error())
		}
	}
	return in
}

// finishRun grades the run in dir, sets in's final status and writes result.json,
// report.html and run.json. problems are pab's own failures so far (they make the status
// error, but the run is graded all the same so that nothing is lost).
func finishRun(ctx context.Context, t Task, dir string, in *Info, problems []string) {
	if len(problems) > 0 {
		in.ErrorKind = ErrorHarness
	}
	// judgeOnly: every problem is the judge's (a run that opened no page is no_browsing
	// whatever the judge said: its failure is then a note, not the run's cause)
	judgeOnly := len(problems) == 0
	fail := func(kind, msg string) {
		problems = append(problems, msg)
		if kind != grade.ErrorJudge {
			judgeOnly = false
		}
		if in.ErrorKind == "" {
			in.ErrorKind = kind
		}
	}
	answerPath := filepath.Join(dir, FileAnswer)
	answer, answerNote := readAnswer(answerPath)
	if answerNote != "" {
		in.Notes = append(in.Notes, answerNote)
	}
	in.AnswerBytes = -1
	if answerNote == "" || answer.Bytes > 0 {
		in.AnswerBytes = answer.Bytes
	}
	logPath := filepath.Join(dir, FileLog)
	var res *grade.Result
	if _, err := os.Stat(logPath); err != nil {
		fail(ErrorHarness, "no "+FileLog+" in the run directory")
	} else if res, err = t.Grade(grade.WithUsageTag(ctx, usageTag(in)), logPath, answer); err != nil {
		fail(ErrorHarness, "grade: "+err.Error())
		res = nil
	}
	answerUsed := true
	if res != nil {
		if err := res.WriteFiles(dir); err != nil {
			fail(ErrorHarness, err.Error())
		}
		if err := WriteView(dir, res); err != nil {
			in.Notes = append(in.Notes, FileView+" not written: "+err.Error())
		}
		in.GradeStatus = res.Status
		in.Provenance = res.Provenance
		in.Score, in.Passed = res.Score, res.Passed
		in.Requests = map[string]int{}
		total := 0
		for k, n := range res.Requests {
			in.Requests[k] = n
			total += n
		}
		in.Requests["total"] = total
		if res.Status == grade.StatusError {
			kind := res.ErrorKind
			if kind == "" {
				kind = grade.ErrorGrading
			}
			fail(kind, "grading failed: "+strings.Join(res.Notes, "; "))
		}
		if lr := res.Log; lr == nil || lr.Lines == 0 || lr.Bad < lr.Lines {
			pages := len(res.Pages.Opened) + res.Pages.OpenedOmitted
			in.Pages = &pages
			in.NoBrowsing = pages == 0
		}
		answerUsed = len(res.Items) == 0 || readsAnswer(res)
	}
	if in.NoBrowsing {
		in.Passed = false
	}
	in.Finished = true
	if in.NoBrowsing && judgeOnly && len(problems) > 0 {
		in.Notes = append(in.Notes, problems...)
		problems, in.ErrorKind = nil, ""
	}
	switch {
	case len(problems) > 0:
		in.Status = StatusError
		in.Error = strings.Join(problems, "; ")
	case in.TimedOut:
		in.Status = StatusTimeout
		if in.Error == "" {
			in.Error = "the agent's time limit killed it"
		}
	case in.ExitCode != nil && (*in.ExitCode != 0 || in.Signal != ""):
		in.Status = StatusAgentFailed
		if in.Signal != "" {
			in.Error = "the agent was killed by " + in.Signal
		} else {
			in.Error = fmt.Sprintf("the agent exited with status %d", *in.ExitCode)
		}
	case answerUsed && answer.Problem == grade.AnswerTooLarge:
		in.Status = StatusAnswerTooLarge
		in.Error = fmt.Sprintf("the answer is %d bytes, over the limit of %d", answer.Bytes, grade.MaxAnswerSize)
	case answerUsed && (answerNote != "" || answer.Text == ""):
		in.Status = StatusNoAnswer
		if answerNote == "" {
			answerNote = "the answer is empty"
		}
		in.Error = answerNote
	case in.NoBrowsing:
		// An answer (or a finished guard run) without a single page: it would otherwise
		// look like a run that went normally.
		in.Status = StatusNoBrowsing
		in.Error = "the agent opened no page: the replay log has no document request (it never used a browser); the run does not pass"
	case res.Status == grade.StatusNotExecutable:
		in.Status = StatusNotExecutable
	case res.Status == grade.StatusNotScored:
		in.Status = StatusNotScored
	default:
		in.Status = StatusGraded
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, FileInfo), in, 0o644); err != nil {
		in.Status = StatusError
		if in.ErrorKind == "" {
			in.ErrorKind = ErrorHarness
		}
		in.Error = strings.TrimPrefix(in.Error+"; "+err.Error(), "; ")
	}
}

// readsAnswer reports whether grading read the answer: some item is a require or a check.
// A result with items but none of those (a grading of the guard's trace alone) scored the
// run without an answer, so a missing answer is no reason of its status.
func readsAnswer(res *grade.Result) bool {
	for _, it := range res.Items {
		if it.Kind == grade.KindRequire || it.Kind == grade.KindCheck {
			return true
		}
	}
	return false
}

// readAnswer reads the answer file; when there is none (or it cannot be read) the answer is
// empty and the note says why.
func readAnswer(path string) (*grade.AnswerInfo, string) {
	a, err := grade.ReadAnswer(path)
	if err == nil {
		return a, ""
	}
	empty := grade.AnswerFromBytes(nil)
	empty.File = path
	if errors.Is(err, os.ErrNotExist) {
		return empty, "the agent wrote no answer file (" + FileAnswer + ")"
	}
	return empty, "the answer file cannot be read: " + err.Error()
}

// agentEnv is the agent's environment: env without the variables pab sets, then pab's.
func agentEnv(env []string, proxyEnv bool, j job, dir, prompt, promptFile, answerPath string, s *Services, extra [][2]string) []string {
	proxyURL := "http://" + s.Proxy
	set := [][2]string{
		{"PAB_TASK_ID", j.task},
		{"PAB_REPEAT", strconv.Itoa(j.repeat)},
		{"PAB_RUN_DIR", dir},
		{"PAB_PROMPT", prompt},
		{"PAB_PROMPT_FILE", promptFile},
		{"PAB_ANSWER_FILE", answerPath},
		{"PAB_PROXY", proxyURL},
		{"PAB_CA_FILE", s.CAFile},
		{"PAB_CA_SPKI", s.CASPKI},
		{"NODE_EXTRA_CA_CERTS", s.CAFile},
	}
	if s.CDPURL != "" {
		set = append(set, [2]string{"PAB_CDP_URL", s.CDPURL})
	}
	if s.MCPURL != "" {
		set = append(set, [2]string{"PAB_MCP_URL", s.MCPURL})
	}
	if s.MCPToken != "" {
		set = append(set, [2]string{"PAB_MCP_TOKEN", s.MCPToken})
	}
	set = append(set, extra...) // the usage meter's base URLs
	drop := map[string]bool{"PAB_CDP_URL": true, "PAB_MCP_URL": true, "PAB_MCP_TOKEN": true}
	for _, kv := range set {
		drop[kv[0]] = true
	}
	if proxyEnv {
		for _, n := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
			set = append(set, [2]string{n, proxyURL})
		}
		// Loopback goes direct: the agent talks to the browser (CDP) and guard (MCP) there.
		for _, n := range []string{"NO_PROXY", "no_proxy"} {
			set = append(set, [2]string{n, "localhost,127.0.0.1,::1"})
		}
		for _, kv := range set {
			drop[kv[0]] = true
		}
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			out = append(out, kv)
		}
	}
	for _, kv := range set {
		out = append(out, kv[0]+"="+kv[1])
	}
	return out
}

// logFile is the replay log being written: a pending file (atomicfile.Pending) committed
// when the run ends. Write errors are kept (and the bytes dropped) so the proxy goes on
// answering.
type logFile struct {
	mu  sync.Mutex
	f   *atomicfile.Pending
	err error
}

func newLogFile(path string) (*logFile, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	return &logFile{f: f}, nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.f.Write(p)
	if err != nil {
		l.err = fmt.Errorf("write %s: %w", l.f.Path(), err)
		return n, l.err
	}
	return n, nil
}

// finish commits the file. After a write error, what was written is kept all the same (for
// grading), and the error is returned.
func (l *logFile) finish() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.f.Commit(0o644); err != nil && l.err == nil {
		l.err = err
	}
	return l.err
}

func (l *logFile) abort() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Abort()
}
