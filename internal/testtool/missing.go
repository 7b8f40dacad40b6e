package testtool

import (
	"os"
	"testing"
)

// Missing ends a test that lacks something it needs (a tool, a package, root): it fails
// the test when the environment variable CI is "true", since CI (.ci/run) installs and
// starts everything the tests need and a skip there would hide a test that never ran,
// and skips it elsewhere. The message says what is missing and how to get it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: a test may not skip in CI)", args...)
	}
	t.Skipf(format, args...)
}
