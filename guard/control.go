package guard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxControlBody bounds the body of a control API request (POST /resume, /cancel).
const MaxControlBody = 64 << 10

// maxAnswer bounds an owner's answer (bytes), from the control API or the terminal.
const maxAnswer = 16 << 10

// Controller is the Pauser of `pab guard`: a pause waits until a person resumes it (with an
// optional answer) or cancels it, through the loopback HTTP control API (Handler) or a
// terminal prompt (Prompt). It also answers GET /status with the run's status. Safe for
// concurrent use; pauses are handled one at a time.
type Controller struct {
	mu      sync.Mutex
	run     RunControl
	pending *pendingPause
	seq     int
	notify  []chan PauseRequest // prompts waiting to print the next pause
	turn    chan struct{}       // one pause at a time
}

// RunControl is what the Controller needs of the run: its status, and a way to end it when
// /cancel comes outside a pause. *Bridge implements it.
type RunControl interface {
	Status() Status
	Cancel(reason string)
}

// pendingPause is the pause in progress.
type pendingPause struct {
	id    int
	req   PauseRequest
	since time.Time
	done  chan PauseOutcome // buffered, 1: receives the outcome once
	ended bool
}

// Waiting is the pause in progress as the control API shows it.
type Waiting struct {
	ID       int       `json:"id"`
	Reason   string    `json:"reason"`
	Question string    `json:"question,omitempty"`
	URL      string    `json:"url,omitempty"`
	Domain   string    `json:"domain,omitempty"`
	Since    time.Time `json:"since"`
}

// ControlStatus is the body of GET /status: the run's Status (when a run is attached),
// plus the pause the controller is waiting on, if any.
type ControlStatus struct {
	Run     *Status  `json:"run,omitempty"`
	Waiting *Waiting `json:"waiting"`
}

// NewController returns a Controller with no run attached (GET /status then shows only the
// pause, and POST /cancel outside a pause is refused).
func NewController() *Controller {
	return &Controller{turn: make(chan struct{}, 1)}
}

// Attach sets the run whose status GET /status shows and which POST /cancel ends.
func (c *Controller) Attach(run RunControl) {
	c.mu.Lock()
	c.run = run
	c.mu.Unlock()
}

// Pause implements Pauser: it publishes p and blocks until a person resumes (PauseOutcome
// with Resumed and the answer) or cancels it, or ctx ends (not resumed).
func (c *Controller) Pause(ctx context.Context, p PauseRequest) PauseOutcome {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return PauseOutcome{}
	}
	defer func() { <-c.turn }()
	c.mu.Lock()
	c.seq++
	pp := &pendingPause{id: c.seq, req: p, since: time.Now().UTC(), done: make(chan PauseOutcome, 1)}
	c.pending = pp
	notify := c.notify
	c.notify = nil
	c.mu.Unlock()
	for _, ch := range notify {
		ch <- p // buffered, 1
	}
	var out PauseOutcome
	select {
	case out = <-pp.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	pp.ended = true
	if c.pending == pp {
		c.pending = nil
	}
	c.mu.Unlock()
	return out
}

// Waiting returns the pause in progress, or nil.
func (c *Controller) Waiting() *Waiting {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return nil
	}
	p := c.pending
	return &Waiting{ID: p.id, Reason: p.req.Reason, Question: p.req.Question, URL: p.req.URL, Domain: p.req.Domain, Since: p.since}
}

// errNoPause is returned by Resume and Cancel when no pause is in progress.
var errNoPause = errors.New("no pause in progress")

// Resume ends the pause in progress as resumed with answer (trimmed; at most 16 KiB).
// Errors: no pause in progress, or an answer too long.
func (c *Controller) Resume(answer string) error {
	answer = strings.TrimSpace(answer)
	if len(answer) > maxAnswer {
		return fmt.Errorf("answer is %d bytes; at most %d are accepted", len(answer), maxAnswer)
	}
	return c.end(PauseOutcome{Resumed: true, Answer: answer})
}

// Cancel ends the pause in progress as not resumed (the run then ends). Outside a pause it
// ends the attached run (RunControl.Cancel). Errors: neither a pause nor a run.
func (c *Controller) Cancel() error {
	if err := c.end(PauseOutcome{}); err == nil {
		return nil
	}
	c.mu.Lock()
	run := c.run
	c.mu.Unlock()
	if run == nil {
		return errNoPause
	}
	run.Cancel("cancelled by the owner")
	return nil
}

func (c *Controller) end(out PauseOutcome) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	if p == nil || p.ended {
		return errNoPause
	}
	p.ended = true
	c.pending = nil
	p.done <- out
	return nil
}

// Status is the body of GET /status.
func (c *Controller) Status() ControlStatus {
	c.mu.Lock()
	run := c.run
	c.mu.Unlock()
	st := ControlStatus{Waiting: c.Waiting()}
	if run != nil {
		s := run.Status()
		st.Run = &s
	}
	return st
}

// Handler is the control API: GET /status (ControlStatus as JSON), POST /resume (optional
// JSON body {"answer": "..."}), POST /cancel. Answers are JSON; 404 for other paths, 405
// for other methods, 413 for a body over 64 KiB, 400 for a body that is not the JSON object
// expected, 409 when there is no pause to resume (or nothing to cancel).
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use GET /status"})
			return
		}
		writeJSON(w, http.StatusOK, c.Status())
	})
	mux.HandleFunc("/resume", func(w http.ResponseWriter, r *http.Request) {
		if !postOnly(w, r) {
			return
		}
		var body struct {
			Answer *string `json:"answer"`
		}
		if !readBody(w, r, &body) {
			return
		}
		answer := ""
		if body.Answer != nil {
			answer = *body.Answer
		}
		if err := c.Resume(answer); err != nil {
			code := http.StatusConflict
			if !errors.Is(err, errNoPause) {
				code = http.StatusBadRequest
			}
			writeJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"resumed": true, "status": c.Status()})
	})
	mux.HandleFunc("/cancel", func(w http.ResponseWriter, r *http.Request) {
		if !postOnly(w, r) {
			return
		}
		var body struct{}
		if !readBody(w, r, &body) {
			return
		}
		if err := c.Cancel(); err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"cancelled": true, "status": c.Status()})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: the control API has GET /status, POST /resume and POST /cancel"})
	})
	return mux
}

func postOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	w.Header().Set("Allow", "POST")
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use POST " + r.URL.Path})
	return false
}

// readBody decodes an optional JSON object body (empty is allowed) of at most
// MaxControlBody bytes into v, answering 413 or 400 itself when it fails.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxControlBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("body over %d bytes", MaxControlBody)})
		} else {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read body: " + err.Error()})
		}
		return false
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return true
	}
	if err := decodeControlBody(data, v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return false
	}
	return true
}

// decodeControlBody decodes one JSON object with only known fields into v.
func decodeControlBody(data []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf(`body: want a JSON object such as {"answer": "..."}: %v`, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("body: want one JSON object")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// ServeControl serves Handler on ln (from ListenLoopback) until ctx ends, then shuts the
// server down and returns nil. Errors: a failed Serve.
func (c *Controller) ServeControl(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	return serveUntil(ctx, srv, ln, 2*time.Second)
}

// Prompt runs a terminal prompt until ctx ends or in ends: each pause is printed on out,
// then the next line read from in ends it: an empty line resumes, "cancel" cancels, any
// other text resumes with that text as the answer. Lines typed while no pause is in
// progress get a short note. Lines are bounded: one over 16 KiB stops the prompt (the
// control API still works).
func (c *Controller) Prompt(ctx context.Context, in io.Reader, out io.Writer) {
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 4096), maxAnswer+1)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		ch := make(chan PauseRequest, 1)
		c.mu.Lock()
		var now *PauseRequest
		if c.pending != nil && !c.pending.ended {
			r := c.pending.req
			now = &r
		} else {
			c.notify = append(c.notify, ch)
		}
		c.mu.Unlock()
		if now != nil {
			ch <- *now
		}
		select {
		case <-ctx.Done():
			return
		case err := <-readErr:
			if err != nil {
				fmt.Fprintf(out, "pab guard: terminal prompt stopped: %v\n", err)
			}
			return
		case line := <-lines:
			c.dropNotify(ch)
			if c.Waiting() == nil {
				fmt.Fprintln(out, "pab guard: no pause in progress")
				continue
			}
			c.answerLine(line, out)
		case p := <-ch:
			fmt.Fprintf(out, "\npab guard: PAUSED (%s)", p.Reason)
			if p.URL != "" {
				fmt.Fprintf(out, " at %s", p.URL)
			}
			fmt.Fprintln(out)
			if p.Question != "" {
				fmt.Fprintf(out, "  %s\n", p.Question)
			}
			fmt.Fprint(out, "  Enter: resume; type an answer then Enter: resume with it; \"cancel\": end the run\n> ")
			select {
			case <-ctx.Done():
				return
			case err := <-readErr:
				if err != nil {
					fmt.Fprintf(out, "pab guard: terminal prompt stopped: %v\n", err)
				}
				return
			case line := <-lines:
				c.answerLine(line, out)
			}
		}
	}
}

// answerLine ends the pause in progress from one terminal line.
func (c *Controller) answerLine(line string, out io.Writer) {
	var err error
	switch t := strings.TrimSpace(line); {
	case strings.EqualFold(t, "cancel"):
		if err = c.end(PauseOutcome{}); err == nil {
			fmt.Fprintln(out, "pab guard: cancelled")
		}
	default:
		if err = c.Resume(t); err == nil {
			fmt.Fprintln(out, "pab guard: resumed")
		}
	}
	if err != nil {
		fmt.Fprintf(out, "pab guard: %v\n", err)
	}
}

// dropNotify removes ch from the prompts waiting for the next pause.
func (c *Controller) dropNotify(ch chan PauseRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.notify {
		if n == ch {
			c.notify = append(c.notify[:i], c.notify[i+1:]...)
			return
		}
	}
}
