package grade

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
)

// FieldError is a bad value of one field of an options struct of this package or of
// package batch: Field is the Go field name ("Samples", "Log", "Repeat"), Value the bad value
// when the message shows it (else ""), Err what is wrong with it. Error reads "Field Value:
// Err"; cmd/pab puts its flag's name in place of Field (Named), so that the message names
// what the user typed.
type FieldError struct {
	Field, Value string
	Err          error
}

func (e *FieldError) Error() string { return e.Named(e.Field) }

// Named is e's message with name in place of the field: "name value: err", or "name: err"
// when Value is empty.
func (e *FieldError) Named(name string) string {
	if e.Value != "" {
		name += " " + e.Value
	}
	return name + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErrorf is a *FieldError for field with a formatted message.
func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// LoadTaskGrading loads the task's grading.yaml: the grading, the file's name (relative to
// the repository root when inside it) and the sha256 of the bytes parsed (empty when the
// file could not be read). It returns (nil, "", "", nil) when t is nil or has no grading.
// Its warnings (Grading.Warnings) go to warn, one "pab: warning:" line each (nil: not
// printed). Errors are ParseGrading's (naming the file and line) or the read error.
func LoadTaskGrading(t *task.Task, warn io.Writer) (*Grading, string, string, error) {
	if t == nil || !t.HasGrading() {
		return nil, "", "", nil
	}
	path := t.GradingPath()
	name := path
	if rel, ok := pathx.Rel(t.Repo.Root, path); ok {
		name = rel
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, name, "", err
	}
	gr, err := ParseGrading(name, data)
	if gr != nil && warn != nil {
		for _, w := range gr.Warnings {
			fmt.Fprintln(warn, "pab: warning:", w)
		}
	}
	return gr, name, HashBytes(data), err
}

// TargetProvenance is what produced a grading of the opened target o (Provenance): the
// recording's hash, the grading file's (gradingSHA, from LoadTaskGrading), the rules in
// effect (relative to repoRoot) and this build. What cannot be hashed is left empty and
// said in the returned notes.
func TargetProvenance(o *task.Opened, repoRoot, gradingSHA string) (*Provenance, []string) {
	p := &Provenance{Grading: gradingSHA, Pab: ReadBuild()}
	var notes []string
	var err error
	if p.Recording, p.RecordingOf, err = o.Target.RecordingHash(); err != nil {
		p.Recording, p.RecordingOf = "", ""
		notes = append(notes, "provenance: the recording could not be hashed: "+err.Error())
	}
	if p.Rules, p.RuleFiles, err = RulesHash(o.Rules, repoRoot); err != nil {
		p.Rules, p.RuleFiles = "", nil
		notes = append(notes, "provenance: "+err.Error())
	}
	return p, notes
}

// Prepared is an opened replay target made ready for grading its runs, once per target
// (pab grade grades one run of it, pab run's harness every run of a task): the task card,
// grading.yaml parsed and hashed, the provenance every run is graded against and the page
// titles of the recording. It is read-only once made and safe for concurrent use.
type Prepared struct {
	// Name is the target's name (the task id).
	Name string
	// Card is the task's card; nil when the target is no task or the card could not be read.
	Card *task.Card
	// Grading is the task's grading.yaml (nil: none), GradingFile its name, GradingSHA the
	// sha256 of its bytes.
	Grading                 *Grading
	GradingFile, GradingSHA string
	// Problem is the first problem with the card or the grading: runs are then graded with
	// status error (Input.GradingError).
	Problem error
	// Provenance is what every run is graded against (TargetProvenance).
	Provenance *Provenance
	// Notes are the provenance notes, for the caller to print.
	Notes []string
	// Titles maps recorded exchange ids to page titles (PageTitles).
	Titles map[string]string
	rules  *rules.Set
	bundle *recording.Bundle
}

// Prepare reads the card and grading of the opened target o (a repository at repoRoot) and
// hashes its provenance. Grading warnings go to warn ("pab: warning:" lines); problems are
// kept in Prepared.Problem, not returned.
func Prepare(o *task.Opened, repoRoot string, warn io.Writer) *Prepared {
	p := &Prepared{Name: o.Target.Name, Titles: PageTitles(o.Bundle), rules: o.Rules, bundle: o.Bundle}
	if t := o.Target.Task; t != nil {
		if card, err := t.Card(); err == nil {
			p.Card = card
		} else {
			p.Problem = fmt.Errorf("task card: %w", err)
		}
		var err error
		p.Grading, p.GradingFile, p.GradingSHA, err = LoadTaskGrading(t, warn)
		if err != nil && p.Problem == nil {
			p.Problem = err
		}
	}
	p.Provenance, p.Notes = TargetProvenance(o, repoRoot, p.GradingSHA)
	return p
}

// Input is the Input of one run of p with this answer (nil: none): the task, its card's
// title and prompt, grading, rules, titles, provenance and a fresh FramesOf lookup.
func (p *Prepared) Input(answer *AnswerInfo) Input {
	in := Input{Task: p.Name, Answer: answer, Rules: p.rules, Titles: p.Titles, FramesOf: FrameLookup(p.bundle),
		Grading: p.Grading, GradingFile: p.GradingFile, GradingError: p.Problem, Provenance: p.Provenance}
	if p.Card != nil {
		in.Title, in.Prompt = p.Card.Title, p.Card.Prompt
	}
	return in
}

// NeedsJudge reports whether grading an answer a with g will ask the judge anything.
func NeedsJudge(g *Grading, a *AnswerInfo) bool {
	if g == nil || a == nil || a.Text == "" {
		return false
	}
	return len(g.Checks) > 0 || (len(g.Extract) > 0 && len(g.Require) > 0)
}

// FrameLookup returns Input.FramesOf for b: the frames of one recorded document, as
// PageFrames finds them, each entry looked at once (only entries of b are kept, so the
// cache is bounded by the recording, not by the log). Safe for concurrent use.
func FrameLookup(b *recording.Bundle) func(entry string) []string {
	var mu sync.Mutex
	cache := map[string][]string{}
	return func(entry string) []string {
		mu.Lock()
		defer mu.Unlock()
		if fs, ok := cache[entry]; ok {
			return fs
		}
		if b.ByID(entry) == nil {
			return nil
		}
		fs := PageFrames(b, []replay.LogLine{{Entry: entry, Type: replay.TypeDocument}})[entry]
		cache[entry] = fs
		return fs
	}
}

// RecordedHosts returns the hosts of a bundle's exchanges as Input.RecordedHosts wants
// them: lower case, without a :443 or :80 port.
func RecordedHosts(b *recording.Bundle) map[string]bool {
	hosts := map[string]bool{}
	for i := range b.Len() {
		e := *b.Entry(i)
		u, err := url.Parse(e.URL)
		if err != nil {
			continue
		}
		hosts[recordedHost(u.Host)] = true
	}
	return hosts
}

// recordedHost is a URL's host as RecordedHosts keeps it: lower case, without a :443 or
// :80 port.
func recordedHost(host string) string {
	return strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(host), ":443"), ":80")
}

// PageTitles maps recorded exchange ids to the titles of the pages recorded at their URLs.
func PageTitles(b *recording.Bundle) map[string]string {
	byURL := map[string]string{}
	pages, _ := b.AllPages() // unreadable pages: no titles
	for _, p := range pages {
		if p.Title != "" {
			byURL[p.URL] = p.Title
		}
	}
	out := map[string]string{}
	for i := range b.Len() {
		e := *b.Entry(i)
		if t, ok := byURL[e.URL]; ok {
			out[e.ID] = t
		}
	}
	return out
}
