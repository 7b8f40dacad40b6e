package task

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// insideRepo makes a repository with tasks/t (task.yaml, grading.yaml, recording/x,
// rules/a.yaml) and, beside it, an outside directory holding copies of each; it returns
// both roots.
func insideRepo(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "repo"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		for _, f := range []string{"tasks/t/task.yaml", "tasks/t/grading.yaml", "tasks/t/recording/x", "tasks/t/rules/a.yaml"} {
			p := filepath.Join(d, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("title: x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root, outside
}

// link replaces root/rel by a symbolic link to target.
func link(t *testing.T, root, rel, target string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestOutsideRefused: a symbolic link leading outside the repository at every level of a
// task (tasks/, tasks/t, recording/, rules/, a file in each, task.yaml, grading.yaml) makes
// Task, TaskDir, Resolve (by id and by path) and CheckTaskDir refuse the task with an
// OutsideError naming the link; the task is still listed by TaskIDs.
func TestOutsideRefused(t *testing.T) {
	for _, rel := range []string{"tasks", "tasks/t", "tasks/t/recording", "tasks/t/rules",
		"tasks/t/recording/x", "tasks/t/rules/a.yaml", "tasks/t/task.yaml", "tasks/t/grading.yaml"} {
		t.Run(strings.ReplaceAll(rel, "/", "_"), func(t *testing.T) {
			root, outside := insideRepo(t)
			link(t, root, rel, filepath.Join(outside, filepath.FromSlash(rel)))
			repo := &Repo{Root: root}
			ids, err := repo.TaskIDs()
			if err != nil || len(ids) != 1 || ids[0] != "t" {
				t.Errorf("TaskIDs = %v, %v; want [t]", ids, err)
			}
			check := func(what string, err error) {
				t.Helper()
				if !IsOutside(err) {
					t.Errorf("%s: error %v; want an OutsideError", what, err)
					return
				}
				if !strings.Contains(err.Error(), rel+" is a symbolic link to "+filepath.Join(outside, filepath.FromSlash(rel))) ||
					!strings.Contains(err.Error(), "outside the repository") {
					t.Errorf("%s: %q does not name the link %s and where it leads", what, err, rel)
				}
			}
			_, err = repo.Task("t")
			check("Task", err)
			_, err = repo.TaskDir("t")
			check("TaskDir", err)
			_, err = Resolve("t", repo)
			check("Resolve(id)", err)
			_, err = Resolve(filepath.Join(root, "tasks", "t"), repo)
			check("Resolve(dir)", err)
			check("CheckTaskDir", repo.CheckTaskDir(filepath.Join(root, "tasks", "t")))
		})
	}
}

// TestInsideLinksAllowed: links that stay inside the repository are followed: a task
// folder linking to another folder of the repository, a rule file linking to sites/.
func TestInsideLinksAllowed(t *testing.T) {
	root, _ := insideRepo(t)
	if err := os.MkdirAll(filepath.Join(root, "sites"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sites", "s.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "tasks", "t"), filepath.Join(root, "real-t")); err != nil {
		t.Fatal(err)
	}
	link(t, root, "real-t/rules/a.yaml", "../../sites/s.yaml")
	link(t, root, "tasks/t", filepath.Join(root, "real-t"))
	repo := &Repo{Root: root}
	if _, err := repo.Task("t"); err != nil {
		t.Errorf("Task: %v; want the linked task inside the repository", err)
	}
	if _, err := repo.TaskDir("new"); err != nil {
		t.Errorf("TaskDir(new): %v", err)
	}
}

// TestDanglingLinkRefused: a link to nothing is refused with a line saying so.
func TestDanglingLinkRefused(t *testing.T) {
	root, _ := insideRepo(t)
	link(t, root, "tasks/t/recording", filepath.Join(root, "gone"))
	_, err := (&Repo{Root: root}).Task("t")
	if err == nil || !strings.Contains(err.Error(), "tasks/t/recording is a symbolic link to") {
		t.Errorf("Task: %v; want the dangling link refused", err)
	}
}

// TestUserCacheOutsideRepository: FindRepo of a current directory without tasks/ or
// sites/ caches per user (os.UserCacheDir), one with tasks/ in .cache, and $PAB_CACHE
// wins over both.
func TestUserCacheOutsideRepository(t *testing.T) {
	t.Setenv("PAB_REPO", "")
	t.Setenv("PAB_CACHE", "")
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	bare := t.TempDir()
	t.Chdir(bare)
	r, err := FindRepo("")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.CacheDir(); got != filepath.Join(xdg, "pab") || !r.IsUserCache() {
		t.Errorf("bare directory: CacheDir %s; want %s", got, filepath.Join(xdg, "pab"))
	}
	if r, _ := FindRepo(bare); r.CacheDir() != filepath.Join(bare, ".cache") {
		t.Errorf("--repo: CacheDir %s; want the repository's .cache", r.CacheDir())
	}
	if err := os.Mkdir(filepath.Join(bare, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r, _ := FindRepo(""); r.CacheDir() != filepath.Join(bare, ".cache") {
		t.Errorf("repository: CacheDir %s; want its .cache", r.CacheDir())
	}
	t.Setenv("PAB_CACHE", filepath.Join(xdg, "c"))
	if r, _ := FindRepo(""); r.CacheDir() != filepath.Join(xdg, "c") {
		t.Errorf("PAB_CACHE: CacheDir %s", r.CacheDir())
	}
}
