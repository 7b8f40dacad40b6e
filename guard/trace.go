package guard

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/internal/textcut"
)

// Event types, exactly seed 000's contract.
var eventTypes = []string{
	"engine.auth_checked", "engine.started", "engine.ended", "source.read", "browser.navigated",
	"browser.blocked", "policy.decision", "field.filled", "artifact.uploaded", "review.ready",
	"submit.attempted", "submit.confirmed", "submit.unconfirmed", "run.paused", "run.resumed", "note",
}

// pauseReasons are the reasons a run waits for a person (seed 000).
var pauseReasons = []string{"captcha", "login_required", "consent_required", "missing_answer",
	"screening_ambiguity", "external_redirect", "duplicate_application", "anti_bot", "browser_lost", "browser_not_held"}

// blockReasons are the reasons a run can end blocked: the pause reasons plus these.
var blockReasons = append(slices.Clone(pauseReasons), "submit_unconfirmed", "incomplete",
	"engine_not_signed_in", "api_key_refused", "source_unavailable", "artifact_changed")

// modes of a run.
var modes = []string{"fill_and_review", "auto_submit"}

// engineAuths are the values of Result.EngineAuth; the guard writes "unknown".
var engineAuths = []string{"machine-login", "subscription", "api-key", "missing_login", "unknown"}

// detailKeys is the whitelist of Event.Detail keys; any other key is dropped by the Tracer.
// "field" is a field's label as the page shows it (field.filled, and a refused fill) and
// "source" the kind of grounding source a filled value was quoted from (SourceProfile, ...):
// neither is a typed value or grounding text. A refusal below the page adds "carrier" (what
// carried the data: method, url, cookie, header, form_action, size), "method", "resource" (the
// DevTools resource type), "navigation" and "websocket"; a control changed as the action
// landed adds "was" (its label before); "protection" is "off" for an unprotected browser.
var detailKeys = []string{"engine", "authMode", "engineAuth", "mode", "class", "tool", "decision",
	"reason", "role", "kind", "path", "sha256", "bytes", "gateId", "exitCode", "count", "status", "basis",
	"field", "source", "carrier", "method", "resource", "navigation", "websocket", "was", "protection"}

// Caps of seed 000's contract (LOCAL_APPLY_CAPS), counted in characters (Unicode code
// points), not bytes: a Japanese question keeps its 300 characters.
const (
	capQuestions    = 20   // questions in a result; also request_answer calls in a run
	capQuestionChar = 300  // characters of a question
	capAnswers      = 20   // the owner's answers: grounding.answers, and answers given at pauses
	capAnswerChars  = 2000 // characters of an answer
	capSummary      = 2000 // characters of the summary
)

// Event is one trace line. At is RFC 3339; Detail values are strings (at most 300 bytes),
// numbers or booleans under detailKeys only — never a typed value or grounding text.
type Event struct {
	Type        string         `json:"type"`
	At          string         `json:"at"`
	URL         string         `json:"url,omitempty"`
	Domain      string         `json:"domain,omitempty"`
	PauseReason string         `json:"pauseReason,omitempty"`
	Detail      map[string]any `json:"detail,omitempty"`
}

// Tracer writes events as JSON lines to an io.Writer. Goroutine-safe; a nil *Tracer discards
// events (its ID is ""). The first write error is kept (Err) and later events are dropped.
type Tracer struct {
	mu    sync.Mutex
	w     io.Writer
	id    string
	now   func() time.Time
	err   error
	count int
}

// NewTracer returns a Tracer writing to w (nil: events are only counted) under traceID; ""
// makes a random 16-hex-digit id.
func NewTracer(w io.Writer, traceID string) *Tracer {
	if traceID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		traceID = "trace-" + hex.EncodeToString(b[:])
	}
	return &Tracer{w: w, id: traceID, now: time.Now}
}

// ID is the trace id (Result.TraceID).
func (t *Tracer) ID() string {
	if t == nil {
		return ""
	}
	return t.id
}

// Err is the first write error, if any.
func (t *Tracer) Err() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Count is the number of events emitted.
func (t *Tracer) Count() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count
}

// Emit cleans e (unknown type => a "note" with no detail; detail keys outside detailKeys and
// non-primitive values dropped; strings bounded; URL kept only when http(s); At set when
// empty) and writes it as one line.
func (t *Tracer) Emit(e Event) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.At == "" {
		e.At = t.now().UTC().Format(time.RFC3339Nano)
	}
	e = cleanEvent(e)
	t.count++
	if t.w == nil || t.err != nil {
		return
	}
	line, err := json.Marshal(e)
	if err != nil {
		t.err = err
		return
	}
	if _, err := t.w.Write(append(line, '\n')); err != nil {
		t.err = err
	}
}

func cleanEvent(e Event) Event {
	if !slices.Contains(eventTypes, e.Type) {
		return Event{Type: "note", At: e.At}
	}
	e.URL = traceURL(e.URL)
	e.Domain = bound(strings.ToLower(e.Domain), 253)
	if !slices.Contains(pauseReasons, e.PauseReason) {
		e.PauseReason = ""
	}
	if len(e.Detail) > 0 {
		d := map[string]any{}
		for k, v := range e.Detail {
			if !slices.Contains(detailKeys, k) {
				continue
			}
			switch x := v.(type) {
			case string:
				d[k] = boundChars(x, 300)
			case bool, int, int64, float64:
				d[k] = x
			}
		}
		e.Detail = d
		if len(d) == 0 {
			e.Detail = nil
		}
	}
	return e
}

// traceURL keeps an http(s) URL without its query and fragment (they may carry typed values).
func traceURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return bound(u.String(), 2000)
}

// bound cuts s to at most n bytes on a rune boundary (textcut.Prefix).
func bound(s string, n int) string { return textcut.Prefix(s, n) }

// boundChars cuts s to at most n characters (code points); invalid bytes count one each.
func boundChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// Submitted is the confirmed submission of a result.
type Submitted struct {
	URL    string `json:"url"`
	At     string `json:"at"`
	GateID string `json:"gateId"`
}

// Result is the result envelope of a run (seed 000's contract). Outcome is awaiting_review,
// submitted, blocked or failed; Submitted only with submitted; BlockReason and Questions only
// with blocked; Error only with failed.
type Result struct {
	RunID           string     `json:"runId"`
	Outcome         string     `json:"outcome"`
	Mode            string     `json:"mode"`
	TraceID         string     `json:"traceId"`
	EngineAuth      string     `json:"engineAuth"`
	Filled          int        `json:"filled"`
	Uploaded        []string   `json:"uploaded"`
	SubmitAttempted bool       `json:"submitAttempted"`
	Summary         string     `json:"summary"`
	Submitted       *Submitted `json:"submitted,omitempty"`
	BlockReason     string     `json:"blockReason,omitempty"`
	Questions       []string   `json:"questions,omitempty"`
	Error           string     `json:"error,omitempty"`
}

var httpURLRe = regexp.MustCompile(`(?i)^https?://[^\s/]+`)

// ValidateResult parses a result envelope (JSON, at most 1 MiB) with the rules of seed 000's
// parseLocalApplyResult and returns it normalized: runId, outcome, mode, traceId and
// engineAuth are required; a submitted outcome needs auto_submit and the confirmed url, time
// and gateId; a blocked outcome gets a known blockReason ("incomplete" otherwise) and at most
// 20 questions of 300 characters; a failed outcome always carries an error. The error names
// the first rule broken.
func ValidateResult(data []byte) (Result, error) {
	if len(data) > 1<<20 {
		return Result{}, errors.New("result: larger than 1 MiB")
	}
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return Result{}, fmt.Errorf("result: not JSON: %v", err)
	}
	o, ok := raw.(map[string]any)
	if !ok {
		return Result{}, errors.New("result must be an object")
	}
	str := func(v any, n int) string {
		s, _ := v.(string)
		return boundChars(strings.TrimSpace(s), n)
	}
	oneOf := func(list []string, v any) string {
		s, _ := v.(string)
		if slices.Contains(list, s) {
			return s
		}
		return ""
	}
	var r Result
	if r.RunID = str(o["runId"], 100); r.RunID == "" {
		return Result{}, errors.New("runId is required")
	}
	if r.Outcome = oneOf([]string{"awaiting_review", "submitted", "blocked", "failed"}, o["outcome"]); r.Outcome == "" {
		return Result{}, errors.New("outcome must be awaiting_review, submitted, blocked or failed")
	}
	if r.Mode = oneOf(modes, o["mode"]); r.Mode == "" {
		return Result{}, errors.New("mode is required")
	}
	if r.TraceID = str(o["traceId"], 100); r.TraceID == "" {
		return Result{}, errors.New("traceId is required")
	}
	if r.EngineAuth = oneOf(engineAuths, o["engineAuth"]); r.EngineAuth == "" {
		return Result{}, fmt.Errorf("engineAuth must be one of %s", strings.Join(engineAuths, ", "))
	}
	if f, ok := o["filled"].(float64); ok && f >= 0 && f == float64(int64(f)) && f < 1e9 {
		r.Filled = int(f)
	}
	r.Uploaded = []string{}
	if list, ok := o["uploaded"].([]any); ok {
		for _, k := range list {
			if s, _ := k.(string); (s == "resume" || s == "cover_letter") && !slices.Contains(r.Uploaded, s) {
				r.Uploaded = append(r.Uploaded, s)
			}
		}
	}
	r.SubmitAttempted = o["submitAttempted"] == true
	r.Summary = str(o["summary"], capSummary)
	switch r.Outcome {
	case "submitted":
		s, _ := o["submitted"].(map[string]any)
		u, at, gate := str(s["url"], 2000), str(s["at"], 40), str(s["gateId"], 100)
		if r.Mode != "auto_submit" {
			return Result{}, errors.New("a submitted outcome requires a run in auto_submit mode")
		}
		if u == "" || !httpURLRe.MatchString(u) || at == "" || !validTime(at) || gate == "" {
			return Result{}, errors.New("a submitted outcome needs the confirmed url, its time and the gateId")
		}
		r.Submitted = &Submitted{URL: u, At: at, GateID: gate}
		r.SubmitAttempted = true
	case "blocked":
		if r.BlockReason = oneOf(blockReasons, o["blockReason"]); r.BlockReason == "" {
			r.BlockReason = "incomplete"
		}
		if list, ok := o["questions"].([]any); ok {
			for _, q := range list {
				s, _ := q.(string)
				if strings.TrimSpace(s) != "" && len(r.Questions) < capQuestions {
					r.Questions = append(r.Questions, boundChars(strings.TrimSpace(s), capQuestionChar))
				}
			}
		}
	case "failed":
		if r.Error = str(o["error"], 1000); r.Error == "" {
			r.Error = "The run failed without a reason."
		}
	}
	return r, nil
}

// validTime accepts the date-time forms Date.parse accepts in practice for these files:
// RFC 3339 (with or without fractional seconds).
func validTime(s string) bool {
	if _, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return true
	}
	_, err := time.Parse("2006-01-02T15:04:05Z07:00", s)
	return err == nil
}
