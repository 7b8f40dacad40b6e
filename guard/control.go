package guard

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxControlBody bounds the body of a control API request (POST /resume, /cancel).
const MaxControlBody = 64 << 10

// maxAnswer bounds the bytes of a terminal line (an answer is then held to 2,000
// characters by Resume).
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
	notify  []chan pauseNote // prompts waiting to print the next pause
	turn    chan struct{}    // one pause at a time
	token   string           // the bearer token of the control API
	addr    string           // host:port the API is served at (the only Host accepted)

	closeOnce sync.Once
	closed    chan struct{} // closed by POST /local-apply/close (Closed)
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

// pauseNote is a pause as the terminal prompt is told of it: its id and request.
type pauseNote struct {
	id  int
	req PauseRequest
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
// pause, and POST /cancel outside a pause is refused) and a fresh random token
// (NewControlToken; see Token, SetToken).
func NewController() *Controller {
	return &Controller{turn: make(chan struct{}, 1), token: NewControlToken(), closed: make(chan struct{})}
}

// Closed is closed once the owner has said they are done with the browser (POST
// /local-apply/close, or Close): pab guard then closes the browser it started and exits.
func (c *Controller) Closed() <-chan struct{} { return c.closed }

// Close records the owner's word that they are done with the browser (see Closed). Calling
// it again does nothing.
func (c *Controller) Close() { c.closeOnce.Do(func() { close(c.closed) }) }

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
		ch <- pauseNote{pp.id, p} // buffered, 1
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

// Resume ends the pause in progress as resumed with answer (trimmed; at most 2,000
// characters, the contract's cap). Errors: no pause in progress, or an answer too long.
func (c *Controller) Resume(answer string) error { return c.ResumeWith(answer, "") }

// ResumeWith is Resume with allowSite: a host the owner admits for the rest of the run
// (PauseOutcome.AllowSite). It is accepted only at an external_redirect pause and must be
// the host that pause names (its Domain; compared without case). Errors: no pause in
// progress, an answer too long, an allow_site at another pause or naming another host.
func (c *Controller) ResumeWith(answer, allowSite string) error {
	return c.resumeWith(0, answer, allowSite)
}

// resumeWith is ResumeWith for the pause of id only (0: the one in progress, whichever).
func (c *Controller) resumeWith(id int, answer, allowSite string) error {
	answer = strings.TrimSpace(answer)
	if n := utf8.RuneCountInString(answer); n > capAnswerChars {
		return fmt.Errorf("answer is %d characters; at most %d are accepted", n, capAnswerChars)
	}
	allowSite = strings.ToLower(strings.TrimSpace(allowSite))
	if allowSite != "" {
		c.mu.Lock()
		p := c.pending
		c.mu.Unlock()
		switch {
		case p == nil || p.ended || (id != 0 && p.id != id):
			return c.noPause(id)
		case p.req.Reason != "external_redirect":
			return fmt.Errorf("allow_site is for an external_redirect pause; this pause is %s", p.req.Reason)
		case p.req.Domain == "" || allowSite != strings.ToLower(p.req.Domain):
			return fmt.Errorf("allow_site %q is not the site this pause is about (%q)", bound(allowSite, 200), p.req.Domain)
		}
	}
	return c.endPause(id, PauseOutcome{Resumed: true, Answer: answer, AllowSite: allowSite})
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

func (c *Controller) end(out PauseOutcome) error { return c.endPause(0, out) }

// errPauseEnded is the terminal prompt's error for a line that answers a pause which has
// ended meanwhile (through the control API).
var errPauseEnded = errors.New("the pause shown has ended (answered through the control API); nothing was changed")

// noPause is the error for no pause in progress, or not the pause of id (when not 0).
func (c *Controller) noPause(id int) error {
	if id != 0 {
		return errPauseEnded
	}
	return errNoPause
}

// endPause ends the pause of id (0: the one in progress, whichever) with out.
func (c *Controller) endPause(id int, out PauseOutcome) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	if p == nil || p.ended || (id != 0 && p.id != id) {
		return c.noPause(id)
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

// Control API paths: the contract's (seed 000) and the older ones kept as aliases.
const (
	ControlRunPath    = "/local-apply/run"    // GET: the run and the pause waited on (ControlStatus)
	ControlStatusPath = "/local-apply/status" // GET: the bare result envelope (Result)
	ControlResumePath = "/local-apply/resume" // POST: resume the pause, optional {"answer": "...", "allow_site": "HOST"}
	ControlCancelPath = "/local-apply/cancel" // POST: cancel the pause, or the run
	ControlClosePath  = "/local-apply/close"  // POST: the owner is done with the browser (Closed)
)

// ControlTokenEnv names the environment variable a parent (pab run --guard) passes the
// control token in; pab guard reads it and removes it from its environment.
const ControlTokenEnv = "PAB_GUARD_CONTROL_TOKEN"

// NewControlToken returns a random control API token: 64 hex digits (32 bytes from
// crypto/rand).
func NewControlToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// CheckControlToken checks a token given from outside (ControlTokenEnv): 32 to 256
// characters, letters, digits, '-' and '_' only. Errors name what is wrong, never the token.
func CheckControlToken(tok string) error {
	if len(tok) < 32 || len(tok) > 256 {
		return fmt.Errorf("the control token must be 32 to 256 characters, not %d", len(tok))
	}
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return errors.New("the control token may hold only letters, digits, '-' and '_'")
		}
	}
	return nil
}

// Token is the bearer token every control API request must carry (set by NewController
// or SetToken).
func (c *Controller) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// SetToken replaces the control API token (checked with CheckControlToken).
func (c *Controller) SetToken(tok string) error {
	if err := CheckControlToken(tok); err != nil {
		return err
	}
	c.mu.Lock()
	c.token = tok
	c.mu.Unlock()
	return nil
}

// SetAddr sets the address (host:port) the control API is reached at: requests must name it
// as their Host, and an Origin, when sent, must be http://ADDR. ServeControl sets it from
// its listener.
func (c *Controller) SetAddr(addr string) {
	c.mu.Lock()
	c.addr = addr
	c.mu.Unlock()
}

// authorize applies the control API's request checks, answering itself when one fails:
// Host must be the listen address (403: a DNS-rebinding page names its own host), Origin
// absent or http://ADDR (403: a cross-site page), OPTIONS refused (405: no CORS preflight
// is ever granted, and no Access-Control-* header is ever sent), the bearer token of
// Authorization (401), and for POST a Content-Type of application/json (415: a cross-site
// form or text/plain fetch cannot send one without a preflight).
func (c *Controller) authorize(w http.ResponseWriter, r *http.Request) bool {
	c.mu.Lock()
	addr, token := c.addr, c.token
	c.mu.Unlock()
	if addr == "" || !strings.EqualFold(r.Host, addr) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "the Host header must be the control API's address (" + addr + ")"})
		return false
	}
	if o, ok := r.Header["Origin"]; ok && (len(o) != 1 || !strings.EqualFold(o[0], "http://"+addr)) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-origin requests are refused"})
		return false
	}
	if r.Method == http.MethodOptions {
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "OPTIONS is refused: the control API grants no cross-origin access"})
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pab guard"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Authorization: Bearer TOKEN is required (the token pab guard printed on stderr and wrote to its token file)"})
		return false
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "POST bodies must be Content-Type: application/json"})
			return false
		}
	}
	return true
}

// Handler is the control API. Every request passes authorize first (Host, Origin, no
// OPTIONS, bearer token, JSON Content-Type for POST). Then: GET /local-apply/run (and its
// alias /status): ControlStatus; GET /local-apply/status: the bare result envelope (Result,
// when the attached run has one; 409 without a run); POST /local-apply/resume (alias
// /resume), optional JSON body {"answer": "...", "allow_site": "HOST"} (ResumeWith; 400 when
// the allow_site does not fit the pause); POST /local-apply/cancel (alias /cancel); POST
// /local-apply/close (alias /close): the owner is done with the browser (Closed). Answers are JSON; 404 for other paths, 405 for other methods, 413 for a body over 64 KiB,
// 400 for a body that is not the JSON object expected, 409 when there is no pause to resume
// (or nothing to cancel).
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	runStatus := func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, c.Status())
	}
	mux.HandleFunc(ControlRunPath, runStatus)
	mux.HandleFunc("/status", runStatus)
	mux.HandleFunc(ControlStatusPath, func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		c.mu.Lock()
		run := c.run
		c.mu.Unlock()
		rr, ok := run.(interface{ Result() Result })
		if !ok {
			writeJSON(w, http.StatusConflict, map[string]string{"error": "no run is attached"})
			return
		}
		writeJSON(w, http.StatusOK, rr.Result())
	})
	resume := func(w http.ResponseWriter, r *http.Request) {
		if !postOnly(w, r) {
			return
		}
		var body struct {
			Answer    *string `json:"answer"`
			AllowSite *string `json:"allow_site"`
		}
		if !readBody(w, r, &body) {
			return
		}
		answer, site := "", ""
		if body.Answer != nil {
			answer = *body.Answer
		}
		if body.AllowSite != nil {
			site = *body.AllowSite
		}
		if err := c.ResumeWith(answer, site); err != nil {
			code := http.StatusConflict
			if !errors.Is(err, errNoPause) {
				code = http.StatusBadRequest
			}
			writeJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"resumed": true, "status": c.Status()})
	}
	mux.HandleFunc(ControlResumePath, resume)
	mux.HandleFunc("/resume", resume)
	// emptyPost answers a POST with an empty JSON object body by do's reply; an error of do
	// is 409 Conflict.
	emptyPost := func(do func() (map[string]any, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !postOnly(w, r) {
				return
			}
			var body struct{}
			if !readBody(w, r, &body) {
				return
			}
			reply, err := do()
			if err != nil {
				writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, reply)
		}
	}
	cancel := emptyPost(func() (map[string]any, error) {
		if err := c.Cancel(); err != nil {
			return nil, err
		}
		return map[string]any{"cancelled": true, "status": c.Status()}, nil
	})
	mux.HandleFunc(ControlCancelPath, cancel)
	mux.HandleFunc("/cancel", cancel)
	closeH := emptyPost(func() (map[string]any, error) {
		c.Close()
		return map[string]any{"closing": true}, nil
	})
	mux.HandleFunc(ControlClosePath, closeH)
	mux.HandleFunc("/close", closeH)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: the control API has GET " + ControlRunPath + ", GET " + ControlStatusPath + ", POST " + ControlResumePath + ", POST " + ControlCancelPath + " and POST " + ControlClosePath})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.authorize(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use GET " + r.URL.Path})
	return false
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
// server down and returns nil; requests must name ln's address as their Host (SetAddr).
// Errors: a failed Serve.
func (c *Controller) ServeControl(ctx context.Context, ln net.Listener) error {
	c.SetAddr(ln.Addr().String())
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	return serveUntil(ctx, srv, ln, 2*time.Second)
}

// Prompt runs a terminal prompt until ctx ends or in ends: each pause is printed on out,
// then the next line read from in ends it: an empty line resumes, "cancel" cancels, "allow"
// at an external_redirect pause resumes admitting its host (ResumeWith), any other text
// resumes with that text as the answer. Lines typed while no pause is in
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
	shown := 0 // the id of the pause on the terminal, waiting for its line; 0: none
	for {
		ch := c.nextPause(shown)
		select {
		case <-ctx.Done():
			c.dropNotify(ch)
			return
		case err := <-readErr:
			c.dropNotify(ch)
			if err != nil {
				fmt.Fprintf(out, "pab guard: terminal prompt stopped: %v\n", err)
			}
			return
		case line := <-lines:
			c.dropNotify(ch)
			if shown == 0 {
				// a line never answers a pause the owner has not been shown
				if c.Waiting() == nil {
					fmt.Fprintln(out, "pab guard: no pause in progress")
				} else {
					fmt.Fprintln(out, "pab guard: a pause has just started; read it, then answer")
				}
				continue
			}
			id := shown
			shown = 0
			c.answerLine(line, out, id)
		case p := <-ch:
			if shown != 0 {
				fmt.Fprintln(out, "\npab guard: the pause above ended through the control API")
			}
			printPause(out, p.req)
			shown = p.id
		}
	}
}

// nextPause returns a channel that gets the pause in progress at once when there is one
// other than the pause of id shown, else the next pause to start (drop it with dropNotify
// when no longer waited on).
func (c *Controller) nextPause(shown int) chan pauseNote {
	ch := make(chan pauseNote, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pending; p != nil && !p.ended && p.id != shown {
		ch <- pauseNote{p.id, p.req}
	} else {
		c.notify = append(c.notify, ch)
	}
	return ch
}

// printPause shows a pause on the owner's terminal and prompts for the answer. The question
// and URL come from the agent and the page: no control bytes reach the terminal (escape
// sequences could draw a fake prompt).
func printPause(out io.Writer, p PauseRequest) {
	fmt.Fprintf(out, "\npab guard: PAUSED (%s)", terminalSafe(p.Reason))
	if p.URL != "" {
		fmt.Fprintf(out, " at %s", terminalSafe(p.URL))
	}
	fmt.Fprintln(out)
	if p.Question != "" {
		fmt.Fprintf(out, "  %s\n", terminalSafe(p.Question))
	}
	hint := "  Enter: resume; type an answer then Enter: resume with it; \"cancel\": end the run"
	if p.Reason == "external_redirect" && p.Domain != "" {
		hint += "; \"allow\": admit " + terminalSafe(p.Domain) + " for this run"
	}
	fmt.Fprint(out, hint+"\n> ")
}

// answerLine ends the pause of id, the one shown on the terminal, from one terminal line;
// when that pause has ended meanwhile, it changes nothing and says so.
func (c *Controller) answerLine(line string, out io.Writer, id int) {
	var err error
	switch t := strings.TrimSpace(line); {
	case strings.EqualFold(t, "cancel"):
		if err = c.endPause(id, PauseOutcome{}); err == nil {
			fmt.Fprintln(out, "pab guard: cancelled")
		}
	case strings.EqualFold(t, "allow") && c.waitingRedirect() != "":
		site := c.waitingRedirect()
		if err = c.resumeWith(id, "", site); err == nil {
			fmt.Fprintf(out, "pab guard: resumed; %s admitted for this run\n", site)
		}
	default:
		if err = c.resumeWith(id, t, ""); err == nil {
			fmt.Fprintln(out, "pab guard: resumed")
		}
	}
	if err != nil {
		fmt.Fprintf(out, "pab guard: %v\n", err)
	}
}

// waitingRedirect is the host of the external_redirect pause in progress, else "".
func (c *Controller) waitingRedirect() string {
	if w := c.Waiting(); w != nil && w.Reason == "external_redirect" {
		return w.Domain
	}
	return ""
}

// dropNotify removes ch from the prompts waiting for the next pause.
func (c *Controller) dropNotify(ch chan pauseNote) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.notify {
		if n == ch {
			c.notify = append(c.notify[:i], c.notify[i+1:]...)
			return
		}
	}
}

// terminalSafe is s for a terminal: C0 and C1 control characters (ESC and CSI among them)
// and DEL are shown as U+FFFD, line breaks as spaces.
func terminalSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '\uFFFD'
		}
		return r
	}, s)
}
