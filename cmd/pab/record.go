//go:build !pab_lite

package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/record"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
	"github.com/pab-dev/pab/warc"
)

// maxCAFile bounds the --upstream-ca file.
const maxCAFile = 1 << 20

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
		Long: `Run an HTTP/HTTPS proxy that forwards every request to the real site, returns
its answer unchanged, and records each exchange as it completes (HTTPS is
intercepted with pab's CA, see 'pab ca'). Ctrl-C (SIGINT) or SIGTERM ends the
recording: exchanges in flight are finished, then the recording is written as a
bundle (docs/bundle-format.md). With --out DIR the bundle goes to DIR only; else it
is imported into tasks/ID as 'pab import' would: audited, merged with the
recording the task has, rules inferred, self-checked.

Exchanges reach disk as they happen, in a journal (a WARC file) in the work
directory (DIR.record next to --out, else $PAB_CACHE/record/ID). After a crash,
run the same command again: the journal is cut after its last whole exchange and
the recording goes on; --finish only writes the bundle from it. The work
directory also keeps record.log.jsonl, one line per request, saying what was
stored and what was not and why: an exchange an exclude rule of the task matches
(sites/ and tasks/ID/rules/) is forwarded but not stored.

The manifest gets the capture's locale and time zone: --locale, else the first tag
of the browser's Accept-Language; --timezone, else the machine's (TZ, else
/etc/timezone or the /etc/localtime link, else UTC), printed at the start. See
docs/record.md.`,
		Example: `  pab record --task my-shop
  pab record --task my-shop --out /tmp/shop-bundle --redact 'jane@example.com' --redact 're:\d{3}-\d{2}-\d{4}'
  pab record --task staging --resolve shop.test:443:127.0.0.1:8443 --upstream-ca staging-ca.pem
  chromium --proxy-server=http://127.0.0.1:8899 --ignore-certificate-errors-spki-list="$(pab ca --spki)"`,
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
			capture := recordCapture{locale: locale, timezone: timezone, tzFrom: "--timezone"}
			if capture.timezone == "" {
				capture.timezone, capture.tzFrom = record.MachineTimezone()
			}
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			work := filepath.Join(repo.CacheDir(), "record", id)
			if out != "" {
				if out, err = filepath.Abs(out); err != nil {
					return err
				}
				work = out + ".record"
				// checked now, not after a whole browsing session; an existing
				// directory is never replaced
				if err := checkOutDir(out); err != nil {
					return err
				}
			}
			red, err := record.NewRedactor(redact)
			if err != nil {
				return err
			}
			resolveMap := map[string]string{}
			for _, s := range resolve {
				from, to, err := record.ParseResolve(s)
				if err != nil {
					return err
				}
				resolveMap[from] = to
			}
			var roots *x509.CertPool
			if upstreamCA != "" {
				if roots, err = loadRoots(upstreamCA); err != nil {
					return err
				}
			}
			errOut := cmd.ErrOrStderr()
			if finish {
				rep, err := record.Recover(record.JournalPath(work))
				if err != nil {
					return err
				}
				if rep.Cut > 0 {
					fmt.Fprintf(errOut, "pab record: journal cut after its last whole exchange (%d bytes removed)\n", rep.Cut)
				}
				return finishRecording(cmd, repo, id, work, out, capture)
			}
			ca, err := tlsca.LoadDefault()
			if err != nil {
				return err
			}
			// exclude applies while recording (docs/rules.md): the rules a replay of the
			// task would use, read once now; a broken rule file stops before recording
			rs, err := rules.Load(repo.SitesDir(), filepath.Join(repo.TasksDir(), id, "rules"))
			if err != nil {
				return fmt.Errorf("record: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// the recorder reports a journal write error from a request's goroutine, while
			// this one prints too
			errOut = &lockedWriter{w: errOut}
			onStoreError := func(err error, stored int) {
				fmt.Fprintf(errOut, "pab record: cannot store exchanges: %v; %d exchanges were stored; later requests get 503, stop with Ctrl-C to write them\n", err, stored)
			}
			rec, rrep, err := record.New(record.Options{WorkDir: work, CA: ca, Resolve: resolveMap, RootCAs: roots, Redact: red,
				OnStoreError: onStoreError, DisableHTTP2: !http2On, Debug: debugWriter(debug, errOut),
				Rules: rs, RuleRoot: repo.Root})
			if err != nil {
				return err
			}
			if rrep.Cut > 0 {
				fmt.Fprintf(errOut, "pab record: recovered the journal of an interrupted recording: %d exchanges kept, %d bytes of a partial one removed\n", rrep.Exchanges, rrep.Cut)
			} else if rrep.Exchanges > 0 {
				fmt.Fprintf(errOut, "pab record: going on with the journal of an earlier recording (%d exchanges)\n", rrep.Exchanges)
			}
			ln, err := record.Listen(listen)
			if err != nil {
				rec.Shutdown()
				return err
			}
			capture.print(errOut)
			fmt.Fprintf(errOut, "pab record: recording task %s on http://%s\n", id, ln.Addr())
			fmt.Fprintf(errOut, "pab record: CA %s\n", ca.CertPath())
			fmt.Fprintf(errOut, "pab record: journal %s, log %s\n", record.JournalPath(work), record.LogPath(work))
			fmt.Fprintln(errOut, "pab record: press Ctrl-C to stop and write the recording")
			served := make(chan error, 1)
			go func() { served <- rec.Serve(ln) }()
			var serveErr error
			select {
			case <-ctx.Done():
			case serveErr = <-served:
			}
			stop() // a second Ctrl-C kills the process; the journal stays recoverable
			fmt.Fprintln(errOut, "pab record: stopping")
			shutErr := rec.Shutdown()
			if serveErr == nil {
				serveErr = <-served
			}
			st := rec.Stats()
			fmt.Fprintf(errOut, "pab record: %d exchanges stored, %d not stored, %d upstream errors (see %s)\n",
				st.Stored, st.NotStored, st.UpstreamError, record.LogPath(work))
			if err := rec.StoreError(); err != nil {
				fmt.Fprintf(errOut, "pab record: %d requests were refused with 503 after the journal error: %v\n", st.Refused, err)
			}
			if shutErr != nil {
				return shutErr
			}
			if serveErr != nil {
				return serveErr
			}
			return finishRecording(cmd, repo, id, work, out, capture)
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

// checkOutDir accepts a --out path that does not exist yet or is an empty directory.
func checkOutDir(out string) error {
	fi, err := os.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record: --out %s: %w", out, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("record: --out %s exists and is not a directory", out)
	}
	des, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("record: --out %s: %w", out, err)
	}
	if len(des) > 0 {
		return fmt.Errorf("record: --out %s is not empty; give a new or empty directory", out)
	}
	return nil
}

// loadRoots is the system roots plus the certificates of the PEM file at path.
func loadRoots(path string) (*x509.CertPool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("upstream CA: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("upstream CA: read %s: %w", path, err)
	}
	if len(data) > maxCAFile {
		return nil, fmt.Errorf("upstream CA: %s is larger than %d bytes", path, maxCAFile)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("upstream CA: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// finishRecording writes the bundle from the journal in work: to out when set, else into
// tasks/ID/recording when the task has none, else to the cache with the merge command
// printed. The journal is removed once the bundle is written.
func finishRecording(cmd *cobra.Command, repo *task.Repo, id, work, out string, capture recordCapture) error {
	journal := record.JournalPath(work)
	fi, err := os.Stat(journal)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		fmt.Fprintln(cmd.ErrOrStderr(), "pab record: nothing was recorded; no bundle written")
		os.Remove(journal)
		return nil
	}
	if err != nil {
		return err
	}
	m := warc.Manifest{TaskID: id, Locale: capture.locale, Timezone: capture.timezone}
	stdout := cmd.OutOrStdout()
	if out != "" {
		rep, err := record.Build(journal, out, m)
		if err != nil {
			return err
		}
		printWarnings(cmd, rep)
		capture.printBuilt(cmd.ErrOrStderr(), rep)
		fmt.Fprintf(stdout, "recorded %d exchanges, %d pages into %s\n", rep.Exchanges, rep.Pages, out)
		return os.Remove(journal)
	}
	bundle := filepath.Join(work, "bundle-"+time.Now().UTC().Format("20060102T150405Z"))
	rep, err := record.Build(journal, bundle, m)
	if err != nil {
		return err
	}
	printWarnings(cmd, rep)
	capture.printBuilt(cmd.ErrOrStderr(), rep)
	fmt.Fprintf(stdout, "recorded %d exchanges, %d pages into %s\n", rep.Exchanges, rep.Pages, bundle)
	// The bundle now holds everything: the journal goes before the import, so that a
	// crash during the import can never import the same exchanges twice (--finish finds
	// nothing; the bundle is imported by hand, as the error says).
	if err := os.Remove(journal); err != nil {
		return err
	}
	// imported like any bundle: audited, merged with what the task has, rules inferred,
	// self-checked
	// holding the task's write lock (docs/record.md): another writer of the task is waited
	// for, or with --no-wait refused
	noWait, _ := cmd.Flags().GetBool("no-wait")
	if err := runImport(cmd, repo, id, []string{bundle}, importOptions{title: rep.Title, noWait: noWait}); err != nil {
		return fmt.Errorf("%w (the recording is kept in %s; import it with: pab import --task %s %s)", err, bundle, id, bundle)
	}
	os.RemoveAll(bundle)
	return nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func printWarnings(cmd *cobra.Command, rep *record.BuildReport) {
	for _, w := range rep.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "pab record: warning:", w)
	}
}

// recordCapture is the locale and time zone a recording gets (docs/record.md): the flags,
// else the browser's first Accept-Language tag (found when the bundle is built) and the
// machine's zone (record.MachineTimezone; tzFrom says where it came from).
type recordCapture struct {
	locale, timezone, tzFrom string
}

// print says at the start of a recording what the capture's locale and zone will be.
func (c recordCapture) print(w io.Writer) {
	loc := "the browser's (the first tag of its Accept-Language; --locale to set it)"
	if c.locale != "" {
		loc = c.locale + " (--locale)"
	}
	from := c.tzFrom
	if from == "unknown" {
		from = "the machine's zone is unknown"
	}
	fmt.Fprintf(w, "pab record: time zone %s (from %s; --timezone to set it), language %s\n", c.timezone, from, loc)
}

// printBuilt says which locale and zone the bundle's manifest got.
func (c recordCapture) printBuilt(w io.Writer, rep *record.BuildReport) {
	switch {
	case rep.Locale == "":
		fmt.Fprintf(w, "pab record: no request carried an Accept-Language: the recording has no locale (pab import --locale sets one); time zone %s\n", rep.Timezone)
	case rep.LocaleFrom != "":
		fmt.Fprintf(w, "pab record: locale %s (the browser's Accept-Language), time zone %s\n", rep.Locale, rep.Timezone)
	default:
		fmt.Fprintf(w, "pab record: locale %s, time zone %s\n", rep.Locale, rep.Timezone)
	}
}
