package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Sources: how a request was answered (the log's "source" field).
const (
	SourceExact     = "exact"     // the recorded exchange with the same key
	SourceSearch    = "search"    // a search endpoint: the recording of the most similar text
	SourcePromo     = "promo"     // a promo endpoint: the code's recording, or invalid_code's
	SourceFuzzy     = "fuzzy"     // same method, host and path; most query parameters in common
	SourceBlocked   = "blocked"   // a block rule matched: 204, nothing looked up
	SourcePreflight = "preflight" // an unrecorded CORS preflight, allowed with 204
	SourceMiss      = "miss"      // nothing recorded: answered by request type
)

// LogTimeFormat is the layout of LogLine.Time: RFC 3339 in UTC with milliseconds.
const LogTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// maxLogLine bounds one line of a replay log read by ReadLog (a line holds one URL and one
// key, which may carry a normalized request body).
const maxLogLine = 16 << 20

// LogLine is one line of the replay log (--log FILE, JSON Lines): one proxied request.
// Lines are written in the order the proxy decided the answers.
type LogLine struct {
	// Time is when the request reached the proxy, RFC 3339 UTC with milliseconds.
	Time string `json:"time"`
	// Method is the request method as sent ("GET").
	Method string `json:"method"`
	// URL is the absolute request URL with its scheme ("https://host/path?q").
	URL string `json:"url"`
	// Key is the normalized matching key (rules.Key.String); empty for requests that were
	// never looked up (HTTP/2, WebSocket).
	Key string `json:"key"`
	// Type is the request type: document, image, font, style, script, api, media, other,
	// or tracker when a block rule matched.
	Type string `json:"type"`
	// Dest is the request's Sec-Fetch-Dest header as sent by a browser (Fetch Metadata):
	// "document" for a page opened in a tab, "iframe" for a frame, "image", "script", "empty"
	// for fetch/XHR, ...; omitted when the client sent none. pab grade counts the requests
	// with dest "document" as the pages the agent opened.
	Dest string `json:"dest,omitempty"`
	// Source is exact, search, promo, fuzzy, blocked, preflight or miss.
	Source string `json:"source"`
	// Rule is where the rule that decided the answer is written, "file:line" with the file
	// relative to the task repository when inside it (see Result.Rule); omitted when none.
	Rule string `json:"rule,omitempty"`
	// Endpoint is the name of the rules endpoint that applied to the request; omitted when
	// none.
	Endpoint string `json:"endpoint,omitempty"`
	// Status is the HTTP status code sent.
	Status int `json:"status"`
	// Entry is the id of the recorded exchange served (entries.jsonl "id"), if any.
	Entry string `json:"entry,omitempty"`
	// Record is the WARC-Record-ID of the response record served, if any.
	Record string `json:"record,omitempty"`
	// MS is the time in milliseconds from the request's arrival at the proxy's handler to
	// its answer being ready to send: reading the request body and the lookup; streaming
	// the response payload is not included.
	MS float64 `json:"ms"`
	// Note explains an unusual answer ("revisit original not in recording", ...).
	Note string `json:"note,omitempty"`
}

// logWriter writes LogLines as JSON Lines from one goroutine. Send never blocks on the
// file: lines queue in a channel (the sender waits only when the queue is full).
type logWriter struct {
	mu     sync.RWMutex // held for reading by senders, for writing by close
	closed bool
	ch     chan []byte
	done   chan struct{}
	err    error // first write error, read after done
}

func newLogWriter(w io.Writer) *logWriter {
	lw := &logWriter{ch: make(chan []byte, 4096), done: make(chan struct{})}
	go lw.run(w)
	return lw
}

func (lw *logWriter) run(w io.Writer) {
	defer close(lw.done)
	bw := bufio.NewWriterSize(w, 64<<10)
	for line := range lw.ch {
		if lw.err != nil {
			continue
		}
		if _, err := bw.Write(line); err != nil {
			lw.err = err
			continue
		}
		// Flush when the queue is drained, so the file is current whenever the proxy idles.
		if len(lw.ch) == 0 {
			if err := bw.Flush(); err != nil {
				lw.err = err
			}
		}
	}
	if lw.err == nil {
		lw.err = bw.Flush()
	}
}

// send queues line (one encoded JSON line, see encodeLogLine); after close it is dropped.
func (lw *logWriter) send(line []byte) {
	lw.mu.RLock()
	defer lw.mu.RUnlock()
	if lw.closed {
		return
	}
	lw.ch <- line
}

// close writes the queued lines, flushes and returns the first write error.
func (lw *logWriter) close() error {
	lw.mu.Lock()
	if !lw.closed {
		lw.closed = true
		close(lw.ch)
	}
	lw.mu.Unlock()
	<-lw.done
	if lw.err != nil {
		return fmt.Errorf("write replay log: %w", lw.err)
	}
	return nil
}

// ReadLog parses a replay log (JSON Lines of LogLine) from r; name is the file name used in
// errors, which give the line number. Blank lines are skipped; a line over 16 MiB, a line
// that is not a JSON object, or one without method, url or source is an error.
func ReadLog(r io.Reader, name string) ([]LogLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLogLine)
	var lines []LogLine
	n := 0
	for sc.Scan() {
		n++
		data := bytes.TrimSpace(sc.Bytes())
		if len(data) == 0 {
			continue
		}
		var l *LogLine
		if err := json.Unmarshal(data, &l); err != nil {
			return nil, fmt.Errorf("read %s line %d: %w", name, n, err)
		}
		if l == nil {
			return nil, fmt.Errorf("read %s line %d: not a JSON object", name, n)
		}
		if l.Method == "" || l.URL == "" || l.Source == "" {
			return nil, fmt.Errorf("read %s line %d: not a replay log line (needs method, url and source)", name, n)
		}
		lines = append(lines, *l)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("read %s line %d: longer than %d bytes", name, n+1, maxLogLine)
		}
		return nil, fmt.Errorf("read %s line %d: %w", name, n+1, err)
	}
	return lines, nil
}

// logTime formats t as LogLine.Time.
func logTime(t time.Time) string { return t.UTC().Format(LogTimeFormat) }

// DefaultLogTail is how many recent log lines the proxy keeps in memory for
// http://rr.control/log?tail=N (Options.LogTail).
const DefaultLogTail = 10000

// defaultTailLines is N for http://rr.control/log without ?tail=N.
const defaultTailLines = 100

// logRing keeps the last lines of the log, each as one JSON line with its newline.
type logRing struct {
	mu    sync.Mutex
	lines [][]byte
	next  int  // where the next line goes
	full  bool // lines has wrapped
}

func newLogRing(n int) *logRing { return &logRing{lines: make([][]byte, n)} }

// encodeLogLine encodes line once as a JSON line with its newline (HTML characters not
// escaped), for both the log file and the in-memory tail; nil if it cannot be encoded.
func encodeLogLine(line LogLine) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(line) != nil {
		return nil
	}
	return buf.Bytes()
}

// add keeps line (from encodeLogLine; never modified afterwards), dropping the oldest when
// the ring is full.
func (r *logRing) add(line []byte) {
	r.mu.Lock()
	r.lines[r.next] = line
	r.next++
	if r.next == len(r.lines) {
		r.next, r.full = 0, true
	}
	r.mu.Unlock()
}

// tail returns the last n lines kept, oldest first, as JSON Lines.
func (r *logRing) tail(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	have := r.next
	if r.full {
		have = len(r.lines)
	}
	n = min(n, have)
	var out []byte
	for i := range n {
		j := (r.next - n + i + len(r.lines)) % len(r.lines)
		out = append(out, r.lines[j]...)
	}
	return out
}
