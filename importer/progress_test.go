package importer

import (
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
)

// TestProgressLines: nothing in the first 3 s (quiet), then at most one line every 5 s
// (every), with the records, the megabytes read of the total, the rates and the time
// left while reading, the exchanges while writing, and a line per later step.
func TestProgressLines(t *testing.T) {
	var sb strings.Builder
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	now := t0
	p := &importProgress{w: &sb, now: func() time.Time { return now }, start: t0, quiet: 3 * time.Second, every: 5 * time.Second}
	p.report(recording.ImportProgress{Phase: "read", Records: 10, Read: 1e6, Size: 10e6})
	now = t0.Add(2 * time.Second)
	p.step("packing the recording")
	p.report(recording.ImportProgress{Phase: "read", Records: 1000, Read: 2e6, Size: 10e6})
	if sb.Len() != 0 {
		t.Fatalf("lines before %v: %q", p.quiet, sb.String())
	}
	now = t0.Add(4 * time.Second)
	p.report(recording.ImportProgress{Phase: "read", Records: 4000, Read: 4e6, Size: 10e6})
	now = t0.Add(5 * time.Second)
	p.report(recording.ImportProgress{Phase: "read", Records: 5000, Read: 5e6, Size: 10e6}) // within every: none
	now = t0.Add(10 * time.Second)
	p.report(recording.ImportProgress{Phase: "write", Written: 0, Total: 100})
	now = t0.Add(16 * time.Second)
	p.report(recording.ImportProgress{Phase: "write", Written: 60, Total: 100})
	now = t0.Add(17 * time.Second)
	p.step("packing the recording")
	want := []string{
		"pab import: reading: 4000 records (1000/s), 4.0 of 10.0 MB (40%), 1.0 MB/s, about 6s left (4s in)",
		"pab import: writing: 0 of 100 exchanges (10s in)",
		"pab import: writing: 60 of 100 exchanges (10/s, about 4s left) (16s in)",
		"pab import: packing the recording (17s in)",
	}
	if got := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
