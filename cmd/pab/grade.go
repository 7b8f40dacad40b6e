//go:build !pab_lite

package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
)

// errGradeFailed makes pab exit 1 after the result files were written and the reason printed.
var errGradeFailed = errors.New("grading failed (see result.json)")

// judgeFlags are the flags that pick and configure the LLM judge.
type judgeFlags struct {
	kind, model, fallback, baseURL, command string
	timeout                                 time.Duration
	samples                                 int
	noCache                                 bool
	transport                               http.RoundTripper // pab run's usage meter (not a flag)
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

// options are the judge flags as grade's settings.
func (j *judgeFlags) options() *grade.JudgeOptions {
	return &grade.JudgeOptions{JudgeConfig: grade.JudgeConfig{Kind: j.kind, Model: j.model, Fallback: j.fallback,
		BaseURL: j.baseURL, Command: j.command, Timeout: j.timeout, Transport: j.transport}, Samples: j.samples, NoCache: j.noCache}
}

// validate checks the judge flags that need no judge to be built; errors name the flag.
func (j *judgeFlags) validate() error { return flagError(j.options().Validate()) }

// open builds the cached judge; the cache lives in the repository's cache directory.
// Errors name the flag.
func (j *judgeFlags) open(repo *task.Repo) (*grade.Cache, error) {
	c, err := j.options().Open(repo.CacheDir())
	return c, flagError(err)
}

// flagOf maps the fields of grade's and batch's options (grade.FieldError) to pab's flags.
var flagOf = map[string]string{"Samples": "--samples", "Kind": "--judge", "Timeout": "--judge-timeout",
	"Log": "--log", "Answer": "--answer", "GuardTrace": "--guard-trace", "GuardResult": "--guard-result",
	"Repeat": "--repeat", "Jobs": "--jobs", "Agent": "--agent", "Out": "--out", "GuardApp": "--guard"}

// flagError is err with the *grade.FieldError it holds named by its flag (flagOf); other
// errors, and nil, are returned as they are.
func flagError(err error) error {
	var fe *grade.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	f, ok := flagOf[fe.Field]
	if !ok {
		return err
	}
	return &flagErr{msg: strings.Replace(err.Error(), fe.Error(), fe.Named(f), 1), err: err}
}

// flagErr is an error whose message names a flag; it unwraps to the library's error.
type flagErr struct {
	msg string
	err error
}

func (e *flagErr) Error() string { return e.msg }
func (e *flagErr) Unwrap() error { return e.err }

func newGradeCmd(g *globalFlags) *cobra.Command {
	var (
		logFile, answerFile, outDir string
		guardTrace, guardResult     string
		check, harOut               bool
		jf                          judgeFlags
	)
	cmd := &cobra.Command{
		Use:   "grade TARGET --log REPLAY.jsonl [--answer FILE] [--out DIR]",
		Short: "Score an agent run from its answer and its replay log (result.json, report.html)",
		Long:  longHelp("grade"),
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
			return runGrade(cmd, g, args[0], grade.Files{Log: logFile, Answer: answerFile,
				GuardTrace: guardTrace, GuardResult: guardResult}, outDir, &jf, harOut)
		},
	}
	cmd.Flags().StringVar(&logFile, "log", "", "the replay log of the run (pab replay --log)")
	cmd.Flags().StringVar(&answerFile, "answer", "", "the agent's answer (a text file)")
	cmd.Flags().StringVar(&outDir, "out", "", "directory for result.json and report.html (default: the log's directory)")
	cmd.Flags().BoolVar(&check, "check", false, "validate grading.yaml against the recording and exit")
	cmd.Flags().BoolVar(&harOut, "har", false, "also write the run as a HAR 1.2 file, run.har in --out: the replay log joined with the recorded answers (docs/replay.md \"A run as a HAR\")")
	cmd.Flags().StringVar(&guardTrace, "guard-trace", "", "pab guard's trace of the run, for a grading with a guard section (default: guard.trace.jsonl in the log's directory)")
	cmd.Flags().StringVar(&guardResult, "guard-result", "", "pab guard's result envelope of the run (default: guard.result.json in the log's directory)")
	jf.add(cmd)
	cmd.AddCommand(newCalibrateCmd(g))
	return cmd
}

func runGrade(cmd *cobra.Command, g *globalFlags, target string, files grade.Files, outDir string, jf *judgeFlags, harOut bool) error {
	errOut := cmd.ErrOrStderr()
	if err := jf.validate(); err != nil {
		return err
	}
	// Inputs the user named must exist: those are mistakes, reported before anything is written.
	lf, answer, err := files.Open()
	if err != nil {
		return fmt.Errorf("grade: %w", flagError(err))
	}
	defer lf.Close()
	s, err := openSession(g, target, errOut)
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	defer s.close()
	p := grade.Prepare(s.opened(), s.repo.Root, errOut)
	for _, n := range p.Notes {
		fmt.Fprintln(errOut, "pab grade:", n)
	}
	res, err := p.GradeFiles(cmd.Context(), files, lf, answer, grade.RunOptions{
		OpenJudge: func() (*grade.Cache, error) { return jf.open(s.repo) }, Samples: jf.samples, Warn: errOut})
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	if m := res.RecordingMismatch(); m != "" {
		fmt.Fprintln(errOut, "pab grade: warning:", m)
	}
	if err := res.WriteFiles(outDir); err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	if harOut {
		if err := writeRunHAR(cmd.OutOrStdout(), filepath.Join(outDir, replay.RunHARFile), files.Log, s.bundle); err != nil {
			return fmt.Errorf("grade: --har: %w", err)
		}
	}
	// the run view, when the log's directory holds the run's browser steps (pab run)
	runDir := filepath.Dir(files.Log)
	trace := files.GuardTrace
	if trace == "" {
		trace = filepath.Join(runDir, grade.GuardTraceFile)
	}
	if err := batch.WriteViewFiles(batch.ViewFiles{Steps: filepath.Join(runDir, batch.FileSteps), Log: files.Log,
		GuardTrace: trace, Answer: files.Answer, Out: outDir}, res); err != nil {
		fmt.Fprintln(errOut, "pab grade: warning: view.html not written:", err)
	}
	res.Print(cmd.OutOrStdout(), outDir)
	if res.Status == grade.StatusError {
		for _, n := range res.Notes {
			fmt.Fprintln(errOut, "pab grade:", n)
		}
		return errGradeFailed
	}
	return nil
}

// runGradeCheck validates the task's grading.yaml against its recording.
func runGradeCheck(cmd *cobra.Command, g *globalFlags, target string) error {
	s, err := openSession(g, target, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("grade --check: %w", err)
	}
	defer s.close()
	if s.target.Task == nil || !s.target.Task.HasGrading() {
		return fmt.Errorf("grade --check: %s has no grading.yaml", target)
	}
	gr, name, _, err := grade.LoadTaskGrading(s.target.Task, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("grade --check: %w", err)
	}
	return grade.ReportSourceCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), gr, name, s.bundle)
}

func newCalibrateCmd(g *globalFlags) *cobra.Command {
	var (
		labels, jsonOut string
		jf              judgeFlags
	)
	cmd := &cobra.Command{
		Use:     "calibrate --labels FILE.jsonl",
		Short:   "Measure how often the judge agrees with a person on each check",
		Long:    longHelp("grade-calibrate"),
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
	runs, err := grade.CalibrationRuns(cmd.Context(), labels, labelsFile, repo,
		func() (*grade.Cache, error) { return jf.open(repo) }, jf.samples, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
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
