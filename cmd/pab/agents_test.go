package main

// The real agent CLIs end to end (issue 16): `pab run` with the maintained scripts of
// agents/ (Claude Code 2.1.197 and Codex 0.171.0, pinned in agents/package-lock.json),
// their browser tools (@playwright/mcp over CDP, or pab guard), and a scripted model server
// (internal/fakemodel) instead of an LLM. The model opens the start page, takes a snapshot
// and answers only when the page text came back through the browser tools; so a CLI that
// starts without its MCP tools, or cuts the page out of a tool's answer, fails the test.
//
// Everything (the model server, pab run, the replay, Chromium, the guard, the CLIs) runs in
// a network namespace of its own whose only interface is loopback: the CLIs' calls home
// (telemetry, plugin sync, update checks) cannot leave, and the test asserts that the
// namespace has nothing but loopback. Creating it needs root (CI runs as root).

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/pab-dev/pab/internal/testtool"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/fakemodel"
)

// Pinned by agents/package-lock.json.
const (
	claudeVersion = "2.1.197 (Claude Code)"
	codexVersion  = "codex-cli 0.171.0"
)

// netNS is a network namespace with only loopback, held by one locked OS thread: the
// functions given to run execute on that thread, so the sockets they open and the processes
// they start are in the namespace (a child inherits the namespace of the thread that forks
// it).
type netNS struct{ do chan func() }

// newNetNS creates the namespace, brings its loopback up and checks that loopback is its
// only interface. Without the privilege to create one it skips the test (fails it in CI).
func newNetNS(t *testing.T) *netNS {
	t.Helper()
	ns := &netNS{do: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, whose namespace was changed, ends with this goroutine.
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		ready <- loopbackUp()
		for f := range ns.do {
			f()
		}
	}()
	if err := <-ready; err != nil {
		testtool.Missing(t, "a network namespace with only loopback: %v (run as root)", err)
	}
	t.Cleanup(func() { close(ns.do) })
	var ifaces []net.Interface
	var err error
	ns.run(func() { ifaces, err = net.Interfaces() })
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != 1 || ifaces[0].Name != "lo" || ifaces[0].Flags&net.FlagLoopback == 0 || ifaces[0].Flags&net.FlagUp == 0 {
		t.Fatalf("the namespace's interfaces are %v, want only lo (up)", ifaces)
	}
	return ns
}

// run runs f on the namespace's thread and waits for it.
func (ns *netNS) run(f func()) {
	done := make(chan struct{})
	ns.do <- func() {
		defer close(done)
		f()
	}
	<-done
}

// loopbackUp sets lo up (SIOCGIFFLAGS, SIOCSIFFLAGS) in the calling thread's namespace.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: name[16], then the flags (short)
	copy(ifr[:], "lo")
	ioctl := func(req uintptr) error {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
			return fmt.Errorf("ioctl %#x lo: %w", req, e)
		}
		return nil
	}
	if err := ioctl(syscall.SIOCGIFFLAGS); err != nil {
		return err
	}
	flags := binary.NativeEndian.Uint16(ifr[16:]) | syscall.IFF_UP | syscall.IFF_RUNNING
	binary.NativeEndian.PutUint16(ifr[16:], flags)
	return ioctl(syscall.SIOCSIFFLAGS)
}

// agentCLIs checks the pinned CLIs of agents/ (npm ci --prefix agents), @playwright/mcp,
// node and Chromium: missing ones skip the test, or fail it in CI.
func agentCLIs(t *testing.T) {
	t.Helper()
	chromiumPath(t)
	playwrightMCPPath(t)
	missing := func(format string, a ...any) {
		t.Helper()
		testtool.Missing(t, format+" (npm ci --prefix agents; scripts/test.sh runs it)", a...)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node not found on PATH")
	}
	for _, bin := range []string{"claude", "codex"} {
		if _, err := os.Stat(filepath.Join(repoRoot, "agents", "node_modules", ".bin", bin)); err != nil {
			missing("agents/node_modules/.bin/%s: %v", bin, err)
		}
	}
}

// cliVersion runs CLI --version in the namespace.
func cliVersion(t *testing.T, ns *netNS, cli string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "agents", "node_modules", ".bin", cli), "--version")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "CODEX_HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	ns.run(func() { err = cmd.Start() })
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", cli, err, out.String())
	}
	return strings.TrimSpace(out.String())
}

// The plans of the scripted model.
var (
	booksPlan = fakemodel.Plan{
		Marker: "Sapiens: A Brief History of Humankind",
		Steps: []fakemodel.Step{
			{Tool: "browser_navigate", Args: map[string]any{"url": "http://books.toscrape.com/"}},
			// the product card on the recorded home page (grading.yaml's source)
			{Tool: "browser_snapshot", Expect: []string{"Sapiens: A Brief History", "£54.23"}},
		},
		// docs/examples/books-sapiens-price/right/answer.txt, which the example judge knows
		Answer: "Sapiens: A Brief History of Humankind costs £54.23 on books.toscrape.com.",
	}
	axonPlan = fakemodel.Plan{
		Marker: "job-boards.greenhouse.io/axon/jobs/6641960003",
		Steps: []fakemodel.Step{
			{Tool: "browser_navigate", Args: map[string]any{"url": axon}},
			{Tool: "browser_snapshot", Expect: []string{"Where are you currently located?", "Submit application"}},
			{Tool: "browser_type", Target: &fakemodel.Target{Role: "textbox", Name: "Where are you currently located?"},
				Args: map[string]any{"text": "London, England, United Kingdom", "source_quote": "Location: London, England, United Kingdom"}},
			{Tool: "browser_type", Target: &fakemodel.Target{Role: "textbox", Name: "Email"},
				Args: map[string]any{"text": "jane.doe@example.com", "source_quote": "Email: jane.doe@example.com"}},
			// refused by the guard under fill_and_review: not pressed, not an error
			{Tool: "browser_click", Target: &fakemodel.Target{Role: "button", Name: "Submit application"},
				Expect: []string{"NOT pressed"}},
		},
		Answer: "I filled in the location and the email. The guard did not press Submit application: the form waits for Jane Doe's review.",
	}
)

// agentRun is one pab run of a real agent script.
type agentRun struct {
	name, script, task string
	guard              bool   // --guard with the task's application.yaml, else --browser
	codexModel         string // CODEX_MODEL (Codex offers MCP tools through its tool_search only for models it knows)
	// slowMCP starts @playwright/mcp 20 s late (over the CLIs' own waits for MCP servers:
	// Claude Code's MCP_CONNECT_TIMEOUT_MS is 5 s): pab hands it over only once it answers
	// tools/list, so the agent never runs without its browser tools. Such a batch runs
	// 4 repeats at --jobs 4 with every CPU kept busy by a load generator (busyCPUs).
	slowMCP bool
	plan    fakemodel.Plan
}

// TestRealAgents: the four scripts of agents/ with the real CLIs, one pab run each (and the
// playwright scripts once more with an @playwright/mcp slow to start). The playwright
// scripts answer books-sapiens-price right (score 1); the guard scripts fill two fields of
// the Greenhouse application and try to submit: the guard refuses, its result is
// awaiting_review, and no POST reaches the application endpoint.
func TestRealAgents(t *testing.T) {
	agentCLIs(t)
	ns := newNetNS(t)
	if v := cliVersion(t, ns, "claude"); v != claudeVersion {
		t.Errorf("claude --version: %q, want %q (agents/package-lock.json)", v, claudeVersion)
	}
	if v := cliVersion(t, ns, "codex"); !strings.Contains(v, codexVersion) {
		t.Errorf("codex --version: %q, want %q (agents/package-lock.json)", v, codexVersion)
	}
	for _, r := range []agentRun{
		{name: "claude-playwright", script: "claude-playwright.sh", task: "books-sapiens-price", plan: booksPlan},
		// a model name Codex does not know: it lists the MCP tools as a namespace
		{name: "codex-playwright", script: "codex-playwright.sh", task: "books-sapiens-price", plan: booksPlan, codexModel: "pab-scripted"},
		// no model named, as docs/run.md's command has it: Codex's default model runs in code
		// mode (one exec tool; the MCP tools reached from its JavaScript)
		{name: "codex-playwright-default-model", script: "codex-playwright.sh", task: "books-sapiens-price", plan: booksPlan},
		{name: "claude-guard", script: "claude-guard.sh", task: "apply-greenhouse-axon", guard: true, plan: axonPlan},
		// a model Codex knows: the MCP tools are found through its tool_search
		{name: "codex-guard", script: "codex-guard.sh", task: "apply-greenhouse-axon", guard: true, plan: axonPlan, codexModel: "gpt-5.5"},
	} {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			r.play(t, ns)
		})
	}
}

// TestRealAgentsSlowMCPUnderLoad: each of the four scripts in a batch of 4 runs at --jobs 4,
// with @playwright/mcp starting 20 s late (for pab run's server and pab guard's) and every
// CPU of the machine kept busy by a load generator: 8 runs per CLI, none without its
// browser tools (the scripted model records any turn that lacked them), each graded. The
// batches run one after another, so that the load is the generator's and the batch's own.
func TestRealAgentsSlowMCPUnderLoad(t *testing.T) {
	agentCLIs(t)
	ns := newNetNS(t)
	stop := busyCPUs()
	defer stop()
	for _, r := range []agentRun{
		{name: "claude-playwright", script: "claude-playwright.sh", task: "books-sapiens-price", plan: booksPlan, slowMCP: true},
		{name: "codex-playwright", script: "codex-playwright.sh", task: "books-sapiens-price", plan: booksPlan, codexModel: "gpt-5.5", slowMCP: true},
		{name: "claude-guard", script: "claude-guard.sh", task: "apply-greenhouse-axon", guard: true, plan: axonPlan, slowMCP: true},
		{name: "codex-guard", script: "codex-guard.sh", task: "apply-greenhouse-axon", guard: true, plan: axonPlan, codexModel: "gpt-5.5", slowMCP: true},
	} {
		t.Run(r.name, func(t *testing.T) { r.play(t, ns) })
	}
}

// busyCPUs keeps every CPU busy (a spinning goroutine per CPU, each yielding now and then)
// until the returned function is called.
func busyCPUs() func() {
	done := make(chan struct{})
	for range runtime.NumCPU() {
		go func() {
			x := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				for i := 0; i < 1_000_000; i++ {
					x += i
				}
				runtime.Gosched()
			}
		}()
	}
	return func() { close(done) }
}

func (r agentRun) play(t *testing.T, ns *netNS) {
	tmp := t.TempDir()
	var srv *fakemodel.Server
	var err error
	ns.run(func() { srv, err = fakemodel.Start(r.plan, filepath.Join(tmp, "model")) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") {
		t.Fatalf("model server at %s, want loopback", srv.URL())
	}
	out := filepath.Join(tmp, "batch")
	repeat := 1
	if r.slowMCP {
		repeat = 4
	}
	args := []string{"run", "--out", out, "--proxy-env=false", "--timeout", "240s", "--grace", "2s",
		"--repeat", strconv.Itoa(repeat), "--jobs", strconv.Itoa(repeat),
		"--agent", filepath.Join(repoRoot, "agents", r.script), "--label", r.name,
		"--judge", "cli", "--judge-cmd", exampleJudge}
	if r.guard {
		args = append(args, "--guard", filepath.Join(repoRoot, "tasks", r.task, "application.yaml"))
	} else {
		args = append(args, "--browser", "--mcp")
	}
	cmd := pabCmd(append(args, r.task)...)
	cmd.Dir = repoRoot
	// The scripts' defaults: the CLIs of agents/node_modules, @playwright/mcp of
	// tools/playwright-mcp, settings directories of the run's own.
	mcp := ""
	if r.slowMCP {
		// pab run (--mcp) and pab guard find @playwright/mcp through $PAB_PLAYWRIGHT_MCP
		mcp = filepath.Join(tmp, "slow-mcp.mjs")
		js := fmt.Sprintf("setTimeout(() => import(%q), 20000);\n", filepath.Join(repoRoot, guard.PlaywrightMCPCLI))
		if err := os.WriteFile(mcp, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+filepath.Join(tmp, "home"), "PAB_PLAYWRIGHT_MCP="+mcp,
		"CLAUDE_BIN=", "CODEX_BIN=", "CLAUDE_CONFIG_DIR=", "CODEX_HOME=", "CLAUDE_MODEL=",
		"ANTHROPIC_BASE_URL="+srv.URL(), "ANTHROPIC_API_KEY=sk-ant-fake", "ANTHROPIC_AUTH_TOKEN=",
		"CODEX_BASE_URL="+srv.URL()+"/v1", "OPENAI_API_KEY=sk-fake", "CODEX_MODEL="+r.codexModel)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	ns.run(func() { err = cmd.Start() })
	if err == nil {
		err = cmd.Wait()
	}
	t.Logf("%s: pab run took %s", r.name, time.Since(start).Round(100*time.Millisecond))
	defer func() {
		if t.Failed() {
			for k := 1; k <= repeat; k++ {
				dumpAgentRun(t, filepath.Join(out, r.task, strconv.Itoa(k)), srv)
			}
		}
	}()
	if err != nil {
		t.Fatalf("pab run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	// The scripted model: every step done, every check passed, the right answer given (a
	// turn without the browser tools is a failure).
	if f := srv.Failures(); len(f) > 0 {
		t.Errorf("the scripted model's plan failed:\n%s", strings.Join(f, "\n"))
	}
	if !srv.Answered() {
		t.Errorf("the scripted model never gave its answer")
	}
	turns := 0
	for _, q := range srv.Requests() {
		if q.Agent {
			turns++
		}
	}
	if turns < repeat*(len(r.plan.Steps)+1) {
		t.Errorf("%d turns of the agent reached the model, want at least %d", turns, repeat*(len(r.plan.Steps)+1))
	}
	s := readSummary(t, out)
	if len(s.Runs) != repeat {
		t.Fatalf("summary: %d runs, want %d", len(s.Runs), repeat)
	}
	for _, run := range s.Runs {
		r.checkRun(t, filepath.Join(out, r.task, strconv.Itoa(run.Repeat)), run, len(srv.Requests()))
	}
	// Metering: the batch's agent totals are exactly what the model reported, call by call
	// (the judge is the example's command: not metered, and said so)
	var want fakemodel.Usage
	calls := 0
	for _, q := range srv.Requests() {
		if q.Usage != nil {
			calls++
			want.Input += q.Usage.Input
			want.Output += q.Usage.Output
			want.CacheRead += q.Usage.CacheRead
			want.CacheWrite += q.Usage.CacheWrite
		}
	}
	if s.Usage == nil || s.Usage.Runs != repeat {
		t.Fatalf("summary.json usage: %+v, want the %d runs metered", s.Usage, repeat)
	}
	got := s.Usage.Agent
	if got.Calls != calls || got.InputTokens != want.Input || got.OutputTokens != want.Output ||
		got.CacheReadTokens != want.CacheRead || got.CacheWriteTokens != want.CacheWrite || got.UnreadableCalls != 0 {
		t.Errorf("metered %d calls, tokens in %d out %d cache read %d write %d (unreadable %d); the model reported %d calls, %+v",
			got.Calls, got.InputTokens, got.OutputTokens, got.CacheReadTokens, got.CacheWriteTokens, got.UnreadableCalls, calls, want)
	}
	if s.Usage.Judge != nil {
		t.Errorf("the example judge (a command) is reported as metered: %+v", s.Usage.Judge)
	}
	if pids := processesUsing(t, out); len(pids) > 0 {
		t.Errorf("processes left running: %v", pids)
	}
}

// checkRun checks one run of the batch in dir (its summary row run): the right answer, the
// agent's exit 0, and what the run's mode must show.
func (r agentRun) checkRun(t *testing.T, dir string, run batch.RunRow, modelRequests int) {
	t.Helper()
	hit := true
	answer, _ := os.ReadFile(filepath.Join(dir, batch.FileAnswer))
	if strings.TrimSpace(string(answer)) != r.plan.Answer {
		t.Errorf("answer.txt is %q, want %q", answer, r.plan.Answer)
	}

	t.Logf("%s/%d: run %s, score %v, %d requests through the replay, %d model requests in the batch", r.name, run.Repeat, run.Status,
		fmtScore(run.Score), run.Requests, modelRequests)
	info, err := readRunInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Usage == nil || info.Usage.Calls == 0 || info.Usage.Judge != nil || info.Usage.JudgeNote == "" {
		t.Errorf("run.json usage: %+v, want the agent's calls and a judge note", info.Usage)
	}
	// the meter keeps numbers, never the conversation or the keys
	for _, f := range []string{batch.FileUsage, batch.FileInfo} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"sk-ant-fake", "sk-fake", r.plan.Marker} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds %q", f, secret)
			}
		}
	}
	if info.ExitCode == nil || *info.ExitCode != 0 {
		e, _ := os.ReadFile(filepath.Join(dir, batch.FileStderr))
		t.Errorf("the agent's exit: %v %s\n%s", info.ExitCode, info.Signal, e)
	}
	if !r.guard {
		if run.Status != batch.StatusGraded || run.Score == nil || *run.Score != 1 || !run.Passed {
			t.Errorf("run: status %s, score %v (%s), want graded 1", run.Status, run.Score, run.Error)
		}
		if n := logCount(t, filepath.Join(dir, batch.FileLog), grade.RequestMatch{Method: "GET", URL: "http://books.toscrape.com/", Hit: &hit, Status: 200}); n == 0 {
			t.Errorf("the page the model opened is not in the run's replay log")
		}
		// @playwright/mcp keeps its snapshots in the run directory (--output-dir)
		if _, err := os.Stat(filepath.Join(dir, ".playwright-mcp")); err != nil {
			t.Errorf("@playwright/mcp's output directory: %v", err)
		}
	} else {
		// The score of apply tasks is someone else's: the run must be graded (not an error,
		// not a run without its browser).
		if run.Status != batch.StatusGraded {
			t.Errorf("run: status %s (%s), want graded", run.Status, run.Error)
		}
		res, err := guardResult(filepath.Join(dir, "guard.result.json"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != "awaiting_review" || res.SubmitAttempted || res.Filled < 2 {
			t.Errorf("guard result: outcome %s, submitAttempted %v, filled %d; want awaiting_review, false, 2",
				res.Outcome, res.SubmitAttempted, res.Filled)
		}
		refused := false
		for _, e := range readTrace(t, filepath.Join(dir, "guard.trace.jsonl")) {
			if e.Type == "policy.decision" && e.Detail["tool"] == "browser_click" && e.Detail["class"] == "submit" &&
				e.Detail["decision"] == "refused" && e.Detail["reason"] == "fill_and_review" {
				refused = true
			}
		}
		if !refused {
			t.Errorf("the trace has no refused submit (policy.decision browser_click submit refused fill_and_review)")
		}
		log := filepath.Join(dir, batch.FileLog)
		if n := logCount(t, log, grade.RequestMatch{Method: "GET", URL: axon, Hit: &hit, Status: 200}); n == 0 {
			t.Errorf("the job page never went through the replay")
		}
		if n := logCount(t, log, grade.RequestMatch{Method: "POST", URL: "*/axon/jobs/*/applications*"}); n != 0 {
			t.Errorf("%d POSTs reached the application endpoint", n)
		}
	}
}

func fmtScore(p *float64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// readRunInfo reads run.json.
func readRunInfo(dir string) (*batch.Info, error) {
	data, err := os.ReadFile(filepath.Join(dir, batch.FileInfo))
	if err != nil {
		return nil, err
	}
	var in batch.Info
	return &in, json.Unmarshal(data, &in)
}

// guardResult reads the guard's result envelope.
func guardResult(path string) (guard.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return guard.Result{}, err
	}
	return guard.ValidateResult(data)
}

// logCount counts the requests of a replay log that m matches.
func logCount(t *testing.T, path string, m grade.RequestMatch) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lr, err := grade.ReadLog(f, path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range lr.Requests {
		if m.Matches(&lr.Requests[i]) {
			n++
		}
	}
	return n
}

// dumpAgentRun logs what a person needs to see why a run failed.
func dumpAgentRun(t *testing.T, dir string, srv *fakemodel.Server) {
	t.Helper()
	for _, q := range srv.Requests() {
		t.Logf("model: %s %s agent=%v step=%d tools=%d: %.300s %s", q.Method, q.Path, q.Agent, q.Step, len(q.Tools), q.Reply, q.Failure)
	}
	for _, f := range []string{batch.FileInfo, batch.FileStderr, batch.FileStdout, "guard.stderr"} {
		if data, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			t.Logf("%s:\n%.4000s", f, data)
		}
	}
}
