package testtool

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The machine the tests run on is shared: another job can keep this process off the
// CPU for seconds, and a test that bounds timeouts from both sides then fails for no
// fault of the code. RetryStalled runs such a test again when, and only when, it failed
// while the process was seen stalled; a failure on a machine that did not stall, or
// three stalled failures in a row, is reported.

// stallLimit is the stall after which a failed attempt is run again: well under the
// tests' 2 s slack, above the scheduling noise of a busy race-instrumented process.
const stallLimit = 500 * time.Millisecond

// stallMonitor measures the longest time a 10 ms ticker came late: how long the
// process was not scheduled.
type stallMonitor struct {
	stop, done chan struct{}
	max        atomic.Int64
}

func startStallMonitor() *stallMonitor {
	m := &stallMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		const tick = 10 * time.Millisecond
		last := time.Now()
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(tick):
			}
			now := time.Now()
			if late := now.Sub(last) - tick; late > time.Duration(m.max.Load()) {
				m.max.Store(int64(late))
			}
			last = now
		}
	}()
	return m
}

// end stops the monitor and returns the longest stall seen.
func (m *stallMonitor) end() time.Duration {
	close(m.stop)
	<-m.done
	return time.Duration(m.max.Load())
}

// Attempt is the testing.TB of one attempt: it collects errors instead of failing
// the test (Fatal ends the calling goroutine, as in a test); everything else, Logf,
// Cleanup and TempDir included, goes to the test.
type Attempt struct {
	testing.TB
	prefix string
	a      *attemptErrs
}

type attemptErrs struct {
	mu   sync.Mutex
	errs []string
}

func (t Attempt) add(s string) {
	t.a.mu.Lock()
	t.a.errs = append(t.a.errs, t.prefix+s)
	t.a.mu.Unlock()
}

func (t Attempt) Helper()                      {}
func (t Attempt) Error(args ...any)            { t.add(fmt.Sprint(args...)) }
func (t Attempt) Errorf(f string, args ...any) { t.add(fmt.Sprintf(f, args...)) }
func (t Attempt) Fail()                        { t.add("failed") }
func (t Attempt) FailNow()                     { t.add("failed"); runtime.Goexit() }
func (t Attempt) Fatal(args ...any)            { t.add(fmt.Sprint(args...)); runtime.Goexit() }
func (t Attempt) Fatalf(f string, args ...any) { t.add(fmt.Sprintf(f, args...)); runtime.Goexit() }
func (t Attempt) Failed() bool {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	return len(t.a.errs) > 0
}

// Sub is t with its errors prefixed by name (one of several scenarios of an attempt).
func (t Attempt) Sub(name string) Attempt {
	return Attempt{TB: t.TB, prefix: t.prefix + name + ": ", a: t.a}
}

// RetryStalled runs attempt (on a goroutine of its own) up to three times, while it
// fails and the process stalled longer than stallLimit meanwhile; the errors of the last
// attempt are reported.
func RetryStalled(t *testing.T, attempt func(t Attempt)) {
	t.Helper()
	for i := 1; ; i++ {
		at := Attempt{TB: t, a: &attemptErrs{}}
		m := startStallMonitor()
		done := make(chan struct{})
		go func() {
			defer close(done)
			attempt(at)
		}()
		<-done
		stall := m.end()
		if len(at.a.errs) == 0 {
			return
		}
		if stall < stallLimit || i == 3 {
			for _, e := range at.a.errs {
				t.Error(e)
			}
			if stall >= stallLimit {
				t.Logf("the process stalled up to %v in each of %d attempts", stall, i)
			}
			return
		}
		t.Logf("attempt %d failed while the process stalled for %v; again. Errors:\n%s", i, stall, strings.Join(at.a.errs, "\n"))
	}
}
