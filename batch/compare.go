package batch

// This file is pab compare: one table across batches, a row per agent label, task and
// provenance (docs/run.md "Comparing batches").

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pab-dev/pab/grade"
)

// maxSummarySize bounds a summary.json read by Compare (a batch of tens of thousands of
// runs fits).
const maxSummarySize = 64 << 20

// CompareFormat is the version of pab compare --json's layout.
const CompareFormat = 1

// Comparison is pab compare's result: the batches read and one row per agent label, task and
// provenance.
type Comparison struct {
	Format  int            `json:"format"`
	Batches []CompareBatch `json:"batches"`
	Rows    []CompareRow   `json:"rows"`
	// Warnings say which tasks have rows of different provenance (also flagged in the
	// rows).
	Warnings []string `json:"warnings"`
}

// CompareBatch is one batch directory read.
type CompareBatch struct {
	Dir     string `json:"dir"`
	Agent   string `json:"agent"`
	Created string `json:"created"`
	Runs    int    `json:"runs"`
}

// CompareProvenance is what must match for two runs of a task to be compared fairly:
// the recording's content hash, grading.yaml's sha256, the rules' hash and the pab build
// that graded (version and VCS revision). Empty fields are unknown (the runs were not
// graded).
type CompareProvenance struct {
	Recording  string `json:"recording"`
	Grading    string `json:"grading"`
	Rules      string `json:"rules"`
	PabVersion string `json:"pab_version"`
	PabCommit  string `json:"pab_revision,omitempty"`
}

func (p CompareProvenance) key() string {
	return p.Recording + "|" + p.Grading + "|" + p.Rules + "|" + p.PabVersion + "|" + p.PabCommit
}

func (p CompareProvenance) known() bool { return p.key() != "||||" }

// provenanceOf is a run's provenance as compared.
func provenanceOf(p *grade.Provenance) CompareProvenance {
	if p == nil {
		return CompareProvenance{}
	}
	return CompareProvenance{Recording: p.Recording, Grading: p.Grading, Rules: p.Rules, PabVersion: p.Pab.Version, PabCommit: p.Pab.Revision}
}

// UsageTotals sums the model usage run.json reports (its "usage" object, RunUsage: what
// pab run's meter saw) over the runs of a row that have one. Tokens are counts; costs are
// US dollars.
type UsageTotals struct {
	// Runs is how many of the row's runs carried a usage object.
	Runs             int   `json:"runs"`
	Calls            int64 `json:"calls"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// CostUSD is the agent's cost; nil when a run's cost is unknown (a call the price
	// table has no price for: run.json cost_usd null), and then KnownCostUSD is the sum of
	// what was priced and UnpricedCalls counts the calls that were not.
	CostUSD       *float64 `json:"cost_usd"`
	KnownCostUSD  float64  `json:"known_cost_usd"`
	UnpricedCalls int      `json:"unpriced_calls"`
	// JudgeCostUSD is the judge's cost (usage.judge.cost_usd) summed likewise; nil when a
	// run's judge was not metered or not priced.
	JudgeCostUSD *float64 `json:"judge_cost_usd"`
}

// CompareRow is one agent label on one task, over the runs of every batch given whose
// provenance is the same. Runs of the same agent and task with another provenance are
// another row, never pooled.
type CompareRow struct {
	Agent string `json:"agent"`
	Task  string `json:"task"`
	// Batches are the batch directories the runs come from, in argument order.
	Batches []string `json:"batches"`
	Runs    int      `json:"runs"`
	Passed  int      `json:"passed"`
	// PassRate is Passed / Runs (every run counts, as in summary.json).
	PassRate *float64 `json:"pass_rate"`
	// Stderr is the standard error of PassRate as a binomial proportion, sqrt(p(1-p)/n)
	// (the plug-in estimate, n the runs); nil without runs.
	Stderr *float64 `json:"stderr"`
	// PassAtK has k from 1 to Runs (at most 10): the unbiased 1 - C(n-c,k)/C(n,k).
	PassAtK []PassAt `json:"pass_at_k"`
	// Statuses counts runs by status; ErrorKinds the runs of status error by kind;
	// NoBrowsing the runs that opened no page, whatever their status.
	Statuses   map[string]int `json:"statuses"`
	ErrorKinds map[string]int `json:"error_kinds"`
	NoBrowsing int            `json:"no_browsing"`
	// MedianRequests is the median of the runs' replay-log request counts;
	// MedianToolCalls the median of their browser tool calls (steps.jsonl lines, pab run
	// --browser --mcp or --guard), nil when no run recorded steps. MedianDurationMS is the
	// median agent wall time in milliseconds.
	MedianRequests   *float64 `json:"median_requests"`
	MedianToolCalls  *float64 `json:"median_tool_calls"`
	MedianDurationMS *float64 `json:"median_duration_ms"`
	// Usage is nil when no run of the row has run.json usage.
	Usage *UsageTotals `json:"usage"`
	// Provenance is the row's; ProvenanceDiffers is true when another row of the same
	// task has another provenance, and DiffersIn names the fields that differ
	// (recording, grading, rules, pab).
	Provenance        CompareProvenance `json:"provenance"`
	ProvenanceDiffers bool              `json:"provenance_differs"`
	DiffersIn         []string          `json:"differs_in,omitempty"`
}

// ReadSummary reads and checks dir/summary.json. Errors name the file: a directory that
// does not exist or holds no summary.json is not a batch; a truncated or malformed file,
// one over 64 MiB or of another format is refused.
func ReadSummary(dir string) (*Summary, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("batch %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("batch %s: not a directory (want a pab run --out directory)", dir)
	}
	path := filepath.Join(dir, FileSummary)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file: %s is not a batch directory (pab run writes summary.json at the end of a batch)", path, dir)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSummarySize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxSummarySize {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxSummarySize)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON") {
			return nil, fmt.Errorf("%s: not valid JSON (truncated?): %v", path, err)
		}
		return nil, fmt.Errorf("%s: not a summary.json: %v", path, err)
	}
	if s.Format != SummaryFormat {
		return nil, fmt.Errorf("%s: format %d, want %d (rerun pab run --resume or --collect to rewrite it)", path, s.Format, SummaryFormat)
	}
	for i, r := range s.Runs {
		if r.Task == "" || r.Status == "" {
			return nil, fmt.Errorf("%s: runs[%d]: no task or status", path, i)
		}
	}
	return &s, nil
}

// runExtras are what compare reads from a run directory beside summary.json: run.json's
// usage and the number of tool calls in steps.jsonl (-1 without one).
func runExtras(batchDir, rel string) (*RunUsage, int, error) {
	if rel == "" || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return nil, -1, fmt.Errorf("%s: run directory %q is not inside the batch", filepath.Join(batchDir, FileSummary), rel)
	}
	dir := filepath.Join(batchDir, filepath.FromSlash(rel))
	var u *RunUsage
	data, err := readBounded(filepath.Join(dir, FileInfo), maxInfoSize)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, -1, err
	default:
		var in struct {
			Usage *RunUsage `json:"usage"`
		}
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, -1, fmt.Errorf("%s: not a run.json: %v", filepath.Join(dir, FileInfo), err)
		}
		u = in.Usage
	}
	steps := -1
	if n, err := countSteps(filepath.Join(dir, FileSteps)); err == nil {
		steps = n
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, -1, err
	}
	return u, steps, nil
}

// readBounded reads a regular file (not a symbolic link) of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: over %d bytes", path, max)
	}
	return data, nil
}

// compareAcc gathers the runs of one row.
type compareAcc struct {
	row             CompareRow
	requests, tools []float64
	durations       []float64
	batchSeen       map[string]bool
}

// Compare reads the batches in dirs (each a pab run --out directory) and returns one row per
// agent label, task and provenance, in order of first appearance. A run without provenance
// (not graded) joins its batch's other runs of the task when they all share one. Errors
// name the file that is missing or bad.
func Compare(dirs []string) (*Comparison, error) {
	if len(dirs) == 0 {
		return nil, errors.New("no batch directory given")
	}
	c := &Comparison{Format: CompareFormat, Batches: []CompareBatch{}, Rows: []CompareRow{}, Warnings: []string{}}
	accs := map[string]*compareAcc{}
	var order []string
	for _, dir := range dirs {
		s, err := ReadSummary(dir)
		if err != nil {
			return nil, err
		}
		c.Batches = append(c.Batches, CompareBatch{Dir: dir, Agent: s.Agent, Created: s.Created, Runs: len(s.Runs)})
		// the batch's provenance of each task, when its graded runs share one
		taskProv := map[string]CompareProvenance{}
		taskMixed := map[string]bool{}
		for _, r := range s.Runs {
			if r.Provenance == nil {
				continue
			}
			p := provenanceOf(r.Provenance)
			if old, ok := taskProv[r.Task]; ok && old.key() != p.key() {
				taskMixed[r.Task] = true
			}
			taskProv[r.Task] = p
		}
		for _, r := range s.Runs {
			p := provenanceOf(r.Provenance)
			if r.Provenance == nil && !taskMixed[r.Task] {
				p = taskProv[r.Task]
			}
			key := s.Agent + "\x00" + r.Task + "\x00" + p.key()
			a := accs[key]
			if a == nil {
				a = &compareAcc{row: CompareRow{Agent: s.Agent, Task: r.Task, Batches: []string{}, Statuses: map[string]int{},
					ErrorKinds: map[string]int{}, PassAtK: []PassAt{}, Provenance: p}, batchSeen: map[string]bool{}}
				accs[key] = a
				order = append(order, key)
			}
			if !a.batchSeen[dir] {
				a.batchSeen[dir] = true
				a.row.Batches = append(a.row.Batches, dir)
			}
			row := &a.row
			row.Runs++
			if r.Passed {
				row.Passed++
			}
			row.Statuses[r.Status]++
			if r.Status == StatusError {
				k := r.ErrorKind
				if k == "" {
					k = ErrorHarness
				}
				row.ErrorKinds[k]++
			}
			if r.NoBrowsing {
				row.NoBrowsing++
			}
			a.requests = append(a.requests, float64(r.Requests))
			a.durations = append(a.durations, float64(r.DurationMS))
			u, steps, err := runExtras(dir, r.Dir)
			if err != nil {
				return nil, err
			}
			if steps >= 0 {
				a.tools = append(a.tools, float64(steps))
			}
			if u != nil {
				if row.Usage == nil {
					zero := 0.0
					row.Usage = &UsageTotals{CostUSD: &zero, JudgeCostUSD: &zero}
				}
				addUsage(row.Usage, u)
			}
		}
	}
	for _, key := range order {
		a := accs[key]
		row := &a.row
		if row.Runs > 0 {
			p := float64(row.Passed) / float64(row.Runs)
			row.PassRate = ptr(p)
			row.Stderr = ptr(math.Sqrt(p * (1 - p) / float64(row.Runs)))
			for k := 1; k <= row.Runs && k <= 10; k++ {
				v := passAtK(row.Runs, row.Passed, k)
				row.PassAtK = append(row.PassAtK, PassAt{K: k, Value: &v})
			}
		}
		row.MedianRequests = median(a.requests)
		row.MedianToolCalls = median(a.tools)
		row.MedianDurationMS = median(a.durations)
		c.Rows = append(c.Rows, *row)
	}
	flagProvenance(c)
	return c, nil
}

// flagProvenance marks the rows of every task whose known provenances differ, and adds one
// warning per such task.
func flagProvenance(c *Comparison) {
	byTask := map[string][]int{}
	var tasks []string
	for i, r := range c.Rows {
		if _, ok := byTask[r.Task]; !ok {
			tasks = append(tasks, r.Task)
		}
		byTask[r.Task] = append(byTask[r.Task], i)
	}
	for _, t := range tasks {
		idx := byTask[t]
		var fields []string
		field := func(name string, get func(CompareProvenance) string) {
			seen := map[string]bool{}
			for _, i := range idx {
				if v := get(c.Rows[i].Provenance); v != "" {
					seen[v] = true
				}
			}
			if len(seen) > 1 {
				fields = append(fields, name)
			}
		}
		field("recording", func(p CompareProvenance) string { return p.Recording })
		field("grading", func(p CompareProvenance) string { return p.Grading })
		field("rules", func(p CompareProvenance) string { return p.Rules })
		field("pab", func(p CompareProvenance) string {
			if p.PabVersion == "" && p.PabCommit == "" {
				return ""
			}
			return p.PabVersion + " " + p.PabCommit
		})
		if len(fields) == 0 {
			continue
		}
		for _, i := range idx {
			c.Rows[i].ProvenanceDiffers = true
			c.Rows[i].DiffersIn = fields
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("task %s: runs were graded against different %s; its rows are not comparable as they stand", t, strings.Join(fields, ", ")))
	}
}

// median is the median of vs (the mean of the middle two for an even count); nil when
// empty.
func median(vs []float64) *float64 {
	if len(vs) == 0 {
		return nil
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return ptr(s[n/2])
	}
	return ptr((s[n/2-1] + s[n/2]) / 2)
}

// addUsage adds one run's usage to t.
func addUsage(t *UsageTotals, u *RunUsage) {
	t.Runs++
	t.Calls += int64(u.Calls)
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.CacheReadTokens += u.CacheReadTokens
	t.CacheWriteTokens += u.CacheWriteTokens
	t.KnownCostUSD += u.KnownCostUSD
	t.UnpricedCalls += u.UnpricedCalls
	if u.CostUSD == nil {
		t.CostUSD = nil
	} else if t.CostUSD != nil {
		t.CostUSD = ptr(*t.CostUSD + *u.CostUSD)
	}
	switch {
	case u.Judge == nil || u.Judge.CostUSD == nil:
		t.JudgeCostUSD = nil
	case t.JudgeCostUSD != nil:
		t.JudgeCostUSD = ptr(*t.JudgeCostUSD + *u.Judge.CostUSD)
	}
}
