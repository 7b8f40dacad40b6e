//go:build !pab_lite

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
)

// writeRunHARs writes run.har in the directory of each run of a batch (pab run --har): the
// runs are out/TASK/REPEAT, as batch writes them. A run that cannot have one (no log, the
// task's recording unreadable) gets a warning; the batch's outcome does not change.
func writeRunHARs(cmd *cobra.Command, repo *task.Repo, out string, sum *batch.Summary) {
	errOut := cmd.ErrOrStderr()
	bundles := map[string]*recording.Bundle{}
	defer func() {
		for _, b := range bundles {
			if b != nil {
				b.Close()
			}
		}
	}()
	for _, r := range sum.Runs {
		dir := filepath.Join(out, r.Task, strconv.Itoa(r.Repeat))
		logPath := filepath.Join(dir, batch.FileLog)
		if _, err := os.Stat(logPath); err != nil {
			fmt.Fprintf(errOut, "pab run: warning: %s: no run.har: %v\n", dir, err)
			continue
		}
		b, ok := bundles[r.Task]
		if !ok {
			var err error
			if _, b, err = task.OpenBundle(r.Task, repo, errOut); err != nil {
				fmt.Fprintf(errOut, "pab run: warning: %s: no run.har: %v\n", dir, err)
			}
			bundles[r.Task] = b
		}
		if b == nil {
			continue
		}
		if _, err := replay.WriteRunHARFile(filepath.Join(dir, replay.RunHARFile), logPath, b, harVersion); err != nil {
			fmt.Fprintf(errOut, "pab run: warning: %s: no run.har: %v\n", dir, err)
		}
	}
}
