package batch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/internal/meter"
)

// TestAddUsage: tokens and costs add up; one run without a price makes the row's cost
// unknown while the priced part is kept; a run whose judge was not metered makes the
// judge's cost unknown.
func TestAddUsage(t *testing.T) {
	c := func(v float64) *float64 { return &v }
	var u UsageTotals
	zero := 0.0
	u.CostUSD, u.JudgeCostUSD = &zero, &zero
	addUsage(&u, &RunUsage{Totals: meter.Totals{Calls: 3, InputTokens: 1000, OutputTokens: 200, CostUSD: c(0.25), KnownCostUSD: 0.25}, Judge: &meter.Totals{CostUSD: c(0.01)}})
	addUsage(&u, &RunUsage{Totals: meter.Totals{Calls: 2, InputTokens: 500, OutputTokens: 100, CostUSD: c(0.5), KnownCostUSD: 0.5}, Judge: &meter.Totals{CostUSD: c(0.02)}})
	if u.Runs != 2 || u.Calls != 5 || u.InputTokens != 1500 || u.OutputTokens != 300 || u.CostUSD == nil || *u.CostUSD != 0.75 || u.JudgeCostUSD == nil || *u.JudgeCostUSD != 0.03 {
		t.Fatalf("%+v", u)
	}
	addUsage(&u, &RunUsage{Totals: meter.Totals{Calls: 1, KnownCostUSD: 0.1, UnpricedCalls: 1}})
	if u.CostUSD != nil || u.KnownCostUSD != 0.85 || u.UnpricedCalls != 1 || u.JudgeCostUSD != nil {
		t.Errorf("after an unpriced run without a metered judge: %+v", u)
	}
}

// TestReadSummaryErrors: each bad batch names the file and what is wrong.
func TestReadSummaryErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := ReadSummary(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v", err)
	}
	for body, want := range map[string]string{
		`{"format": 1, "runs": []}`:             "format 1, want 2",
		`{"format": 2, "runs": [{"task": ""}]}`: "runs[0]: no task or status",
		`{"format": 2, "runs": [`:               "not valid JSON (truncated?)",
		`{"format": 2, "runs": {"task": "x"}}`:  "not a summary.json",
	} {
		os.WriteFile(filepath.Join(dir, FileSummary), []byte(body), 0o644)
		_, err := ReadSummary(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, FileSummary)) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q naming the file", body, err, want)
		}
	}
}

// FuzzCompare: any summary.json is compared or refused with an error, never a panic.
func FuzzCompare(f *testing.F) {
	f.Add([]byte(`{"format": 2, "agent": "a", "runs": [{"task": "t", "status": "graded", "passed": true, "dir": "t/1", "provenance": {"recording": "r", "pab": {"version": "v"}}}]}`))
	f.Add([]byte(`{"format": 2, "runs": [{"task": "t", "status": "error", "dir": "../x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, FileSummary), data, 0o644)
		c, err := Compare([]string{dir, dir})
		if err != nil {
			return
		}
		var b strings.Builder
		if err := c.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMarkdown(&b); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteHTML(&b); err != nil {
			t.Fatal(err)
		}
	})
}
