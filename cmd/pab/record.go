//go:build !pab_lite

package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/importer"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/record"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
)

func newRecordCmd(g *globalFlags) *cobra.Command {
	var (
		id, listen, out, upstreamCA string
		locale, timezone            string
		redact, resolve             []string
		finish, http2On, debug      bool
	)
	cmd := &cobra.Command{
		Use:   "record --task ID",
		Short: "Record a task: a proxy that forwards to the real sites and keeps every exchange",
		Long:  longHelp("record"),
		Example: `  pab record --task my-shop
  pab record --task my-shop --out /tmp/shop-bundle --redact 'jane@example.com' --redact 're:\d{3}-\d{2}-\d{4}'
  pab record --task staging --resolve shop.test:443:127.0.0.1:8443 --upstream-ca staging-ca.pem
  # then browse through it (` + browser.NoSandboxNote + `):
  ` + chromiumLine("https://books.toscrape.com/"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				return errors.New("record: --task ID is required")
			}
			if err := task.ValidID(id); err != nil {
				return err
			}
			if err := checkLocaleFlags("record", locale, timezone); err != nil {
				return err
			}
			capture := record.Capture{Locale: locale, Timezone: timezone, TZFrom: "--timezone"}
			if capture.Timezone == "" {
				capture.Timezone, capture.TZFrom = record.MachineTimezone()
			}
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			taskDir, err := repo.TaskDir(id) // refused before recording when it leads outside
			if err != nil {
				return fmt.Errorf("record: %w", err)
			}
			work := filepath.Join(repo.CacheDir(), "record", id)
			if out != "" {
				if out, err = filepath.Abs(out); err != nil {
					return err
				}
				work = out + ".record"
				// checked now, not after a whole browsing session; an existing
				// directory is never replaced
				if err := record.CheckOutDir(out); err != nil {
					return fmt.Errorf("record: --out %w", err)
				}
			}
			ro := record.Options{WorkDir: work, DisableHTTP2: !http2On, RuleRoot: repo.Root}
			if ro.Redact, err = record.NewRedactor(redact); err != nil {
				return err
			}
			if ro.Resolve, err = record.ParseResolves(resolve); err != nil {
				return err
			}
			if upstreamCA != "" {
				if ro.RootCAs, err = record.LoadRoots(upstreamCA); err != nil {
					return err
				}
			}
			noWait, _ := cmd.Flags().GetBool("no-wait")
			finishing := importer.FinishOptions{WorkDir: work, OutDir: out, Capture: capture,
				Import: importOptions(cmd, repo, id, importer.Options{NoWait: noWait})}
			if finish {
				rep, err := record.Recover(record.JournalPath(work))
				if err != nil {
					return err
				}
				if rep.Cut > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "pab record: journal cut after its last whole exchange (%d bytes removed)\n", rep.Cut)
				}
				return importer.FinishRecording(cmd.Context(), finishing)
			}
			if ro.CA, err = tlsca.LoadDefault(); err != nil {
				return err
			}
			// exclude applies while recording (docs/rules.md): the rules a replay of the
			// task would use, read once now; a broken rule file stops before recording
			if ro.Rules, err = rules.Load(repo.SitesDir(), filepath.Join(taskDir, "rules")); err != nil {
				return fmt.Errorf("record: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := record.Session(ctx, record.SessionOptions{Recorder: ro, TaskID: id, Listen: listen, Capture: capture,
				Debug: debug, Log: cmd.ErrOrStderr(), Stopping: stop}); err != nil {
				return err
			}
			return importer.FinishRecording(cmd.Context(), finishing)
		},
	}
	cmd.Flags().StringVar(&id, "task", "", "task id (required)")
	cmd.Flags().StringVar(&listen, "listen", replay.DefaultListen, "address the proxy listens on (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&out, "out", "", "write the bundle to this directory only (its journal goes to DIR.record)")
	cmd.Flags().StringArrayVar(&redact, "redact", nil, "replace this value, or regular expression written re:EXPR, by REDACTED in what is stored (repeatable)")
	cmd.Flags().StringArrayVar(&resolve, "resolve", nil, "HOST:PORT:ADDR[:PORT2] connect to ADDR (port PORT, or PORT2) for HOST:PORT, as curl's --resolve (repeatable)")
	cmd.Flags().StringVar(&upstreamCA, "upstream-ca", "", "PEM file of CA certificates trusted for upstream sites, besides the system roots")
	cmd.Flags().BoolVar(&debug, "debug", false, "print the proxy's connection-level warnings to stderr: failed TLS handshakes, malformed requests, HTTP/2 protocol errors")
	cmd.Flags().BoolVar(&http2On, "http2", true, "let clients speak HTTP/2 inside HTTPS tunnels (upstream requests are HTTP/1.1); --http2=false offers HTTP/1.1 only")
	cmd.Flags().BoolVar(&finish, "finish", false, "do not record: write the bundle from the journal an interrupted recording left")
	cmd.Flags().StringVar(&locale, "locale", "", "the browser language of the capture, a BCP 47 tag (en-US); default: the first tag of the browser's Accept-Language")
	cmd.Flags().StringVar(&timezone, "timezone", "", "the time zone of the capture, an IANA name (America/New_York); default: the machine's (TZ, else /etc/timezone or the /etc/localtime link, else UTC)")
	cmd.Flags().Bool("no-wait", false, "at the end, fail at once instead of waiting when another pab is writing the task (the bundle is kept)")
	return cmd
}
