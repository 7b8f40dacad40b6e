//go:build !pab_lite

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/importer"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

func newImportCmd(g *globalFlags) *cobra.Command {
	var (
		id        string
		replace   bool
		preferNew bool
		noCheck   bool
		checkAll  bool
		noWait    bool
		title     string
		locale    string
		timezone  string
	)
	cmd := &cobra.Command{
		Use:   "import --task ID (FILE.warc[.gz]|FILE.wacz... | BUNDLE-DIR | RECORDING-DIR)",
		Short: withFormat("Turn WARC files or a bundle into a task's recording (tasks/ID/recording, format {{format}})"),
		Long:  longHelp("import"),
		Example: `  pab import --task my-books testdata/sites/books.toscrape.warc
  pab import --task my-task --replace crawl-00000.warc.gz crawl-00001.warc.gz
  pab import --task my-task ./recorded-bundle
  pab import --task my-task --prefer-new ./second-visit`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				return fmt.Errorf("import: --task ID is required")
			}
			if replace && preferNew {
				return fmt.Errorf("import: --replace and --prefer-new exclude each other")
			}
			if err := checkLocaleFlags("import", locale, timezone); err != nil {
				return err
			}
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(importMemoryLimit)
				if os.Getenv("GOGC") == "" {
					debug.SetGCPercent(importGCPercent)
				}
			}
			_, err = importer.Run(cmd.Context(), importOptions(cmd, repo, id, importer.Options{Inputs: args, Replace: replace,
				PreferNew: preferNew, NoCheck: noCheck, CheckAll: checkAll, NoWait: noWait, Title: title, Locale: locale, Timezone: timezone}))
			if errors.Is(err, context.Canceled) { // Ctrl-C, at any step: 130 as for SIGINT
				return exitError{code: 130, msg: err.Error()}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&id, "task", "", "task id: the recording goes to tasks/ID/recording (required)")
	cmd.Flags().BoolVar(&replace, "replace", false, "drop the task's existing recording instead of merging with it")
	cmd.Flags().BoolVar(&preferNew, "prefer-new", false, "merge, but let the new copies of requests recorded again replace the existing ones")
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "skip the replay self-check after the import")
	cmd.Flags().BoolVar(&checkAll, "check-all", false, "let the self-check replay every recorded page and exchange, not a sample of at most 1,000 of each")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once, instead of waiting, when another pab is writing the task")
	cmd.Flags().StringVar(&title, "title", "", "title for a new task.yaml (default: the first page's title); an existing task.yaml is never changed")
	cmd.Flags().StringVar(&locale, "locale", "", "the browser language of the capture, a BCP 47 tag (en-US): written to the manifest and task.yaml's capture (default: what the recording's manifest says)")
	cmd.Flags().StringVar(&timezone, "timezone", "", "the time zone of the capture, an IANA name (America/New_York): written to the manifest and task.yaml's capture (default: what the recording's manifest says)")
	return cmd
}

// importMemoryLimit is the Go runtime's soft memory limit (runtime/debug.SetMemoryLimit)
// for pab import, unless GOMEMLIMIT says otherwise: near it the collector runs more often,
// so that the import's resident memory stays near what it holds live (docs/import.md
// "Limits and memory"). It is not a cap: an import that holds more goes past it. 352 MiB,
// not 384: with the input inflated ahead of the parsing, the reading allocates faster and
// the collector overshoots more (10^6 small records: 466-476 MiB peak at 384, 437 at 352,
// docs/performance.md "Import time, fifth part").
const importMemoryLimit = 352 << 20

// importGCPercent is the collector's GOGC for pab import under importMemoryLimit, unless
// GOGC or GOMEMLIMIT is set: the import's live heap is small and made of short-lived
// records, so the default 100 collects it far more often than the memory limit needs (at
// 10^5 records a third of the import's CPU went to the collector); the limit still bounds
// the heap.
const importGCPercent = 400

// checkLocaleFlags checks --locale and --timezone of command cmd (when given): a BCP 47
// tag and an IANA zone time.LoadLocation loads.
func checkLocaleFlags(cmd, locale, timezone string) error {
	if locale != "" {
		if err := recording.CheckLocale(locale); err != nil {
			return fmt.Errorf("%s: --locale: %w", cmd, err)
		}
	}
	if timezone != "" {
		if err := recording.CheckTimezone(timezone); err != nil {
			return fmt.Errorf("%s: --timezone: %w", cmd, err)
		}
	}
	return nil
}

// importOptions completes o, the flags of pab import (or of pab record's import), with
// what every import of command cmd gets: the repository, the task, the command's name in
// lock messages, the flags its errors name, Ctrl-C and SIGTERM stopping it, and its output
// writers.
func importOptions(cmd *cobra.Command, repo *task.Repo, id string, o importer.Options) importer.Options {
	o.Repo, o.TaskID, o.Command = repo, id, "pab "+cmd.Name()
	o.FlagNames = map[string]string{"NoWait": "--no-wait", "Replace": "--replace"}
	o.Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}
	o.Out, o.ErrOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
	return o
}
