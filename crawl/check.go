package crawl

// check.go: the replay pab check runs on a free loopback port, and the crawl of it through
// headless Chromium (docs/replay.md, "pab check TARGET --crawl").

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	pbrowser "github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/tlsca"
)

// ErrInterrupted is Browse's error when its context ended while Chromium was starting.
var ErrInterrupted = errors.New("crawl: interrupted while Chromium was starting")

// ReplayOptions configure StartReplay: the replay.Options of the same names.
type ReplayOptions struct {
	Bundle *recording.Bundle
	Index  *replay.Index
	Rules  *rules.Set
	CA     *tlsca.CA
	// Clock and DeterministicRandom are replay's page clock and repeatable randomness.
	Clock, DeterministicRandom bool
	// LogPath, when set, is a file created (or truncated) that receives a copy of replay's
	// log (one JSON line per request).
	LogPath string
}

// Replay is a replay server on a free port of 127.0.0.1 whose log feeds Tap.
type Replay struct {
	// Addr is the host:port the replay proxy listens on.
	Addr string
	// Tap receives the replay's log, for Run.
	Tap *Tap

	ca     *tlsca.CA
	bundle *recording.Bundle
	log    *os.File
	srv    *replay.Server
	served chan error
}

// StartReplay serves o.Bundle on 127.0.0.1:0 (replay.New with o). Errors are opening
// LogPath's ("open log: ..."), replay.New's and the listener's. Close stops it.
func StartReplay(o ReplayOptions) (*Replay, error) {
	r := &Replay{Tap: NewTap(), ca: o.CA, bundle: o.Bundle, served: make(chan error, 1)}
	var logW io.Writer = r.Tap
	if o.LogPath != "" {
		f, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open log: %w", err)
		}
		r.log, logW = f, io.MultiWriter(r.Tap, f)
	}
	srv, err := replay.New(replay.Options{Bundle: o.Bundle, Index: o.Index, Rules: o.Rules, CA: o.CA,
		Clock: o.Clock, DeterministicRandom: o.DeterministicRandom, Log: logW})
	if err == nil {
		r.srv = srv
		var ln net.Listener
		if ln, err = srv.Listen("127.0.0.1:0"); err == nil {
			r.Addr = ln.Addr().String()
			go func() { r.served <- srv.Serve(ln) }()
			return r, nil
		}
	}
	if r.log != nil {
		r.log.Close()
	}
	return nil, err
}

// Close stops the replay, waits for its Serve to return and closes the log file.
func (r *Replay) Close() {
	r.srv.Close()
	<-r.served
	if r.log != nil {
		r.log.Close()
	}
}

// Check is replay.Check against the replay: every recorded page and exchange requested
// once by a Go client.
func (r *Replay) Check(ctx context.Context) (*replay.CheckReport, error) {
	return replay.Check(ctx, r.Addr, r.ca, r.bundle)
}

// Browse starts the Chromium at exe (internal/browser.Start with setup, its proxy the
// replay and its SPKI the replay's CA), crawls the replay through it (Run with o, its CDP,
// Bundle and Tap set here), and stops Chromium. When ctx ends during the start the error
// is ErrInterrupted; when it ends during the crawl, Run's report of the pages done so far
// comes with ctx's error.
func (r *Replay) Browse(ctx context.Context, exe string, setup pbrowser.Options, o Options) (*Report, error) {
	setup.Proxy, setup.SPKI = r.Addr, r.ca.SPKIHash()
	b, err := pbrowser.Start(ctx, exe, setup, "", "")
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		return nil, err
	}
	defer b.Stop()
	o.CDP, o.Bundle, o.Tap, o.Clock = b.CDP, r.bundle, r.Tap, r.srv.Clock()
	return Run(ctx, o)
}

// BrowseTyped is Browse for typed URLs: Typed instead of Run.
func (r *Replay) BrowseTyped(ctx context.Context, exe string, setup pbrowser.Options, o Options, urls []TypedURL) (*TypedReport, error) {
	setup.Proxy, setup.SPKI = r.Addr, r.ca.SPKIHash()
	b, err := pbrowser.Start(ctx, exe, setup, "", "")
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		return nil, err
	}
	defer b.Stop()
	o.CDP, o.Bundle, o.Tap, o.Clock = b.CDP, r.bundle, r.Tap, r.srv.Clock()
	return Typed(ctx, o, urls)
}
