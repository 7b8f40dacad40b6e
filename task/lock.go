package task

// lock.go: the write lock of a task. Every command that writes a task's recording (pab
// import, the import step of pab record, pab recording migrate) holds it from before it
// reads the task until it is done, so writers of one task run one after the other and none
// loses another's exchanges (docs/import.md, "Concurrent writers").

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/filelock"
	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
)

// lockDirName is the directory, beside the task directories (tasks/.locks), that holds their
// lock files. Its name starts with a dot, so it is no task (ValidID), and it carries a
// .gitignore of its own, so it is never committed.
const lockDirName = ".locks"

// LockPath is the lock file of the task directory taskDir: <tasks>/.locks/<id>.lock, the
// same file for every process that writes the task, whatever its $PAB_CACHE. Lock files are
// never removed (see internal/filelock).
func LockPath(taskDir string) string {
	return filepath.Join(filepath.Dir(taskDir), lockDirName, filepath.Base(taskDir)+".lock")
}

// taskOwnerPath holds the process id of the lock's holder, for the message of a process
// that waits; it may be stale after a crash (hence "pid N?").
func taskOwnerPath(taskDir string) string {
	return filepath.Join(filepath.Dir(taskDir), lockDirName, filepath.Base(taskDir)+".pid")
}

// LockTask takes the write lock of the task directory taskDir of repo for the command what
// ("pab import"; its messages start with it, its errors with it minus "pab "). When another
// process holds it, noWait makes that an error at once, naming the option as noWaitName
// says ("": NoWait; pab passes "--no-wait"); otherwise one line goes to errOut and
// LockTask waits.
// Holding the lock, it cleans up after an interrupted earlier writer of the task: the
// recording's temporary and moved-aside directories (recording.RecoverRecording, which also puts
// a moved-aside recording back when the recording is missing) and the task's work
// directories in the cache (WorkRoot), one line on errOut per thing done. The returned
// function releases the lock.
func (r *Repo) LockTask(taskDir, what, noWaitName string, noWait bool, errOut io.Writer) (func(), error) {
	lockPath := LockPath(taskDir)
	dir := filepath.Dir(lockPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: lock %s: %w", strings.TrimPrefix(what, "pab "), shownPath(r, taskDir), err)
	}
	if ignore := filepath.Join(dir, ".gitignore"); !pathx.IsRegularFile(ignore) {
		if err := atomicfile.Write(ignore, []byte("# lock files of pab's task writers (docs/import.md)\n*\n"), 0o644); err != nil {
			return nil, err
		}
	}
	unlock, err := filelock.TryLock(lockPath)
	if errors.Is(err, filelock.ErrUnsupported) {
		fmt.Fprintf(errOut, "%s: warning: no file locks on this system; writers of %s are not kept apart\n", what, shownPath(r, taskDir))
		unlock, err = func() {}, nil
	}
	if errors.Is(err, filelock.ErrLocked) {
		holder := "another pab"
		if pid := ownerPID(taskDir); pid != "" {
			holder += " (pid " + pid + "?)"
		}
		if noWait {
			if noWaitName == "" {
				noWaitName = "NoWait"
			}
			return nil, fmt.Errorf("%s: %s is being written by %s; not waiting (%s)", strings.TrimPrefix(what, "pab "), shownPath(r, taskDir), holder, noWaitName)
		}
		fmt.Fprintf(errOut, "%s: %s is being written by %s; waiting\n", what, shownPath(r, taskDir), holder)
		unlock, err = filelock.Lock(lockPath)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(what, "pab "), err)
	}
	owner := taskOwnerPath(taskDir)
	_ = atomicfile.Write(owner, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	root := r.WorkRoot(taskDir)
	release := func() {
		os.Remove(root) // when empty: the task's work directories are gone
		if ownerPID(taskDir) == strconv.Itoa(os.Getpid()) {
			os.Remove(owner)
		}
		unlock()
	}
	if err := recoverInterrupted(taskDir, root, what, errOut); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// recoverInterrupted repairs what an interrupted writer of the task in taskDir left: the
// recording (recording.RecoverRecording) and the work directories under root, one line on errOut
// per thing done.
func recoverInterrupted(taskDir, root, what string, errOut io.Writer) error {
	notes, err := recording.RecoverRecording(filepath.Join(taskDir, "recording"))
	for _, n := range notes {
		fmt.Fprintf(errOut, "%s: %s\n", what, n)
	}
	if err != nil {
		return err
	}
	if des, err := os.ReadDir(root); err == nil {
		for _, de := range des {
			p := filepath.Join(root, de.Name())
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("%s: remove %s: %w", strings.TrimPrefix(what, "pab "), p, err)
			}
			fmt.Fprintf(errOut, "%s: removed %s, left by an interrupted write\n", what, p)
		}
	}
	return nil
}

// ownerPID is the process id in the task's owner file, "" when there is none.
func ownerPID(taskDir string) string {
	f, err := os.Open(taskOwnerPath(taskDir))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 32))
	s := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(s); err != nil {
		return ""
	}
	return s
}

// WorkRoot is the cache directory of the temporary work of the writers of the task in
// taskDir: <cache>/work/<id>-<first 12 hex digits of the sha256 of the absolute task
// directory>, so repositories that share a cache never share it. Only a holder of the
// task's lock (LockTask) creates or removes anything there.
func (r *Repo) WorkRoot(taskDir string) string {
	abs, err := filepath.Abs(taskDir)
	if err != nil {
		abs = taskDir
	}
	return filepath.Join(r.CacheDir(), "work", filepath.Base(taskDir)+"-"+pathDigest(abs, 6))
}

// WorkDir makes a fresh temporary directory, its name prefix followed by random digits,
// under WorkRoot(taskDir); call it only while holding the task's lock. Errors are those of
// os.MkdirAll and os.MkdirTemp.
func (r *Repo) WorkDir(taskDir, prefix string) (string, error) {
	root := r.WorkRoot(taskDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(root, prefix)
}

// shownPath is path relative to the repository root when inside it ("tasks/x"), else path.
func shownPath(repo *Repo, path string) string {
	if rel, ok := pathx.Rel(repo.Root, path); ok {
		return rel
	}
	return path
}
