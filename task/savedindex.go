package task

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// The saved index of a bundle (replay.IndexOptions.SavedIndex) lives in the cache at
// <cache>/indexes/<first 32 hex digits of the sha256 of the bundle directory's absolute
// path>.idx, one file per bundle, replaced when its key changes. Its key (savedIndexKey)
// is the sha256 of replay.SavedIndexVersion, $GODEBUG (it changes how URLs parse), the
// identity of the running pab executable (/proc/self/exe: the inode that runs, even after
// the file at its path was replaced; size, modification and status-change times, device,
// inode), the identity of each file the index is computed from (a format 3 recording's
// files read in place, or an unpacked bundle's manifest.json, indexes/entries.jsonl and
// archive/data.warc: name, size, times, device, inode, as a hash stamp records them) and
// the path and SHA-256 of every rule file as rules.Load read it (rules.File.Digest). Any
// difference means another key, so the index is computed again and the file rewritten.
// No saved index is used when one of these cannot be read, the platform gives no device
// and inode, a recording file changed within stampRacyAge (it may change again without
// its times moving), or the recording files are not the ones they were just before the
// bundle was opened (a recording published while it was being read).
const savedIndexDir = "indexes"

// savedIndexPath is the saved index file of the bundle directory abs in cacheDir.
func savedIndexPath(cacheDir, abs string) string {
	return filepath.Join(cacheDir, savedIndexDir, pathDigest(abs, 16)+".idx")
}

// pathDigest is the first n bytes of the SHA-256 of the absolute path abs, in hex: the name
// of a cache file or directory kept for one directory (saved indexes, hash stamps, work
// directories), so that repositories sharing a cache never share one.
func pathDigest(abs string, n int) string {
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:n])
}

// indexInputs is the identity of the files the index of the bundle directory dir will be
// computed from, taken by Open just before it opens the bundle; ok false when any cannot
// be read.
func indexInputs(dir string) (files []stampFile, ok bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, false
	}
	return statRecordingFiles(recordingFilesOf(abs))
}

// recordingFilesOf lists the files the bundle at abs serves from: a format 3 recording's
// files when they are there to be read in place (recording.OpenBundle's choice), else an
// unpacked bundle's manifest, entries and WARC.
func recordingFilesOf(abs string) []string {
	files, err := recording.RecordingFiles(abs)
	if err == nil && len(files) > 0 && recording.InPlaceArchive(files[len(files)-1]) {
		if _, err := os.Stat(filepath.Join(abs, recording.WARCFile)); errors.Is(err, fs.ErrNotExist) {
			return files
		}
	}
	return []string{filepath.Join(abs, recording.ManifestFile), filepath.Join(abs, recording.EntriesFile), filepath.Join(abs, recording.WARCFile)}
}

// savedIndexOptions returns the IndexOptions of the saved index of bundleDir (opened
// already; before is indexInputs taken just before it was opened) under rs (loaded
// already), with ok false when there is to be none (see above).
func savedIndexOptions(cacheDir, bundleDir string, before []stampFile, rs *rules.Set) (replay.IndexOptions, bool) {
	abs, err := filepath.Abs(bundleDir)
	if err != nil || before == nil {
		return replay.IndexOptions{}, false
	}
	key, ok := savedIndexKey(abs, before, rs, time.Now())
	if !ok {
		return replay.IndexOptions{}, false
	}
	return replay.IndexOptions{SavedIndex: savedIndexPath(cacheDir, abs), SavedKey: key}, true
}

// savedIndexKey computes the key described above for the bundle directory abs, whose
// files were before when it was opened, and the rules rs, as of now.
func savedIndexKey(abs string, before []stampFile, rs *rules.Set, now time.Time) (replay.SavedIndexKey, bool) {
	exe, err := os.Executable()
	if err != nil {
		return replay.SavedIndexKey{}, false
	}
	running := "/proc/self/exe"
	if _, err := os.Stat(running); err != nil {
		running = exe
	}
	self, ok := statRecordingFiles([]string{running})
	if !ok {
		return replay.SavedIndexKey{}, false
	}
	ids, ok := statRecordingFiles(recordingFilesOf(abs))
	if !ok || !slices.Equal(ids, before) || racy(ids, now) {
		return replay.SavedIndexKey{}, false
	}
	h := sha256.New()
	fmt.Fprintf(h, "pab saved index %d\nGODEBUG %q\nexecutable %s\n", replay.SavedIndexVersion, os.Getenv("GODEBUG"), exe)
	for _, id := range append(self, ids...) {
		fmt.Fprintf(h, "file %q %d %d %d %d %d\n", id.Name, id.Size, id.MTime, id.CTime, id.Dev, id.Ino)
	}
	for _, f := range rs.Files() {
		fmt.Fprintf(h, "rules %q %x\n", f.Path, f.Digest)
	}
	var key replay.SavedIndexKey
	h.Sum(key[:0])
	return key, true
}

// CheckSavedIndex reads the whole saved index of tgt's bundle in repo's cache, as pab audit
// does: the header (replay.OpenSavedIndex), every list item and record
// (replay.SavedIndex.Verify) and every entry of the entry table it carries. It returns the
// file's path, "" when there is no saved index of the current key (none was written yet,
// the recording's files changed within the last seconds, or the file is of other inputs and
// is replaced on the next start), and the damage found, nil when there is none. A damaged
// file is removed, so the next start computes the index again.
func CheckSavedIndex(tgt *Target, repo *Repo) (string, error) {
	before, ok := indexInputs(tgt.BundleDir)
	if !ok {
		return "", nil
	}
	rs, err := rules.Load(tgt.RulesDirs...)
	if err != nil {
		return "", nil // the rules are audited apart; with no rules there is no key
	}
	opts, ok := savedIndexOptions(repo.CacheDir(), tgt.BundleDir, before, rs)
	if !ok {
		return "", nil
	}
	fi, err := os.Stat(opts.SavedIndex)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	s, err := replay.OpenSavedIndex(opts.SavedIndex, opts.SavedKey)
	if errors.Is(err, replay.ErrSavedIndexStale) {
		return "", nil
	}
	if err == nil {
		err = s.Verify()
		if err == nil {
			err = checkTable(tgt.BundleDir, s)
		}
		s.Close()
	}
	if err != nil {
		if now, serr := os.Stat(opts.SavedIndex); serr == nil && fi != nil && os.SameFile(fi, now) {
			os.Remove(opts.SavedIndex)
		}
		return opts.SavedIndex, err
	}
	return opts.SavedIndex, nil
}

// checkTable decodes every entry of the entry table s carries.
func checkTable(bundleDir string, s *replay.SavedIndex) error {
	b, err := recording.OpenBundleTable(bundleDir, s.Table(), s.Path())
	if err != nil {
		return err
	}
	defer b.Close()
	for i := 0; i < b.Len(); i++ {
		if _, err := b.EntryErr(i); err != nil {
			return fmt.Errorf("entry table: %w", err)
		}
	}
	return nil
}
