package task

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pab-dev/pab/internal/filelock"
	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// Opened is a replay target opened for serving: its bundle, the rules in effect and the
// lookup index built from them. The caller calls Close.
type Opened struct {
	Target *Target
	Bundle *recording.Bundle
	Rules  *rules.Set
	Index  *replay.Index
}

// Close ends the saved index write Open may have started (Index.WaitSaved: written now
// when it still waits for its delay), so that nothing writes into the cache after Close,
// then closes the bundle and returns its error.
func (o *Opened) Close() error {
	if o.Index != nil {
		o.Index.WaitSaved()
	}
	err := o.Bundle.Close()
	if o.Index != nil {
		o.Index.Close() // unmaps a saved index read in place: after the bundle that reads it
	}
	return err
}

// Open resolves arg (a task id, task directory, bundle directory, WARC or WACZ file;
// Resolve), writes the target's warnings to notes, opens its bundle (OpenBundle), loads the
// rules of its RulesDirs and builds the index (replay.NewIndex, rule locations relative to
// repo.Root; read from the saved index in repo's cache when the recording, the rules and
// pab are unchanged since it was saved, see savedindex.go): what every command that serves
// or inspects a target does first. On error nothing stays open.
func Open(arg string, repo *Repo, notes io.Writer) (*Opened, error) {
	tgt, err := Resolve(arg, repo)
	if err != nil {
		return nil, err
	}
	for _, w := range tgt.Warnings {
		fmt.Fprintln(notes, w)
	}
	if o := openSaved(tgt, repo); o != nil {
		return o, nil
	}
	if o := openBuilt(tgt, repo, notes); o != nil {
		return o, nil
	}
	var before []stampFile
	tgt, b, err := openBundle(arg, repo, notes, false, func(dir string) { before, _ = indexInputs(dir) })
	if err != nil {
		return nil, err
	}
	rs, err := rules.Load(tgt.RulesDirs...)
	if err != nil {
		b.Close()
		return nil, err
	}
	opts, _ := savedIndexOptions(repo.CacheDir(), tgt.BundleDir, before, rs)
	opts.RuleRoot = repo.Root
	idx, err := replay.NewIndex(b, rs, opts)
	if err != nil {
		b.Close()
		return nil, err
	}
	return &Opened{Target: tgt, Bundle: b, Rules: rs, Index: idx}, nil
}

// openSaved opens tgt from its saved index in place, when there is one of the current key
// (savedindex.go): the bundle from the entry table the file carries
// (recording.OpenBundleTable), the index from its lookup lists, so that nothing is read per
// entry. It returns nil when there is none, or it cannot be used (the caller then opens
// the bundle and computes the index, which rewrites the file).
func openSaved(tgt *Target, repo *Repo) *Opened {
	before, ok := indexInputs(tgt.BundleDir)
	if !ok {
		return nil
	}
	rs, err := rules.Load(tgt.RulesDirs...)
	if err != nil {
		return nil
	}
	opts, ok := savedIndexOptions(repo.CacheDir(), tgt.BundleDir, before, rs)
	if !ok {
		return nil
	}
	return openSavedFile(tgt, repo, rs, before, opts.SavedIndex, opts.SavedKey)
}

// openSavedFile opens tgt from the saved index file path of key, computed under rs from
// the recording files before: nil when the file cannot be used or the files are no longer
// those.
func openSavedFile(tgt *Target, repo *Repo, rs *rules.Set, before []stampFile, path string, key replay.SavedIndexKey) *Opened {
	s, err := replay.OpenSavedIndex(path, key)
	if err != nil {
		return nil
	}
	b, err := recording.OpenBundleTable(tgt.BundleDir, s.Table(), path)
	if err != nil {
		s.Close()
		return nil
	}
	// the recording's files must be the ones the key was computed from still
	if after, ok := indexInputs(tgt.BundleDir); !ok || !slices.Equal(after, before) {
		b.Close()
		s.Close()
		return nil
	}
	idx, err := replay.NewIndex(b, rs, replay.IndexOptions{RuleRoot: repo.Root, Opened: s})
	if err != nil {
		b.Close()
		s.Close()
		return nil
	}
	return &Opened{Target: tgt, Bundle: b, Rules: rs, Index: idx}
}

// streamIndexBytes is the size of a recording's entries file (entries.jsonl.gz of a
// format 3 recording; an unpacked bundle's entries.jsonl counts a tenth, about what gzip
// makes of it) from which the first start builds the saved index one entry at a time
// (replay.BuildSavedIndex) instead of opening the recording with its entries in memory:
// about 47,000 entries of bench/scale's crawl (89 bytes an entry, gzipped). Below it the
// in-memory start takes well under a second and a few hundred MB at most (0.18 s for the
// 20,000-entry bench recording) and starts serving before the file is written; above it,
// its memory grows by about 5 KB an entry (docs/replay.md, "The first start"). A variable
// for tests.
var streamIndexBytes int64 = 4 << 20

// openBuilt is the first start of a large recording (see streamIndexBytes) with no saved
// index of the current key: it builds the saved index (replay.BuildSavedIndex) and opens tgt
// from it as openSaved does, so that what the start takes in memory does not grow with
// the entries (docs/replay.md, "The first start"). When the recording's files changed
// within the last seconds (no key is given then, savedindex.go), the file is one of this
// start's only, removed once it is mapped; otherwise the build holds the lock <file>.lock
// (lockBuild), so that starts side by side build it once. It returns nil for a recording
// below the size, a cache where no file can be written, a recording that changed while it
// was read or one that cannot be opened (the caller then opens it as a small one is, which
// says why).
func openBuilt(tgt *Target, repo *Repo, notes io.Writer) *Opened {
	before, ok := indexInputs(tgt.BundleDir)
	if !ok || entriesFileBytes(before) < streamIndexBytes {
		return nil
	}
	rs, err := rules.Load(tgt.RulesDirs...)
	if err != nil {
		return nil // the caller reports it
	}
	abs, err := filepath.Abs(tgt.BundleDir)
	if err != nil {
		return nil
	}
	path := savedIndexPath(repo.CacheDir(), abs)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil
	}
	key, keep := savedIndexKey(abs, before, rs, time.Now())
	if !keep {
		f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-start-*")
		if err != nil {
			return nil
		}
		f.Close()
		path = f.Name()
		defer os.Remove(path) // once mapped (or not used), the file is not needed
	} else if unlock := lockBuild(path+".lock", buildLockWait, func() {
		fmt.Fprintf(notes, "pab: another pab is building the saved index of %s; waiting for it (at most %v)\n", tgt.BundleDir, buildLockWait)
	}); unlock != nil {
		// one build at a time: starts of the same recording side by side (pab run) wait
		// for the first and read what it wrote
		defer unlock()
		if o := openSavedFile(tgt, repo, rs, before, path, key); o != nil {
			return o
		}
	}
	savedIndexBuilds.Add(1)
	if err := replay.BuildSavedIndex(path, key, tgt.BundleDir, rs); err != nil {
		// a recording that does not open, or a cache that fills up: the in-memory start
		// gives the recording's error (the same words) or serves without a saved index
		return nil
	}
	return openSavedFile(tgt, repo, rs, before, path, key)
}

// buildLockWait bounds how long a start waits for another process's build of the same
// saved index (openBuilt) before it builds its own: far longer than a build takes (5 s at
// 10^6 entries), so that only a build that hangs (a stopped process) is not waited for.
const buildLockWait = 5 * time.Minute

// lockBuild takes the lock file path, waiting at most wait while another process holds it
// (waiting, when not nil, is called once, as the wait begins); it returns the unlock
// function, or nil when the lock could not be had (the caller then goes on without it:
// two builds of one file are only work done twice).
func lockBuild(path string, wait time.Duration, waiting func()) func() {
	deadline := time.Now().Add(wait)
	for first := true; ; first = false {
		unlock, err := filelock.TryLock(path)
		if err == nil {
			return unlock
		}
		if !errors.Is(err, filelock.ErrLocked) || time.Now().After(deadline) {
			return nil
		}
		if first && waiting != nil {
			waiting()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// savedIndexBuilds counts the saved indexes openBuilt built in this process (for tests).
var savedIndexBuilds atomic.Int64

// entriesFileBytes is the size of the entries file among a recording's files (indexInputs),
// an unpacked bundle's counted a tenth.
func entriesFileBytes(files []stampFile) int64 {
	for _, f := range files {
		switch filepath.Base(f.Name) {
		case recording.RecordingEntriesFile:
			return f.Size
		case filepath.Base(recording.EntriesFile):
			return f.Size / 10
		}
	}
	return 0
}

// OpenBundle resolves arg as Open does and opens its bundle, without rules or index (the
// target's warnings are not written). An unpacked copy in repo's cache that cannot be
// opened (cut short by a crash or a full disk, edited by hand) is removed and made again,
// with one line on notes saying so. The caller closes the bundle.
func OpenBundle(arg string, repo *Repo, notes io.Writer) (*Target, *recording.Bundle, error) {
	return openBundle(arg, repo, notes, false, nil)
}

// openBundle is OpenBundle, writing the target's warnings when warnings is set and calling
// before (when not nil) with the bundle directory just before each time it is opened.
func openBundle(arg string, repo *Repo, notes io.Writer, warnings bool, before func(dir string)) (*Target, *recording.Bundle, error) {
	open := func(dir string) (*recording.Bundle, error) {
		if before != nil {
			before(dir)
		}
		return recording.OpenBundle(dir)
	}
	tgt, err := Resolve(arg, repo)
	if err != nil {
		return nil, nil, err
	}
	if warnings {
		for _, w := range tgt.Warnings {
			fmt.Fprintln(notes, w)
		}
	}
	b, err := open(tgt.BundleDir)
	if err != nil && pathx.Within(tgt.BundleDir, repo.CacheDir()) {
		fmt.Fprintf(notes, "pab: the unpacked copy in %s is damaged (%v); unpacking it again\n", tgt.BundleDir, err)
		if err = os.RemoveAll(tgt.BundleDir); err == nil {
			if tgt, err = Resolve(arg, repo); err == nil {
				b, err = open(tgt.BundleDir)
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return tgt, b, nil
}

// Locale returns the language (a BCP 47 tag, "en-GB") and IANA time zone
// ("Europe/London") a browser gets for the replay of a recording: the manifest's locale and
// timezone, else those of the task card's capture section (card may be nil); "" where
// neither says.
func Locale(m recording.Manifest, card *Card) (locale, timezone string) {
	locale, timezone = m.Locale, m.Timezone
	if card != nil && card.Capture != nil {
		locale = cmp.Or(locale, card.Capture.Locale)
		timezone = cmp.Or(timezone, card.Capture.Timezone)
	}
	return locale, timezone
}
