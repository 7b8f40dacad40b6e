package progress

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the meter's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls until buf holds n lines, at most 10 s.
func waitFor(t *testing.T, buf *lockedBuffer, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(buf.String(), "\n") < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d lines after 10 s: %q", n, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMeterCounts: records counted from several goroutines through the context show up in
// the periodic line with bytes, the percentage of the total and the rates, and Stop adds a
// closing line; nothing is printed after Stop returns.
func TestMeterCounts(t *testing.T) {
	var buf lockedBuffer
	m := Start(&buf, "pab import: reading a.warc.gz", Totals{Bytes: 4000}, 20*time.Millisecond, 20*time.Millisecond)
	ctx := NewContext(context.Background(), m)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				FromContext(ctx).Record(int64(g*250+i+1) * 2)
			}
		}()
	}
	wg.Wait()
	waitFor(t, &buf, 1)
	m.Stop()
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !regexp.MustCompile(`^pab import: reading a\.warc\.gz: 1,000 records, 0\.0 MB of 0\.0 MB \(50%\), [\d,]+ records/s, [\d.]+ MB/s, done in [\d.]+ s$`).MatchString(last) {
		t.Errorf("closing line %q", last)
	}
	m.Stop()
	if buf.String() != out {
		t.Errorf("printed after Stop: %q", buf.String()[len(out):])
	}
}

// TestMeterQuietWhenShort: a step that ends before the first line prints nothing.
func TestMeterQuietWhenShort(t *testing.T) {
	var buf lockedBuffer
	m := Start(&buf, "x", Totals{}, time.Hour, 0)
	m.Record(10)
	m.Stop()
	if buf.String() != "" {
		t.Errorf("a short step printed %q", buf.String())
	}
	var nilMeter *Meter
	nilMeter.Record(1)
	nilMeter.Stop()
	if FromContext(context.Background()) != nil || FromContext(nil) != nil { //nolint:staticcheck // nil context is part of the contract
		t.Error("FromContext of a context without a meter is not nil")
	}
}

// TestMeterUncounted: a step that counts nothing prints its totals and the time so far.
func TestMeterUncounted(t *testing.T) {
	var buf lockedBuffer
	m := Start(&buf, "pab audit: auditing tasks/x/recording", Totals{Records: 20000, Bytes: 95e6}, 10*time.Millisecond, time.Hour)
	waitFor(t, &buf, 1)
	m.Stop()
	want := regexp.MustCompile(`^pab audit: auditing tasks/x/recording \(20,000 records, 95\.0 MB\): [\d.]+ s so far\npab audit: auditing tasks/x/recording \(20,000 records, 95\.0 MB\): done in [\d.]+ s\n$`)
	if !want.MatchString(buf.String()) {
		t.Errorf("output %q", buf.String())
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q", n, got)
		}
	}
}

// TestMeterSetAndLeft: Set gives absolute counts (bytes only ever grow), and a running
// line says the time left at the rate so far, of the bytes when their total is known, else
// of the records; a closing line and a step without totals say none.
func TestMeterSetAndLeft(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	now := t0
	m := &Meter{what: "pab import: reading", total: Totals{Bytes: 10e6}, start: t0, now: func() time.Time { return now }}
	m.Set(4000, 4e6)
	m.Set(4000, 3e6) // bytes never go back
	now = t0.Add(4 * time.Second)
	if got, want := m.Line(false), "pab import: reading: 4,000 records, 4.0 MB of 10.0 MB (40%), 1,000 records/s, 1.0 MB/s, 4.0 s, about 6.0 s left"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got := m.Line(true); strings.Contains(got, "left") {
		t.Errorf("closing line %q says a time left", got)
	}
	w := &Meter{what: "pab import: writing", total: Totals{Records: 100, Unit: "exchanges"}, start: t0, now: func() time.Time { return now }}
	w.Set(60, 0)
	now = t0.Add(12 * time.Second)
	if got, want := w.Line(false), "pab import: writing: 60 of 100 exchanges, 5 exchanges/s, 12 s, about 8.0 s left"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	n := &Meter{what: "pab import: packing", start: t0, now: func() time.Time { return now }}
	n.Set(7, 0)
	if got := n.Line(false); strings.Contains(got, "left") {
		t.Errorf("line without totals %q says a time left", got)
	}
}
