package batch

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/textcut"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/replay"
)

// SummaryFormat is the version of summary.json's layout. Format 2 (issue 16) counts every
// run: pass_rate is passed over all runs, and infrastructure failures, runs that opened no
// page and unfinished runs are counted on their own; format 1 had "counted" runs (a score
// and not error) and left the others out of the pass rate.
const SummaryFormat = 2

// Summary is summary.json: every run, every task and the whole batch.
type Summary struct {
	Format int `json:"format"`
	// Agent is the agent command (or its label).
	Agent string `json:"agent"`
	// Created is when the summary was written (RFC 3339 UTC).
	Created string `json:"created"`
	// Pab is the build that wrote the summary (each run's own is in its Provenance).
	Pab grade.Build `json:"pab"`
	// Repeat is the repeats per task asked for; Planned the runs asked for (tasks ×
	// repeats), of which Runs lists those that have a run.json.
	Repeat  int `json:"repeat"`
	Planned int `json:"planned"`
	// Runs are in task order, then repeat order.
	Runs    []RunRow  `json:"runs"`
	Tasks   []TaskRow `json:"tasks"`
	Overall Overall   `json:"overall"`
	// Usage totals the model usage of the runs that were metered (null when none was).
	Usage *BatchUsage `json:"usage"`
}

// RunRow is one run in the summary.
type RunRow struct {
	Task   string   `json:"task"`
	Repeat int      `json:"repeat"`
	Status string   `json:"status"`
	Score  *float64 `json:"score"`
	// Passed is true when the run passed: score 1, a page opened, and no failure of pab
	// (status error) or interruption. Every other run counts against the pass rate.
	Passed bool `json:"passed"`
	// Pages is how many pages the agent opened; nil when unknown. NoBrowsing is true when
	// it opened none (whatever the status: a timeout or an error can have it too).
	Pages      *int `json:"pages"`
	NoBrowsing bool `json:"no_browsing"`
	// ErrorKind says what failed in a run with status error: harness, judge, grading, log
	// or guard (an infrastructure failure).
	ErrorKind  string `json:"error_kind,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// Requests is the number of requests in the replay log; Exact, Fuzzy and Miss are the
	// shares of them (0 to 1) answered that way; nil without requests.
	Requests int      `json:"requests"`
	Exact    *float64 `json:"exact"`
	Fuzzy    *float64 `json:"fuzzy"`
	Miss     *float64 `json:"miss"`
	// Dir is the run directory relative to the batch directory ("task/1"); Report is
	// its report.html relative to the batch directory, empty when there is none.
	Dir    string `json:"dir"`
	Report string `json:"report,omitempty"`
	// View is its view.html (the step-by-step run view) relative to the batch directory,
	// empty when there is none.
	View  string `json:"view,omitempty"`
	Error string `json:"error,omitempty"`
	// Provenance is the run's (run.json): what it was graded against and by which build;
	// nil when the run was not graded.
	Provenance *grade.Provenance `json:"provenance,omitempty"`
}

// PassAt is pass@k: the chance that at least one of k runs drawn from a task's n runs
// passed, 1 - C(n-c, k) / C(n, k) for c passing runs.
type PassAt struct {
	K int `json:"k"`
	// Value is nil when the task has fewer than k runs.
	Value *float64 `json:"value"`
	// Tasks is how many tasks the overall value averages (overall only).
	Tasks int `json:"tasks,omitempty"`
}

// Counts are the numbers of a task or of the batch. Every run counts in Runs, and the
// pass rate is Passed over Runs: a run that did not pass counts against it, whatever the
// reason. The other counts say why runs did not pass.
type Counts struct {
	// Runs have a run.json; Passed of them passed.
	Runs   int `json:"runs"`
	Passed int `json:"passed"`
	// PassRate is Passed / Runs; nil without runs.
	PassRate *float64 `json:"pass_rate"`
	// PassAtK has k from 1 to the batch's repeat.
	PassAtK []PassAt `json:"pass_at_k"`
	// MeanScore is the mean score over all runs; a run without a score, with status error
	// or that opened no page counts 0.
	MeanScore *float64 `json:"mean_score"`
	// Scored counts the runs with a score (whatever their status).
	Scored int `json:"scored"`
	// InfraFailures counts the runs with status error: pab failed (its harness, the judge,
	// the grading file, the replay log or the guard's files), not the agent.
	InfraFailures int `json:"infra_failures"`
	// NoBrowsing counts the runs that opened no page (the no_browsing flag, whatever their
	// status).
	NoBrowsing int `json:"no_browsing"`
	// Unfinished counts the runs interrupted, or running when pab stopped (--resume runs
	// them again).
	Unfinished int `json:"unfinished"`
	// Statuses counts runs by status.
	Statuses map[string]int `json:"statuses"`
}

// TaskRow is one task in the summary.
type TaskRow struct {
	Task string `json:"task"`
	Counts
}

// Failure is one infrastructure failure: a run with status error.
type Failure struct {
	// Dir is the run directory relative to the batch directory; Report its report.html,
	// when there is one.
	Dir    string `json:"dir"`
	Report string `json:"report,omitempty"`
	// Kind is what failed (harness, judge, grading, log, guard); Error says how (cut at
	// 500 bytes).
	Kind  string `json:"kind"`
	Error string `json:"error"`
}

// Overall is the whole batch: the counts over all runs, pass@k averaged over the tasks
// with at least k runs, every infrastructure failure and every run that opened no page.
type Overall struct {
	Tasks int `json:"tasks"`
	Counts
	// DurationMS is the sum of the runs' agent times.
	DurationMS int64 `json:"duration_ms"`
	// Failures are the runs with status error, in run order.
	Failures []Failure `json:"failures"`
	// NoBrowsingRuns are the directories of the runs that opened no page, in run order.
	NoBrowsingRuns []string `json:"no_browsing_runs"`
}

// ErrorKindText names an error kind for a person ("judge error").
func ErrorKindText(kind string) string {
	switch kind {
	case ErrorHarness:
		return "harness error"
	case grade.ErrorJudge:
		return "judge error"
	case grade.ErrorGrading:
		return "grading file error"
	case grade.ErrorLog:
		return "replay log error"
	case grade.ErrorGuard:
		return "guard files error"
	case "":
		return "error"
	}
	return kind + " error"
}

// summarize builds the summary of a batch in out from the runs' Infos (keyed by task and
// repeat); tasks gives the order.
func summarize(out, agent string, tasks []string, repeat int, infos map[job]*Info) *Summary {
	s := &Summary{Format: SummaryFormat, Agent: agent, Created: utc(time.Now()), Pab: grade.ReadBuild(), Repeat: repeat,
		Planned: len(tasks) * repeat, Runs: []RunRow{}, Tasks: []TaskRow{}}
	o := &s.Overall
	o.Statuses, o.PassAtK, o.Failures, o.NoBrowsingRuns = map[string]int{}, []PassAt{}, []Failure{}, []string{}
	var scoreSum float64
	passAtSum := make([]float64, repeat+1)
	passAtN := make([]int, repeat+1)
	for _, t := range tasks {
		tr := TaskRow{Task: t, Counts: Counts{Statuses: map[string]int{}, PassAtK: []PassAt{}}}
		var tScore float64
		var ks []int
		for j := range infos {
			if j.task == t {
				ks = append(ks, j.repeat)
			}
		}
		sort.Ints(ks)
		for _, k := range ks {
			in := infos[job{t, k}]
			if in.Usage != nil {
				if s.Usage == nil {
					s.Usage = &BatchUsage{}
				}
				s.Usage.addUsage(in.Usage)
			}
			row := rowOf(out, in)
			s.Runs = append(s.Runs, row)
			tr.add(&row)
			o.add(&row)
			o.DurationMS += row.DurationMS
			tScore += effectiveScore(&row)
			if row.Status == StatusError {
				o.Failures = append(o.Failures, Failure{Dir: row.Dir, Report: row.Report, Kind: row.ErrorKind,
					Error: textcut.Fit(row.Error, 500, "…")})
			}
			if row.NoBrowsing {
				o.NoBrowsingRuns = append(o.NoBrowsingRuns, row.Dir)
			}
		}
		if tr.Runs > 0 {
			tr.PassRate = ptr(float64(tr.Passed) / float64(tr.Runs))
			tr.MeanScore = ptr(tScore / float64(tr.Runs))
		}
		for k := 1; k <= repeat; k++ {
			pa := PassAt{K: k}
			if tr.Runs >= k {
				v := passAtK(tr.Runs, tr.Passed, k)
				pa.Value = &v
				passAtSum[k] += v
				passAtN[k]++
			}
			tr.PassAtK = append(tr.PassAtK, pa)
		}
		s.Tasks = append(s.Tasks, tr)
		o.Tasks++
		scoreSum += tScore
	}
	if o.Runs > 0 {
		o.PassRate = ptr(float64(o.Passed) / float64(o.Runs))
		o.MeanScore = ptr(scoreSum / float64(o.Runs))
	}
	for k := 1; k <= repeat; k++ {
		pa := PassAt{K: k, Tasks: passAtN[k]}
		if passAtN[k] > 0 {
			pa.Value = ptr(passAtSum[k] / float64(passAtN[k]))
		}
		o.PassAtK = append(o.PassAtK, pa)
	}
	return s
}

// add counts one run (everything but the rates and pass@k).
func (c *Counts) add(r *RunRow) {
	c.Runs++
	c.Statuses[r.Status]++
	if r.Passed {
		c.Passed++
	}
	if r.Score != nil {
		c.Scored++
	}
	switch r.Status {
	case StatusError:
		c.InfraFailures++
	case StatusInterrupted, StatusRunning:
		c.Unfinished++
	}
	if r.NoBrowsing {
		c.NoBrowsing++
	}
}

// effectiveScore is a run's score for the mean: 0 without one, for an error, for a run
// that did not finish and for a run that opened no page.
func effectiveScore(r *RunRow) float64 {
	if r.Score == nil || r.Status == StatusError || r.Status == StatusInterrupted || r.Status == StatusRunning || r.NoBrowsing {
		return 0
	}
	return *r.Score
}

// rowOf makes the summary row of one run.
func rowOf(out string, in *Info) RunRow {
	dir := filepath.ToSlash(filepath.Join(in.Task, strconv.Itoa(in.Repeat)))
	r := RunRow{Task: in.Task, Repeat: in.Repeat, Status: in.Status, Score: in.Score, Passed: in.Passed,
		Pages: in.Pages, NoBrowsing: in.NoBrowsing, DurationMS: in.DurationMS, Dir: dir, Error: in.Error,
		Provenance: in.Provenance}
	if in.Status == StatusError {
		r.ErrorKind = in.ErrorKind
		if r.ErrorKind == "" {
			r.ErrorKind = ErrorHarness
		}
	}
	if !in.Finished || in.Score == nil || in.Status == StatusError || in.NoBrowsing {
		r.Passed = false
	}
	if n := in.Requests["total"]; n > 0 {
		r.Requests = n
		share := func(src replay.Source) *float64 { return ptr(float64(in.Requests[string(src)]) / float64(n)) }
		r.Exact, r.Fuzzy, r.Miss = share(replay.SourceExact), share(replay.SourceFuzzy), share(replay.SourceMiss)
	}
	if _, err := os.Stat(filepath.Join(out, dir, FileReport)); err == nil {
		r.Report = dir + "/" + FileReport
	}
	if _, err := os.Stat(filepath.Join(out, dir, FileView)); err == nil {
		r.View = dir + "/" + FileView
	}
	return r
}

// passAtK is 1 - C(n-c, k) / C(n, k): the unbiased estimate of the chance that at least one
// of k runs passes, from n runs of which c passed (k <= n).
func passAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	// C(n-c, k) / C(n, k) = prod_{i=0}^{k-1} (n-c-i) / (n-i)
	p := 1.0
	for i := 0; i < k; i++ {
		p *= float64(n-c-i) / float64(n-i)
	}
	return 1 - p
}

func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Write writes summary.json and index.html into dir, each through a temporary file.
func (s *Summary) Write(dir string) error {
	if err := atomicfile.WriteJSON(filepath.Join(dir, FileSummary), s, 0o644); err != nil {
		return err
	}
	html, err := RenderIndex(s)
	if err != nil {
		return fmt.Errorf("render %s: %w", FileIndex, err)
	}
	return atomicfile.Write(filepath.Join(dir, FileIndex), html, 0o644)
}

// Lines are the summary as pab run prints it at the end: the pass rate over all runs and
// pass@k, then, when there are any, the infrastructure failures, the runs that opened no
// page and the unfinished runs, each naming runs to look at.
func (s *Summary) Lines() []string {
	o := &s.Overall
	line := fmt.Sprintf("%d %s; pass rate %s (%d of %d runs)", o.Runs, words.Plural(o.Runs, "run"), pctText(o.PassRate), o.Passed, o.Runs)
	for _, p := range o.PassAtK {
		line += fmt.Sprintf(", pass@%d %s", p.K, pctText(p.Value))
	}
	lines := []string{line}
	if n := len(o.Failures); n > 0 {
		var parts []string
		for i, f := range o.Failures {
			if i == 5 {
				parts = append(parts, fmt.Sprintf("and %d more", n-i))
				break
			}
			parts = append(parts, ErrorKindText(f.Kind)+" — see "+f.Dir)
		}
		lines = append(lines, fmt.Sprintf("%d %s (pab failed, not the agent; counted as not passed): %s",
			n, words.Plural(n, "infrastructure failure"), strings.Join(parts, "; ")))
	}
	if n := len(o.NoBrowsingRuns); n > 0 {
		shown := o.NoBrowsingRuns
		more := ""
		if len(shown) > 5 {
			shown, more = shown[:5], fmt.Sprintf(" and %d more", n-5)
		}
		lines = append(lines, fmt.Sprintf("%d %s opened no page (no_browsing: the agent never used a browser): %s%s",
			n, words.Plural(n, "run"), strings.Join(shown, ", "), more))
	}
	if o.Unfinished > 0 {
		lines = append(lines, fmt.Sprintf("%d %s did not finish (interrupted): --resume runs %s again", o.Unfinished, words.Plural(o.Unfinished, "run"), pronoun(o.Unfinished)))
	}
	return lines
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// pctText is a share as a whole percentage, "n/a" when there is none.
func pctText(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", *v*100)
}
