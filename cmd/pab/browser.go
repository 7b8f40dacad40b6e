package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/tlsca"
)

// chromiumMissing is the one-line error when no Chromium can be started.
const chromiumMissing = "chromium not found: install Debian's package chromium (apt-get install chromium) or pass --chrome PATH"

// findChromium returns the Chromium executable (browser.Find): path when given, else
// "chromium" on PATH; the error names the --chrome flag.
func findChromium(path string) (string, error) {
	p, err := browser.Find(path)
	if err != nil {
		return "", errors.New(chromiumMissing)
	}
	return p, nil
}

func newBrowserCmd(g *globalFlags) *cobra.Command {
	var (
		proxy    string
		startURL string
		chrome   string
		headed   bool
		port     int
		logPath  string
		clock    string
		detRand  bool
		http2On  bool
	)
	cmd := &cobra.Command{
		Use:   "browser TARGET | --proxy ADDR",
		Short: "Start Chromium set up for replay and print its CDP endpoint",
		Long: `Start Debian's Chromium with every request going through pab's proxy, pab's CA
trusted (and no other certificate error ignored), QUIC and Chromium's own calls
home off, and a fresh profile that is removed at exit. An agent attaches over the
Chrome DevTools Protocol at the ws:// address printed on stderr.

With TARGET (a task id, task directory, bundle directory or WARC file) pab serves
the recording itself on a free loopback port, uses the recording's time zone and
language and page clock (--clock, --deterministic-random, as for 'pab replay'),
and opens the first recorded page that replay answers with a 2xx HTML document
(following recorded redirects). With --proxy, Chromium goes through
an already running 'pab replay' or 'pab record' of this repository's cache.

Headless unless --headed. Runs until Ctrl-C or until Chromium exits. See
docs/browser.md.`,
		Example: `  pab browser lil-former-projects
  pab browser books-sapiens-price --headed --url http://books.toscrape.com/
  pab browser --proxy 127.0.0.1:8899 --port 9222`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (proxy != "") {
				return errors.New("browser: give either TARGET or --proxy ADDR")
			}
			if port < 0 || port > 65535 {
				return fmt.Errorf("browser: --port %d is not a port number (0 to 65535)", port)
			}
			for _, name := range []string{"log", "clock", "deterministic-random"} {
				if proxy != "" && cmd.Flags().Changed(name) {
					return fmt.Errorf("browser: --%s needs TARGET (with --proxy, the running proxy has its own)", name)
				}
			}
			exe, err := findChromium(chrome)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errOut := cmd.ErrOrStderr()
			setup := browser.Options{Proxy: proxy, Port: port, Headed: headed}
			url := startURL

			var served chan error
			if len(args) == 1 {
				s, ca, err := openServing(cmd.Context(), g, args[0], errOut)
				if err != nil {
					return err
				}
				defer s.bundle.Close()
				setup.SPKI = ca.SPKIHash()
				if setup.Locale, setup.Timezone, err = recordingLocale(s); err != nil {
					return err
				}
				if url == "" {
					url = startPage(s.index, s.bundle)
				}
				clockOn, err := clockSetting(clock, cmd.Flags().Changed("clock"), os.Getenv("RR_CLOCK"))
				if err != nil {
					return err
				}
				srv, err := replay.New(replay.Options{Bundle: s.bundle, Index: s.index, Rules: s.rules, CA: ca,
					Clock: clockOn, DeterministicRandom: detRand, DisableHTTP2: !http2On})
				if err != nil {
					return err
				}
				ln, err := srv.Listen("127.0.0.1:0")
				if err != nil {
					return err
				}
				if logPath != "" {
					f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
					if err != nil {
						ln.Close()
						return fmt.Errorf("open log: %w", err)
					}
					defer f.Close()
					setLogRecording(srv, s, errOut)
					srv.SetLog(f)
				}
				served = make(chan error, 1)
				go func() { served <- srv.Serve(ln) }()
				defer func() {
					srv.Close()
					<-served
				}()
				setup.Proxy = ln.Addr().String()
				fmt.Fprintf(errOut, "pab browser: replaying %s (%d exchanges, captured %s) on http://%s\n",
					s.target.Name, len(s.bundle.Entries), s.bundle.Manifest.CapturedFrom, setup.Proxy)
			} else {
				ca, err := tlsca.LoadDefault()
				if err != nil {
					return err
				}
				setup.SPKI = ca.SPKIHash()
			}
			if ctx.Err() != nil {
				return exitError{code: 130, msg: "interrupted"}
			}
			profile, err := os.MkdirTemp("", "pab-browser-")
			if err != nil {
				return fmt.Errorf("browser: make profile directory: %w", err)
			}
			defer browser.RemoveProfile(profile)
			setup.Profile = profile
			fmt.Fprintf(errOut, "pab browser: profile %s\n", profile)
			return runChromium(ctx, exe, setup, url, served, errOut)
		},
	}
	cmd.Flags().StringVar(&proxy, "proxy", "", "use this running pab proxy (host:port) instead of serving TARGET")
	cmd.Flags().StringVar(&startURL, "url", "", "page to open (default: the task's first recorded page; about:blank with --proxy)")
	cmd.Flags().StringVar(&chrome, "chrome", "", "Chromium executable (default: chromium on PATH)")
	cmd.Flags().BoolVar(&headed, "headed", false, "show the browser window (default: headless)")
	cmd.Flags().IntVar(&port, "port", 0, "Chromium's remote debugging port on 127.0.0.1 (0 picks a free one)")
	cmd.Flags().StringVar(&logPath, "log", "", "with TARGET: write one JSON line per request to this file (see docs/replay.md)")
	cmd.Flags().StringVar(&clock, "clock", "on", "with TARGET: page clock on or off, as for pab replay (env RR_CLOCK=off)")
	cmd.Flags().BoolVar(&detRand, "deterministic-random", false, "with TARGET: also make Math.random and crypto.getRandomValues repeatable per page")
	cmd.Flags().BoolVar(&http2On, "http2", true, "with TARGET: offer HTTP/2 inside HTTPS tunnels; --http2=false gives the browser HTTP/1.1 only")
	return cmd
}

// recordingLocale returns the language and time zone a browser gets for the replay of s:
// the manifest's locale and timezone, else the task's capture section in task.yaml.
func recordingLocale(s *session) (locale, timezone string, err error) {
	locale, timezone = s.bundle.Manifest.Locale, s.bundle.Manifest.Timezone
	if t := s.target.Task; t != nil && (locale == "" || timezone == "") {
		card, err := t.Card()
		if err != nil {
			return "", "", err
		}
		if c := card.Capture; c != nil {
			if locale == "" {
				locale = c.Locale
			}
			if timezone == "" {
				timezone = c.Timezone
			}
		}
	}
	return locale, timezone, nil
}

// runChromium starts the Chromium at exe (browser.Start), prints its CDP endpoint on
// errOut, and waits until ctx ends, Chromium exits or the replay stops (served receives its
// Serve result and is nil with --proxy); then it stops the whole process group. An
// interrupt during the start is exit status 130.
func runChromium(ctx context.Context, exe string, o browser.Options, url string, served chan error, errOut io.Writer) error {
	p, err := browser.Start(ctx, exe, o, url, "")
	if err != nil {
		if ctx.Err() != nil {
			return exitError{code: 130, msg: "interrupted"}
		}
		return err
	}
	defer p.Stop()
	fmt.Fprintf(errOut, "pab browser: CDP %s\n", p.CDP)
	exited := p.Exited()
	fmt.Fprintln(errOut, "pab browser: press Ctrl-C to stop")
	select {
	case <-ctx.Done():
	case err := <-exited:
		exited <- err
		if err != nil {
			return fmt.Errorf("browser: %s exited: %w", exe, err)
		}
		fmt.Fprintln(errOut, "pab browser: chromium exited")
	case err := <-served:
		served <- err // the caller waits for it after closing the replay
		return fmt.Errorf("browser: replay stopped: %v", err)
	}
	return nil
}
