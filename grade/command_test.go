package grade

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pab-dev/pab/task"
)

// TestFilesOpenFieldErrors checks that every file of Files that is missing or not a regular
// file is a *FieldError naming its field, and that nothing is left open.
func TestFilesOpenFieldErrors(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "replay.jsonl")
	answer := filepath.Join(dir, "answer.txt")
	for _, p := range []string{log, answer} {
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		f             Files
		field, inText string
	}{
		{Files{Log: missing}, "Log", "no such file"},
		{Files{Log: dir}, "Log", dir + " is not a regular file"},
		{Files{Log: log, Answer: missing}, "Answer", "no such file"},
		{Files{Log: log, Answer: dir}, "Answer", dir + " is not a regular file"},
		{Files{Log: log, Answer: answer, GuardTrace: missing}, "GuardTrace", "no such file"},
		{Files{Log: log, GuardResult: dir}, "GuardResult", dir + " is not a regular file"},
	} {
		lf, a, err := tc.f.Open()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.inText) {
			t.Errorf("%+v: Open() = %v, want a FieldError on %s containing %q", tc.f, err, tc.field, tc.inText)
		}
		if lf != nil || a != nil {
			t.Errorf("%+v: Open returned a log or answer with the error", tc.f)
		}
		if tc.inText == "no such file" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%+v: %v does not wrap fs.ErrNotExist", tc.f, err)
		}
	}
	lf, a, err := Files{Log: log, Answer: answer}.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if a == nil || a.Text != "x" || a.File != answer {
		t.Errorf("answer = %+v, want the text x read from %s", a, answer)
	}
}

// TestJudgeOptionsValidate checks the judge settings' errors: a FieldError on the field
// that is wrong, with the message pab's flags print after the flag's name.
func TestJudgeOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o          JudgeOptions
		field, msg string
	}{
		{JudgeOptions{Samples: 0}, "Samples", "want 1 to 25, got 0"},
		{JudgeOptions{Samples: 26}, "Samples", "want 1 to 25, got 26"},
		{JudgeOptions{Samples: 1, JudgeConfig: JudgeConfig{Kind: "gpt"}}, "Kind", `want api, openai or cli, got "gpt"`},
		{JudgeOptions{Samples: 1, JudgeConfig: JudgeConfig{Kind: "cli", Timeout: -1}}, "Timeout", "want a positive duration (0 means the default, 2m), got -1ns"},
	} {
		err := tc.o.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || fe.Err.Error() != tc.msg || err.Error() != tc.field+": "+tc.msg {
			t.Errorf("%+v: Validate() = %v, want %s: %s", tc.o, err, tc.field, tc.msg)
		}
		if c, err := tc.o.Open(t.TempDir()); c != nil || err == nil {
			t.Errorf("%+v: Open succeeded on invalid options", tc.o)
		}
	}
	for _, k := range []string{"", "api", "Anthropic", "openai", "CLI"} {
		o := JudgeOptions{Samples: 25, JudgeConfig: JudgeConfig{Kind: k}}
		if err := o.Validate(); err != nil {
			t.Errorf("kind %q: %v", k, err)
		}
	}
	dir := t.TempDir()
	o := JudgeOptions{Samples: 1, JudgeConfig: JudgeConfig{Kind: "cli", Command: "cat"}}
	if c, err := o.Open(dir); err != nil || c.Dir != filepath.Join(dir, "judge") {
		t.Errorf("Open = %+v, %v; want a cache in %s/judge", c, err, dir)
	}
	o.NoCache = true
	if c, err := o.Open(dir); err != nil || c.Dir != "" {
		t.Errorf("Open with NoCache = %+v, %v; want no cache directory", c, err)
	}
}

// TestGradeFilesExamples grades the graded examples of docs/examples (the shipped tasks,
// their logs and answers, the stand-in judge's recorded replies) through Prepare and
// GradeFiles, as pab grade does, and compares the outcome with the result.json shipped
// next to them.
func TestGradeFilesExamples(t *testing.T) {
	t.Setenv("PAB_CACHE", t.TempDir())
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	repo := &task.Repo{Root: root}
	judgeCmd := filepath.Join(root, "docs", "examples", "judge.sh")
	for _, id := range []string{"books-sapiens-price", "archive-org-jobs", "lil-former-projects"} {
		for _, kind := range []string{"right", "wrong"} {
			t.Run(id+"/"+kind, func(t *testing.T) {
				dir := filepath.Join(root, "docs", "examples", id, kind)
				want, err := ReadResult(filepath.Join(dir, "result.json"))
				if err != nil {
					t.Fatal(err)
				}
				o, err := task.Open(id, repo, os.Stderr)
				if err != nil {
					t.Fatal(err)
				}
				defer o.Close()
				var warn strings.Builder
				p := Prepare(o, root, &warn)
				if p.Problem != nil || p.Grading == nil || p.Card == nil || len(p.Notes) > 0 {
					t.Fatalf("Prepare: problem %v, grading %v, card %v, notes %q", p.Problem, p.Grading != nil, p.Card != nil, p.Notes)
				}
				f := Files{Log: filepath.Join(dir, "replay.jsonl"), Answer: filepath.Join(dir, "answer.txt")}
				lf, answer, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				defer lf.Close()
				jo := JudgeOptions{Samples: 1, NoCache: true, JudgeConfig: JudgeConfig{Kind: "cli", Command: judgeCmd}}
				opened := 0
				res, err := p.GradeFiles(context.Background(), f, lf, answer, RunOptions{Samples: 1, Warn: &warn,
					OpenJudge: func() (*Cache, error) { opened++; return jo.Open(t.TempDir()) }})
				if err != nil {
					t.Fatal(err)
				}
				if opened != 1 {
					t.Errorf("the judge was opened %d times, want 1", opened)
				}
				if res.Status != want.Status || res.Passed != want.Passed || !reflect.DeepEqual(res.Score, want.Score) {
					t.Errorf("status %s passed %v score %v, want %s %v %v", res.Status, res.Passed, res.Score, want.Status, want.Passed, want.Score)
				}
				if !reflect.DeepEqual(res.Items, want.Items) {
					t.Errorf("items differ from %s/result.json:\n got %+v\nwant %+v", dir, res.Items, want.Items)
				}
				if res.Provenance == nil || res.Provenance.Recording != want.Provenance.Recording || res.Provenance.Grading != want.Provenance.Grading {
					t.Errorf("provenance %+v, want recording %s grading %s", res.Provenance, want.Provenance.Recording, want.Provenance.Grading)
				}
				if warn.Len() > 0 {
					t.Errorf("unexpected warnings: %s", warn.String())
				}
			})
		}
	}
}

// TestCalibrationRuns grades labelled runs of a shipped task as pab grade calibrate does:
// an answer graded by the stand-in judge (opened once, on first use), an answer file
// relative to the labels file, a result compared as graded; errors name the label's line.
func TestCalibrationRuns(t *testing.T) {
	t.Setenv("PAB_CACHE", t.TempDir())
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	repo := &task.Repo{Root: root}
	books := filepath.Join(root, "docs", "examples", "books-sapiens-price")
	right, err := os.ReadFile(filepath.Join(books, "right", "answer.txt"))
	if err != nil {
		t.Fatal(err)
	}
	labelsFile := filepath.Join(books, "labels.jsonl") // not read: paths are relative to it
	labels := []Label{
		{Task: "books-sapiens-price", Answer: string(right), Line: 1},
		{Task: "books-sapiens-price", AnswerFile: "wrong/answer.txt", Line: 2},
		{Task: "books-sapiens-price", Result: "right/result.json", Line: 3},
	}
	jo := JudgeOptions{Samples: 1, NoCache: true, JudgeConfig: JudgeConfig{Kind: "cli", Command: filepath.Join(root, "docs", "examples", "judge.sh")}}
	opened := 0
	open := func() (*Cache, error) { opened++; return jo.Open(t.TempDir()) }
	runs, err := CalibrationRuns(context.Background(), labels, labelsFile, repo, open, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || opened != 1 {
		t.Fatalf("%d runs, judge opened %d times; want 3 runs, 1 opening", len(runs), opened)
	}
	// The judge's verdicts on the price: right, then wrong (no log: trace items do not count).
	verdict := func(r *Result, id string) string {
		for _, it := range r.Items {
			if it.ID == id {
				return it.Result
			}
		}
		return "missing"
	}
	if v0, v1 := verdict(runs[0].Result, "price"), verdict(runs[1].Result, "price"); v0 != "pass" || v1 != "fail" {
		t.Errorf("price: right %s, wrong %s; want pass, fail", v0, v1)
	}
	if a := runs[1].Result.Answer; a == nil || a.File != filepath.Join(books, "wrong", "answer.txt") {
		t.Errorf("the answer file was not read relative to the labels file: %+v", a)
	}
	if runs[2].Result.Task != "books-sapiens-price" || !runs[2].Result.Passed {
		t.Errorf("result run: %+v", runs[2].Result)
	}
	for _, tc := range []struct {
		l    Label
		want string
	}{
		{Label{Task: "lil-former-projects", Result: "right/result.json", Line: 4}, labelsFile + ":4: right/result.json is a result of task books-sapiens-price, not lil-former-projects"},
		{Label{Task: "nosuch", Answer: "x", Line: 5}, labelsFile + `:5: no task "nosuch"`},
		{Label{Task: "books-sapiens-price", AnswerFile: "nope.txt", Line: 6}, labelsFile + ":6: answer: stat "},
	} {
		if _, err := CalibrationRuns(context.Background(), []Label{tc.l}, labelsFile, repo, open, 1, nil); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("label %+v: %v, want %q...", tc.l, err, tc.want)
		}
	}
	failing := func() (*Cache, error) { return nil, errors.New("no key") }
	if _, err := CalibrationRuns(context.Background(), labels[:1], labelsFile, repo, failing, 1, nil); err == nil || err.Error() != "judge: no key" {
		t.Errorf("a judge that cannot be opened: %v", err)
	}
}

// TestReportSourceCheck checks a shipped grading against its recording: its summary line,
// and the problems of an evidence entry the recording does not back.
func TestReportSourceCheck(t *testing.T) {
	t.Setenv("PAB_CACHE", t.TempDir())
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	o, err := task.Open("books-sapiens-price", &task.Repo{Root: root}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	gr, name, _, err := LoadTaskGrading(o.Target.Task, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if err := ReportSourceCheck(&out, &errOut, gr, name, o.Bundle); err != nil || errOut.Len() > 0 {
		t.Fatalf("ReportSourceCheck = %v, %s", err, errOut.String())
	}
	want := "tasks/books-sapiens-price/grading.yaml: valid; 2 require, 1 checks, 2 trace; 1 of 1 evidence entries found in the recording\n"
	if out.String() != want {
		t.Errorf("out %q, want %q", out.String(), want)
	}
	for _, q := range gr.Require {
		if q.Evidence != nil {
			q.Evidence.Text = "text that is on no recorded page"
		}
	}
	out.Reset()
	err = ReportSourceCheck(&out, &errOut, gr, name, o.Bundle)
	if err == nil || err.Error() != name+": 1 of 1 evidence entries are not backed by the recording" || errOut.Len() == 0 || out.Len() > 0 {
		t.Errorf("ReportSourceCheck with an evidence text not recorded = %v; stderr %q, stdout %q", err, errOut.String(), out.String())
	}
}
