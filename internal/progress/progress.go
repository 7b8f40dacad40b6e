// Package progress reports on stderr what a long step of pab is doing (an import's reading,
// an audit, a self-check): nothing for the first 2 s, then a line every few seconds with
// the records done, the bytes read and the rates, and a closing line once the step ends.
// A step too short to print anything stays silent. The one helper of pab import, pab audit
// and the import's self-check (docs/import.md "Progress").
//
// Code that does the counting (warc's import loop, replay's check loop) finds the Meter of
// its caller in its context (FromContext), so it needs no options of its own; a nil *Meter
// ignores every call.
package progress

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Meter: the first line after After, then one every Every.
const (
	After = 2 * time.Second
	Every = 5 * time.Second
)

// Totals are what a step will do when known beforehand; zero fields are unknown.
type Totals struct {
	// Records is the number of records (or requests) the step goes through.
	Records int64
	// Bytes is the size of what it reads, in bytes.
	Bytes int64
	// Unit names what is counted, in the plural ("requests"); "" is "records".
	Unit string
}

// Meter reports one step. Its methods may be called from any goroutine; a nil *Meter
// ignores them all.
type Meter struct {
	w     io.Writer
	what  string
	total Totals
	start time.Time
	after time.Duration
	now   func() time.Time

	records, bytes atomic.Int64
	counted        atomic.Bool

	once    sync.Once
	mu      sync.Mutex
	printed bool
	stop    chan struct{}
	done    chan struct{}
}

// Start begins reporting the step what ("pab import: reading crawl.warc.gz") on w, the
// first line after after and then every every; 0 takes $PAB_PROGRESS_AFTER and
// $PAB_PROGRESS_EVERY (Go durations, "1ms": a knob for tests and for watching short
// steps), else After and Every. Stop ends it.
func Start(w io.Writer, what string, total Totals, after, every time.Duration) *Meter {
	if after <= 0 {
		after = envDuration("PAB_PROGRESS_AFTER", After)
	}
	if every <= 0 {
		every = envDuration("PAB_PROGRESS_EVERY", Every)
	}
	m := &Meter{w: w, what: what, total: total, start: time.Now(), now: time.Now, after: after,
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTimer(after)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.print(false)
				t.Reset(every)
			}
		}
	}()
	return m
}

// Record counts one more record done; pos, when above 0, is how many bytes of the input
// have been read so far (the end of the record in its file), kept when it is the largest
// seen.
func (m *Meter) Record(pos int64) {
	if m == nil {
		return
	}
	m.counted.Store(true)
	m.records.Add(1)
	for {
		old := m.bytes.Load()
		if pos <= old || m.bytes.CompareAndSwap(old, pos) {
			return
		}
	}
}

// Set sets the records done and the bytes read so far (when above 0, kept when it is the
// largest seen), for counting code that knows its totals rather than each record.
func (m *Meter) Set(records, pos int64) {
	if m == nil {
		return
	}
	m.counted.Store(true)
	m.records.Store(records)
	for {
		old := m.bytes.Load()
		if pos <= old || m.bytes.CompareAndSwap(old, pos) {
			return
		}
	}
}

// Stop ends the step: when a line was printed, or the step took longer than its first
// line's delay, a closing one says the totals and the time it took. It waits for the reporting goroutine, so nothing is printed after it returns.
// Calling it twice is harmless.
func (m *Meter) Stop() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		close(m.stop)
		<-m.done
		m.mu.Lock()
		printed := m.printed
		m.mu.Unlock()
		if printed || m.now().Sub(m.start) >= m.after {
			m.print(true)
		}
	})
}

// Line is the line the meter prints now (done: its closing line): the step, the records
// and bytes done (of the totals when known), the rates, the time taken and, while the
// step runs with a total known, the time left at the rate so far, e.g.
// "pab import: reading a.warc.gz: 12,000 records, 40.0 MB of 95.0 MB (42%), 6,000
// records/s, 20.0 MB/s, 2.0 s, about 2.8 s left".
func (m *Meter) Line(done bool) string {
	el := m.now().Sub(m.start)
	secs := el.Seconds()
	recs, bytes := m.records.Load(), m.bytes.Load()
	if !m.counted.Load() { // a step that counts nothing: its totals and the time
		s := m.what
		if m.total.Records > 0 || m.total.Bytes > 0 {
			s += " (" + m.totals() + ")"
		}
		if done {
			return fmt.Sprintf("%s: done in %s", s, round(el))
		}
		return fmt.Sprintf("%s: %s so far", s, round(el))
	}
	unit := m.unit()
	s := fmt.Sprintf("%s: %s %s", m.what, thousands(recs), unit)
	if m.total.Records > 0 {
		s = fmt.Sprintf("%s: %s of %s %s", m.what, thousands(recs), thousands(m.total.Records), unit)
	}
	if bytes > 0 {
		s += ", " + MB(bytes)
		if m.total.Bytes > 0 {
			s += fmt.Sprintf(" of %s (%d%%)", MB(m.total.Bytes), 100*bytes/m.total.Bytes)
		}
	}
	if secs > 0 {
		s += fmt.Sprintf(", %s %s/s", thousands(int64(float64(recs)/secs)), unit)
		if bytes > 0 {
			s += fmt.Sprintf(", %.1f MB/s", float64(bytes)/1e6/secs)
		}
	}
	if done {
		return s + ", done in " + round(el)
	}
	if left, ok := m.left(recs, bytes, secs); ok {
		return s + ", " + round(el) + ", about " + round(left) + " left"
	}
	return s + ", " + round(el)
}

// left estimates the time left from the rate so far: of the bytes when their total is
// known, else of the records when theirs is; ok is false when neither is, or nothing is
// done yet.
func (m *Meter) left(recs, bytes int64, secs float64) (time.Duration, bool) {
	var done, total int64
	switch {
	case m.total.Bytes > 0 && bytes > 0:
		done, total = bytes, m.total.Bytes
	case m.total.Records > 0 && recs > 0:
		done, total = recs, m.total.Records
	default:
		return 0, false
	}
	if secs <= 0 || done > total {
		return 0, false
	}
	return time.Duration(float64(total-done) / (float64(done) / secs) * float64(time.Second)), true
}

// totals renders the known totals: "20,000 records, 95.0 MB".
func (m *Meter) totals() string {
	var s string
	if m.total.Records > 0 {
		s = thousands(m.total.Records) + " " + m.unit()
	}
	if m.total.Bytes > 0 {
		if s != "" {
			s += ", "
		}
		s += MB(m.total.Bytes)
	}
	return s
}

// unit is what the meter counts, "records" unless Totals.Unit says otherwise.
func (m *Meter) unit() string {
	if m.total.Unit != "" {
		return m.total.Unit
	}
	return "records"
}

// print writes Line(done) as one line.
func (m *Meter) print(done bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.printed = true
	fmt.Fprintln(m.w, m.Line(done))
}

// MB renders n bytes in megabytes with one decimal ("40.0 MB"; SI, 10^6 bytes).
func MB(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// round renders d in whole seconds, or tenths below 10 s ("3.2 s", "14 s").
func round(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d s", int64(d.Seconds()))
}

// thousands renders n with commas between groups of three digits ("12,000").
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

type ctxKey struct{}

// NewContext returns ctx carrying m, for the counting code below the caller.
func NewContext(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, ctxKey{}, m)
}

// FromContext returns the Meter ctx carries, nil when none (or ctx is nil).
func FromContext(ctx context.Context) *Meter {
	if ctx == nil {
		return nil
	}
	m, _ := ctx.Value(ctxKey{}).(*Meter)
	return m
}

// Size is the size in bytes of the file at path, or of all regular files under the
// directory at path (links not followed); 0 when it cannot be read. It gives a step's
// Totals.Bytes.
func Size(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if de.Type().IsRegular() {
			if fi, err := de.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// Delays are the delay before a first progress line and between two, as Start takes them by
// default: $PAB_PROGRESS_AFTER and $PAB_PROGRESS_EVERY when set, else After and Every.
func Delays() (after, every time.Duration) {
	return envDuration("PAB_PROGRESS_AFTER", After), envDuration("PAB_PROGRESS_EVERY", Every)
}

// envDuration is the Go duration in the environment variable name when it parses and is
// positive, else def.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}
