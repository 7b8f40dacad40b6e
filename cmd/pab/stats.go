package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/replay"
)

func newStatsCmd(g *globalFlags) *cobra.Command {
	var top int
	cmd := &cobra.Command{
		Use:   "stats LOG.jsonl [TARGET]",
		Short: "Summarize a replay log: hit rates, top missed keys, spares",
		Long:  longHelp("stats"),
		Example: `  pab stats replay.jsonl
  pab stats replay.jsonl books-sapiens-price --top 20`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if top < 0 {
				return fmt.Errorf("stats: --top %d: want 0 or more", top)
			}
			if fi, err := os.Stat(args[0]); err != nil {
				return fmt.Errorf("stats: %w", err)
			} else if fi.IsDir() {
				return fmt.Errorf("stats: %s is a directory, not a replay log", args[0])
			}
			var idx *replay.Index
			if len(args) == 2 {
				s, err := openSession(g, args[1], cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer s.close()
				idx = s.index
			}
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			defer f.Close()
			// One pass over the log, line by line: memory does not grow with its length.
			st, err := replay.SummarizeLog(f, args[0], idx)
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			if st.Total == 0 && st.Unreadable > 0 {
				return fmt.Errorf("stats: no line of %s could be read (%s): is it a log pab replay --log wrote?", args[0], st.FirstUnreadable)
			}
			st.Print(cmd.OutOrStdout(), top)
			return nil
		},
	}
	cmd.Flags().IntVar(&top, "top", 10, "how many missed keys and spares to list")
	return cmd
}
