package task

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/warc"
)

// The saved index of a bundle (replay.IndexOptions.SavedIndex) lives in the cache at
// <cache>/indexes/<first 32 hex digits of the sha256 of the bundle directory's absolute
// path>.idx, one file per bundle, replaced when its key changes. Its key (savedIndexKey)
// is the sha256 of replay.SavedIndexVersion, the identity of the running pab executable
// (path, size, modification and status-change times, device, inode), the identity of each
// file the index is computed from (a format 3 recording's files, or an unpacked bundle's
// manifest.json, indexes/entries.jsonl and archive/data.warc: name, size, times, device,
// inode, as a hash stamp records them) and the path and bytes of every rule file in effect
// (the embedded _default by its path: the executable's identity covers it). Any
// difference means another key, so the index is computed again and the file rewritten.
// No saved index is used when one of these cannot be read, the platform gives no device
// and inode, or a file changed within stampRacyAge (it may change again without its times
// moving).
const (
	savedIndexDir = "indexes"
	// maxRuleFileBytes bounds a rule file read for the key; a larger one means no saved
	// index (rules.Load has its own, smaller limit).
	maxRuleFileBytes = 16 << 20
)

// savedIndexOptions returns the IndexOptions of the saved index of bundleDir (opened
// already) under rs (loaded already), with ok false when there is to be none (see above).
func savedIndexOptions(cacheDir, bundleDir string, rs *rules.Set) (replay.IndexOptions, bool) {
	abs, err := filepath.Abs(bundleDir)
	if err != nil {
		return replay.IndexOptions{}, false
	}
	key, ok := savedIndexKey(abs, rs, time.Now())
	if !ok {
		return replay.IndexOptions{}, false
	}
	sum := sha256.Sum256([]byte(abs))
	path := filepath.Join(cacheDir, savedIndexDir, hex.EncodeToString(sum[:16])+".idx")
	return replay.IndexOptions{SavedIndex: path, SavedKey: key}, true
}

// savedIndexKey computes the key described above for the bundle directory abs and the rules
// rs, as of now.
func savedIndexKey(abs string, rs *rules.Set, now time.Time) (replay.SavedIndexKey, bool) {
	exe, err := os.Executable()
	if err != nil {
		return replay.SavedIndexKey{}, false
	}
	files, err := warc.RecordingFiles(abs)
	if err != nil || len(files) == 0 || !warc.InPlaceArchive(files[len(files)-1]) {
		files = []string{filepath.Join(abs, warc.ManifestFile), filepath.Join(abs, warc.EntriesFile), filepath.Join(abs, warc.WARCFile)}
	}
	var ruleFiles []string
	for _, f := range rs.Files() {
		if f.Path != rules.EmbeddedDefaultPath {
			ruleFiles = append(ruleFiles, f.Path)
		}
	}
	ids, ok := statRecordingFiles(append(append([]string{exe}, files...), ruleFiles...))
	if !ok || racy(ids, now) {
		return replay.SavedIndexKey{}, false
	}
	h := sha256.New()
	fmt.Fprintf(h, "pab saved index %d\nexecutable %s\n", replay.SavedIndexVersion, exe)
	for _, id := range ids {
		fmt.Fprintf(h, "file %q %d %d %d %d %d\n", id.Name, id.Size, id.MTime, id.CTime, id.Dev, id.Ino)
	}
	for _, f := range rs.Files() {
		fmt.Fprintf(h, "rules %q\n", f.Path)
		if f.Path == rules.EmbeddedDefaultPath {
			continue
		}
		if !hashRuleFile(h, f.Path) {
			return replay.SavedIndexKey{}, false
		}
	}
	var key replay.SavedIndexKey
	h.Sum(key[:0])
	return key, true
}

// hashRuleFile writes the length and bytes of the file at path (at most maxRuleFileBytes) to
// w; false when it cannot be read or is larger.
func hashRuleFile(w io.Writer, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRuleFileBytes+1))
	if err != nil || len(data) > maxRuleFileBytes {
		return false
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	w.Write(n[:])
	w.Write(data)
	return true
}
