package importer

// selfcheck.go: every recorded request replayed once offline, per rule layer, with the hit
// rates printed (docs/import.md).

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
	"github.com/pab-dev/pab/warc"
)

// ruleLayer is one rule set the self-check replays with.
type ruleLayer struct {
	name string
	dirs []string // rule directories for rules.Load; none: the built-in defaults only
}

// beforeSelfCheck is called as the self-check begins (a hook for tests: one ends the
// context there, as Ctrl-C would).
var beforeSelfCheck = func() {}

// selfCheck replays every recorded request of the bundle once through an in-process replay
// proxy on 127.0.0.1:0, once per rule layer, and prints one hit-rate line per layer.
func selfCheck(ctx context.Context, out, errOut io.Writer, repo *task.Repo, bundleDir string, layers []ruleLayer) error {
	beforeSelfCheck()
	b, err := warc.OpenBundle(bundleDir)
	if err != nil {
		return err
	}
	defer b.Close()
	ca, err := tlsca.LoadDefault()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "self-check: every recorded request replayed once (%s)\n", words.Count(b.Len(), "exchange"))
	for _, l := range layers {
		rs, err := rules.Load(l.dirs...)
		if err != nil {
			return fmt.Errorf("self-check: %w", err)
		}
		m := progress.Start(errOut, "pab import: self-check ("+l.name+")", progress.Totals{Records: int64(replay.CheckRequests(b)), Unit: "requests"}, 0, 0)
		rep, err := checkOnce(progress.NewContext(ctx, m), b, rs, ca, repo.Root)
		m.Stop()
		if err != nil {
			return fmt.Errorf("self-check (%s): %w", l.name, err)
		}
		c := rep.Counts.BySource
		fmt.Fprintf(out, "  %-22s hit rate %5.1f%%  (exact %d, search %d, promo %d, fuzzy %d, blocked %d, miss %d of %d requests)\n",
			l.name, 100*rep.HitRate(), c[replay.SourceExact], c[replay.SourceSearch], c[replay.SourcePromo], c[replay.SourceFuzzy],
			c[replay.SourceBlocked], c[replay.SourceMiss], rep.Counts.Total)
	}
	return nil
}

// checkOnce serves b with rs on a free loopback port and runs replay.Check against it.
func checkOnce(ctx context.Context, b *warc.Bundle, rs *rules.Set, ca *tlsca.CA, ruleRoot string) (*replay.CheckReport, error) {
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
	rep, err := replay.Check(ctx, ln.Addr().String(), ca, b)
	srv.Close()
	<-served
	return rep, err
}
