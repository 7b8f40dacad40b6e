package audit_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/importer"
	"github.com/pab-dev/pab/importer/audit"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// TestAudit: a task imported from warcio's example.warc.gz passes the audit, by id, by
// task directory and by recording directory; the same recording with its data file cut
// short does not; an argument that is no task, recording or bundle is an error naming it.
func TestAudit(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sites"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PAB_CACHE", filepath.Join(root, ".cache"))
	t.Setenv("PAB_CA_DIR", filepath.Join(t.TempDir(), "ca"))
	repo := &task.Repo{Root: root}
	if _, err := importer.Run(context.Background(), importer.Options{Repo: repo, TaskID: "example",
		Inputs: []string{"../testdata/example.warc.gz"}, NoCheck: true, Command: "pab import"}); err != nil {
		t.Fatal(err)
	}
	taskDir := filepath.Join(repo.TasksDir(), "example")
	recDir := filepath.Join(taskDir, "recording")
	for _, arg := range []string{"example", taskDir, recDir} {
		target, probs, err := audit.Audit(repo, arg)
		if err != nil || len(probs) > 0 || target != recDir {
			t.Errorf("audit %s: target %s, problems %v, %v", arg, target, probs, err)
		}
	}
	data := filepath.Join(recDir, recording.RecordingDataFile)
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(data, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	if _, probs, err := audit.Audit(repo, "example"); err != nil || len(probs) == 0 {
		t.Errorf("audit of a cut recording: problems %v, %v", probs, err)
	}
	_, _, err = audit.Audit(repo, "nope")
	if err == nil || !strings.HasPrefix(err.Error(), "audit: nope is not a task id, a task directory, a recording or a bundle directory") {
		t.Errorf("audit nope: %v", err)
	}
}

// TestAuditSavedIndex: pab audit reads the task's saved index whole when there is one of
// the current key: a good one is no problem; one cut short by a byte is a problem naming
// the file, and is removed, so the next start computes it again.
func TestAuditSavedIndex(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sites"), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, ".cache")
	t.Setenv("PAB_CACHE", cache)
	t.Setenv("PAB_CA_DIR", filepath.Join(t.TempDir(), "ca"))
	repo := &task.Repo{Root: root}
	if _, err := importer.Run(context.Background(), importer.Options{Repo: repo, TaskID: "example",
		Inputs: []string{"../testdata/example.warc.gz"}, NoCheck: true, Command: "pab import"}); err != nil {
		t.Fatal(err)
	}
	// the import's files are new: wait until a saved index is allowed (racy files get none)
	var idx string
	for deadline := time.Now().Add(2 * time.Minute); idx == "" && time.Now().Before(deadline); {
		o, err := task.Open("example", repo, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		o.Index.WaitSaved()
		o.Bundle.Close()
		if m, _ := filepath.Glob(filepath.Join(cache, "indexes", "*.idx")); len(m) == 1 {
			idx = m[0]
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if idx == "" {
		t.Fatal("no saved index was written")
	}
	if _, probs, err := audit.Audit(repo, "example"); err != nil || len(probs) > 0 {
		t.Fatalf("audit with a good saved index: %v, %v", probs, err)
	}
	fi, err := os.Stat(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(idx, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	_, probs, err := audit.Audit(repo, "example")
	if err != nil || len(probs) != 1 || probs[0].File != idx || !strings.Contains(probs[0].Msg, "the saved index is damaged") {
		t.Fatalf("audit with a cut saved index: %v, %v", probs, err)
	}
	if _, err := os.Stat(idx); !os.IsNotExist(err) {
		t.Errorf("the damaged saved index was not removed: %v", err)
	}
}
