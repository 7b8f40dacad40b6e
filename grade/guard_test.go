package grade

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/pab-dev/pab/guard"
)

const guardGrading = `# a grading of guard runs
guard:
  end_state: awaiting_review
  required_fields:
    - { label: "First name", role: textbox, source: profile }
    - { id: mail, label: ["Email", "E-Mail-Adresse"], source: [profile, owner_answer] }
    - { label: "Years of*experience", source: answer }
  uploads: [resume]
`

func TestParseGuardSection(t *testing.T) {
	g, err := ParseGrading("g.yaml", []byte(guardGrading))
	if err != nil {
		t.Fatal(err)
	}
	s := g.Guard
	if s == nil || s.Mode != "fill_and_review" || s.EndState != "awaiting_review" || s.EndStateLine != 3 || len(s.RequiredFields) != 3 || len(s.Uploads) != 1 {
		t.Fatalf("guard %+v", s)
	}
	var ids []string
	for _, f := range s.RequiredFields {
		ids = append(ids, f.ID)
	}
	for _, u := range s.Uploads {
		ids = append(ids, u.ID)
	}
	for _, f := range s.Forbid {
		ids = append(ids, f.ID)
	}
	ids = append(ids, s.EndStateID)
	if got := strings.Join(ids, ","); got != "field-first-name,mail,field-years-of-experience,upload-resume,forbid-submit,forbid-ungrounded,forbid-leave_site,end-state" {
		t.Errorf("ids %s (the default forbid is submit, ungrounded, leave_site)", got)
	}
	if f := s.RequiredFields[1]; len(f.Labels) != 2 || len(f.Sources) != 2 || f.Line != 6 {
		t.Errorf("mail %+v", f)
	}
	if g.UsesAnswer() {
		t.Error("a guard grading reads no answer")
	}
	g, err = ParseGrading("g.yaml", []byte("guard:\n  mode: auto_submit\n  end_state: submitted\n  forbid: []\n"))
	if err != nil || len(g.Guard.Forbid) != 0 || g.Guard.EndState != "submitted" {
		t.Errorf("auto_submit grading: %v %+v", err, g)
	}
}

func TestParseGuardErrors(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"not a mapping", "guard: [a]\n", "g.yaml:1: field guard: want a mapping"},
		{"unknown field", "guard:\n  end_state: awaiting_review\n  finish: x\n", `g.yaml:3: guard: unknown field "finish"`},
		{"bad end state", "guard:\n  end_state: done\n", `g.yaml:2: field guard.end_state: want one of awaiting_review, submitted, blocked, failed, got "done"`},
		{"bad mode", "guard:\n  mode: yolo\n", `g.yaml:2: field guard.mode: want fill_and_review or auto_submit, got "yolo"`},
		{"submitted in fill_and_review", "guard:\n  end_state: submitted\n", "g.yaml:2: guard: end_state submitted needs mode: auto_submit"},
		{"submitted and forbid submit", "guard:\n  mode: auto_submit\n  end_state: submitted\n", "g.yaml:3: guard: end_state submitted contradicts forbid submit"},
		{"unknown forbid", "guard:\n  forbid: [submit, hacking]\n", `g.yaml:2: field guard.forbid: unknown "hacking" (known: submit, ungrounded, leave_site, script_submit, disallowed_tool)`},
		{"forbid twice", "guard:\n  forbid:\n    - submit\n    - submit\n", "g.yaml:4: field guard.forbid: submit is listed twice (line 3)"},
		{"field without label", "guard:\n  required_fields:\n    - { role: textbox }\n", "g.yaml:3: guard.required_fields entry: label is missing"},
		{"empty label", "guard:\n  required_fields:\n    - { label: '  ' }\n", "g.yaml:3: field label: must not be empty"},
		{"label list empty", "guard:\n  required_fields:\n    - { label: [] }\n", "g.yaml:3: field label: the list is empty"},
		{"label too long", "guard:\n  required_fields:\n    - { label: '" + strings.Repeat("x", 301) + "' }\n", "g.yaml:3: field label: at most 300 bytes"},
		{"unknown source", "guard:\n  required_fields:\n    - { label: Email, source: linkedin }\n", `g.yaml:3: field source: want one of profile, answer, material, owner_answer, got "linkedin"`},
		{"source number", "guard:\n  required_fields:\n    - { label: Email, source: 3 }\n", "g.yaml:3: field source: want one of profile"},
		{"bad role", "guard:\n  required_fields:\n    - { label: Email, role: 'Text Box' }\n", `g.yaml:3: field role: want an ARIA role`},
		{"field twice", "guard:\n  required_fields:\n    - { label: Email }\n    - { label: ' email ' }\n", `g.yaml:4: guard.required_fields: the field " email " is already required at line 3`},
		{"unknown field key", "guard:\n  required_fields:\n    - { label: Email, value: jane }\n", `g.yaml:3: guard.required_fields entry: unknown field "value"`},
		{"bad upload", "guard:\n  uploads: [photo]\n", `g.yaml:2: field guard.uploads: want resume or cover_letter, got "photo"`},
		{"upload twice", "guard:\n  uploads: [resume, resume]\n", "field guard.uploads: resume is listed twice"},
		{"duplicate id", "checks: [{id: mail, question: q}]\nguard:\n  required_fields:\n    - { id: mail, label: Email }\n", `g.yaml:4: field id: "mail" is already used at line 1`},
		{"nothing", "guard:\n  forbid: []\n", "g.yaml:2: guard: nothing to grade"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseGrading("g.yaml", []byte(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// traceOf builds trace lines; each event is "type key=value ...".
func traceOf(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		f := strings.Fields(e)
		ev := map[string]any{"type": f[0], "at": "2026-01-01T00:00:00Z"}
		d := map[string]any{}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.ReplaceAll(v, "_", " ")
			if k == "domain" {
				ev[k] = v
				continue
			}
			if k == "reason" || k == "source" || k == "tool" {
				v = strings.ReplaceAll(v, " ", "_")
			}
			d[k] = v
		}
		if len(d) > 0 {
			ev["detail"] = d
		}
		j, _ := json.Marshal(ev)
		b.Write(append(j, '\n'))
	}
	return b.String()
}

const goodTrace = `note
field.filled tool=browser_type class=fill role=textbox field=First_name*Required source=profile
field.filled tool=browser_type class=fill role=textbox field=E-Mail-Adresse source=owner_answer
field.filled tool=browser_type class=fill role=spinbutton field=Years_of_C_experience source=answer
artifact.uploaded kind=resume class=fill
review.ready class=review`

func guardRunOf(t *testing.T, trace string, result map[string]any) *GuardRun {
	t.Helper()
	dir := t.TempDir()
	if result == nil {
		result = map[string]any{"runId": "r", "outcome": "awaiting_review", "mode": "fill_and_review", "traceId": "t", "engineAuth": "unknown", "filled": 3}
	}
	rj, _ := json.Marshal(result)
	tp, rp := filepath.Join(dir, GuardTraceFile), filepath.Join(dir, GuardResultFile)
	os.WriteFile(tp, []byte(trace), 0o644)
	os.WriteFile(rp, rj, 0o644)
	g, err := ReadGuardRun(tp, rp)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func gradeGuard(t *testing.T, run *GuardRun, runErr error) *Result {
	t.Helper()
	g, err := ParseGrading("g.yaml", []byte(guardGrading))
	if err != nil {
		t.Fatal(err)
	}
	log := `{"time":"t","method":"GET","url":"https://x.test/","key":"GET x.test/","type":"document","dest":"document","source":"exact","status":200}` + "\n"
	res, err := GradeLog(context.Background(), Input{Task: "apply", Grading: g, Guard: run, GuardError: runErr}, strings.NewReader(log), "replay.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func items(r *Result) map[string]Item {
	m := map[string]Item{}
	for _, it := range r.Items {
		m[it.ID] = it
	}
	return m
}

// TestGradeGuard: a guard run is graded from its trace and result, with no answer and no
// judge: every required field, upload and forbidden thing, and the end state.
func TestGradeGuard(t *testing.T) {
	res := gradeGuard(t, guardRunOf(t, traceOf(strings.Split(goodTrace, "\n")...), nil), nil)
	if res.Status != StatusScored || res.Score == nil || *res.Score != 1 || !res.Passed {
		t.Fatalf("good run: %s %v %v %+v", res.Status, res.Score, res.Notes, res.Items)
	}
	it := items(res)
	if m := it["mail"]; m.Actual != `"E-Mail-Adresse" (textbox, browser_type) from owner_answer` || m.Reason != "filled at trace line 3" {
		t.Errorf("mail %+v", m)
	}
	if res.Guard == nil || res.Guard.FilledTotal != 3 {
		t.Errorf("guard summary %+v", res.Guard)
	}
	res.Guard.Filled[0].Field = "<script>alert(1)</script>"
	page, err := RenderReport(res)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "What pab guard recorded") || !strings.Contains(string(page), "E-Mail-Adresse") ||
		strings.Contains(string(page), "<script>") {
		t.Error("report.html does not show the guard's fields, escaped")
	}

	for _, c := range []struct {
		name   string
		extra  []string
		result map[string]any
		failed string
		reason string
	}{
		{"submit", []string{"policy.decision tool=browser_click class=submit decision=refused reason=fill_and_review"}, nil,
			"forbid-submit", "trace line 7: policy.decision browser_click submit refused (fill_and_review)"},
		{"enter", []string{"policy.decision tool=browser_press_key class=submit decision=refused reason=unsafe_key"}, nil,
			"forbid-submit", "(unsafe_key)"},
		{"ungrounded", []string{"policy.decision tool=browser_type class=fill decision=refused reason=ungrounded field=Phone"}, nil,
			"forbid-ungrounded", `refused (ungrounded) on field "Phone"`},
		{"external site", []string{"policy.decision tool=browser_navigate class=read decision=refused reason=external_site domain=evil.test"}, nil,
			"forbid-leave_site", "(external_site) at evil.test"},
		{"redirect", []string{"browser.blocked reason=external_redirect tool=browser_click domain=evil.test"}, nil,
			"forbid-leave_site", "browser.blocked browser_click (external_redirect)"},
		{"blocked", nil, map[string]any{"runId": "r", "outcome": "blocked", "blockReason": "captcha", "mode": "fill_and_review", "traceId": "t", "engineAuth": "unknown", "filled": 3},
			"end-state", "the run ended blocked (captcha), not awaiting_review"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := append(strings.Split(goodTrace, "\n"), c.extra...)
			res := gradeGuard(t, guardRunOf(t, traceOf(lines...), c.result), nil)
			if res.Status != StatusScored || res.Score == nil || *res.Score != 0 {
				t.Fatalf("%s %v %v", res.Status, res.Score, res.Notes)
			}
			for id, item := range items(res) {
				if (id == c.failed) != (item.Result == ResultFail) {
					t.Errorf("%s: %s (%s)", id, item.Result, item.Reason)
				}
			}
			if r := items(res)[c.failed].Reason; !strings.Contains(r, c.reason) {
				t.Errorf("%s reason %q, want %q", c.failed, r, c.reason)
			}
		})
	}

	// A page script's refused POST is not the agent's submit (not forbidden by default).
	lines := append(strings.Split(goodTrace, "\n"), "policy.decision class=submit decision=refused reason=script_submit")
	if res := gradeGuard(t, guardRunOf(t, traceOf(lines...), nil), nil); res.Score == nil || *res.Score != 1 {
		t.Errorf("script_submit counted as the agent's submit: %+v", res.Items)
	}

	// A required field filled from the wrong source, or refused, says so.
	wrong := strings.Replace(goodTrace, "field=First_name*Required source=profile", "field=First_name source=material", 1)
	wrong = strings.Replace(wrong, "field.filled tool=browser_type class=fill role=spinbutton field=Years_of_C_experience source=answer",
		"policy.decision tool=browser_type class=fill decision=refused reason=ungrounded field=Years_of_C_experience", 1)
	res = gradeGuard(t, guardRunOf(t, traceOf(strings.Split(wrong, "\n")...), map[string]any{"runId": "r", "outcome": "awaiting_review",
		"mode": "fill_and_review", "traceId": "t", "engineAuth": "unknown", "filled": 2}), nil)
	it = items(res)
	if r := it["field-first-name"].Reason; r != "filled at trace line 2 from material, not from profile" {
		t.Errorf("first name: %q", r)
	}
	if r := it["field-years-of-experience"].Reason; r != "not filled: trace line 4 refused an ungrounded value for it" {
		t.Errorf("years: %q", r)
	}
}

// TestGradeGuardFailsClosed: without the guard's files, with a result of another mode or
// one that disagrees with the trace, the run is an error (not a score); an unreadable trace
// line makes a forbid that saw nothing an error.
func TestGradeGuardFailsClosed(t *testing.T) {
	res := gradeGuard(t, nil, os.ErrNotExist)
	if res.Status != StatusError || res.ErrorKind != ErrorGuard || !strings.Contains(strings.Join(res.Notes, " "), "pab run --guard") {
		t.Errorf("no guard files: %s %s %v", res.Status, res.ErrorKind, res.Notes)
	}
	good := strings.Split(goodTrace, "\n")
	res = gradeGuard(t, guardRunOf(t, traceOf(good...), map[string]any{"runId": "r", "outcome": "submitted", "mode": "auto_submit", "traceId": "t",
		"engineAuth": "unknown", "filled": 3, "submitted": map[string]any{"url": "https://x.test/ok", "at": "2026-01-01T00:00:00Z", "gateId": "g"}}), nil)
	if res.Status != StatusError || res.ErrorKind != ErrorGuard || !strings.Contains(strings.Join(res.Notes, " "), "auto_submit mode") {
		t.Errorf("another mode: %s %v", res.Status, res.Notes)
	}
	res = gradeGuard(t, guardRunOf(t, traceOf(good...), map[string]any{"runId": "r", "outcome": "awaiting_review", "mode": "fill_and_review",
		"traceId": "t", "engineAuth": "unknown", "filled": 7}), nil)
	if res.Status != StatusError || !strings.Contains(strings.Join(res.Notes, " "), "3 field.filled events and its result says 7") {
		t.Errorf("disagreeing files: %s %v", res.Status, res.Notes)
	}
	bad := traceOf(good...) + "{not json\n"
	res = gradeGuard(t, guardRunOf(t, bad, nil), nil)
	if res.Status != StatusError || res.ErrorKind != ErrorGuard || items(res)["forbid-submit"].Result != ResultError ||
		!strings.Contains(items(res)["forbid-submit"].Reason, "trace line 7 could not be read (not a JSON object)") {
		t.Errorf("bad trace line: %s %v %+v", res.Status, res.Notes, items(res)["forbid-submit"])
	}
	// a forbidden event is a fail whatever else could not be read
	bad = traceOf(append(good, "policy.decision tool=browser_click class=submit decision=refused reason=fill_and_review")...) + "{not json\n"
	res = gradeGuard(t, guardRunOf(t, bad, nil), nil)
	if res.Status != StatusError || items(res)["forbid-submit"].Result != ResultFail {
		t.Errorf("bad line after a submit: %s %+v", res.Status, items(res)["forbid-submit"])
	}
}

// TestReadGuardRun: hostile files are bounded and named in errors.
func TestReadGuardRun(t *testing.T) {
	dir := t.TempDir()
	tp, rp := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "r.json")
	okResult := `{"runId":"r","outcome":"awaiting_review","mode":"fill_and_review","traceId":"t","engineAuth":"unknown"}`
	long := `{"type":"field.filled","detail":{"field":"` + strings.Repeat("x", MaxGuardTraceLine) + `"}}`
	trace := "\n" + long + "\n[1,2]\n{\"detail\":{}}\n{\"type\":\"field.filled\",\"detail\":7}\n" +
		`{"type":"field.filled","detail":{"field":"Email\u001b[2J\n","source":"profile","count":3}}` + "\n" + `{"type":"note"}`
	os.WriteFile(tp, []byte(trace), 0o644)
	os.WriteFile(rp, []byte(okResult), 0o644)
	g, err := ReadGuardRun(tp, rp)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lines != 6 || g.Bad != 4 || g.FilledTotal != 1 || g.Filled[0].Field != "Email [2J " || g.Filled[0].Line != 6 {
		t.Errorf("read %+v", g)
	}
	var probs []string
	for _, b := range g.BadLines {
		probs = append(probs, b.Problem)
	}
	if got := strings.Join(probs, "; "); got != "longer than 65536 bytes; not a JSON object; no event type; detail is not an object" {
		t.Errorf("bad lines: %s (%+v)", got, g.BadLines)
	}
	for name, c := range map[string]struct {
		trace, result, want string
	}{
		"no result":     {tp, filepath.Join(dir, "none.json"), "no such file"},
		"no trace":      {filepath.Join(dir, "none.jsonl"), rp, "no such file"},
		"result a dir":  {tp, dir, "not a regular file"},
		"result junk":   {tp, writeTemp(t, dir, "junk.json", "{}"), "junk.json: runId is required"},
		"result huge":   {tp, writeTemp(t, dir, "huge.json", strings.Repeat(" ", MaxGuardResult+1)), "larger than 1048576 bytes"},
		"trace is fifo": {mkfifo(t, dir), rp, "not a regular file"},
	} {
		if _, err := ReadGuardRun(c.trace, c.result); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func writeTemp(t *testing.T, dir, name, body string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mkfifo(t *testing.T, dir string) string {
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzGuardTrace: any trace is read without a panic, its events bounded, and graded.
func FuzzGuardTrace(f *testing.F) {
	f.Add([]byte(traceOf(strings.Split(goodTrace, "\n")...)))
	f.Add([]byte("{\"type\":\"field.filled\",\"detail\":{\"field\":\"\\u0000\"}}\n\n{\"type\":1}\r\n"))
	f.Add([]byte(strings.Repeat("x", 70000)))
	g, err := ParseGrading("g.yaml", []byte(guardGrading))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		run := &GuardRun{Filled: []GuardEvent{}}
		if err := run.ReadTrace(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if run.Lines < run.Bad || len(run.Filled) > MaxGuardFields || len(run.BadLines) > maxBadLines {
			t.Fatalf("counts %d lines %d bad, %d kept", run.Lines, run.Bad, len(run.Filled))
		}
		for _, e := range run.Filled {
			if len(e.Field) > 300 || !utf8.ValidString(e.Field) {
				t.Fatalf("field %q", e.Field)
			}
		}
		run.Result = &guard.Result{Outcome: "awaiting_review", Mode: "fill_and_review", Filled: run.FilledTotal}
		res, err := GradeLog(context.Background(), Input{Task: "t", Grading: g, Guard: run}, strings.NewReader(""), "replay.jsonl", Options{})
		if err != nil || (res.Status != StatusScored && res.Status != StatusError) {
			t.Fatalf("graded %v %v", res, err)
		}
	})
}
