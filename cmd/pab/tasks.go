package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/warc"
)

func newTasksCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "tasks",
		Short: "List the tasks of the repository",
		Long: `List the tasks of the repository, one a line: id, title, number of recorded
exchanges, size of the published recording, and whether the task has grading.yaml.`,
		Example: `  pab tasks
  pab tasks --repo ~/src/my-benchmark`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			ids, err := repo.TaskIDs()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTITLE\tEXCHANGES\tRECORDING\tGRADING")
			for _, id := range ids {
				t, err := repo.Task(id)
				if err != nil {
					return err
				}
				card, err := t.Card()
				if err != nil {
					return err
				}
				exchanges, size := "-", "-"
				if files, err := warc.RecordingFiles(t.RecordingDir()); err == nil && len(files) > 0 {
					var n int64
					for _, f := range files {
						if st, err := statSize(f); err == nil {
							n += st
						}
					}
					size = humanBytes(n)
					if c, err := warc.CountRecordingEntries(t.RecordingDir()); err == nil {
						exchanges = fmt.Sprint(c)
					}
				}
				grading := "no"
				if t.HasGrading() {
					grading = "yes"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", id, card.Title, exchanges, size, grading)
			}
			return w.Flush()
		},
	}
}
