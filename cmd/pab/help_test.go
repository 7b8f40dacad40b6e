package main

import (
	"strings"
	"testing"
)

// TestLongHelp: every embedded long help text is there, without the file's final newline
// (cobra prints Long as given), and the two that carry the format number have its verb.
func TestLongHelp(t *testing.T) {
	for _, name := range []string{"import", "record", "recording-migrate", "audit", "check"} {
		h := longHelp(name)
		if len(h) < 200 || strings.HasSuffix(h, "\n") {
			t.Errorf("help/%s.txt: %d bytes, ends %q", name, len(h), h[max(0, len(h)-10):])
		}
	}
	if !strings.Contains(longHelp("audit"), "%d") || strings.Count(longHelp("recording-migrate"), "%d") != 2 {
		t.Errorf("the format verbs of audit and recording-migrate are not there")
	}
}
