package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

func newTasksCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "tasks",
		Short: "List the tasks of the repository",
		Long: `List the tasks of the repository, one a line: id, title, number of recorded
exchanges, size of the published recording, and whether the task has grading.yaml.
A task whose folder, recording/, rules/ or a file in them is a symbolic link leading outside
the repository is listed as refused, with the reason on stderr, and the exit status is 1:
no pab command reads or writes through such a link.`,
		Example: `  pab tasks
  pab tasks --repo ~/src/my-benchmark`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			if st, err := os.Stat(repo.TasksDir()); err != nil || !st.IsDir() {
				return fmt.Errorf("tasks: no tasks/ directory in %s (give the task repository with --repo or $PAB_REPO)", repo.Root)
			}
			ids, err := repo.TaskIDs()
			if err != nil {
				return err
			}
			var broken []string
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTITLE\tEXCHANGES\tRECORDING\tGRADING")
			for _, id := range ids {
				t, err := repo.Task(id)
				if err != nil {
					// a task leading outside the repository is listed as refused, never hidden
					why := "(refused: a link that cannot be followed)"
					if task.IsOutside(err) {
						why = "(refused: outside the repository)"
					}
					fmt.Fprintf(w, "%s\t%s\t-\t-\t-\n", id, why)
					broken = append(broken, err.Error())
					continue
				}
				card, err := t.Card()
				if err != nil {
					fmt.Fprintf(w, "%s\t(task.yaml unreadable)\t-\t-\t-\n", id)
					broken = append(broken, err.Error())
					continue
				}
				for _, w := range card.Warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), w)
				}
				exchanges, size := "-", "-"
				if files, err := recording.RecordingFiles(t.RecordingDir()); err == nil && len(files) > 0 {
					var n int64
					for _, f := range files {
						if st, err := statSize(f); err == nil {
							n += st
						}
					}
					size = humanBytes(n)
					if c, err := recording.CountRecordingEntries(t.RecordingDir()); err == nil {
						exchanges = fmt.Sprint(c)
					} else {
						exchanges = "unreadable"
						broken = append(broken, err.Error())
					}
				}
				grading := "no"
				if t.HasGrading() {
					grading = "yes"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", id, card.Title, exchanges, size, grading)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for _, b := range broken {
				fmt.Fprintln(cmd.ErrOrStderr(), "pab tasks:", b)
			}
			if len(broken) > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("%s problems (above)", words.Count(len(broken), "task")+map[bool]string{true: " has", false: " have"}[len(broken) == 1])}
			}
			return nil
		},
	}
}
