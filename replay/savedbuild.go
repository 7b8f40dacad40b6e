package replay

// savedbuild.go: the saved index computed and written one entry at a time, for the first
// start of a recording too large to open with its entries in memory (docs/replay.md, "The
// first start"): the memory it takes grows by about SavedIndexMemory bytes an entry, not
// by the entries.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// buildChunk is how many entries BuildSavedIndex computes at a time (in parallel) before
// it writes their records: what it holds of the entries themselves.
const buildChunk = 8192

// SavedIndexMemory is about how many bytes of memory BuildSavedIndex takes for each entry
// of the recording: recording.EntryTableMemory while it writes the entry table, then 8
// for the record offset and 16 for each list item (three or four) of an indexed entry.
const SavedIndexMemory = recording.EntryTableMemory

// BuildSavedIndex computes the index of the bundle directory or format 3 recording dir
// under rs and writes it as the saved index file path under key: the same bytes NewIndex
// writes for the same recording, rules and key (IndexOptions.SavedIndex), without opening
// the recording with its entries in memory. It writes the entry table from the entries
// file (recording.WriteEntryTable), opens the bundle from it, computes the entries'
// records buildChunk at a time and writes the file from the parts, so that the memory it
// takes is about SavedIndexMemory bytes an entry plus one chunk of entries; the parts are
// temporary files next to path, and the file is written atomically (a temporary file
// renamed over path; a crash leaves temporary files that a later write removes,
// removeStaleTemps). Errors name the recording's file and entry as recording.OpenBundle's
// do.
func BuildSavedIndex(path string, key SavedIndexKey, dir string, rs *rules.Set) error {
	tmpDir := filepath.Dir(path)
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return err
	}
	removeStaleTemps(path, time.Now())
	// the temporary files are named as atomicfile names its own, so that removeStaleTemps
	// removes those a crash left
	temp := func(what string) (*os.File, error) {
		f, err := os.CreateTemp(tmpDir, "."+filepath.Base(path)+".tmp-"+what+"-*")
		if err != nil {
			return nil, fmt.Errorf("saved index: %w", err)
		}
		return f, nil
	}
	drop := func(f *os.File) {
		f.Close()
		os.Remove(f.Name())
	}

	tf, err := temp("table")
	if err != nil {
		return err
	}
	defer drop(tf)
	n, err := recording.WriteEntryTable(dir, tmpDir, "."+filepath.Base(path)+".tmp-blob-*", tf)
	if err != nil {
		return err
	}
	mp, err := mapFile(tf.Name(), maxSavedIndexBytes)
	if err != nil {
		return fmt.Errorf("saved index: %w", err)
	}
	defer mp.close()
	// errors of entries read from the table name the file being built, not the temporary
	// table (an entry that cannot be read is left out with its error as the reason)
	b, err := recording.OpenBundleTable(dir, mp.data, path)
	if err != nil {
		return err
	}
	defer b.Close()
	if b.Len() != n {
		return fmt.Errorf("saved index: the entry table of %s holds %d entries, %d were written", dir, b.Len(), n)
	}

	rf, err := temp("records")
	if err != nil {
		return err
	}
	defer drop(rf)
	rw := bufio.NewWriterSize(rf, 256<<10)
	w := newDiskWriter(rw, n)
	ix := &Index{b: b, rs: rs}
	out := make([]built, min(n, buildChunk))
	for lo := 0; lo < n; lo += buildChunk {
		chunk := out[:min(n-lo, buildChunk)]
		clear(chunk)
		ix.buildRange(chunk, lo, b.DecodeEntry)
		for k := range chunk {
			if err := w.add(lo+k, &chunk[k]); err != nil {
				return err
			}
		}
	}
	if err := rw.Flush(); err != nil {
		return fmt.Errorf("saved index: %w", err)
	}
	if _, err := rf.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("saved index: %w", err)
	}
	p, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	if err := w.finish(p, key, bytes.NewReader(mp.data), int64(len(mp.data)), rf); err != nil {
		p.Abort()
		return err
	}
	return p.Commit(0o644)
}
