package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/textcut"
)

// Source is how a request was answered: the log's "source" field, one of the Source*
// constants.
type Source string

// Sources: how a request was answered (the log's "source" field).
const (
	SourceExact     Source = "exact"     // the recorded exchange with the same key
	SourceSearch    Source = "search"    // a search endpoint: the recording of the most similar text
	SourcePromo     Source = "promo"     // a promo endpoint: the code's recording, or invalid_code's
	SourceFuzzy     Source = "fuzzy"     // same method, host and path; most query parameters in common
	SourceBlocked   Source = "blocked"   // a block rule matched: 204, nothing looked up
	SourcePreflight Source = "preflight" // an unrecorded CORS preflight, allowed with 204
	SourceMiss      Source = "miss"      // nothing recorded: answered by request type
	// SourceRefused: the proxy shell answered the request itself before it could be
	// looked up (a header over the bound: 431; a request it cannot read: 400, 505; the
	// shell full: 503; internal/mitm Config.OnRefuse). It is still an attempt: pab grade's
	// trace entries see it.
	SourceRefused Source = "refused"
)

// LogTimeFormat is the layout of LogLine.Time: RFC 3339 in UTC with milliseconds.
const LogTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MaxLogLine is the hard bound on one line of the replay log as written (--log FILE and
// http://rr.control/log), in bytes with its newline: fields of unbounded size are cut to
// fit (see LogLine.Truncated), the line itself never is.
const MaxLogLine = 64 << 10

// MaxReadLogLine is the longest log line the readers (ReadLog, LogScanner) accept, in bytes
// without its newline: MaxLogLine with room for lines written by hand or by older versions.
// A longer line is skipped without being held in memory, and counted as unreadable.
const MaxReadLogLine = 1 << 20

// The most bytes each field of a LogLine takes in a written line, counted as encoded in
// JSON (escapes included, the quotes not). A longer value is cut at a character boundary to
// a prefix that fits, and the line marked Truncated. Together with the field names and the
// numbers they stay well under MaxLogLine.
const (
	// MaxLogURL bounds LogLine.URL (the original length goes to URLSize).
	MaxLogURL = 32 << 10
	// MaxLogKey bounds LogLine.Key, which may hold the normalized request body (the
	// original length goes to KeySize).
	MaxLogKey = 16 << 10
	// MaxLogMethod bounds LogLine.Method (and Time, Type, Dest and Source): a method this
	// long on a truncated line may have been cut.
	MaxLogMethod = 64

	maxLogNote  = 4 << 10 // Note
	maxLogRef   = 1 << 10 // Rule, Endpoint, Record
	maxLogEntry = 256     // Entry
)

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
	// never looked up (HTTP/2 when turned off, h2c, WebSocket).
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
	Source Source `json:"source"`
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
	// Truncated is true when fields were cut to keep the line within MaxLogLine: the URL
	// to MaxLogURL bytes, the key to MaxLogKey, the method to MaxLogMethod, the note, rule,
	// endpoint, entry and record to a few KiB. A cut field is a prefix of the original.
	Truncated bool `json:"truncated,omitempty"`
	// URLSize is the length in bytes of the URL before it was cut; 0 when it was not. On a
	// refused line whose request target the shell did not read whole, it is how much of
	// the target the shell had read when it refused the request (mitm.Refusal.URLRead).
	URLSize int `json:"url_size,omitempty"`
	// KeySize is the length in bytes of the key before it was cut; 0 when it was not.
	KeySize int `json:"key_size,omitempty"`
	// BodySize is the length in bytes of the request body, on truncated lines of requests
	// that had one (a large body is what makes the key long); 0 otherwise.
	BodySize int64 `json:"body_size,omitempty"`
}

// LogHeaderEvent is LogHeader.Event.
const LogHeaderEvent = "replay-start"

// LogHeader is the first line of a replay log written by a replay that was told which
// recording it serves (Options.Recording): one line per run, written once when the log is
// set, before any request line. It is not a request: LogScanner (and so ReadLog, pab stats
// and pab grade) skips it when it is the log's first non-blank line and returns it from
// Header; anywhere else it is an unreadable line. It is encoded with encoding/json once
// per run, so the per-request encoder is untouched.
type LogHeader struct {
	// Event is LogHeaderEvent.
	Event string `json:"event"`
	// Time is when the log was set, RFC 3339 UTC with milliseconds.
	Time string `json:"time"`
	// Recording is the lowercase hex sha256 identifying the recording served (see
	// Options.Recording).
	Recording string `json:"recording"`
	// RecordingOf says what Recording is a hash of: "recording" (the task's published
	// recording files, recording.HashRecording) or "bundle" (an unpacked bundle's files).
	RecordingOf string `json:"recording_of,omitempty"`
}

// maxLogHeader bounds a header line the scanner recognizes, in bytes.
const maxLogHeader = 4 << 10

// encodeLogHeader returns the header line (with its newline) for a log of a replay of the
// recording with this hash, or nil when no hash is known.
func encodeLogHeader(recording, of string, now time.Time) []byte {
	if recording == "" {
		return nil
	}
	b, err := json.Marshal(LogHeader{Event: LogHeaderEvent, Time: logTime(now), Recording: shortText(recording, 128), RecordingOf: shortText(of, 64)})
	if err != nil {
		return nil
	}
	return append(b, '\n')
}

// parseLogHeader returns data as a LogHeader, or nil when it is not one.
func parseLogHeader(data []byte) *LogHeader {
	if len(data) > maxLogHeader || !bytes.Contains(data, []byte(`"`+LogHeaderEvent+`"`)) {
		return nil
	}
	var h LogHeader
	if err := json.Unmarshal(data, &h); err != nil || h.Event != LogHeaderEvent {
		return nil
	}
	return &h
}

// logWriter writes LogLines as JSON Lines from one goroutine, in batches: a sender
// appends its line to a shared buffer and returns, and the writer takes what gathered
// at most logBatchDelay after the first line of a batch, in one write. So a busy proxy
// writes the log a few dozen times a second, not once per request, and an idle one never
// wakes. The file is current within logBatchDelay. Senders wait only when maxLogPending
// bytes are queued (a disk slower than the proxy).
type logWriter struct {
	mu     *sync.Mutex // the writer's own, or shared with the Server's tail (newLogWriterShared)
	space  *sync.Cond  // signalled when the writer took the buffer
	buf    []byte      // lines not yet taken by the writer
	closed bool
	kick   chan struct{} // capacity 1: a batch was started, or close was called
	done   chan struct{}
	err    error // first write error, read after done
}

// logBatchDelay is how long the log writer gathers lines before it writes them.
const logBatchDelay = 20 * time.Millisecond

// maxLogPending bounds the bytes of log lines queued for the writer.
const maxLogPending = 8 << 20

func newLogWriter(w io.Writer) *logWriter { return newLogWriterShared(w, new(sync.Mutex)) }

// newLogWriterShared is newLogWriter with the queue guarded by mu, a lock its callers
// also hold for other work (the Server's tail and counts): a request's line is counted,
// kept in the tail and queued under one lock (sendLocked).
func newLogWriterShared(w io.Writer, mu *sync.Mutex) *logWriter {
	lw := &logWriter{mu: mu, kick: make(chan struct{}, 1), done: make(chan struct{})}
	lw.space = sync.NewCond(mu)
	go lw.run(w)
	return lw
}

func (lw *logWriter) run(w io.Writer) {
	defer close(lw.done)
	var spare []byte
	for {
		<-lw.kick
		lw.mu.Lock()
		closed := lw.closed
		lw.mu.Unlock()
		if !closed {
			time.Sleep(logBatchDelay) // let the batch gather
		}
		lw.mu.Lock()
		b := lw.buf
		lw.buf = spare[:0]
		closed = lw.closed
		lw.space.Broadcast()
		lw.mu.Unlock()
		if len(b) > 0 && lw.err == nil {
			if _, err := w.Write(b); err != nil {
				lw.err = err
			}
		}
		spare = b
		if closed {
			lw.mu.Lock()
			rest := lw.buf
			lw.buf = nil
			lw.mu.Unlock()
			if len(rest) > 0 && lw.err == nil {
				if _, err := w.Write(rest); err != nil {
					lw.err = err
				}
			}
			return
		}
	}
}

// send queues line (one encoded JSON line, see encodeLogLine); after close it is dropped.
func (lw *logWriter) send(line []byte) {
	lw.mu.Lock()
	lw.sendLocked(line)
	lw.mu.Unlock()
}

// sendLocked is send with lw.mu held (it may wait, releasing it, while the queue is full);
// line is copied.
func (lw *logWriter) sendLocked(line []byte) {
	for len(lw.buf) >= maxLogPending && !lw.closed {
		lw.space.Wait()
	}
	if lw.closed {
		return
	}
	first := len(lw.buf) == 0
	lw.buf = append(lw.buf, line...)
	if first {
		select { // never blocks: the channel has room for one kick, and one is enough
		case lw.kick <- struct{}{}:
		default:
		}
	}
}

// close writes the queued lines and returns the first write error.
func (lw *logWriter) close() error {
	lw.mu.Lock()
	lw.closed = true
	lw.space.Broadcast()
	lw.mu.Unlock()
	select {
	case lw.kick <- struct{}{}:
	default:
	}
	<-lw.done
	if lw.err != nil {
		return fmt.Errorf("write replay log: %w", lw.err)
	}
	return nil
}

// ReadLog parses a replay log (JSON Lines of LogLine) from r, for small logs and tests:
// every line is kept in memory. name is the file name used in errors, which give the line
// number (from 1, blank lines counted). Blank lines are skipped; the first line that cannot
// be read (over MaxReadLogLine, not a JSON object, without method, url or source) is an
// error. Commands that read whole logs use LogScanner instead.
func ReadLog(r io.Reader, name string) ([]LogLine, error) {
	sc := NewLogScanner(r)
	var lines []LogLine
	for sc.Scan() {
		l := sc.Log()
		if l == nil {
			return nil, fmt.Errorf("read %s line %d: %s", name, sc.Line(), sc.Problem())
		}
		lines = append(lines, *l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s line %d: %w", name, sc.Line()+1, err)
	}
	return lines, nil
}

// LogScanner reads a replay log one line at a time in bounded memory: a read buffer of
// 128 KiB and at most MaxReadLogLine bytes of the current line, whatever the length of the
// log or of its lines. A line over MaxReadLogLine is read past, never held whole, and
// reported as unreadable. Use it as bufio.Scanner:
//
//	sc := replay.NewLogScanner(f)
//	for sc.Scan() {
//		if l := sc.Log(); l != nil { ... } else { ... sc.Line(), sc.Problem() ... }
//	}
//	if err := sc.Err(); err != nil { ... }
type LogScanner struct {
	lr      *readlimit.LineReader
	n       int
	line    *LogLine
	problem string
	err     error
	done    bool
	started bool       // a non-blank line was read
	header  *LogHeader // the log's header line, when its first line is one
}

// NewLogScanner returns a LogScanner reading r.
func NewLogScanner(r io.Reader) *LogScanner {
	return &LogScanner{lr: readlimit.NewLineReader(bufio.NewReaderSize(r, 128<<10), MaxReadLogLine)}
}

// Scan advances to the next non-blank line. It returns false at the end of the input or
// on a read error (see Err).
func (s *LogScanner) Scan() bool {
	s.line, s.problem = nil, ""
	for !s.done {
		data, tooLong, err := s.lr.Next()
		if err != nil {
			s.done = true
			if !errors.Is(err, io.EOF) {
				s.err = err
				return false
			}
		}
		if data == nil && !tooLong {
			return false // the input had no more bytes
		}
		s.n++
		if tooLong {
			s.problem = fmt.Sprintf("longer than %d bytes", MaxReadLogLine)
			return true
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 {
			continue
		}
		if !s.started {
			s.started = true
			if h := parseLogHeader(data); h != nil {
				s.header = h
				continue
			}
		}
		s.line, s.problem = ParseLogLine(data)
		return true
	}
	return false
}

// Line is the number of the current line in the input, from 1, blank lines counted; after
// Scan returned false, the number of the last line read.
func (s *LogScanner) Line() int { return s.n }

// Header is the log's header line (LogHeader), when its first non-blank line is one and
// has been read; else nil. The header is not a request: Scan never stops on it.
func (s *LogScanner) Header() *LogHeader { return s.header }

// Log is the current line parsed (a new LogLine for every line), or nil when it could not
// be read; then Problem says why.
func (s *LogScanner) Log() *LogLine { return s.line }

// Problem says why the current line could not be read ("longer than 1048576 bytes",
// "not JSON: ...", "not a replay log line (needs method, url and source)"); "" when Log is
// not nil.
func (s *LogScanner) Problem() string { return s.problem }

// Err is the first error reading the input, other than io.EOF.
func (s *LogScanner) Err() error { return s.err }

// ParseLogLine parses one line of a replay log (without its newline). It returns the line,
// or nil and the reason it is not a replay log line: not JSON, not a JSON object, a field
// of the wrong JSON type, or no method, url or source.
func ParseLogLine(data []byte) (*LogLine, string) {
	var l *LogLine
	if err := json.Unmarshal(data, &l); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field == "" {
				return nil, "not a replay log line (want a JSON object with method, url and source)"
			}
			return nil, fmt.Sprintf("not a replay log line (field %s: want %s, got JSON %s)", shortText(typeErr.Field, 40), typeErr.Type, typeErr.Value)
		}
		return nil, "not JSON: " + shortText(err.Error(), 120)
	}
	if l == nil {
		return nil, "not a JSON object"
	}
	if l.Method == "" || l.URL == "" || l.Source == "" {
		return nil, "not a replay log line (needs method, url and source)"
	}
	return l, ""
}

// shortText cuts s to n bytes at a character boundary, adding "..." when it cut.
func shortText(s string, n int) string { return textcut.Cut(s, n, "...") }

// logTime formats t as LogLine.Time.
func logTime(t time.Time) string { return string(appendLogTime(nil, t)) }

// appendLogTime appends t formatted as LogLine.Time (LogTimeFormat, in UTC). The text up
// to the second is kept for the second last written (logSecondText): the proxy's lines
// come many to a second, and only their milliseconds differ.
func appendLogTime(dst []byte, t time.Time) []byte {
	unix, ms := t.Unix(), t.Nanosecond()/1e6
	if p := lastLogSecond.Load(); p != nil && p.unix == unix {
		return appendLogMillis(append(dst, p.text[:]...), ms)
	}
	u := t.UTC()
	y, mo, d := u.Date()
	if y < 0 || y > 9999 {
		return u.AppendFormat(dst, LogTimeFormat)
	}
	h, mi, sec := u.Clock()
	// LogTimeFormat by hand: time.Format parses its layout every time (TestLogTime
	// compares the two)
	p := &logSecondText{unix: unix}
	b := &p.text
	digits(b[0:4], y)
	b[4] = '-'
	digits(b[5:7], int(mo))
	b[7] = '-'
	digits(b[8:10], d)
	b[10] = 'T'
	digits(b[11:13], h)
	b[13] = ':'
	digits(b[14:16], mi)
	b[16] = ':'
	digits(b[17:19], sec)
	lastLogSecond.Store(p)
	return appendLogMillis(append(dst, b[:]...), ms)
}

// logSecondText is LogTimeFormat's "2006-01-02T15:04:05" of the Unix second unix.
type logSecondText struct {
	unix int64
	text [19]byte
}

// lastLogSecond is the second appendLogTime wrote last, as text.
var lastLogSecond atomic.Pointer[logSecondText]

// appendLogMillis appends LogTimeFormat's ".000Z" for ms milliseconds (0-999).
func appendLogMillis(dst []byte, ms int) []byte {
	var b [5]byte
	b[0] = '.'
	digits(b[1:4], ms)
	b[4] = 'Z'
	return append(dst, b[:]...)
}

// digits writes v's last len(b) decimal digits into b, with leading zeros.
func digits(b []byte, v int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// DefaultLogTail is how many recent log lines the proxy keeps in memory for
// http://rr.control/log?tail=N (Options.LogTail).
const DefaultLogTail = 10000

// DefaultLogTailBytes bounds the bytes of the lines kept for http://rr.control/log, newlines
// included (16 MiB): when a new line would go over it, or over the number of lines, the
// oldest lines are dropped first.
const DefaultLogTailBytes = 16 << 20

// defaultTailLines is N for http://rr.control/log without ?tail=N.
const defaultTailLines = 100

// logRing keeps the last lines of the log, each as one JSON line with its newline, at most
// len(lines) of them and maxBytes bytes together. A line of the proxy's that appendLogLine
// wrote from a lineMemo's middle (most of them) is kept as what makes it: the middle
// (shared with the memo), the time and the ms (ringLine); tail writes it again, byte for
// byte. Copying each line into the ring wrote a few hundred bytes per request into memory
// the caches no longer held (the ring is megabytes, gone through in a fraction of a
// second). Any other line is copied into one circular byte buffer: the line kept whole last
// ends at byte end of the stream of such lines, and byte p of the stream is
// buf[p%len(buf)]; buf grows (doubling) up to maxBytes as the lines need it. No line is an
// allocation of its own.
type logRing struct {
	mu       sync.Mutex
	lines    []ringLine // the lines, a circular buffer
	start    int        // the oldest line in lines
	n        int        // lines kept
	bytes    int        // their bytes, as tail writes them
	maxBytes int
	buf      []byte // the bytes of the lines kept whole (ringLine.mid nil)
	end      int64  // the stream position after the last of them
	whole    int    // their bytes
}

// ringLine is one line of a logRing: with mid set, the line appendMemoLine writes from mid,
// at and ms; else a line whose bytes are in the ring's buffer.
type ringLine struct {
	mid  *lineMiddle
	at   int64   // Unix milliseconds (LogLine.Time's precision)
	ms   float64 // LogLine.MS
	size int32   // the line's bytes
}

// minRingBuf is the first size of a logRing's buffer.
const minRingBuf = 64 << 10

func newLogRing(n int) *logRing {
	return &logRing{lines: make([]ringLine, n), maxBytes: DefaultLogTailBytes}
}

// encodeLogLine encodes line once as a JSON line with its newline (HTML characters not
// escaped), for both the log file and the in-memory tail, within MaxLogLine bytes: long
// fields are cut first (boundLogLine). It returns nil if the line cannot be encoded.
func encodeLogLine(line LogLine) []byte {
	b, ok := appendLogLine(nil, line, nil, nil)
	if !ok {
		return nil
	}
	return b
}

// appendLogLine appends line as encodeLogLine encodes it to dst, with its Time written from
// *at (as logTime writes it) instead of line.Time when at is not nil, so that the proxy's
// lines need no time string. It returns dst unchanged and false if the line cannot be
// encoded. memo, when not nil, is the lineMemo of the lookup that decided the answer: the
// middle of the line (method through record) is copied from it when those fields are the
// ones it was encoded from, and kept in it otherwise.
func appendLogLine(dst []byte, line LogLine, at *time.Time, memo *lineMemo) ([]byte, bool) {
	b, _, ok := appendLogLineMid(dst, line, at, memo)
	return b, ok
}

// appendLogLineMid is appendLogLine, also returning the memo's middle the line was written
// from (appendMemoLine), or nil when it was encoded.
func appendLogLineMid(dst []byte, line LogLine, at *time.Time, memo *lineMemo) ([]byte, *lineMiddle, bool) {
	memoable := memo != nil && at != nil && line.Note == "" && !line.Truncated && line.URLSize == 0 && line.KeySize == 0
	if memoable {
		if mid := memo.last.Load(); mid != nil && mid.matches(&line) {
			return appendMemoLine(dst, mid, *at, line.MS), mid, true
		}
	}
	orig := line
	boundLogLine(&line, 1)
	n := len(dst)
	b, m0, m1 := appendMarshalLogLineAt(dst, &line, at)
	if len(b)-n > MaxLogLine {
		// Not reached with the field bounds above; cut everything hard rather than write
		// a line the readers refuse.
		boundLogLine(&line, 16)
		if b = appendMarshalLogLine(b[:n], line, at); len(b)-n > MaxLogLine {
			return b[:n], nil, false
		}
		return b, nil, true
	}
	if memoable && !line.Truncated && m1-m0 <= maxMemoLine {
		memo.last.Store(&lineMiddle{
			method: orig.Method, url: orig.URL, key: orig.Key, typ: orig.Type, dest: orig.Dest, source: orig.Source,
			rule: orig.Rule, endpoint: orig.Endpoint, status: orig.Status, entry: orig.Entry, record: orig.Record,
			enc: bytes.Clone(b[m0:m1]),
		})
	}
	return b, nil, true
}

// appendMemoLine appends the line appendLogLine writes from a lineMemo's middle mid, at
// time at, with LogLine.MS ms: what its full encoding would write for a line with those
// fields, no note and nothing cut (boundLogLine would only have dropped the body size).
func appendMemoLine(dst []byte, mid *lineMiddle, at time.Time, ms float64) []byte {
	b := appendLogTime(append(dst, `{"time":"`...), at)
	b = append(append(b, '"'), mid.enc...)
	return appendLineEnd(b, &LogLine{MS: ms})
}

// maxMemoLine bounds the encoded middle a lineMemo keeps (most are 200-500 bytes): with
// maxResults memos, what they keep stays within a few tens of MiB whatever URLs a client
// sends; a longer middle is encoded every time.
const maxMemoLine = 1 << 10

// lineMemo keeps the encoded middle of the last log line written for one memoized lookup
// (lookupServed): the fields from "method" through "record", which are the same on every
// request answered the same way, so that a repeat copies them instead of encoding them
// again. A line whose middle differs from the one kept is encoded in full and kept instead;
// a line with a note or a cut field is never kept. Safe for concurrent use.
type lineMemo struct{ last atomic.Pointer[lineMiddle] }

// lineMiddle is what a lineMemo keeps: the fields the middle was encoded from and the
// encoding (appendLineMiddle's bytes, from `,"method":` on).
type lineMiddle struct {
	method, url, key, typ, dest string
	source                      Source
	rule, endpoint              string
	status                      int
	entry, record               string
	enc                         []byte
}

// matches reports whether l's middle fields are those m was encoded from.
func (m *lineMiddle) matches(l *LogLine) bool {
	return m.status == l.Status && m.url == l.URL && m.key == l.Key && m.method == l.Method &&
		m.typ == l.Type && m.dest == l.Dest && m.source == l.Source && m.rule == l.Rule &&
		m.endpoint == l.Endpoint && m.entry == l.Entry && m.record == l.Record
}

// marshalLogLine encodes line as encoding/json would with SetEscapeHTML(false), newline
// included, without reflection: it runs once per request (TestMarshalLogLine and
// FuzzMarshalLogLine compare the two).
func marshalLogLine(line LogLine) []byte {
	return appendMarshalLogLine(make([]byte, 0, 256+len(line.URL)+len(line.Key)+len(line.Note)), line, nil)
}

// appendMarshalLogLine appends marshalLogLine(line) to b; the time is written from *at
// when at is not nil (appendLogLine).
func appendMarshalLogLine(b []byte, line LogLine, at *time.Time) []byte {
	b, _, _ = appendMarshalLogLineAt(b, &line, at)
	return b
}

// appendMarshalLogLineAt is appendMarshalLogLine, also returning where in the result the
// middle of the line (appendLineMiddle's bytes) starts and ends.
func appendMarshalLogLineAt(b []byte, line *LogLine, at *time.Time) ([]byte, int, int) {
	b = append(b, `{"time":`...)
	if at != nil {
		b = append(appendLogTime(append(b, '"'), *at), '"')
	} else {
		b = appendJSONString(b, line.Time)
	}
	m0 := len(b)
	b = appendLineMiddle(b, line)
	m1 := len(b)
	return appendLineEnd(b, line), m0, m1
}

// appendLineMiddle appends the fields of line from method through record, each with its
// leading comma.
func appendLineMiddle(b []byte, line *LogLine) []byte {
	b = append(b, `,"method":`...)
	b = appendJSONString(b, line.Method)
	b = append(b, `,"url":`...)
	b = appendJSONString(b, line.URL)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, line.Key)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, line.Type)
	b = appendOmitString(b, `,"dest":`, line.Dest)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, string(line.Source))
	b = appendOmitString(b, `,"rule":`, line.Rule)
	b = appendOmitString(b, `,"endpoint":`, line.Endpoint)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(line.Status), 10)
	b = appendOmitString(b, `,"entry":`, line.Entry)
	return appendOmitString(b, `,"record":`, line.Record)
}

// appendLineEnd appends the fields of line from ms on and the closing brace and newline.
func appendLineEnd(b []byte, line *LogLine) []byte {
	b = append(b, `,"ms":`...)
	b = appendJSONFloat(b, line.MS)
	b = appendOmitString(b, `,"note":`, line.Note)
	if line.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	if line.URLSize != 0 {
		b = strconv.AppendInt(append(b, `,"url_size":`...), int64(line.URLSize), 10)
	}
	if line.KeySize != 0 {
		b = strconv.AppendInt(append(b, `,"key_size":`...), int64(line.KeySize), 10)
	}
	if line.BodySize != 0 {
		b = strconv.AppendInt(append(b, `,"body_size":`...), line.BodySize, 10)
	}
	return append(b, "}\n"...)
}

func appendOmitString(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendJSONString(append(b, name...), v)
}

// jsonPlain says which bytes appendJSONString copies as they are: ASCII from 0x20 on
// but '"' and '\\' (one table load per byte instead of four comparisons).
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends v as a JSON string (RFC 8259 section 7) the way encoding/json
// writes it without HTML escaping: '"', '\\' and control characters escaped (\b \f \n
// \r \t, else \u00XX), U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, v string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(v); {
		c := v[i]
		if jsonPlain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, v[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, v[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, v[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, v[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64: the shortest decimal that
// reads back as f, in exponent form below 1e-6 and from 1e21.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, '0') // never produced: durations are finite
	}
	if f >= 0 && f < 1e9 && !math.Signbit(f) {
		// A whole number of microseconds in milliseconds (the log's ms, once per request)
		// is written from its integer k: the decimal k/1000 has at most 12 significant
		// digits, and a decimal of at most 15 is the only one of its length or shorter
		// that reads back as its float64, so it is the shortest. TestAppendJSONFloat
		// compares it with encoding/json.
		if k := math.Round(f * 1000); k/1000 == f {
			n := int64(k)
			b = strconv.AppendInt(b, n/1000, 10)
			if frac := n % 1000; frac != 0 {
				b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
				for b[len(b)-1] == '0' {
					b = b[:len(b)-1]
				}
			}
			return b
		}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// boundLogLine cuts the fields of l to their bounds divided by div, recording the original
// sizes of the URL and key; BodySize is kept only on a truncated line.
func boundLogLine(l *LogLine, div int) {
	cut := func(s *string, max int) bool {
		c, ok := cutJSON(*s, max/div)
		if ok {
			*s = c
			l.Truncated = true
		}
		return ok
	}
	if n := len(l.URL); cut(&l.URL, MaxLogURL) && l.URLSize == 0 {
		l.URLSize = n
	}
	if n := len(l.Key); cut(&l.Key, MaxLogKey) && l.KeySize == 0 {
		l.KeySize = n
	}
	for _, f := range []*string{&l.Time, &l.Method, &l.Type, &l.Dest, (*string)(&l.Source)} {
		cut(f, MaxLogMethod)
	}
	for _, f := range []*string{&l.Rule, &l.Endpoint, &l.Record} {
		cut(f, maxLogRef)
	}
	cut(&l.Entry, maxLogEntry)
	cut(&l.Note, maxLogNote)
	if !l.Truncated {
		l.BodySize = 0
	}
}

// cutJSON returns the longest prefix of s, ending at a character boundary, whose JSON
// encoding (as encodeLogLine writes it, without the quotes) takes at most max bytes, and
// whether that cut anything.
func cutJSON(s string, max int) (string, bool) {
	if len(s)*6 <= max { // no byte takes more than 6 ("\u00XX")
		return s, false
	}
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		w, size := 1, 1
		switch {
		case c == '"' || c == '\\':
			w = 2
		case c < 0x20:
			w = 6 // "\u00XX" or shorter
		case c >= utf8.RuneSelf:
			r, sz := utf8.DecodeRuneInString(s[i:])
			size, w = sz, sz
			if (r == utf8.RuneError && sz == 1) || r == '\u2028' || r == '\u2029' {
				w = 6 // written "\ufffd", "\u2028", "\u2029"
			}
		}
		if n+w > max {
			return s[:i], true
		}
		n += w
		i += size
	}
	return s, false
}

// add keeps a copy of line (one encoded JSON line), dropping the oldest lines while the
// ring is full or the bytes would go over maxBytes.
func (r *logRing) add(line []byte) {
	r.mu.Lock()
	r.addLocked(line)
	r.mu.Unlock()
}

// addLocked is add with r.mu held.
func (r *logRing) addLocked(line []byte) {
	r.push(ringLine{size: int32(min(len(line), math.MaxInt32))}, line)
}

// addMemoLocked keeps the line appendMemoLine writes from mid, at and ms, of size bytes
// (what appendLogLine returned for it), as add would keep it; with r.mu held.
func (r *logRing) addMemoLocked(mid *lineMiddle, at time.Time, ms float64, size int) {
	r.push(ringLine{mid: mid, at: at.UnixMilli(), ms: ms, size: int32(min(size, math.MaxInt32))}, nil)
}

// push keeps l, whose bytes are whole when l.mid is nil.
func (r *logRing) push(l ringLine, whole []byte) {
	size := int(l.size)
	if size > r.maxBytes || len(r.lines) == 0 {
		return
	}
	for r.n > 0 && (r.n == len(r.lines) || r.bytes+size > r.maxBytes) {
		old := &r.lines[r.start]
		r.bytes -= int(old.size)
		if old.mid == nil {
			r.whole -= int(old.size)
		}
		*old = ringLine{} // its middle no longer held
		r.start = (r.start + 1) % len(r.lines)
		r.n--
	}
	if l.mid == nil {
		if need := r.whole + size; need > len(r.buf) {
			grown := make([]byte, min(max(2*len(r.buf), need, minRingBuf), max(r.maxBytes, need)))
			old := r.buf
			r.buf = grown
			if r.whole > 0 {
				kept := make([]byte, r.whole)
				copyRing(kept, old, r.end-int64(r.whole), false)
				copyRing(kept, r.buf, r.end-int64(r.whole), true)
			}
		}
		copyRing(whole, r.buf, r.end, true)
		r.end += int64(size)
		r.whole += size
	}
	r.lines[(r.start+r.n)%len(r.lines)] = l
	r.n++
	r.bytes += size
}

// copyRing copies between p and the bytes of ring starting at stream position at (byte
// at of the stream is ring[at%len(ring)]): into ring when in, else out of it into p.
func copyRing(p, ring []byte, at int64, in bool) {
	for len(p) > 0 {
		i := int(at % int64(len(ring)))
		var n int
		if in {
			n = copy(ring[i:], p)
		} else {
			n = copy(p, ring[i:])
		}
		p = p[n:]
		at += int64(n)
	}
}

// tail returns the last n lines kept, oldest first, as JSON Lines (at most maxBytes).
func (r *logRing) tail(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = min(n, r.n)
	size, whole := 0, 0
	for i := r.n - n; i < r.n; i++ {
		l := &r.lines[(r.start+i)%len(r.lines)]
		size += int(l.size)
		if l.mid == nil {
			whole += int(l.size)
		}
	}
	out := make([]byte, 0, size)
	at := r.end - int64(whole) // the first whole line's stream position
	for i := r.n - n; i < r.n; i++ {
		l := &r.lines[(r.start+i)%len(r.lines)]
		if l.mid != nil {
			out = appendMemoLine(out, l.mid, time.UnixMilli(l.at), l.ms)
			continue
		}
		k := len(out)
		out = out[:k+int(l.size)]
		copyRing(out[k:], r.buf, at, false)
		at += int64(l.size)
	}
	return out
}
