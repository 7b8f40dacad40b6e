package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
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

// browserFlags are pab browser's flags.
type browserFlags struct {
	proxy, startURL, chrome, logPath, clock string
	headed, detRand, http2On                bool
	port                                    int
}

func newBrowserCmd(g *globalFlags) *cobra.Command {
	var bf browserFlags
	cmd := &cobra.Command{
		Use:   "browser TARGET | --proxy ADDR",
		Short: "Start Chromium set up for replay and print its CDP endpoint",
		Long:  longHelp("browser"),
		Example: `  pab browser lil-former-projects
  pab browser books-sapiens-price --headed --url http://books.toscrape.com/
  pab browser --proxy 127.0.0.1:8899 --port 9222`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runBrowser(cmd, g, &bf, args) },
	}
	cmd.Flags().StringVar(&bf.proxy, "proxy", "", "use this running pab proxy (host:port) instead of serving TARGET")
	cmd.Flags().StringVar(&bf.startURL, "url", "", "page to open (default: the task's first recorded page; about:blank with --proxy)")
	cmd.Flags().StringVar(&bf.chrome, "chrome", "", "Chromium executable (default: chromium on PATH)")
	cmd.Flags().BoolVar(&bf.headed, "headed", false, "show the browser window (default: headless)")
	cmd.Flags().IntVar(&bf.port, "port", 0, "Chromium's remote debugging port on 127.0.0.1 (0 picks a free one)")
	cmd.Flags().StringVar(&bf.logPath, "log", "", "with TARGET: write one JSON line per request to this file (see docs/replay.md)")
	cmd.Flags().StringVar(&bf.clock, "clock", "on", "with TARGET: page clock on or off, as for pab replay (env RR_CLOCK=off)")
	cmd.Flags().BoolVar(&bf.detRand, "deterministic-random", false, "with TARGET: also make Math.random and crypto.getRandomValues repeatable per page")
	cmd.Flags().BoolVar(&bf.http2On, "http2", true, "with TARGET: offer HTTP/2 inside HTTPS tunnels; --http2=false gives the browser HTTP/1.1 only")
	return cmd
}

// runBrowser is pab browser: Chromium through a replay of TARGET it serves, or through the
// running proxy of --proxy.
func runBrowser(cmd *cobra.Command, g *globalFlags, bf *browserFlags, args []string) error {
	if (len(args) == 1) == (bf.proxy != "") {
		return errors.New("browser: give either TARGET or --proxy ADDR")
	}
	if bf.port < 0 || bf.port > 65535 {
		return fmt.Errorf("browser: --port %d is not a port number (0 to 65535)", bf.port)
	}
	for _, name := range []string{"log", "clock", "deterministic-random"} {
		if bf.proxy != "" && cmd.Flags().Changed(name) {
			return fmt.Errorf("browser: --%s needs TARGET (with --proxy, the running proxy has its own)", name)
		}
	}
	exe, err := findChromium(bf.chrome)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errOut := cmd.ErrOrStderr()
	setup := browser.Options{Proxy: bf.proxy, Port: bf.port, Headed: bf.headed}
	url := bf.startURL

	var served chan error
	if len(args) == 1 {
		s, ca, err := openServing(cmd.Context(), g, args[0], errOut)
		if err != nil {
			return err
		}
		defer s.close()
		setup.SPKI = ca.SPKIHash()
		if setup.Locale, setup.Timezone, err = recordingLocale(s); err != nil {
			return err
		}
		if url == "" {
			url = startPage(s.index, s.bundle)
		}
		clockOn, err := clockSetting(bf.clock, cmd.Flags().Changed("clock"), os.Getenv("RR_CLOCK"))
		if err != nil {
			return err
		}
		srv, ln, closeLog, err := startServing(s, replay.Options{Bundle: s.bundle, Index: s.index, Rules: s.rules, CA: ca,
			Clock: clockOn, DeterministicRandom: bf.detRand, DisableHTTP2: !bf.http2On}, "127.0.0.1:0", bf.logPath, errOut)
		if err != nil {
			return err
		}
		defer closeLog()
		served = make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() {
			srv.Close()
			<-served
		}()
		setup.Proxy = ln.Addr().String()
		fmt.Fprintf(errOut, "pab browser: replaying %s (%s, captured %s) on http://%s\n",
			s.target.Name, words.Count(s.bundle.Len(), "exchange"), s.bundle.Manifest.CapturedFrom, setup.Proxy)
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
	err = browser.Run(ctx, exe, setup, url, served, errOut)
	if errors.Is(err, browser.ErrInterrupted) {
		return exitError{code: 130, msg: "interrupted"}
	}
	return err
}

// recordingLocale returns the language and time zone a browser gets for the replay of s
// (task.Locale: the manifest's, else the task card's capture section).
func recordingLocale(s *session) (locale, timezone string, err error) {
	var card *task.Card
	if t := s.target.Task; t != nil {
		if card, err = t.Card(); err != nil {
			return "", "", err
		}
	}
	locale, timezone = task.Locale(s.bundle.Manifest, card)
	return locale, timezone, nil
}
