package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/warc"
)

func newImportCmd(g *globalFlags) *cobra.Command {
	var (
		id      string
		replace bool
		title   string
	)
	cmd := &cobra.Command{
		Use:   "import --task ID FILE.warc[.gz]...",
		Short: "Turn WARC files into a task's recording (tasks/ID/recording, format 2)",
		Long: `Import WARC files written by any archiving tool (wget, warcprox, Browsertrix,
pywb, Webrecorder, Heritrix) into tasks/ID/recording in pab's published layout
(format 2, see docs/bundle-format.md).

Response bodies are stored decoded (chunked, gzip, deflate, br removed; the original
encoding is kept in the WARC header RR-Original-Content-Encoding), identical payloads
of 1 KB or more are stored once as revisit records, requests lose Cookie and
Authorization, and every Set-Cookie value becomes REDACTED. Revisit records of the
input are resolved to their original; one whose original is absent is kept and
replayed as a miss. A task.yaml with a title is created when the task has none.

Nothing is written unless the whole import succeeds.`,
		Example: `  pab import --task my-books testdata/sites/books.toscrape.warc
  pab import --task my-task --replace crawl-00000.warc.gz crawl-00001.warc.gz`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				return fmt.Errorf("import: --task ID is required")
			}
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			if err := task.ValidID(id); err != nil {
				return err
			}
			taskDir := filepath.Join(repo.TasksDir(), id)
			recDir := filepath.Join(taskDir, "recording")
			if _, err := os.Stat(filepath.Join(recDir, warc.ManifestFile)); err == nil && !replace {
				return fmt.Errorf("import: %s already holds a recording; pass --replace to overwrite it", recDir)
			}
			for _, p := range args {
				st, err := os.Stat(p)
				if err != nil {
					return fmt.Errorf("import: %w", err)
				}
				if !st.Mode().IsRegular() {
					return fmt.Errorf("import: %s is not a regular file", p)
				}
			}
			// Ctrl-C stops the import between records; what was begun is removed.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := os.MkdirAll(repo.CacheDir(), 0o755); err != nil {
				return err
			}
			work, err := os.MkdirTemp(repo.CacheDir(), "import-"+id+"-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			bundle := filepath.Join(work, "bundle")
			errOut := cmd.ErrOrStderr()
			rep, err := warc.ImportWARCs(args, bundle, warc.ImportOptions{TaskID: id, Context: ctx})
			if err != nil {
				return err
			}
			_, statErr := os.Stat(taskDir)
			newTask := os.IsNotExist(statErr)
			if err := os.MkdirAll(taskDir, 0o755); err != nil {
				return err
			}
			if err := warc.Pack(bundle, recDir); err != nil {
				if newTask {
					os.RemoveAll(taskDir)
				}
				return err
			}
			if title == "" {
				title = rep.Title
			}
			if err := task.WriteCardIfMissing(taskDir, id, title); err != nil {
				return err
			}
			for _, w := range rep.Warnings {
				fmt.Fprintln(errOut, "pab import: warning:", w)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "imported %s into %s\n", joinArgs(args), recDir)
			fmt.Fprint(out, rep.Summary())
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "task", "", "task id: the recording goes to tasks/ID/recording (required)")
	cmd.Flags().BoolVar(&replace, "replace", false, "overwrite an existing recording of the task")
	cmd.Flags().StringVar(&title, "title", "", "title for a new task.yaml (default: the first page's title); an existing task.yaml is never changed")
	return cmd
}
