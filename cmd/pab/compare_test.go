//go:build !pab_lite

package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/batch"
)

// TestCompareBatches (issue 30): three batches made by pab run with the reference agent —
// agent-a (whose second repeat fails), agent-b, and agent-a again on a repository copy
// whose books-sapiens-price recording changed. pab compare --json gives the numbers a hand
// computation from the summary.json files gives; the changed recording's task has one row
// per provenance, all flagged, while the unchanged task pools agent-a's two batches; the
// text, markdown and html outputs carry the flag; bad batches are errors naming the file.
func TestCompareBatches(t *testing.T) {
	ref := buildRefagent(t)
	tasks := []string{"books-sapiens-price", "lil-former-projects"}
	plans := filepath.Join(repoRoot, "tasks")
	root := t.TempDir()
	// the changed repository: same sites/ and tasks, books-sapiens-price's manifest.json
	// re-spaced (the recording's content hash changes, its answers do not)
	repo2 := filepath.Join(root, "repo2")
	os.MkdirAll(filepath.Join(repo2, "tasks"), 0o755)
	copyTree(t, filepath.Join(repoRoot, "sites"), filepath.Join(repo2, "sites"))
	for _, task := range tasks {
		copyTree(t, filepath.Join(repoRoot, "tasks", task), filepath.Join(repo2, "tasks", task))
	}
	man := filepath.Join(repo2, "tasks/books-sapiens-price/recording/manifest.json")
	data, err := os.ReadFile(man)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(data, []byte(`"format": 3`), []byte(`"format":  3`), 1)
	if bytes.Equal(changed, data) {
		t.Fatalf("%s: no \"format\": 3 to re-space", man)
	}
	os.WriteFile(man, changed, 0o644)

	type spec struct {
		name, label, agent string
		repo               string
	}
	specs := []spec{
		{"a", "agent-a", `[ "$PAB_REPEAT" = 2 ] && exit 3; exec ` + ref + " --plans " + plans, ""},
		{"b", "agent-b", ref + " --plans " + plans, ""},
		{"c", "agent-a", `[ "$PAB_REPEAT" = 2 ] && exit 3; exec ` + ref + " --plans " + plans, repo2},
	}
	var dirs []string
	sums := map[string]*batch.Summary{}
	for _, s := range specs {
		out := filepath.Join(root, "batch-"+s.name)
		args := []string{"run", "--out", out, "--jobs", "2", "--repeat", "2", "--timeout", "2m", "--label", s.label,
			"--agent", s.agent, "--judge", "cli", "--judge-cmd", filepath.Join(repoRoot, exampleJudge)}
		if s.repo != "" {
			args = append(args, "--repo", s.repo)
		}
		stdout, stderr, code := runPabDir(t, repoRoot, append(args, tasks...)...)
		if code != 0 {
			t.Fatalf("pab run %s: exit %d\n%s\n%s", s.name, code, stdout, stderr)
		}
		dirs = append(dirs, out)
		sums[out] = readSummary(t, out)
	}

	stdout, stderr, code := runPab(t, append([]string{"compare", "--json"}, dirs...)...)
	if code != 0 {
		t.Fatalf("pab compare --json: exit %d\n%s", code, stderr)
	}
	var c batch.Comparison
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatalf("compare --json: %v\n%s", err, stdout)
	}

	// the hand computation: group every summary.json run by label, task and recording
	type key struct{ agent, task, rec string }
	type tally struct {
		runs, passed int
		statuses     map[string]int
		batches      int
	}
	want := map[key]*tally{}
	recs := map[string]map[string]bool{}
	for _, d := range dirs {
		s := sums[d]
		seen := map[key]bool{}
		for _, r := range s.Runs {
			if r.Provenance == nil {
				t.Fatalf("%s: run %s has no provenance", d, r.Dir)
			}
			k := key{s.Agent, r.Task, r.Provenance.Recording}
			if want[k] == nil {
				want[k] = &tally{statuses: map[string]int{}}
			}
			w := want[k]
			w.runs++
			if r.Passed {
				w.passed++
			}
			w.statuses[r.Status]++
			if !seen[k] {
				seen[k] = true
				w.batches++
			}
			if recs[r.Task] == nil {
				recs[r.Task] = map[string]bool{}
			}
			recs[r.Task][r.Provenance.Recording] = true
		}
	}
	if len(recs["books-sapiens-price"]) != 2 || len(recs["lil-former-projects"]) != 1 {
		t.Fatalf("recordings by task %v: want 2 for books-sapiens-price, 1 for lil-former-projects", recs)
	}
	if len(c.Rows) != len(want) || len(want) != 5 {
		t.Fatalf("%d rows, want %d (hand: %d)\n%s", len(c.Rows), 5, len(want), stdout)
	}
	near := func(a *float64, b float64) bool { return a != nil && math.Abs(*a-b) < 1e-12 }
	for _, r := range c.Rows {
		w := want[key{r.Agent, r.Task, r.Provenance.Recording}]
		if w == nil {
			t.Errorf("row %s %s %s: not in the summaries", r.Agent, r.Task, r.Provenance.Recording)
			continue
		}
		p := float64(w.passed) / float64(w.runs)
		if r.Runs != w.runs || r.Passed != w.passed || !near(r.PassRate, p) || !near(r.Stderr, math.Sqrt(p*(1-p)/float64(w.runs))) {
			t.Errorf("row %s %s: runs %d passed %d rate %v se %v; hand: %d %d %v", r.Agent, r.Task, r.Runs, r.Passed, r.PassRate, r.Stderr, w.runs, w.passed, p)
		}
		// pass@k by hand: 1 - C(n-c,k)/C(n,k)
		for _, pa := range r.PassAtK {
			num, den := 1.0, 1.0
			for i := 0; i < pa.K; i++ {
				num *= float64(w.runs - w.passed - i)
				den *= float64(w.runs - i)
			}
			if w.runs-w.passed < pa.K {
				num = 0
			}
			if !near(pa.Value, 1-num/den) {
				t.Errorf("row %s %s: pass@%d %v, hand %v", r.Agent, r.Task, pa.K, pa.Value, 1-num/den)
			}
		}
		if len(r.PassAtK) != w.runs {
			t.Errorf("row %s %s: pass@k for k up to %d, want %d", r.Agent, r.Task, len(r.PassAtK), w.runs)
		}
		for st, n := range w.statuses {
			if r.Statuses[st] != n {
				t.Errorf("row %s %s: %d %s, hand %d", r.Agent, r.Task, r.Statuses[st], st, n)
			}
		}
		if len(r.Batches) != w.batches {
			t.Errorf("row %s %s: batches %v, want %d", r.Agent, r.Task, r.Batches, w.batches)
		}
		flagged := r.Task == "books-sapiens-price"
		if r.ProvenanceDiffers != flagged || (flagged && strings.Join(r.DiffersIn, ",") != "recording") {
			t.Errorf("row %s %s: provenance_differs %v %v, want %v [recording]", r.Agent, r.Task, r.ProvenanceDiffers, r.DiffersIn, flagged)
		}
		// pab run meters every run (the reference agent calls no model): usage summed
		// from the runs' run.json
		var calls int64
		var in, outTok int64
		for _, d := range r.Batches {
			for _, row := range sums[d].Runs {
				if row.Task != r.Task || row.Provenance == nil || row.Provenance.Recording != r.Provenance.Recording {
					continue
				}
				info := readInfoFile(t, filepath.Join(d, row.Dir, batch.FileInfo))
				if info.Usage == nil {
					t.Fatalf("%s/%s: run.json has no usage", d, row.Dir)
				}
				calls += int64(info.Usage.Calls)
				in += info.Usage.InputTokens
				outTok += info.Usage.OutputTokens
			}
		}
		if r.Usage == nil || r.Usage.Runs != r.Runs || r.Usage.Calls != calls || r.Usage.InputTokens != in || r.Usage.OutputTokens != outTok {
			t.Errorf("row %s %s: usage %+v, hand: %d calls, %d in, %d out", r.Agent, r.Task, r.Usage, calls, in, outTok)
		}
		if r.MedianDurationMS == nil || r.MedianRequests == nil || *r.MedianRequests <= 0 || r.MedianToolCalls != nil {
			t.Errorf("row %s %s: median time %v, median requests %v, tool calls %v", r.Agent, r.Task, r.MedianDurationMS, r.MedianRequests, r.MedianToolCalls)
		}
	}
	// the literal numbers of the design: agent-a passes its first repeat only; its
	// unchanged task pools both of its batches
	for _, r := range c.Rows {
		if r.Agent == "agent-a" && r.Task == "lil-former-projects" {
			if r.Runs != 4 || r.Passed != 2 || !near(r.Stderr, 0.25) || !near(r.PassAtK[1].Value, 1-2.0/12) {
				t.Errorf("agent-a lil-former-projects: %+v, want 4 runs, 2 passed, se 0.25, pass@2 5/6", r)
			}
		}
		if r.Agent == "agent-b" && (r.Runs != 2 || r.Passed != 2 || !near(r.Stderr, 0)) {
			t.Errorf("agent-b %s: %+v, want 2 of 2, se 0", r.Task, r)
		}
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "books-sapiens-price") {
		t.Errorf("warnings %q: want one naming books-sapiens-price", c.Warnings)
	}

	// text: the flag in the table and the warning on stderr; markdown and html carry it too
	stdout, stderr, code = runPab(t, append([]string{"compare"}, dirs...)...)
	if code != 0 || strings.Count(stdout, "DIFFERS: recording") != 3 || !strings.Contains(stderr, "books-sapiens-price") || !strings.Contains(stdout, "—") {
		t.Errorf("compare: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, f := range []string{"markdown", "html"} {
		stdout, stderr, code = runPab(t, append([]string{"compare", "--format", f}, dirs...)...)
		if code != 0 || strings.Count(stdout, "DIFFERS: recording") != 3 || strings.Count(stdout, "agent-a") < 3 {
			t.Errorf("compare --format %s: exit %d\n%s\n%s", f, code, stdout, stderr)
		}
	}

	// bad input: an error naming the file, nothing on stdout
	notBatch := t.TempDir()
	truncated := t.TempDir()
	whole, _ := os.ReadFile(filepath.Join(dirs[0], batch.FileSummary))
	os.WriteFile(filepath.Join(truncated, batch.FileSummary), whole[:len(whole)/2], 0o644)
	for _, tc := range []struct{ dir, want string }{
		{notBatch, filepath.Join(notBatch, batch.FileSummary) + ": no such file"},
		{truncated, filepath.Join(truncated, batch.FileSummary) + ": not valid JSON (truncated?)"},
		{filepath.Join(root, "nope"), filepath.Join(root, "nope")},
	} {
		stdout, stderr, code := runPab(t, "compare", dirs[0], tc.dir)
		if code == 0 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("compare %s: exit %d, stdout %q, stderr %q; want an error naming %s", tc.dir, code, stdout, stderr, tc.want)
		}
	}
}
