//go:build !pab_lite

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
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
				recDir, err := taskRecordingDir(repo, arg)
				if err == nil {
					err = migrateOne(repo, recDir, noWait, out, cmd.ErrOrStderr())
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

// migrateOne migrates the recording recDir of one task, holding the task's write lock.
func migrateOne(repo *task.Repo, recDir string, noWait bool, out, errOut io.Writer) error {
	taskDir := filepath.Dir(recDir)
	unlock, err := lockTask(repo, taskDir, "pab recording migrate", noWait, errOut)
	if err != nil {
		return err
	}
	defer unlock()
	work, err := taskWorkDir(repo, taskDir, "migrate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	from, dropped, err := warc.MigrateRecording(recDir, filepath.Join(work, "m"))
	if err != nil {
		return err
	}
	if from == warc.RecordingFormat {
		if len(dropped) > 0 {
			fmt.Fprintf(out, "%s: format %d; dropped the legacy manifest field %s\n", recDir, from, strings.Join(dropped, ", "))
			return nil
		}
		fmt.Fprintf(out, "%s: already format %d\n", recDir, from)
		return nil
	}
	fmt.Fprintf(out, "%s: migrated from format %d to format %d\n", recDir, from, warc.RecordingFormat)
	return nil
}

// taskRecordingDir is the recording directory of a task given by id or directory.
func taskRecordingDir(repo *task.Repo, arg string) (string, error) {
	if fi, err := os.Stat(filepath.Join(arg, task.CardFile)); err == nil && fi.Mode().IsRegular() {
		return filepath.Join(arg, "recording"), nil
	}
	t, err := repo.Task(arg)
	if err != nil {
		return "", err
	}
	return t.RecordingDir(), nil
}

// ruleLayer is one rule set the self-check replays with.
type ruleLayer struct {
	name string
	dirs []string // rule directories for rules.Load; none: the built-in defaults only
}

// selfCheck replays every recorded request of the bundle once through an in-process replay
// proxy on 127.0.0.1:0, once per rule layer, and prints one hit-rate line per layer.
func selfCheck(ctx context.Context, out io.Writer, repo *task.Repo, bundleDir string, layers []ruleLayer) error {
	b, err := warc.OpenBundle(bundleDir)
	if err != nil {
		return err
	}
	defer b.Close()
	ca, err := tlsca.LoadDefault()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "self-check: every recorded request replayed once (%d exchanges)\n", len(b.Entries))
	for _, l := range layers {
		rs, err := rules.Load(l.dirs...)
		if err != nil {
			return fmt.Errorf("self-check: %w", err)
		}
		rep, err := checkOnce(ctx, b, rs, ca, repo.Root)
		if err != nil {
			return fmt.Errorf("self-check (%s): %w", l.name, err)
		}
		c := rep.Counts.BySource
		fmt.Fprintf(out, "  %-22s hit rate %5.1f%%  (exact %d, search %d, promo %d, fuzzy %d, blocked %d, miss %d of %d requests)\n",
			l.name, 100*rep.HitRate(), c[replay.SourceExact], c[replay.SourceSearch], c[replay.SourcePromo], c[replay.SourceFuzzy],
			c[replay.SourceBlocked], c[replay.SourceMiss], rep.Counts.Total)
	}
	return nil
}

// checkOnce serves b with rs on a free loopback port and runs replay.Check against it.
func checkOnce(ctx context.Context, b *warc.Bundle, rs *rules.Set, ca *tlsca.CA, ruleRoot string) (*replay.CheckReport, error) {
	srv, err := replay.New(replay.Options{Bundle: b, Rules: rs, CA: ca, RuleRoot: ruleRoot})
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	ln, err = srv.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	rep, err := replay.Check(ctx, ln.Addr().String(), ca, b)
	srv.Close()
	<-served
	return rep, err
}
