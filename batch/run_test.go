package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/testtool"
)

// fakeHarness stands in for pab's: Start writes one log line per run, a page opened (an
// image instead for task "nobrowse"; logBytes more for task "bigLog"), Grade scores 1 when
// the answer is "42" and lists the log's document lines as pages opened; a task named
// "nograde" is not scored, as a task without grading.yaml, and "judgeerr" gets a judge
// failure.
type fakeHarness struct {
	opened   atomic.Int32
	closed   atomic.Int32
	logBytes int // extra bytes written to the log of task "bigLog"
}

func (h *fakeHarness) OpenTask(_ context.Context, id string) (Task, error) {
	if id == "unknown" {
		return nil, errors.New("no such task")
	}
	h.opened.Add(1)
	return &fakeTask{h: h, id: id}, nil
}

type fakeTask struct {
	h  *fakeHarness
	id string
}

func (t *fakeTask) Prompt() string { return "What is the answer to " + t.id + "?" }

func (t *fakeTask) Start(_ context.Context, s StartSpec) (*Services, error) {
	if t.id == "nomcp" {
		return nil, browserStartError(errors.New("@playwright/mcp was not ready within 1s (pab run --mcp-timeout): tools/list: connection refused"))
	}
	line := `{"time":"2026-01-01T00:00:00.000Z","method":"GET","url":"http://example.org/","key":"GET example.org/","type":"document","dest":"document","source":"exact","status":200,"ms":0.1}` + "\n"
	if strings.HasPrefix(t.id, "nobrowse") {
		line = `{"time":"2026-01-01T00:00:00.000Z","method":"GET","url":"http://example.org/a.png","key":"GET example.org/a.png","type":"image","dest":"image","source":"exact","status":200,"ms":0.1}` + "\n"
	}
	if _, err := io.WriteString(s.Log, line); err != nil {
		return nil, err
	}
	var werr error
	if t.id == "bigLog" {
		_, werr = s.Log.Write(bytes.Repeat([]byte("x"), t.h.logBytes))
	}
	return &Services{Proxy: "127.0.0.1:9", CAFile: "/nonexistent/ca.pem", CASPKI: "spki=",
		Stop: func() error { return werr }}, nil
}

func (t *fakeTask) Grade(_ context.Context, logPath string, a *grade.AnswerInfo) (*grade.Result, error) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return nil, err
	}
	r := &grade.Result{Format: grade.ResultFormat, Task: t.id, Answer: a,
		Requests: map[string]int{"exact": bytes.Count(data, []byte(`"source":"exact"`))}}
	for range bytes.Count(data, []byte(`"type":"document"`)) {
		r.Pages.Opened = append(r.Pages.Opened, grade.Page{URL: "http://example.org/"})
	}
	switch t.id {
	case "nograde":
		r.Status = grade.StatusNotScored
		return r, nil
	case "judgeerr", "nobrowse-judgeerr":
		r.Status, r.ErrorKind = grade.StatusError, grade.ErrorJudge
		r.Notes = []string{"judge failed: cli judge: exit status 3"}
		return r, nil
	}
	s := 0.0
	if a.Text == "42" {
		s = 1
	}
	r.Status, r.Score, r.Passed = grade.StatusScored, &s, s == 1
	return r, nil
}

func (t *fakeTask) Close() error {
	t.h.closed.Add(1)
	return nil
}

// agentScript is a shell agent that behaves by task id.
const agentScript = `
env | grep -E '^(PAB_|HTTPS?_PROXY|NO_PROXY|NODE_EXTRA)' | sort > env.txt
case "$PAB_TASK_ID" in
  ok|ok2|nograde|bigLog|nobrowse|judgeerr|nobrowse-judgeerr|nomcp) echo 42 > "$PAB_ANSWER_FILE" ;;
  wrong) echo 41 > "$PAB_ANSWER_FILE" ;;
  noanswer) echo "thinking..." ;;
  empty) : > "$PAB_ANSWER_FILE" ;;
  huge) head -c 2100000 /dev/zero | tr '\0' 'a' > "$PAB_ANSWER_FILE" ;;
  crash) echo 42 > "$PAB_ANSWER_FILE"; echo boom >&2; exit 7 ;;
  selfkill) kill -9 $$ ;;
  hang) trap '' TERM; while :; do sleep 1; done ;;
  chatty) head -c 11000000 /dev/zero | tr '\0' 'y'; echo 42 > "$PAB_ANSWER_FILE" ;;
  answerdir) mkdir "$PAB_ANSWER_FILE" ;;
esac
`

func readJSON[T any](t *testing.T, path string) *T {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &v
}

func rowsByTask(s *Summary) map[string]RunRow {
	m := map[string]RunRow{}
	for _, r := range s.Runs {
		m[fmt.Sprintf("%s/%d", r.Task, r.Repeat)] = r
	}
	return m
}

// TestRunStatuses: every kind of bad agent ends with its own status in summary.json and
// run.json, and the other runs go on.
func TestRunStatuses(t *testing.T) {
	out := t.TempDir()
	h := &fakeHarness{}
	tasks := []string{"ok", "wrong", "nograde", "noanswer", "empty", "huge", "crash", "selfkill", "hang", "chatty", "answerdir", "unknown"}
	var progress bytes.Buffer
	sum, err := Batch(context.Background(), Config{Harness: h, Tasks: tasks, Repeat: 1, Jobs: 4,
		Agent: agentScript, Timeout: 2 * time.Second, Grace: 300 * time.Millisecond, Out: out,
		ProxyEnv: true, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ok": StatusGraded, "wrong": StatusGraded, "nograde": StatusNotScored, "noanswer": StatusNoAnswer,
		"empty": StatusNoAnswer, "huge": StatusAnswerTooLarge, "crash": StatusAgentFailed,
		"selfkill": StatusAgentFailed, "hang": StatusTimeout, "chatty": StatusGraded,
		"answerdir": StatusNoAnswer, "unknown": StatusError,
	}
	rows := rowsByTask(sum)
	for task, st := range want {
		r, ok := rows[task+"/1"]
		if !ok {
			t.Errorf("%s: no row in the summary", task)
			continue
		}
		if r.Status != st {
			t.Errorf("%s: status %s (%s), want %s", task, r.Status, r.Error, st)
		}
		in, err := readInfo(filepath.Join(out, task, "1"))
		if err != nil || in == nil {
			t.Errorf("%s: run.json: %v", task, err)
			continue
		}
		if in.Status != st || !in.Finished {
			t.Errorf("%s: run.json status %s finished %v, want %s finished", task, in.Status, in.Finished, st)
		}
	}
	if r := rows["ok/1"]; r.Score == nil || *r.Score != 1 || !r.Passed || r.NoBrowsing || r.Pages == nil || *r.Pages != 1 ||
		r.Exact == nil || *r.Exact != 1 || r.Report != "ok/1/report.html" {
		t.Errorf("ok run: %+v", r)
	}
	if r := rows["wrong/1"]; r.Score == nil || *r.Score != 0 || r.Passed {
		t.Errorf("wrong run: %+v", r)
	}
	if r := rows["nograde/1"]; r.Passed || r.Score != nil {
		t.Errorf("a not_scored run passes: %+v", r)
	}
	if r := rows["unknown/1"]; r.Passed || r.ErrorKind != ErrorHarness || !strings.Contains(r.Error, "no such task") {
		t.Errorf("unknown task: %+v", r)
	}
	crash := readJSON[Info](t, filepath.Join(out, "crash", "1", FileInfo))
	if crash.ExitCode == nil || *crash.ExitCode != 7 || crash.Score == nil || *crash.Score != 1 {
		t.Errorf("crash: exit %v score %v, want 7 and graded 1 all the same", crash.ExitCode, crash.Score)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "crash", "1", FileStderr)); string(b) != "boom\n" {
		t.Errorf("crash stderr %q", b)
	}
	if sk := readJSON[Info](t, filepath.Join(out, "selfkill", "1", FileInfo)); sk.Signal != "SIGKILL" || sk.ExitCode == nil || *sk.ExitCode != -1 {
		t.Errorf("selfkill: signal %q exit %v", sk.Signal, sk.ExitCode)
	}
	hang := readJSON[Info](t, filepath.Join(out, "hang", "1", FileInfo))
	if !hang.TimedOut || hang.DurationMS < 2000 || hang.DurationMS > 8000 {
		t.Errorf("hang: timed out %v after %d ms", hang.TimedOut, hang.DurationMS)
	}
	// chatty wrote 11 MB to stdout: 10 MiB kept, the rest counted and noted.
	st, err := os.Stat(filepath.Join(out, "chatty", "1", FileStdout))
	if err != nil || st.Size() < MaxOutput || st.Size() > MaxOutput+200 {
		t.Errorf("chatty stdout: %v, size %d", err, st.Size())
	}
	if c := readJSON[Info](t, filepath.Join(out, "chatty", "1", FileInfo)); c.StdoutBytes != 11000000 {
		t.Errorf("chatty stdout_bytes %d", c.StdoutBytes)
	}
	// The agent's environment.
	env, _ := os.ReadFile(filepath.Join(out, "ok", "1", "env.txt"))
	dir := filepath.Join(out, "ok", "1")
	for _, kv := range []string{"PAB_TASK_ID=ok", "PAB_REPEAT=1", "PAB_RUN_DIR=" + dir,
		"PAB_PROMPT=What is the answer to ok?", "PAB_PROMPT_FILE=" + filepath.Join(dir, FilePrompt),
		"PAB_ANSWER_FILE=" + filepath.Join(dir, FileAnswer), "PAB_PROXY=http://127.0.0.1:9",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=localhost,127.0.0.1,::1",
		"PAB_CA_FILE=/nonexistent/ca.pem", "NODE_EXTRA_CA_CERTS=/nonexistent/ca.pem", "PAB_CA_SPKI=spki="} {
		if !strings.Contains(string(env), kv+"\n") {
			t.Errorf("agent environment lacks %s:\n%s", kv, env)
		}
	}
	if p, _ := os.ReadFile(filepath.Join(dir, FilePrompt)); string(p) != "What is the answer to ok?" {
		t.Errorf("prompt.txt %q", p)
	}
	// No temporary file is left behind.
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".tmp") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
	if o, c := h.opened.Load(), h.closed.Load(); o != 11 || c != 11 {
		t.Errorf("tasks opened %d, closed %d; want 11 each", o, c)
	}
	if o := sum.Overall; o.Runs != 12 || o.Passed != 3 || o.InfraFailures != 1 || o.PassRate == nil || *o.PassRate != 0.25 {
		t.Errorf("overall runs %d passed %d infra %d rate %v; want 12, 3 (ok, chatty, crash), 1 (unknown), 25%%", o.Runs, o.Passed, o.InfraFailures, o.PassRate)
	}
	if !strings.Contains(progress.String(), "[12/12]") {
		t.Errorf("progress:\n%s", progress.String())
	}
	// Out now holds a batch: a new one there is refused.
	if _, err := Batch(context.Background(), Config{Harness: h, Tasks: tasks, Repeat: 1, Jobs: 1, Agent: "true", Out: out}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("second batch in the same --out: %v", err)
	}
}

// TestRunCauses: each cause of a run that went wrong is named apart in run.json and the
// summary: a run that opened no page is no_browsing even when the judge failed on it; a
// judge that failed on a run that browsed is error kind judge; a browser MCP server that
// was never ready is error kind browser_start and the agent is never started; a crash is
// agent_failed; a run past its time limit is timeout.
func TestRunCauses(t *testing.T) {
	out := t.TempDir()
	tasks := []string{"nobrowse-judgeerr", "judgeerr", "nomcp", "crash", "hang"}
	// the time limit is long enough for the other agents to end by themselves on a busy machine
	sum, err := Batch(context.Background(), Config{Harness: &fakeHarness{}, Tasks: tasks, Repeat: 1, Jobs: 3,
		Agent: agentScript, Timeout: 10 * time.Second, Grace: 300 * time.Millisecond, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"nobrowse-judgeerr": {StatusNoBrowsing, ""},
		"judgeerr":          {StatusError, grade.ErrorJudge},
		"nomcp":             {StatusError, ErrorBrowserStart},
		"crash":             {StatusAgentFailed, ""},
		"hang":              {StatusTimeout, ""},
	}
	rows := rowsByTask(sum)
	for task, w := range want {
		r := rows[task+"/1"]
		if r.Status != w[0] || r.ErrorKind != w[1] {
			t.Errorf("%s: status %s kind %q (%s), want %s kind %q", task, r.Status, r.ErrorKind, r.Error, w[0], w[1])
		}
		in := readJSON[Info](t, filepath.Join(out, task, "1", FileInfo))
		if in.Status != w[0] || in.ErrorKind != w[1] {
			t.Errorf("%s: run.json status %s kind %q, want %s %q", task, in.Status, in.ErrorKind, w[0], w[1])
		}
	}
	if in := readJSON[Info](t, filepath.Join(out, "nobrowse-judgeerr", "1", FileInfo)); !strings.Contains(strings.Join(in.Notes, "\n"), "judge failed") {
		t.Errorf("the judge's failure on a run that never browsed is not among its notes: %v", in.Notes)
	}
	// the agent of a run whose browser never got ready was not started
	if _, err := os.Stat(filepath.Join(out, "nomcp", "1", "env.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent ran although its browser MCP server was never ready: %v", err)
	}
	if o := sum.Overall; o.InfraFailures != 2 {
		t.Errorf("infrastructure failures %d, want 2 (judgeerr, nomcp)", o.InfraFailures)
	}
}

// childGone reports whether pid has exited (or is a zombie waiting to be reaped).
func childGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(data, ')')
	return i > 0 && len(data) > i+2 && (data[i+2] == 'Z' || data[i+2] == 'X')
}

// TestRunKillsLeftoverChildren: children an agent leaves running, after a normal exit or
// a timeout (ignoring SIGTERM), are killed with their group.
func TestRunKillsLeftoverChildren(t *testing.T) {
	out := t.TempDir()
	agent := `
case "$PAB_TASK_ID" in
  ok) sleep 1000 & echo $! > child.pid; echo 42 > "$PAB_ANSWER_FILE" ;;
  hang) (trap '' TERM; sleep 1000) & echo $! > child.pid; echo 42 > "$PAB_ANSWER_FILE"; sleep 1000 ;;
esac`
	sum, err := Batch(context.Background(), Config{Harness: &fakeHarness{}, Tasks: []string{"ok", "hang"}, Repeat: 1, Jobs: 2,
		Agent: agent, Timeout: time.Second, Grace: 500 * time.Millisecond, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsByTask(sum)
	if rows["ok/1"].Status != StatusGraded || rows["hang/1"].Status != StatusTimeout {
		t.Errorf("statuses %s, %s", rows["ok/1"].Status, rows["hang/1"].Status)
	}
	for _, task := range []string{"ok", "hang"} {
		data, err := os.ReadFile(filepath.Join(out, task, "1", "child.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for !childGone(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !childGone(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s: the agent's child %d outlived the run", task, pid)
		}
	}
}

// TestRunInterruptAndResume: cancelling the batch kills running agents, marks their runs
// interrupted (not finished), writes the summary; --resume runs exactly the rest, and a
// further --resume runs nothing.
func TestRunInterruptAndResume(t *testing.T) {
	out := t.TempDir()
	counter := filepath.Join(t.TempDir(), "count")
	agent := `echo "$PAB_TASK_ID $PAB_REPEAT" >> ` + counter + `; [ -n "$SLOW" ] && sleep 30; echo 42 > "$PAB_ANSWER_FILE"`
	ctx, cancel := context.WithCancel(context.Background())
	env := append(os.Environ(), "SLOW=1")
	done := make(chan struct{})
	var sum *Summary
	var err error
	start := time.Now()
	go func() {
		defer close(done)
		sum, err = Batch(ctx, Config{Harness: &fakeHarness{}, Tasks: []string{"a", "b"}, Repeat: 3, Jobs: 2,
			Agent: agent, Out: out, Env: env, Grace: 500 * time.Millisecond})
	}()
	for lines(counter) < 2 && time.Since(start) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err %v, want ErrInterrupted", err)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("the interrupt took %s", time.Since(start))
	}
	if len(sum.Runs) != 2 || sum.Overall.Statuses[StatusInterrupted] != 2 {
		t.Fatalf("after the interrupt: %+v", sum.Overall)
	}
	if _, err := os.Stat(filepath.Join(out, FileSummary)); err != nil {
		t.Errorf("no summary after the interrupt: %v", err)
	}
	for _, r := range sum.Runs {
		in, _ := readInfo(filepath.Join(out, r.Dir))
		if in == nil || in.Finished || in.Status != StatusInterrupted {
			t.Errorf("%s: run.json %+v", r.Dir, in)
		}
	}
	// Resume without SLOW: the two interrupted runs and the four never started.
	sum, err = Batch(context.Background(), Config{Harness: &fakeHarness{}, Tasks: []string{"a", "b"}, Repeat: 3, Jobs: 2,
		Agent: agent, Out: out, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := lines(counter); n != 8 {
		t.Errorf("agent started %d times in all, want 2 + 6", n)
	}
	if sum.Overall.Runs != 6 || sum.Overall.Passed != 6 {
		t.Errorf("after resume: %+v", sum.Overall)
	}
	if _, err := Batch(context.Background(), Config{Harness: &fakeHarness{}, Tasks: []string{"a", "b"}, Repeat: 3, Jobs: 2,
		Agent: agent, Out: out, Resume: true}); err != nil {
		t.Fatal(err)
	}
	if n := lines(counter); n != 8 {
		t.Errorf("a resume of a finished batch started the agent %d more times", n-8)
	}
}

func lines(path string) int {
	data, _ := os.ReadFile(path)
	return bytes.Count(data, []byte("\n"))
}

// TestRunManyJobs: many runs at once, each with its own directory and log.
func TestRunManyJobs(t *testing.T) {
	out := t.TempDir()
	sum, err := Batch(context.Background(), Config{Harness: &fakeHarness{}, Tasks: []string{"ok", "wrong"}, Repeat: 20, Jobs: 16,
		Agent: agentScript, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Overall.Runs != 40 || sum.Overall.Passed != 20 || sum.Overall.Statuses[StatusGraded] != 40 {
		t.Fatalf("overall %+v", sum.Overall)
	}
	for _, tr := range sum.Tasks {
		if len(tr.PassAtK) != 20 {
			t.Errorf("%s: %d pass@k values", tr.Task, len(tr.PassAtK))
		}
	}
}

// TestRunDiskFull: a run whose directory fills up ends with status error; the others go on
// and the summary lists all of them. The full disk is a 64 KiB tmpfs (root only).
func TestRunDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		testtool.Missing(t, "mounting a tmpfs needs root (CI runs as root)")
	}
	out := t.TempDir()
	mnt := filepath.Join(out, "bigLog")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, msg)
	}
	t.Cleanup(func() {
		if msg, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, msg)
		}
	})
	sum, err := Batch(context.Background(), Config{Harness: &fakeHarness{logBytes: 256 << 10}, Tasks: []string{"ok", "bigLog", "wrong"},
		Repeat: 1, Jobs: 1, Agent: agentScript, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsByTask(sum)
	if r := rows["bigLog/1"]; r.Status != StatusError || !strings.Contains(r.Error, "no space left") {
		t.Errorf("bigLog: %s %q, want error naming the full disk", r.Status, r.Error)
	}
	if rows["ok/1"].Status != StatusGraded || rows["wrong/1"].Status != StatusGraded {
		t.Errorf("the other runs: %s, %s", rows["ok/1"].Status, rows["wrong/1"].Status)
	}
	s := readJSON[Summary](t, filepath.Join(out, FileSummary))
	if len(s.Runs) != 3 {
		t.Errorf("summary.json lists %d runs, want 3", len(s.Runs))
	}
}

// TestCappedFile: output over the limit is counted and dropped with a note.
func TestCappedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	c, err := newCappedFile(path, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"0123456", "789abc", "def"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	total, err := c.finish()
	if err != nil || total != 16 {
		t.Fatalf("finish: %d, %v", total, err)
	}
	data, _ := os.ReadFile(path)
	if want := "0123456789\n[pab: output cut at 10 bytes; 6 more bytes dropped]\n"; string(data) != want {
		t.Errorf("got %q, want %q", data, want)
	}
}

func TestPassAtK(t *testing.T) {
	for _, tc := range []struct {
		n, c, k int
		want    float64
	}{
		{1, 1, 1, 1}, {1, 0, 1, 0}, {2, 1, 1, 0.5}, {2, 1, 2, 1}, {3, 1, 1, 1.0 / 3}, {3, 1, 2, 2.0 / 3},
		{3, 0, 3, 0}, {5, 2, 2, 1 - 3.0/10}, {10, 3, 5, 1 - 21.0/252},
	} {
		if got := passAtK(tc.n, tc.c, tc.k); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("pass@%d n=%d c=%d: %v, want %v", tc.k, tc.n, tc.c, got, tc.want)
		}
	}
	// summarize: a task with fewer counted runs than k has no pass@k, and the overall
	// value averages the tasks that have one.
	infos := map[job]*Info{}
	sc := func(v float64) *float64 { return &v }
	infos[job{"a", 1}] = &Info{Task: "a", Repeat: 1, Status: StatusGraded, Finished: true, Score: sc(1), Passed: true}
	infos[job{"a", 2}] = &Info{Task: "a", Repeat: 2, Status: StatusGraded, Finished: true, Score: sc(0)}
	infos[job{"b", 1}] = &Info{Task: "b", Repeat: 1, Status: StatusGraded, Finished: true, Score: sc(0)}
	infos[job{"b", 2}] = &Info{Task: "b", Repeat: 2, Status: StatusError, Finished: true, Score: sc(1), Passed: true}
	s := summarize(t.TempDir(), "x", []string{"a", "b"}, 2, infos)
	if v := s.Tasks[0].PassAtK[1].Value; v == nil || *v != 1 {
		t.Errorf("a pass@2 = %v, want 1", v)
	}
	if v := s.Tasks[1].PassAtK[1].Value; v == nil || *v != 0 {
		t.Errorf("b pass@2 = %v, want 0 (its error run counts, and does not pass)", v)
	}
	if v := s.Overall.PassAtK[0].Value; v == nil || *v != 0.25 {
		t.Errorf("overall pass@1 = %v, want (0.5 + 0) / 2", v)
	}
	if v := s.Overall.PassAtK[1]; v.Value == nil || *v.Value != 0.5 || v.Tasks != 2 {
		t.Errorf("overall pass@2 = %+v, want (1 + 0) / 2 over 2 tasks", v)
	}
	// c has one run: no pass@2, and the overall value averages the tasks that have one.
	infos[job{"c", 1}] = &Info{Task: "c", Repeat: 1, Status: StatusGraded, Finished: true, Score: sc(1), Passed: true}
	s = summarize(t.TempDir(), "x", []string{"a", "b", "c"}, 2, infos)
	if v := s.Tasks[2].PassAtK[1].Value; v != nil {
		t.Errorf("c pass@2 = %v, want none (one run)", *v)
	}
	if v := s.Overall.PassAtK[1]; v.Value == nil || *v.Value != 0.5 || v.Tasks != 2 {
		t.Errorf("overall pass@2 with c = %+v, want 0.5 over 2 tasks", v)
	}
	if s.Overall.Runs != 5 || s.Overall.Passed != 2 || s.Overall.InfraFailures != 1 {
		t.Errorf("overall %+v", s.Overall)
	}
}

// TestCollect grades run directories made elsewhere: pod fields kept, missing log is an
// error, junk skipped.
func TestCollect(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel string, files map[string]string) {
		d := filepath.Join(dir, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	logLine := `{"time":"2026-01-01T00:00:00.000Z","method":"GET","url":"http://example.org/","key":"GET example.org/","type":"document","source":"exact","status":200,"ms":0.1}` + "\n"
	mk("ok/1", map[string]string{FileLog: logLine, FileAnswer: "42\n"})
	mk("ok/2", map[string]string{FileLog: logLine, FileAnswer: "42\n", FileInfo: `{"exit_code": 1, "started": "2026-01-01T00:00:00Z", "ended": "2026-01-01T00:00:02.5Z"}`})
	mk("ok/3", map[string]string{FileLog: logLine, FileInfo: `{"exit_code": -1, "signal": "SIGKILL", "timed_out": true}`})
	mk("ok/4", map[string]string{FileAnswer: "42\n"})
	mk("ok/5", map[string]string{FileLog: logLine, FileAnswer: "42\n", FileInfo: `{not json`})
	mk("ok/x", nil)
	mk("ok/01", nil)
	mk("unknown/1", map[string]string{FileLog: logLine})
	mk(".hidden/1", nil)
	var progress bytes.Buffer
	sum, err := Collect(context.Background(), CollectConfig{Harness: &fakeHarness{}, Dir: dir, Jobs: 3, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsByTask(sum)
	want := map[string]string{"ok/1": StatusGraded, "ok/2": StatusAgentFailed, "ok/3": StatusTimeout, "ok/4": StatusError,
		"ok/5": StatusGraded, "unknown/1": StatusError}
	for k, st := range want {
		if rows[k].Status != st {
			t.Errorf("%s: %s (%s), want %s", k, rows[k].Status, rows[k].Error, st)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("%d runs collected, want %d", len(rows), len(want))
	}
	if r := rows["ok/2"]; r.DurationMS != 2500 || r.Score == nil || *r.Score != 1 {
		t.Errorf("ok/2: %+v", r)
	}
	if !strings.Contains(progress.String(), "skipped ok/x") || !strings.Contains(progress.String(), "skipped ok/01") {
		t.Errorf("progress does not note the junk:\n%s", progress.String())
	}
	for _, f := range []string{FileSummary, FileIndex, "ok/1/" + FileResult, "ok/1/" + FileReport, "ok/2/" + FileInfo} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if in := readJSON[Info](t, filepath.Join(dir, "ok", "2", FileInfo)); in.ExitCode == nil || *in.ExitCode != 1 || in.Status != StatusAgentFailed {
		t.Errorf("ok/2 run.json: %+v", in)
	}
	// An empty directory is an error.
	if _, err := Collect(context.Background(), CollectConfig{Harness: &fakeHarness{}, Dir: t.TempDir()}); err == nil {
		t.Error("collect of an empty directory: no error")
	}
}

// TestBatchMistakes: bad configurations are refused before anything runs (the errors name
// Config's fields; pab run names its flags instead, TestBatchFieldErrors).
func TestBatchMistakes(t *testing.T) {
	h := &fakeHarness{}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Harness: h, Tasks: []string{"a"}, Repeat: 0, Jobs: 1, Agent: "true"}, "Repeat 0: want at least 1"},
		{Config{Harness: h, Tasks: []string{"a"}, Repeat: 1, Jobs: 0, Agent: "true"}, "Jobs 0: want at least 1"},
		{Config{Harness: h, Tasks: []string{"a"}, Repeat: 1, Jobs: 1, Agent: " "}, "Agent: the agent command is required"},
		{Config{Harness: h, Tasks: []string{"a", "a"}, Repeat: 1, Jobs: 1, Agent: "true"}, "twice"},
		{Config{Harness: h, Tasks: []string{"../x"}, Repeat: 1, Jobs: 1, Agent: "true"}, "cannot name"},
		{Config{Harness: h, Tasks: nil, Repeat: 1, Jobs: 1, Agent: "true"}, "no tasks"},
	} {
		tc.cfg.Out = t.TempDir()
		if _, err := Batch(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
}

// TestRenderIndex: the page escapes what it shows and links each report.
func TestRenderIndex(t *testing.T) {
	one := 1.0
	s := &Summary{Agent: `<script>alert(1)</script>`, Repeat: 1, Planned: 1,
		Runs:  []RunRow{{Task: "t", Repeat: 1, Status: StatusGraded, Score: &one, Passed: true, Dir: "t/1", Report: "t/1/report.html", Error: "<b>x</b>"}},
		Tasks: []TaskRow{{Task: "t", Counts: Counts{Runs: 1, Passed: 1, PassRate: &one, PassAtK: []PassAt{{K: 1, Value: &one}}, Statuses: map[string]int{"graded": 1}}}},
		Overall: Overall{Counts: Counts{Runs: 1, Statuses: map[string]int{"graded": 1}, PassAtK: []PassAt{{K: 1, Value: &one}}},
			Failures: []Failure{{Dir: "t/1", Kind: "judge", Error: "<i>judge</i>"}}}}
	html, err := RenderIndex(s)
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	if strings.Contains(page, "<script>") || strings.Contains(page, "<b>x</b>") || strings.Contains(page, "<i>judge</i>") {
		t.Error("index.html does not escape")
	}
	if !strings.Contains(page, `href="t/1/report.html"`) {
		t.Error("no link to the report")
	}
}

// TestProgressLive: on a terminal the progress line is rewritten in place (\r, erase line)
// with done, running, failed, elapsed and ETA; finished runs get lines of their own.
func TestProgressLive(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true, 2, 1)
	p.start()
	p.begin()
	p.end(job{"a", 1}, &Info{Status: StatusGraded})
	p.begin()
	p.end(job{"a", 2}, &Info{Status: StatusTimeout})
	p.stop()
	out := buf.String()
	for _, want := range []string{"1 runs finished before are kept", "\r\033[Kpab run: 0/2 done, 1 running, 0 failed, elapsed 0s, ETA ?",
		"\r\033[K[1/2] a #1: graded", "1/2 done, 0 running, 0 failed", "ETA ", "[2/2] a #2: timeout", "2/2 done, 0 running, 1 failed",
		"2 of 2 runs done, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("live progress lacks %q:\n%q", want, out)
		}
	}
	buf.Reset()
	p = newProgress(&buf, false, 1, 0)
	p.start()
	p.begin()
	p.end(job{"a", 1}, &Info{Status: StatusError, Error: "disk full"})
	p.stop()
	if strings.Contains(buf.String(), "\r") || !strings.Contains(buf.String(), "[1/1] a #1: error (0.0s): disk full\n") {
		t.Errorf("plain progress:\n%q", buf.String())
	}
}

// TestRunHonestSummary: every run counts in the pass rate. Of 2 good runs, 1 that never
// opens a page (a right answer all the same) and 1 whose judge fails, 2 pass: 50%, with the
// judge failure counted and named as an infrastructure failure and the run without a page
// flagged no_browsing, in run.json, summary.json, the printed lines and index.html.
func TestRunHonestSummary(t *testing.T) {
	out := t.TempDir()
	sum, err := Batch(context.Background(), Config{Harness: &fakeHarness{}, Tasks: []string{"ok", "ok2", "nobrowse", "judgeerr"},
		Repeat: 1, Jobs: 2, Agent: agentScript, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	s := readJSON[Summary](t, filepath.Join(out, FileSummary))
	if s.Format != 2 {
		t.Errorf("summary.json format %d, want 2", s.Format)
	}
	o := s.Overall
	if o.Runs != 4 || o.Passed != 2 || o.PassRate == nil || *o.PassRate != 0.5 || o.InfraFailures != 1 || o.NoBrowsing != 1 || o.Scored != 3 {
		t.Errorf("overall %+v", o)
	}
	if len(o.Failures) != 1 || o.Failures[0].Dir != "judgeerr/1" || o.Failures[0].Kind != "judge" || !strings.Contains(o.Failures[0].Error, "judge failed") {
		t.Errorf("failures %+v", o.Failures)
	}
	if len(o.NoBrowsingRuns) != 1 || o.NoBrowsingRuns[0] != "nobrowse/1" {
		t.Errorf("no_browsing_runs %v", o.NoBrowsingRuns)
	}
	if v := o.MeanScore; v == nil || *v != 0.5 {
		t.Errorf("mean score %v, want 0.5 (the run without a page and the error count 0)", v)
	}
	rows := rowsByTask(s)
	if r := rows["nobrowse/1"]; r.Status != StatusNoBrowsing || !r.NoBrowsing || r.Passed || r.Pages == nil || *r.Pages != 0 || r.Score == nil || *r.Score != 1 {
		t.Errorf("nobrowse row %+v", r)
	}
	if r := rows["judgeerr/1"]; r.Status != StatusError || r.ErrorKind != "judge" || r.Passed {
		t.Errorf("judgeerr row %+v", r)
	}
	in := readJSON[Info](t, filepath.Join(out, "nobrowse", "1", FileInfo))
	if in.Status != StatusNoBrowsing || !in.NoBrowsing || in.Passed || in.Pages == nil || *in.Pages != 0 || !strings.Contains(in.Error, "opened no page") {
		t.Errorf("nobrowse run.json %+v", in)
	}
	lines := strings.Join(sum.Lines(), "\n")
	for _, want := range []string{"4 runs; pass rate 50% (2 of 4 runs), pass@1 50%",
		"1 infrastructure failure (pab failed, not the agent; counted as not passed): judge error — see judgeerr/1",
		"1 run opened no page (no_browsing: the agent never used a browser): nobrowse/1"} {
		if !strings.Contains(lines, want) {
			t.Errorf("printed summary lacks %q:\n%s", want, lines)
		}
	}
	page, err := os.ReadFile(filepath.Join(out, FileIndex))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pass rate 50% (2 of 4 runs passed)", "1 infrastructure failure: pab failed, not the agent",
		"<b>judge error</b> — see run <a href=\"judgeerr/1/\">judgeerr/1</a>", "1 run never opened a page (no_browsing)",
		`<span class="flag">no page opened</span>`, `<span class="status">no_browsing</span>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	// --resume keeps the no_browsing run (it finished) and runs the error again.
	counter := filepath.Join(t.TempDir(), "count")
	if _, err := Batch(context.Background(), Config{Harness: &fakeHarness{}, Tasks: []string{"ok", "ok2", "nobrowse", "judgeerr"},
		Repeat: 1, Jobs: 2, Agent: "echo $PAB_TASK_ID >> " + counter + "; " + agentScript, Out: out, Resume: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(counter); string(got) != "judgeerr\n" {
		t.Errorf("--resume ran %q, want only the judge error again", got)
	}
}
