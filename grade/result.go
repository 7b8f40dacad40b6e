package grade

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// ResultFormat is the version of result.json's layout.
const ResultFormat = 1

// Run statuses (Result.Status).
const (
	// StatusScored: the run was graded; Score is set.
	StatusScored = "scored"
	// StatusNotScored: no answer was given to a grading that reads it (require, checks),
	// or the task has no grading.yaml; the page list is still reported.
	StatusNotScored = "not_scored"
	// StatusNotExecutable: the run met something the task cannot be done past (a
	// not_executable entry of grading.yaml matched a request); it is not a score of 0.
	StatusNotExecutable = "not_executable"
	// StatusError: grading failed (the judge failed, grading.yaml is invalid, the replay log
	// could not be read, or a line of it that could not be read may be a request a must_not
	// entry forbids); Notes say why.
	StatusError = "error"
)

// What failed when Status is error (Result.ErrorKind).
const (
	// ErrorJudge: the judge failed (or none is configured).
	ErrorJudge = "judge"
	// ErrorGrading: grading.yaml (or task.yaml) could not be used.
	ErrorGrading = "grading"
	// ErrorLog: the replay log could not be read, or a line that could not be read may be
	// a request a must_not entry forbids.
	ErrorLog = "log"
	// ErrorGuard: the guard's trace or result could not be read, do not belong to the
	// grading's mode or to each other, or a trace line that could not be read may be an
	// event a guard forbid names.
	ErrorGuard = "guard"
)

// Item results (Item.Result).
const (
	ResultPass    = "pass"
	ResultFail    = "fail"
	ResultError   = "error"   // the judge could not answer
	ResultSkipped = "skipped" // not evaluated (not executable, or grading stopped)
)

// Item kinds (Item.Kind).
const (
	KindRequire = "require"
	KindCheck   = "check"
	KindTrace   = "trace"
)

// Result is one graded run: what result.json holds and report.html shows. It holds no
// wall-clock time of grading, so grading the same run twice gives the same bytes.
type Result struct {
	Format int    `json:"format"`
	Task   string `json:"task"`
	Title  string `json:"title,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	// Status is StatusScored, StatusNotScored, StatusNotExecutable or StatusError.
	Status string `json:"status"`
	// Score is from 0 to 1; nil unless Status is scored.
	Score *float64 `json:"score"`
	// Passed is true when Score is 1.
	Passed bool `json:"passed"`
	// ErrorKind says what failed when Status is error: ErrorJudge, ErrorGrading, ErrorLog
	// or ErrorGuard.
	ErrorKind string `json:"error_kind,omitempty"`
	// Notes explain the status and anything unusual (an HTML answer, bad log lines).
	Notes []string `json:"notes,omitempty"`
	// Grading is the grading file used, relative to the task repository when inside it.
	Grading string `json:"grading,omitempty"`
	// Judge describes the judge used; nil when none was needed.
	Judge *JudgeInfo `json:"judge,omitempty"`
	// Answer is the answer graded; nil without --answer.
	Answer *AnswerInfo `json:"answer,omitempty"`
	// Extracted are the fields the judge extracted, in extract order.
	Extracted []Extracted `json:"extracted,omitempty"`
	// Items are every require, check and trace entry in that order, then the guard
	// section's items (required fields, uploads, forbidden things, the end state).
	Items []Item `json:"items"`
	// Pages are the pages the agent opened.
	Pages Pages `json:"pages"`
	// Log describes the replay log read.
	Log *LogRead `json:"log,omitempty"`
	// Requests counts the log's requests by how replay answered them (exact, fuzzy, miss...).
	Requests map[string]int `json:"requests,omitempty"`
	// Guard is what was read from the run's pab guard trace and result, for a grading with
	// a guard section.
	Guard *GuardRun `json:"guard,omitempty"`
	// Provenance says what produced this result: the recording, grading file and rules
	// graded against and the pab build (docs/grading.md "Provenance"); nil when the
	// caller gave none.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// RecordingMismatch returns one line saying that the replay log was written against
// another recording than the one graded with, or "" when they agree or cannot be
// compared (the log names no recording, or names a hash of another kind).
func (r *Result) RecordingMismatch() string {
	p, l := r.Provenance, r.Log
	if p == nil || l == nil || p.Recording == "" || l.Recording == "" || p.RecordingOf != l.RecordingOf {
		return ""
	}
	if p.Recording == l.Recording {
		return ""
	}
	return fmt.Sprintf("the replay log %s was written against recording %s, but the run is graded with recording %s", l.File, short(l.Recording), short(p.Recording))
}

// short is the first 16 hex digits of a hash.
func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}

// JudgeInfo names the judge and counts its calls.
type JudgeInfo struct {
	// Name is the judge and model ("anthropic/claude-opus-5-5").
	Name string `json:"name"`
	// Models are the models that actually answered (more than one when a fallback ran).
	Models []string `json:"models,omitempty"`
	// Samples is how many times each question was asked.
	Samples int `json:"samples"`
	// Calls counts the replies used. Cached counts those that came from the cache; it is
	// printed by pab grade but kept out of result.json and report.html, so that grading a
	// run again gives the same files.
	Calls  int `json:"calls"`
	Cached int `json:"-"`
}

// AnswerInfo is the answer as graded.
type AnswerInfo struct {
	File string `json:"file,omitempty"`
	// Bytes is the size of the answer file.
	Bytes int64 `json:"bytes"`
	// Text is the answer as shown to the judge (HTML reduced to text, invalid UTF-8
	// replaced); empty when the answer was too large to grade.
	Text string `json:"text"`
	// Problem says what was wrong with the answer file, if anything ("empty", "html",
	// "not UTF-8", "too large").
	Problem string `json:"problem,omitempty"`
}

// Extracted is one extracted field.
type Extracted struct {
	Field string `json:"field"`
	Type  string `json:"type"`
	// Raw is the value as the judge gave it (JSON); null when the answer does not give it.
	Raw json.RawMessage `json:"raw"`
	// Value is the value as pab read it: a number for money and number, a string for text,
	// a boolean for boolean; nil when absent or unreadable.
	Value any `json:"value"`
	// Currency is the currency of a money value, when the answer names one.
	Currency string `json:"currency,omitempty"`
	// Problem says why Raw could not be read as the field's type.
	Problem string `json:"problem,omitempty"`
	// Agreement is the share of samples that gave this value (1 with one sample).
	Agreement float64 `json:"agreement"`
}

// Item is the outcome of one require, check or trace entry.
type Item struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Required items fail the whole run; others carry Weight.
	Required bool    `json:"required"`
	Weight   float64 `json:"weight,omitempty"`
	// Result is pass, fail, error or skipped.
	Result string `json:"result"`
	// Reason is one line saying why, for a person.
	Reason string `json:"reason"`
	// Expected and Actual are the compared values as text (require), or the question and
	// the judge's yes/no (check), or the request pattern (trace).
	Expected string `json:"expected,omitempty"`
	Actual   string `json:"actual,omitempty"`
	// JudgeReason is the judge's one-line reason (check).
	JudgeReason string `json:"judge_reason,omitempty"`
	// Agreement is the share of samples that gave the majority verdict (check).
	Agreement float64 `json:"agreement,omitempty"`
	// Request is the log line that decided a trace item, when one did.
	Request *Request `json:"request,omitempty"`
	// Line is the item's line in grading.yaml.
	Line int `json:"line,omitempty"`
}

// Request is a replay log line as shown in a result.
type Request struct {
	Line   int    `json:"line"` // position among the log's good lines, from 1
	Time   string `json:"time"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"`
	Source string `json:"source"`
}

// Pages are the documents the agent opened (Sec-Fetch-Dest: document), in order.
type Pages struct {
	Opened []Page `json:"opened"`
	// NotFound has one row per matching key of the opened pages answered 404.
	NotFound []NotFound `json:"not_found"`
	// OpenedOmitted counts the pages opened after the first MaxPagesOpened, which are not
	// listed.
	OpenedOmitted int `json:"opened_omitted,omitempty"`
	// NotFoundOmitted counts the 404 pages whose key came after the first MaxPagesNotFound
	// keys, which are not listed.
	NotFoundOmitted int `json:"not_found_omitted,omitempty"`
}

// Page is one page the agent opened.
type Page struct {
	Time   string `json:"time"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"`
	Source string `json:"source"`
	// Title is the recorded page's title, when the recording knows it.
	Title string `json:"title,omitempty"`
}

// NotFound is a page that came back 404, grouped by matching key.
type NotFound struct {
	Key string `json:"key"`
	// Site is the rules site of the host (or the host when no site file applies).
	Site string `json:"site"`
	// Route is the rules endpoint that applied, else the path of the key.
	Route    string `json:"route"`
	FirstURL string `json:"first_url"`
	Count    int    `json:"count"`
	// Source is "miss" when the recording has no copy; any other source means the site
	// itself answered 404 while recording.
	Source string `json:"source"`
}

// score computes Score, Passed and Status from the items: a failed (or errored) required
// item scores 0; otherwise the passed weight over the total weight, or 1 with no weighted
// item.
func (r *Result) score() {
	var total, passed float64
	for _, it := range r.Items {
		if it.Result == ResultSkipped {
			continue
		}
		if it.Required {
			if it.Result != ResultPass {
				zero := 0.0
				r.Score, r.Passed = &zero, false
				return
			}
			continue
		}
		total += it.Weight
		if it.Result == ResultPass {
			passed += it.Weight
		}
	}
	s := 1.0
	if total > 0 {
		s = passed / total
	}
	r.Score, r.Passed = &s, s == 1
}

// WriteFiles writes result.json and report.html into dir (created if missing), each through
// a temporary file renamed into place, so a reader never sees half a file.
func (r *Result) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, "result.json"), r, 0o644); err != nil {
		return err
	}
	html, err := RenderReport(r)
	if err != nil {
		return fmt.Errorf("render report.html: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, "report.html"), html, 0o644)
}

// ReadResult reads a result.json file.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: not a result.json: %w", path, err)
	}
	if r.Format != ResultFormat {
		return nil, fmt.Errorf("%s: result format %d, want %d", path, r.Format, ResultFormat)
	}
	return &r, nil
}
