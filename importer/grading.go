package importer

// grading.go: the task's grading.yaml checked against the recording just imported.

import (
	"fmt"
	"io"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// checkGradingSources checks the task's grading.yaml, when it has one, against the imported
// recording (as pab grade --check does). The recording stays imported either way; a
// grading that does not fit it is an error, so the author sees it now.
func checkGradingSources(t *task.Task, bundleDir string, out, errOut io.Writer) error {
	gr, name, _, err := grade.LoadTaskGrading(t, errOut)
	if err != nil {
		return fmt.Errorf("import: the recording was imported, but %w", err)
	}
	if gr == nil {
		return nil
	}
	b, err := recording.OpenBundle(bundleDir)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := grade.ReportSourceCheck(out, errOut, gr, name, b); err != nil {
		return fmt.Errorf("import: the recording was imported, but %w", err)
	}
	return nil
}
