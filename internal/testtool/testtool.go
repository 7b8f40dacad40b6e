// Package testtool finds the outside tools that tests drive (Debian's chromium): a missing
// tool skips the test on a developer's machine and fails it in CI (CI=true), where
// scripts/test.sh installs it.
package testtool

import (
	"os/exec"
	"testing"
)

// Chromium returns the path of Debian's chromium (chromium or chromium-browser on PATH).
// When neither is there it fails t with CI=true and skips it otherwise.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, "chromium not found on PATH (scripts/test.sh installs it)")
	return ""
}
