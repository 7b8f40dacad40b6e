package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/recording"
)

// A hash stamp lets a start skip recording.HashRecording (reading the whole packed recording)
// when the recording has not changed since it was last hashed. It lives in the cache, at
// <cache>/stamps/<first 32 hex digits of the sha256 of the recording directory's absolute
// path>.json, and records the directory, each recording file's base name, size,
// modification and status-change times (nanoseconds), device and inode, and the hash.
// The stamp is used only when all of these are equal now; any difference, a stamp that
// cannot be read or decoded, or one for another directory means hashing again (and
// writing a new stamp). Stamps are written to a temporary file and renamed into place, so
// a reader sees a whole stamp or none.
const (
	stampsDir     = "stamps"
	stampVersion  = 1
	maxStampBytes = 1 << 20
)

// stampRacyAge: a file changed this recently may change again within the file system's
// time granularity without its times moving, so no stamp is written for it yet (the next
// start hashes again and writes one). A variable for the tests.
var stampRacyAge = 3 * time.Second

// stampFile is the identity of one recording file as recorded in a stamp.
type stampFile struct {
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime"` // Unix nanoseconds
	CTime int64  `json:"ctime"` // Unix nanoseconds
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
}

// hashStamp is the content of a stamp file.
type hashStamp struct {
	Version   int         `json:"version"`
	Recording string      `json:"recording"`
	Files     []stampFile `json:"files"`
	Hash      string      `json:"hash"`
}

// recordingHash returns recording.HashRecording(rec) for the recording files files (as listed
// by recording.RecordingFiles), taken from the stamp in cacheDir when it matches the files and
// computed (and stamped) otherwise. A failure to read or write the stamp is never an
// error: it only costs a hash.
func recordingHash(cacheDir, rec string, files []string) (string, error) {
	abs, err := filepath.Abs(rec)
	if err != nil {
		abs = rec
	}
	path := filepath.Join(cacheDir, stampsDir, pathDigest(abs, 16)+".json")

	before, ok := statRecordingFiles(files)
	if ok {
		if st, err := readStamp(path); err == nil && st.Recording == abs && slices.Equal(st.Files, before) {
			return st.Hash, nil
		}
	}
	hash, err := recording.HashRecording(rec)
	if err != nil {
		return "", err
	}
	if !ok {
		return hash, nil
	}
	after, ok := statRecordingFiles(files)
	if !ok || !slices.Equal(before, after) || racy(after, time.Now()) {
		return hash, nil // changed while hashing, or too recently to trust its times
	}
	writeStamp(path, hashStamp{Version: stampVersion, Recording: abs, Files: after, Hash: hash})
	return hash, nil
}

// statRecordingFiles returns the identity of each file; ok is false when one cannot be
// read or the platform gives no device and inode.
func statRecordingFiles(files []string) ([]stampFile, bool) {
	out := make([]stampFile, 0, len(files))
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil || !fi.Mode().IsRegular() {
			return nil, false
		}
		id, ok := fileIdentity(fi)
		if !ok {
			return nil, false
		}
		id.Name = filepath.Base(f)
		id.Size = fi.Size()
		id.MTime = fi.ModTime().UnixNano()
		out = append(out, id)
	}
	return out, true
}

func racy(files []stampFile, now time.Time) bool {
	limit := now.Add(-stampRacyAge).UnixNano()
	for _, f := range files {
		if f.MTime > limit || f.CTime > limit {
			return true
		}
	}
	return false
}

// readStamp reads and checks the stamp at path.
func readStamp(path string) (*hashStamp, error) {
	data, err := readlimit.File(path, maxStampBytes)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st hashStamp
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("stamp %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("stamp %s: data after the JSON object", path)
	}
	if st.Version != stampVersion || len(st.Hash) != 64 || !isHex(st.Hash) || len(st.Files) == 0 {
		return nil, errors.New("stamp " + path + ": not a version 1 stamp with a sha256 hash")
	}
	return &st, nil
}

// writeStamp writes st to path (atomicfile.Write). Errors are ignored: without a stamp the
// next start hashes again.
func writeStamp(path string, st hashStamp) {
	data, err := json.Marshal(st)
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	_ = atomicfile.Write(path, append(data, '\n'), 0o644)
}
