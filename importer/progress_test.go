package importer

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/recording"
)

// lockedBuilder is a strings.Builder safe for the meters' goroutines and the test.
type lockedBuilder struct {
	mu sync.Mutex
	sb strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb.String()
}

// TestProgressSteps: the import's progress is one internal/progress meter per step: the
// read phase counts records and input bytes against the input's size, the write phase
// exchanges against their total, a later step (begin) ends the one before with its closing
// line, and each meter's lines carry its step's name; end ends the last.
func TestProgressSteps(t *testing.T) {
	var out lockedBuilder
	var made []*progress.Meter
	p := newProgress(&out)
	p.start = func(w io.Writer, what string, total progress.Totals) *progress.Meter {
		m := progress.Start(w, what, total, time.Nanosecond, time.Hour) // one line at once, then the closing one
		made = append(made, m)
		return m
	}
	p.report(recording.ImportProgress{Phase: "read", Records: 10, Read: 1e6, Size: 10e6})
	p.report(recording.ImportProgress{Phase: "read", Records: 4000, Read: 4e6, Size: 10e6})
	if len(made) != 1 {
		t.Fatalf("%d meters after the read phase, want 1", len(made))
	}
	if l := made[0].Line(false); !strings.HasPrefix(l, "pab import: reading the input: 4,000 records, 4.0 MB of 10.0 MB (40%)") || !strings.Contains(l, "left") {
		t.Errorf("read line %q", l)
	}
	p.report(recording.ImportProgress{Phase: "write", Written: 0, Total: 100})
	p.report(recording.ImportProgress{Phase: "write", Written: 60, Total: 100})
	if len(made) != 2 || !strings.HasPrefix(made[1].Line(false), "pab import: writing the bundle: 60 of 100 exchanges") {
		t.Fatalf("write phase: %d meters, line %q", len(made), made[len(made)-1].Line(false))
	}
	m := p.begin("packing the recording", progress.Totals{Bytes: 1000})
	m.Record(500)
	p.end()
	p.end() // twice is harmless
	var closing []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "done in") {
			closing = append(closing, l)
		}
	}
	want := []string{"pab import: reading the input: 4,000 records, 4.0 MB of 10.0 MB (40%)", "pab import: writing the bundle: 60 of 100 exchanges",
		"pab import: packing the recording: 1 records, 0.0 MB of 0.0 MB (50%)"}
	if len(closing) != len(want) {
		t.Fatalf("closing lines %q, want one per step", closing)
	}
	for i := range want {
		if !strings.HasPrefix(closing[i], want[i]) {
			t.Errorf("closing line %d %q, want it to begin %q", i, closing[i], want[i])
		}
	}
}
