package importer

// selfcheck.go: every recorded request replayed once offline, per rule layer, with the hit
// rates printed (docs/import.md).

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
)

// The self-check's sample (docs/import.md "After the import"): without Options.CheckAll a
// recording with more is checked on this many pages and this many other exchanges, evenly
// spaced in recording order, so a crawl of a million records is checked in seconds.
const (
	SelfCheckPages  = 1000
	SelfCheckOthers = 1000
)

// ruleLayer is one rule set the self-check replays with.
type ruleLayer struct {
	name string
	dirs []string // rule directories for rules.Load; none: the built-in defaults only
}

// beforeSelfCheck is called as the self-check begins (a hook for tests: one ends the
// context there, as Ctrl-C would).
var beforeSelfCheck = func() {}

// selfCheck replays the recorded requests of the bundle (all of them when all, else a
// sample: SelfCheckPages, SelfCheckOthers) once through an in-process replay proxy on
// 127.0.0.1:0, once per rule layer, and prints one hit-rate line per layer; progress on
// errOut (internal/progress).
func selfCheck(ctx context.Context, out, errOut io.Writer, repo *task.Repo, bundleDir string, layers []ruleLayer, all bool) error {
	beforeSelfCheck()
	// the sample alone is opened and indexed (replay.SampleBundle), so the check's memory
	// does not grow with the recording; --check-all opens and indexes everything
	var (
		b     *recording.Bundle
		of    *replay.CheckTotals
		total int
		err   error
	)
	if all {
		if b, err = recording.OpenBundle(bundleDir); err == nil {
			total = b.Len()
		}
	} else {
		b, of, total, err = replay.SampleBundle(bundleDir, SelfCheckPages, SelfCheckOthers)
	}
	if err != nil {
		return err
	}
	defer b.Close()
	ca, err := tlsca.LoadDefault()
	if err != nil {
		return err
	}
	said := false
	for _, l := range layers {
		rs, err := rules.Load(l.dirs...)
		if err != nil {
			return fmt.Errorf("self-check: %w", err)
		}
		m := progress.Start(errOut, "pab import: self-check ("+l.name+")", progress.Totals{Unit: "requests"}, 0, 0)
		rep, err := checkOnce(progress.NewContext(ctx, m), b, rs, ca, repo.Root, 0, 0)
		m.Stop()
		if err != nil {
			return fmt.Errorf("self-check (%s): %w", l.name, err)
		}
		if of != nil {
			rep.Of = of
		}
		if !said {
			said = true
			if rep.Of == nil {
				fmt.Fprintf(out, "self-check: every recorded request replayed once (%d exchanges)\n", total)
			} else {
				fmt.Fprintf(out, "self-check: a sample replayed once: %d of %d pages and %d of %d other requests, evenly spaced (%d exchanges; --check-all for every one)\n",
					rep.Pages, rep.Of.Pages, rep.Requests-rep.Pages, rep.Of.Others, total)
			}
		}
		c := rep.Counts.BySource
		fmt.Fprintf(out, "  %-22s hit rate %5.1f%%  (exact %d, search %d, promo %d, fuzzy %d, blocked %d, miss %d of %d requests)\n",
			l.name, 100*rep.HitRate(), c[replay.SourceExact], c[replay.SourceSearch], c[replay.SourcePromo], c[replay.SourceFuzzy],
			c[replay.SourceBlocked], c[replay.SourceMiss], rep.Counts.Total)
	}
	return nil
}

// checkOnce serves b with rs on a free loopback port and runs replay.CheckSample against it.
func checkOnce(ctx context.Context, b *recording.Bundle, rs *rules.Set, ca *tlsca.CA, ruleRoot string, maxPages, maxOthers int) (*replay.CheckReport, error) {
	srv, err := replay.New(replay.Options{Bundle: b, Rules: rs, CA: ca, RuleRoot: ruleRoot})
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	ln, err = srv.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	rep, err := replay.CheckSample(ctx, ln.Addr().String(), ca, b, maxPages, maxOthers)
	srv.Close()
	<-served
	return rep, err
}
