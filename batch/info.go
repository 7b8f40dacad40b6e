// Package batch runs an agent on many tasks, several times each (pab run): for every task and
// repeat a fresh replay (and optionally a browser or pab guard), the agent command in its own
// process group, then grading, into one run directory; at the end summary.json and
// index.html for the batch. It also grades run directories written elsewhere (a Kubernetes
// job) the same way (Collect). The layout and the agent contract are in docs/run.md.
package batch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pab-dev/pab/grade"
)

// Run statuses (Info.Status). See docs/run.md for what each means.
const (
	StatusGraded         = "graded"
	StatusAgentFailed    = "agent_failed"
	StatusNoBrowsing     = "no_browsing"
	StatusNotScored      = "not_scored"
	StatusNotExecutable  = "not_executable"
	StatusNoAnswer       = "no_answer"
	StatusAnswerTooLarge = "answer_too_large"
	StatusTimeout        = "timeout"
	StatusError          = "error"
	StatusInterrupted    = "interrupted"
	StatusRunning        = "running"
)

// What failed in a run with status error (Info.ErrorKind): pab's harness, or grading
// (grade.ErrorJudge, grade.ErrorGrading, grade.ErrorLog, grade.ErrorGuard).
const (
	// ErrorHarness: pab itself failed around the agent: a replay, browser or guard did not
	// start, a file could not be written (disk full), there is no replay.jsonl, the task
	// could not be opened.
	ErrorHarness = "harness"
)

// InfoFormat is the version of run.json's layout.
const InfoFormat = 1

// File names inside a run directory.
const (
	FileLog     = "replay.jsonl"
	FileAnswer  = "answer.txt"
	FilePrompt  = "prompt.txt"
	FileStdout  = "agent.stdout"
	FileStderr  = "agent.stderr"
	FileInfo    = "run.json"
	FileResult  = "result.json"
	FileReport  = "report.html"
	FileSummary = "summary.json"
	FileIndex   = "index.html"
)

// maxInfoSize bounds a run.json read back (--resume, --collect).
const maxInfoSize = 1 << 20

// Info is run.json: how one run went. A pod writing run directories for --collect may give
// only ExitCode, Signal, TimedOut, Started and Ended; the rest is filled in by pab.
type Info struct {
	Format int    `json:"format"`
	Task   string `json:"task"`
	Repeat int    `json:"repeat"`
	// Status is one of the Status constants.
	Status string `json:"status"`
	// Finished is true when the run ended with a final status (not running or
	// interrupted); --resume skips finished runs.
	Finished bool `json:"finished"`
	// ExitCode is the agent's exit status; -1 when a signal ended it; nil when unknown.
	ExitCode *int `json:"exit_code"`
	// Signal names the signal that ended the agent ("SIGKILL"), if one did.
	Signal string `json:"signal,omitempty"`
	// TimedOut is true when the time limit killed the agent.
	TimedOut bool `json:"timed_out,omitempty"`
	// Started and Ended are RFC 3339 UTC times of the agent's start and end.
	Started string `json:"started,omitempty"`
	Ended   string `json:"ended,omitempty"`
	// DurationMS is the agent's wall-clock time in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Requests counts the replay log's requests by source (exact, fuzzy, miss, ...) and
	// "total".
	Requests map[string]int `json:"requests,omitempty"`
	// Score is the grade from 0 to 1; nil when not scored.
	Score *float64 `json:"score"`
	// Passed is true when Score is 1 and the agent opened a page (not NoBrowsing).
	Passed bool `json:"passed"`
	// GradeStatus is result.json's status (scored, not_scored, not_executable, error).
	GradeStatus string `json:"grade_status,omitempty"`
	// Pages is how many pages the agent opened (document requests of the replay log, as
	// grading counts them); nil when unknown (no log was read).
	Pages *int `json:"pages,omitempty"`
	// NoBrowsing is true when the replay log was read and holds no page opened: the agent
	// never used a browser. Such a run never passes, whatever its status.
	NoBrowsing bool `json:"no_browsing,omitempty"`
	// ErrorKind says what failed when Status is error: ErrorHarness, or what grading
	// reported (judge, grading, log, guard).
	ErrorKind string `json:"error_kind,omitempty"`
	// AnswerBytes is the size of the answer file; -1 when there was none.
	AnswerBytes int64 `json:"answer_bytes"`
	// StdoutBytes and StderrBytes are what the agent wrote, dropped bytes included.
	StdoutBytes int64 `json:"stdout_bytes,omitempty"`
	StderrBytes int64 `json:"stderr_bytes,omitempty"`
	// Error says what went wrong for status error, timeout, interrupted, and why a run is
	// not graded; Notes add anything unusual.
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// Provenance is result.json's: the recording, grading file and rules the run was
	// graded against and the pab build that graded it; nil when the run was not graded.
	Provenance *grade.Provenance `json:"provenance,omitempty"`
	// Usage is the run's model usage (pab run meters the agent's and the judge's calls:
	// usage.go, docs/run.md "Model usage and cost"); absent when the run was not metered.
	Usage *RunUsage `json:"usage,omitempty"`
}

// readInfo reads dir/run.json; (nil, nil) when there is none.
func readInfo(dir string) (*Info, error) {
	f, err := os.Open(filepath.Join(dir, FileInfo))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInfoSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if len(data) > maxInfoSize {
		return nil, fmt.Errorf("%s: over %d bytes", f.Name(), maxInfoSize)
	}
	var in Info
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("%s: not a run.json: %w", f.Name(), err)
	}
	if in.Format != 0 && in.Format != InfoFormat {
		return nil, fmt.Errorf("%s: format %d, want %d", f.Name(), in.Format, InfoFormat)
	}
	return &in, nil
}

// writeAtomic writes data to path through a temporary file in the same directory, synced
// and renamed into place; on any error the temporary file is removed.

// utc formats t as run.json times: RFC 3339 UTC with milliseconds.
func utc(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
