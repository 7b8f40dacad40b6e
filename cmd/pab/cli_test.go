package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// runPab runs pab and returns stdout, stderr and the exit code.
func runPab(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := pabCmd(args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestReplayPortInUseKeepsLog: a replay that cannot listen fails with one line and leaves
// an existing log file as it was.
func TestReplayPortInUseKeepsLog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	logPath := filepath.Join(t.TempDir(), "old.jsonl")
	old := []byte(`{"method":"GET"}` + "\n")
	if err := os.WriteFile(logPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runPab(t, "replay", "books-sapiens-price", "--listen", ln.Addr().String(), "--log", logPath)
	if code != 1 || !strings.Contains(stderr, "address already in use") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line saying the address is in use", code, stderr)
	}
	if got, _ := os.ReadFile(logPath); !bytes.Equal(got, old) {
		t.Errorf("the old log was changed to %q", got)
	}
}

// TestReplayRepairsDamagedCache: an unpacked copy cut short in the cache is unpacked again.
// Only a format 2 recording is unpacked into the cache (format 3 is read in place), so the
// task's recording is packed as format 2 in a repository of its own.
func TestReplayRepairsDamagedCache(t *testing.T) {
	root := t.TempDir()
	copyTask(t, "books-sapiens-price", root)
	if err := os.CopyFS(filepath.Join(root, "sites"), os.DirFS(filepath.Join(repoRoot, "sites"))); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(root, "tasks", "books-sapiens-price", "recording")
	bundle := filepath.Join(t.TempDir(), "bundle")
	if err := recording.Unpack(rec, bundle); err != nil {
		t.Fatal(err)
	}
	if err := recording.PackFormat2(bundle, rec, recording.PartSize); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache") // of this repository alone
	t.Setenv("PAB_CACHE", cache)
	tgt, err := task.Resolve("books-sapiens-price", &task.Repo{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(tgt.BundleDir, recording.WARCFile), 1000); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := pabCmd("--repo", root, "replay", "books-sapiens-price", "--check")
	cmd.Env = append(cmd.Env, "PAB_CACHE="+cache) // the last value wins
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	stdout, stderr := out.String(), errOut.String()
	if code != 0 || !strings.Contains(stderr, "damaged") || !strings.Contains(stdout, "exact          30  100.0%") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestUserMistakes: each mistake gets one line on stderr starting "pab: ", exit 1.
func TestUserMistakes(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.warc.gz")
	if err := os.WriteFile(junk, []byte("this is not a WARC file at all\r\n\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "no-such-task"}, `no task "no-such-task"`},
		{[]string{"replay", "../etc"}, "not a bundle directory"},
		{[]string{"replay", "missing.warc"}, "no such file"},
		{[]string{"replay", junk}, "junk.warc.gz"},
		{[]string{"import", "--task", "../x", junk}, "task id"},
		{[]string{"import", "--task", "x", junk}, "junk.warc.gz"},
		{[]string{"inspect", "books-sapiens-price", "/relative"}, "not an absolute"},
		{[]string{"inspect", "books-sapiens-price", "http://x/", "--method", "BAD METHOD"}, "not an HTTP method"},
		{[]string{"stats", "no-such.jsonl"}, "no-such.jsonl"},
		{[]string{"stats", "../../README.md"}, "README.md"},
	} {
		_, stderr, code := runPab(t, tc.args...)
		msg := strings.TrimSpace(stderr)
		if code != 1 || !strings.HasPrefix(msg, "pab: ") || strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
			t.Errorf("pab %s: exit %d, stderr %q; want exit 1 and one line containing %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "tasks", "x")); err == nil {
		t.Errorf("a failed import left tasks/x behind")
	}
}

// TestOutputsNeverOverwritten: record --out refuses a non-empty directory before recording,
// and export refuses an existing file without --force.
func TestOutputsNeverOverwritten(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runPab(t, "record", "--task", "x", "--listen", "127.0.0.1:0", "--out", dir)
	if code != 1 || !strings.Contains(stderr, "is not empty") {
		t.Errorf("record --out non-empty: exit %d, %q", code, stderr)
	}
	_, stderr, code = runPab(t, "export", "books-sapiens-price", "--warc", keep)
	if code != 1 || !strings.Contains(stderr, "exists; pass --force") {
		t.Errorf("export over a file: exit %d, %q", code, stderr)
	}
	if got, _ := os.ReadFile(keep); string(got) != "mine" {
		t.Errorf("keep.txt changed to %q", got)
	}
}
