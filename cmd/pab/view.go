//go:build !pab_lite

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/batch"
)

func newViewCmd(_ *globalFlags) *cobra.Command {
	var noOpen bool
	cmd := &cobra.Command{
		Use:   "view RUN_DIR",
		Short: "Print (and open, with a display) a run's step-by-step view.html",
		Long: `Print the path of RUN_DIR/view.html, the step-by-step view pab run writes for a run
with --browser --mcp or --guard (each browser tool call with its masked arguments, the
answer's excerpt, a screenshot of the page after it, the replay log lines of its time
window with their source and entry id, the guard's decisions, then the final answer and
each graded item). When DISPLAY or WAYLAND_DISPLAY is set it is also opened with
xdg-open (--no-open: only print). When RUN_DIR has steps.jsonl but no view.html (a run
graded before the view was written), it is written first. See docs/run.md "The run view".`,
		Example: `  pab view runs/20261206T040000Z/archive-org-jobs/1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if fi, err := os.Stat(dir); err != nil {
				return fmt.Errorf("view: %w", err)
			} else if !fi.IsDir() {
				return fmt.Errorf("view: %s is not a run directory", dir)
			}
			path := filepath.Join(dir, batch.FileView)
			if _, err := os.Stat(path); err != nil {
				if _, serr := os.Stat(filepath.Join(dir, batch.FileSteps)); serr != nil {
					return fmt.Errorf("view: %s: no such file, and no %s to make it from (a run records its steps with pab run --browser --mcp or --guard)", path, batch.FileSteps)
				}
				if err := batch.WriteView(dir, nil); err != nil {
					return fmt.Errorf("view: %w", err)
				}
			}
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), abs)
			if !noOpen && (os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "") {
				if x, err := exec.LookPath("xdg-open"); err == nil {
					c := exec.Command(x, abs)
					if err := c.Start(); err == nil {
						go c.Wait()
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "only print the path")
	return cmd
}
