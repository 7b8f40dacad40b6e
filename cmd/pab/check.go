//go:build !pab_lite

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/crawl"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/words"
)

func newCheckCmd(g *globalFlags) *cobra.Command {
	var (
		doCrawl bool
		pages   int
		links   int
		timeout time.Duration
		jsonOut bool
		chrome  string
		logPath string
		clock   string
		detRand bool
		typed   string
	)
	cmd := &cobra.Command{
		Use:   "check TARGET [--crawl]",
		Short: "Check that a recording replays as recorded (with --crawl, in Chromium)",
		Long:  longHelp("check"),
		Example: `  pab check books-sapiens-price --crawl
  pab check archive-org-jobs --crawl --pages 50 --json > crawl.json
  pab check crawl.warc.gz --crawl --links 0     # only the recorded pages
  pab check archive-org-jobs --crawl --typed tasks/archive-org-jobs/typed-urls.yaml
  pab check lil-former-projects                 # the Go client check, as pab replay --check`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCrawlFlags(cmd, doCrawl, pages, links, timeout); err != nil {
				return err
			}
			if typed != "" && !doCrawl {
				return fmt.Errorf("check: --typed needs --crawl")
			}
			var typedURLs []crawl.TypedURL
			if typed != "" {
				data, err := readlimit.Regular(typed, crawl.MaxTypedFile)
				if err != nil {
					return fmt.Errorf("check: --typed: %w", err)
				}
				if typedURLs, err = crawl.ParseTyped(typed, data); err != nil {
					return fmt.Errorf("check: --typed: %w", err)
				}
			}
			clockOn, err := clockSetting(clock, cmd.Flags().Changed("clock"), os.Getenv("RR_CLOCK"))
			if err != nil {
				return err
			}
			var exe string
			if doCrawl {
				if exe, err = findChromium(chrome); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errOut := cmd.ErrOrStderr()
			s, ca, err := openServing(ctx, g, args[0], errOut)
			if err != nil {
				return err
			}
			defer s.close()
			rp, err := crawl.StartReplay(crawl.ReplayOptions{Bundle: s.bundle, Index: s.index, Rules: s.rules, CA: ca,
				Clock: clockOn, DeterministicRandom: detRand, LogPath: logPath})
			if err != nil {
				return err
			}
			defer rp.Close()
			fmt.Fprintf(errOut, "pab check: replaying %s (%s, captured %s) on http://%s\n",
				s.target.Name, words.Count(s.bundle.Len(), "exchange"), s.bundle.Manifest.CapturedFrom, rp.Addr)
			stdout := cmd.OutOrStdout()
			if !doCrawl {
				rep, err := rp.Check(ctx)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(stdout, rep)
				}
				rep.Print(stdout)
				return nil
			}
			var setup browser.Options
			if setup.Locale, setup.Timezone, err = recordingLocale(s); err != nil {
				return err
			}
			if typedURLs != nil {
				if err := crawl.CheckTyped(typed, typedURLs, s.bundle); err != nil {
					return fmt.Errorf("check: --typed: %w", err)
				}
				trep, err := rp.BrowseTyped(ctx, exe, setup, crawl.Options{PageTimeout: timeout,
					Progress: func(done, queued int, p crawl.PageResult) {
						fmt.Fprintf(errOut, "pab check: %d/%d %s %s\n", done, done+queued, p.Verdict, p.URL)
					}}, typedURLs)
				switch {
				case errors.Is(err, crawl.ErrInterrupted):
					return exitError{code: 130, msg: "interrupted"}
				case err != nil && trep != nil && errors.Is(err, ctx.Err()):
					trep.Print(stdout)
					return exitError{code: 130, msg: "interrupted"}
				case err != nil:
					return err
				case jsonOut:
					err = writeJSON(stdout, crawl.TypedTargetReport{Target: s.target.Name, File: typed, TypedReport: trep})
				default:
					trep.Print(stdout)
				}
				if err == nil && trep.Totals[crawl.TypedWrong] > 0 {
					return exitError{code: 1, msg: fmt.Sprintf("check: %d of %d typed URLs got another page's answer", trep.Totals[crawl.TypedWrong], len(trep.URLs))}
				}
				return err
			}
			maxLinks := links
			if maxLinks == 0 {
				maxLinks = -1 // crawl.Options: follow no link
			}
			rep, err := rp.Browse(ctx, exe, setup, crawl.Options{MaxPages: pages, MaxLinks: maxLinks, PageTimeout: timeout,
				Progress: func(done, queued int, p crawl.PageResult) {
					fmt.Fprintf(errOut, "pab check: %d/%d %s %s\n", done, min(done+queued, pages), p.Verdict, p.URL)
				}})
			switch {
			case errors.Is(err, crawl.ErrInterrupted):
				return exitError{code: 130, msg: "interrupted"}
			case err != nil && rep != nil && errors.Is(err, ctx.Err()):
				rep.Print(stdout)
				return exitError{code: 130, msg: "interrupted"}
			case err != nil:
				return err
			case jsonOut:
				err = writeJSON(stdout, crawl.TargetReport{Target: s.target.Name, CapturedFrom: s.bundle.Manifest.CapturedFrom, Report: rep})
			default:
				rep.Print(stdout)
			}
			if err == nil && rep.Wrong > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("check: %d of %d pages got a wrong-looking answer", rep.Wrong, len(rep.Pages))}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&doCrawl, "crawl", false, "drive headless Chromium through the replay: recorded pages, then same-site links")
	cmd.Flags().IntVar(&pages, "pages", crawl.DefaultMaxPages, "with --crawl: open at most this many pages, recorded ones included")
	cmd.Flags().IntVar(&links, "links", crawl.DefaultMaxLinks, "with --crawl: follow at most this many same-site links of each page (0: none)")
	cmd.Flags().DurationVar(&timeout, "timeout", crawl.DefaultPageTimeout, "with --crawl: time limit for each page")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&chrome, "chrome", "", "with --crawl: the Chromium executable (default: chromium on PATH)")
	cmd.Flags().StringVar(&logPath, "log", "", "write replay's log (one JSON line per request) to this file")
	cmd.Flags().StringVar(&clock, "clock", "on", "page clock on or off, as for pab replay (env RR_CLOCK=off)")
	cmd.Flags().StringVar(&typed, "typed", "", "with --crawl: open the typed URLs of this file instead of crawling, and count right/wrong/near/miss/lost against the live site's answers it lists (docs/replay.md \"Typed URLs\")")
	cmd.Flags().BoolVar(&detRand, "deterministic-random", false, "also make Math.random and crypto.getRandomValues repeatable per page")
	return cmd
}

// checkCrawlFlags checks --pages, --links and --timeout, and that they (and --chrome) are
// given only with --crawl.
func checkCrawlFlags(cmd *cobra.Command, doCrawl bool, pages, links int, timeout time.Duration) error {
	if !doCrawl {
		for _, name := range []string{"pages", "links", "timeout", "chrome"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("check: --%s needs --crawl", name)
			}
		}
	}
	switch {
	case pages < 1:
		return fmt.Errorf("check: --pages %d: want at least 1", pages)
	case links < 0:
		return fmt.Errorf("check: --links %d: want 0 or more", links)
	case timeout < time.Second:
		return fmt.Errorf("check: --timeout %s: want at least 1s", timeout)
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
