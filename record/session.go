package record

// session.go: one pab record session: the recorder started on a listener, the banner,
// serving until the context ends, the shutdown and its counts (docs/record.md).

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/pab-dev/pab/internal/exposed"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/syncwriter"
	"github.com/pab-dev/pab/internal/words"
)

// maxCAFile bounds an upstream CA file (LoadRoots), in bytes.
const maxCAFile = 1 << 20

// SessionOptions configure Session.
type SessionOptions struct {
	// Recorder are the recorder's options; Session sets its OnStoreError, and its Debug
	// when Debug is true, to write to Log.
	Recorder Options
	// TaskID names the task in the banner; Listen is the proxy's address (host:port, port
	// 0 picks a free one).
	TaskID, Listen string
	// Capture is the locale and zone the banner announces.
	Capture Capture
	// Debug sends the proxy's connection-level warnings to Log.
	Debug bool
	// Log receives the banner, the warnings and the closing counts, one line each
	// ("pab record: ..."); writes to it are serialized. Nil discards.
	Log io.Writer
	// Stopping, when set, is called once when the session stops serving, before the
	// shutdown (pab: a second Ctrl-C then kills the process; the journal stays
	// recoverable).
	Stopping func()
}

// Session records until ctx ends or serving fails: it starts a Recorder (New; a journal
// left in Recorder.WorkDir is recovered and said so on Log), listens on Listen, prints the
// banner, serves, then shuts down (exchanges in flight are finished) and prints the counts.
// The journal (JournalPath) then holds what was recorded, for Build. Errors are New's,
// Listen's, Shutdown's or Serve's.
func Session(ctx context.Context, o SessionOptions) error {
	log := io.Writer(syncwriter.New(io.Discard))
	if o.Log != nil {
		// the recorder reports a journal write error from a request's goroutine, while
		// this one prints too
		log = syncwriter.New(o.Log)
	}
	ro := o.Recorder
	ro.OnStoreError = func(err error, stored int) {
		fmt.Fprintf(log, "pab record: cannot store exchanges: %v; %s stored; later requests get 503, stop with Ctrl-C to write them\n", err, words.Count(stored, "exchange")+" "+words.Was(stored))
	}
	ro.Debug = nil
	if o.Debug {
		ro.Debug = log
	}
	// listen first: a port that is taken fails before the journal is made, so nothing is
	// left in the work directory
	ln, err := Listen(o.Listen)
	if err != nil {
		return err
	}
	rec, rrep, err := New(ro)
	if err != nil {
		ln.Close()
		return err
	}
	if rrep.Cut > 0 {
		fmt.Fprintf(log, "pab record: recovered the journal of an interrupted recording: %s kept, %s of a partial one removed\n", words.Count(rrep.Exchanges, "exchange"), words.Count(rrep.Cut, "byte"))
	} else if rrep.Exchanges > 0 {
		fmt.Fprintf(log, "pab record: going on with the journal of an earlier recording (%s)\n", words.Count(rrep.Exchanges, "exchange"))
	}
	work := ro.WorkDir
	o.Capture.Print(log)
	fmt.Fprintf(log, "pab record: recording task %s on http://%s\n", o.TaskID, ln.Addr())
	fmt.Fprintf(log, "pab record: CA %s\n", ro.CA.CertPath())
	if w := exposed.Warning("pab record", ln.Addr(), "the recording proxy: it forwards their requests to the internet from this machine and records them into the task"); w != "" {
		fmt.Fprintln(log, w)
	}
	fmt.Fprintf(log, "pab record: journal %s, log %s\n", JournalPath(work), LogPath(work))
	fmt.Fprintln(log, "pab record: press Ctrl-C to stop and write the recording")
	served := make(chan error, 1)
	go func() { served <- rec.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	if o.Stopping != nil {
		o.Stopping()
	}
	fmt.Fprintln(log, "pab record: stopping")
	shutErr := rec.Shutdown()
	if serveErr == nil {
		serveErr = <-served
	}
	st := rec.Stats()
	fmt.Fprintf(log, "pab record: %s stored, %d not stored, %s (see %s)\n",
		words.Count(st.Stored, "exchange"), st.NotStored, words.Count(st.UpstreamError, "upstream error"), LogPath(work))
	if err := rec.StoreError(); err != nil {
		fmt.Fprintf(log, "pab record: %d requests were refused with 503 after the journal error: %v\n", st.Refused, err)
	}
	if shutErr != nil {
		return shutErr
	}
	return serveErr
}

// Capture is the locale and time zone a recording gets (docs/record.md): the flags, else
// the browser's first Accept-Language tag (found when the bundle is built) and the
// machine's zone (MachineTimezone; TZFrom says where it came from, "--timezone" when
// given).
type Capture struct {
	Locale, Timezone, TZFrom string
}

// Print says at the start of a recording what the capture's locale and zone will be.
func (c Capture) Print(w io.Writer) {
	loc := "the browser's (the first tag of its Accept-Language; --locale to set it)"
	if c.Locale != "" {
		loc = c.Locale + " (--locale)"
	}
	from := c.TZFrom
	if from == "unknown" {
		from = "the machine's zone is unknown"
	}
	fmt.Fprintf(w, "pab record: time zone %s (from %s; --timezone to set it), language %s\n", c.Timezone, from, loc)
}

// PrintBuilt says which locale and zone the bundle's manifest got.
func (c Capture) PrintBuilt(w io.Writer, rep *BuildReport) {
	switch {
	case rep.Locale == "":
		fmt.Fprintf(w, "pab record: no request carried an Accept-Language: the recording has no locale (pab import --locale sets one); time zone %s\n", rep.Timezone)
	case rep.LocaleFrom != "":
		fmt.Fprintf(w, "pab record: locale %s (the browser's Accept-Language), time zone %s\n", rep.Locale, rep.Timezone)
	default:
		fmt.Fprintf(w, "pab record: locale %s, time zone %s\n", rep.Locale, rep.Timezone)
	}
}

// CheckOutDir accepts a bundle directory path that does not exist yet or is an empty
// directory. Its errors start with the path (the caller names the flag or field before it).
func CheckOutDir(out string) error {
	fi, err := os.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", out)
	}
	des, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	if len(des) > 0 {
		return fmt.Errorf("%s is not empty; give a new or empty directory", out)
	}
	return nil
}

// LoadRoots is the system roots plus the certificates of the PEM file at path, read up to
// 1 MiB. A larger file, or one without a PEM certificate, is an error naming it.
func LoadRoots(path string) (*x509.CertPool, error) {
	data, err := readlimit.File(path, maxCAFile)
	if err != nil {
		return nil, fmt.Errorf("upstream CA: %w", err)
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
