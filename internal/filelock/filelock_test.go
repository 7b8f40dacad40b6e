package filelock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestTryLockHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock while held: %v, want ErrLocked", err)
	}
	unlock()
	unlock() // twice is harmless
	u2, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after unlock: %v", err)
	}
	u2()
}

func TestLockRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "x.lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(link); err == nil || !strings.Contains(err.Error(), link) {
		t.Fatalf("Lock through a symlink: %v, want an error naming it", err)
	}
}

// TestLockAcrossProcesses runs processes that each increment a counter file 20 times under
// the lock (read, then write back): without mutual exclusion updates are lost.
func TestLockAcrossProcesses(t *testing.T) {
	if os.Getenv("FILELOCK_CHILD") != "" {
		return
	}
	dir := t.TempDir()
	counter := filepath.Join(dir, "counter")
	if err := os.WriteFile(counter, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	const procs, rounds = 6, 20
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperIncrement$")
		cmds[i].Env = append(os.Environ(), "FILELOCK_CHILD=1", "FILELOCK_DIR="+dir, "FILELOCK_ROUNDS="+strconv.Itoa(rounds))
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != strconv.Itoa(procs*rounds) {
		t.Fatalf("counter = %s, want %d (updates lost)", got, procs*rounds)
	}
}

func TestHelperIncrement(t *testing.T) {
	if os.Getenv("FILELOCK_CHILD") == "" {
		return // not a test: the child of TestLockAcrossProcesses, run with FILELOCK_CHILD set
	}
	dir := os.Getenv("FILELOCK_DIR")
	rounds, _ := strconv.Atoi(os.Getenv("FILELOCK_ROUNDS"))
	counter := filepath.Join(dir, "counter")
	for range rounds {
		unlock, err := Lock(filepath.Join(dir, "counter.lock"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(counter)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(b))
		if err := os.WriteFile(counter, []byte(fmt.Sprint(n+1)), 0o600); err != nil {
			t.Fatal(err)
		}
		unlock()
	}
}
