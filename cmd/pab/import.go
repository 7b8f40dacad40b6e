//go:build !pab_lite

package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/importer"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/warc"
)

func newImportCmd(g *globalFlags) *cobra.Command {
	var (
		id        string
		replace   bool
		preferNew bool
		noCheck   bool
		noWait    bool
		title     string
		locale    string
		timezone  string
	)
	cmd := &cobra.Command{
		Use:   "import --task ID (FILE.warc[.gz]|FILE.wacz... | BUNDLE-DIR | RECORDING-DIR)",
		Short: "Turn WARC files or a bundle into a task's recording (tasks/ID/recording, format 2)",
		Long: `Import into tasks/ID/recording, in pab's published layout (format 2, see
docs/bundle-format.md), one of:
  - WARC or WACZ files written by any archiving tool (wget, warcprox, Browsertrix,
    pywb, Webrecorder, Heritrix, pab export);
  - a bundle directory (manifest.json, archive/data.warc, indexes/, pages/), such as
    'pab record --out DIR' writes;
  - a published recording directory (another task's recording/).
A bundle or recording is audited first (see 'pab audit') and refused, with every
problem listed, when the audit fails.

From WARC files, response bodies are stored decoded, identical payloads of 1 KB or
more once, requests lose Cookie and Authorization, and every Set-Cookie value
becomes REDACTED (docs/import.md).

When the task already has a recording, the two are merged: every exchange of both
is kept, the recording captured first before the other, so a request recorded both
times is answered from the earlier copy and a "latest" page from the newer one.
--prefer-new drops the existing exchanges recorded again (same method, URL and
request body), so the new copies answer them; --replace drops the existing
recording entirely.

Afterwards rules are inferred from the recording and written to
tasks/ID/rules/<site>.auto.yaml (hand-written rule files are never touched), and
every recorded request is replayed once offline to print hit rates with the generic
rules only, with the inferred rules, and with all the rules in effect.

Nothing is written unless the whole import succeeds: the new recording is packed
beside the old one, audited as 'pab audit' would, and only then renamed into
place. A task.yaml with a title is created when the task has none.

Writers of one task take turns: an import waits while another pab writes the
task (an import, the end of a recording, a migration), saying so on stderr, and
then merges with the recording that one left; --no-wait fails at once instead.`,
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
			_, err = importer.Run(cmd.Context(), importOptions(cmd, repo, id, importer.Options{Inputs: args, Replace: replace,
				PreferNew: preferNew, NoCheck: noCheck, NoWait: noWait, Title: title, Locale: locale, Timezone: timezone}))
			return err
		},
	}
	cmd.Flags().StringVar(&id, "task", "", "task id: the recording goes to tasks/ID/recording (required)")
	cmd.Flags().BoolVar(&replace, "replace", false, "drop the task's existing recording instead of merging with it")
	cmd.Flags().BoolVar(&preferNew, "prefer-new", false, "merge, but let the new copies of requests recorded again replace the existing ones")
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "skip the replay self-check after the import")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once, instead of waiting, when another pab is writing the task")
	cmd.Flags().StringVar(&title, "title", "", "title for a new task.yaml (default: the first page's title); an existing task.yaml is never changed")
	cmd.Flags().StringVar(&locale, "locale", "", "the browser language of the capture, a BCP 47 tag (en-US): written to the manifest and task.yaml's capture (default: what the recording's manifest says)")
	cmd.Flags().StringVar(&timezone, "timezone", "", "the time zone of the capture, an IANA name (America/New_York): written to the manifest and task.yaml's capture (default: what the recording's manifest says)")
	return cmd
}

// checkLocaleFlags checks --locale and --timezone of command cmd (when given): a BCP 47
// tag and an IANA zone time.LoadLocation loads.
func checkLocaleFlags(cmd, locale, timezone string) error {
	if locale != "" {
		if err := warc.CheckLocale(locale); err != nil {
			return fmt.Errorf("%s: --locale: %w", cmd, err)
		}
	}
	if timezone != "" {
		if err := warc.CheckTimezone(timezone); err != nil {
			return fmt.Errorf("%s: --timezone: %w", cmd, err)
		}
	}
	return nil
}

// importOptions completes o, the flags of pab import (or of pab record's import), with
// what every import of command cmd gets: the repository, the task, the command's name in
// lock messages, Ctrl-C and SIGTERM stopping it, its output writers, and the grading check
// of the task's grading.yaml.
func importOptions(cmd *cobra.Command, repo *task.Repo, id string, o importer.Options) importer.Options {
	o.Repo, o.TaskID, o.Command = repo, id, "pab "+cmd.Name()
	o.Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}
	o.Out, o.ErrOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
	o.GradingCheck = func(t *task.Task, bundleDir string) error {
		return checkGradingSources(t, bundleDir, o.Out, o.ErrOut)
	}
	return o
}

// checkGradingSources checks the task's grading.yaml, when it has one, against the imported
// recording (as pab grade --check does). The recording stays imported either way; a
// grading that does not fit it is an error, so the author sees it now.
func checkGradingSources(t *task.Task, bundleDir string, out, errOut io.Writer) error {
	gr, name, err := gradingOf(t, errOut)
	if err != nil {
		return fmt.Errorf("import: the recording was imported, but %w", err)
	}
	if gr == nil {
		return nil
	}
	b, err := warc.OpenBundle(bundleDir)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := reportSourceCheck(out, errOut, gr, name, b); err != nil {
		return fmt.Errorf("import: the recording was imported, but %w", err)
	}
	return nil
}
