//go:build !pab_lite

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/importer"
)

func newRecordingCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recording",
		Short: "Maintain tasks' published recordings",
		Example: `  pab recording migrate books-sapiens-price   # rewrite one task's recording in the current format
  pab recording migrate tasks/*               # every task of the repository`,
	}
	cmd.AddCommand(newMigrateCmd(g))
	return cmd
}

func newMigrateCmd(g *globalFlags) *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:   "migrate TASK...",
		Short: "Rewrite tasks' recordings from an older format into the current one",
		Long:  longHelp("recording-migrate"),
		Example: `  pab recording migrate books-sapiens-price
  pab recording migrate tasks/*`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			failed := 0
			for _, arg := range args {
				recDir, err := importer.TaskRecordingDir(repo, arg)
				if err == nil {
					err = importer.Migrate(repo, recDir, noWait, "--no-wait", out, cmd.ErrOrStderr())
				}
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "pab:", err)
					failed++
				}
			}
			if failed > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("recording migrate: %d of %d tasks failed", failed, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once for a task another pab is writing, instead of waiting")
	return cmd
}
