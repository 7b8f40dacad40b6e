//go:build !pab_lite

package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/batch"
)

func newCompareCmd(_ *globalFlags) *cobra.Command {
	var format string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compare BATCH...",
		Short: "One table across batches: pass rate ± standard error, pass@k, statuses, steps, time, cost and provenance per agent and task",
		Long:  longHelp("compare"),
		Example: `  pab compare runs/claude runs/codex
  pab compare --format markdown runs/* > compare.md
  pab compare --json runs/a runs/b | jq '.rows[] | select(.provenance_differs)'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && cmd.Flags().Changed("format") && format != "json" {
				return fmt.Errorf("compare: --json and --format %s: give one", format)
			}
			if asJSON {
				format = "json"
			}
			switch format {
			case "text", "markdown", "html", "json":
			default:
				return fmt.Errorf("compare: --format %q: want text, markdown, html or json", format)
			}
			c, err := batch.Compare(args)
			if err != nil {
				return fmt.Errorf("compare: %w", err)
			}
			w := cmd.OutOrStdout()
			switch format {
			case "markdown":
				return c.WriteMarkdown(w)
			case "html":
				return c.WriteHTML(w)
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(c)
			}
			if err := c.WriteText(w); err != nil {
				return err
			}
			for _, wn := range c.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "pab compare: warning:", wn)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output: text (an aligned table), markdown, html or json")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the same as --format json: one object per agent label, task and provenance")
	return cmd
}
