// Package cdpconn is pab's own client of the Chrome DevTools Protocol
// (https://chromedevtools.github.io/devtools-protocol/): one websocket connection to a
// browser (ws://127.0.0.1:PORT/devtools/browser/ID), spoken with chromedp's websocket
// transport (github.com/chromedp/chromedp/remote). Commands go to the browser or to a
// target's flattened session (Target.attachToTarget with flatten: true); each answer is
// matched to its command by id; events are handed on in the order they came, or dropped
// when nobody reads them.
//
// It is the one home of pab's raw DevTools connections: the guard's request holds
// (guard/devtools) and the run view's screenshots (batch) use it. It keeps no model of the
// page (no DOM tree, no frames), which is why it exists beside chromedp: chromedp's
// context for a target that runs already (chromedp.WithTargetID) rebuilds its DOM tree
// on the caller's goroutine while its event goroutine reads the same map, a data race
// that can end the process ("concurrent map read and map write") when the page changes
// while it attaches.
package cdpconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto"
	cdptarget "github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp/remote"
)

// DefaultCallTimeout bounds one command's answer when Options.CallTimeout is 0.
const DefaultCallTimeout = 15 * time.Second

// MaxValueBytes bounds a value that Evaluate and RuntimeResult accept from the page (1 MiB);
// a larger one is an error.
const MaxValueBytes = 1 << 20

// ErrLost is the error of every call once the connection is gone (closed, or lost: the
// browser crashed, was closed, or dropped the connection).
var ErrLost = errors.New("devtools: the browser's DevTools session is gone")

// Options configure Dial. The zero value is usable.
type Options struct {
	// CallTimeout bounds one command's answer (default DefaultCallTimeout).
	CallTimeout time.Duration
	// Events is how many events may wait in Events() unread; past it the reader waits,
	// which holds the browser's further messages in its socket (memory stays bounded, and
	// answers wait too). 0 drops every event: the connection is for commands only.
	Events int
	// Log receives one line when the connection is lost; nil discards it.
	Log io.Writer
}

// Conn is one DevTools connection. Make it with Dial; it is safe for use by several
// goroutines.
type Conn struct {
	o  Options
	ws *remote.Conn

	writeMu sync.Mutex
	nextID  atomic.Int64

	mu      sync.Mutex
	waiting map[int64]chan *cdproto.Message
	closed  bool // Close was called
	gone    bool // the reader stopped: no answer comes any more

	quit chan struct{} // closed by Close: the reader stops handing on events

	events chan *cdproto.Message
	lost   chan struct{}
	lostMu sync.Once
	err    error
	done   chan struct{}
}

// Dial connects to the DevTools websocket at url (within ctx and the call timeout) and
// starts reading. Errors: the connection's.
func Dial(ctx context.Context, url string, o Options) (*Conn, error) {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	dctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
	defer cancel()
	ws, err := remote.DialContext(dctx, url)
	if err != nil {
		return nil, fmt.Errorf("devtools: connect %s: %w", url, err)
	}
	c := &Conn{o: o, ws: ws, waiting: map[int64]chan *cdproto.Message{},
		lost: make(chan struct{}), done: make(chan struct{}), quit: make(chan struct{})}
	if o.Events > 0 {
		c.events = make(chan *cdproto.Message, o.Events)
	}
	go c.read()
	return c, nil
}

// Events is every event of the connection (the browser's and every attached session's,
// Message.SessionID telling which), in order; it is closed when the connection ends. It is
// nil when Options.Events was 0.
func (c *Conn) Events() <-chan *cdproto.Message { return c.events }

// Lost is closed when the connection ends other than by Close: the browser crashed, was
// closed, or dropped the connection; or Fail was called.
func (c *Conn) Lost() <-chan struct{} { return c.lost }

// Err is why the connection was lost (nil while it is not); it wraps ErrLost.
func (c *Conn) Err() error {
	select {
	case <-c.lost:
		return c.err
	default:
		return nil
	}
}

// Fail marks the connection lost for err (the browser's process ended: its DevTools socket
// may outlive it for a while in a helper process): Lost is closed, Err says why, and every
// call, waiting or new, fails with Err.
func (c *Conn) Fail(err error) { c.setLost(err) }

func (c *Conn) setLost(err error) {
	c.lostMu.Do(func() {
		c.err = fmt.Errorf("%w: %v", ErrLost, err)
		fmt.Fprintf(c.o.Log, "devtools: %v\n", c.err)
		close(c.lost)
	})
}

// Close ends the connection (the browser keeps running) and waits for its reader to stop.
// Waiting calls return ErrLost.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	err := c.ws.Close()
	<-c.done
	return err
}

// read reads every message: answers go to their caller, events to Events (or nowhere).
func (c *Conn) read() {
	defer close(c.done)
	out := c.events // nil after Close: the rest is read and dropped until the socket ends
	if c.events != nil {
		defer close(c.events)
	}
	for {
		msg := new(cdproto.Message)
		if err := c.ws.Read(context.Background(), msg); err != nil {
			c.mu.Lock()
			closed := c.closed
			c.gone = true
			for id, ch := range c.waiting {
				close(ch)
				delete(c.waiting, id)
			}
			c.mu.Unlock()
			if !closed {
				c.setLost(err)
			}
			return
		}
		if msg.ID != 0 {
			c.mu.Lock()
			ch := c.waiting[msg.ID]
			delete(c.waiting, msg.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- msg
			}
			continue
		}
		if out != nil {
			select {
			case out <- msg:
			case <-c.quit:
				out = nil
			}
		}
	}
}

// message builds one command.
func (c *Conn) message(id int64, session, method string, params any) (*cdproto.Message, error) {
	msg := &cdproto.Message{ID: id, SessionID: cdptarget.SessionID(session), Method: cdproto.MethodType(method)}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		msg.Params = b
	}
	return msg, nil
}

// Send writes one command on session ("" = the browser) without waiting for its answer.
func (c *Conn) Send(session, method string, params any) error {
	msg, err := c.message(c.nextID.Add(1), session, method, params)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.ws.Write(context.Background(), msg)
}

// Call sends a command on session ("" = the browser) and waits for its answer, at most the
// call timeout and while ctx lasts and the connection is not lost (Fail included). It
// returns the result's raw JSON; errors: the browser's (its message and code), ErrLost (or
// Err, which wraps it), ctx's, or no answer in time.
func (c *Conn) Call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	msg, err := c.message(id, session, method, params)
	if err != nil {
		return nil, err
	}
	if err := c.Err(); err != nil {
		return nil, err // lost, or marked lost by Fail (the select below may take an answer first)
	}
	ch := make(chan *cdproto.Message, 1)
	c.mu.Lock()
	if c.closed || c.gone {
		c.mu.Unlock()
		return nil, ErrLost
	}
	c.waiting[id] = ch
	c.mu.Unlock()
	c.writeMu.Lock()
	err = c.ws.Write(context.Background(), msg)
	c.writeMu.Unlock()
	if err != nil {
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	t := time.NewTimer(c.o.CallTimeout)
	defer t.Stop()
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, ErrLost
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		return json.RawMessage(m.Result), nil
	case <-c.lost:
	case <-t.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
	if err := c.Err(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%s: no answer in %s", method, c.o.CallTimeout)
}

// TargetInfo is the part of Target.TargetInfo pab reads.
type TargetInfo struct {
	TargetID         string `json:"targetId"`
	Type             string `json:"type"` // "page", "iframe", "worker", "browser", "tab", ...
	Title            string `json:"title"`
	URL              string `json:"url"`
	Attached         bool   `json:"attached"`
	BrowserContextID string `json:"browserContextId"`
	OpenerID         string `json:"openerId"`
}

// Targets is Target.getTargets: every target of the browser now.
func (c *Conn) Targets(ctx context.Context) ([]TargetInfo, error) {
	res, err := c.Call(ctx, "", "Target.getTargets", nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		TargetInfos []TargetInfo `json:"targetInfos"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		return nil, fmt.Errorf("Target.getTargets: %w", err)
	}
	return list.TargetInfos, nil
}

// Attach attaches to the target with id (Target.attachToTarget, flattened) and returns its
// session id, for Call and Evaluate. It enables no domain, so it neither holds nor changes
// the target; Detach ends it.
func (c *Conn) Attach(ctx context.Context, targetID string) (session string, err error) {
	res, err := c.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": targetID, "flatten": true})
	if err != nil {
		return "", err
	}
	var a struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &a); err != nil || a.SessionID == "" {
		return "", fmt.Errorf("Target.attachToTarget %s: no session (%v)", targetID, err)
	}
	return a.SessionID, nil
}

// Detach ends session (Target.detachFromTarget) without waiting; the target goes on.
func (c *Conn) Detach(session string) {
	c.Send("", "Target.detachFromTarget", map[string]any{"sessionId": session})
}

// Evaluate runs expression in the main world of the top frame of the target at session
// (Runtime.evaluate, awaiting a promise, at most 5 s of the page's time) and decodes its
// value (returned by value, JSON, at most MaxValueBytes) into out (nil: the value is not
// read). Errors: the command's, the page's exception, or a value out does not take.
func (c *Conn) Evaluate(ctx context.Context, session, expression string, out any) error {
	res, err := c.Call(ctx, session, "Runtime.evaluate", map[string]any{"expression": expression,
		"returnByValue": true, "awaitPromise": true, "timeout": 5000})
	if err != nil {
		return err
	}
	v, _, err := RuntimeResult("Runtime.evaluate", res)
	if err != nil || out == nil {
		return err
	}
	if len(v) == 0 {
		v = json.RawMessage("null") // undefined
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("Runtime.evaluate: value %.100s: %w", v, err)
	}
	return nil
}

// RemoteObject is the part of a Runtime.RemoteObject pab reads: its subtype ("node", ...)
// and id (empty for a value returned by value).
type RemoteObject struct {
	Subtype  string `json:"subtype"`
	ObjectID string `json:"objectId"`
}

// RuntimeResult reads the answer res of Runtime.evaluate or Runtime.callFunctionOn (method):
// the value (with returnByValue; at most MaxValueBytes), else the remote object. A thrown
// exception is an error carrying its text.
func RuntimeResult(method string, res json.RawMessage) (value json.RawMessage, obj RemoteObject, err error) {
	var r struct {
		Result struct {
			RemoteObject
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, obj, fmt.Errorf("%s: %w", method, err)
	}
	if e := r.ExceptionDetails; e != nil {
		text := e.Text
		if e.Exception != nil && e.Exception.Description != "" {
			text += " " + e.Exception.Description
		}
		return nil, obj, fmt.Errorf("%s: %.500s", method, text)
	}
	if len(r.Result.Value) > MaxValueBytes {
		return nil, obj, fmt.Errorf("%s: answer over %d bytes", method, MaxValueBytes)
	}
	return r.Result.Value, r.Result.RemoteObject, nil
}
