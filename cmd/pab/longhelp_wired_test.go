//go:build !pab_lite

package main

import (
	"strings"
	"testing"
)

// TestLongHelpWired: every command whose long help lives in help/<name>.txt shows that
// text, whole (a missing or misnamed file would leave its help empty).
func TestLongHelpWired(t *testing.T) {
	root := newRootCmd()
	for path, name := range map[string]string{
		"grade": "grade", "grade calibrate": "grade-calibrate", "run": "run", "replay": "replay",
		"browser": "browser", "k8s render": "k8s-render", "rules check": "rules-check",
		"export": "export", "stats": "stats", "k8s collect": "k8s-collect", "k8s status": "k8s-status", "compare": "compare",
	} {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c.Name() != strings.Fields(path)[len(strings.Fields(path))-1] {
			t.Errorf("pab %s: no such command (%v)", path, err)
			continue
		}
		h := longHelp(name)
		if c.Long != h || len(h) < 200 || strings.HasSuffix(h, "\n") {
			t.Errorf("pab %s: Long is %d bytes, help/%s.txt %d bytes", path, len(c.Long), name, len(h))
		}
	}
}
