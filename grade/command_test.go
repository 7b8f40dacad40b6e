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
				defer o.Bundle.Close()
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
