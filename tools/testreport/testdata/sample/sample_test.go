// Package sample is testreport's fixture: tests that pass, fail (with SAMPLE_FAIL=1), skip
// with a reason and skip without one. It lies under testdata/, so ./... never runs it.
package sample

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) { t.Log("a passing test's log is not printed") }

func TestFails(t *testing.T) {
	if os.Getenv("SAMPLE_FAIL") == "1" {
		t.Error("the failure's own words")
	}
}

func TestSkipsWithReason(t *testing.T) { t.Skip("no frobnicator on this machine") }

func TestSkipsSilently(t *testing.T) { t.Skip() }

func TestSub(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("skipped", func(t *testing.T) { t.Skip("sub reason") })
}
