package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pab-dev/pab/internal/readlimit"
)

// The per-tool handlers that act on a page: click, type, select, press_key,
// upload_artifact, request_answer, ready_for_review and the gated submit.

// target resolves the ref argument against the latest snapshot.
func (b *Bridge) target(tool string, args map[string]any) (SnapNode, string) {
	ref := argStr(args, b.refName(tool))
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refs.lookup(ref)
}

func (b *Bridge) click(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	const tool = "browser_click"
	node, refusal := b.target(tool, args)
	if refusal != "" {
		return b.refuse(tool, ClassRead, "stale_ref", refusal, "")
	}
	element := argStr(args, "element")
	label := element
	if label == "" {
		label = node.Name
	}
	forward := map[string]any{"element": bound(label, 200), b.refName(tool): node.Ref}
	f := b.probe(ctx, node.Ref, label)
	if f == nil {
		return b.refuse(tool, ClassRead, "probe_failed", "That element could not be read from the page, so the click cannot be shown to be safe. Take a fresh browser_snapshot.", "")
	}
	if b.cfg.Holds != nil && !sameLabel(node.Name, f.Name) {
		// the element the isolated world read is not the one the snapshot names: the page's
		// world marked another (a poisoned setAttribute), or the page changed it meanwhile
		return b.refuse(tool, ClassRead, "probe_mismatch", "The page showed the guard another element than the one you named (\""+bound(node.Name, 80)+"\"), so the click cannot be shown to be safe. Take a fresh browser_snapshot.", "")
	}
	if f.Unlocked && b.cfg.LockToken != "" {
		// a page of the owner's browser opened before the guard: it runs without the lock
		return b.refuse(tool, ClassRead, "lock_missing", "This page was open before the guard's submit lock was installed, so no click on it is safe. Open it again with browser_navigate, then take a browser_snapshot.", "")
	}
	inForm := f.InForm || f.Submits
	if (f.Submits && f.Method == "post") || isCommitLabel(f.Name, inForm) || isCommitLabel(node.Name, inForm) || isCommitLabel(element, inForm) || (f.ScriptSubs && f.InForm) {
		return b.submit(ctx, tool, forward)
	}
	if f.Href != "" {
		if _, _, r := checkURL(f.Href); r != "" && !strings.HasPrefix(f.Href, "#") {
			return b.refuse(tool, ClassRead, "bad_url", "That link is not an http(s) page: "+r, "")
		}
		if b.carriesTyped(f.Href) {
			return b.refuseByGet(tool, hostOf(f.Href))
		}
	}
	if f.Submits && f.Method == "get" && b.carriesTyped(f.GetURL) {
		return b.refuseByGet(tool, hostOf(f.GetURL))
	}
	if su, sh := b.sensitiveTarget(f); su != nil && !b.confirmSensitive(ctx, tool, su, sh) {
		return textResult("That opens a page marked sensitive and the owner did not let the run open it. Stop now.", true)
	}
	if f.NewTab {
		return b.refuse(tool, ClassRead, "new_tab", "That link opens a new tab, which an application run may not use. Open it with browser_navigate if it is on this application's sites.", "")
	}
	if in(fieldRoles, node.Role) {
		if (node.Role == "checkbox" || node.Role == "switch" || node.Role == "menuitemcheckbox") && (isConsentLabel(node.Name) || isConsentLabel(f.Name)) {
			return b.consent(ctx, tool, node, f)
		}
		g, r := GroundValue(node.Name, argStr(args, "source_quote"), f.Group, b.sources())
		if r != "" {
			return b.refuseField(tool, "ungrounded", r, fieldLabel(node, f))
		}
		label := fieldLabel(node, f)
		if res := b.confirmWeak(ctx, tool, firstNonEmpty(f.Group, label), label, g); res != nil {
			return res
		}
		return b.clickChecked(ctx, tool, node, label, forward, &g, label)
	}
	isNav := in(navRoles, node.Role) || (node.Role == "button" && isPaginationLabel(node.Name))
	stepGet := f.Submits && f.Method != "post" && isStepLabel(firstNonEmpty(node.Name, f.Name))
	if isNav || stepGet {
		if b.pageLimitReached() {
			return b.refuse(tool, ClassRead, "limit_pages", "The run's limit of "+strconv.Itoa(b.app.Limits.Pages)+" pages is reached. Call ready_for_review now.", "")
		}
		b.allow(tool, ClassRead, "")
		return b.clickChecked(ctx, tool, node, label, forward, nil, "")
	}
	fileInput := f.Tag == "input" && f.Type == "file"
	step := (node.Role == "button" || f.Tag == "button") && isStepLabel(firstNonEmpty(node.Name, f.Name)) && !f.Submits
	focus := in(focusRoles, node.Role) && !f.Submits
	if fileInput || step || focus {
		b.allow(tool, ClassFill, "")
		return b.clickChecked(ctx, tool, node, label, forward, nil, "")
	}
	// A button that submits no POST form, runs no inline submit and has no commit word in
	// its own name ("Apply" on a listing, "Autofill with ...") is a read: whatever it opens
	// is checked as a page change, and a script POST it starts meets the submit lock.
	isButton := node.Role == "button" || f.Tag == "button" || (f.Tag == "input" && (f.Type == "button" || f.Type == "submit"))
	if isButton && !(f.Submits && f.Method == "post") && !f.ScriptSubs && f.Type != "reset" {
		if b.pageLimitReached() {
			return b.refuse(tool, ClassRead, "limit_pages", "The run's limit of "+strconv.Itoa(b.app.Limits.Pages)+" pages is reached. Call ready_for_review now.", "")
		}
		b.allow(tool, ClassRead, "button_no_submit")
		return b.clickChecked(ctx, tool, node, label, forward, nil, "")
	}
	return b.refuse(tool, ClassRead, "not_allowed_control", "\""+bound(firstNonEmpty(node.Name, node.Role), 80)+"\" is not a control an application run may press. Links, form-step buttons (Next, Upload, Add) and answers are allowed.", "")
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return x
		}
	}
	return ""
}

// fieldLabel is the label a fill is traced under: the field's accessible name in the
// snapshot, else the name the page gives it (the probe's); page text, never the agent's
// words (its "element" argument may hold anything).
func fieldLabel(node SnapNode, f *facts) string {
	if strings.TrimSpace(node.Name) != "" || f == nil {
		return node.Name
	}
	return f.Name
}

// confirmWeak handles a weak grounding (GroundResult.Weak: the field's label and the key of
// the quoted value share no meaning). Under grounding mode strict the owner is asked first
// (a screening_ambiguity pause naming the field and the key, never the value); resumed, the
// fill goes on (nil); cancelled, the run stops and the refusal is returned. Under lenient,
// or when the grounding is not weak, it returns nil (the fill is traced basis "weak").
func (b *Bridge) confirmWeak(ctx context.Context, tool, field, label string, g GroundResult) *mcp.CallToolResult {
	if !g.Weak || b.app.Grounding.Mode != GroundingStrict {
		return nil
	}
	d := map[string]any{"tool": tool, "class": ClassFill, "decision": "paused", "reason": "weak_grounding", "basis": "weak"}
	if label != "" {
		d["field"] = label
	}
	b.emit(Event{Type: "policy.decision", Detail: d})
	q := "Confirm the answer for \"" + bound(field, 120) + "\": the agent took it from the owner's \"" + bound(g.Key, 120) + "\", which may not answer this question."
	if !b.pauseFor(ctx, PauseRequest{Reason: "screening_ambiguity", Question: q}, nil) {
		return textResult("The owner did not confirm that answer. Stop now.", true)
	}
	return nil
}

// refuseField traces a refused fill of the field labelled label (class fill) and returns
// the refusal.
func (b *Bridge) refuseField(tool, code, msg, label string) *mcp.CallToolResult {
	d := map[string]any{"tool": tool, "class": ClassFill, "decision": "refused", "reason": code}
	if label != "" {
		d["field"] = label
	}
	b.emit(Event{Type: "policy.decision", Detail: d})
	return textResult(msg, true)
}

// fill forwards an answer and counts it; the field.filled event names the field (label,
// page text) and the kind of grounding source the value was quoted from (source).
func (b *Bridge) fill(ctx context.Context, tool, role, label string, g GroundResult, forward map[string]any) *mcp.CallToolResult {
	res := b.fillNoAfter(ctx, tool, role, label, g, forward)
	if res.IsError {
		return res
	}
	if tool == "browser_click" {
		return b.afterClick(ctx, tool, res)
	}
	return b.passOn(res)
}

// fillNoAfter is fill without the page-change check of a click (clickChecked does it after
// checking the form).
func (b *Bridge) fillNoAfter(ctx context.Context, tool, role, label string, g GroundResult, forward map[string]any) *mcp.CallToolResult {
	source := g.Kind
	// before typing: the page may send a value on its input event
	if t, ok := forward["text"].(string); ok {
		b.holdTyped(t)
		b.pushTyped(ctx, t)
	} else if vs, ok := forward["values"].([]any); ok && len(vs) > 0 {
		for _, v := range vs {
			if t, ok := v.(string); ok {
				b.holdTyped(t)
			}
		}
		t, _ := vs[0].(string)
		b.pushTyped(ctx, t)
	}
	res, msg, ok := b.callBrowser(ctx, tool, forward)
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	if changed := b.recheckActed(ctx, tool); changed != nil {
		return changed // the control is not what the decision was made for: put back, not filled
	}
	b.mu.Lock()
	b.filled++
	if len(b.typed) < 1000 {
		if t, ok := forward["text"].(string); ok {
			b.typed = append(b.typed, t)
		}
		if vs, ok := forward["values"].([]any); ok {
			for _, v := range vs {
				if t, ok := v.(string); ok {
					b.typed = append(b.typed, t)
				}
			}
		}
	}
	b.mu.Unlock()
	d := map[string]any{"tool": tool, "class": ClassFill, "role": role}
	if label != "" {
		d["field"] = label
	}
	if source != "" {
		d["source"] = source
	}
	if g.Weak {
		d["basis"] = "weak"
	} else if source != "" {
		d["basis"] = "value"
	}
	b.emit(Event{Type: "field.filled", Detail: d})
	return res
}

// fillTarget resolves the ref argument of a fill tool against the latest snapshot, and
// refuses (stale_ref, or reason with msg) unless it names a node of one of roles.
func (b *Bridge) fillTarget(tool string, args map[string]any, roles []string, reason, msg string) (SnapNode, *mcp.CallToolResult) {
	node, refusal := b.target(tool, args)
	if refusal != "" {
		return node, b.refuse(tool, ClassFill, "stale_ref", refusal, "")
	}
	if !in(roles, node.Role) {
		return node, b.refuse(tool, ClassFill, reason, msg, "")
	}
	return node, nil
}

func (b *Bridge) typeText(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	const tool = "browser_type"
	node, res := b.fillTarget(tool, args, typeRoles, "not_a_text_field", "Type only into a text field (textbox, searchbox, combobox, spinbutton) from the latest browser_snapshot.")
	if res != nil {
		return res
	}
	if v, _ := args["submit"].(bool); v {
		return b.refuse(tool, ClassSubmit, "type_submit", "Typing may not submit the form (submit: true is refused).", "")
	}
	f := b.probe(ctx, node.Ref, firstNonEmpty(argStr(args, "element"), node.Name))
	if f == nil {
		return b.refuse(tool, ClassFill, "probe_failed", "That field could not be read from the page. Take a fresh browser_snapshot.", "")
	}
	if isCredentialLabel(node.Name) || isCredentialLabel(f.Name) || f.Type == "password" {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "paused", "reason": "login_required"}})
		return b.signIn(ctx, tool, node, f)
	}
	value := argStr(args, "text")
	label := fieldLabel(node, f)
	g, r := GroundValue(value, argStr(args, "source_quote"), label, b.sources())
	if r != "" {
		return b.refuseField(tool, "ungrounded", r, label)
	}
	if res := b.confirmWeak(ctx, tool, label, label, g); res != nil {
		return res
	}
	forward := map[string]any{"element": bound(firstNonEmpty(argStr(args, "element"), node.Name), 200), b.refName(tool): node.Ref, "text": value}
	return b.fill(ctx, tool, node.Role, label, g, forward)
}

func (b *Bridge) selectOption(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	const tool = "browser_select_option"
	node, res := b.fillTarget(tool, args, selectRoles, "not_a_select", "Select only in a dropdown (combobox or listbox) from the latest browser_snapshot.")
	if res != nil {
		return res
	}
	values := argStrings(args, "values")
	if len(values) == 0 {
		return b.refuse(tool, ClassFill, "bad_arguments", "values needs at least one value.", "")
	}
	f := b.probe(ctx, node.Ref, firstNonEmpty(argStr(args, "element"), node.Name))
	if f == nil {
		return b.refuse(tool, ClassFill, "probe_failed", "That dropdown could not be read from the page. Take a fresh browser_snapshot.", "")
	}
	if f.ScriptSubs && f.InForm {
		return b.refuse(tool, ClassSubmit, "auto_submit_control", "Changing that dropdown submits the form, so the run may not change it. Call request_answer so the owner sets it.", "")
	}
	label := fieldLabel(node, f)
	// An option is grounded by the label the page shows, never by its value attribute (a
	// value "7" may read "EUR 150,000"); the label is what is selected.
	var g GroundResult
	labels := make([]any, 0, len(values))
	for _, v := range values {
		shown := v
		if f.Tag == "select" {
			found := false
			for _, o := range f.Options {
				if o.Label == strings.TrimSpace(v) {
					shown, found = o.Label, true
					break
				}
			}
			for _, o := range f.Options {
				if !found && o.Value == v {
					shown, found = o.Label, true
				}
			}
			if !found {
				return b.refuseField(tool, "no_such_option", "That dropdown has no option "+strconv.Quote(bound(v, 80))+". Use an option's label as the snapshot shows it.", label)
			}
		}
		gv, r := GroundValue(shown, argStr(args, "source_quote"), label, b.sources())
		if r != "" {
			if shown != v {
				r = "The option " + strconv.Quote(bound(v, 80)) + " reads " + strconv.Quote(bound(shown, 120)) + " on the page, and that label is what must come from the owner's words. " + r
			}
			return b.refuseField(tool, "ungrounded", r, label)
		}
		if gv.Weak || g.Kind == "" {
			g = gv
		}
		labels = append(labels, shown)
	}
	if res := b.confirmWeak(ctx, tool, label, label, g); res != nil {
		return res
	}
	forward := map[string]any{"element": bound(firstNonEmpty(argStr(args, "element"), node.Name), 200), b.refName(tool): node.Ref, "values": labels}
	res = b.fill(ctx, tool, node.Role, label, g, forward)
	if res.IsError {
		return res
	}
	return b.afterClick(ctx, tool, res)
}

// pressKey presses a safe key. The values of the page's form controls are read before and
// after: a key on a focused value-bearing control is a fill (traced class fill), and any
// control a key changed is put back and traced policy.decision refused "fill.unjustified"
// with the control's label (never the value): a key press has no grounding, so it may set
// no value (an arrow on a select or a radio group, a Tab onto a consent radio ...).
func (b *Bridge) pressKey(ctx context.Context, key string) *mcp.CallToolResult {
	const tool = "browser_press_key"
	if !isSafeKey(key) {
		return b.refuse(tool, ClassSubmit, "unsafe_key", "That key is refused: only Tab, Shift+Tab, arrows, Escape, Home/End and PageUp/PageDown move between fields. Enter and Space can submit; type text with browser_type.", "")
	}
	canCheck := b.canEvaluate()
	class := ClassRead
	if canCheck {
		before, ok := b.evalJSON(ctx, formSnapJS)
		if !ok {
			return b.refuse(tool, ClassRead, "inspect_failed", "The page's form could not be read, so the key press cannot be shown to be safe. Take a browser_snapshot.", "")
		}
		b.setSnapOrigin(before)
		if v, _ := before["focusedValueBearing"].(bool); v && key != "Tab" && key != "Shift+Tab" && key != "Escape" {
			class = ClassFill
		}
	}
	b.allow(tool, class, "")
	res, msg, ok := b.callBrowser(ctx, tool, map[string]any{"key": key})
	if !ok {
		return textResult(msg, true)
	}
	if canCheck {
		if labels := b.formCheck(ctx, tool); len(labels) > 0 {
			return textResult("That key changed the value of "+bound(strings.Join(labels, "; "), 400)+", and the change was undone: a key press may not set an answer. Answer with browser_click, browser_select_option or browser_type and a source_quote. Take a browser_snapshot.", true)
		}
	}
	return b.afterClick(ctx, tool, res)
}

func (b *Bridge) upload(ctx context.Context, kind string) *mcp.CallToolResult {
	const tool = "upload_artifact"
	b.mu.Lock()
	done := slices.Contains(b.uploaded, kind)
	b.mu.Unlock()
	if done {
		return b.refuse(tool, ClassFill, "already_uploaded", "The "+strings.ReplaceAll(kind, "_", " ")+" is already attached; it is never attached twice.", "")
	}
	path, sum, err := b.app.ArtifactFile(kind)
	if err != nil {
		if errors.Is(err, ErrArtifactChanged) {
			b.mu.Lock()
			b.blocked = &block{reason: "artifact_changed", questions: []string{"The approved " + strings.ReplaceAll(kind, "_", " ") + " changed after it was approved."}}
			b.stopped = true
			b.stopNote = "Stopped: an approved artifact changed."
			b.mu.Unlock()
			return b.refuse(tool, ClassFill, "artifact_changed", err.Error()+". Nothing was attached. Stop now.", "")
		}
		return b.refuse(tool, ClassFill, "artifact_unavailable", err.Error()+".", "")
	}
	if b.cfg.UploadDir != "" {
		staged, err := stageArtifact(path, sum, filepath.Join(b.cfg.UploadDir, "artifacts", kind))
		if err != nil {
			return b.refuse(tool, ClassFill, "artifact_unavailable", "The approved "+strings.ReplaceAll(kind, "_", " ")+" could not be prepared for upload ("+bound(err.Error(), 300)+"). Nothing was attached.", "")
		}
		path = staged
	}
	res, msg, ok := b.callBrowser(ctx, "browser_file_upload", map[string]any{"paths": []any{path}})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		t := textOf(res)
		if strings.Contains(strings.ToLower(t), "modal state") || strings.Contains(strings.ToLower(t), "file chooser") {
			return b.refuse(tool, ClassFill, "no_file_chooser", "No file chooser is open. Click the field's upload control first, then call upload_artifact.", "")
		}
		return textResult(capText(t), true)
	}
	b.mu.Lock()
	b.uploaded = append(b.uploaded, kind)
	b.mu.Unlock()
	b.emit(Event{Type: "artifact.uploaded", Detail: map[string]any{"kind": kind, "sha256": sum, "class": ClassFill}})
	return textResult("Attached the approved "+strings.ReplaceAll(kind, "_", " ")+".", false)
}

// stageArtifact copies the file at path into dir (created 0700) under its own base name,
// from the bytes it reads and checks against sum, so the copy is exactly the approved file.
// Errors: unreadable, over MaxArtifactBytes, a hash that differs, or a failed write.
func stageArtifact(path, sum, dir string) (string, error) {
	f, err := readlimit.OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := readlimit.All(f, MaxArtifactBytes)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(data)
	if hex.EncodeToString(h[:]) != sum {
		return "", fmt.Errorf("%w: it changed while it was being read", ErrArtifactChanged)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(out, data, 0o600); err != nil {
		return "", err
	}
	return out, nil
}

func (b *Bridge) requestAnswer(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	question := boundChars(strings.TrimSpace(argStr(args, "question")), capQuestionChar)
	if question == "" {
		return b.refuse("request_answer", ClassRead, "bad_arguments", "request_answer needs the question.", "")
	}
	b.mu.Lock()
	progress := b.filled + len(b.uploaded) + b.pages
	if progress != b.askProgress {
		b.askStreak = 0
	}
	b.askProgress = progress
	b.askStreak++
	b.asks++
	streak, asks := b.askStreak, b.asks
	full := len(b.extraSources)+len(b.app.Grounding.Answers) >= capAnswers
	b.mu.Unlock()
	switch {
	case asks > capQuestions:
		return b.refuse("request_answer", ClassRead, "too_many_questions", "This run has asked the owner "+strconv.Itoa(capQuestions)+" questions, the most it may. Fill what the sources cover, then call ready_for_review.", "")
	case streak > maxAsksWithoutProgress:
		return b.refuse("request_answer", ClassRead, "no_progress", "You asked the owner "+strconv.Itoa(maxAsksWithoutProgress)+" questions in a row without filling anything in between. Use the answers you have (take a browser_snapshot and fill the fields), or call ready_for_review.", "")
	case full:
		return b.refuse("request_answer", ClassRead, "too_many_answers", "The owner has given "+strconv.Itoa(capAnswers)+" answers, the most a run keeps. Fill what the sources cover, then call ready_for_review.", "")
	}
	reason := "missing_answer"
	if argStr(args, "kind") == "screening_ambiguity" {
		reason = "screening_ambiguity"
	}
	b.mu.Lock()
	before := len(b.extraSources)
	b.mu.Unlock()
	if !b.pauseFor(ctx, PauseRequest{Reason: reason, Question: question}, nil) {
		return textResult("Nobody answered. Do not guess. Stop now.", true)
	}
	b.mu.Lock()
	after := len(b.extraSources)
	b.mu.Unlock()
	if after == before {
		return textResult("The owner resumed without answering: leave that field empty and continue with the others.", false)
	}
	return textResult("The owner answered. The answer is now one of your sources: quote it as source_quote. Take a browser_snapshot and continue.", false)
}

func (b *Bridge) review(summary string) *mcp.CallToolResult {
	b.mu.Lock()
	b.reviewReady = true
	if b.summary == "" {
		b.summary = boundChars(strings.TrimSpace(summary), capSummary)
	}
	filled := b.filled
	b.mu.Unlock()
	b.emit(Event{Type: "review.ready", Detail: map[string]any{"class": ClassReview, "count": filled}})
	return textResult("Recorded. The application waits for the owner's review; nothing was submitted. Stop now.", false)
}

// lock arms (on) or disarms the page's submit lock (SubmitLockScript), when one is installed.
func (b *Bridge) lock(ctx context.Context, on bool) {
	if b.cfg.Net != nil {
		if on {
			b.cfg.Net.Arm()
		} else {
			b.cfg.Net.Disarm()
		}
	}
	if b.cfg.LockToken == "" {
		return
	}
	_, _, _ = b.callBrowser(ctx, "browser_evaluate", map[string]any{"function": lockArmCall(b.cfg.LockToken, on)})
}

// submit is the final Submit: never under fill_and_review; once, gated and traced, under
// auto_submit.
func (b *Bridge) submit(ctx context.Context, tool string, forward map[string]any) *mcp.CallToolResult {
	gate := b.app.Gate
	if b.app.Mode != "auto_submit" || gate == "" {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassSubmit, "decision": "refused", "reason": "fill_and_review"}})
		b.review("Stopped at the final submit: this run fills the form and waits for review.")
		return textResult("That control submits the application, and this run is fill-and-review: it was NOT pressed. The application waits for the owner's review. Stop now.", false)
	}
	before := b.inspect(ctx)
	if before == nil {
		return b.refuse(tool, ClassSubmit, "inspect_failed", "The page could not be read, so the submit cannot be shown to be safe. Take a fresh browser_snapshot.", "")
	}
	host := hostOf(before.URL)
	if blocker := blockerOf(before); blocker != "" {
		b.mu.Lock()
		b.blocked = &block{reason: blocker, questions: []string{}}
		b.mu.Unlock()
		b.emit(Event{Type: "browser.blocked", URL: before.URL, Domain: host, Detail: map[string]any{"reason": blocker}})
		return b.refuse(tool, ClassSubmit, blocker, "The page shows a blocker ("+strings.ReplaceAll(blocker, "_", " ")+"); nothing was submitted.", host)
	}
	if host == "" || !b.app.AllowsHost(host) {
		return b.refuse(tool, ClassSubmit, "external_site", "This page is not on one of this application's sites; nothing was submitted.", host)
	}
	b.mu.Lock()
	b.submitAttempted = true
	b.mu.Unlock()
	b.emit(Event{Type: "submit.attempted", URL: before.URL, Domain: host, Detail: map[string]any{"class": ClassSubmit, "gateId": gate, "tool": tool}})
	b.lock(ctx, true)
	res, _, ok := b.callBrowser(ctx, tool, forward)
	if ok && !res.IsError {
		_, _, _ = b.callBrowser(ctx, "browser_wait_for", map[string]any{"time": 2})
	}
	b.lock(ctx, false)
	var after *pageState
	if ok && !res.IsError {
		after = b.inspect(ctx)
	}
	b.mu.Lock()
	b.refs.invalidate()
	b.mu.Unlock()
	if after != nil && after.Confirmed {
		if ah := hostOf(after.URL); ah != "" && b.app.AllowsHost(ah) {
			at := b.now().UTC().Format(time.RFC3339)
			b.mu.Lock()
			b.submitted = &Submitted{URL: traceURL(after.URL), At: at, GateID: gate}
			b.lastURL = after.URL
			b.mu.Unlock()
			b.emit(Event{Type: "submit.confirmed", URL: after.URL, Domain: ah, Detail: map[string]any{"gateId": gate}})
			return textResult("Submitted, and the site confirmed it. Stop now.", false)
		}
	}
	e := Event{Type: "submit.unconfirmed", Domain: host, Detail: map[string]any{"gateId": gate}}
	if after != nil {
		e.URL = after.URL
	}
	b.emit(e)
	return textResult("The submit was pressed but no confirmation was seen. Do not press it again. Stop now.", true)
}
