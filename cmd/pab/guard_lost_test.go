package main

// The guard's DevTools session with its browser lost mid-run (issue 28): the run pauses
// browser_lost and ends blocked; it never goes on unprotected.

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGuardBrowserLost: a real pab guard on the guard-harden replay; its Chromium is killed
// after the first page; the agent's next call pauses (browser_lost, shown by the control
// API), the owner's resume ends the run blocked browser_lost, and a later call is refused
// (run_over).
func TestGuardBrowserLost(t *testing.T) {
	requireBrowserStack(t)
	t.Parallel()
	r, _ := startHardenRun(t, "")
	r.open(t, harden+"/apply")
	pid, cl := browserOf(r.cmd.Process.Pid)
	if pid == 0 {
		t.Fatal("no Chromium below pab guard")
	}
	t.Logf("killing %d: %s", pid, cl)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// a call made while the loss is being noticed (the process watched every 250 ms, the
	// socket's end) may still reach the dead browser and fail; the next one pauses
	var done chan *mcp.CallToolResult
	t.Cleanup(func() {
		if t.Failed() {
			tr, _ := os.ReadFile(r.trace)
			t.Logf("stderr:\n%s\ntrace:\n%s", r.stderr, tr)
		}
	})
	for i := 0; ; i++ {
		done = r.callAsync("browser_snapshot", nil)
		paused := false
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if st := r.status(t); st.Waiting != nil {
				paused = true
				break
			}
			select {
			case res := <-done:
				t.Logf("call %d answered before a pause: %.200s", i, textOf(res))
				done = nil
			default:
			}
			if done == nil {
				break
			}
		}
		if paused {
			break
		}
		if i == 3 {
			t.Fatal("no browser_lost pause after four calls")
		}
	}
	if st := r.status(t); st.Waiting.Reason != "browser_lost" {
		t.Fatalf("paused for %q, want browser_lost", st.Waiting.Reason)
	}
	r.post(t, "/local-apply/resume", "{}")
	res := answerOf(t, done)
	expect(t, "browser_snapshot after the loss", res.IsError, textOf(res), "refused")
	r.traced(t, 0, "run.paused", "pauseReason", "browser_lost")
	r.traced(t, 0, "policy.decision", "reason", "browser_lost", "decision", "refused")
	r.do(t, "refused", "browser_snapshot", nil)
	r.close(t)
	if res := r.resultOf(t); res.Outcome != "blocked" || res.BlockReason != "browser_lost" {
		t.Errorf("result %+v, want blocked browser_lost", res)
	}
}
