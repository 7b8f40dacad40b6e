package grade

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/textcut"
)

// Bounds of what grading reads from the guard's files.
const (
	// MaxGuardTraceLine is the longest trace line read, in bytes (the guard writes lines of
	// well under 4 KiB: detail strings are cut at 300 bytes, URLs at 2000); a longer line is
	// counted as bad.
	MaxGuardTraceLine = 64 << 10
	// MaxGuardResult is the largest result envelope read (guard.ValidateResult's bound).
	MaxGuardResult = 1 << 20
	// MaxGuardFields is how many filled fields a GuardRun keeps, the first met;
	// GuardRun.FilledTotal counts them all.
	MaxGuardFields = 2000
	// maxGuardHits is how many events are kept per forbidden thing.
	maxGuardHits = 5
)

// File names of pab guard's trace and result in a run directory (pab run --guard).
const (
	GuardTraceFile  = "guard.trace.jsonl"
	GuardResultFile = "guard.result.json"
)

// GuardEvent is one event of a guard trace as grading keeps it: its line in the trace file
// (from 1, blank lines counted) and the detail keys grading looks at.
type GuardEvent struct {
	Line     int    `json:"line"`
	Type     string `json:"type"`
	Tool     string `json:"tool,omitempty"`
	Class    string `json:"class,omitempty"`
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Role     string `json:"role,omitempty"`
	Field    string `json:"field,omitempty"`
	Source   string `json:"source,omitempty"`
	Kind     string `json:"kind,omitempty"`
	URL      string `json:"url,omitempty"`
	Domain   string `json:"domain,omitempty"`
}

// GuardHits are the trace events of one forbidden thing: how many, and the first few.
type GuardHits struct {
	Count  int          `json:"count"`
	Events []GuardEvent `json:"events,omitempty"`
}

// GuardRun is what grading read from a run's guard files: a summary of the trace and the
// validated result envelope. It is built by ReadGuardRun (or by hand in tests).
type GuardRun struct {
	// TraceFile and ResultFile name the files read.
	TraceFile  string `json:"trace_file"`
	ResultFile string `json:"result_file"`
	// Lines counts the non-blank trace lines, Bad the ones that could not be read (not
	// JSON, no type, longer than MaxGuardTraceLine); BadLines are the first 20.
	Lines    int       `json:"lines"`
	Bad      int       `json:"bad"`
	BadLines []BadLine `json:"bad_lines,omitempty"`
	// Filled are the field.filled events, the first MaxGuardFields; FilledTotal counts all.
	Filled      []GuardEvent `json:"filled"`
	FilledTotal int          `json:"filled_total"`
	// Uploaded are the artifact.uploaded events (kind, line).
	Uploaded []GuardEvent `json:"uploaded,omitempty"`
	// Refused are the first fills refused as ungrounded that name their field, to tell why a
	// required field is missing.
	Refused []GuardEvent `json:"-"`
	// Hits are the events of each forbidden thing (ForbidNames) met.
	Hits map[string]*GuardHits `json:"hits,omitempty"`
	// Result is the guard's result envelope, as guard.ValidateResult normalized it.
	Result *guard.Result `json:"result"`
}

// ReadGuardRun reads a guard trace (JSONL, streamed: memory does not grow with it) and the
// result envelope pab guard wrote. A missing, non-regular or unreadable file, or a result that
// guard.ValidateResult refuses, is an error naming the file; bad trace lines are counted.
func ReadGuardRun(tracePath, resultPath string) (*GuardRun, error) {
	g := &GuardRun{TraceFile: tracePath, ResultFile: resultPath, Filled: []GuardEvent{}}
	data, err := readlimit.Regular(resultPath, MaxGuardResult)
	if err != nil {
		return nil, err
	}
	res, err := guard.ValidateResult(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", resultPath, err)
	}
	g.Result = &res
	f, err := readlimit.OpenRegular(tracePath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := g.ReadTrace(f); err != nil {
		return nil, fmt.Errorf("%s: %w", tracePath, err)
	}
	return g, nil
}

// traceLine is a trace line as decoded; detail values that are not strings are ignored.
type traceLine struct {
	Type        string          `json:"type"`
	URL         string          `json:"url"`
	Domain      string          `json:"domain"`
	PauseReason string          `json:"pauseReason"`
	Detail      json.RawMessage `json:"detail"`
}

// ReadTrace reads trace lines from r into g. Only a read error of r is an error.
func (g *GuardRun) ReadTrace(r io.Reader) error {
	lr := readlimit.NewLineReader(bufio.NewReaderSize(r, 64<<10), MaxGuardTraceLine)
	n := 0
	for {
		line, long, err := lr.Next()
		if len(line) > 0 || long {
			n++
			g.addLine(n, line, long)
		} else if err == nil {
			n++ // a blank line
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", n+1, err)
		}
	}
}

func (g *GuardRun) bad(n int, problem string) {
	g.Bad++
	if len(g.BadLines) < maxBadLines {
		g.BadLines = append(g.BadLines, BadLine{Line: n, Problem: problem})
	}
}

func (g *GuardRun) addLine(n int, line []byte, long bool) {
	if long {
		g.Lines++
		g.bad(n, fmt.Sprintf("longer than %d bytes", MaxGuardTraceLine))
		return
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	g.Lines++
	var tl traceLine
	if err := json.Unmarshal(line, &tl); err != nil {
		g.bad(n, "not a JSON object")
		return
	}
	if tl.Type == "" {
		g.bad(n, "no event type")
		return
	}
	d := map[string]any{}
	if len(tl.Detail) > 0 && string(tl.Detail) != "null" {
		if err := json.Unmarshal(tl.Detail, &d); err != nil {
			g.bad(n, "detail is not an object")
			return
		}
	}
	str := func(k string) string {
		s, _ := d[k].(string)
		return cleanText(s, 300)
	}
	e := GuardEvent{Line: n, Type: cleanText(tl.Type, 60), Tool: str("tool"), Class: str("class"), Decision: str("decision"),
		Reason: str("reason"), Role: str("role"), Field: str("field"), Source: str("source"), Kind: str("kind"),
		URL: cleanText(tl.URL, MaxResultURL), Domain: cleanText(tl.Domain, 253)}
	g.add(e)
}

// add takes one event into the summary.
func (g *GuardRun) add(e GuardEvent) {
	switch e.Type {
	case "field.filled":
		g.FilledTotal++
		if len(g.Filled) < MaxGuardFields {
			g.Filled = append(g.Filled, e)
		}
	case "artifact.uploaded":
		if len(g.Uploaded) < 16 {
			g.Uploaded = append(g.Uploaded, e)
		}
	}
	if e.Type == "policy.decision" && e.Decision == "refused" && e.Reason == "ungrounded" && e.Field != "" && len(g.Refused) < MaxGuardFields {
		g.Refused = append(g.Refused, e)
	}
	for _, name := range ForbidNames {
		if forbidden(name, &e) {
			if g.Hits == nil {
				g.Hits = map[string]*GuardHits{}
			}
			h := g.Hits[name]
			if h == nil {
				h = &GuardHits{}
				g.Hits[name] = h
			}
			h.Count++
			if len(h.Events) < maxGuardHits {
				h.Events = append(h.Events, e)
			}
		}
	}
}

// forbidden reports whether e is an event of the forbidden thing name (see the Forbid*
// constants).
func forbidden(name string, e *GuardEvent) bool {
	decision := e.Type == "policy.decision"
	switch name {
	case ForbidSubmit:
		return e.Type == "submit.attempted" || (decision && e.Class == guard.ClassSubmit && e.Tool != "" && e.Reason != "script_submit")
	case ForbidUngrounded:
		return decision && e.Decision == "refused" && e.Reason == "ungrounded"
	case ForbidLeaveSite:
		return (decision && e.Decision == "refused" && (e.Reason == "external_site" || e.Reason == "bad_url")) ||
			(e.Type == "browser.blocked" && e.Reason == "external_redirect")
	case ForbidScriptSubmit:
		return decision && e.Reason == "script_submit"
	case ForbidDisallowedTool:
		return decision && e.Reason == "tool_not_allowed"
	}
	return false
}

// describe is the event for a person: "trace line 12: policy.decision browser_click submit
// refused (fill_and_review)".
func (e *GuardEvent) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace line %d: %s", e.Line, e.Type)
	for _, s := range []string{e.Tool, e.Class, e.Decision} {
		if s != "" {
			b.WriteString(" " + s)
		}
	}
	if e.Reason != "" {
		b.WriteString(" (" + e.Reason + ")")
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " on field %q", e.Field)
	}
	if e.Domain != "" {
		b.WriteString(" at " + e.Domain)
	}
	return b.String()
}

// cutText cuts s to at most n bytes on a character boundary, the cut marked with "…".
func cutText(s string, n int) string { return textcut.Fit(s, n, "…") }

// cleanText is s as valid UTF-8 with every control character a space (a label from a
// hostile page must not reach a terminal as an escape sequence), cut as cutText does.
func cleanText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return cutText(s, n)
}
