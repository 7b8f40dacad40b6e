package run

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// SummaryFormat is the version of summary.json's layout.
const SummaryFormat = 1

// Summary is summary.json: every run, every task and the whole batch.
type Summary struct {
	Format int `json:"format"`
	// Agent is the agent command (or its label).
	Agent string `json:"agent"`
	// Created is when the summary was written (RFC 3339 UTC).
	Created string `json:"created"`
	// Repeat is the repeats per task asked for; Planned the runs asked for (tasks ×
	// repeats), of which Runs lists those that have a run.json.
	Repeat  int `json:"repeat"`
	Planned int `json:"planned"`
	// Runs are in task order, then repeat order.
	Runs    []RunRow  `json:"runs"`
	Tasks   []TaskRow `json:"tasks"`
	Overall Overall   `json:"overall"`
}

// RunRow is one run in the summary.
type RunRow struct {
	Task   string   `json:"task"`
	Repeat int      `json:"repeat"`
	Status string   `json:"status"`
	Score  *float64 `json:"score"`
	Passed bool     `json:"passed"`
	// Counted is true when the run counts for the pass rate and pass@k: it has a score and
	// did not fail because of pab (status error).
	Counted    bool  `json:"counted"`
	DurationMS int64 `json:"duration_ms"`
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
	Error  string `json:"error,omitempty"`
}

// PassAt is pass@k: the chance that at least one of k runs drawn from a task's n counted
// runs passed, 1 - C(n-c, k) / C(n, k) for c passing runs.
type PassAt struct {
	K int `json:"k"`
	// Value is nil when fewer than k runs are counted.
	Value *float64 `json:"value"`
	// Tasks is how many tasks the overall value averages (overall only).
	Tasks int `json:"tasks,omitempty"`
}

// TaskRow is one task in the summary.
type TaskRow struct {
	Task string `json:"task"`
	// Runs have a run.json; Counted of them count; Passed of those passed.
	Runs    int `json:"runs"`
	Counted int `json:"counted"`
	Passed  int `json:"passed"`
	// PassRate is Passed / Counted; nil when nothing is counted.
	PassRate *float64 `json:"pass_rate"`
	// PassAtK has k from 1 to the batch's repeat.
	PassAtK []PassAt `json:"pass_at_k"`
	// MeanScore is the mean score of the counted runs.
	MeanScore *float64 `json:"mean_score"`
	// Statuses counts runs by status.
	Statuses map[string]int `json:"statuses"`
}

// Overall is the whole batch: pass rate over all counted runs, pass@k averaged over the
// tasks with at least k counted runs.
type Overall struct {
	Tasks     int            `json:"tasks"`
	Runs      int            `json:"runs"`
	Counted   int            `json:"counted"`
	Passed    int            `json:"passed"`
	PassRate  *float64       `json:"pass_rate"`
	PassAtK   []PassAt       `json:"pass_at_k"`
	MeanScore *float64       `json:"mean_score"`
	Statuses  map[string]int `json:"statuses"`
	// DurationMS is the sum of the runs' agent times.
	DurationMS int64 `json:"duration_ms"`
}

// summarize builds the summary of a batch in out from the runs' Infos (keyed by task and
// repeat); tasks gives the order.
func summarize(out, agent string, tasks []string, repeat int, infos map[job]*Info) *Summary {
	s := &Summary{Format: SummaryFormat, Agent: agent, Created: utc(time.Now()), Repeat: repeat,
		Planned: len(tasks) * repeat, Runs: []RunRow{}, Tasks: []TaskRow{}}
	s.Overall.Statuses = map[string]int{}
	var scoreSum float64
	passAtSum := make([]float64, repeat+1)
	passAtN := make([]int, repeat+1)
	for _, t := range tasks {
		tr := TaskRow{Task: t, Statuses: map[string]int{}, PassAtK: []PassAt{}}
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
			row := rowOf(out, in)
			s.Runs = append(s.Runs, row)
			tr.Runs++
			tr.Statuses[row.Status]++
			s.Overall.Statuses[row.Status]++
			s.Overall.DurationMS += row.DurationMS
			if row.Counted {
				tr.Counted++
				tScore += *row.Score
				if row.Passed {
					tr.Passed++
				}
			}
		}
		if tr.Counted > 0 {
			tr.PassRate = ptr(float64(tr.Passed) / float64(tr.Counted))
			tr.MeanScore = ptr(tScore / float64(tr.Counted))
		}
		for k := 1; k <= repeat; k++ {
			pa := PassAt{K: k}
			if tr.Counted >= k {
				v := passAtK(tr.Counted, tr.Passed, k)
				pa.Value = &v
				passAtSum[k] += v
				passAtN[k]++
			}
			tr.PassAtK = append(tr.PassAtK, pa)
		}
		s.Tasks = append(s.Tasks, tr)
		s.Overall.Tasks++
		s.Overall.Runs += tr.Runs
		s.Overall.Counted += tr.Counted
		s.Overall.Passed += tr.Passed
		scoreSum += tScore
	}
	if s.Overall.Counted > 0 {
		s.Overall.PassRate = ptr(float64(s.Overall.Passed) / float64(s.Overall.Counted))
		s.Overall.MeanScore = ptr(scoreSum / float64(s.Overall.Counted))
	}
	s.Overall.PassAtK = []PassAt{}
	for k := 1; k <= repeat; k++ {
		pa := PassAt{K: k, Tasks: passAtN[k]}
		if passAtN[k] > 0 {
			pa.Value = ptr(passAtSum[k] / float64(passAtN[k]))
		}
		s.Overall.PassAtK = append(s.Overall.PassAtK, pa)
	}
	return s
}

// rowOf makes the summary row of one run.
func rowOf(out string, in *Info) RunRow {
	dir := filepath.ToSlash(filepath.Join(in.Task, strconv.Itoa(in.Repeat)))
	r := RunRow{Task: in.Task, Repeat: in.Repeat, Status: in.Status, Score: in.Score, Passed: in.Passed,
		DurationMS: in.DurationMS, Dir: dir, Error: in.Error}
	r.Counted = in.Finished && in.Score != nil && in.Status != StatusError
	if !r.Counted {
		r.Passed = false
	}
	if n := in.Requests["total"]; n > 0 {
		r.Requests = n
		share := func(src string) *float64 { return ptr(float64(in.Requests[src]) / float64(n)) }
		r.Exact, r.Fuzzy, r.Miss = share("exact"), share("fuzzy"), share("miss")
	}
	if _, err := os.Stat(filepath.Join(out, dir, FileReport)); err == nil {
		r.Report = dir + "/" + FileReport
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
	if err := writeJSON(filepath.Join(dir, FileSummary), s); err != nil {
		return err
	}
	html, err := RenderIndex(s)
	if err != nil {
		return fmt.Errorf("render %s: %w", FileIndex, err)
	}
	return atomicfile.Write(filepath.Join(dir, FileIndex), html, 0o644)
}
