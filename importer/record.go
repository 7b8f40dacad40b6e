package importer

// record.go: the end of a pab record session: the bundle built from the journal, then
// imported into the task (docs/record.md).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/record"
	"github.com/pab-dev/pab/recording"
)

// FinishOptions say where FinishRecording puts what a recording session left.
type FinishOptions struct {
	// Import gives the task (Repo, TaskID), NoWait, Signals, Out and ErrOut of the import;
	// its other fields are FinishRecording's: the bundle, its title, "pab record", and
	// never Replace, PreferNew, NoCheck, Locale or Timezone (a recording is merged and
	// self-checked; its manifest has the capture already).
	Import Options
	// WorkDir holds the session's journal (record.JournalPath).
	WorkDir string
	// OutDir, when set, receives the bundle, and nothing is imported.
	OutDir string
	// Capture is the locale and zone the manifest gets ("": the browser's / none).
	Capture record.Capture
}

// FinishRecording builds the bundle from the journal in o.WorkDir (record.Build): to
// o.OutDir when set, else into a directory beside the journal, which is then imported into
// the task as pab import would (Run: audited, merged with what the task has, rules
// inferred, self-checked, holding the task's write lock) and removed. The journal is
// removed once the bundle is written; an empty or missing journal writes nothing. When the
// import fails the bundle is kept and the error says how to import it by hand.
func FinishRecording(ctx context.Context, o FinishOptions) error {
	out, errOut := orDiscard(o.Import.Out), orDiscard(o.Import.ErrOut)
	id := o.Import.TaskID
	journal := record.JournalPath(o.WorkDir)
	fi, err := os.Stat(journal)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		fmt.Fprintln(errOut, "pab record: nothing was recorded; no bundle written")
		os.Remove(journal)
		return nil
	}
	if err != nil {
		return err
	}
	m := recording.Manifest{TaskID: id, Locale: o.Capture.Locale, Timezone: o.Capture.Timezone}
	bundle := o.OutDir
	if bundle == "" {
		bundle = filepath.Join(o.WorkDir, "bundle-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	rep, err := record.Build(journal, bundle, m)
	if err != nil {
		return err
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(errOut, "pab record: warning:", w)
	}
	o.Capture.PrintBuilt(errOut, rep)
	fmt.Fprintf(out, "recorded %s, %s into %s\n", words.Count(rep.Exchanges, "exchange"), words.Count(rep.Pages, "page"), bundle)
	// The bundle now holds everything: the journal goes before the import, so that a
	// crash during the import can never import the same exchanges twice (--finish finds
	// nothing; the bundle is imported by hand, as the error says).
	if err := os.Remove(journal); err != nil || o.OutDir != "" {
		return err
	}
	// imported like any bundle, holding the task's write lock (docs/record.md): another
	// writer of the task is waited for, or with NoWait refused
	imp := o.Import
	imp.Inputs, imp.Title, imp.Command = []string{bundle}, rep.Title, "pab record"
	imp.Replace, imp.PreferNew, imp.NoCheck, imp.Locale, imp.Timezone = false, false, false, "", ""
	if _, err := Run(ctx, imp); err != nil {
		return fmt.Errorf("%w (the recording is kept in %s; import it with: pab import --task %s %s)", err, bundle, id, bundle)
	}
	os.RemoveAll(bundle)
	return nil
}
