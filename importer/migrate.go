package importer

// migrate.go: pab recording migrate's work on one task.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// Migrate rewrites the recording recDir (tasks/ID/recording) of one task of repo into the
// current format (recording.MigrateRecording), holding the task's write lock (noWait: fail at
// once when another process holds it, naming the option as noWaitName says, see
// task.Repo.LockTask; waiting is said on errOut), and says on out what it did: migrated,
// already current, or legacy manifest fields dropped.
func Migrate(repo *task.Repo, recDir string, noWait bool, noWaitName string, out, errOut io.Writer) error {
	taskDir := filepath.Dir(recDir)
	unlock, err := repo.LockTask(taskDir, "pab recording migrate", noWaitName, noWait, errOut)
	if err != nil {
		return err
	}
	defer unlock()
	work, err := repo.WorkDir(taskDir, "migrate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	from, dropped, err := recording.MigrateRecording(recDir, filepath.Join(work, "m"))
	if err != nil {
		return err
	}
	if from == recording.RecordingFormat {
		if len(dropped) > 0 {
			fmt.Fprintf(out, "%s: format %d; dropped the legacy manifest field %s\n", recDir, from, strings.Join(dropped, ", "))
			return nil
		}
		fmt.Fprintf(out, "%s: already format %d\n", recDir, from)
		return nil
	}
	fmt.Fprintf(out, "%s: migrated from format %d to format %d\n", recDir, from, recording.RecordingFormat)
	return nil
}

// TaskRecordingDir is the recording directory of a task given by id or by directory (one
// holding task.yaml). An unknown id is repo.Task's error; a task with a link leading outside
// the repository is refused (task.Repo.CheckArg, repo.Task).
func TaskRecordingDir(repo *task.Repo, arg string) (string, error) {
	if fi, err := os.Stat(filepath.Join(arg, task.CardFile)); err == nil && fi.Mode().IsRegular() {
		if err := repo.CheckArg(arg); err != nil { // never written through a link out
			return "", err
		}
		return filepath.Join(arg, "recording"), nil
	}
	t, err := repo.Task(arg)
	if err != nil {
		return "", err
	}
	return t.RecordingDir(), nil
}
