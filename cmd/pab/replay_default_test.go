package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayWithoutTarget: pab replay without TARGET serves the repository's only task (the
// replay image's default command), and names the tasks when there are none or several.
func TestReplayWithoutTarget(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, "sites"), filepath.Join(root, "sites"))
	_, stderr, code := runIn(t, root, "replay", "--check")
	if code != 1 || !strings.Contains(stderr, "pab: replay: give TARGET ("+filepath.Join(root, "tasks")+" holds no task)") {
		t.Errorf("no task: exit %d, stderr %q", code, stderr)
	}

	copyTree(t, filepath.Join(repoRoot, "tasks", "books-sapiens-price"), filepath.Join(root, "tasks", "books-sapiens-price"))
	stdout, stderr, code := runIn(t, root, "replay", "--check")
	if code != 0 || !strings.Contains(stderr, "pab replay: books-sapiens-price (") {
		t.Fatalf("one task: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	copyTree(t, filepath.Join(repoRoot, "tasks", "lil-former-projects"), filepath.Join(root, "tasks", "lil-former-projects"))
	_, stderr, code = runIn(t, root, "replay", "--check")
	if code != 1 || !strings.Contains(stderr, "holds 2 tasks: books-sapiens-price, lil-former-projects)") {
		t.Errorf("two tasks: exit %d, stderr %q", code, stderr)
	}
}
