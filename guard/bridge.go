package guard

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/guard/devtools"
	"github.com/pab-dev/pab/guard/netpolicy"
)

// The Bridge's state machine: its configuration, its state under mu, CallTool (limits,
// repeats, dispatch to the handlers of actions.go and navigate.go), pauses, Result and
// Status. The tools it offers are in tools.go, what it reads from the page in page.go.

// Browser is the browser MCP server behind the guard (the child @playwright/mcp, or a fake in
// tests). ListTools returns the child's tools with their raw input schemas; CallTool forwards one
// call. A transport failure is a Go error; a tool-level failure is a result with IsError.
type Browser interface {
	ListTools(ctx context.Context) ([]*mcp.Tool, error)
	CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error)
}

// PauseRequest asks a person to act. Reason is one of pauseReasons (captcha, login_required,
// consent_required, missing_answer, screening_ambiguity, external_redirect,
// duplicate_application, anti_bot) or "sensitive_page". Question is at most 300 characters;
// URL and Domain name the page concerned when there is one.
type PauseRequest struct {
	Reason   string `json:"reason"`
	Question string `json:"question,omitempty"`
	URL      string `json:"url,omitempty"`
	Domain   string `json:"domain,omitempty"`
}

// PauseOutcome is how a pause ended.
type PauseOutcome struct {
	Resumed bool   // false: cancelled (or the context ended)
	Answer  string // with Resumed: the owner's answer (joins the grounding sources), may be ""
	// AllowSite, with Resumed at an external_redirect pause, is the host the owner admits
	// for the rest of the run (the pause's Domain); the guard then opens the page again and
	// checks it as any other. "" admits nothing.
	AllowSite string
}

// Pauser waits for a person. It must return when ctx ends.
type Pauser interface {
	Pause(ctx context.Context, p PauseRequest) PauseOutcome
}

// Config builds a Bridge. App, Browser and Pauser are required; Trace nil discards events.
type Config struct {
	App     *Application
	Browser Browser
	Pauser  Pauser
	Trace   *Tracer          // JSONL trace writer (trace.go)
	Now     func() time.Time // nil = time.Now
	// LockToken, when set, is the token of the submit lock (SubmitLockScript) the browser
	// runs in every page: the Bridge arms the lock with it only around an allowed auto_submit
	// click. "" = no lock installed (e.g. a --browser-mcp server).
	LockToken string
	// UploadDir, when set, is a directory the browser may read files from (e.g.
	// @playwright/mcp's output directory): each approved artifact is copied there from the
	// bytes just hashed, and that copy is uploaded. "" = the artifact's own path is uploaded.
	UploadDir string
	// OwnerBrowser says the owner sees and can use the browser (pab guard --headed or
	// --cdp-endpoint): at a consent pause the owner ticks the box there and the guard
	// rechecks it; false (headless), the owner's resume is their approval and the guard
	// ticks it for them (see Bridge.consent).
	OwnerBrowser bool
	// Net, when set, is the run's request policy (guard/netpolicy), which the browser's
	// network layer and the wire gate enforce: every value is added to it before it is typed,
	// an allowed auto_submit click arms it once, and the forms of every page landed are given
	// to it. nil: no enforcement below the page (an unprotected --browser-mcp server).
	Net *netpolicy.Policy
	// Holds, when set, is the guard's own DevTools session with the browser (guard/devtools):
	// forms are read through it in an isolated world, and its loss pauses the run
	// (browser_lost) and ends it blocked: a run never goes on unprotected.
	Holds *devtools.Session
	// OwnerContext says the run's pages live in a browser context of their own in the
	// owner's browser (pab guard --cdp-endpoint), the only one Holds holds: once the browser
	// MCP server has answered a call, a run with no page there (the server used another
	// context, or the owner closed the run's window) pauses (browser_not_held) and ends
	// blocked, as a lost session does.
	OwnerContext bool
}

// Status is a snapshot of a run for the control API (JSON).
type Status struct {
	RunID           string        `json:"runId"`
	Mode            string        `json:"mode"`
	State           string        `json:"state"` // running | paused | done
	Pause           *PauseRequest `json:"pause,omitempty"`
	Actions         int           `json:"actions"`
	Pages           int           `json:"pages"`
	Filled          int           `json:"filled"`
	Uploaded        []string      `json:"uploaded"`
	SubmitAttempted bool          `json:"submitAttempted"`
	URL             string        `json:"url,omitempty"`    // the last page landed on
	Result          *Result       `json:"result,omitempty"` // set once the run is done
}

// MaxOutputBytes caps the text of every result the agent gets.
const MaxOutputBytes = 48 << 10

// maxAsksWithoutProgress bounds request_answer calls in a row with nothing filled, attached
// or opened between them; the next is refused (no_progress) without asking the owner.
const maxAsksWithoutProgress = 3

// consecutive browser failures after which the run fails.
const maxBrowserFailures = 3

// block is what stopped the work and was not resolved.
type block struct {
	reason    string
	questions []string
}

// Bridge is the policy layer between an agent and its browser: every tool call is classed
// (read, fill, review, submit) and allowed or refused by code. Safe for concurrent use; calls
// are handled one at a time, and Status/Result/Done never wait for a call in progress.
type Bridge struct {
	cfg    Config
	app    *Application
	now    func() time.Time
	start  time.Time
	callMu sync.Mutex // serializes CallTool

	mu              sync.Mutex // guards everything below
	child           map[string]*mcp.Tool
	refArg          map[string]string
	actions         int
	pages           int
	filled          int
	uploaded        []string
	refs            refTracker
	admitted        map[string]bool
	extraSources    []string
	reviewReady     bool
	summary         string
	submitAttempted bool
	submitted       *Submitted
	blocked         *block
	stopped         bool
	stopNote        string
	failure         string
	browserFails    int
	answered        bool // the browser MCP server has answered a call (Config.OwnerContext)
	pause           *PauseRequest
	lastURL         string
	repeat          RepeatGuard
	typed           []string        // values filled in this run (kept in memory only, never traced): a URL carrying one is a submit by GET
	asks            int             // request_answer calls in the run
	askStreak       int             // request_answer calls since the last progress
	askProgress     int             // filled + uploaded + pages at the last request_answer
	extraSites      map[string]bool // hosts the owner admitted for this run (PauseOutcome.AllowSite)
	sensitiveOK     map[string]bool // host+path of sensitive pages the owner confirmed
	engineStarted   bool
	engineEnded     bool
	acted           *actedControl // the control the last probe read in the isolated world (with Config.Holds)
	snapOrigin      float64       // performance.timeOrigin of the document of the last form snapshot (formCheck); under mu
}

// NewBridge checks cfg (App, Browser and Pauser are required) and returns a Bridge. The
// run's clock (the minutes limit) starts here.
func NewBridge(cfg Config) (*Bridge, error) {
	if cfg.App == nil || cfg.Browser == nil || cfg.Pauser == nil {
		return nil, errors.New("guard: Config needs App, Browser and Pauser")
	}
	if cfg.App.Mode == "auto_submit" && cfg.App.Gate == "" {
		return nil, errors.New("guard: auto_submit needs a gate id")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	b := &Bridge{cfg: cfg, app: cfg.App, now: now, start: now(), admitted: map[string]bool{},
		extraSites: map[string]bool{}, sensitiveOK: map[string]bool{}}
	b.emit(Event{Type: "note", Detail: map[string]any{"mode": cfg.App.Mode, "status": "started"}})
	b.emitSources()
	return b, nil
}

func (b *Bridge) emit(e Event) {
	if e.At == "" {
		e.At = b.now().UTC().Format(time.RFC3339Nano)
	}
	b.cfg.Trace.Emit(e)
}

// loadChild fetches the child's tools once.
func (b *Bridge) loadChild(ctx context.Context) error {
	b.mu.Lock()
	loaded := b.child != nil
	b.mu.Unlock()
	if loaded {
		return nil
	}
	tools, err := b.cfg.Browser.ListTools(ctx)
	if err != nil {
		return err
	}
	child := map[string]*mcp.Tool{}
	refArg := map[string]string{}
	for _, t := range tools {
		if t == nil || t.Name == "" {
			continue
		}
		child[t.Name] = t
		props := schemaProps(t.InputSchema)
		switch {
		case props["target"] != nil:
			refArg[t.Name] = "target"
		case props["ref"] != nil:
			refArg[t.Name] = "ref"
		}
	}
	b.mu.Lock()
	b.child, b.refArg = child, refArg
	b.mu.Unlock()
	return nil
}

// refuse traces a refused decision and returns the refusal.
func (b *Bridge) refuse(tool, class, code, msg, domain string) *mcp.CallToolResult {
	b.emit(Event{Type: "policy.decision", Domain: domain, Detail: map[string]any{"tool": tool, "class": class, "decision": "refused", "reason": code}})
	return textResult(msg, true)
}

func (b *Bridge) allow(tool, class, basis string) {
	d := map[string]any{"tool": tool, "class": class, "decision": "allowed"}
	if basis != "" {
		d["basis"] = basis
	}
	b.emit(Event{Type: "policy.decision", Detail: d})
}

// callBrowser forwards one call to the child. A transport error or a garbage answer (nil) is
// returned as a refusal message with ok false, and traced.
func (b *Bridge) callBrowser(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, string, bool) {
	res, err := b.cfg.Browser.CallTool(ctx, tool, args)
	if err != nil || res == nil {
		b.mu.Lock()
		b.browserFails++
		fails := b.browserFails
		if fails >= maxBrowserFailures && b.failure == "" {
			b.failure = "the browser MCP server failed " + strconv.Itoa(fails) + " times in a row"
			b.stopped = true
		}
		b.mu.Unlock()
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "decision": "failed", "reason": "browser_error", "count": fails}})
		why := "no answer"
		if err != nil {
			why = bound(err.Error(), 300)
		}
		return nil, "The browser did not answer properly (" + why + "); nothing was done and nothing was submitted. Take a browser_snapshot to see the page.", false
	}
	b.mu.Lock()
	b.browserFails = 0
	b.answered = true
	b.mu.Unlock()
	return res, "", true
}

// passOn returns a child's result to the agent (capped), and learns any snapshot in it.
func (b *Bridge) passOn(res *mcp.CallToolResult) *mcp.CallToolResult {
	t := textOf(res)
	b.learnSnapshot(t)
	return textResult(t, res.IsError)
}

func (b *Bridge) learnSnapshot(t string) bool {
	if !strings.Contains(t, "[ref=") {
		return false
	}
	snap, ok := ParseSnapshot(t)
	if !ok {
		return false
	}
	b.mu.Lock()
	b.refs.update(snap)
	b.mu.Unlock()
	return true
}

// pauseFor asks the owner and waits. true: resumed (and recheck, when given, passed).
// Not resumed: the run stops, blocked for p.Reason.
func (b *Bridge) pauseFor(ctx context.Context, p PauseRequest, recheck func() bool) bool {
	if _, ok := b.pauseOutcome(ctx, p); !ok {
		return false
	}
	if recheck != nil && !recheck() {
		b.mu.Lock()
		b.stopped = true
		b.stopNote = "The owner resumed but the page still needs a person (" + p.Reason + ")."
		b.mu.Unlock()
		return false
	}
	b.unblock()
	return true
}

// unblock clears the block a resumed pause left.
func (b *Bridge) unblock() {
	b.mu.Lock()
	b.blocked = nil
	b.mu.Unlock()
}

// pauseOutcome asks the owner and waits, as pauseFor without a recheck, and returns how the
// pause ended: resumed (with the owner's answer kept as a source, and the site they admit,
// PauseOutcome.AllowSite), or not (the run is then stopped, blocked for p.Reason).
func (b *Bridge) pauseOutcome(ctx context.Context, p PauseRequest) (PauseOutcome, bool) {
	p.Question = boundChars(p.Question, capQuestionChar)
	reason := p.Reason
	traceReason := reason
	if reason == "sensitive_page" {
		traceReason = "consent_required" // the owner's call; "sensitive_page" is in the detail
	}
	b.mu.Lock()
	q := []string{}
	if p.Question != "" {
		q = append(q, p.Question)
	}
	b.blocked = &block{reason: traceReason, questions: q}
	pp := p
	b.pause = &pp
	b.mu.Unlock()
	b.emit(Event{Type: "run.paused", URL: p.URL, Domain: p.Domain, PauseReason: traceReason, Detail: map[string]any{"reason": reason}})
	out := b.cfg.Pauser.Pause(ctx, p)
	b.mu.Lock()
	b.pause = nil
	b.mu.Unlock()
	if !out.Resumed {
		b.emit(Event{Type: "run.resumed", Detail: map[string]any{"status": "cancelled", "reason": reason}})
		b.mu.Lock()
		b.stopped = true
		b.stopNote = "The owner cancelled the run at a pause (" + reason + ")."
		b.mu.Unlock()
		return out, false
	}
	b.emit(Event{Type: "run.resumed", Detail: map[string]any{"status": "resumed", "reason": reason}})
	if a := strings.TrimSpace(out.Answer); a != "" {
		b.mu.Lock()
		kept := len(b.extraSources)+len(b.app.Grounding.Answers) < capAnswers
		if kept {
			b.extraSources = append(b.extraSources, boundChars(a, capAnswerChars))
		}
		b.mu.Unlock()
		if kept {
			b.emit(Event{Type: "source.read", Detail: map[string]any{"kind": "owner_answer", "bytes": len(a)}})
		} else {
			b.emit(Event{Type: "note", Detail: map[string]any{"kind": "owner_answer", "status": "not_kept", "count": capAnswers}})
		}
	}
	return out, true
}

// sources are the grounding sources of the run: the application's, then the owner's
// answers given at pauses.
func (b *Bridge) sources() []GroundingSource {
	b.mu.Lock()
	defer b.mu.Unlock()
	src := b.app.GroundingSources()
	for _, a := range b.extraSources {
		src = append(src, GroundingSource{Kind: SourceOwnerAnswer, Text: a})
	}
	return src
}

// Done reports whether the run is over (review ready, submit attempted, stopped by a guard,
// a limit, a browser failure or a cancel).
func (b *Bridge) Done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.doneLocked()
}

func (b *Bridge) doneLocked() bool { return b.reviewReady || b.submitAttempted || b.stopped }

// Cancel ends the run: it is blocked (the reason of a pending pause, else incomplete) and
// later calls are refused. note (bounded) goes into the result's summary.
func (b *Bridge) Cancel(note string) {
	b.mu.Lock()
	already := b.doneLocked()
	if !already {
		b.stopped = true
		b.stopNote = bound(strings.TrimSpace(note), 500)
		if b.stopNote == "" {
			b.stopNote = "The run was cancelled."
		}
	}
	b.mu.Unlock()
	if !already {
		b.emit(Event{Type: "note", Detail: map[string]any{"status": "cancelled"}})
	}
}

// Result is the result envelope of the run so far; it always passes ValidateResult.
func (b *Bridge) Result() Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := Result{RunID: b.app.ID, Mode: b.app.Mode, TraceID: b.cfg.Trace.ID(), EngineAuth: "unknown",
		Filled: b.filled, Uploaded: slices.Clone(b.uploaded), SubmitAttempted: b.submitAttempted,
		Summary: boundChars(b.summary, capSummary)}
	if r.TraceID == "" {
		r.TraceID = "trace-" + b.app.ID
	}
	if r.Uploaded == nil {
		r.Uploaded = []string{}
	}
	switch {
	case b.submitted != nil:
		r.Outcome = "submitted"
		s := *b.submitted
		r.Submitted = &s
	case b.submitAttempted:
		r.Outcome, r.BlockReason = "blocked", "submit_unconfirmed"
		r.Questions = []string{"The application was submitted but the site did not confirm it. Check the employer's site or your email before anything is retried."}
	case b.reviewReady:
		r.Outcome = "awaiting_review"
	case b.failure != "":
		r.Outcome, r.Error = "failed", b.failure
	case b.blocked != nil:
		r.Outcome, r.BlockReason, r.Questions = "blocked", b.blocked.reason, slices.Clone(b.blocked.questions)
	default:
		r.Outcome, r.BlockReason = "blocked", "incomplete"
	}
	if r.Summary == "" && b.stopNote != "" {
		r.Summary = b.stopNote
	}
	if len(r.Questions) > capQuestions {
		r.Questions = r.Questions[:capQuestions]
	}
	return r
}

// Status is a snapshot for the control API.
func (b *Bridge) Status() Status {
	b.mu.Lock()
	st := Status{RunID: b.app.ID, Mode: b.app.Mode, State: "running", Actions: b.actions, Pages: b.pages,
		Filled: b.filled, Uploaded: slices.Clone(b.uploaded), SubmitAttempted: b.submitAttempted, URL: b.lastURL}
	if st.Uploaded == nil {
		st.Uploaded = []string{}
	}
	if b.pause != nil {
		p := *b.pause
		st.State, st.Pause = "paused", &p
	}
	done := b.doneLocked()
	b.mu.Unlock()
	if done {
		r := b.Result()
		st.State, st.Result = "done", &r
	}
	return st
}

// CallTool classes one call and allows or refuses it. It never returns a Go error for a policy
// decision: refusals are results with IsError (a fill_and_review submit and a nudge are
// plain results). args may be nil. Calls run one at a time; a pause blocks until the Pauser
// returns.
func (b *Bridge) CallTool(ctx context.Context, name string, args map[string]any) *mcp.CallToolResult {
	b.callMu.Lock()
	defer b.callMu.Unlock()
	if args == nil {
		args = map[string]any{}
	}
	if b.Done() {
		return b.refuse(bound(name, 60), ClassRead, "run_over", "The application is finished for this run. Stop now.", "")
	}
	if res := b.browserLost(ctx, bound(name, 60)); res != nil {
		return res
	}
	if err := b.loadChild(ctx); err != nil {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": bound(name, 60), "decision": "failed", "reason": "browser_error"}})
		return textResult("The browser's tools could not be read ("+bound(err.Error(), 300)+"); nothing was done.", true)
	}
	ps, ok := b.specFor(name)
	if !ok {
		return b.refuse(bound(name, 60), ClassRead, "tool_not_allowed", bound(name, 60)+" is not available to an application run. The tools you have are listed by the server.", "")
	}
	if msg := validateArgs(name, ps, args); msg != "" {
		return b.refuse(name, ClassRead, "bad_arguments", msg, "")
	}
	b.mu.Lock()
	verdict, count := b.repeat.Observe(name, args)
	b.mu.Unlock()
	switch verdict {
	case RepeatStop:
		b.mu.Lock()
		b.stopped = true
		b.stopNote = "Stopped: the agent repeated the same call " + strconv.Itoa(count) + " times in a row."
		if b.blocked == nil {
			b.blocked = &block{reason: "incomplete", questions: []string{"The agent kept repeating " + name + "; the form may need a person."}}
		}
		b.mu.Unlock()
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": name, "decision": "refused", "reason": "repeat_stop", "count": count}})
		return textResult("You repeated the same "+name+" call "+strconv.Itoa(count)+" times; the run is stopped. Stop now.", true)
	case RepeatNudge:
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": name, "decision": "refused", "reason": "repeat_nudge", "count": count}})
		return textResult("You repeated the same "+name+" call "+strconv.Itoa(count)+" times in a row, so it was not run again. If the form is filled, call ready_for_review; otherwise change approach (take a browser_snapshot, or call request_answer).", true)
	}
	switch name {
	case "ready_for_review":
		return b.review(argStr(args, "summary"))
	case "request_answer":
		return b.requestAnswer(ctx, args)
	}
	if b.now().Sub(b.start) > time.Duration(b.app.Limits.Minutes)*time.Minute {
		b.stopLimit("minutes")
		return b.refuse(name, ClassRead, "limit_minutes", "The run's time limit of "+strconv.Itoa(b.app.Limits.Minutes)+" minutes is reached. Call ready_for_review now.", "")
	}
	b.mu.Lock()
	b.actions++
	over := b.actions > b.app.Limits.Actions
	b.mu.Unlock()
	if over {
		return b.refuse(name, ClassRead, "limit_actions", "The run's limit of "+strconv.Itoa(b.app.Limits.Actions)+" browser actions is reached. Call ready_for_review now.", "")
	}
	switch name {
	case "browser_navigate":
		return b.navigate(ctx, argStr(args, "url"))
	case "browser_navigate_back":
		return b.back(ctx)
	case "browser_snapshot":
		return b.snapshot(ctx)
	case "browser_wait_for":
		return b.waitFor(ctx, args)
	case "browser_click":
		return b.click(ctx, args)
	case "browser_type":
		return b.typeText(ctx, args)
	case "browser_select_option":
		return b.selectOption(ctx, args)
	case "browser_press_key":
		return b.pressKey(ctx, argStr(args, "key"))
	case "upload_artifact":
		return b.upload(ctx, argStr(args, "kind"))
	}
	return b.refuse(name, ClassRead, "tool_not_allowed", name+" is not available to an application run.", "")
}

func (b *Bridge) stopLimit(which string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked == nil {
		b.blocked = &block{reason: "incomplete", questions: []string{}}
	}
	b.stopNote = "The run's " + which + " limit was reached."
}

func (b *Bridge) pageLimitReached() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pages >= b.app.Limits.Pages
}
