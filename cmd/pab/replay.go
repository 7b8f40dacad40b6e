package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/exposed"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
)

// session is an opened replay target: the bundle, its rules and its index.
type session struct {
	target *task.Target
	bundle *recording.Bundle
	rules  *rules.Set
	index  *replay.Index
	repo   *task.Repo
}

// opened is s as task.Open returned it.
func (s *session) opened() *task.Opened {
	return &task.Opened{Target: s.target, Bundle: s.bundle, Rules: s.rules, Index: s.index}
}

// close closes s as task.Opened.Close does: the saved index write ends first.
func (s *session) close() error { return s.opened().Close() }

// openServing opens a target to serve, as openSession does, and loads pab's CA from the
// repository's cache. When ctx ended while the target was being opened (Ctrl-C during an
// unpack), it closes the bundle and returns exitError 130. The caller closes s.bundle.
func openServing(ctx context.Context, g *globalFlags, arg string, errOut io.Writer) (*session, *tlsca.CA, error) {
	s, err := openSession(g, arg, errOut)
	if err != nil {
		return nil, nil, err
	}
	if ctx.Err() != nil {
		s.close()
		return nil, nil, exitError{code: 130, msg: "interrupted"}
	}
	ca, err := tlsca.LoadDefault()
	if err != nil {
		s.close()
		return nil, nil, err
	}
	return s, ca, nil
}

// openSession resolves arg (task id, task directory, bundle directory or WARC file) and
// opens it with the rules in effect and its index (task.Open), notes on errOut.
func openSession(g *globalFlags, arg string, errOut io.Writer) (*session, error) {
	repo, err := g.findRepo()
	if err != nil {
		return nil, err
	}
	o, err := task.Open(arg, repo, errOut)
	if err != nil {
		return nil, err
	}
	return &session{target: o.Target, bundle: o.Bundle, rules: o.Rules, index: o.Index, repo: repo}, nil
}

// replayFlags are pab replay's flags.
type replayFlags struct {
	listen, logPath, clock         string
	check, detRand, http2On, debug bool
}

func newReplayCmd(g *globalFlags) *cobra.Command {
	var rf replayFlags
	cmd := &cobra.Command{
		Use:   "replay [TARGET]",
		Short: "Serve a recording offline through an HTTP/HTTPS proxy",
		Long:  longHelp("replay"),
		Example: `  pab replay books-sapiens-price
  pab replay tasks/archive-org-jobs --listen 127.0.0.1:9000 --log replay.jsonl
  pab replay crawl.warc.gz --check
  curl --proxy http://127.0.0.1:8899 --cacert "$(pab ca)" http://books.toscrape.com/`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runReplay(cmd, g, &rf, args) },
	}
	cmd.Flags().StringVar(&rf.listen, "listen", "127.0.0.1:8899", "address the proxy listens on (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&rf.logPath, "log", "", "write one JSON line per request to this file (see docs/replay.md)")
	cmd.Flags().BoolVar(&rf.check, "check", false, "replay every recorded page once through the proxy, print hit rates and exit")
	cmd.Flags().StringVar(&rf.clock, "clock", "on", "page clock: on sets Date in every HTML page to the recording's time, off leaves pages alone (env RR_CLOCK=off)")
	cmd.Flags().BoolVar(&rf.detRand, "deterministic-random", false, "with the page clock, also make Math.random and crypto.getRandomValues repeatable per page")
	cmd.Flags().BoolVar(&rf.debug, "debug", false, "print the proxy's connection-level warnings to stderr: failed TLS handshakes, malformed requests, HTTP/2 protocol errors")
	cmd.Flags().BoolVar(&rf.http2On, "http2", true, "offer HTTP/2 inside HTTPS tunnels (ALPN h2); --http2=false answers over HTTP/1.1 only")
	return cmd
}

// runReplay is pab replay: it serves TARGET until Ctrl-C, or with --check replays every
// recorded page once and prints the hit rates.
func runReplay(cmd *cobra.Command, g *globalFlags, rf *replayFlags, args []string) error {
	target, err := replayTarget(g, args)
	if err != nil {
		return err
	}
	// Ctrl-C (or SIGTERM) stops the proxy cleanly, or stops an unpack or import
	// before the proxy starts, leaving nothing half-written.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, ca, err := openServing(ctx, g, target, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer s.close()
	listen := rf.listen
	if rf.check && !cmd.Flags().Changed("listen") {
		listen = "127.0.0.1:0" // a check needs no fixed port
	}
	clockOn, err := clockSetting(rf.clock, cmd.Flags().Changed("clock"), os.Getenv("RR_CLOCK"))
	if err != nil {
		return err
	}
	opts := replay.Options{Bundle: s.bundle, Index: s.index, Rules: s.rules, CA: ca,
		Clock: clockOn, DeterministicRandom: rf.detRand, DisableHTTP2: !rf.http2On,
		Debug: debugWriter(rf.debug, cmd.ErrOrStderr())}
	srv, ln, closeLog, err := startServing(s, opts, listen, rf.logPath, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer closeLog()
	errOut := cmd.ErrOrStderr()
	fmt.Fprintf(errOut, "pab replay: %s (%s, captured %s) on http://%s\n",
		s.target.Name, words.Count(s.bundle.Len(), "exchange"), s.bundle.Manifest.CapturedFrom, ln.Addr())
	fmt.Fprintf(errOut, "pab replay: CA %s\n", ca.CertPath())
	if w := exposed.Warning("pab replay", ln.Addr(), "the recording (every recorded page and cookie) and the control API (http://rr.control/)"); w != "" {
		fmt.Fprintln(errOut, w)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	if rf.check {
		rep, err := replay.Check(ctx, ln.Addr().String(), ca, s.bundle)
		srv.Close()
		<-served
		if err != nil {
			return err
		}
		rep.Print(cmd.OutOrStdout())
		return nil
	}
	fmt.Fprintln(errOut, "pab replay: press Ctrl-C to stop")
	select {
	case <-ctx.Done():
	case err := <-served:
		if err != nil {
			srv.Close()
			return err
		}
	}
	// requests in flight are answered and logged before the proxy closes
	sctx, cancel := context.WithTimeout(context.Background(), replay.DefaultShutdownWait)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	return nil
}

// startServing makes the replay server of s with opts and has it listen on listen. With
// logPath it also opens that log (only once the proxy listens, so a failed start keeps an
// old log) and names the recording in its header (setLogRecording); the returned func
// closes it. On error nothing is left open.
func startServing(s *session, opts replay.Options, listen, logPath string, errOut io.Writer) (*replay.Server, net.Listener, func(), error) {
	srv, err := replay.New(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	ln, err := srv.Listen(listen)
	if err != nil {
		return nil, nil, nil, err
	}
	if logPath == "" {
		return srv, ln, func() {}, nil
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		ln.Close()
		return nil, nil, nil, fmt.Errorf("open log: %w", err)
	}
	setLogRecording(srv, s, errOut)
	srv.SetLog(f)
	return srv, ln, func() { f.Close() }, nil
}

// clockSetting decides whether the page clock is on: the --clock flag when given (on or
// off), else RR_CLOCK (off turns it off; on, or unset, leaves it on).
func clockSetting(flag string, flagSet bool, env string) (bool, error) {
	v, from := flag, "--clock"
	if !flagSet && env != "" {
		v, from = env, "RR_CLOCK"
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("%s %q: want on or off", from, v)
}

// setLogRecording tells srv the hash of the recording s serves, so that the log it writes
// starts with a header naming it (replay.LogHeader) and pab grade can tell a log written
// against another recording. A recording that cannot be hashed is said on errOut and the
// log has no header.
func setLogRecording(srv *replay.Server, s *session, errOut io.Writer) {
	h, of, err := s.target.RecordingHash()
	if err != nil {
		fmt.Fprintf(errOut, "pab: the log will not name its recording: %v\n", err)
		return
	}
	srv.SetRecording(h, of)
}

// replayTarget is pab replay's TARGET: args[0], or, when it is omitted, the id of the one
// task of the repository. A repository with no task or several is an error naming them.
func replayTarget(g *globalFlags, args []string) (string, error) {
	if len(args) == 1 {
		return args[0], nil
	}
	repo, err := g.findRepo()
	if err != nil {
		return "", err
	}
	ids, err := repo.TaskIDs()
	if err != nil {
		return "", err
	}
	switch len(ids) {
	case 1:
		return ids[0], nil
	case 0:
		return "", fmt.Errorf("replay: give TARGET (%s holds no task)", repo.TasksDir())
	}
	list := strings.Join(ids[:min(len(ids), 5)], ", ")
	if len(ids) > 5 {
		list += ", ..."
	}
	return "", fmt.Errorf("replay: give TARGET (%s holds %d tasks: %s)", repo.TasksDir(), len(ids), list)
}
