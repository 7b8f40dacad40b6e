package audit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
