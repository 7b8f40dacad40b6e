package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
)

func newExportCmd(g *globalFlags) *cobra.Command {
	var (
		warcPath, waczPath, harPath, logPath string
		force                                bool
	)
	cmd := &cobra.Command{
		Use:   "export TARGET (--warc FILE.warc[.gz] | --wacz FILE.wacz | --har FILE.har)",
		Short: "Write a recording as a standard WARC, WACZ or HAR file for other tools",
		Long:  longHelp("export"),
		Example: `  pab export books-sapiens-price --warc books.warc.gz
  pab export tasks/archive-org-jobs --wacz archive-org-jobs.wacz
  pab import --task copy-of-jobs archive-org-jobs.wacz
  pab export books-sapiens-price --har books.har
  pab export books-sapiens-price --har run.har --log runs/1/replay.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, p := range []string{warcPath, waczPath, harPath} {
				if p != "" {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("export: give exactly one of --warc FILE, --wacz FILE and --har FILE")
			}
			if logPath != "" && harPath == "" {
				return fmt.Errorf("export: --log goes with --har (a run's HAR)")
			}
			out := warcPath
			if harPath != "" {
				out = harPath
			} else if out == "" {
				out = waczPath
				if !strings.HasSuffix(strings.ToLower(out), ".wacz") {
					return fmt.Errorf("export: --wacz %s: a WACZ file name must end in .wacz", out)
				}
			}
			if st, err := os.Stat(out); err == nil {
				if !st.Mode().IsRegular() {
					return fmt.Errorf("export: %s exists and is not a regular file", out)
				}
				if !force {
					return fmt.Errorf("export: %s exists; pass --force to overwrite it", out)
				}
			}
			if lower := strings.ToLower(out); warcPath != "" && !strings.HasSuffix(lower, ".warc") && !strings.HasSuffix(lower, ".warc.gz") {
				return fmt.Errorf("export: --warc %s: a WARC file name must end in .warc or .warc.gz", out)
			}
			b, name, err := openBundleTarget(g, args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer b.Close()
			switch {
			case warcPath != "":
				err = recording.ExportWARCFile(b, out)
			case harPath != "" && logPath != "":
				_, err = replay.WriteRunHARFile(out, logPath, b, harVersion)
			case harPath != "":
				err = recording.ExportHARFile(b, out, harVersion)
			default:
				err = recording.ExportWACZ(b, out)
			}
			if err != nil {
				return err
			}
			size, err := statSize(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported %s (%s, %s) to %s (%s)\n",
				name, words.Count(b.Len(), "exchange"), words.Count(len(pagesOf(b)), "page"), out, humanBytes(size))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite the output file when it exists")
	cmd.Flags().StringVar(&warcPath, "warc", "", "write a WARC 1.1 file (gzip per record when the name ends in .gz)")
	cmd.Flags().StringVar(&waczPath, "wacz", "", "write a WACZ 1.1.1 file (name ending in .wacz)")
	cmd.Flags().StringVar(&logPath, "log", "", "with --har: write the run of this replay log instead (pab replay --log): each request with the recorded answer it got")
	cmd.Flags().StringVar(&harPath, "har", "", "write a HAR 1.2 file (Chrome DevTools, Playwright's routeFromHAR and pab import read it)")
	return cmd
}

// openBundleTarget resolves arg as 'pab replay' does and opens its bundle, without rules
// (task.OpenBundle, notes on errOut). It returns the bundle and the target's name.
func openBundleTarget(g *globalFlags, arg string, errOut io.Writer) (*recording.Bundle, string, error) {
	repo, err := g.findRepo()
	if err != nil {
		return nil, "", err
	}
	tgt, b, err := task.OpenBundle(arg, repo, errOut)
	if err != nil {
		return nil, "", err
	}
	return b, tgt.Name, nil
}

// pagesOf is the bundle's pages (recording.Bundle.AllPages), nil when they cannot be read.
func pagesOf(b *recording.Bundle) []recording.Page {
	pages, _ := b.AllPages()
	return pages
}
