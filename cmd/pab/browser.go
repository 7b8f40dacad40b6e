package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/tlsca"
)

// chromiumMissing is the one-line error when no Chromium can be started.
const chromiumMissing = "chromium not found: install Debian's package chromium (apt-get install chromium) or pass --chrome PATH"

// chromiumStartTimeout bounds the wait for Chromium's "DevTools listening on" line.
const chromiumStartTimeout = 60 * time.Second

// devToolsLine matches the line Chromium prints on stderr once its debugging port is open.
var devToolsLine = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// chromiumFeaturesOff are Chromium features (base::Feature names) that make the browser
// upgrade http:// to https:// or call Google's servers on its own.
const chromiumFeaturesOff = "HttpsUpgrades,NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,AutofillServerCommunication,Translate"

// browserSetup is what Chromium is started with.
type browserSetup struct {
	chrome   string // Chromium executable
	proxy    string // host:port of the pab proxy
	spki     string // base64 SHA-256 of pab's CA public key
	profile  string // fresh --user-data-dir
	port     int    // --remote-debugging-port; 0 lets Chromium pick one
	headed   bool
	locale   string // BCP 47 tag for --lang and --accept-lang; empty: Chromium's default
	timezone string // IANA zone for TZ; empty: the machine's
	url      string // first page; empty: about:blank
}

// args are Chromium's command-line arguments (see docs/browser.md for each one).
func (b browserSetup) args() []string {
	a := []string{
		"--proxy-server=http://" + b.proxy,
		"--proxy-bypass-list=<-loopback>",
		"--disable-quic",
		"--ignore-certificate-errors-spki-list=" + b.spki,
		"--user-data-dir=" + b.profile,
		"--remote-debugging-port=" + strconv.Itoa(b.port),
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-domain-reliability",
		"--disable-client-side-phishing-detection",
		"--disable-default-apps",
		"--no-pings",
		"--no-first-run",
		"--no-default-browser-check",
		"--password-store=basic",
		"--disable-features=" + chromiumFeaturesOff,
	}
	if !b.headed {
		a = append(a, "--headless")
	}
	if b.locale != "" {
		a = append(a, "--lang="+b.locale, "--accept-lang="+b.locale)
	}
	if os.Geteuid() == 0 {
		a = append(a, "--no-sandbox") // Chromium refuses to start its sandbox as root
	}
	u := b.url
	if u == "" {
		u = "about:blank"
	}
	return append(a, u)
}

// findChromium returns the Chromium executable: path when given, else "chromium" on PATH.
func findChromium(path string) (string, error) {
	if path == "" {
		path = "chromium"
	}
	p, err := exec.LookPath(path)
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
			setup := browserSetup{chrome: exe, proxy: proxy, port: port, headed: headed, url: startURL}

			var served chan error
			if len(args) == 1 {
				s, ca, err := openServing(cmd.Context(), g, args[0], errOut)
				if err != nil {
					return err
				}
				defer s.bundle.Close()
				setup.spki = ca.SPKIHash()
				if setup.locale, setup.timezone, err = recordingLocale(s); err != nil {
					return err
				}
				if setup.url == "" {
					setup.url = startPage(s.index, s.bundle)
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
				setup.proxy = ln.Addr().String()
				fmt.Fprintf(errOut, "pab browser: replaying %s (%d exchanges, captured %s) on http://%s\n",
					s.target.Name, len(s.bundle.Entries), s.bundle.Manifest.CapturedFrom, setup.proxy)
			} else {
				ca, err := tlsca.LoadDefault()
				if err != nil {
					return err
				}
				setup.spki = ca.SPKIHash()
			}
			if ctx.Err() != nil {
				return exitError{code: 130, msg: "interrupted"}
			}
			profile, err := os.MkdirTemp("", "pab-browser-")
			if err != nil {
				return fmt.Errorf("browser: make profile directory: %w", err)
			}
			defer removeProfile(profile)
			setup.profile = profile
			fmt.Fprintf(errOut, "pab browser: profile %s\n", profile)
			return runChromium(ctx, setup, served, errOut)
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

// startChromium starts Chromium with b's arguments (browserSetup.args) and time zone in its
// own process group, and waits for its DevTools address (at most chromiumStartTimeout). It
// returns the running child, which the caller stops, and the ws:// address. Errors name
// the executable; an interrupt (ctx ended) is exit status 130.
func startChromium(ctx context.Context, b browserSetup) (*watchedChild, string, error) {
	c := exec.Command(b.chrome, b.args()...)
	c.Env = os.Environ()
	if b.timezone != "" {
		c.Env = append(c.Env, "TZ="+b.timezone)
	}
	// Its own process group, so that stopGroup reaches every helper process, killed with pab;
	// stderr through a pipe of its own (startWatched).
	w, err := startWatched(c, "", 0, devToolsLine)
	if err != nil {
		return nil, "", fmt.Errorf("browser: start %s: %w", b.chrome, err)
	}
	ws, err := w.wait(ctx, chromiumStartTimeout)
	if err == nil {
		return w, ws, nil
	}
	w.stop()
	var ee *childExitedError
	switch {
	case errors.As(err, &ee):
		return nil, "", fmt.Errorf("browser: %s exited (%s) before opening its debugging port: %q", b.chrome, ee.status, ee.tail)
	case errors.Is(err, errNoAddress):
		return nil, "", fmt.Errorf("browser: %s printed no DevTools address within %s", b.chrome, chromiumStartTimeout)
	}
	return nil, "", exitError{code: 130, msg: "interrupted"}
}

// runChromium starts Chromium (startChromium), prints its CDP endpoint on errOut, and
// waits until ctx ends, Chromium exits or the replay stops (served receives its Serve
// result and is nil with --proxy); then it stops the whole process group.
func runChromium(ctx context.Context, b browserSetup, served chan error, errOut io.Writer) error {
	w, ws, err := startChromium(ctx, b)
	if err != nil {
		return err
	}
	defer w.stop()
	fmt.Fprintf(errOut, "pab browser: CDP %s\n", ws)
	exited := w.exited
	fmt.Fprintln(errOut, "pab browser: press Ctrl-C to stop")
	select {
	case <-ctx.Done():
	case err := <-exited:
		exited <- err
		if err != nil {
			return fmt.Errorf("browser: %s exited: %w", b.chrome, err)
		}
		fmt.Fprintln(errOut, "pab browser: chromium exited")
	case err := <-served:
		served <- err // the caller waits for it after closing the replay
		return fmt.Errorf("browser: replay stopped: %v", err)
	}
	return nil
}

// exitStatus describes a process's end for a message.
func exitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// stopGroup ends the process group pgid: SIGTERM, then SIGKILL if its leader has not
// exited within five seconds (exited receives the leader's Wait result), then SIGKILL
// to whatever of the group is left.
func stopGroup(pgid int, exited chan error) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// removeProfile removes Chromium's profile directory; helper processes can still write
// into it for a moment after the browser stops, so it tries again for up to five seconds.
func removeProfile(dir string) {
	for range 50 {
		if err := os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
