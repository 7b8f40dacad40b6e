package grade

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pab-dev/pab/internal/mapx"
	"github.com/pab-dev/pab/replay"
)

//go:embed report.html.tmpl
var reportTemplateText string

// reportTemplate is parsed once; a bad template is a build defect, so it panics at start-up
// (and in every test) rather than at the first grading.
var reportTemplate = template.Must(template.New("report").Option("missingkey=error").Parse(reportTemplateText))

// RenderReport renders r as report.html: one self-contained UTF-8 HTML page (one inline
// style sheet, no script, no image, no font or other resource loaded from anywhere) that
// shows the status and score, every item, the extracted fields, the answer in full, the
// pages the agent opened and the ones that came back 404, the judge and the log read.
// Every string of r is escaped as text; URLs are shown as text, not links. The same r
// gives the same bytes. It fails only when r is nil or the page cannot be rendered.
func RenderReport(r *Result) ([]byte, error) {
	if r == nil {
		return nil, errors.New("render report: no result (nil *Result)")
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, newReportView(r)); err != nil {
		return nil, fmt.Errorf("render report: %w", err)
	}
	return buf.Bytes(), nil
}

// reportView is what the template shows: every value already formatted as text, so the
// template holds layout only.
type reportView struct {
	PageTitle string
	Task      string
	Title     string
	Prompt    string

	Badge       string // "66.7%", "NOT SCORED", ...
	Verdict     string // "PASS", "FAIL" (scored only)
	BadgeClass  string // CSS class: pass, fail, none, notexec, error
	StatusLine  string // one sentence explaining the status
	Notes       []string
	NotesAlarm  bool // the notes explain an error: shown prominently
	Items       []reportItem
	ItemCounts  string
	Extracted   []reportField
	Answer      *reportAnswer
	Opened      []reportPage
	NotFound    []reportNotFound
	Judge       *reportJudge
	Grading     string
	Log         *reportLog
	Requests    []reportCount
	RequestsSum int
	Guard       *reportGuard
}

// reportGuard is what was read from the guard's files.
type reportGuard struct {
	TraceFile, ResultFile string
	Lines, Bad            int
	Outcome, Mode         string
	Summary               string
	Filled                []GuardEvent
	FilledMore            int // field.filled events not listed
	Uploaded              []string
}

type reportItem struct {
	Symbol      string
	Result      string
	Class       string
	Kind        string
	ID          string
	Role        string // "required" or "weight 2"
	Line        int
	Expected    string
	Actual      string
	Reason      string
	JudgeReason string
	Agreement   string
	Request     *reportRequest
}

type reportRequest struct {
	Line   int
	Time   string
	Method string
	URL    string
	Status string
	Source string
}

type reportField struct {
	Field     string
	Type      string
	Value     string
	Absent    bool // pab read no value
	Raw       string
	Problem   string
	Agreement string
}

type reportAnswer struct {
	File    string
	Bytes   string
	Text    string
	Problem string
}

type reportPage struct {
	Time   string
	Method string
	URL    string
	Status string
	Source string
	Title  string
}

type reportNotFound struct {
	Site     string
	Route    string
	FirstURL string
	Count    int
	Source   string
	Why      string
	Key      string
}

type reportJudge struct {
	Name    string
	Models  string
	Samples int
	Calls   int
	Cached  int
}

type reportLog struct {
	File     string
	Lines    int
	Bad      int
	BadLines []BadLine
	More     int // bad lines counted but not listed
}

type reportCount struct {
	Source string
	Count  int
}

func newReportView(r *Result) *reportView {
	v := &reportView{
		Task:    r.Task,
		Title:   r.Title,
		Prompt:  r.Prompt,
		Notes:   r.Notes,
		Grading: r.Grading,
	}
	samples := 0
	if r.Judge != nil {
		samples = r.Judge.Samples
	}
	v.setStatus(r)
	v.addItems(r, samples)
	v.addExtracted(r, samples)
	v.addRun(r)
	return v
}

// setStatus sets v's badge, verdict, status line and page title from r's status.
func (v *reportView) setStatus(r *Result) {
	switch r.Status {
	case StatusScored:
		if r.Score != nil {
			v.Badge = reportPercent(*r.Score)
		} else {
			v.Badge = "SCORED"
		}
		if r.Passed {
			v.Verdict, v.BadgeClass = "PASS", "pass"
			v.StatusLine = "Scored: every required item passed and the run got the full score."
		} else {
			v.Verdict, v.BadgeClass = "FAIL", "fail"
			v.StatusLine = "Scored: the run did not get the full score."
			if r.Score == nil {
				v.StatusLine = "Scored, but the result holds no score."
			}
		}
	case StatusNotScored:
		v.Badge, v.BadgeClass = "NOT SCORED", "none"
		v.StatusLine = "Not scored: there was no answer to grade, or the task has no grading file. The pages are still listed."
	case StatusNotExecutable:
		v.Badge, v.BadgeClass = "NOT EXECUTABLE", "notexec"
		v.StatusLine = "Not executable: the run reached something the task cannot be done past. This is not a score of 0."
	case StatusError:
		v.Badge, v.BadgeClass = "ERROR", "error"
		v.StatusLine = "Grading failed; the notes below say why."
		v.NotesAlarm = true
	default:
		v.Badge, v.BadgeClass = "UNKNOWN STATUS", "error"
		v.StatusLine = fmt.Sprintf("The result has status %q, which this report does not know.", r.Status)
		v.NotesAlarm = true
	}
	v.PageTitle = "pab grade: " + r.Task + " — " + v.Badge
	if v.Verdict != "" {
		v.PageTitle += " " + v.Verdict
	}
}

// addItems adds r's items to v with their counts; samples is the judge's samples per
// question.
func (v *reportView) addItems(r *Result, samples int) {
	counts := map[string]int{}
	for _, it := range r.Items {
		ri := reportItem{
			Result:      it.Result,
			Kind:        it.Kind,
			ID:          it.ID,
			Line:        it.Line,
			Expected:    it.Expected,
			Actual:      it.Actual,
			Reason:      it.Reason,
			JudgeReason: it.JudgeReason,
		}
		ri.Symbol, ri.Class = reportMark(it.Result)
		if ri.Result == "" {
			ri.Result = "(none)"
		}
		counts[ri.Result]++
		switch {
		case it.Required:
			ri.Role = "required"
		case it.Weight != 0:
			ri.Role = "weight " + reportNumber(it.Weight)
		}
		if it.Agreement > 0 && it.Agreement < 1 {
			ri.Agreement = reportAgreement(it.Agreement, samples)
		}
		if q := it.Request; q != nil {
			ri.Request = &reportRequest{
				Line: q.Line, Time: q.Time, Method: q.Method, URL: q.URL,
				Status: reportHTTPStatus(q.Status), Source: q.Source,
			}
		}
		v.Items = append(v.Items, ri)
	}
	v.ItemCounts = reportCounts(counts, len(r.Items))
}

// addExtracted adds the fields extracted from r's answer to v.
func (v *reportView) addExtracted(r *Result, samples int) {
	for _, f := range r.Extracted {
		rf := reportField{
			Field:   f.Field,
			Type:    f.Type,
			Raw:     reportRaw(f.Raw),
			Problem: f.Problem,
		}
		if f.Value == nil {
			rf.Absent = true
		} else {
			rf.Value = reportValue(f.Value)
			if f.Currency != "" {
				rf.Value += " " + f.Currency
			}
		}
		switch {
		case f.Agreement > 0 && f.Agreement < 1:
			rf.Agreement = reportAgreement(f.Agreement, samples)
		case f.Agreement >= 1:
			rf.Agreement = "all samples"
		}
		v.Extracted = append(v.Extracted, rf)
	}
}

// addRun adds what r says of the run to v: the guard's files, the answer, the pages opened
// and not found, the judge, the log and the request counts.
func (v *reportView) addRun(r *Result) {
	if gr := r.Guard; gr != nil {
		g := &reportGuard{TraceFile: gr.TraceFile, ResultFile: gr.ResultFile, Lines: gr.Lines, Bad: gr.Bad,
			Filled: gr.Filled, FilledMore: gr.FilledTotal - len(gr.Filled)}
		if res := gr.Result; res != nil {
			g.Outcome, g.Mode, g.Summary = outcomeText(res), res.Mode, res.Summary
		}
		for _, e := range gr.Uploaded {
			g.Uploaded = append(g.Uploaded, fmt.Sprintf("%s (trace line %d)", strings.ReplaceAll(e.Kind, "_", " "), e.Line))
		}
		v.Guard = g
	}

	if a := r.Answer; a != nil {
		v.Answer = &reportAnswer{File: a.File, Bytes: reportBytes(a.Bytes), Text: a.Text, Problem: a.Problem}
	}

	for _, p := range r.Pages.Opened {
		v.Opened = append(v.Opened, reportPage{
			Time: p.Time, Method: p.Method, URL: p.URL, Status: reportHTTPStatus(p.Status),
			Source: p.Source, Title: p.Title,
		})
	}
	for _, n := range r.Pages.NotFound {
		why := "the site answered 404 while recording (" + n.Source + ")"
		if replay.Source(n.Source) == replay.SourceMiss {
			why = "not in the recording"
		}
		v.NotFound = append(v.NotFound, reportNotFound{
			Site: n.Site, Route: n.Route, FirstURL: n.FirstURL, Count: n.Count,
			Source: n.Source, Why: why, Key: n.Key,
		})
	}

	if j := r.Judge; j != nil {
		v.Judge = &reportJudge{
			Name: j.Name, Models: strings.Join(j.Models, ", "),
			Samples: j.Samples, Calls: j.Calls,
		}
	}
	if l := r.Log; l != nil {
		rl := &reportLog{File: l.File, Lines: l.Lines, Bad: l.Bad, BadLines: l.BadLines}
		if l.Bad > len(l.BadLines) {
			rl.More = l.Bad - len(l.BadLines)
		}
		v.Log = rl
	}
	for s, n := range r.Requests {
		v.Requests = append(v.Requests, reportCount{Source: s, Count: n})
		v.RequestsSum += n
	}
	sort.Slice(v.Requests, func(a, b int) bool {
		if v.Requests[a].Count != v.Requests[b].Count {
			return v.Requests[a].Count > v.Requests[b].Count
		}
		return v.Requests[a].Source < v.Requests[b].Source
	})
}

// reportMark gives an item result's symbol (shown next to its name, so colour is never the
// only sign) and CSS class.
func reportMark(result string) (symbol, class string) {
	switch result {
	case ResultPass:
		return "✓", "pass"
	case ResultFail:
		return "✗", "fail"
	case ResultError:
		return "!", "error"
	case ResultSkipped:
		return "–", "skipped"
	}
	return "?", "error"
}

// reportPercent formats a share from 0 to 1 as a percentage with at most one decimal:
// 2/3 -> "66.7%", 1 -> "100%", 0.5 -> "50%".
func reportPercent(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "invalid score"
	}
	s := strconv.FormatFloat(f*100, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		s = "0"
	}
	return s + "%"
}

// reportNumber formats a number without trailing zeros: 2 -> "2", 0.5 -> "0.5".
func reportNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// reportAgreement says how many of the samples agreed: "2 of 3 samples agreed (66.7%)"
// when the share is a whole number of samples, else "66.7% of samples agreed".
func reportAgreement(a float64, samples int) string {
	if samples > 0 {
		k := math.Round(a * float64(samples))
		if math.Abs(k/float64(samples)-a) < 1e-9 {
			return fmt.Sprintf("%d of %d samples agreed (%s)", int(k), samples, reportPercent(a))
		}
	}
	return reportPercent(a) + " of samples agreed"
}

// reportHTTPStatus shows an HTTP status, or a dash when none was sent.
func reportHTTPStatus(s int) string {
	if s == 0 {
		return "—"
	}
	return strconv.Itoa(s)
}

// reportBytes shows a size in bytes, with a KiB or MiB reading when large.
func reportBytes(n int64) string {
	s := strconv.FormatInt(n, 10) + " bytes"
	switch {
	case n == 1:
		s = "1 byte"
	case n >= 1<<20:
		s += " (" + strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB)"
	case n >= 1<<10:
		s += " (" + strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB)"
	}
	return s
}

// reportValue shows an extracted value as pab read it: numbers without trailing zeros,
// strings as they are, anything else as JSON.
func reportValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return reportNumber(x)
	case float32:
		return reportNumber(float64(x))
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// reportRaw shows the judge's raw JSON value compactly; invalid JSON is shown as it is.
func reportRaw(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// reportCounts sums items by result: "3 items: 2 pass, 1 fail".
func reportCounts(counts map[string]int, total int) string {
	if total == 0 {
		return ""
	}
	var parts []string
	for _, k := range mapx.OrderedKeys(counts, []string{ResultPass, ResultFail, ResultError, ResultSkipped}) {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	noun := "items"
	if total == 1 {
		noun = "item"
	}
	return fmt.Sprintf("%d %s: %s", total, noun, strings.Join(parts, ", "))
}
