package procgroup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startShell starts sh -c script in a group of its own and returns the command and a
// channel that receives its Wait result.
func startShell(t *testing.T, script string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	Set(cmd, true)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { Kill(cmd.Process.Pid) })
	return cmd, done
}

// TestStopEndsTheGroup: Stop ends a leader that obeys SIGTERM at once, and one that
// ignores it after the grace period; KillRest then ends a child left behind.
func TestStopEndsTheGroup(t *testing.T) {
	cmd, done := startShell(t, "sleep 1000 & wait")
	if !Alive(cmd.Process.Pid) {
		t.Fatal("the group is not alive after start")
	}
	t0 := time.Now()
	err := Stop(cmd.Process.Pid, done, 10*time.Second)
	if err == nil || time.Since(t0) > 5*time.Second {
		t.Fatalf("Stop: %v after %s; want a signalled exit at once", err, time.Since(t0))
	}
	KillRest(cmd.Process.Pid, 2*time.Second)
	if Alive(cmd.Process.Pid) {
		t.Fatal("the sleep outlived KillRest")
	}

	cmd, done = startShell(t, "trap '' TERM; sleep 1000 & while :; do sleep 0.05; done")
	time.Sleep(100 * time.Millisecond) // let the trap be set
	t0 = time.Now()
	err = Stop(cmd.Process.Pid, done, 300*time.Millisecond)
	ws, _ := err.(*exec.ExitError)
	if ws == nil || ws.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Stop of a TERM-ignoring shell: %v, want SIGKILL", err)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Fatalf("SIGKILL came after %s, before the grace period", d)
	}
	KillRest(cmd.Process.Pid, time.Second)
	if Alive(cmd.Process.Pid) {
		t.Fatal("group alive after KillRest")
	}
}

// TestContextKillsTheGroup: with exec.CommandContext, the context's end kills the
// shell's child too, not only the shell.
func TestContextKillsTheGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pidFile := t.TempDir() + "/child"
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "sleep 1000 & echo $! > "+pidFile+"; wait")
	Set(cmd, false)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	for i := 0; i < 200 && child == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("no child pid")
	}
	cancel()
	cmd.Wait() //nolint:errcheck
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && Alive(cmd.Process.Pid) {
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(cmd.Process.Pid) {
		t.Fatalf("the shell's child %d outlived the context", child)
	}
}

// TestSignalGoneGroup: a group that is gone is not an error; pgid 0 is.
func TestSignalGoneGroup(t *testing.T) {
	cmd, done := startShell(t, "exit 0")
	<-done
	if err := Signal(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Errorf("Signal to a gone group: %v", err)
	}
	if Alive(cmd.Process.Pid) {
		t.Error("a gone group is alive")
	}
	if err := Signal(0, syscall.SIGTERM); err == nil {
		t.Error("Signal(0) must fail: it would signal pab's own group")
	}
}

// TestParseStat: comm with spaces and parentheses.
func TestParseStat(t *testing.T) {
	for in, want := range map[string][2]string{
		"123 (sh) S 1 123 123 0":           {"S", "123"},
		"9 (a) b (c)) Z 1 77 77":           {"Z", "77"},
		"9 (x":                             {"", ""},
		"9 (x) R 1":                        {"", ""},
		"1 (systemd) S 0 1 1 0 -1 4194560": {"S", "1"},
	} {
		st, pg, ok := parseStat([]byte(in))
		if want[0] == "" {
			if ok {
				t.Errorf("%q: parsed %s %d", in, st, pg)
			}
			continue
		}
		if !ok || st != want[0] || strconv.Itoa(pg) != want[1] {
			t.Errorf("%q: %s %d %v, want %v", in, st, pg, ok, want)
		}
	}
}

// TestWatchedStopWithin: a child whose shutdown after SIGTERM takes longer than
// DefaultStopGrace (as pab guard's may: it waits for requests in flight, then writes its
// files) ends on its own under StopWithin a longer grace, its last stderr line in the log;
// under Stop it is killed.
func TestWatchedStopWithin(t *testing.T) {
	slow := fmt.Sprintf(`trap 'sleep %d; echo wrote the end >&2; exit 0' TERM; echo "listening on x" >&2; while :; do sleep 0.05; done`,
		int(DefaultStopGrace/time.Second)+1)
	for _, longer := range []bool{true, false} {
		log := filepath.Join(t.TempDir(), "child.stderr")
		w, err := StartWatched(exec.Command("sh", "-c", slow), log, 1<<20, regexp.MustCompile(`listening on (\S+)`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Wait(context.Background(), 30*time.Second); err != nil { // the trap is set
			t.Fatal(err)
		}
		if longer {
			w.StopWithin(DefaultStopGrace + 20*time.Second)
		} else {
			w.Stop()
		}
		err = <-w.Exited()
		w.Exited() <- err
		b, _ := os.ReadFile(log)
		if longer && (err != nil || !strings.Contains(string(b), "wrote the end")) {
			t.Errorf("StopWithin a longer grace: %v, log %q; want the child's own exit and its last line", err, b)
		}
		if !longer && (err == nil || strings.Contains(string(b), "wrote the end")) {
			t.Errorf("Stop: %v, log %q; want the child killed after DefaultStopGrace", err, b)
		}
	}
}
