package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/pab-dev/pab/replay"
)

// Bounds of a Tap.
const (
	// MaxTapLines is how many log lines a Tap holds at most; older ones are dropped.
	MaxTapLines = 200_000
	// maxTapLine is the longest log line a Tap reads; a longer one is skipped.
	maxTapLine = 1 << 20
)

// Tap collects a replay's log lines in memory as the proxy writes them: pass it as
// replay.Options.Log. Lines are numbered from 0 in the order written; Since returns the
// lines from a number on. A line that is not JSON, or longer than 1 MiB, is skipped. It is
// safe for concurrent use.
type Tap struct {
	mu      sync.Mutex
	partial []byte // the start of a line not ended yet
	skip    bool   // partial was too long: drop until the next newline
	lines   []replay.LogLine
	base    int           // number of the first line held
	more    chan struct{} // closed (and replaced) when lines arrive
}

// NewTap returns an empty Tap.
func NewTap() *Tap { return &Tap{more: make(chan struct{})} }

// Write takes the next bytes of the log (JSON Lines of replay.LogLine). It never fails.
func (t *Tap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	added := false
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !t.skip {
				t.partial = append(t.partial, p...)
				if len(t.partial) > maxTapLine {
					t.partial, t.skip = nil, true
				}
			}
			break
		}
		line := p[:i]
		p = p[i+1:]
		if t.skip {
			t.skip = false
			continue
		}
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = nil
		}
		var l replay.LogLine
		if len(line) > maxTapLine || json.Unmarshal(line, &l) != nil {
			continue
		}
		t.lines = append(t.lines, l)
		added = true
	}
	if len(t.lines) > MaxTapLines {
		drop := len(t.lines) - MaxTapLines/2
		t.lines = append([]replay.LogLine(nil), t.lines[drop:]...)
		t.base += drop
	}
	if added {
		close(t.more)
		t.more = make(chan struct{})
	}
	return n, nil
}

// Len is the number of lines written so far (the number the next line gets).
func (t *Tap) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.base + len(t.lines)
}

// Since returns a copy of the lines numbered n and later that the Tap still holds.
func (t *Tap) Since(n int) []replay.LogLine {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := max(n-t.base, 0)
	if i >= len(t.lines) {
		return nil
	}
	return append([]replay.LogLine(nil), t.lines[i:]...)
}

// Forget drops the lines numbered before n.
func (t *Tap) Forget(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := n - t.base; i > 0 {
		i = min(i, len(t.lines))
		t.lines = append([]replay.LogLine(nil), t.lines[i:]...)
		t.base += i
	}
}

// wait returns when lines arrive, after d, or when ctx ends.
func (t *Tap) wait(ctx context.Context, d time.Duration) {
	t.mu.Lock()
	ch := t.more
	t.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	case <-ctx.Done():
	}
}
