//go:build !pab_lite

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/importer"
	"github.com/pab-dev/pab/warc"
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
		Long: fmt.Sprintf(`Rewrite the recording of each TASK (a task id or a task directory) into the
current published layout, format %d (docs/bundle-format.md). The only older layout
is format 1: one bundle.tar.gz (or its parts bundle.tar.gz.000, .001, ...) holding
manifest.json, archive/data.warc, indexes/entries.jsonl and pages/pages.jsonl.

The tar may hold only those four regular files, and the indexes/index.cdxj and
datapackage.json that older bundles carried (skipped: pab builds its own indexes);
anything else (another path, a link, a file twice) is refused and the recording is
left as it was. The archive is kept byte for byte; the legacy manifest field
start_url is dropped. The new recording replaces the old one only once it is
complete. A recording already in format %d is left untouched, except that a legacy
start_url is removed from its manifest.json (every other byte kept). Run 'pab audit
TASK' afterwards.

Each task is migrated holding its write lock: when another pab writes the task
(an import, the end of a recording), migrate waits for it, or with --no-wait
fails for that task at once.`, warc.RecordingFormat, warc.RecordingFormat),
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
					err = importer.Migrate(repo, recDir, noWait, out, cmd.ErrOrStderr())
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
