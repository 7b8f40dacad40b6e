package crawl

// check.go: the replay pab check runs on a free loopback port, and the crawl of it through
// headless Chromium (docs/replay.md, "pab check TARGET --crawl").

import (
	"context"
	"errors"
	"io"

	pbrowser "github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/tlsca"
	"github.com/pab-dev/pab/warc"
)

// ErrInterrupted is Browse's error when its context ended while Chromium was starting.
var ErrInterrupted = errors.New("crawl: interrupted while Chromium was starting")

// ReplayOptions configure StartReplay: the replay.Options of the same names.
type ReplayOptions struct {
	Bundle *warc.Bundle
	Index  *replay.Index
	Rules  *rules.Set
	CA     *tlsca.CA
	// Clock and DeterministicRandom are replay's page clock and repeatable randomness.
	Clock, DeterministicRandom bool
	// Log, when set, receives a copy of replay's log (one JSON line per request).
	Log io.Writer
}

// Replay is a replay server on a free port of 127.0.0.1 whose log feeds Tap.
type Replay struct {
	// Addr is the host:port the replay proxy listens on.
	Addr string
	// Tap receives the replay's log, for Run.
	Tap *Tap

	ca     *tlsca.CA
	bundle *warc.Bundle
	srv    *replay.Server
	served chan error
}

// StartReplay serves o.Bundle on 127.0.0.1:0 (replay.New with o). Errors are replay.New's
// and the listener's. Close stops it.
func StartReplay(o ReplayOptions) (*Replay, error) {
	r := &Replay{Tap: NewTap(), ca: o.CA, bundle: o.Bundle, served: make(chan error, 1)}
	var logW io.Writer = r.Tap
	if o.Log != nil {
		logW = io.MultiWriter(r.Tap, o.Log)
	}
	srv, err := replay.New(replay.Options{Bundle: o.Bundle, Index: o.Index, Rules: o.Rules, CA: o.CA,
		Clock: o.Clock, DeterministicRandom: o.DeterministicRandom, Log: logW})
	if err != nil {
		return nil, err
	}
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.srv, r.Addr = srv, ln.Addr().String()
	go func() { r.served <- srv.Serve(ln) }()
	return r, nil
}

// Close stops the replay and waits for its Serve to return.
func (r *Replay) Close() {
	r.srv.Close()
	<-r.served
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
	o.CDP, o.Bundle, o.Tap = b.CDP, r.bundle, r.Tap
	return Run(ctx, o)
}
