package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/internal/proctest"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

var demoTasks = []string{"books-sapiens-price", "archive-org-jobs", "lil-former-projects"}

// buildRefagent builds cmd/refagent into a temporary directory.
func buildRefagent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "refagent")
	if out, err := exec.Command("go", "build", "-o", bin, "../refagent").CombinedOutput(); err != nil {
		t.Fatalf("build refagent: %v\n%s", err, out)
	}
	return bin
}

func readInfoFile(t *testing.T, path string) *batch.Info {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var in batch.Info
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &in
}

func readSummary(t *testing.T, dir string) *batch.Summary {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, batch.FileSummary))
	if err != nil {
		t.Fatal(err)
	}
	var s batch.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	return &s
}

func countLines(path string) int {
	data, _ := os.ReadFile(path)
	return bytes.Count(data, []byte("\n"))
}

// indexLinks parses index.html and returns every href and the text of every table cell of
// the body.
func indexLinks(t *testing.T, path string) (links []string, cells []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := html.Parse(f)
	if err != nil {
		t.Fatalf("index.html: %v", err)
	}
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var sb strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			sb.WriteString(text(c))
		}
		return sb.String()
	}
	var walk func(n *html.Node, inBody bool)
	walk = func(n *html.Node, inBody bool) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script":
				t.Errorf("index.html has a script")
			case "a":
				for _, a := range n.Attr {
					if a.Key == "href" {
						links = append(links, a.Val)
					}
				}
			case "tbody":
				inBody = true
			case "td":
				if inBody {
					cells = append(cells, strings.Join(strings.Fields(text(n)), " "))
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inBody)
		}
	}
	walk(doc, false)
	return links, cells
}

// TestRunEndToEnd: pab run with the reference agent on the three demo tasks, two at a time,
// twice each, graded by the example judge: every run scores 1; then --resume does nothing.
func TestRunEndToEnd(t *testing.T) {
	ref := buildRefagent(t)
	out := filepath.Join(t.TempDir(), "batch")
	counter := filepath.Join(t.TempDir(), "starts")
	agent := ref + " --plans " + filepath.Join(repoRoot, "tasks") + " --counter " + counter
	args := append([]string{"run", "--out", out, "--jobs", "2", "--repeat", "2", "--timeout", "2m", "--har",
		"--agent", agent, "--judge", "cli", "--judge-cmd", exampleJudge}, demoTasks...)
	stdout, stderr, code := runPabDir(t, repoRoot, args...)
	if code != 0 {
		t.Fatalf("pab run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := countLines(counter); n != 6 {
		t.Errorf("the agent started %d times, want 6", n)
	}
	if strings.Contains(stdout, "\r") {
		t.Errorf("progress to a pipe has a live line:\n%q", stdout)
	}
	if !strings.Contains(stdout, "[6/6]") || !strings.Contains(stdout, "pass rate 100% (6 of 6 runs), pass@1 100%, pass@2 100%") ||
		strings.Contains(stdout, "infrastructure failure") || strings.Contains(stdout, "opened no page") {
		t.Errorf("stdout:\n%s", stdout)
	}
	s := readSummary(t, out)
	if len(s.Runs) != 6 || s.Planned != 6 || s.Repeat != 2 {
		t.Fatalf("summary: %d runs of %d planned", len(s.Runs), s.Planned)
	}
	for _, r := range s.Runs {
		if r.Status != batch.StatusGraded || r.Score == nil || *r.Score != 1 || !r.Passed || r.NoBrowsing || r.Pages == nil || *r.Pages == 0 {
			t.Errorf("%s: status %s score %v pages %v (%s)", r.Dir, r.Status, r.Score, r.Pages, r.Error)
		}
		if r.Requests == 0 || r.Exact == nil || *r.Exact != 1 || *r.Miss != 0 {
			t.Errorf("%s: %d requests, exact %v", r.Dir, r.Requests, r.Exact)
		}
		dir := filepath.Join(out, r.Dir)
		for _, f := range []string{batch.FileLog, batch.FileAnswer, batch.FilePrompt, batch.FileStdout, batch.FileStderr,
			batch.FileInfo, batch.FileResult, batch.FileReport} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", r.Dir, err)
			}
		}
		checkRunHAR(t, filepath.Join(dir, replay.RunHARFile), r.Requests)
		want, _ := os.ReadFile(filepath.Join(repoRoot, "docs", "examples", r.Task, "right", "answer.txt"))
		if got, _ := os.ReadFile(filepath.Join(dir, batch.FileAnswer)); !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: answer %q, want the example's %q", r.Dir, got, want)
		}
		res := readResult(t, filepath.Join(dir, batch.FileResult))
		if res.Status != "scored" || len(res.Pages.Opened) == 0 {
			t.Errorf("%s: result %s, %d pages", r.Dir, res.Status, len(res.Pages.Opened))
		}
		// Provenance (issue 21): result.json, run.json and the summary's row name the same
		// recording, grading file, rules and build; the replay log's header names the
		// recording, so grading did not warn.
		recHash, _ := recording.HashRecording(filepath.Join(repoRoot, "tasks", r.Task, "recording"))
		p := res.Provenance
		if p == nil || p.Recording != recHash || p.Grading == "" || p.Rules == "" || len(p.RuleFiles) == 0 || p.Pab.Version == "" {
			t.Errorf("%s: result provenance %+v, want recording %s", r.Dir, p, recHash)
		} else {
			info := readInfoFile(t, filepath.Join(dir, batch.FileInfo))
			if info.Provenance == nil || !reflect.DeepEqual(*info.Provenance, *p) || r.Provenance == nil || !reflect.DeepEqual(*r.Provenance, *p) {
				t.Errorf("%s: run.json provenance %+v, summary %+v, want result.json's %+v", r.Dir, info.Provenance, r.Provenance, p)
			}
		}
		if res.Log == nil || res.Log.Recording != recHash || strings.Contains(strings.Join(res.Notes, " "), "was written against recording") {
			t.Errorf("%s: log %+v notes %q: want the log's header to name %s", r.Dir, res.Log, res.Notes, recHash)
		}
	}
	if s.Pab.Version == "" {
		t.Errorf("summary.json names no build: %+v", s.Pab)
	}
	// pab grade --har writes the same run.har beside result.json
	r0 := s.Runs[0]
	gradeOut := t.TempDir()
	if stdout, stderr, code := runPabDir(t, repoRoot, "grade", r0.Task, "--log", filepath.Join(out, r0.Dir, batch.FileLog),
		"--answer", filepath.Join(out, r0.Dir, batch.FileAnswer), "--out", gradeOut, "--har", "--judge", "cli", "--judge-cmd", exampleJudge); code != 0 {
		t.Errorf("pab grade --har: exit %d\n%s%s", code, stdout, stderr)
	}
	checkRunHAR(t, filepath.Join(gradeOut, replay.RunHARFile), r0.Requests)
	if len(s.Tasks) != 3 {
		t.Fatalf("%d tasks in the summary", len(s.Tasks))
	}
	for _, tr := range s.Tasks {
		if tr.PassRate == nil || *tr.PassRate != 1 || len(tr.PassAtK) != 2 || tr.PassAtK[1].Value == nil || *tr.PassAtK[1].Value != 1 {
			t.Errorf("task %s: %+v", tr.Task, tr)
		}
	}
	if o := s.Overall; o.Runs != 6 || o.Passed != 6 || o.PassRate == nil || *o.PassRate != 1 || o.PassAtK[0].Tasks != 3 {
		t.Errorf("overall %+v", o)
	}
	// index.html: a row per task, a cell per run, every link leads to a file.
	links, cells := indexLinks(t, filepath.Join(out, batch.FileIndex))
	reports := 0
	for _, l := range links {
		if strings.Contains(l, "://") || strings.HasPrefix(l, "/") {
			t.Errorf("index.html link %q is not relative", l)
			continue
		}
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(l))); err != nil {
			t.Errorf("index.html links %q: %v", l, err)
		}
		if strings.HasSuffix(l, "/report.html") {
			reports++
		}
	}
	if reports != 6 {
		t.Errorf("index.html links %d reports, want 6", reports)
	}
	graded := 0
	for _, c := range cells {
		if strings.Contains(c, "graded") {
			graded++
		}
	}
	if graded != 6 {
		t.Errorf("index.html: %d cells say graded, want 6: %q", graded, cells)
	}

	// Again with --resume: nothing to do, nothing run, the summary is the same.
	stdout, stderr, code = runPabDir(t, repoRoot, append(args, "--resume")...)
	if code != 0 {
		t.Fatalf("pab run --resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if n := countLines(counter); n != 6 {
		t.Errorf("--resume started the agent %d more times", n-6)
	}
	if !strings.Contains(stdout, "6 runs finished before are kept") || !strings.Contains(stdout, "0 runs to do") {
		t.Errorf("--resume stdout:\n%s", stdout)
	}
	if s2 := readSummary(t, out); len(s2.Runs) != 6 || s2.Overall.Passed != 6 {
		t.Errorf("summary after --resume: %+v", s2.Overall)
	}
	// Without --resume, the same --out is refused.
	if _, stderr, code := runPabDir(t, repoRoot, args...); code != 1 || !strings.Contains(stderr, "--resume") {
		t.Errorf("a new batch in a used --out: exit %d, %s", code, stderr)
	}
	// --collect grades the same directories the same way.
	col := filepath.Join(t.TempDir(), "collected")
	for _, r := range s.Runs {
		d := filepath.Join(col, r.Dir)
		os.MkdirAll(d, 0o755)
		for _, f := range []string{batch.FileLog, batch.FileAnswer} {
			data, _ := os.ReadFile(filepath.Join(out, r.Dir, f))
			os.WriteFile(filepath.Join(d, f), data, 0o644)
		}
	}
	stdout, stderr, code = runPabDir(t, repoRoot, "run", "--collect", col, "--judge", "cli", "--judge-cmd", exampleJudge)
	if code != 0 {
		t.Fatalf("pab run --collect: exit %d\n%s\n%s", code, stdout, stderr)
	}
	c := readSummary(t, col)
	if len(c.Runs) != 6 || c.Overall.Passed != 6 {
		t.Errorf("collected summary: %+v", c.Overall)
	}
	ran := map[string]batch.RunRow{}
	for _, r := range s.Runs {
		ran[r.Dir] = r
	}
	for _, r := range c.Runs {
		w := ran[r.Dir]
		if r.Status != w.Status || r.Score == nil || w.Score == nil || *r.Score != *w.Score || r.Requests != w.Requests || *r.Exact != *w.Exact {
			t.Errorf("collected %+v, ran %+v", r, w)
		}
	}
}

// misbehave is an agent for books-sapiens-price that misbehaves by repeat, and for a task
// without grading writes an answer.
const misbehave = `case "$PAB_TASK_ID/$PAB_REPEAT" in
  books-sapiens-price/1) m=no-answer ;;
  books-sapiens-price/2) m=huge ;;
  books-sapiens-price/3) m=crash ;;
  books-sapiens-price/4) m=orphan ;;
  books-sapiens-price/5) m=hang ;;
  *) echo "I did it" > "$PAB_ANSWER_FILE"; exit 0 ;;
esac
exec REFAGENT --plans PLANS --mode $m`

// TestRunMisbehavingAgents: the reference agent's misbehaviours, through real replays, each
// end with their status (flagged no_browsing when they opened no page); the orphan it
// leaves is killed; an apply task run without --guard is an infrastructure failure (its
// grading needs the guard's trace), not a score.
func TestRunMisbehavingAgents(t *testing.T) {
	ref := buildRefagent(t)
	out := filepath.Join(t.TempDir(), "batch")
	agent := strings.NewReplacer("REFAGENT", ref, "PLANS", filepath.Join(repoRoot, "tasks")).Replace(misbehave)
	start := time.Now()
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--jobs", "6", "--repeat", "5", "--timeout", "4s",
		"--grace", "500ms", "--agent", agent, "--judge", "cli", "--judge-cmd", exampleJudge,
		"books-sapiens-price", "apply-greenhouse-axon")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the batch took %s", d)
	}
	s := readSummary(t, out)
	got := map[string]string{}
	for _, r := range s.Runs {
		got[r.Dir] = r.Status
	}
	want := map[string]string{
		"books-sapiens-price/1": batch.StatusNoAnswer, "books-sapiens-price/2": batch.StatusAnswerTooLarge,
		"books-sapiens-price/3": batch.StatusAgentFailed, "books-sapiens-price/4": batch.StatusGraded,
		"books-sapiens-price/5": batch.StatusTimeout,
	}
	for k := 1; k <= 5; k++ {
		want["apply-greenhouse-axon/"+strconv.Itoa(k)] = batch.StatusError
	}
	for dir, st := range want {
		if got[dir] != st {
			t.Errorf("%s: %s, want %s", dir, got[dir], st)
		}
	}
	for _, r := range s.Runs {
		// only the orphan run browsed (the others leave before the first page)
		if browsed := r.Dir == "books-sapiens-price/4"; r.NoBrowsing == browsed {
			t.Errorf("%s: no_browsing %v", r.Dir, r.NoBrowsing)
		}
		if r.Task == "apply-greenhouse-axon" && (r.ErrorKind != "guard" || !strings.Contains(r.Error, "guard.trace.jsonl")) {
			t.Errorf("%s: error %s %q, want the guard's files named", r.Dir, r.ErrorKind, r.Error)
		}
	}
	if o := s.Overall; o.Runs != 10 || o.Passed != 1 || o.InfraFailures != 5 || o.NoBrowsing != 9 {
		t.Errorf("overall %+v", o)
	}
	data, err := os.ReadFile(filepath.Join(out, "books-sapiens-price", "4", "orphan.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 {
		t.Fatalf("orphan.pid %q", data)
	}
	if !proctest.GoneWithin(pid, 5*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the agent's child %d (sleep 1000) outlived the run", pid)
	}
	// The answer too large is kept, not shown to the judge.
	if fi, err := os.Stat(filepath.Join(out, "books-sapiens-price", "2", "answer.txt")); err != nil || fi.Size() < 2<<20 {
		t.Errorf("the huge answer: %v", err)
	}
	for _, tr := range s.Tasks {
		if tr.Task == "apply-greenhouse-axon" && (tr.Runs != 5 || tr.InfraFailures != 5 || tr.PassRate == nil || *tr.PassRate != 0) {
			t.Errorf("apply task: %+v", tr)
		}
	}
}

// TestRunBrowser: with --browser each run gets its own Chromium through its own replay; the
// agent opens a page over CDP's HTTP endpoint and the replay log of the run has it.
func TestRunBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	t.Setenv("RIGHT_ANSWER", filepath.Join(repoRoot, "docs", "examples", "books-sapiens-price", "right", "answer.txt"))
	out := filepath.Join(t.TempDir(), "batch")
	agent := `case "$PAB_CDP_URL" in ws://127.0.0.1:*) ;; *) echo "no CDP URL: $PAB_CDP_URL" >&2; exit 9 ;; esac
hp=${PAB_CDP_URL#ws://}; hp=${hp%%/*}
curl -sf -X PUT "http://$hp/json/new?https://books.toscrape.com/" > tab.json || exit 8
for i in $(seq 1 100); do grep -q books.toscrape.com "$PAB_RUN_DIR/.replay.jsonl".tmp* 2>/dev/null && break; sleep 0.1; done
sleep 1
cp "$RIGHT_ANSWER" "$PAB_ANSWER_FILE"`
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--jobs", "2", "--repeat", "2", "--browser", "--chrome", chrome,
		"--proxy-env=false", "--timeout", "60s", "--agent", agent, "--judge", "cli", "--judge-cmd", exampleJudge, "books-sapiens-price")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, out)
	for _, r := range s.Runs {
		if r.Status == batch.StatusAgentFailed || r.Status == batch.StatusError {
			e, _ := os.ReadFile(filepath.Join(out, r.Dir, batch.FileStderr))
			t.Errorf("%s: %s %s\n%s", r.Dir, r.Status, r.Error, e)
			continue
		}
		log, _ := os.ReadFile(filepath.Join(out, r.Dir, batch.FileLog))
		if !bytes.Contains(log, []byte(`"url":"https://books.toscrape.com/","key":"GET books.toscrape.com/","type":"document","dest":"document","source":"exact","status":200`)) {
			t.Errorf("%s: the page opened in Chromium is not in the run's log:\n%s", r.Dir, log)
		}
	}
	if len(processesUsing(t, out)) > 0 {
		t.Errorf("processes left running: %v", processesUsing(t, out))
	}
}

// TestRunGuard: with --guard each run gets a pab guard (here with the fake browser MCP
// server, offering browser_navigate), handed over once it lists its tools, whose MCP
// endpoint answers the agent's initialize request with the run's token and nothing without.
func TestRunGuard(t *testing.T) {
	t.Setenv("RIGHT_ANSWER", filepath.Join(repoRoot, "docs", "examples", "books-sapiens-price", "right", "answer.txt"))
	app := writeApp(t, smokeApp)
	fake := fakeMCPBin(t)
	out := filepath.Join(t.TempDir(), "batch")
	agent := `case "$PAB_MCP_URL" in http://127.0.0.1:*/mcp) ;; *) echo "no MCP URL: $PAB_MCP_URL" >&2; exit 9 ;; esac
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' --data "$init" "$PAB_MCP_URL")
[ "$code" = 401 ] || { echo "without the token: $code" >&2; exit 7; }
curl -sSf -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H "Authorization: Bearer $PAB_MCP_TOKEN" --data "$init" "$PAB_MCP_URL" > init.txt || { echo "initialize with the token failed" >&2; exit 8; }
cp "$RIGHT_ANSWER" "$PAB_ANSWER_FILE"`
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--guard", app, "--guard-browser-mcp", fake+" browser",
		"--proxy-env=false", "--timeout", "60s", "--agent", agent, "--judge", "cli", "--judge-cmd", exampleJudge, "books-sapiens-price")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, out)
	if len(s.Runs) != 1 || s.Runs[0].Status == batch.StatusAgentFailed || s.Runs[0].Status == batch.StatusError {
		e, _ := os.ReadFile(filepath.Join(out, "books-sapiens-price", "1", batch.FileStderr))
		t.Fatalf("runs %+v\n%s", s.Runs, e)
	}
	init, _ := os.ReadFile(filepath.Join(out, "books-sapiens-price", "1", "init.txt"))
	if !bytes.Contains(init, []byte(`"serverInfo"`)) {
		t.Errorf("MCP initialize answer: %s", init)
	}
	if _, err := os.Stat(filepath.Join(out, "books-sapiens-price", "1", "guard.stderr")); err != nil {
		t.Errorf("guard.stderr: %v", err)
	}
}

// TestRunMistakes: bad flags give one clear line and exit 1 before anything runs.
func TestRunMistakes(t *testing.T) {
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "books-sapiens-price"}, "--agent CMD is required"},
		{[]string{"run", "--agent", "true", "no-such-task"}, "no-such-task"},
		{[]string{"run", "--agent", "true", "../etc"}, "bad task id"},
		{[]string{"run", "--agent", "true", "--repeat", "0", "books-sapiens-price"}, "--repeat"},
		{[]string{"run", "--agent", "true", "--browser", "--guard", "x.yaml", "books-sapiens-price"}, "not both"},
		{[]string{"run", "--collect", out, "--agent", "true"}, "does not go with --collect"},
		{[]string{"run", "--collect", out}, "no run directories"},
		{[]string{"run", "--agent", "true", "--guard", "/no/such/app.yaml", "books-sapiens-price"}, "--guard"},
	} {
		_, stderr, code := runPabDir(t, repoRoot, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestRunCtrlC: SIGINT stops the batch: running agents (and their children) are killed,
// their runs marked interrupted, the summary is written, pab exits 130; --resume finishes.
func TestRunCtrlC(t *testing.T) {
	out := filepath.Join(t.TempDir(), "batch")
	started := filepath.Join(t.TempDir(), "started")
	agent := `echo $$ >> ` + started + `; [ -f "$STOP_SLEEPING" ] || sleep 1000; cp "$RIGHT_ANSWER" "$PAB_ANSWER_FILE"`
	flag := filepath.Join(t.TempDir(), "stop")
	t.Setenv("STOP_SLEEPING", flag)
	t.Setenv("RIGHT_ANSWER", filepath.Join(repoRoot, "docs", "examples", "books-sapiens-price", "right", "answer.txt"))
	args := []string{"run", "--out", out, "--jobs", "2", "--repeat", "3", "--agent", agent,
		"--judge", "cli", "--judge-cmd", exampleJudge, "books-sapiens-price"}
	cmd := pabCmd(args...)
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for countLines(started) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("pab run after SIGINT: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "--resume") {
		t.Errorf("stderr: %s", stderr.String())
	}
	s := readSummary(t, out)
	if len(s.Runs) != 2 || s.Overall.Statuses[batch.StatusInterrupted] != 2 {
		t.Errorf("after SIGINT: %+v", s.Overall)
	}
	// the agents' shells are gone
	for _, l := range strings.Fields(string(must(os.ReadFile(started)))) {
		pid, _ := strconv.Atoi(l)
		if !proctest.GoneWithin(pid, 5*time.Second) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("agent %d still runs after SIGINT", pid)
		}
	}
	os.WriteFile(flag, nil, 0o644)
	if stdout, stderr, code := runPabDir(t, repoRoot, append(args, "--resume")...); code != 0 {
		t.Fatalf("--resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// (the agent copies the answer without opening a page: no_browsing, finished)
	if s := readSummary(t, out); len(s.Runs) != 3 || s.Overall.Statuses[batch.StatusNoBrowsing] != 3 || s.Overall.Unfinished != 0 {
		t.Errorf("after --resume: %+v", s.Overall)
	}
	if n := countLines(started); n != 5 {
		t.Errorf("agents started %d times, want 2 + 3", n)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// honestAgent is an agent for books-sapiens-price that behaves by repeat: 1 and 2 are the
// reference agent (browse, right answer); 3 writes the right answer without opening a page;
// 4 browses, then writes an answer the stand-in judge has no reply for.
const honestAgent = `case "$PAB_REPEAT" in
  3) cp "$RIGHT_ANSWER" "$PAB_ANSWER_FILE" ;;
  4) REFAGENT --plans PLANS && echo "The price is JUDGE-MUST-FAIL." > "$PAB_ANSWER_FILE" ;;
  *) exec REFAGENT --plans PLANS ;;
esac`

// failingJudge is a judge command in front of docs/examples/judge.sh that fails on a prompt
// holding JUDGE-MUST-FAIL (as the stand-in judge does on any prompt it has no reply for,
// without saving the prompt into the repository).
const failingJudge = `#!/bin/sh
tmp=$(mktemp)
cat > "$tmp"
if grep -q JUDGE-MUST-FAIL "$tmp"; then
	rm -f "$tmp"
	echo "failing judge: no reply written for this prompt" >&2
	exit 3
fi
@JUDGE@ < "$tmp"
rc=$?
rm -f "$tmp"
exit $rc
`

// textByID returns the visible text (white space collapsed) of the element with id in an
// HTML file, "" when there is none.
func textByID(t *testing.T, path, id string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := html.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var sb strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			sb.WriteString(text(c))
		}
		return sb.String()
	}
	var find func(n *html.Node) string
	find = func(n *html.Node) string {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "id" && a.Val == id {
					return strings.Join(strings.Fields(text(n)), " ")
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if s := find(c); s != "" {
				return s
			}
		}
		return ""
	}
	return find(doc)
}

// TestRunHonestBatch (issue 16): a batch of 4 runs of books-sapiens-price through real
// replays, graded by the stand-in judge: 2 good, 1 that never opens a page (it copies the
// right answer), 1 whose judge fails. The pass rate is over all 4 runs (50%); the judge
// failure is counted and named as an infrastructure failure, the run without a page is
// flagged no_browsing, in summary.json, in what pab run prints and in what index.html says.
func TestRunHonestBatch(t *testing.T) {
	ref := buildRefagent(t)
	t.Setenv("RIGHT_ANSWER", filepath.Join(repoRoot, "docs", "examples", "books-sapiens-price", "right", "answer.txt"))
	judge := filepath.Join(t.TempDir(), "judge.sh")
	if err := os.WriteFile(judge, []byte(strings.Replace(failingJudge, "@JUDGE@", filepath.Join(repoRoot, exampleJudge), 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "batch")
	agent := strings.NewReplacer("REFAGENT", ref, "PLANS", filepath.Join(repoRoot, "tasks")).Replace(honestAgent)
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--jobs", "2", "--repeat", "4", "--timeout", "2m",
		"--agent", agent, "--judge", "cli", "--judge-cmd", judge, "books-sapiens-price")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, out)
	if s.Format != batch.SummaryFormat {
		t.Errorf("summary.json format %d", s.Format)
	}
	o := s.Overall
	if o.Runs != 4 || o.Passed != 2 || o.PassRate == nil || *o.PassRate != 0.5 || o.InfraFailures != 1 || o.NoBrowsing != 1 {
		t.Errorf("overall: runs %d passed %d rate %v infra %d no_browsing %d; want 4, 2, 50%%, 1, 1", o.Runs, o.Passed, o.PassRate, o.InfraFailures, o.NoBrowsing)
	}
	if p := o.PassAtK; len(p) != 4 || p[0].Value == nil || *p[0].Value != 0.5 || p[3].Value == nil || *p[3].Value != 1 {
		t.Errorf("pass@k %+v", p)
	}
	if len(o.Failures) != 1 || o.Failures[0].Dir != "books-sapiens-price/4" || o.Failures[0].Kind != "judge" ||
		!strings.Contains(o.Failures[0].Error, "no reply written for this prompt") {
		t.Errorf("failures %+v", o.Failures)
	}
	if len(o.NoBrowsingRuns) != 1 || o.NoBrowsingRuns[0] != "books-sapiens-price/3" {
		t.Errorf("no_browsing_runs %v", o.NoBrowsingRuns)
	}
	rows := map[string]batch.RunRow{}
	for _, r := range s.Runs {
		rows[r.Dir] = r
	}
	for _, d := range []string{"books-sapiens-price/1", "books-sapiens-price/2"} {
		if r := rows[d]; r.Status != batch.StatusGraded || !r.Passed || r.NoBrowsing || r.Pages == nil || *r.Pages == 0 {
			t.Errorf("%s: %+v", d, r)
		}
	}
	// (its right answer scores 0 here: the task's trace entry read_the_site wants a page)
	if r := rows["books-sapiens-price/3"]; r.Status != batch.StatusNoBrowsing || r.Passed || !r.NoBrowsing || r.Score == nil || *r.Score != 0 || r.Requests != 0 {
		t.Errorf("the run without a page: %+v", r)
	}
	if r := rows["books-sapiens-price/4"]; r.Status != batch.StatusError || r.Passed || r.NoBrowsing || r.ErrorKind != "judge" {
		t.Errorf("the judge failure: %+v", r)
	}
	for _, want := range []string{"pab run: 4 runs; pass rate 50% (2 of 4 runs), pass@1 50%",
		"pab run: 1 infrastructure failure (pab failed, not the agent; counted as not passed): judge error — see books-sapiens-price/4",
		"pab run: 1 run opened no page (no_browsing: the agent never used a browser): books-sapiens-price/3"} {
		if !strings.Contains(stdout, want+"\n") && !strings.Contains(stdout, want+",") {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	// index.html as a person reads it.
	index := filepath.Join(out, batch.FileIndex)
	if got := textByID(t, index, "pass-rate"); !strings.HasPrefix(got, "50% pass rate 50% (2 of 4 runs passed) · pass@1 50% · pass@2 83% · pass@3 100% · pass@4 100%") {
		t.Errorf("index.html pass rate: %q", got)
	}
	if got := textByID(t, index, "infra-failures"); !strings.HasPrefix(got, "1 infrastructure failure: pab failed, not the agent (counted as not passed) judge error — see run books-sapiens-price/4 (report): ") ||
		!strings.Contains(got, "no reply written for this prompt") {
		t.Errorf("index.html infrastructure failures: %q", got)
	}
	if got := textByID(t, index, "no-browsing"); !strings.HasPrefix(got, "1 run never opened a page (no_browsing): the agent never used a browser") ||
		!strings.HasSuffix(got, "books-sapiens-price/3.") {
		t.Errorf("index.html no_browsing: %q", got)
	}
	_, cells := indexLinks(t, index)
	if len(cells) < 4 || !strings.Contains(cells[2], "no_browsing no page opened") || !strings.Contains(cells[3], "error judge error") {
		t.Errorf("index.html cells: %q", cells)
	}
}

// checkRunHAR checks a run's HAR (pab run --har, pab grade --har): valid HAR 1.2 with one
// entry per request of the log, each with its lookup step, every exact answer with a body,
// and Chromium DevTools' HAR importer loads it whole (devtoolsCheck, har_devtools_test.go).
func checkRunHAR(t *testing.T, path string, requests int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if probs, err := har.Validate(f); err != nil || len(probs) != 0 {
		t.Errorf("%s: %v %q", path, err, probs)
	}
	f.Seek(0, 0)
	hr, err := har.NewReader(f, har.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		e, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n++
		if e.Pab == nil || e.Pab.Source == "" || (e.Pab.Source == "exact" && !e.Response.Content.HasText()) {
			t.Errorf("%s: entry %d (%s): _pab %+v, text %v", path, e.Index, e.Request.URL, e.Pab, e.Response.Content.HasText())
		}
	}
	if n != requests || n == 0 {
		t.Errorf("%s: %d entries, the log has %d requests", path, n, requests)
	}
	devtoolsCheck(t, path)
}
