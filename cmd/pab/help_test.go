package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
)

// TestLongHelp: every embedded long help text is there, without the file's final newline
// (cobra prints Long as given), and the three that carry the format number have it filled
// in from recording.RecordingFormat, no placeholder left.
func TestLongHelp(t *testing.T) {
	for _, name := range []string{"import", "record", "recording-migrate", "audit", "check"} {
		h := longHelp(name)
		if len(h) < 200 || strings.HasSuffix(h, "\n") {
			t.Errorf("help/%s.txt: %d bytes, ends %q", name, len(h), h[max(0, len(h)-10):])
		}
	}
	cur := "format " + strconv.Itoa(recording.RecordingFormat)
	if !strings.Contains(longHelp("audit"), "format other\nthan "+strconv.Itoa(recording.RecordingFormat)+";") || !strings.Contains(longHelp("import"), cur) || strings.Count(longHelp("recording-migrate"), cur) != 2 {
		t.Errorf("the format numbers of audit, import and recording-migrate are not filled in")
	}
	for _, name := range []string{"import", "record", "recording-migrate", "audit", "check"} {
		if strings.Contains(longHelp(name), "{{") {
			t.Errorf("help/%s.txt: a placeholder is left: %s", name, longHelp(name))
		}
	}
}
