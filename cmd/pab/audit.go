package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/importer/audit"
	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

func newAuditCmd(g *globalFlags) *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "audit TARGET",
		Short: "Check a recording for leaked credentials and damage before it is shared",
		Long:  longHelp("audit"),
		Example: `  pab audit books-sapiens-price
  pab audit ./recorded-bundle
  pab audit --strict crawl.warc.gz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg := args[0]
			var probs, warns []recording.Problem
			target := arg
			var err error
			// a line on stderr every few seconds once it takes longer than 2 s
			meter := progress.Start(cmd.ErrOrStderr(), "pab audit: auditing "+arg, progress.Totals{Bytes: progress.Size(arg)}, 0, 0)
			if pathx.IsRegularFile(arg) {
				probs, warns = recording.AuditWARCFile(arg, strict)
			} else {
				var repo *task.Repo
				if repo, err = g.findRepo(); err != nil {
					meter.Stop()
					return err
				}
				target, probs, err = audit.Audit(repo, arg)
			}
			meter.Stop()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, w := range warns {
				fmt.Fprintf(out, "warning: %s\n", w)
			}
			for _, p := range probs {
				fmt.Fprintln(out, p)
			}
			if len(probs) > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("audit: %d problems in %s", len(probs), target)}
			}
			fmt.Fprintf(out, "%s: no problems\n", target)
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "for a WARC file: a wrong WARC Content-Length is a problem (exit status 1), not a warning")
	return cmd
}
