package grade

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// This file is pab grade's pipeline, apart from its flags: the judge settings, the files
// one run is graded from, the printed summary, grading.yaml's check against the recording
// and the calibration runs of labelled answers.

// MaxSamples is the most Options.Samples a judge setting may ask for.
const MaxSamples = 25

// ValidSamples checks a number of judge samples: 1 to MaxSamples, else a *FieldError on
// field "Samples".
func ValidSamples(n int) error {
	if n < 1 || n > MaxSamples {
		return fieldErrorf("Samples", "want 1 to 25, got %d", n)
	}
	return nil
}

// JudgeOptions are the judge settings of pab grade, pab grade calibrate and pab run: the
// judge (JudgeConfig), how many times each question is asked (Samples, 1 to MaxSamples)
// and whether replies are cached (NoCache: never).
type JudgeOptions struct {
	JudgeConfig
	Samples int
	NoCache bool
}

// Validate checks what needs no judge to be built. Errors are *FieldError naming Samples,
// Kind or Timeout.
func (o *JudgeOptions) Validate() error {
	if err := ValidSamples(o.Samples); err != nil {
		return err
	}
	switch strings.ToLower(o.Kind) {
	case "", "api", "anthropic", "openai", "cli":
	default:
		return fieldErrorf("Kind", "want api, openai or cli, got %q", o.Kind)
	}
	if o.Timeout < 0 {
		return fieldErrorf("Timeout", "want a positive duration (0 means the default, 2m), got %v", o.Timeout)
	}
	return nil
}

// Open validates o and builds the cached judge (NewJudge); the cache is cacheDir/judge
// unless NoCache. Errors are Validate's or NewJudge's.
func (o *JudgeOptions) Open(cacheDir string) (*Cache, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	jd, err := NewJudge(o.JudgeConfig)
	if err != nil {
		return nil, err
	}
	c := &Cache{Judge: jd}
	if !o.NoCache {
		c.Dir = filepath.Join(cacheDir, "judge")
	}
	return c, nil
}

// Files are the files one run of pab grade is graded from: the replay log (required), the
// answer ("" none) and pab guard's trace and result (""; default: GuardTraceFile and
// GuardResultFile beside the log, used only by a grading with a guard section).
type Files struct {
	Log, Answer             string
	GuardTrace, GuardResult string
}

// Open checks that the files named exist as regular files (stat first: opening a FIFO
// would block), opens the log and reads the answer (nil when f.Answer is ""). The caller
// closes the log. Errors are *FieldError naming Log, Answer, GuardTrace or GuardResult.
func (f Files) Open() (*os.File, *AnswerInfo, error) {
	if fi, err := os.Stat(f.Log); err != nil {
		return nil, nil, &FieldError{Field: "Log", Err: err}
	} else if !fi.Mode().IsRegular() {
		return nil, nil, fieldErrorf("Log", "%s is not a regular file", f.Log)
	}
	lf, err := os.Open(f.Log)
	if err != nil {
		return nil, nil, &FieldError{Field: "Log", Err: err}
	}
	var answer *AnswerInfo
	if f.Answer != "" {
		if answer, err = readAnswer(f.Answer); err != nil {
			lf.Close()
			return nil, nil, &FieldError{Field: "Answer", Err: err}
		}
	}
	for _, g := range []struct{ field, path string }{{"GuardTrace", f.GuardTrace}, {"GuardResult", f.GuardResult}} {
		if g.path == "" {
			continue
		}
		if fi, err := os.Stat(g.path); err != nil {
			lf.Close()
			return nil, nil, &FieldError{Field: g.field, Err: err}
		} else if !fi.Mode().IsRegular() {
			lf.Close()
			return nil, nil, fieldErrorf(g.field, "%s is not a regular file", g.path)
		}
	}
	return lf, answer, nil
}

// RunOptions are how GradeFiles grades: OpenJudge opens the judge when the grading asks it
// anything (its error is returned), Samples as Options.Samples, and Warn receives
// "pab grade:" lines (nil: discarded).
type RunOptions struct {
	OpenJudge func() (*Cache, error)
	Samples   int
	Warn      io.Writer
}

// GradeFiles grades one run of p as pab grade does: the log read from log once, line by
// line (GradeLog; f.Log names it), the answer from Files.Open, the guard's files when the
// grading has a guard section (a note on o.Warn when they are given and it has none). The
// error is the judge's setup error or GradeLog's read error; a failed grading is a Result
// with status error.
func (p *Prepared) GradeFiles(ctx context.Context, f Files, log io.Reader, answer *AnswerInfo, o RunOptions) (*Result, error) {
	warn := o.Warn
	if warn == nil {
		warn = io.Discard
	}
	in := p.Input(answer)
	in.RecordedHosts = RecordedHosts(p.bundle)
	if in.Grading != nil && in.Grading.Guard != nil {
		tr, rs := f.GuardTrace, f.GuardResult
		if tr == "" {
			tr = filepath.Join(filepath.Dir(f.Log), GuardTraceFile)
		}
		if rs == "" {
			rs = filepath.Join(filepath.Dir(f.Log), GuardResultFile)
		}
		in.Guard, in.GuardError = ReadGuardRun(tr, rs)
	} else if f.GuardTrace != "" || f.GuardResult != "" {
		fmt.Fprintln(warn, "pab grade: --guard-trace and --guard-result are not used: the task's grading has no guard section")
	}
	var judge *Cache
	if p.Problem == nil && NeedsJudge(in.Grading, answer) {
		// A judge that cannot be set up (no key, no model) is a mistake on the command
		// line: said before anything is written.
		var err error
		if judge, err = o.OpenJudge(); err != nil {
			return nil, err
		}
	}
	// The log is read once, line by line, while grading: memory does not grow with it.
	return GradeLog(ctx, in, log, f.Log, Options{Judge: judge, Samples: o.Samples})
}

// Print writes pab grade's summary of r to w: the score or status, one line per item, the
// pages opened, the judge's calls, and the two files written into outDir.
func (r *Result) Print(w io.Writer, outDir string) {
	switch r.Status {
	case StatusScored:
		verdict := "FAIL"
		if r.Passed {
			verdict = "PASS"
		}
		fmt.Fprintf(w, "%s: score %.3g (%s)\n", r.Task, *r.Score, verdict)
	default:
		fmt.Fprintf(w, "%s: %s\n", r.Task, strings.ReplaceAll(r.Status, "_", " "))
	}
	for _, it := range r.Items {
		fmt.Fprintf(w, "  %-7s %-7s %s: %s\n", it.Result, it.Kind, it.ID, it.Reason)
	}
	fmt.Fprintf(w, "pages opened: %d, not found: %d\n", len(r.Pages.Opened), len(r.Pages.NotFound))
	if j := r.Judge; j != nil {
		fmt.Fprintf(w, "judge %s: %d calls, %d answered from the cache\n", j.Name, j.Calls, j.Cached)
	}
	fmt.Fprintf(w, "wrote %s and %s\n", filepath.Join(outDir, "result.json"), filepath.Join(outDir, "report.html"))
}

// ReportSourceCheck runs CheckSources on gr (the grading file name) against b and prints its
// outcome: each problem on errOut, or a one-line summary of the grading on out. Problems
// are an error counting them.
func ReportSourceCheck(out, errOut io.Writer, gr *Grading, name string, b *recording.Bundle) error {
	probs := CheckSources(gr, b)
	n := 0
	for _, q := range gr.Require {
		if q.Evidence != nil {
			n++
		}
	}
	if len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintln(errOut, p)
		}
		return fmt.Errorf("%s: %d of %d evidence entries are not backed by the recording", name, len(probs), n)
	}
	guardItems := ""
	if gs := gr.Guard; gs != nil {
		guardItems = fmt.Sprintf("; guard (%s, ends %s): %d required fields, %d uploads, %d forbidden", gs.Mode, gs.EndState,
			len(gs.RequiredFields), len(gs.Uploads), len(gs.Forbid))
	}
	fmt.Fprintf(out, "%s: valid; %d require, %d checks, %d trace%s; %d of %d evidence entries found in the recording\n",
		name, len(gr.Require), len(gr.Checks), len(gr.Trace), guardItems, n, n)
	return nil
}

// CalibrationRuns grades the labelled runs of labelsFile (read by ReadLabels) for
// Calibrate: a label with a result is compared as graded; the others are graded with their
// task of repo (card and grading read once per task, warnings on warn) by the judge that
// openJudge opens on first use. Answer and result paths are relative to the labels file.
// Errors name the label's file and line ("FILE:LINE: ..."), or are "judge: ..." when the
// judge cannot be opened.
func CalibrationRuns(ctx context.Context, labels []Label, labelsFile string, repo *task.Repo,
	openJudge func() (*Cache, error), samples int, warn io.Writer) ([]CalibrationRun, error) {
	type taskInfo struct {
		card    *task.Card
		grading *Grading
		file    string
	}
	tasks := map[string]*taskInfo{}
	var judge *Cache
	var runs []CalibrationRun
	base := filepath.Dir(labelsFile)
	for _, l := range labels {
		where := fmt.Sprintf("%s:%d", labelsFile, l.Line)
		if l.Result != "" {
			p := l.Result
			if !filepath.IsAbs(p) {
				p = filepath.Join(base, p)
			}
			res, err := ReadResult(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if res.Task != l.Task {
				return nil, fmt.Errorf("%s: %s is a result of task %s, not %s", where, l.Result, res.Task, l.Task)
			}
			runs = append(runs, CalibrationRun{Label: l, Result: res})
			continue
		}
		ti := tasks[l.Task]
		if ti == nil {
			t, err := repo.Task(l.Task)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			card, err := t.Card()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			gr, name, _, err := LoadTaskGrading(t, warn)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if gr == nil {
				return nil, fmt.Errorf("%s: task %s has no grading.yaml", where, l.Task)
			}
			ti = &taskInfo{card: card, grading: gr, file: name}
			tasks[l.Task] = ti
		}
		var answer *AnswerInfo
		if l.AnswerFile != "" {
			p := l.AnswerFile
			if !filepath.IsAbs(p) {
				p = filepath.Join(base, p)
			}
			var err error
			if answer, err = ReadAnswer(p); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		} else {
			answer = AnswerFromBytes([]byte(l.Answer))
		}
		if judge == nil {
			var err error
			if judge, err = openJudge(); err != nil {
				return nil, fmt.Errorf("judge: %w", err)
			}
		}
		in := Input{Task: l.Task, Title: ti.card.Title, Prompt: ti.card.Prompt, Grading: ti.grading, GradingFile: ti.file, Answer: answer}
		res := Grade(ctx, in, Options{Judge: judge, Samples: samples})
		runs = append(runs, CalibrationRun{Label: l, Result: res})
	}
	return runs, nil
}
