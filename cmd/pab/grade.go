//go:build !pab_lite

package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/warc"
)

// errGradeFailed makes pab exit 1 after the result files were written and the reason printed.
var errGradeFailed = errors.New("grading failed (see result.json)")

// judgeFlags are the flags that pick and configure the LLM judge.
type judgeFlags struct {
	kind, model, fallback, baseURL, command string
	timeout                                 time.Duration
	samples                                 int
	noCache                                 bool
}

func (j *judgeFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&j.kind, "judge", "", "judge: api (Anthropic Messages API), openai (any OpenAI-compatible chat API) or cli (a command reading the prompt on stdin); default api when ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is set, else cli")
	f.StringVar(&j.model, "model", "", "judge model (api default claude-opus-5-5; openai needs one, or OPENAI_MODEL)")
	f.StringVar(&j.fallback, "fallback-model", "", `api: model re-run when the main one declines or stays overloaded ("none" to disable)`)
	f.StringVar(&j.baseURL, "base-url", "", "api/openai: API base URL (default ANTHROPIC_BASE_URL / OPENAI_BASE_URL, else the provider's)")
	f.StringVar(&j.command, "judge-cmd", "", `cli: command run with sh -c, prompt on stdin, answer on stdout (default "claude -p")`)
	f.DurationVar(&j.timeout, "judge-timeout", 2*time.Minute, "time limit of one judge call")
	f.IntVar(&j.samples, "samples", 1, "ask every question N times and take the majority")
	f.BoolVar(&j.noCache, "no-cache", false, "ask the judge even when the same prompt was answered before")
}

// validate checks the judge flags that need no judge to be built.
func (j *judgeFlags) validate() error {
	if j.samples < 1 || j.samples > 25 {
		return fmt.Errorf("--samples: want 1 to 25, got %d", j.samples)
	}
	switch strings.ToLower(j.kind) {
	case "", "api", "anthropic", "openai", "cli":
	default:
		return fmt.Errorf("--judge: want api, openai or cli, got %q", j.kind)
	}
	if j.timeout < 0 {
		return fmt.Errorf("--judge-timeout: want a positive duration (0 means the default, 2m), got %v", j.timeout)
	}
	return nil
}

// open builds the cached judge; the cache lives in the repository's cache directory.
func (j *judgeFlags) open(repo *task.Repo) (*grade.Cache, error) {
	if err := j.validate(); err != nil {
		return nil, err
	}
	jd, err := grade.NewJudge(grade.JudgeConfig{
		Kind: j.kind, Model: j.model, Fallback: j.fallback, BaseURL: j.baseURL,
		Command: j.command, Timeout: j.timeout,
	})
	if err != nil {
		return nil, err
	}
	c := &grade.Cache{Judge: jd}
	if !j.noCache {
		c.Dir = filepath.Join(repo.CacheDir(), "judge")
	}
	return c, nil
}

func newGradeCmd(g *globalFlags) *cobra.Command {
	var (
		logFile, answerFile, outDir string
		guardTrace, guardResult     string
		check                       bool
		jf                          judgeFlags
	)
	cmd := &cobra.Command{
		Use:   "grade TARGET --log REPLAY.jsonl [--answer FILE] [--out DIR]",
		Short: "Score an agent run from its answer and its replay log (result.json, report.html)",
		Long: `grade scores one agent run of a task: the agent's answer (--answer) and the log
that pab replay --log wrote while the agent browsed (--log). The task's
grading.yaml says how (docs/grading.md): fields an LLM judge extracts from the
answer and pab compares, yes/no checks the judge answers, and requests the agent
must or must not have made.

It writes result.json and report.html into --out (default: the log's directory),
every time. Without --answer (when the grading reads the answer: require or
checks), or for a task without grading.yaml, nothing is scored but the pages the
agent opened are listed. Judge replies are cached, so
grading the same run again is free and gives the same result.

A grading with a guard section (the apply-* tasks) grades a run made through pab
guard from the guard's trace and result envelope: --guard-trace and
--guard-result, by default guard.trace.jsonl and guard.result.json in the log's
directory (where pab run --guard writes them). No answer is needed for it.

result.json says what produced it (provenance): the recording's content hash,
grading.yaml's sha256, the hash of the rule files in effect and this build's
version and VCS revision. A log whose header line names another recording than
the one graded with gets one warning line on stderr (and a note).

The log is read once, line by line, in bounded memory. A line that cannot be
read fails closed: a must_not entry it could be is an error, and the run is not
scored.

Exit status: 0 when the run was graded (whatever the score), 1 when grading
failed (the judge failed, grading.yaml is invalid, the log could not be read);
the files are written either way.

--check validates grading.yaml against the recording instead: every require
source URL is recorded and its response holds the source text.`,
		Example: `  pab grade books-sapiens-price --log runs/1/replay.jsonl --answer runs/1/answer.txt
  pab grade books-sapiens-price --log replay.jsonl --answer answer.txt --judge openai \
      --base-url http://127.0.0.1:11434/v1 --model qwen3:32b
  pab grade books-sapiens-price --log replay.jsonl --answer answer.txt --judge cli --judge-cmd 'claude -p'
  pab grade --check books-sapiens-price`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if check {
				return runGradeCheck(cmd, g, args[0])
			}
			if logFile == "" {
				return fmt.Errorf("grade: --log is required (the JSON Lines file pab replay --log wrote)")
			}
			if outDir == "" {
				outDir = filepath.Dir(logFile)
			}
			return runGrade(cmd, g, args[0], gradeFiles{log: logFile, answer: answerFile, out: outDir,
				guardTrace: guardTrace, guardResult: guardResult}, &jf)
		},
	}
	cmd.Flags().StringVar(&logFile, "log", "", "the replay log of the run (pab replay --log)")
	cmd.Flags().StringVar(&answerFile, "answer", "", "the agent's answer (a text file)")
	cmd.Flags().StringVar(&outDir, "out", "", "directory for result.json and report.html (default: the log's directory)")
	cmd.Flags().BoolVar(&check, "check", false, "validate grading.yaml against the recording and exit")
	cmd.Flags().StringVar(&guardTrace, "guard-trace", "", "pab guard's trace of the run, for a grading with a guard section (default: guard.trace.jsonl in the log's directory)")
	cmd.Flags().StringVar(&guardResult, "guard-result", "", "pab guard's result envelope of the run (default: guard.result.json in the log's directory)")
	jf.add(cmd)
	cmd.AddCommand(newCalibrateCmd(g))
	return cmd
}

// gradingOf loads the task's grading.yaml; (nil, "", nil) when the target is no task or the
// task has none. Its warnings (grade.Grading.Warnings) go to warn, one line each (nil:
// not printed).
func gradingOf(t *task.Task, warn io.Writer) (*grade.Grading, string, error) {
	gr, name, _, err := gradingWithHash(t, warn)
	return gr, name, err
}

// gradingWithHash is gradingOf, also returning the sha256 of the bytes parsed (empty when
// the file could not be read).
func gradingWithHash(t *task.Task, warn io.Writer) (*grade.Grading, string, string, error) {
	if t == nil || !t.HasGrading() {
		return nil, "", "", nil
	}
	path := t.GradingPath()
	name := path
	if rel, ok := pathx.Rel(t.Repo.Root, path); ok {
		name = rel
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, name, "", err
	}
	gr, err := grade.ParseGrading(name, data)
	if gr != nil && warn != nil {
		for _, w := range gr.Warnings {
			fmt.Fprintln(warn, "pab: warning:", w)
		}
	}
	return gr, name, grade.HashBytes(data), err
}

// provenance is what produced a grading of s (grade.Provenance): the recording's hash, the
// grading file's (gradingSHA, from gradingWithHash), the rules in effect and this build.
// What cannot be hashed is left empty and said in the returned notes.
func provenance(s *session, gradingSHA string) (*grade.Provenance, []string) {
	p := &grade.Provenance{Grading: gradingSHA, Pab: grade.ReadBuild()}
	var notes []string
	var err error
	if p.Recording, p.RecordingOf, err = s.target.RecordingHash(); err != nil {
		p.Recording, p.RecordingOf = "", ""
		notes = append(notes, "provenance: the recording could not be hashed: "+err.Error())
	}
	if p.Rules, p.RuleFiles, err = grade.RulesHash(s.rules, s.repo.Root); err != nil {
		p.Rules, p.RuleFiles = "", nil
		notes = append(notes, "provenance: "+err.Error())
	}
	return p, notes
}

// gradeFiles are the files pab grade reads and the directory it writes.
type gradeFiles struct {
	log, answer, out        string
	guardTrace, guardResult string
}

func runGrade(cmd *cobra.Command, g *globalFlags, target string, files gradeFiles, jf *judgeFlags) error {
	logFile, answerFile, outDir := files.log, files.answer, files.out
	errOut := cmd.ErrOrStderr()
	if err := jf.validate(); err != nil {
		return err
	}
	// Inputs the user named must exist: those are mistakes, reported before anything is written.
	// Stat first: opening a FIFO would block.
	if fi, err := os.Stat(logFile); err != nil {
		return fmt.Errorf("grade: --log: %w", err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("grade: --log: %s is not a regular file", logFile)
	}
	lf, err := os.Open(logFile)
	if err != nil {
		return fmt.Errorf("grade: --log: %w", err)
	}
	defer lf.Close()
	var answer *grade.AnswerInfo
	if answerFile != "" {
		if answer, err = grade.ReadAnswer(answerFile); err != nil {
			return fmt.Errorf("grade: --%w", err)
		}
	}
	for _, f := range []struct{ flag, path string }{{"guard-trace", files.guardTrace}, {"guard-result", files.guardResult}} {
		if f.path == "" {
			continue
		}
		if fi, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("grade: --%s: %w", f.flag, err)
		} else if !fi.Mode().IsRegular() {
			return fmt.Errorf("grade: --%s: %s is not a regular file", f.flag, f.path)
		}
	}
	s, err := openSession(g, target, errOut)
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	defer s.bundle.Close()
	in := grade.Input{Task: s.target.Name, Answer: answer, Rules: s.rules, Titles: pageTitles(s.bundle), RecordedHosts: recordedHosts(s.bundle),
		FramesOf: frameLookup(s.bundle)}
	var problem error
	var gradingSHA string
	if t := s.target.Task; t != nil {
		if card, err := t.Card(); err == nil {
			in.Title, in.Prompt = card.Title, card.Prompt
		} else {
			problem = fmt.Errorf("task card: %w", err)
		}
		var sha string
		in.Grading, in.GradingFile, sha, err = gradingWithHash(t, errOut)
		if err != nil && problem == nil {
			problem = err
		}
		gradingSHA = sha
	}
	in.GradingError = problem
	var provNotes []string
	in.Provenance, provNotes = provenance(s, gradingSHA)
	for _, n := range provNotes {
		fmt.Fprintln(errOut, "pab grade:", n)
	}
	if in.Grading != nil && in.Grading.Guard != nil {
		tr, rs := files.guardTrace, files.guardResult
		if tr == "" {
			tr = filepath.Join(filepath.Dir(logFile), grade.GuardTraceFile)
		}
		if rs == "" {
			rs = filepath.Join(filepath.Dir(logFile), grade.GuardResultFile)
		}
		in.Guard, in.GuardError = grade.ReadGuardRun(tr, rs)
	} else if files.guardTrace != "" || files.guardResult != "" {
		fmt.Fprintln(errOut, "pab grade: --guard-trace and --guard-result are not used: the task's grading has no guard section")
	}
	var judge *grade.Cache
	if problem == nil && needsJudge(in.Grading, answer) {
		// A judge that cannot be set up (no key, no model) is a mistake on the command
		// line: said before anything is written.
		if judge, err = jf.open(s.repo); err != nil {
			return fmt.Errorf("grade: %w", err)
		}
	}
	// The log is read once, line by line, while grading: memory does not grow with it.
	res, err := grade.GradeLog(cmd.Context(), in, lf, logFile, grade.Options{Judge: judge, Samples: jf.samples})
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	if m := res.RecordingMismatch(); m != "" {
		fmt.Fprintln(errOut, "pab grade: warning:", m)
	}
	if err := res.WriteFiles(outDir); err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	printResult(cmd.OutOrStdout(), res, outDir)
	if res.Status == grade.StatusError {
		for _, n := range res.Notes {
			fmt.Fprintln(errOut, "pab grade:", n)
		}
		return errGradeFailed
	}
	return nil
}

// needsJudge reports whether grading will ask the judge anything.
func needsJudge(g *grade.Grading, a *grade.AnswerInfo) bool {
	if g == nil || a == nil || a.Text == "" {
		return false
	}
	return len(g.Checks) > 0 || (len(g.Extract) > 0 && len(g.Require) > 0)
}

// frameLookup returns grade.Input.FramesOf for b: the frames of one recorded document, as
// pageFrames finds them, each entry looked at once (only entries of b are kept, so the
// cache is bounded by the recording, not by the log).
func frameLookup(b *warc.Bundle) func(entry string) []string {
	var mu sync.Mutex
	cache := map[string][]string{}
	return func(entry string) []string {
		mu.Lock()
		defer mu.Unlock()
		if fs, ok := cache[entry]; ok {
			return fs
		}
		if b.ByID(entry) == nil {
			return nil
		}
		fs := pageFrames(b, []replay.LogLine{{Entry: entry, Type: replay.TypeDocument}})[entry]
		cache[entry] = fs
		return fs
	}
}

// recordedHosts returns the hosts of a bundle's exchanges as grade.Input wants them.
func recordedHosts(b *warc.Bundle) map[string]bool {
	hosts := map[string]bool{}
	for _, e := range b.Entries {
		u, err := url.Parse(e.URL)
		if err != nil {
			continue
		}
		h := strings.ToLower(u.Host)
		h = strings.TrimSuffix(strings.TrimSuffix(h, ":443"), ":80")
		hosts[h] = true
	}
	return hosts
}

// pageTitles maps recorded exchange ids to the titles of the pages recorded at their URLs.
func pageTitles(b *warc.Bundle) map[string]string {
	byURL := map[string]string{}
	for _, p := range b.Pages {
		if p.Title != "" {
			byURL[p.URL] = p.Title
		}
	}
	out := map[string]string{}
	for _, e := range b.Entries {
		if t, ok := byURL[e.URL]; ok {
			out[e.ID] = t
		}
	}
	return out
}

func printResult(w io.Writer, r *grade.Result, outDir string) {
	switch r.Status {
	case grade.StatusScored:
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

// runGradeCheck validates the task's grading.yaml against its recording.
func runGradeCheck(cmd *cobra.Command, g *globalFlags, target string) error {
	s, err := openSession(g, target, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("grade --check: %w", err)
	}
	defer s.bundle.Close()
	if s.target.Task == nil || !s.target.Task.HasGrading() {
		return fmt.Errorf("grade --check: %s has no grading.yaml", target)
	}
	gr, name, err := gradingOf(s.target.Task, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("grade --check: %w", err)
	}
	return reportSourceCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), gr, name, s.bundle)
}

// reportSourceCheck runs grade.CheckSources and prints its outcome; problems are an error.
func reportSourceCheck(out, errOut io.Writer, gr *grade.Grading, name string, b *warc.Bundle) error {
	probs := grade.CheckSources(gr, b)
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

func newCalibrateCmd(g *globalFlags) *cobra.Command {
	var (
		labels, jsonOut string
		jf              judgeFlags
	)
	cmd := &cobra.Command{
		Use:   "calibrate --labels FILE.jsonl",
		Short: "Measure how often the judge agrees with a person on each check",
		Long: `calibrate grades labelled runs and compares, item by item, the judge's verdict
with a person's: percent agreement and Cohen's kappa per check (and per require
item), so a task's author can see which checks to trust.

Each line of the labels file (JSON Lines) is one run:
  {"task": "ID", "answer": "TEXT", "verdicts": {"CHECK_ID": true, ...}}
with "answer_file": "PATH" (relative to the labels file) instead of "answer", or
"result": "PATH/result.json" to compare a run already graded (no judge call).
Verdicts are true/false (or "yes"/"no", "pass"/"fail").`,
		Example: `  pab grade calibrate --labels tasks/books-sapiens-price/labels.jsonl --judge api`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if labels == "" {
				return fmt.Errorf("calibrate: --labels is required")
			}
			return runCalibrate(cmd, g, labels, jsonOut, &jf)
		},
	}
	cmd.Flags().StringVar(&labels, "labels", "", "labelled runs (JSON Lines)")
	cmd.Flags().StringVar(&jsonOut, "json", "", "also write the calibration as JSON to this file")
	jf.add(cmd)
	return cmd
}

func runCalibrate(cmd *cobra.Command, g *globalFlags, labelsFile, jsonOut string, jf *judgeFlags) error {
	f, err := os.Open(labelsFile)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	defer f.Close()
	labels, err := grade.ReadLabels(io.LimitReader(f, 256<<20), labelsFile)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	repo, err := g.findRepo()
	if err != nil {
		return err
	}
	type taskInfo struct {
		card    *task.Card
		grading *grade.Grading
		file    string
	}
	tasks := map[string]*taskInfo{}
	var judge *grade.Cache
	var runs []grade.CalibrationRun
	base := filepath.Dir(labelsFile)
	for _, l := range labels {
		where := fmt.Sprintf("%s:%d", labelsFile, l.Line)
		if l.Result != "" {
			p := l.Result
			if !filepath.IsAbs(p) {
				p = filepath.Join(base, p)
			}
			res, err := grade.ReadResult(p)
			if err != nil {
				return fmt.Errorf("calibrate: %s: %w", where, err)
			}
			if res.Task != l.Task {
				return fmt.Errorf("calibrate: %s: %s is a result of task %s, not %s", where, l.Result, res.Task, l.Task)
			}
			runs = append(runs, grade.CalibrationRun{Label: l, Result: res})
			continue
		}
		ti := tasks[l.Task]
		if ti == nil {
			t, err := repo.Task(l.Task)
			if err != nil {
				return fmt.Errorf("calibrate: %s: %w", where, err)
			}
			card, err := t.Card()
			if err != nil {
				return fmt.Errorf("calibrate: %s: %w", where, err)
			}
			gr, name, err := gradingOf(t, cmd.ErrOrStderr())
			if err != nil {
				return fmt.Errorf("calibrate: %s: %w", where, err)
			}
			if gr == nil {
				return fmt.Errorf("calibrate: %s: task %s has no grading.yaml", where, l.Task)
			}
			ti = &taskInfo{card: card, grading: gr, file: name}
			tasks[l.Task] = ti
		}
		var answer *grade.AnswerInfo
		if l.AnswerFile != "" {
			p := l.AnswerFile
			if !filepath.IsAbs(p) {
				p = filepath.Join(base, p)
			}
			if answer, err = grade.ReadAnswer(p); err != nil {
				return fmt.Errorf("calibrate: %s: %w", where, err)
			}
		} else {
			answer = grade.AnswerFromBytes([]byte(l.Answer))
		}
		if judge == nil {
			if judge, err = jf.open(repo); err != nil {
				return fmt.Errorf("calibrate: judge: %w", err)
			}
		}
		in := grade.Input{Task: l.Task, Title: ti.card.Title, Prompt: ti.card.Prompt, Grading: ti.grading, GradingFile: ti.file, Answer: answer}
		res := grade.Grade(cmd.Context(), in, grade.Options{Judge: judge, Samples: jf.samples})
		runs = append(runs, grade.CalibrationRun{Label: l, Result: res})
	}
	c := grade.Calibrate(runs)
	c.Print(cmd.OutOrStdout())
	if jsonOut != "" {
		if err := atomicfile.WriteJSON(jsonOut, c, 0o644); err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
	}
	if len(c.Items) == 0 {
		return fmt.Errorf("calibrate: no verdict could be compared")
	}
	return nil
}
