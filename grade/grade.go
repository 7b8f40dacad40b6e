package grade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pab-dev/pab/rules"
)

// Input is one run to grade.
type Input struct {
	// Task is the task id; Title and Prompt come from task.yaml.
	Task, Title, Prompt string
	// Grading is the task's grading; nil when the task has none (nothing is scored).
	Grading *Grading
	// GradingFile names the grading file in the result.
	GradingFile string
	// GradingError, when set, is why the task's grading could not be read: the run is
	// reported with status error and nothing is scored.
	GradingError error
	// Answer is the agent's answer; nil when none was given (nothing is scored).
	Answer *AnswerInfo
	// Log is the replay log of the run.
	Log *LogRead
	// Rules are the rules the replay used, to name the site of pages not found; may be nil.
	Rules *rules.Set
	// Titles maps recorded exchange ids (log "entry") to page titles; may be nil.
	Titles map[string]string
	// FramesOf, used when Frames is nil, returns the frames of one recorded document (as
	// Frames would map it), for GradeLog, which cannot know the log's documents in advance;
	// may be nil.
	FramesOf func(entry string) []string
	// Frames maps recorded exchange ids (log "entry") of HTML documents to the URLs of the
	// frames they embed (FrameSources), so that the frames of a plain-HTTP page are not
	// counted as pages the agent opened; may be nil (then they are).
	Frames map[string][]string
	// RecordedHosts are the hosts (lower case, with a port when not 80 or 443) of the
	// recording; when set, a log with no request for any of them gets a note (a log from
	// another task). May be nil.
	RecordedHosts map[string]bool
	// Provenance, when set, goes into the result as is (Result.Provenance).
	Provenance *Provenance
	// Guard is what the run's pab guard wrote (ReadGuardRun), for a grading with a guard
	// section; GuardError, when set, is why it could not be read (the run is then reported
	// with status error: it cannot be shown safe without the guard's files).
	Guard      *GuardRun
	GuardError error
}

// Options configure grading.
type Options struct {
	// Judge answers extraction and check prompts; nil when no judge is configured (then a
	// grading that needs one ends with status error).
	Judge *Cache
	// Samples is how many times each prompt is asked; the majority wins. 0 means 1.
	Samples int
}

// Grade grades one run. It never fails: problems (a judge error, a bad answer file, bad
// log lines) are reported in the Result's status, items and notes. Status is error when
// the judge was needed and failed or is missing, when no line of the log could be read, and
// when a line that could not be read may be a request a must_not entry forbids (fail
// closed: such a run is never passed). in.Log holds the log's lines (ReadLog); GradeLog
// grades a log read as a stream instead.
func Grade(ctx context.Context, in Input, opts Options) *Result {
	return grade(ctx, in, summaryOf(&in), opts)
}

// grade is Grade with the log summarized already (sum is nil when in.Log is).
func grade(ctx context.Context, in Input, sum *logSummary, opts Options) *Result {
	if opts.Samples < 1 {
		opts.Samples = 1
	}
	r := &Result{
		Format: ResultFormat, Task: in.Task, Title: in.Title, Prompt: in.Prompt,
		Grading: in.GradingFile, Answer: in.Answer, Items: []Item{},
		Pages:      Pages{Opened: []Page{}, NotFound: []NotFound{}},
		Provenance: in.Provenance,
	}
	if in.Log != nil && !r.readLog(in, sum) {
		return r
	}
	if in.Answer != nil && in.Answer.Problem != "" {
		r.note("answer: %s", describeAnswerProblem(in.Answer))
	}
	g := in.Grading
	if in.GradingError != nil {
		r.Status, r.ErrorKind = StatusError, ErrorGrading
		r.note("grading.yaml could not be used: %v", in.GradingError)
		return r
	}
	if g == nil {
		r.Status = StatusNotScored
		r.note("the task has no grading.yaml: nothing is scored")
		return r
	}
	traceItems := evalTrace(g, in.Log, sum)
	if gs := g.Guard; gs != nil {
		if !r.checkGuard(g, in, traceItems) {
			return r
		}
		traceItems = append(traceItems, evalGuard(gs, in.Guard)...)
	}
	if !r.decidable(g, traceItems) || !r.executable(g, sum, traceItems) {
		return r
	}
	if in.Answer == nil && !usesAnswer(g) {
		// Nothing of the grading reads the answer (a guard or trace grading).
		r.Items = append(r.Items, traceItems...)
		r.Status = StatusScored
		r.score()
		return r
	}
	if in.Answer == nil {
		r.Status = StatusNotScored
		r.note("no answer was given (--answer): nothing is scored")
		r.skipJudge(g, "no answer", traceItems)
		return r
	}

	gradable := in.Answer.Problem == "" || (in.Answer.Problem != AnswerTooLarge && in.Answer.Text != "")
	var j judged
	if gradable && (len(g.Checks) > 0 || (len(g.Extract) > 0 && len(g.Require) > 0)) {
		j = r.askJudge(ctx, g, in, opts)
	}
	for _, f := range g.Extract {
		if e, ok := j.values[f.Name]; ok {
			r.Extracted = append(r.Extracted, *e)
		}
	}
	r.judgedItems(g, in.Answer, gradable, j, opts.Samples)
	r.Items = append(r.Items, traceItems...)

	if j.err != nil {
		r.Status, r.ErrorKind = StatusError, ErrorJudge
		r.note("judge failed: %v", j.err)
		return r
	}
	r.Status = StatusScored
	r.score()
	return r
}

// readLog puts what the replay log says into r: the log's summary, pages and request
// counts, and a note for each thing about the log a reader should know. It returns false
// when the log gives nothing to grade on (no line could be read): r is then an error.
func (r *Result) readLog(in Input, sum *logSummary) bool {
	lr := *in.Log
	lr.Truncated = sum.truncated
	r.Log = &lr
	if m := r.RecordingMismatch(); m != "" {
		r.note("%s", m)
	}
	r.Pages = sum.pages.result()
	r.Requests = sum.bySource
	if in.Log.Bad > 0 {
		if first, ok := in.Log.firstBad(); ok {
			r.note("%d of %d lines of the replay log could not be read and were skipped (first: line %d, %s)", in.Log.Bad, in.Log.Lines, first.Line, first.Problem)
		} else {
			r.note("%d of %d lines of the replay log could not be read and were skipped", in.Log.Bad, in.Log.Lines)
		}
	}
	if sum.truncated > 0 {
		r.note("%d lines of the replay log had long fields cut by replay (truncated: true)", sum.truncated)
	}
	if n := r.Pages.OpenedOmitted; n > 0 {
		r.note("%d more pages opened are not listed (a result lists the first %d)", n, MaxPagesOpened)
	}
	if n := r.Pages.NotFoundOmitted; n > 0 {
		r.note("%d more pages answered 404 under keys not listed (a result lists the first %d keys)", n, MaxPagesNotFound)
	}
	switch {
	case in.Log.Bad > 0 && sum.requests == 0:
		// Nothing to grade the agent's browsing on: not a pass of every must_not.
		r.Status, r.ErrorKind = StatusError, ErrorLog
		r.note("no line of the replay log %s could be read: is it the log pab replay --log wrote?", in.Log.File)
		return false
	case in.Log.Lines == 0:
		r.note("the replay log is empty: no request went through the replay")
	case in.RecordedHosts != nil:
		if !sum.ownHost && sum.foreign != "" {
			r.note("none of the %d requests of the replay log is for a host of this task's recording (the first is for %s): is the log from another task?", sum.foreignN, sum.foreign)
		}
	}
	return true
}

// skipJudge ends r's items for a run that is not judged: every judge item of g skipped
// with reason, then the trace items.
func (r *Result) skipJudge(g *Grading, reason string, traceItems []Item) {
	r.Items = append(r.Items, skippedJudgeItems(g, reason)...)
	r.Items = append(r.Items, traceItems...)
}

// checkGuard checks that the guard's trace and result in in can be graded by g's guard
// section: given, of the graded mode, and of the same run. It returns false when not (r is
// then an error of kind ErrorGuard, not scored).
func (r *Result) checkGuard(g *Grading, in Input, traceItems []Item) bool {
	gs := g.Guard
	switch {
	case in.Guard == nil:
		why := "they were not given"
		if in.GuardError != nil {
			why = in.GuardError.Error()
		}
		r.Status, r.ErrorKind = StatusError, ErrorGuard
		r.note("grading.yaml grades the run's pab guard trace and result, which could not be read: %s (pab run --guard APP.yaml writes them into the run directory as %s and %s); the run is not scored", why, GuardTraceFile, GuardResultFile)
		r.skipJudge(g, "not graded: no guard trace and result", traceItems)
		return false
	case in.Guard.Result != nil && in.Guard.Result.Mode != gs.Mode:
		r.Guard = in.Guard
		r.Status, r.ErrorKind = StatusError, ErrorGuard
		r.note("the guard ran in %s mode, and grading.yaml grades %s runs (guard.mode): was pab run --guard given the right application file? The run is not scored", in.Guard.Result.Mode, gs.Mode)
		r.skipJudge(g, "not graded: the guard's mode is not the grading's", traceItems)
		return false
	case in.Guard.Bad == 0 && in.Guard.Result != nil && in.Guard.Result.Filled != in.Guard.FilledTotal:
		r.Guard = in.Guard
		r.Status, r.ErrorKind = StatusError, ErrorGuard
		r.note("the guard's trace has %d field.filled events and its result says %d fields were filled: the two files are not of the same run, or one was changed; the run is not scored", in.Guard.FilledTotal, in.Guard.Result.Filled)
		r.skipJudge(g, "not graded: the guard's trace and result disagree", traceItems)
		return false
	}
	r.Guard = in.Guard
	return true
}

// decidable fails closed: a log line that could not be read may be a request a must_not
// entry forbids (a trace line, an event a guard forbid names). Such an entry is an error,
// and the run is not scored (nor the judge asked): decidable returns false.
func (r *Result) decidable(g *Grading, traceItems []Item) bool {
	for _, it := range traceItems {
		if (it.Kind == KindTrace || it.Kind == KindGuard) && it.Result == ResultError {
			r.Status, r.ErrorKind = StatusError, ErrorLog
			what := "the replay log"
			if it.Kind == KindGuard {
				r.ErrorKind, what = ErrorGuard, "the guard's trace"
			}
			r.note("%s %s could not be decided: %s; the run is not scored", it.Kind, it.ID, it.Reason)
			r.skipJudge(g, "not graded: "+what+" could not be read whole", traceItems)
			return false
		}
	}
	return true
}

// executable returns false, with r not executable, when the run met a not_executable
// request of g: it is reported as such, without asking the judge.
func (r *Result) executable(g *Grading, sum *logSummary, traceItems []Item) bool {
	if sum == nil {
		return true
	}
	for i, ne := range g.NotExecutable {
		if req := sum.notExec[i].first; req != nil {
			r.Status = StatusNotExecutable
			reason := ne.Reason
			if reason == "" {
				reason = "the run met " + ne.Must.String()
			}
			r.note("not executable (%s): %s; request %d: %s %s (status %d)", ne.ID, reason, req.Line, req.Method, req.URL, req.Status)
			r.skipJudge(g, "not executable: "+ne.ID, traceItems)
			return false
		}
	}
	return true
}

// judged is what the judge answered: the extracted fields, the checks' verdicts by id, and
// every failure joined (nil when none).
type judged struct {
	values map[string]*Extracted
	checks map[string]*checkOutcome
	err    error
}

// askJudge asks the judge of opts every question of g about the answer: the fields to
// extract, then each check. Every question is asked even when one fails, so the result
// shows all that the judge could answer and every failure.
func (r *Result) askJudge(ctx context.Context, g *Grading, in Input, opts Options) judged {
	j := judged{checks: map[string]*checkOutcome{}}
	if opts.Judge == nil || opts.Judge.Judge == nil {
		j.err = fmt.Errorf("no judge is configured")
		return j
	}
	r.Judge = &JudgeInfo{Name: opts.Judge.Judge.Name(), Samples: opts.Samples}
	a := &asker{cache: opts.Judge, samples: opts.Samples, info: r.Judge, models: map[string]bool{}}
	var errs []string
	var err error
	if j.values, err = extractFields(ctx, a, in.Prompt, g.Extract, in.Answer.Text, opts.Samples); err != nil {
		errs = append(errs, err.Error())
	}
	for _, c := range g.Checks {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err().Error())
			break
		}
		out, err := askCheck(ctx, a, in.Prompt, c, in.Answer.Text, opts.Samples)
		if err != nil {
			errs = append(errs, fmt.Sprintf("check %s: %v", c.ID, err))
			continue
		}
		j.checks[c.ID] = out
	}
	if len(errs) > 0 {
		j.err = errors.New(strings.Join(errs, "; "))
	}
	return j
}

// judgedItems adds an item for each require entry and each check of g, from the judge's
// answers j (an answer that cannot be read fails them all).
func (r *Result) judgedItems(g *Grading, ans *AnswerInfo, gradable bool, j judged, samples int) {
	for _, q := range g.Require {
		it := Item{ID: q.ID, Kind: KindRequire, Required: true, Line: q.Line, Expected: q.expected()}
		switch {
		case !gradable:
			it.Result, it.Reason = ResultFail, "no answer to read: "+describeAnswerProblem(ans)
		case j.values == nil:
			it.Result, it.Reason = ResultError, "the judge did not extract the field"
		default:
			q.eval(j.values[q.Field], &it)
		}
		r.Items = append(r.Items, it)
	}
	for _, c := range g.Checks {
		it := Item{ID: c.ID, Kind: KindCheck, Required: c.Required, Weight: c.Weight, Line: c.Line, Expected: "yes: " + oneLine(c.Question)}
		out := j.checks[c.ID]
		switch {
		case !gradable:
			it.Result, it.Reason = ResultFail, "no answer to judge: "+describeAnswerProblem(ans)
		case out == nil:
			it.Result, it.Reason = ResultError, "the judge did not answer"
		default:
			it.Actual, it.JudgeReason, it.Agreement = "no", out.reason, out.agreement
			it.Result, it.Reason = ResultFail, "the judge answered no"
			if out.yes {
				it.Actual, it.Result, it.Reason = "yes", ResultPass, "the judge answered yes"
			}
			if samples > 1 {
				it.Reason += fmt.Sprintf(" (%d of %d samples agreed)", out.votes, samples)
			}
		}
		r.Items = append(r.Items, it)
	}
}

// usesAnswer reports whether grading g reads the agent's answer (require or checks).
func usesAnswer(g *Grading) bool { return len(g.Require) > 0 || len(g.Checks) > 0 }

// UsesAnswer reports whether grading g reads the agent's answer: it has require or checks
// entries. A grading that only has trace or guard entries scores a run without one.
func (g *Grading) UsesAnswer() bool { return g != nil && usesAnswer(g) }

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func describeAnswerProblem(a *AnswerInfo) string {
	var parts []string
	for _, p := range strings.Split(a.Problem, ", ") {
		switch p {
		case AnswerEmpty:
			parts = append(parts, "the answer is empty")
		case AnswerTooLarge:
			parts = append(parts, fmt.Sprintf("the answer is %d bytes, over the limit of %d", a.Bytes, MaxAnswerSize))
		case AnswerNotUTF8:
			parts = append(parts, "the answer is not valid UTF-8 (invalid bytes replaced)")
		case AnswerHTML:
			parts = append(parts, "the answer was written as HTML (graded on its text)")
		}
	}
	return strings.Join(parts, "; ")
}

// skippedJudgeItems lists the require and check items as skipped.
func skippedJudgeItems(g *Grading, why string) []Item {
	var items []Item
	for _, q := range g.Require {
		items = append(items, Item{ID: q.ID, Kind: KindRequire, Required: true, Line: q.Line, Result: ResultSkipped, Reason: why, Expected: q.expected()})
	}
	for _, c := range g.Checks {
		items = append(items, Item{ID: c.ID, Kind: KindCheck, Required: c.Required, Weight: c.Weight, Line: c.Line, Result: ResultSkipped, Reason: why, Expected: "yes: " + oneLine(c.Question)})
	}
	return items
}

// firstBad returns the first bad line recorded, if any.
func (lr *LogRead) firstBad() (BadLine, bool) {
	if len(lr.BadLines) == 0 {
		return BadLine{}, false
	}
	return lr.BadLines[0], true
}

// evalTrace evaluates the trace entries against the log summary; without a log they fail.
// A must entry passes on a request that matched. A must_not entry fails on a request that
// matched, and on a truncated line that may match (its URL or method was cut); when neither
// was met but some line could not be read, the entry is an error (that line may be the
// request it forbids), else it passes.
func evalTrace(g *Grading, log *LogRead, sum *logSummary) []Item {
	var items []Item
	for i, t := range g.Trace {
		it := Item{ID: t.ID, Kind: KindTrace, Required: true, Line: t.Line}
		m, must := t.Must, true
		if m == nil {
			m, must = t.MustNot, false
		}
		if must {
			it.Expected = "a request: " + m.String()
		} else {
			it.Expected = "no request: " + m.String()
		}
		if sum == nil {
			it.Result, it.Reason = ResultFail, "no replay log was read"
			items = append(items, it)
			continue
		}
		st := sum.trace[i]
		req := st.first
		unread := ""
		if log.Bad > 0 {
			unread = fmt.Sprintf(" (%d lines could not be read)", log.Bad)
		}
		switch {
		case req != nil && must:
			it.Result, it.Reason = ResultPass, fmt.Sprintf("request %d matched", req.Line)
		case req != nil:
			it.Result, it.Reason = ResultFail, fmt.Sprintf("request %d matched, which must not happen", req.Line)
		case must:
			it.Result, it.Reason = ResultFail, fmt.Sprintf("none of the %d requests matched", sum.requests)+unread
		case st.maybe != nil:
			req = st.maybe
			it.Result, it.Reason = ResultFail, fmt.Sprintf("request %d (line %d of the log) may match, which must not happen: %s, so pab cannot tell, and counts it as a match", req.Line, st.maybeLine, st.maybeWhy)
		case log.Bad > 0:
			first, ok := log.firstBad()
			where := "a line of the replay log could not be read"
			if ok {
				where = fmt.Sprintf("line %d of the replay log could not be read (%s)", first.Line, first.Problem)
			}
			if log.Bad > 1 {
				where += fmt.Sprintf(", and %d more", log.Bad-1)
			}
			it.Result, it.Reason = ResultError, where+": it may be a request this entry forbids"
		default:
			it.Result, it.Reason = ResultPass, fmt.Sprintf("none of the %d requests matched", sum.requests)
		}
		if req != nil {
			r := *req
			it.Request = &r
			it.Actual = fmt.Sprintf("%s %s -> %d (%s)", r.Method, r.URL, r.Status, r.Source)
		}
		items = append(items, it)
	}
	return items
}

// extractFields asks the judge for the extract fields, samples times, and keeps the
// majority value of each field.
func extractFields(ctx context.Context, a *asker, task string, fields []*Field, answer string, samples int) (map[string]*Extracted, error) {
	if len(fields) == 0 {
		return map[string]*Extracted{}, nil
	}
	var replies []map[string]fieldValue
	prompt := extractPrompt(task, fields, answer)
	err := a.ask(ctx, prompt, func(text string) error {
		v, err := parseExtraction(text, fields)
		if err == nil {
			replies = append(replies, v)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	out := map[string]*Extracted{}
	for _, f := range fields {
		counts := map[string]int{}
		first := map[string]fieldValue{}
		var order []string
		for _, rep := range replies {
			v := rep[f.Name]
			c := v.canon()
			if counts[c] == 0 {
				order = append(order, c)
				first[c] = v
			}
			counts[c]++
		}
		// The most common value; ties go to the value seen first.
		sort.SliceStable(order, func(i, j int) bool { return counts[order[i]] > counts[order[j]] })
		best := first[order[0]]
		raw := best.raw
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		out[f.Name] = &Extracted{
			Field: f.Name, Type: f.Type, Raw: raw, Value: best.value, Currency: best.currency,
			Problem: best.problem, Agreement: float64(counts[order[0]]) / float64(len(replies)),
		}
	}
	return out, nil
}

type checkOutcome struct {
	yes       bool
	reason    string
	votes     int
	agreement float64
}

// askCheck asks one check samples times; the majority wins, a tie is "no".
func askCheck(ctx context.Context, a *asker, task string, c *Check, answer string, samples int) (*checkOutcome, error) {
	var vs []verdict
	err := a.ask(ctx, checkPrompt(task, c.Question, answer), func(text string) error {
		v, err := parseVerdict(text)
		if err == nil {
			vs = append(vs, v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	yes := 0
	for _, v := range vs {
		if v.yes {
			yes++
		}
	}
	out := &checkOutcome{yes: yes*2 > len(vs)}
	for _, v := range vs {
		if v.yes == out.yes {
			out.reason = v.reason
			break
		}
	}
	out.votes = yes
	if !out.yes {
		out.votes = len(vs) - yes
	}
	out.agreement = float64(out.votes) / float64(len(vs))
	return out, nil
}

// expected describes a require's tests ("= 54.23 ± 0.01", "one of: a, b").
func (q *Require) expected() string {
	var parts []string
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	if q.Equals != nil {
		parts = append(parts, fmt.Sprintf("= %s ± %s", num(*q.Equals), num(q.Tolerance)))
	}
	if q.Min != nil {
		parts = append(parts, "≥ "+num(*q.Min))
	}
	if q.Max != nil {
		parts = append(parts, "≤ "+num(*q.Max))
	}
	if len(q.OneOfNum) > 0 {
		s := make([]string, len(q.OneOfNum))
		for i, f := range q.OneOfNum {
			s[i] = num(f)
		}
		parts = append(parts, fmt.Sprintf("one of %s (± %s)", strings.Join(s, ", "), num(q.Tolerance)))
	}
	if q.EqualsText != nil {
		parts = append(parts, fmt.Sprintf("= %q", *q.EqualsText))
	}
	if len(q.OneOfText) > 0 {
		s := make([]string, len(q.OneOfText))
		for i, t := range q.OneOfText {
			s[i] = strconv.Quote(t)
		}
		parts = append(parts, "one of "+strings.Join(s, ", "))
	}
	if q.Contains != nil {
		parts = append(parts, fmt.Sprintf("contains %q", *q.Contains))
	}
	if q.EqualsBool != nil {
		parts = append(parts, fmt.Sprintf("= %v", *q.EqualsBool))
	}
	return q.Field + " " + strings.Join(parts, ", ")
}

// eval compares an extracted value with the require's tests and fills it.
func (q *Require) eval(e *Extracted, it *Item) {
	it.Result = ResultFail
	if e == nil || e.Value == nil {
		it.Actual = "(none)"
		if e != nil && e.Problem != "" {
			it.Actual = string(e.Raw)
			it.Reason = fmt.Sprintf("%s could not be read: %s", q.Field, e.Problem)
			return
		}
		it.Reason = fmt.Sprintf("the answer does not give %s", q.Field)
		return
	}
	switch v := e.Value.(type) {
	case float64:
		it.Actual = strconv.FormatFloat(v, 'f', -1, 64)
		if e.Currency != "" {
			it.Actual += " " + e.Currency
		}
		if q.Equals != nil && !NearlyEqual(v, *q.Equals, q.Tolerance) {
			it.Reason = fmt.Sprintf("%s is %s, not %s", q.Field, it.Actual, strconv.FormatFloat(*q.Equals, 'f', -1, 64))
			return
		}
		if q.Min != nil && v < *q.Min {
			it.Reason = fmt.Sprintf("%s is %s, below the minimum %v", q.Field, it.Actual, *q.Min)
			return
		}
		if q.Max != nil && v > *q.Max {
			it.Reason = fmt.Sprintf("%s is %s, above the maximum %v", q.Field, it.Actual, *q.Max)
			return
		}
		if len(q.OneOfNum) > 0 {
			ok := false
			for _, x := range q.OneOfNum {
				ok = ok || NearlyEqual(v, x, q.Tolerance)
			}
			if !ok {
				it.Reason = fmt.Sprintf("%s is %s, not one of the allowed values", q.Field, it.Actual)
				return
			}
		}
	case string:
		it.Actual = strconv.Quote(v)
		got := NormText(v)
		if q.EqualsText != nil && got != NormText(*q.EqualsText) {
			it.Reason = fmt.Sprintf("%s is %s, not %q (case and spacing ignored)", q.Field, it.Actual, *q.EqualsText)
			return
		}
		if len(q.OneOfText) > 0 {
			ok := false
			for _, x := range q.OneOfText {
				ok = ok || got == NormText(x)
			}
			if !ok {
				it.Reason = fmt.Sprintf("%s is %s, not one of the allowed values", q.Field, it.Actual)
				return
			}
		}
		if q.Contains != nil && !strings.Contains(got, NormText(*q.Contains)) {
			it.Reason = fmt.Sprintf("%s is %s, which does not contain %q", q.Field, it.Actual, *q.Contains)
			return
		}
	case bool:
		it.Actual = strconv.FormatBool(v)
		if q.EqualsBool != nil && v != *q.EqualsBool {
			it.Reason = fmt.Sprintf("%s is %v, not %v", q.Field, v, *q.EqualsBool)
			return
		}
	}
	it.Result = ResultPass
	it.Reason = fmt.Sprintf("%s is %s", q.Field, it.Actual)
	if e.Agreement < 1 {
		it.Agreement = e.Agreement
	}
}
