package task

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLockTaskOneWriter: eight goroutines take the lock of one task at once (each its own
// open file description, as separate processes would); never are two inside together, and
// every one gets its turn.
func TestLockTaskOneWriter(t *testing.T) {
	repo := &Repo{Root: t.TempDir()}
	t.Setenv("PAB_CACHE", filepath.Join(repo.Root, ".cache"))
	taskDir := filepath.Join(repo.TasksDir(), "shop")
	var inside, maxInside, turns atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var errOut bytes.Buffer
			unlock, err := repo.LockTask(taskDir, "pab import", "", false, &errOut)
			if err != nil {
				errs <- err
				return
			}
			n := inside.Add(1)
			if n > maxInside.Load() {
				maxInside.Store(n)
			}
			dir, err := repo.WorkDir(taskDir, "import-")
			if err != nil {
				errs <- err
			} else {
				os.RemoveAll(dir)
			}
			turns.Add(1)
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if maxInside.Load() != 1 || turns.Load() != 8 {
		t.Errorf("at most %d writers inside at once (want 1), %d turns (want 8)", maxInside.Load(), turns.Load())
	}
	if _, err := os.Stat(repo.WorkRoot(taskDir)); !os.IsNotExist(err) {
		t.Errorf("the work root is left: %v", err)
	}
}

// TestLockTaskNoWait: while the lock is held, noWait fails at once with the holder's pid
// and the task's path relative to the repository; once released, the lock is taken.
func TestLockTaskNoWait(t *testing.T) {
	repo := &Repo{Root: t.TempDir()}
	t.Setenv("PAB_CACHE", filepath.Join(repo.Root, ".cache"))
	taskDir := filepath.Join(repo.TasksDir(), "shop")
	unlock, err := repo.LockTask(taskDir, "pab import", "", true, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = repo.LockTask(taskDir, "pab recording migrate", "--no-wait", true, &bytes.Buffer{})
	want := "recording migrate: tasks/shop is being written by another pab (pid " + strconv.Itoa(os.Getpid()) + "?); not waiting (--no-wait)"
	if err == nil || err.Error() != want {
		t.Errorf("held: %v\nwant %s", err, want)
	}
	if _, err = repo.LockTask(taskDir, "pab import", "", true, &bytes.Buffer{}); err == nil || !strings.HasSuffix(err.Error(), "; not waiting (NoWait)") {
		t.Errorf("held, the option named by default: %v", err)
	}
	unlock()
	unlock2, err := repo.LockTask(taskDir, "pab import", "", true, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	unlock2()
	if data, err := os.ReadFile(filepath.Join(repo.TasksDir(), lockDirName, ".gitignore")); err != nil || !strings.Contains(string(data), "*\n") {
		t.Errorf(".gitignore: %q %v", data, err)
	}
}

// TestLockTaskRecovers: work directories an interrupted writer left in the task's work
// root are removed by the next holder, one line each.
func TestLockTaskRecovers(t *testing.T) {
	repo := &Repo{Root: t.TempDir()}
	t.Setenv("PAB_CACHE", filepath.Join(repo.Root, ".cache"))
	taskDir := filepath.Join(repo.TasksDir(), "shop")
	left := filepath.Join(repo.WorkRoot(taskDir), "import-999")
	if err := os.MkdirAll(filepath.Join(left, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	unlock, err := repo.LockTask(taskDir, "pab import", "", false, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if want := "pab import: removed " + left + ", left by an interrupted write\n"; errOut.String() != want {
		t.Errorf("errOut %q, want %q", errOut.String(), want)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("%s is left: %v", left, err)
	}
}
