package batch

// This file is steps.jsonl: the browser tool calls of a run, as pab's MCP front saw them
// (docs/run.md "The run view").

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/textcut"
)

// FileSteps is the file of a run directory holding one JSON object per browser tool call
// (Step), written by pab run --browser --mcp and --guard.
const FileSteps = "steps.jsonl"

// maxStepsFile bounds a steps.jsonl read back; maxStepLine one line of it.
const (
	maxStepsFile = 32 << 20
	maxStepLine  = 1 << 20
)

// countSteps counts the lines of a steps.jsonl (os.ErrNotExist when there is none). A
// symbolic link or a file over 32 MiB is an error naming it.
func countSteps(path string) (int, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() > maxStepsFile {
		return 0, fmt.Errorf("%s: over %d bytes", path, maxStepsFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxStepLine)
	n := 0
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return 0, fmt.Errorf("%s: line %d over %d bytes", path, n+1, maxStepLine)
		}
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return n, nil
}

// Step is one line of steps.jsonl: one tools/call the agent made through pab's MCP front,
// its answer, and the page after it. Typed values are never written: every argument named
// in maskedArgs is replaced by "[masked: N chars]", and every such value is cut out of the
// answer's excerpt, the page URL and the title.
type Step struct {
	// N is the step's number, from 1, in the order the calls reached the front.
	N int `json:"n"`
	// Tool is the tool called; Args its arguments, masked.
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Start and End are RFC 3339 UTC times (milliseconds) of the request reaching the
	// front and of the screenshot after the answer: the step's window.
	Start string `json:"start"`
	End   string `json:"end"`
	// IsError is the answer's isError; RPCError a JSON-RPC error's message instead of a
	// result; Excerpt the answer's text content, cut at maxExcerpt bytes.
	IsError  bool   `json:"is_error,omitempty"`
	RPCError string `json:"rpc_error,omitempty"`
	Excerpt  string `json:"excerpt,omitempty"`
	// URL and Title are the page's after the step (from the browser over CDP; empty for a
	// guard run, whose browser pab guard owns).
	URL   string `json:"url,omitempty"`
	Title string `json:"title,omitempty"`
	// Screenshot is the JPEG's file name in the run directory (steps/NNN.jpg), empty when
	// none was taken; ShotNote says why not (the cap, a guard run, a CDP error).
	Screenshot string `json:"screenshot,omitempty"`
	ShotNote   string `json:"shot_note,omitempty"`
}

// Bounds of the step recording.
const (
	// maxStepRequest is the largest request body the front reads to find a tools/call;
	// a larger one is forwarded without a step.
	maxStepRequest = 1 << 20
	// maxStepResponse is how much of an answer the front keeps to parse (the rest is
	// forwarded, not kept).
	maxStepResponse = 4 << 20
	// maxExcerpt bounds a step's answer excerpt (bytes, cut on a rune boundary).
	maxExcerpt = 2000
	// MaxScreenshots is the most screenshots one run keeps; later steps have none (noted).
	MaxScreenshots = 40
	// maxShotBytes bounds one screenshot (so that 20 steps' screenshots, base64 in the view,
	// stay under 4.7 MB: a 20-step view under 5 MB); maxShotWidth its width in CSS pixels.
	maxShotBytes = 176 << 10
	maxShotWidth = 1280
	// shotTimeout bounds one screenshot over CDP.
	shotTimeout = 10 * time.Second
	// maxStepArgs bounds a step's masked arguments as written.
	maxStepArgs = 4000
)

// maskedArgs are the argument names whose values are typed into a page (browser_type
// text, browser_fill_form fields[].value, browser_select_option values, pab guard's
// tools alike) or quote the owner's grounding (pab guard's source_quote): masked wherever
// they occur in a call's arguments, as pab guard's trace never writes them.
var maskedArgs = map[string]bool{"text": true, "value": true, "values": true, "password": true, "source_quote": true}

// maskArgs returns args with every maskedArgs value replaced by "[masked: N chars]" (N its
// length in characters as JSON text), and the string values masked, to be cut out of
// what the step shows.
func maskArgs(args any, secrets *[]string) any {
	switch v := args.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if maskedArgs[strings.ToLower(k)] {
				collectStrings(x, secrets)
				b, _ := json.Marshal(x)
				n := utf8.RuneCount(b)
				if s, ok := x.(string); ok {
					n = utf8.RuneCountInString(s)
				}
				out[k] = fmt.Sprintf("[masked: %d chars]", n)
				continue
			}
			out[k] = maskArgs(x, secrets)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = maskArgs(x, secrets)
		}
		return out
	}
	return args
}

func collectStrings(v any, into *[]string) {
	switch x := v.(type) {
	case string:
		if strings.TrimSpace(x) != "" {
			*into = append(*into, x)
		}
	case []any:
		for _, y := range x {
			collectStrings(y, into)
		}
	case map[string]any:
		for _, y := range x {
			collectStrings(y, into)
		}
	}
}

// scrub cuts every secret (and its URL-encoded forms) out of s.
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		for _, form := range []string{sec, url.QueryEscape(sec), url.PathEscape(sec)} {
			if form != "" {
				s = strings.ReplaceAll(s, form, "[masked]")
			}
		}
	}
	return s
}

// pageURLLine finds the page an answer of @playwright/mcp names ("- Page URL: URL").
var pageURLLine = regexp.MustCompile(`(?m)^\s*-?\s*Page URL:\s*(\S+)\s*$`)

// rpcMessage is the part of a JSON-RPC 2.0 message the recorder reads.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	} `json:"params"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// parseRPCResponse finds the response to id in an MCP streamable-HTTP answer body: a JSON
// object, a JSON array of them, or a text/event-stream whose events' data are (MCP
// specification 2025-03-26, "Streamable HTTP"; SSE as in the WHATWG HTML standard,
// "Server-sent events": data lines joined by newlines, events split by blank lines).
func parseRPCResponse(contentType string, body []byte, id json.RawMessage) *rpcMessage {
	var datas [][]byte
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(contentType)), "text/event-stream") {
		var cur []byte
		flush := func() {
			if cur != nil {
				datas = append(datas, cur)
				cur = nil
			}
		}
		for _, line := range bytes.Split(body, []byte("\n")) {
			line = bytes.TrimSuffix(line, []byte("\r"))
			if len(line) == 0 {
				flush()
				continue
			}
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				d = bytes.TrimPrefix(d, []byte(" "))
				if cur != nil {
					cur = append(cur, '\n')
				}
				cur = append(cur, d...)
			}
		}
		flush()
	} else {
		datas = [][]byte{body}
	}
	for _, d := range datas {
		d = bytes.TrimSpace(d)
		var msgs []rpcMessage
		if len(d) > 0 && d[0] == '[' {
			if json.Unmarshal(d, &msgs) != nil {
				continue
			}
		} else {
			var m rpcMessage
			if json.Unmarshal(d, &m) != nil {
				continue
			}
			msgs = []rpcMessage{m}
		}
		for i := range msgs {
			if bytes.Equal(bytes.TrimSpace(msgs[i].ID), bytes.TrimSpace(id)) && (msgs[i].Result != nil || msgs[i].Error != nil) {
				return &msgs[i]
			}
		}
	}
	return nil
}

// teeWriter forwards an answer and keeps its first max bytes.
type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
	max int
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if room := t.max - t.buf.Len(); room > 0 {
		t.buf.Write(p[:min(room, len(p))])
	}
	return t.ResponseWriter.Write(p)
}

// Flush lets server-sent events through at once.
func (t *teeWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer.
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// stepRecorder writes a run's steps.jsonl (and steps/NNN.jpg) from the calls through its
// MCP front. Calls are recorded one at a time: a tools/call waits for the previous one's
// screenshot, so a step's screenshot shows the page before the next call acts.
type stepRecorder struct {
	dir string // the run directory
	cdp string // the browser's CDP URL; "" for no screenshots
	// noShot says why there are no screenshots when cdp is "".
	noShot string

	// inflight counts the calls being recorded; closing turns recording off (Close).
	inMu     sync.Mutex
	inflight int
	closing  bool
	idle     chan struct{} // closed when closing and inflight reaches 0

	mu      sync.Mutex
	n       int
	shots   int
	secrets []string
	f       *os.File
	err     error
	shooter *cdpShooter
}

// newStepRecorder records into dir/steps.jsonl; cdp is the browser to screenshot ("": none,
// noShot says why).
func newStepRecorder(dir, cdp, noShot string) *stepRecorder {
	return &stepRecorder{dir: dir, cdp: cdp, noShot: noShot}
}

// wrap returns next with every tools/call through it recorded.
func (r *stepRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.ContentLength > maxStepRequest {
			next.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, maxStepRequest+1))
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), req.Body))
		var m rpcMessage
		if err != nil || len(body) > maxStepRequest || json.Unmarshal(body, &m) != nil || m.Method != "tools/call" || len(m.ID) == 0 {
			next.ServeHTTP(w, req)
			return
		}
		if !r.enter() {
			next.ServeHTTP(w, req)
			return
		}
		defer r.leave()
		r.mu.Lock()
		defer r.mu.Unlock()
		start := time.Now()
		tw := &teeWriter{ResponseWriter: w, max: maxStepResponse}
		// httputil.ReverseProxy aborts with a panic (http.ErrAbortHandler) when the client
		// goes before the answer's stream ends, as an MCP client may once it has read its
		// answer: the step is recorded all the same, then the abort goes on
		var aborted any
		func() {
			defer func() { aborted = recover() }()
			next.ServeHTTP(tw, req)
		}()
		// the screenshot is taken even when the agent has gone (bounded by shotTimeout)
		r.record(context.Background(), &m, start, tw.Header().Get("Content-Type"), tw.buf.Bytes())
		if aborted != nil {
			panic(aborted)
		}
	})
}

// record writes one step (r.mu held).
func (r *stepRecorder) record(ctx context.Context, m *rpcMessage, start time.Time, ctype string, body []byte) {
	r.n++
	st := Step{N: r.n, Tool: textcut.Fit(m.Params.Name, 200, "…"), Start: utc(start)}
	if m.Params.Arguments != nil {
		masked := maskArgs(m.Params.Arguments, &r.secrets)
		if b, err := json.Marshal(masked); err == nil {
			if len(b) > maxStepArgs {
				b, _ = json.Marshal(map[string]string{"cut": textcut.Fit(string(b), maxStepArgs, "…")})
			}
			st.Args = b
		}
	}
	var fullText string
	if resp := parseRPCResponse(ctype, body, m.ID); resp != nil {
		if resp.Error != nil {
			st.RPCError = textcut.Fit(scrub(resp.Error.Message, r.secrets), maxExcerpt, "…")
		} else {
			st.IsError = resp.Result.IsError
			var sb strings.Builder
			for _, c := range resp.Result.Content {
				if c.Type == "text" && sb.Len() < maxStepResponse {
					sb.WriteString(c.Text)
					sb.WriteString("\n")
				}
			}
			fullText = sb.String()
			st.Excerpt = textcut.Fit(scrub(strings.TrimSpace(fullText), r.secrets), maxExcerpt, "…")
		}
	} else {
		st.RPCError = "no answer to this call was found in what the server sent"
	}
	switch {
	case r.cdp == "":
		st.ShotNote = r.noShot
	case r.shots >= MaxScreenshots:
		st.ShotNote = fmt.Sprintf("no screenshot: the cap of %d per run was reached", MaxScreenshots)
	default:
		if r.shooter == nil {
			r.shooter = newCDPShooter(r.cdp)
		}
		var hint string
		if m := pageURLLine.FindStringSubmatch(fullText); m != nil {
			hint = m[1]
		}
		shot, err := r.shooter.shoot(ctx, hint)
		if err != nil {
			st.ShotNote = textcut.Fit("no screenshot: "+err.Error(), 300, "…")
			break
		}
		st.URL, st.Title = textcut.Fit(scrub(shot.url, r.secrets), 2000, "…"), textcut.Fit(scrub(shot.title, r.secrets), 500, "…")
		if shot.jpeg == nil {
			st.ShotNote = shot.note
			break
		}
		name := fmt.Sprintf("steps/%03d.jpg", r.n)
		if err := os.MkdirAll(filepath.Join(r.dir, "steps"), 0o755); err == nil {
			if err := atomicfile.Write(filepath.Join(r.dir, filepath.FromSlash(name)), shot.jpeg, 0o644); err == nil {
				st.Screenshot = name
				r.shots++
			} else {
				st.ShotNote = "no screenshot: " + err.Error()
			}
		}
	}
	st.End = utc(time.Now())
	r.write(&st)
}

// write appends one line to steps.jsonl (the first error is kept and later steps dropped).
func (r *stepRecorder) write(st *Step) {
	if r.err != nil {
		return
	}
	if r.f == nil {
		r.f, r.err = os.OpenFile(filepath.Join(r.dir, FileSteps), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
		if r.err != nil {
			return
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		r.err = err
		return
	}
	_, r.err = r.f.Write(append(b, '\n'))
}

// enter starts recording a call; false once Close has begun.
func (r *stepRecorder) enter() bool {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	if r.closing {
		return false
	}
	r.inflight++
	return true
}

func (r *stepRecorder) leave() {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	r.inflight--
	if r.closing && r.inflight == 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
}

// closeWait bounds Close's wait for the calls being recorded (an answer already sent
// whose screenshot is being taken).
const closeWait = shotTimeout + 5*time.Second

// Close ends the recording: it waits (at most closeWait) for the calls being recorded to
// be written, then closes the CDP connection and steps.jsonl. Calls after Close pass
// unrecorded.
func (r *stepRecorder) Close() error {
	r.inMu.Lock()
	var wait chan struct{}
	if !r.closing {
		r.closing = true
		if r.inflight > 0 {
			r.idle = make(chan struct{})
			wait = r.idle
		}
	}
	r.inMu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-time.After(closeWait):
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shooter != nil {
		r.shooter.close()
		r.shooter = nil
	}
	if r.f != nil {
		if err := r.f.Close(); err != nil && r.err == nil {
			r.err = err
		}
		r.f = nil
	}
	return r.err
}

// ReadSteps reads a run's steps.jsonl: at most 32 MiB, each line at most 1 MiB. A bad line
// is an error naming the file and line.
func ReadSteps(path string) ([]Step, error) {
	data, err := readBounded(path, maxStepsFile)
	if err != nil {
		return nil, err
	}
	var steps []Step
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(line) > maxStepLine {
			return nil, fmt.Errorf("%s:%d: over %d bytes", path, i+1, maxStepLine)
		}
		var st Step
		if err := json.Unmarshal(line, &st); err != nil {
			return nil, fmt.Errorf("%s:%d: not a step: %v", path, i+1, err)
		}
		steps = append(steps, st)
	}
	return steps, nil
}
