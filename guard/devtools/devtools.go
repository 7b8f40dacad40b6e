// Package devtools is the browser side of the guard (docs/guard.md, "Enforcement below the
// page"): the guard's own DevTools-protocol session with the browser it started (or a
// browser context it made in the owner's Chromium), beside @playwright/mcp's. Through it,
// every target (pages, frames, popups, dedicated, shared and service workers) is attached
// before it runs (Target.setAutoAttach with waitForDebuggerOnStart, flattened), every
// network request of every target is held at the request stage (Fetch.enable) and decided
// by guard/netpolicy from what the browser is about to send, and the guard's page probes run
// in an isolated world (Page.createIsolatedWorld), where the page's prototypes and globals
// are not the probe's.
//
// The protocol is the Chrome DevTools Protocol (https://chromedevtools.github.io/devtools-protocol/),
// spoken over pab's own connection (internal/cdpconn).
package devtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pab-dev/pab/guard/netpolicy"
	"github.com/pab-dev/pab/internal/cdpconn"
)

// Defaults of Options' bounds.
const (
	// DefaultMaxTargets bounds the targets attached at once; a target past it (a page that
	// opens hundreds of popups) is closed before it runs.
	DefaultMaxTargets = 64
	// DefaultCallTimeout bounds one DevTools command's answer.
	DefaultCallTimeout = 15 * time.Second
	// maxQueued bounds the events read but not yet handled; past it the reader waits, which
	// holds the browser's further events in its socket (memory stays bounded).
	maxQueued = 4096
)

// ErrLost is the error of every call once the DevTools connection is gone.
var ErrLost = cdpconn.ErrLost

// Options configure Attach. Policy and URL are required.
type Options struct {
	// URL is the browser's DevTools websocket address (ws://127.0.0.1:PORT/devtools/browser/ID).
	URL string
	// Policy decides every held request (at netpolicy.LayerNetwork).
	Policy *netpolicy.Policy
	// NewContextsOnly limits the holds to the targets of browser contexts made after Attach
	// (Target.createBrowserContext): in the owner's browser (pab guard --cdp-endpoint) the
	// guard holds the context that @playwright/mcp opens for the run, through the wire gate,
	// and leaves the contexts that were there before (the default one with the owner's own
	// tabs) untouched. A context the guard could not see at Attach counts as new, so a doubt
	// holds more, never less. false holds every target.
	NewContextsOnly bool
	// MaxTargets bounds the targets attached at once (default DefaultMaxTargets).
	MaxTargets int
	// CallTimeout bounds one command (default DefaultCallTimeout).
	CallTimeout time.Duration
	// Log receives one line per problem (a target that could not be held, a failed
	// command); nil discards them.
	Log io.Writer
}

// Session is the guard's DevTools session with one browser. Make it with Attach; it holds
// requests until Close or until the connection is lost (Lost).
type Session struct {
	o    Options
	conn *cdpconn.Conn

	mu      sync.Mutex
	targets map[string]*target // by session id
	// known are the browser contexts that existed at Attach (Options.NewContextsOnly), by id
	known map[string]bool

	handled chan struct{} // closed when handle has seen the connection's last event

	held, refused, continued atomic.Int64
	closedTargets            atomic.Int64 // targets closed past MaxTargets
}

// target is one attached target.
type target struct {
	session, id, kind, url, context string
}

// Attach connects to the browser at o.URL and starts holding: it sets auto-attach on the
// browser (so that every existing and future target is attached, paused until the guard
// has enabled its request holds) and returns once the browser has answered. Errors: the
// connection, or the browser's refusal of auto-attach.
func Attach(ctx context.Context, o Options) (*Session, error) {
	if o.Policy == nil || o.URL == "" {
		return nil, errors.New("devtools: Options need URL and Policy")
	}
	if o.MaxTargets <= 0 {
		o.MaxTargets = DefaultMaxTargets
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	conn, err := cdpconn.Dial(ctx, o.URL, cdpconn.Options{CallTimeout: o.CallTimeout, Events: maxQueued, Log: o.Log})
	if err != nil {
		return nil, err
	}
	s := &Session{o: o, conn: conn, targets: map[string]*target{}, handled: make(chan struct{})}
	go s.handle()
	if o.NewContextsOnly {
		known, err := s.contexts(ctx)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.mu.Lock()
		s.known = known
		s.mu.Unlock()
	}
	if _, err := s.Call(ctx, "", "Target.setDiscoverTargets", map[string]any{"discover": true}); err != nil {
		s.Close()
		return nil, fmt.Errorf("devtools: Target.setDiscoverTargets: %w", err)
	}
	if _, err := s.Call(ctx, "", "Target.setAutoAttach", autoAttach); err != nil {
		s.Close()
		return nil, fmt.Errorf("devtools: Target.setAutoAttach: %w", err)
	}
	// targets that were open before (the browser's first page): attach each explicitly
	res, err := s.Call(ctx, "", "Target.getTargets", nil)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("devtools: Target.getTargets: %w", err)
	}
	var list struct {
		TargetInfos []targetInfo `json:"targetInfos"`
	}
	_ = json.Unmarshal(res, &list)
	for _, ti := range list.TargetInfos {
		if ti.Attached || !s.wants(ti) || ti.Type == "browser" || ti.Type == "tab" {
			continue
		}
		if _, err := s.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": ti.TargetID, "flatten": true}); err != nil {
			fmt.Fprintf(o.Log, "devtools: attach to %s %s: %v\n", ti.Type, ti.TargetID, err)
		}
	}
	return s, nil
}

// autoAttach: attach to every new target, paused until Runtime.runIfWaitingForDebugger,
// over this one connection.
var autoAttach = map[string]any{"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}

// targetInfo is Target.TargetInfo's fields the session uses.
type targetInfo struct {
	TargetID         string `json:"targetId"`
	Type             string `json:"type"`
	URL              string `json:"url"`
	Attached         bool   `json:"attached"`
	BrowserContextID string `json:"browserContextId"`
	OpenerID         string `json:"openerId"`
}

// wants reports whether the session holds ti: every target, or with NewContextsOnly those
// of a browser context made after Attach.
func (s *Session) wants(ti targetInfo) bool {
	if !s.o.NewContextsOnly {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.known[ti.BrowserContextID]
}

// contexts returns the ids of the browser's contexts now: Target.getBrowserContexts' ids and
// its default context's, and the context of every target (the default context's id is not
// reported by every Chromium).
func (s *Session) contexts(ctx context.Context) (map[string]bool, error) {
	res, err := s.Call(ctx, "", "Target.getBrowserContexts", nil)
	if err != nil {
		return nil, fmt.Errorf("devtools: Target.getBrowserContexts: %w", err)
	}
	var bc struct {
		IDs     []string `json:"browserContextIds"`
		Default string   `json:"defaultBrowserContextId"`
	}
	if err := json.Unmarshal(res, &bc); err != nil {
		return nil, fmt.Errorf("devtools: Target.getBrowserContexts: %w", err)
	}
	known := map[string]bool{}
	for _, id := range append(bc.IDs, bc.Default) {
		if id != "" {
			known[id] = true
		}
	}
	if res, err = s.Call(ctx, "", "Target.getTargets", nil); err != nil {
		return nil, fmt.Errorf("devtools: Target.getTargets: %w", err)
	}
	var list struct {
		TargetInfos []targetInfo `json:"targetInfos"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		return nil, fmt.Errorf("devtools: Target.getTargets: %w", err)
	}
	for _, ti := range list.TargetInfos {
		if ti.BrowserContextID != "" {
			known[ti.BrowserContextID] = true
		}
	}
	return known, nil
}

// HeldPages returns how many page targets the session holds now (for NewContextsOnly: the
// pages of the contexts made after Attach).
func (s *Session) HeldPages() int {
	return len(s.pages(false))
}

// Lost is closed when the DevTools connection ends other than by Close: the browser
// crashed, was closed, or dropped the session. From then on nothing is held by this layer.
func (s *Session) Lost() <-chan struct{} { return s.conn.Lost() }

// Err is why the session was lost (nil while it is not); it wraps ErrLost.
func (s *Session) Err() error { return s.conn.Err() }

// Stats are counts of held requests: continued and refused.
func (s *Session) Stats() (held, continued, refused int64) {
	return s.held.Load(), s.continued.Load(), s.refused.Load()
}

// Close ends the session (the browser keeps running; its held requests are released by the
// browser when the session goes).
func (s *Session) Close() error {
	err := s.conn.Close()
	<-s.handled
	return err
}

// Fail marks the session lost for err (the browser's process ended: its DevTools socket may
// outlive it for a while in a helper process): Lost is closed and every call fails.
func (s *Session) Fail(err error) { s.conn.Fail(err) }

// send writes one command without waiting for its answer.
func (s *Session) send(session, method string, params any) error {
	return s.conn.Send(session, method, params)
}

// Call sends a command on session ("" = the browser) and waits for its answer (at most the
// session's CallTimeout). It returns the result's raw JSON, or the browser's error.
func (s *Session) Call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	return s.conn.Call(ctx, session, method, params)
}

// handle handles events in order: held requests are decided here, at once; attaching a
// target (its holds enabled, then released) runs on a goroutine of its own, since it
// waits for answers.
func (s *Session) handle() {
	defer close(s.handled)
	for msg := range s.conn.Events() {
		switch msg.Method {
		case "Fetch.requestPaused":
			s.paused(string(msg.SessionID), msg.Params)
		case "Target.attachedToTarget":
			var ev struct {
				SessionID          string     `json:"sessionId"`
				TargetInfo         targetInfo `json:"targetInfo"`
				WaitingForDebugger bool       `json:"waitingForDebugger"`
			}
			if json.Unmarshal(msg.Params, &ev) == nil {
				go s.attached(ev.SessionID, ev.TargetInfo, ev.WaitingForDebugger)
			}
		case "Target.detachedFromTarget":
			var ev struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(msg.Params, &ev) == nil {
				s.mu.Lock()
				delete(s.targets, ev.SessionID)
				s.mu.Unlock()
			}
		case "Target.targetInfoChanged":
			var ev struct {
				TargetInfo targetInfo `json:"targetInfo"`
			}
			if json.Unmarshal(msg.Params, &ev) == nil {
				s.mu.Lock()
				for _, t := range s.targets {
					if t.id == ev.TargetInfo.TargetID {
						t.url = ev.TargetInfo.URL
					}
				}
				s.mu.Unlock()
			}
		}
	}
}

// attached enables the holds of a new target and lets it run. A target outside the
// session's browser context is let go untouched; one past MaxTargets is closed; one whose
// holds cannot be enabled is closed too (a page that cannot be held does not run).
func (s *Session) attached(session string, ti targetInfo, waiting bool) {
	ctx := context.Background()
	if !s.wants(ti) {
		if waiting {
			s.send(session, "Runtime.runIfWaitingForDebugger", nil)
		}
		s.send("", "Target.detachFromTarget", map[string]any{"sessionId": session})
		return
	}
	s.mu.Lock()
	n := len(s.targets)
	if n < s.o.MaxTargets {
		s.targets[session] = &target{session: session, id: ti.TargetID, kind: ti.Type, url: ti.URL, context: ti.BrowserContextID}
	}
	s.mu.Unlock()
	if n >= s.o.MaxTargets {
		s.closedTargets.Add(1)
		fmt.Fprintf(s.o.Log, "devtools: %d targets attached; closing the %s %s\n", n, ti.Type, ti.TargetID)
		s.send("", "Target.closeTarget", map[string]any{"targetId": ti.TargetID})
		return
	}
	fail := func(what string, err error) {
		fmt.Fprintf(s.o.Log, "devtools: %s of the %s %s: %v; closing it\n", what, ti.Type, ti.TargetID, err)
		s.send("", "Target.closeTarget", map[string]any{"targetId": ti.TargetID})
	}
	switch ti.Type {
	case "page", "iframe", "worker", "shared_worker", "service_worker", "webview", "other":
		if _, err := s.Call(ctx, session, "Fetch.enable", map[string]any{"patterns": []map[string]any{{"urlPattern": "*", "requestStage": "Request"}}}); err != nil {
			if ti.Type == "other" || (ti.Type == "worker" && strings.Contains(err.Error(), "wasn't found")) {
				// "other" loads nothing; a dedicated worker has no Fetch domain of its own: its
				// requests are held by the session of the frame that started it
				break
			}
			fail("Fetch.enable", err)
			return
		}
	}
	// a page's or frame's children (frames in processes of their own, dedicated workers) must
	// be attached before they run; other targets have none that load anything
	if _, err := s.Call(ctx, session, "Target.setAutoAttach", autoAttach); err != nil && (ti.Type == "page" || ti.Type == "iframe") {
		fail("Target.setAutoAttach", err)
		return
	}
	if waiting {
		s.send(session, "Runtime.runIfWaitingForDebugger", nil)
	}
}

// pausedRequest is Fetch.requestPaused's fields the decision needs.
type pausedRequest struct {
	RequestID string `json:"requestId"`
	Request   struct {
		URL         string            `json:"url"`
		URLFragment string            `json:"urlFragment"`
		Method      string            `json:"method"`
		Headers     map[string]string `json:"headers"`
		HasPostData bool              `json:"hasPostData"`
	} `json:"request"`
	ResourceType string `json:"resourceType"`
	FrameID      string `json:"frameId"`
}

// paused decides one held request and continues or fails it at once.
func (s *Session) paused(session string, params []byte) {
	var ev pausedRequest
	if err := json.Unmarshal(params, &ev); err != nil || ev.RequestID == "" {
		// a request the guard cannot read is refused, never let through nor left held
		var id struct {
			RequestID string `json:"requestId"`
		}
		if json.Unmarshal(params, &id) == nil && id.RequestID != "" {
			s.refused.Add(1)
			s.send(session, "Fetch.failRequest", map[string]any{"requestId": id.RequestID, "errorReason": "BlockedByClient"})
		}
		fmt.Fprintf(s.o.Log, "devtools: unreadable Fetch.requestPaused: %v\n", err)
		return
	}
	s.held.Add(1)
	h := make(map[string][]string, len(ev.Request.Headers))
	for k, v := range ev.Request.Headers {
		h[k] = []string{v}
	}
	req := netpolicy.Request{
		Method:     ev.Request.Method,
		URL:        ev.Request.URL + ev.Request.URLFragment,
		Header:     h,
		Navigation: ev.ResourceType == "Document",
		WebSocket:  ev.ResourceType == "WebSocket",
		HasBody:    ev.Request.HasPostData,
	}
	v := s.o.Policy.Decide(netpolicy.LayerNetwork, req, ev.ResourceType)
	if v.Allow {
		s.continued.Add(1)
		s.send(session, "Fetch.continueRequest", map[string]any{"requestId": ev.RequestID})
		return
	}
	s.refused.Add(1)
	reason := "BlockedByClient"
	if req.Navigation {
		reason = "Aborted" // an aborted navigation commits no error page: the frame stays where it was
	}
	s.send(session, "Fetch.failRequest", map[string]any{"requestId": ev.RequestID, "errorReason": reason})
}

// pages returns the attached page targets (and iframes in processes of their own).
func (s *Session) pages(withFrames bool) []target {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []target
	for _, t := range s.targets {
		if t.kind == "page" || (withFrames && t.kind == "iframe") {
			out = append(out, *t)
		}
	}
	return out
}
