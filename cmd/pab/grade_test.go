package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pab-dev/pab/grade"
)

// exampleJudge is the stand-in judge of docs/examples (replies written by a person, looked up
// by the prompt's hash), relative to the repository root.
const exampleJudge = "docs/examples/judge.sh"

// runPabDir runs pab with the working directory dir and returns stdout, stderr, exit code.
func runPabDir(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := pabCmd(args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return stdout.String(), stderr.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), 0
}

func readResult(t *testing.T, path string) *grade.Result {
	t.Helper()
	r, err := grade.ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGradeExamplesUpToDate grades the committed examples again (real replay logs written
// through headless Chromium by scripts/examples.sh) and checks that the output is the
// committed result.json and report.html byte for byte, with the expected scores.
func TestGradeExamplesUpToDate(t *testing.T) {
	want := map[string]float64{"right": 1, "wrong": 0}
	dirs, _ := filepath.Glob(filepath.Join(repoRoot, "docs/examples/*/*/answer.txt"))
	if len(dirs) != 6 {
		t.Fatalf("want 6 example runs (3 tasks × right, wrong), found %d", len(dirs))
	}
	for _, a := range dirs {
		dir := filepath.Dir(a)
		run := filepath.Base(dir)
		task := filepath.Base(filepath.Dir(dir))
		rel, _ := filepath.Rel(repoRoot, dir)
		t.Run(task+"/"+run, func(t *testing.T) {
			out := t.TempDir()
			stdout, stderr, code := runPabDir(t, repoRoot, "grade", task, "--log", rel+"/replay.jsonl", "--answer", rel+"/answer.txt",
				"--out", out, "--judge", "cli", "--judge-cmd", exampleJudge, "--no-cache")
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			r := readResult(t, filepath.Join(out, "result.json"))
			if r.Status != grade.StatusScored || r.Score == nil || *r.Score != want[run] {
				t.Errorf("status %s score %v, want %v", r.Status, r.Score, want[run])
			}
			if len(r.Pages.Opened) == 0 {
				t.Error("no pages opened")
			}
			for _, f := range []string{"result.json", "report.html"} {
				got, _ := os.ReadFile(filepath.Join(out, f))
				committed, _ := os.ReadFile(filepath.Join(dir, f))
				if f == "result.json" {
					// The build that graded (provenance.pab) changes with every commit.
					got, committed = withoutBuild(t, got), withoutBuild(t, committed)
				}
				if !bytes.Equal(got, committed) {
					t.Errorf("%s/%s differs from a fresh grading: run scripts/examples.sh", rel, f)
				}
			}
		})
	}
}

// withoutBuild is a result.json with its provenance's pab build left out (re-encoded).
func withoutBuild(t *testing.T, data []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	if p, ok := m["provenance"].(map[string]any); ok {
		delete(p, "pab")
	} else {
		t.Error("result.json has no provenance")
	}
	out, _ := json.MarshalIndent(m, "", "  ")
	return out
}

func TestGradeCheck(t *testing.T) {
	for _, id := range []string{"books-sapiens-price", "archive-org-jobs", "lil-former-projects"} {
		stdout, stderr, code := runPab(t, "grade", "--check", id)
		if code != 0 || !strings.Contains(stdout, "evidence entries found in the recording") {
			t.Errorf("%s: exit %d\n%s%s", id, code, stdout, stderr)
		}
	}
	// A source whose text the recorded page does not hold, and one not recorded at all.
	root := newTestRepo(t)
	copyTask(t, "books-sapiens-price", root)
	gpath := filepath.Join(root, "tasks/books-sapiens-price/grading.yaml")
	writeFile(t, gpath, `extract:
  price: { type: money, description: the price }
require:
  - field: price
    equals: 54.23
    source: { url: "http://books.toscrape.com/", text: "£99.99" }
  - field: price
    min: 1
    source: { url: "http://books.toscrape.com/nowhere.html", text: "£54.23" }
  - field: price
    max: 100
    source: { url: "https://books.toscrape.com/", text: "sapiens: a brief   history" }
`)
	_, stderr, code := runIn(t, root, "grade", "--check", "books-sapiens-price")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	for _, want := range []string{
		`tasks/books-sapiens-price/grading.yaml:6: require on price: the recorded response for http://books.toscrape.com/ (1 exchange(s), status 200) does not hold the text "£99.99"`,
		"tasks/books-sapiens-price/grading.yaml:9: require on price: evidence url http://books.toscrape.com/nowhere.html is not in the recording",
		"2 of 3 evidence entries are not backed by the recording",
		// source: is evidence's old name: read the same, one warning per entry
		"pab: warning: tasks/books-sapiens-price/grading.yaml:9: require.source is the old name of require.evidence",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// A task without grading.yaml.
	os.Remove(gpath)
	if _, stderr, code := runIn(t, root, "grade", "--check", "books-sapiens-price"); code != 1 || !strings.Contains(stderr, "has no grading.yaml") {
		t.Errorf("no grading: exit %d %s", code, stderr)
	}
}

// copyTask copies a task's task.yaml, grading.yaml and recording into another repository.
func copyTask(t *testing.T, id, root string) {
	t.Helper()
	src := filepath.Join(repoRoot, "tasks", id)
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(root, "tasks", id, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeJudge writes a CLI judge script that counts its calls in a file and answers an
// extraction prompt with extract and a check prompt with check (or fails with exit 7 when
// both are empty).
func fakeJudge(t *testing.T, extract, check string) (cmd, counter string) {
	t.Helper()
	dir := t.TempDir()
	counter = filepath.Join(dir, "calls")
	script := filepath.Join(dir, "judge.sh")
	body := "#!/bin/sh\nprompt=$(cat)\necho call >> '" + counter + "'\n"
	if extract == "" && check == "" {
		body += "echo 'model overloaded' >&2\nexit 7\n"
	} else {
		body += "case \"$prompt\" in\n*'Extract these fields'*) cat <<'EOF'\n" + extract + "\nEOF\n;;\n*) cat <<'EOF'\n" + check + "\nEOF\n;;\nesac\n"
	}
	writeFile(t, script, body)
	os.Chmod(script, 0o755)
	return script, counter
}

func countCalls(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "call")
}

func TestGradeMistakesAndFailures(t *testing.T) {
	ex := filepath.Join(repoRoot, "docs/examples/books-sapiens-price/right")
	logFile, answer := filepath.Join(ex, "replay.jsonl"), filepath.Join(ex, "answer.txt")

	// User mistakes: one line, exit 1, nothing written.
	out := t.TempDir()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"grade", "books-sapiens-price", "--out", out}, "--log is required"},
		{[]string{"grade", "books-sapiens-price", "--log", "/nonexistent.jsonl", "--out", out}, "--log: stat /nonexistent.jsonl: no such file or directory"},
		{[]string{"grade", "books-sapiens-price", "--log", logFile, "--answer", "/nonexistent.txt", "--out", out}, "--answer: stat /nonexistent.txt"},
		{[]string{"grade", "no-such-task", "--log", logFile, "--out", out}, "no-such-task"},
		{[]string{"grade", "books-sapiens-price", "--log", logFile, "--answer", answer, "--samples", "0", "--out", out}, "--samples: want 1 to 25"},
		{[]string{"grade", "books-sapiens-price", "--log", logFile, "--answer", answer, "--judge", "foo", "--out", out}, `--judge: want api, openai or cli, got "foo"`},
		{[]string{"grade", "books-sapiens-price", "--log", logFile, "--answer", answer, "--judge-timeout", "-1s", "--out", out}, "--judge-timeout: want a positive duration"},
		{[]string{"grade", "books-sapiens-price", "--log", logFile, "--answer", answer, "--judge", "openai", "--out", out}, "model"},
		{[]string{"grade", "books-sapiens-price", "--log", fifo, "--out", out}, "is not a regular file"},
	} {
		_, stderr, code := runPab(t, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "goroutine") {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
	if des, _ := os.ReadDir(out); len(des) != 0 {
		t.Errorf("a mistake wrote files: %v", des)
	}

	// A judge that fails: both files written with a note, exit 1.
	judge, calls := fakeJudge(t, "", "")
	stdout, stderr, code := runPab(t, "grade", "books-sapiens-price", "--log", logFile, "--answer", answer, "--out", out, "--judge", "cli", "--judge-cmd", judge)
	if code != 1 {
		t.Fatalf("failing judge: exit %d\n%s%s", code, stdout, stderr)
	}
	r := readResult(t, filepath.Join(out, "result.json"))
	if r.Status != grade.StatusError || r.Score != nil || !strings.Contains(strings.Join(r.Notes, " "), "model overloaded") {
		t.Errorf("failing judge result: %s %v %v", r.Status, r.Score, r.Notes)
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Error(err)
	}
	if countCalls(calls) != 2 { // extraction and the one check, each failed once
		t.Errorf("judge called %d times", countCalls(calls))
	}

	// The api judge without a key: a mistake, said before anything is written.
	out3 := t.TempDir()
	cmd := pabCmd("grade", "books-sapiens-price", "--log", logFile, "--answer", answer, "--out", out3, "--judge", "api")
	cmd.Env = append(cmd.Env, "ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=")
	var eb bytes.Buffer
	cmd.Stderr = &eb
	if err := cmd.Run(); err == nil || !strings.Contains(eb.String(), "ANTHROPIC_API_KEY") {
		t.Errorf("api judge without key: %v %s", err, eb.String())
	}
	if des, _ := os.ReadDir(out3); len(des) != 0 {
		t.Errorf("api judge without key wrote %v", des)
	}

	// An invalid grading.yaml: files written, status error naming the line, exit 1.
	root := newTestRepo(t)
	copyTask(t, "books-sapiens-price", root)
	writeFile(t, filepath.Join(root, "tasks/books-sapiens-price/grading.yaml"), "checks:\n  - id: a\n    question: q\n    weight: lots\n")
	out2 := t.TempDir()
	_, stderr, code = runIn(t, root, "grade", "books-sapiens-price", "--log", logFile, "--answer", answer, "--out", out2)
	r = readResult(t, filepath.Join(out2, "result.json"))
	if code != 1 || r.Status != grade.StatusError || !strings.Contains(r.Notes[0], "grading.yaml:4: field weight: want a number") || len(r.Pages.Opened) == 0 {
		t.Errorf("invalid grading: exit %d %s %v\n%s", code, r.Status, r.Notes, stderr)
	}

	// Without --answer: not scored, pages listed, exit 0, no judge call.
	judge, calls = fakeJudge(t, `{"price": "£54.23", "title": "Sapiens"}`, `{"answer":"yes","reason":"r"}`)
	_, stderr, code = runPab(t, "grade", "books-sapiens-price", "--log", logFile, "--out", out, "--judge", "cli", "--judge-cmd", judge)
	r = readResult(t, filepath.Join(out, "result.json"))
	if code != 0 || r.Status != grade.StatusNotScored || len(r.Pages.Opened) != 1 || countCalls(calls) != 0 {
		t.Errorf("no answer: exit %d %s pages %d calls %d %s", code, r.Status, len(r.Pages.Opened), countCalls(calls), stderr)
	}
}

// TestGradeCachedRegrade: the second grading of the same run asks the judge nothing and
// writes the same result.json.
func TestGradeCachedRegrade(t *testing.T) {
	ex := filepath.Join(repoRoot, "docs/examples/lil-former-projects/right")
	args := []string{"grade", "lil-former-projects", "--log", filepath.Join(ex, "replay.jsonl"), "--answer", filepath.Join(ex, "answer.txt"), "--judge", "cli"}

	// A reply with keys that are not fields is refused (asked twice, then an error).
	judge, calls := fakeJudge(t, `{"projects": 9, "stack_life": true, "confidence": "high"}`, `{"answer": "yes", "reason": "all there"}`)
	out := t.TempDir()
	_, _, code := runPab(t, append(args, "--out", out, "--judge-cmd", judge)...)
	r := readResult(t, filepath.Join(out, "result.json"))
	if code != 1 || !strings.Contains(strings.Join(r.Notes, " "), `keys that are not fields: "confidence"`) || countCalls(calls) != 4 {
		t.Fatalf("extra keys: exit %d calls %d %v", code, countCalls(calls), r.Notes)
	}

	judge, calls = fakeJudge(t, `{"projects": 9, "stack_life": true}`, `{"answer": "yes", "reason": "all there"}`)
	_, stderr, code := runPab(t, append(args, "--out", out, "--judge-cmd", judge, "--samples", "3")...)
	r = readResult(t, filepath.Join(out, "result.json"))
	if code != 0 || r.Status != grade.StatusScored || *r.Score != 1 || r.Judge.Calls != 9 {
		t.Fatalf("first grading: exit %d %+v %v\n%s", code, r.Judge, r.Notes, stderr)
	}
	first, _ := os.ReadFile(filepath.Join(out, "result.json"))
	n := countCalls(calls)
	out2 := t.TempDir()
	stdout, _, _ := runPab(t, append(args, "--out", out2, "--judge-cmd", judge, "--samples", "3")...)
	if countCalls(calls) != n || n != 9 || !strings.Contains(stdout, "9 calls, 9 answered from the cache") {
		t.Errorf("judge calls %d then %d: the regrade was not answered from the cache\n%s", n, countCalls(calls), stdout)
	}
	second, _ := os.ReadFile(filepath.Join(out2, "result.json"))
	if !bytes.Equal(first, second) {
		t.Errorf("regrade differs:\n%s\n%s", first, second)
	}
}

func TestGradeCalibrate(t *testing.T) {
	dir := t.TempDir()
	books := filepath.Join(repoRoot, "docs/examples/books-sapiens-price")
	labels := filepath.Join(dir, "labels.jsonl")
	right, _ := os.ReadFile(filepath.Join(books, "right/answer.txt"))
	rightJSON, _ := json.Marshal(string(right))
	writeFile(t, labels, strings.Join([]string{
		`{"task": "books-sapiens-price", "answer": ` + string(rightJSON) + `, "verdicts": {"in_pounds": true, "price": true}}`,
		`{"task": "books-sapiens-price", "answer_file": "` + filepath.Join(books, "wrong/answer.txt") + `", "verdicts": {"in_pounds": "no", "price": "fail"}}`,
		`{"task": "books-sapiens-price", "result": "` + filepath.Join(books, "right/result.json") + `", "verdicts": {"in_pounds": false}}`,
		"",
	}, "\n"))
	cmd := pabCmd("grade", "calibrate", "--labels", labels, "--judge", "cli", "--judge-cmd", exampleJudge, "--no-cache", "--json", filepath.Join(dir, "cal.json"))
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var cal grade.Calibration
	data, _ := os.ReadFile(filepath.Join(dir, "cal.json"))
	if err := json.Unmarshal(data, &cal); err != nil {
		t.Fatal(err)
	}
	got := map[string]*grade.Agreement{}
	for _, a := range cal.Items {
		got[a.ID] = a
	}
	// in_pounds: person yes/judge yes, person no/judge no, person no/judge yes: 2 of 3.
	if a := got["in_pounds"]; a == nil || a.N != 3 || a.Agree != 2 || a.Percent != 66.7 || a.Kappa == nil || *a.Kappa != 0.4 {
		t.Errorf("in_pounds %+v", a)
	}
	// price: both agree on both runs: kappa 1.
	if a := got["price"]; a == nil || a.N != 2 || a.Agree != 2 || a.Kappa == nil || *a.Kappa != 1 {
		t.Errorf("price %+v", a)
	}
	if !strings.Contains(string(out), "in_pounds") || !strings.Contains(string(out), "66.7%") {
		t.Errorf("table:\n%s", out)
	}
	// A result of another task is refused.
	writeFile(t, labels, `{"task": "lil-former-projects", "result": "`+filepath.Join(books, "right/result.json")+`", "verdicts": {"in_pounds": true}}`+"\n")
	if _, stderr, code := runPab(t, "grade", "calibrate", "--labels", labels); code != 1 || !strings.Contains(stderr, "is a result of task books-sapiens-price, not lil-former-projects") {
		t.Errorf("result of another task: exit %d %s", code, stderr)
	}
	// A bad labels line names the file and line.
	writeFile(t, labels, `{"task": "books-sapiens-price", "answer": "x", "verdicts": {"in_pounds": "perhaps"}}`+"\n")
	_, stderr, code := runPab(t, "grade", "calibrate", "--labels", labels)
	if code != 1 || !strings.Contains(stderr, labels+`:1: verdict in_pounds: want true or false`) {
		t.Errorf("bad label: exit %d %s", code, stderr)
	}
}

// TestImportChecksGrading: pab import checks the task's grading.yaml against the recording.
func TestImportChecksGrading(t *testing.T) {
	root := newTestRepo(t)
	writeFile(t, filepath.Join(root, "tasks/books/grading.yaml"), `extract:
  price: { type: money, description: the price }
require:
  - field: price
    equals: 54.23
    source: { url: "http://books.toscrape.com/", text: "£12.34" }
`)
	_, stderr, code := runIn(t, root, "import", "--task", "books", filepath.Join(repoRoot, "testdata/sites/books.toscrape.warc"), "--no-check")
	if code != 0 {
		t.Fatalf("import --no-check: exit %d %s", code, stderr)
	}
	stdout, stderr, code := runIn(t, root, "import", "--task", "books", filepath.Join(repoRoot, "testdata/sites/books.toscrape.warc"), "--replace")
	if code != 1 || !strings.Contains(stderr, `tasks/books/grading.yaml:6: require on price: the recorded response for http://books.toscrape.com/`) || !strings.Contains(stderr, "the recording was imported") {
		t.Errorf("import with a bad source: exit %d\n%s\n%s", code, stdout, stderr)
	}
	writeFile(t, filepath.Join(root, "tasks/books/grading.yaml"), `extract:
  price: { type: money, description: the price }
require:
  - field: price
    equals: 54.23
    source: { url: "http://books.toscrape.com/", text: "£54.23" }
`)
	stdout, stderr, code = runIn(t, root, "import", "--task", "books", filepath.Join(repoRoot, "testdata/sites/books.toscrape.warc"), "--replace")
	if code != 0 || !strings.Contains(stdout, "1 of 1 evidence entries found in the recording") {
		t.Errorf("import with a good source: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
