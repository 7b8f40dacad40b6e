// Package browser starts Chromium the way pab does everywhere: pab browser, pab run
// --browser, pab check --crawl, the tests, tools/applyfixture and bench/pageload all take
// their command line from Args (or, for chromedp, internal/browser/cdpalloc), so a test drives
// Chromium exactly as a user's replay browser is driven. docs/browser.md explains each
// flag.
//
// Start runs Chromium in a process group of its own (internal/procgroup) and waits for its
// DevTools address; Process.Stop ends the whole group and removes a profile Start made.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/procgroup"
)

// ErrNotFound is Find's error when no Chromium executable can be found.
var ErrNotFound = errors.New("chromium not found: install Debian's package chromium (apt-get install chromium)")

// StartTimeout bounds Start's wait for Chromium's "DevTools listening on" line.
const StartTimeout = 60 * time.Second

// devToolsLine matches the line Chromium prints on stderr once its debugging port is open.
var devToolsLine = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// FeaturesOff are the Chromium features (base::Feature names, --disable-features) that make
// the browser upgrade http:// to https:// or call Google's servers on its own.
const FeaturesOff = "HttpsUpgrades,NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,AutofillServerCommunication,Translate"

// Options is what Chromium is started with.
type Options struct {
	// Proxy is the host:port of the pab proxy (replay or record); empty: no proxy, as for a
	// local file:// page.
	Proxy string
	// SPKI is the base64 SHA-256 of pab's CA public key (tlsca.CA.SPKIHash), trusted through
	// --ignore-certificate-errors-spki-list; empty trusts nothing extra.
	SPKI string
	// Profile is the --user-data-dir; Start makes a fresh one when it is empty.
	Profile string
	// Port is the --remote-debugging-port; 0 lets Chromium pick one.
	Port int
	// Headed shows a window (it needs a display); otherwise --headless.
	Headed bool
	// Locale is a BCP 47 tag for --lang and --accept-lang; empty: Chromium's default.
	Locale string
	// Timezone is an IANA zone name given to Chromium as TZ; empty: the machine's.
	Timezone string
	// Extra are further arguments ("--name" or "--name=value"), after pab's own.
	Extra []string
}

// Args returns Chromium's command line (without the executable) for o, ending with the
// page to open (about:blank when url is empty). The list is the one every pab browser
// uses; --no-sandbox is added when running as root, where Chromium refuses its sandbox.
func Args(o Options, url string) []string {
	var a []string
	if o.Proxy != "" {
		a = append(a, "--proxy-server=http://"+o.Proxy, "--proxy-bypass-list=<-loopback>")
	}
	a = append(a, "--disable-quic")
	if o.SPKI != "" {
		a = append(a, "--ignore-certificate-errors-spki-list="+o.SPKI)
	}
	if o.Profile != "" {
		a = append(a, "--user-data-dir="+o.Profile)
	}
	a = append(a,
		"--remote-debugging-port="+strconv.Itoa(o.Port),
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
		"--disable-features="+FeaturesOff,
	)
	if !o.Headed {
		a = append(a, "--headless")
	}
	if o.Locale != "" {
		a = append(a, "--lang="+o.Locale, "--accept-lang="+o.Locale)
	}
	if os.Geteuid() == 0 {
		a = append(a, "--no-sandbox")
	}
	a = append(a, o.Extra...)
	if url == "" {
		url = "about:blank"
	}
	return append(a, url)
}

// Find returns the Chromium executable: path when given (a name is looked up on PATH),
// else "chromium" on PATH. The error wraps ErrNotFound.
func Find(path string) (string, error) {
	if path == "" {
		path = "chromium"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%w (%s)", ErrNotFound, path)
	}
	return p, nil
}

// Process is a running Chromium.
type Process struct {
	// CDP is its DevTools address (ws://127.0.0.1:PORT/devtools/browser/ID).
	CDP string
	w   *procgroup.Watched
	// profile is removed by Stop when Start made it.
	profile string
}

// Start starts the Chromium at exe with Args(o, url) and o.Timezone in a process group of
// its own, its stderr copied to logPath (cut at 1 MiB; "" discards it), and waits at most
// StartTimeout for its DevTools address. When o.Profile is empty, a fresh profile directory
// is made under the system's temporary directory and removed by Stop. Errors name exe: it
// exited first (with its last stderr lines), printed no address in time, or ctx ended
// (ctx's error). On error nothing is left running.
func Start(ctx context.Context, exe string, o Options, url, logPath string) (*Process, error) {
	p := &Process{}
	if o.Profile == "" {
		dir, err := os.MkdirTemp("", "pab-browser-")
		if err != nil {
			return nil, fmt.Errorf("browser: make profile directory: %w", err)
		}
		o.Profile, p.profile = dir, dir
	}
	c := exec.Command(exe, Args(o, url)...)
	c.Env = os.Environ()
	if o.Timezone != "" {
		c.Env = append(c.Env, "TZ="+o.Timezone)
	}
	w, err := procgroup.StartWatched(c, logPath, 1<<20, devToolsLine)
	if err != nil {
		RemoveProfile(p.profile)
		return nil, fmt.Errorf("browser: start %s: %w", exe, err)
	}
	p.w = w
	ws, err := w.Wait(ctx, StartTimeout)
	if err == nil {
		p.CDP = ws
		return p, nil
	}
	p.Stop()
	var ee *procgroup.ExitedError
	switch {
	case errors.As(err, &ee):
		return nil, fmt.Errorf("browser: %s exited (%s) before opening its debugging port: %q", exe, ee.Status, ee.Tail)
	case errors.Is(err, procgroup.ErrNoAddress):
		return nil, fmt.Errorf("browser: %s printed no DevTools address within %s", exe, StartTimeout)
	}
	return nil, err
}

// PID is the id of the process Start started (Chromium, the leader of its process group).
func (p *Process) PID() int { return p.w.Pgid() }

// Exited receives Chromium's exit (its Wait result) should it end by itself; whoever reads
// the value must send it back.
func (p *Process) Exited() chan error { return p.w.Exited() }

// Stop ends Chromium's whole process group (SIGTERM, SIGKILL after five seconds) and
// removes the profile directory Start made.
func (p *Process) Stop() {
	p.w.Stop()
	RemoveProfile(p.profile)
}

// RemoveProfile removes a Chromium profile directory ("" does nothing); helper processes
// can still write into it for a moment after the browser stops, so it tries again for up
// to five seconds.
func RemoveProfile(dir string) {
	if dir == "" {
		return
	}
	for range 50 {
		if err := os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ShellCommand returns the command line a person types to start Chromium as Args(o, url)
// does, for help texts and the README: "chromium" and Args' flags, each quoted for a POSIX
// shell (a value holding "$(" in double quotes, so that a command substitution such as
// "$(pab ca --spki)" still runs; one holding other shell characters in single quotes),
// lines of at most about 88 characters joined by " \\" and a newline, each continuation
// starting with indent. Left out are --remote-debugging-port (a person needs no CDP port)
// and --no-sandbox, which depends on who runs it: NoSandboxNote says when to add it.
func ShellCommand(o Options, url, indent string) string {
	var parts []string
	for _, a := range Args(o, url) {
		if a == "--no-sandbox" || strings.HasPrefix(a, "--remote-debugging-port=") {
			continue
		}
		parts = append(parts, shellQuote(a))
	}
	var lines []string
	line := "chromium"
	for _, p := range parts {
		if len(line)+1+len(p) > 88 {
			lines = append(lines, line)
			line = indent + p
			continue
		}
		line += " " + p
	}
	lines = append(lines, line)
	return strings.Join(lines, " \\\n")
}

// NoSandboxNote says when Chromium needs --no-sandbox (Args adds it as root).
const NoSandboxNote = "as root, add --no-sandbox: Chromium refuses to start its sandbox as root"

// shellQuote quotes one argument of ShellCommand.
func shellQuote(a string) string {
	name, value, hasValue := strings.Cut(a, "=")
	switch {
	case hasValue && strings.Contains(value, "$("):
		return name + `="` + value + `"`
	case strings.ContainsAny(a, " <>|&;*?'\"`\\$(){}[]!#~"):
		return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return a
}
