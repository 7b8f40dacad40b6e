package main

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: tuneGC sets the memory limit and GOGC when the environment sets neither,
// only the limit when GOGC is set, and nothing when GOMEMLIMIT is set.
func TestTuneGC(t *testing.T) {
	percent0 := debug.SetGCPercent(100)
	limit0 := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(percent0)
		debug.SetMemoryLimit(limit0)
	})
	const limit, percent = 123 << 20, 321
	for _, c := range []struct {
		gogc, memlimit string
		wantLimit      int64
		wantPercent    int
	}{
		{"", "", limit, percent},
		{"150", "", limit, 100},
		{"", "1GiB", 1 << 40, 100},
		{"150", "1GiB", 1 << 40, 100},
	} {
		t.Setenv("GOGC", c.gogc)
		t.Setenv("GOMEMLIMIT", c.memlimit)
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(1 << 40)
		tuneGC(limit, percent)
		if got := debug.SetMemoryLimit(-1); got != c.wantLimit {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: memory limit %d, want %d", c.gogc, c.memlimit, got, c.wantLimit)
		}
		if got := debug.SetGCPercent(100); got != c.wantPercent {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: GOGC %d, want %d", c.gogc, c.memlimit, got, c.wantPercent)
		}
	}
}
