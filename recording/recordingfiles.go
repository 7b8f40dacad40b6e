package recording

// This file lists a published recording's files, hashes them (the recording stamp's
// content hash) and counts its entries without unpacking it.

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/klauspost/compress/gzip"
)

// RecordingFiles lists the files of the published recording in recordingDir in their fixed
// order: manifest.json, pages.jsonl, entries.jsonl.gz, then the archive: data.warc.gz or
// its parts data-000.warc.gz, data-001.warc.gz, ... (format 3), or warc.tar.gz or its parts
// warc.tar.gz.000, .001, ... (format 2), in number order. It returns nil and no error when
// the directory does not exist or holds none of these files (the task has no recording
// yet), and an error when the set is incomplete (a missing file or part, both a whole
// archive and parts, archives of both formats) or a file is not a regular file (symlinks
// are refused). Other files in the directory are ignored.
func RecordingFiles(recordingDir string) ([]string, error) {
	des, err := os.ReadDir(recordingDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read recording %s: %w", recordingDir, err)
	}
	present := map[string]bool{}
	var parts, dataParts []int
	for _, de := range des {
		name := de.Name()
		m := partName.FindStringSubmatch(name)
		dm := dataPartName.FindStringSubmatch(name)
		known := m != nil || dm != nil || name == RecordingManifestFile || name == RecordingPagesFile ||
			name == RecordingEntriesFile || name == RecordingWARCFile || name == RecordingDataFile
		if !known {
			continue
		}
		if !de.Type().IsRegular() {
			return nil, fmt.Errorf("recording %s: %s is not a regular file (%s)", recordingDir, name, de.Type())
		}
		present[name] = true
		if m != nil {
			n, _ := strconv.Atoi(m[1])
			parts = append(parts, n)
		}
		if dm != nil {
			n, _ := strconv.Atoi(dm[1])
			dataParts = append(dataParts, n)
		}
	}
	if len(present) == 0 {
		return nil, nil
	}
	var files []string
	for _, name := range []string{RecordingManifestFile, RecordingPagesFile, RecordingEntriesFile} {
		if !present[name] {
			return nil, fmt.Errorf("recording %s: %s is missing", recordingDir, name)
		}
		files = append(files, filepath.Join(recordingDir, name))
	}
	data, err := recordingDataFiles(recordingDir, present[RecordingDataFile], dataParts)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 {
		if present[RecordingWARCFile] || len(parts) > 0 {
			return nil, fmt.Errorf("recording %s: has both %s (format %d) and %s (format %d)", recordingDir, filepath.Base(data[0]), RecordingFormat, RecordingWARCFile, RecordingFormat2)
		}
		return append(files, data...), nil
	}
	switch {
	case present[RecordingWARCFile] && len(parts) > 0:
		return nil, fmt.Errorf("recording %s: has both %s and %s.%03d", recordingDir, RecordingWARCFile, RecordingWARCFile, parts[0])
	case present[RecordingWARCFile]:
		files = append(files, filepath.Join(recordingDir, RecordingWARCFile))
	case len(parts) == 0:
		return nil, fmt.Errorf("recording %s: %s is missing", recordingDir, RecordingDataFile)
	default:
		ps, err := partPaths(recordingDir, RecordingWARCFile, parts)
		if err != nil {
			return nil, err
		}
		files = append(files, ps...)
	}
	return files, nil
}

// partPaths returns the paths of the numbered parts base.000, base.001, ... of a split
// archive in dir, in order, given the part numbers found (any order). A gap is an error
// naming the missing part.
func partPaths(dir, base string, parts []int) ([]string, error) {
	slices.Sort(parts)
	files := make([]string, 0, len(parts))
	for i, n := range parts {
		if n != i {
			return nil, fmt.Errorf("recording %s: part %s.%03d is missing", dir, base, i)
		}
		files = append(files, filepath.Join(dir, fmt.Sprintf("%s.%03d", base, n)))
	}
	return files, nil
}

// HashRecording returns the lowercase hex sha256 identifying the recording's content: for
// each file of RecordingFiles in order, its base name, a NUL byte, its length as 8 bytes
// big-endian, and its bytes. It is an error when recordingDir holds no recording.
func HashRecording(recordingDir string) (string, error) {
	files, err := RecordingFiles(recordingDir)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("recording %s: no recording files", recordingDir)
	}
	h := sha256.New()
	for _, path := range files {
		if err := HashFramed(h, path, filepath.Base(path)); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HashFramed writes one file into a hash of HashRecording's framing: name, a NUL byte, the
// file's size as 8 bytes big-endian, then its bytes. path must be a regular file; one that
// changes size while it is read is an error naming it. Task bundles (task.HashBundle) and
// rule files (grade's provenance) are hashed with the same framing.
func HashFramed(w io.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	frameHead(w, name, fi.Size())
	copied, err := io.Copy(w, io.LimitReader(f, fi.Size()))
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", path, copied, err)
	}
	if copied != fi.Size() {
		return fmt.Errorf("read %s: file shrank from %d to %d bytes while hashing", path, fi.Size(), copied)
	}
	return nil
}

// FrameBytes is HashFramed for data already in memory.
func FrameBytes(w io.Writer, name string, data []byte) {
	frameHead(w, name, int64(len(data)))
	w.Write(data)
}

// frameHead writes name, NUL and size as 8 bytes big-endian.
func frameHead(w io.Writer, name string, size int64) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(size))
	io.WriteString(w, name)
	w.Write([]byte{0})
	w.Write(n[:])
}

// CountRecordingEntries returns the number of exchanges of the published recording in
// recordingDir: the non-blank lines of entries.jsonl.gz, read with the MaxEntriesBytes
// bound, without unpacking anything else.
func CountRecordingEntries(recordingDir string) (int, error) {
	path := filepath.Join(recordingDir, RecordingEntriesFile)
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cr := newCountReader(f)
	zr, err := gzip.NewReader(cr.br)
	if err != nil {
		return 0, fmt.Errorf("read %s at offset %d: %w", path, cr.offset(), err)
	}
	defer zr.Close()
	r := bufio.NewReaderSize(io.LimitReader(zr, MaxEntriesBytes+1), 64<<10)
	var n int
	var total int64
	blank := true
	for {
		b, err := r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read %s at offset %d: %w", path, cr.offset(), err)
		}
		total++
		switch b {
		case '\n':
			if !blank {
				n++
			}
			blank = true
		case ' ', '\t', '\r':
		default:
			blank = false
		}
	}
	if total > MaxEntriesBytes {
		return 0, fmt.Errorf("%s expands to more than %d bytes", path, int64(MaxEntriesBytes))
	}
	if !blank {
		n++
	}
	return n, nil
}
