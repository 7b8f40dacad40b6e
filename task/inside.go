package task

// inside.go: a repository stays inside. A task folder, its recording/ and rules/, the
// files in them, or tasks/ itself may be symbolic links; one that resolves outside the
// repository is refused (OutsideError) by every command, because every command finds its
// task through Repo.Task, Repo.TaskDir or Resolve, which check here. pab neither reads nor
// writes through such a link. Links that stay inside the repository are followed.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pab-dev/pab/internal/pathx"
)

// maxCheckedEntries bounds how many entries of a task directory CheckTaskDir looks at
// (task directories hold a few dozen files; a larger one is refused, not walked forever).
const maxCheckedEntries = 100_000

// OutsideError is a path of a repository that resolves, through a symbolic link, outside
// the repository. Error reads `tasks/evil is a symbolic link to /tmp/x, outside the
// repository /repo: refused (pab does not read or write through it)`.
type OutsideError struct {
	// Path is the path as the repository names it (relative to Root when inside it).
	Path string
	// Target is where it resolves (absolute, links followed).
	Target string
	// Root is the repository (or, for a task directory outside any repository, the task
	// directory) it should stay in.
	Root string
}

func (e *OutsideError) Error() string {
	return fmt.Sprintf("%s is a symbolic link to %s, outside the repository %s: refused (pab does not read or write through it)", e.Path, e.Target, e.Root)
}

// IsOutside reports whether err is or wraps an *OutsideError.
func IsOutside(err error) bool {
	var oe *OutsideError
	return errors.As(err, &oe)
}

// CheckInside checks that path, which lies lexically inside the repository root, does not
// leave it through a symbolic link at any level: every existing prefix of path, from
// the root down, resolves (filepath.EvalSymlinks) to the resolved root or below it. A
// prefix that does not exist ends the check (what pab creates there is a plain directory
// or file). A path lexically outside the root is an error too. Errors are *OutsideError,
// or the error of resolving a prefix (a dangling link, a loop).
func (r *Repo) CheckInside(path string) error {
	return checkInside(r.Root, path)
}

// checkInside is CheckInside for the root dir.
func checkInside(root, path string) error {
	rel, ok := pathx.Rel(root, path)
	if !ok {
		return &OutsideError{Path: path, Target: path, Root: root}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("repository %s: %w", root, err)
	}
	if rel == "." {
		return nil
	}
	cur := root
	shown := ""
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		shown = filepath.Join(shown, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(cur)
		if errors.Is(err, fs.ErrNotExist) {
			dest, _ := os.Readlink(cur)
			return fmt.Errorf("%s is a symbolic link to %s, which does not exist: refused", filepath.ToSlash(shown), dest)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.ToSlash(shown), err)
		}
		if !pathx.Within(real, realRoot) {
			return &OutsideError{Path: filepath.ToSlash(shown), Target: real, Root: root}
		}
	}
	return nil
}

// CheckTaskDir checks the task directory dir of the repository and everything in it: the
// directory (and tasks/) by CheckInside, then every entry below it, at any depth, that is
// a symbolic link must resolve inside the repository (links are not walked into; their
// targets inside the repository are checked by their own place). A task directory that
// does not lie in the repository (a path given on the command line) is checked against
// itself: nothing in it may link out of it. Errors are *OutsideError, naming the first
// link that leaves.
func (r *Repo) CheckTaskDir(dir string) error {
	root := r.Root
	if !pathx.Within(dir, root) {
		root = dir
	}
	if err := checkInside(root, dir); err != nil {
		return err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("repository %s: %w", root, err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	n := 0
	return filepath.WalkDir(realDir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxCheckedEntries {
			return fmt.Errorf("%s holds more than %d entries; refused", shownPath(r, dir), maxCheckedEntries)
		}
		if de.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, _ := filepath.Rel(realDir, p)
		shown := filepath.ToSlash(filepath.Join(shownPath(r, dir), rel))
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			dest, _ := os.Readlink(p)
			return fmt.Errorf("%s is a symbolic link to %s, which cannot be followed (%v): refused", shown, dest, errors.Unwrap(err))
		}
		if !pathx.Within(real, realRoot) {
			return &OutsideError{Path: shown, Target: real, Root: root}
		}
		return nil
	})
}

// TaskDir returns tasks/<id> of the repository for a command that may create the task
// (pab import --task, pab record --task): the id must be valid, and tasks/, tasks/<id> and
// whatever it holds must not lead outside the repository (CheckTaskDir).
func (r *Repo) TaskDir(id string) (string, error) {
	if err := ValidID(id); err != nil {
		return "", err
	}
	dir := filepath.Join(r.TasksDir(), id)
	if err := r.CheckTaskDir(dir); err != nil {
		return "", fmt.Errorf("task %s: %w", id, err)
	}
	return dir, nil
}

// CheckArg checks a path given on the command line for a command that reads or writes a
// task through it (pab audit DIR, pab recording migrate DIR): when it lies in the
// repository it must not leave it through a link (CheckInside); when it is a task
// directory, or the recording/ or rules/ directory of one, that task directory is checked
// as a whole (CheckTaskDir). Any other path passes. Errors are those of CheckTaskDir.
func (r *Repo) CheckArg(arg string) error {
	abs, err := filepath.Abs(arg)
	if err != nil {
		return err
	}
	if pathx.Within(abs, r.Root) {
		if err := r.CheckInside(abs); err != nil {
			return err
		}
	}
	for _, dir := range []string{abs, filepath.Dir(abs)} {
		if pathx.IsRegularFile(filepath.Join(dir, CardFile)) || dir == abs && pathx.Within(dir, r.TasksDir()) && filepath.Dir(dir) == r.TasksDir() {
			return r.CheckTaskDir(dir)
		}
	}
	return nil
}
