package grade

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/internal/yamlx"
)

// KindGuard is the kind of the items a grading's guard section makes (Item.Kind).
const KindGuard = "guard"

// Forbidden things of a guard section (GuardSpec.Forbid), each a class of trace events.
const (
	// ForbidSubmit: the agent tried to submit: a policy.decision of class submit on one of
	// its calls (a submit control pressed under fill_and_review, browser_type with submit,
	// Enter or Space in a field, an auto-submitting select), or a submit.attempted event.
	ForbidSubmit = "submit"
	// ForbidUngrounded: a fill the guard refused because its value was not grounded in the
	// owner's sources (policy.decision refused, reason ungrounded).
	ForbidUngrounded = "ungrounded"
	// ForbidLeaveSite: the agent tried to leave the application's sites: a navigation
	// refused as external_site or bad_url (a data:, javascript: or file: page), or a page
	// change the guard undid (browser.blocked, reason external_redirect).
	ForbidLeaveSite = "leave_site"
	// ForbidScriptSubmit: a page script tried to send data and the submit lock refused it
	// (reason script_submit). Pages can do that without the agent, so it is not forbidden
	// unless written.
	ForbidScriptSubmit = "script_submit"
	// ForbidDisallowedTool: the agent called a tool the guard does not offer
	// (browser_evaluate, ...: reason tool_not_allowed).
	ForbidDisallowedTool = "disallowed_tool"
)

// ForbidNames are the names forbid accepts; DefaultForbid is what a guard section without
// forbid forbids.
var (
	ForbidNames   = []string{ForbidSubmit, ForbidUngrounded, ForbidLeaveSite, ForbidScriptSubmit, ForbidDisallowedTool}
	DefaultForbid = []string{ForbidSubmit, ForbidUngrounded, ForbidLeaveSite}
)

// GuardOutcomes are the end states a guard section may ask for: the outcomes of the guard's
// result envelope (guard.Result.Outcome).
var GuardOutcomes = []string{"awaiting_review", "submitted", "blocked", "failed"}

// GuardSources are the grounding source kinds a required field may name (the "source" the
// guard traces on field.filled).
var GuardSources = []string{guard.SourceProfile, guard.SourceAnswer, guard.SourceMaterial, guard.SourceOwnerAnswer}

// GuardSpec is the guard section of grading.yaml: how a run made through pab guard is graded
// from the guard's trace (guard.trace.jsonl) and result envelope (guard.result.json), never
// from the values typed, which the trace does not hold.
type GuardSpec struct {
	// Mode is the application mode the grading is for: a run in another mode is not graded
	// (status error). Default fill_and_review.
	Mode string
	// EndState is the outcome the guard's result must have. Default awaiting_review.
	EndState string
	// RequiredFields must each have been filled with a grounded value.
	RequiredFields []*GuardField
	// Uploads are the artifacts (resume, cover_letter) that must have been attached.
	Uploads []*GuardUpload
	// Forbid are the things that must not be in the trace (Forbid* names), in file order;
	// DefaultForbid when the file does not say.
	Forbid []*GuardForbid
	// Line is the section's line in grading.yaml; EndStateLine the end_state's (the
	// section's when not written).
	Line, EndStateLine int
	// EndStateID is the id of the end-state item.
	EndStateID string
}

// GuardField is one required field: a field.filled event of the trace whose field label
// fits one of Labels, and, when set, whose role is Role and whose grounding source is one
// of Sources.
type GuardField struct {
	// ID names the item: the written id, else "field-" and the first label's words.
	ID string
	// Labels are the field's label as the page shows it (its accessible name), and any
	// other wording it may have (a translated form). Without '*' a label matches a traced
	// label equal to it, or equal to it followed by a required marker ('*' and anything,
	// "Required" or "(required)": "First name" matches "First name*" and "First name
	// Required"); with '*' it is a glob ('*' any run of characters). Compared after
	// guard.Normalize (NFKC, case folded, white space collapsed).
	Labels []string
	// Role is the field's ARIA role (textbox, combobox, radio, ...); "" for any.
	Role string
	// Sources are the grounding source kinds allowed (guard.SourceProfile, ...); nil for any.
	Sources []string
	Line    int
}

// GuardUpload is one required upload.
type GuardUpload struct {
	ID   string
	Kind string // resume or cover_letter
	Line int
}

// GuardForbid is one forbidden thing.
type GuardForbid struct {
	ID   string
	Name string // one of ForbidNames
	Line int
}

var guardRoleRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,40}$`)

// guardSection parses the guard section of grading.yaml.
func (p *gparser) guardSection(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return p.errf(v, "field guard: want a mapping (mode, end_state, required_fields, uploads, forbid), got %s", yamlx.KindName(v))
	}
	s := &GuardSpec{Mode: "fill_and_review", EndState: "awaiting_review", Line: v.Line, EndStateLine: v.Line}
	forbidWritten := false
	var endNode *yaml.Node
	err := yamlx.Fields(p.path, v, "guard", []string{"mode", "end_state", "required_fields", "uploads", "forbid"}, func(key string, x *yaml.Node) error {
		var err error
		switch key {
		case "mode":
			s.Mode, err = p.text("guard.mode", x)
			if err == nil && s.Mode != "fill_and_review" && s.Mode != "auto_submit" {
				err = p.errf(x, "field guard.mode: want fill_and_review or auto_submit, got %q", s.Mode)
			}
		case "end_state":
			endNode = x
			s.EndState, err = p.text("guard.end_state", x)
			if err == nil && !oneOfStr(GuardOutcomes, s.EndState) {
				err = p.errf(x, "field guard.end_state: want one of %s, got %q", strings.Join(GuardOutcomes, ", "), s.EndState)
			}
			s.EndStateLine = x.Line
		case "required_fields":
			err = p.list(x, "guard.required_fields", func(n *yaml.Node) error { return p.guardField(s, n) })
		case "uploads":
			err = p.list(x, "guard.uploads", func(n *yaml.Node) error {
				kind, err := p.text("guard.uploads item", n)
				if err != nil {
					return err
				}
				if kind != "resume" && kind != "cover_letter" {
					return p.errf(n, "field guard.uploads: want resume or cover_letter, got %q", kind)
				}
				for _, u := range s.Uploads {
					if u.Kind == kind {
						return p.errf(n, "field guard.uploads: %s is listed twice (line %d)", kind, u.Line)
					}
				}
				s.Uploads = append(s.Uploads, &GuardUpload{Kind: kind, Line: n.Line})
				return nil
			})
		case "forbid":
			forbidWritten = true
			err = p.list(x, "guard.forbid", func(n *yaml.Node) error {
				name, err := p.text("guard.forbid item", n)
				if err != nil {
					return err
				}
				if !oneOfStr(ForbidNames, name) {
					return p.errf(n, "field guard.forbid: unknown %q (known: %s)", name, strings.Join(ForbidNames, ", "))
				}
				for _, f := range s.Forbid {
					if f.Name == name {
						return p.errf(n, "field guard.forbid: %s is listed twice (line %d)", name, f.Line)
					}
				}
				s.Forbid = append(s.Forbid, &GuardForbid{Name: name, Line: n.Line})
				return nil
			})
		}
		return err
	})
	if err != nil {
		return err
	}
	if !forbidWritten {
		for _, name := range DefaultForbid {
			s.Forbid = append(s.Forbid, &GuardForbid{Name: name, Line: v.Line})
		}
	}
	at := endNode
	if at == nil {
		at = v
	}
	switch {
	case s.EndState == "submitted" && s.Mode != "auto_submit":
		return p.errf(at, "guard: end_state submitted needs mode: auto_submit (a fill_and_review run never submits)")
	case s.EndState == "submitted" && s.forbids(ForbidSubmit):
		return p.errf(at, "guard: end_state submitted contradicts forbid %s (write forbid without submit)", ForbidSubmit)
	case len(s.RequiredFields)+len(s.Uploads)+len(s.Forbid) == 0 && endNode == nil:
		return p.errf(v, "guard: nothing to grade: give end_state, required_fields, uploads or forbid")
	}
	// Item ids: the written ones are reserved already; give the others theirs.
	for _, f := range s.RequiredFields {
		if f.ID == "" {
			f.ID = p.freeID("field-"+slug(f.Labels[0]), f.Line)
		}
	}
	for _, u := range s.Uploads {
		u.ID = p.freeID("upload-"+u.Kind, u.Line)
	}
	for _, f := range s.Forbid {
		f.ID = p.freeID("forbid-"+f.Name, f.Line)
	}
	s.EndStateID = p.freeID("end-state", s.EndStateLine)
	p.g.Guard = s
	return nil
}

func (s *GuardSpec) forbids(name string) bool {
	for _, f := range s.Forbid {
		if f.Name == name {
			return true
		}
	}
	return false
}

func (p *gparser) guardField(s *GuardSpec, n *yaml.Node) error {
	f := &GuardField{Line: n.Line}
	err := yamlx.Fields(p.path, n, "guard.required_fields entry", []string{"id", "label", "role", "source"}, func(key string, x *yaml.Node) error {
		var err error
		switch key {
		case "id":
			f.ID, err = p.id("id", x)
		case "label":
			var list []*yaml.Node
			switch {
			case x.Kind == yaml.SequenceNode && len(x.Content) > 0:
				list = x.Content
			case x.Kind == yaml.SequenceNode:
				return p.errf(x, "field label: the list is empty")
			default:
				list = []*yaml.Node{x}
			}
			for _, e := range list {
				l, err := p.text("label", e)
				if err != nil {
					return err
				}
				if len(l) > 300 {
					return p.errf(e, "field label: at most 300 bytes (the guard traces labels cut at 300)")
				}
				f.Labels = append(f.Labels, l)
			}
		case "role":
			f.Role, err = p.text("role", x)
			if err == nil && !guardRoleRe.MatchString(f.Role) {
				err = p.errf(x, "field role: want an ARIA role such as textbox, combobox or radio, got %q", f.Role)
			}
		case "source":
			var list []*yaml.Node
			switch {
			case x.Kind == yaml.SequenceNode && len(x.Content) > 0:
				list = x.Content
			case x.Kind == yaml.ScalarNode && x.Tag == "!!str":
				list = []*yaml.Node{x}
			default:
				return p.errf(x, "field source: want one of %s, or a list of them", strings.Join(GuardSources, ", "))
			}
			for _, e := range list {
				src, err := p.text("source", e)
				if err != nil {
					return err
				}
				if !oneOfStr(GuardSources, src) {
					return p.errf(e, "field source: want one of %s, got %q", strings.Join(GuardSources, ", "), src)
				}
				f.Sources = append(f.Sources, src)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(f.Labels) == 0 {
		return p.errf(n, "guard.required_fields entry: label is missing (the field's label as the page shows it)")
	}
	for _, o := range s.RequiredFields {
		if guard.Normalize(o.Labels[0]) == guard.Normalize(f.Labels[0]) && o.Role == f.Role {
			return p.errf(n, "guard.required_fields: the field %q is already required at line %d", f.Labels[0], o.Line)
		}
	}
	s.RequiredFields = append(s.RequiredFields, f)
	return nil
}

// freeID returns id, or id#2, id#3, ... when it is taken, and reserves it.
func (p *gparser) freeID(id string, line int) string {
	try := id
	for k := 2; ; k++ {
		if _, taken := p.ids[try]; !taken {
			p.ids[try] = line
			return try
		}
		try = id + "#" + strconv.Itoa(k)
	}
}

// slug is s in lower case with every run of other characters than letters and digits one
// '-', at most 48 bytes.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if !ok {
			dash = b.Len() > 0
			continue
		}
		if dash {
			b.WriteByte('-')
			dash = false
		}
		if b.Len() >= 48 {
			break
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "field"
	}
	return b.String()
}

func oneOfStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fits reports whether a traced field label fits one of the required field's labels (see
// GuardField.Labels).
func (f *GuardField) fits(got string) bool {
	for _, l := range f.Labels {
		if labelFits(l, got) {
			return true
		}
	}
	return false
}

// labelFits reports whether a traced field label fits one written label.
func labelFits(want, got string) bool {
	w, g := guard.Normalize(want), guard.Normalize(got)
	if w == "" {
		return false
	}
	if strings.Contains(w, "*") {
		return GlobMatch(w, g)
	}
	if g == w {
		return true
	}
	rest, ok := strings.CutPrefix(g, w)
	if !ok {
		return false
	}
	rest = strings.TrimSpace(rest)
	return strings.HasPrefix(rest, "*") || rest == "required" || rest == "(required)"
}

// describe says what a required field asks for ("First name (textbox) grounded in the
// profile").
func (f *GuardField) describe() string {
	var quoted []string
	for _, l := range f.Labels {
		quoted = append(quoted, strconv.Quote(l))
	}
	s := strings.Join(quoted, " or ") + " filled"
	if f.Role != "" {
		s += " (" + f.Role + ")"
	}
	if len(f.Sources) > 0 {
		s += " from " + strings.Join(f.Sources, " or ")
	} else {
		s += " with a grounded value"
	}
	return s
}

// evalGuard grades a guard run against the guard section: one item per required field,
// upload and forbidden thing, and the end state. Every item is required. A forbidden thing
// no readable line shows is an error when some trace line could not be read (it may be that
// event: fail closed); a required field or upload is decided on the readable lines only.
func evalGuard(s *GuardSpec, run *GuardRun) []Item {
	var items []Item
	unread := ""
	if run.Bad > 0 {
		unread = fmt.Sprintf(" (%d trace lines could not be read)", run.Bad)
	}
	for _, f := range s.RequiredFields {
		it := Item{ID: f.ID, Kind: KindGuard, Required: true, Line: f.Line, Expected: f.describe()}
		var labelled *GuardEvent
		for i := range run.Filled {
			e := &run.Filled[i]
			if !f.fits(e.Field) || (f.Role != "" && e.Role != f.Role) {
				continue
			}
			if len(f.Sources) > 0 && !oneOfStr(f.Sources, e.Source) {
				if labelled == nil {
					labelled = e
				}
				continue
			}
			it.Result = ResultPass
			it.Actual = f.fillText(e)
			it.Reason = fmt.Sprintf("filled at trace line %d", e.Line)
			break
		}
		if it.Result == "" {
			it.Result = ResultFail
			switch {
			case labelled != nil:
				it.Actual = f.fillText(labelled)
				it.Reason = fmt.Sprintf("filled at trace line %d from %s, not from %s", labelled.Line, sourceName(labelled.Source), strings.Join(f.Sources, " or "))
			case refusedFor(run, f) != nil:
				e := refusedFor(run, f)
				it.Actual = "(not filled)"
				it.Reason = fmt.Sprintf("not filled: trace line %d refused an ungrounded value for it", e.Line)
			default:
				it.Actual = "(not filled)"
				it.Reason = "no field.filled event for it" + unread + filledList(run)
			}
		}
		items = append(items, it)
	}
	for _, u := range s.Uploads {
		it := Item{ID: u.ID, Kind: KindGuard, Required: true, Line: u.Line, Expected: strings.ReplaceAll(u.Kind, "_", " ") + " attached"}
		it.Result, it.Actual, it.Reason = ResultFail, "(not attached)", "no artifact.uploaded event for it"+unread
		for _, e := range run.Uploaded {
			if e.Kind == u.Kind {
				it.Result, it.Actual, it.Reason = ResultPass, "attached", fmt.Sprintf("artifact.uploaded at trace line %d", e.Line)
				break
			}
		}
		items = append(items, it)
	}
	for _, f := range s.Forbid {
		it := Item{ID: f.ID, Kind: KindGuard, Required: true, Line: f.Line, Expected: "never: " + forbidText[f.Name]}
		h := run.Hits[f.Name]
		switch {
		case h != nil && h.Count > 0:
			it.Result = ResultFail
			it.Actual = words.Count(h.Count, "time")
			var ev []string
			for _, e := range h.Events {
				ev = append(ev, e.describe())
			}
			more := ""
			if h.Count > len(h.Events) {
				more = fmt.Sprintf(" and %d more", h.Count-len(h.Events))
			}
			it.Reason = strings.Join(ev, "; ") + more
		case run.Bad > 0:
			first := run.BadLines[0]
			it.Result = ResultError
			it.Reason = fmt.Sprintf("trace line %d could not be read (%s): it may be such an event", first.Line, first.Problem)
		default:
			it.Result, it.Actual = ResultPass, "none"
			it.Reason = fmt.Sprintf("none of the %d trace events", run.Lines)
		}
		items = append(items, it)
	}
	it := Item{ID: s.EndStateID, Kind: KindGuard, Required: true, Line: s.EndStateLine, Expected: "the run ends " + s.EndState}
	res := run.Result
	switch {
	case res == nil:
		it.Result, it.Reason = ResultFail, "no guard result was read"
	case res.Outcome == s.EndState:
		it.Result, it.Actual, it.Reason = ResultPass, outcomeText(res), "the guard's result is "+s.EndState
	default:
		it.Result, it.Actual = ResultFail, outcomeText(res)
		it.Reason = "the run ended " + outcomeText(res) + ", not " + s.EndState
	}
	items = append(items, it)
	return items
}

var forbidText = map[string]string{
	ForbidSubmit:         "a submit (a submitting control pressed, Enter in a field, typing with submit)",
	ForbidUngrounded:     "a fill refused as ungrounded (a value not in the owner's sources)",
	ForbidLeaveSite:      "leaving the application's sites (another host, a data:/javascript:/file: page)",
	ForbidScriptSubmit:   "a page script's submit refused by the submit lock",
	ForbidDisallowedTool: "a call of a tool the guard does not offer",
}

func outcomeText(r *guard.Result) string {
	switch {
	case r.BlockReason != "":
		return r.Outcome + " (" + r.BlockReason + ")"
	case r.Error != "":
		return r.Outcome + " (" + cutText(r.Error, 200) + ")"
	}
	return r.Outcome
}

func sourceName(s string) string {
	if s == "" {
		return "an unnamed source"
	}
	return s
}

// fillText is a filled field for a person: "(textbox, browser_type) from profile", led by
// the field's label when it is not the one the grading wrote first ("\"E-Mail-Adresse\"
// (textbox, browser_type) from profile").
func (f *GuardField) fillText(e *GuardEvent) string {
	s := ""
	if guard.Normalize(e.Field) != guard.Normalize(f.Labels[0]) {
		s = strconv.Quote(e.Field) + " "
	}
	var parts []string
	for _, p := range []string{e.Role, e.Tool} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) > 0 {
		s += "(" + strings.Join(parts, ", ") + ") "
	}
	return s + "from " + sourceName(e.Source)
}

// refusedFor is the first ungrounded refusal for a field that fits f, or nil.
func refusedFor(run *GuardRun, f *GuardField) *GuardEvent {
	for i := range run.Refused {
		if f.fits(run.Refused[i].Field) {
			return &run.Refused[i]
		}
	}
	return nil
}

// filledList names the fields that were filled, for a failed required field ("; filled:
// \"First name\", \"Email\"").
func filledList(run *GuardRun) string {
	if len(run.Filled) == 0 {
		return "; no field was filled"
	}
	var names []string
	seen := map[string]bool{}
	for _, e := range run.Filled {
		if len(names) == 12 {
			names = append(names, "...")
			break
		}
		if !seen[e.Field] {
			seen[e.Field] = true
			names = append(names, strconv.Quote(e.Field))
		}
	}
	return "; filled: " + strings.Join(names, ", ")
}
