package proctree

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestStatsCountsChildren: a busy child's CPU time is counted in its parent's tree, and
// the tree's RSS is at least this process's own.
func TestStatsCountsChildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cpu, _ := Stats(os.Getpid()); cpu > 0.05 {
			break
		}
	}
	self, rss := Stats(os.Getpid())
	if self < 0.05 {
		t.Errorf("CPU of the tree = %.3f s after the child's busy loop, want > 0.05", self)
	}
	if rss <= 0 {
		t.Errorf("RSS of the tree = %d", rss)
	}
	if c, r := Stats(1 << 30); c != 0 || r != 0 {
		t.Errorf("unknown pid: %v %v, want zeros", c, r)
	}
}
