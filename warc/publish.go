package warc

// This file converts between a bundle directory and the published layout
// (tasks/<id>/recording/, docs/bundle-format.md "Published layout"). Pack writes format 3:
//
//	manifest.json      the bundle's manifest plus "format": 3
//	pages.jsonl        pages/pages.jsonl as is
//	entries.jsonl.gz   indexes/entries.jsonl plus each record's gzip member, gzip
//	data.warc.gz       archive/data.warc, one gzip member per record; split into
//	                   data-000.warc.gz, data-001.warc.gz, ... when larger than PartSize
//
// (inplace.go). Unpack also reads format 2, whose archive is warc.tar.gz: a tar holding
// only archive/data.warc, gzip, split into warc.tar.gz.000, .001, ... when larger.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Names of the files of a published recording directory.
const (
	RecordingManifestFile = "manifest.json"
	RecordingPagesFile    = "pages.jsonl"
	RecordingEntriesFile  = "entries.jsonl.gz"
	// RecordingWARCFile is the archive of a format 2 recording.
	RecordingWARCFile = "warc.tar.gz"
)

// PartSize is the largest data.warc.gz Pack writes in one file: 45 MB in decimal units
// (45,000,000 bytes), below GitHub's 50 MiB warning. A larger archive is split between
// gzip members into data-000.warc.gz, data-001.warc.gz, ... (at most 1000 parts), each at
// most PartSize bytes unless a single record's member is larger. (Format 2 cut its one
// gzip stream into parts of exactly PartSize bytes.)
const PartSize = 45 * 1000 * 1000

// Bounds applied by Unpack to what a recording may expand to.
const (
	// MaxWARCBytes bounds archive/data.warc (8 GiB).
	MaxWARCBytes = 8 << 30
	// MaxEntriesBytes bounds the gunzipped indexes/entries.jsonl (2 GiB).
	MaxEntriesBytes = 2 << 30
	// MaxPagesBytes bounds pages.jsonl (256 MiB).
	MaxPagesBytes = 256 << 20
	// maxTarTrailer bounds what may follow the end of the tar inside the gzip stream
	// (zero padding written by other tar tools).
	maxTarTrailer = 1 << 20
	maxParts      = 1000
)

// Defaults of UnpackLimits (docs/bundle-format.md, "The cache").
const (
	// DefaultUnpackRatio: a recording may unpack to at most 50 times its packed size...
	DefaultUnpackRatio = 50
	// DefaultUnpackFloor: ...but always to 64 MiB, however small it is packed.
	DefaultUnpackFloor = 64 << 20
	// DefaultMaxUnpackedBytes: and never to more than 8 GiB.
	DefaultMaxUnpackedBytes = 8 << 30
)

// Environment variables that override the defaults of UnpackLimits: a whole number each.
const (
	// EnvUnpackRatio is the ratio; 0 turns the ratio check off.
	EnvUnpackRatio = "PAB_UNPACK_RATIO"
	// EnvUnpackMax is the absolute cap, in bytes.
	EnvUnpackMax = "PAB_UNPACK_MAX"
)

// UnpackLimits bound what a published recording may expand to when it is unpacked (Unpack,
// AuditRecording, UnpackFormat1): the bytes written (manifest, pages, index and archive
// together) may not exceed Ratio times the recording's packed size (the sum of its files'
// sizes) or Floor, whichever is larger, nor Max in any case. Reading stops as soon as a
// limit is passed, so a small recording cannot fill the disk (a decompression bomb).
type UnpackLimits struct {
	// Ratio is the largest unpacked/packed size ratio; 0 means no ratio check.
	Ratio int64
	// Floor is the size in bytes any recording may unpack to, whatever the ratio.
	Floor int64
	// Max is the absolute cap in bytes; 0 means no cap.
	Max int64
}

// DefaultUnpackLimits returns DefaultUnpackRatio, DefaultUnpackFloor and
// DefaultMaxUnpackedBytes, with $PAB_UNPACK_RATIO and $PAB_UNPACK_MAX in their place when
// set. A value that is not a whole number of at least 0 is an error naming the variable.
func DefaultUnpackLimits() (UnpackLimits, error) {
	l := UnpackLimits{Ratio: DefaultUnpackRatio, Floor: DefaultUnpackFloor, Max: DefaultMaxUnpackedBytes}
	for _, v := range []struct {
		name string
		dst  *int64
	}{{EnvUnpackRatio, &l.Ratio}, {EnvUnpackMax, &l.Max}} {
		s := strings.TrimSpace(os.Getenv(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return l, fmt.Errorf("$%s is %q; want a whole number of at least 0", v.name, s)
		}
		*v.dst = n
	}
	return l, nil
}

// unpackBudget counts the bytes one unpack writes against its UnpackLimits.
type unpackBudget struct {
	recording      string // named in the error
	packed, allow  int64
	used           int64
	byRatio, ratio int64 // the ratio's share of allow, and the ratio itself (0: none)
}

// newUnpackBudget is the budget of unpacking the recording in recordingDir whose files are
// files (their sizes are its packed size).
func newUnpackBudget(recordingDir string, files []string, l UnpackLimits) (*unpackBudget, error) {
	u := &unpackBudget{recording: recordingDir, ratio: l.Ratio}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		u.packed += fi.Size()
	}
	u.allow = -1 // no bound
	if l.Ratio > 0 {
		u.byRatio = l.Floor
		if u.packed > 0 && l.Ratio > (1<<62)/u.packed {
			u.byRatio = 1 << 62
		} else if r := l.Ratio * u.packed; r > u.byRatio {
			u.byRatio = r
		}
		u.allow = u.byRatio
	}
	if l.Max > 0 && (u.allow < 0 || l.Max < u.allow) {
		u.allow = l.Max
	}
	return u, nil
}

// UnpackLimitError is the error of an unpack stopped by its UnpackLimits; the partial
// output is removed.
type UnpackLimitError struct {
	// Recording is the recording directory.
	Recording string
	// Limit is the number of bytes it was allowed to expand to; Packed its packed size.
	Limit, Packed int64
	// Ratio is the ratio in force (0: none); ByRatio tells that the ratio (or its floor),
	// not the absolute cap, set Limit.
	Ratio   int64
	ByRatio bool
}

func (e *UnpackLimitError) Error() string {
	if e.ByRatio {
		return fmt.Sprintf("recording %s expands to more than %d bytes, %d times its packed size of %d bytes (or %d bytes for any recording); refused as a decompression bomb (set $%s to change the ratio)",
			e.Recording, e.Limit, e.Ratio, e.Packed, int64(DefaultUnpackFloor), EnvUnpackRatio)
	}
	return fmt.Sprintf("recording %s expands to more than %d bytes, the absolute limit; refused (set $%s to change it)", e.Recording, e.Limit, EnvUnpackMax)
}

// add counts n more bytes and fails with an *UnpackLimitError once the total is over the
// budget. A nil budget allows everything.
func (u *unpackBudget) add(n int64) error {
	if u == nil {
		return nil
	}
	u.used += n
	if u.allow < 0 || u.used <= u.allow {
		return nil
	}
	return &UnpackLimitError{Recording: u.recording, Limit: u.allow, Packed: u.packed, Ratio: u.ratio, ByRatio: u.ratio > 0 && u.allow == u.byRatio}
}

// budgetWriter is w, failing as soon as the bytes written pass the budget.
type budgetWriter struct {
	w io.Writer
	u *unpackBudget
}

func (b *budgetWriter) Write(p []byte) (int, error) {
	if err := b.u.add(int64(len(p))); err != nil {
		return 0, err
	}
	return b.w.Write(p)
}

// asLimitError returns the *UnpackLimitError inside err, so that it is reported alone.
func asLimitError(err error) (error, bool) {
	var le *UnpackLimitError
	if errors.As(err, &le) {
		return le, true
	}
	return err, false
}

// tarModTime is the fixed modification time of the tar entry, so the same WARC always
// packs to the same bytes.
var tarModTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

var partName = regexp.MustCompile(`^warc\.tar\.gz\.([0-9]{3})$`)

// Pack writes the bundle in bundleDir to recordingDir in the published layout, format 3,
// splitting data.warc.gz into parts above PartSize bytes. See PackParts.
func Pack(bundleDir, recordingDir string) error {
	return PackParts(bundleDir, recordingDir, PartSize)
}

// PackParts is Pack with parts of at most partSize bytes: PackStaged, then Publish.
// Output is deterministic: the same bundle files and the same klauspost/compress version
// give the same bytes (no name or time in the gzip headers, one member per record, entry
// lines encoded as the bundle writer encodes them). An older recording at recordingDir is
// replaced as a whole, and only once the new one is complete.
func PackParts(bundleDir, recordingDir string, partSize int64) error {
	staged, err := PackStaged(bundleDir, recordingDir, partSize)
	if err != nil {
		return err
	}
	return Publish(staged, recordingDir)
}

// PackStaged writes the bundle in bundleDir (a bundle directory, or a format 3 recording)
// in the published layout, format 3, with parts of at most partSize bytes, into a new temporary directory beside recordingDir (its
// parent is created if needed), named ".<base of recordingDir>.tmp-<random>", synced, and
// returns that directory's path. recordingDir itself is not touched: the caller checks the
// staged recording (AuditRecording) and then moves it into place with Publish, or removes
// it. The bundle is opened and checked with OpenBundle first. On error nothing is left.
func PackStaged(bundleDir, recordingDir string, partSize int64) (string, error) {
	return packStaged(bundleDir, recordingDir, partSize, RecordingFormat)
}

// packStaged is PackStaged writing format (RecordingFormat, or RecordingFormat2 for the
// tests of the format 2 readers).
func packStaged(bundleDir, recordingDir string, partSize int64, format int) (string, error) {
	if partSize <= 0 {
		return "", fmt.Errorf("pack %s: part size %d is not positive", recordingDir, partSize)
	}
	b, err := OpenBundle(bundleDir)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	defer b.Close()

	parent := filepath.Dir(recordingDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(recordingDir)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}

	m := b.Manifest
	m.Format = format
	if err := writeJSONFile(filepath.Join(tmp, RecordingManifestFile), m); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	root, err := os.OpenRoot(bundleDir)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	defer root.Close()
	pagesName := PagesFile
	if b.InPlace() {
		pagesName = RecordingPagesFile
	}
	if err := copyBundleFile(root, bundleDir, pagesName, filepath.Join(tmp, RecordingPagesFile), false); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	if format == RecordingFormat2 {
		if b.InPlace() {
			return "", fmt.Errorf("pack %s: format %d is written only from a bundle directory", bundleDir, RecordingFormat2)
		}
		if err := copyBundleFile(root, bundleDir, EntriesFile, filepath.Join(tmp, RecordingEntriesFile), true); err != nil {
			return "", fmt.Errorf("pack: %w", err)
		}
		if err := packWARC(b, tmp, partSize); err != nil {
			return "", fmt.Errorf("pack %s: %w", filepath.Join(bundleDir, WARCFile), err)
		}
	} else {
		entries, err := packMembers(b, tmp, partSize)
		if err != nil {
			return "", fmt.Errorf("pack %s: %w", filepath.Join(bundleDir, WARCFile), err)
		}
		if err := writeEntriesGz(filepath.Join(tmp, RecordingEntriesFile), entries); err != nil {
			return "", fmt.Errorf("pack: %w", err)
		}
	}
	if err := syncPath(tmp); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	done = true
	return tmp, nil
}

// Publish moves the complete recording directory staged (from PackStaged, beside
// recordingDir) to recordingDir. An existing recordingDir is first renamed aside to
// ".<base>.old-<random>" and removed once staged is in place; if the second rename fails,
// the old recording is put back. staged is gone afterwards, on success and on error.
func Publish(staged, recordingDir string) error {
	if err := replaceDir(staged, recordingDir); err != nil {
		os.RemoveAll(staged)
		return fmt.Errorf("publish %s: %w", recordingDir, err)
	}
	return nil
}

// RecoverRecording repairs what an interrupted PackStaged or Publish left beside
// recordingDir. When recordingDir is missing but a copy renamed aside by Publish
// (".<base>.old-*") exists, the process died between Publish's two renames: the newest such
// copy is put back. Then every ".<base>.tmp-*" and ".<base>.old-*" directory beside it is
// removed. It returns one line per action taken, naming the directory. Call it only while
// holding the task's write lock: a running writer's directories look the same.
func RecoverRecording(recordingDir string) ([]string, error) {
	parent, base := filepath.Dir(recordingDir), filepath.Base(recordingDir)
	des, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recover %s: %w", recordingDir, err)
	}
	var olds, tmps []string
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, "."+base+".old-"):
			olds = append(olds, name)
		case strings.HasPrefix(name, "."+base+".tmp-"):
			tmps = append(tmps, name)
		}
	}
	var notes []string
	if _, err := os.Lstat(recordingDir); errors.Is(err, os.ErrNotExist) && len(olds) > 0 {
		newest, newestTime := "", time.Time{}
		for _, name := range olds {
			if fi, err := os.Lstat(filepath.Join(parent, name)); err == nil && fi.IsDir() && (newest == "" || fi.ModTime().After(newestTime)) {
				newest, newestTime = name, fi.ModTime()
			}
		}
		if newest != "" {
			if err := os.Rename(filepath.Join(parent, newest), recordingDir); err != nil {
				return notes, fmt.Errorf("recover %s: put back %s: %w", recordingDir, newest, err)
			}
			notes = append(notes, fmt.Sprintf("put back %s, left by an interrupted publish, as %s", filepath.Join(parent, newest), recordingDir))
			olds = slices.DeleteFunc(olds, func(n string) bool { return n == newest })
		}
	}
	for _, name := range append(olds, tmps...) {
		path := filepath.Join(parent, name)
		if err := os.RemoveAll(path); err != nil {
			return notes, fmt.Errorf("recover %s: remove %s: %w", recordingDir, path, err)
		}
		notes = append(notes, "removed "+path+", left by an interrupted write")
	}
	if len(notes) > 0 {
		if err := syncPath(parent); err != nil {
			return notes, fmt.Errorf("recover %s: %w", recordingDir, err)
		}
	}
	return notes, nil
}

// packWARC writes format 2's warc.tar.gz (or its parts) for b's archive into dir.
func packWARC(b *Bundle, dir string, partSize int64) error {
	pw := &partWriter{dir: dir, size: partSize}
	zw, err := gzip.NewWriterLevel(pw, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     WARCFile,
		Mode:     0o644,
		Size:     b.warcSize,
		ModTime:  tarModTime,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		pw.abort()
		return err
	}
	if _, err := io.Copy(tw, io.NewSectionReader(b.warc, 0, b.warcSize)); err != nil {
		pw.abort()
		return err
	}
	if err := tw.Close(); err != nil {
		pw.abort()
		return err
	}
	if err := zw.Close(); err != nil {
		pw.abort()
		return err
	}
	if err := pw.close(); err != nil {
		return err
	}
	if pw.n == 1 {
		return os.Rename(filepath.Join(dir, RecordingWARCFile+".000"), filepath.Join(dir, RecordingWARCFile))
	}
	return nil
}

// partWriter writes a stream into numbered files warc.tar.gz.NNN of at most size bytes,
// opening a part only when there is a byte to put in it.
type partWriter struct {
	dir  string
	size int64
	n    int // parts opened so far
	f    *os.File
	left int64
}

func (p *partWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		if p.f == nil || p.left == 0 {
			if err := p.next(); err != nil {
				return written, err
			}
		}
		k := int64(len(b))
		if k > p.left {
			k = p.left
		}
		n, err := p.f.Write(b[:k])
		written += n
		p.left -= int64(n)
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}

func (p *partWriter) next() error {
	if err := p.close(); err != nil {
		return err
	}
	if p.n == maxParts {
		return fmt.Errorf("archive needs more than %d parts of %d bytes", maxParts, p.size)
	}
	f, err := os.OpenFile(filepath.Join(p.dir, fmt.Sprintf("%s.%03d", RecordingWARCFile, p.n)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	p.f, p.left = f, p.size
	p.n++
	return nil
}

// close syncs and closes the current part.
func (p *partWriter) close() error {
	if p.f == nil {
		return nil
	}
	f := p.f
	p.f = nil
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (p *partWriter) abort() {
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
}

// copyBundleFile copies the bundle file name (a regular file inside root) to the new file
// dst, gzip-compressing it when compress is set, and syncs dst.
func copyBundleFile(root *os.Root, bundleDir, name, dst string, compress bool) error {
	src, err := openBundleFile(root, bundleDir, name)
	if err != nil {
		return err
	}
	defer src.Close()
	return createSynced(dst, func(w io.Writer) error {
		if !compress {
			_, err := io.Copy(w, src)
			return err
		}
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, src); err != nil {
			return err
		}
		return zw.Close()
	})
}

// writeJSONFile writes v as indented JSON and a newline to the new file path.
func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	return createSynced(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// createSynced creates the file path (which must not exist, mode 0644), fills it with
// fill, and syncs and closes it. Errors from fill are returned as they are. The file is left behind on error: callers write into a
// temporary directory that they remove.
func createSynced(path string, fill func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// syncPath fsyncs a file or directory.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replaceDir moves the complete directory tmp to dst. An existing dst is first moved aside
// and removed only once tmp is in place; if that fails, it is put back.
func replaceDir(tmp, dst string) error {
	parent := filepath.Dir(dst)
	if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		return syncPath(parent)
	}
	// a fresh unused name: os.Rename refuses to replace even an empty directory
	old, err := os.MkdirTemp(parent, "."+filepath.Base(dst)+".old-*")
	if err != nil {
		return err
	}
	if err := os.Remove(old); err != nil {
		return err
	}
	if err := os.Rename(dst, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		if rerr := os.Rename(old, dst); rerr != nil {
			return fmt.Errorf("%w (and restoring %s from %s: %v)", err, dst, old, rerr)
		}
		return err
	}
	if err := syncPath(parent); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

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

// Unpack turns the published recording in recordingDir into a bundle directory destDir
// (created if missing; if it exists it must be empty): manifest.json without "format",
// archive/data.warc, indexes/entries.jsonl and pages/pages.jsonl, each synced. The manifest
// must say "format": 3 (RecordingFormat) or 2 (RecordingFormat2); any other or a missing
// format is refused with an error naming it. Format 3: every gzip member of data.warc.gz
// (or its parts, in order) is inflated into archive/data.warc, and every entry's member
// fields must name the member of its record (they are left out of indexes/entries.jsonl).
// Format 2: the warc.tar.gz parts are read in order as one gzip stream whose tar
// must hold exactly one entry, the regular file archive/data.warc of at most MaxWARCBytes:
// any other name, a path outside archive/, a link, a device or a second entry is an error.
// entries.jsonl.gz expands to at most MaxEntriesBytes. Everything written together is
// bounded by DefaultUnpackLimits (a ratio to the packed size, and an absolute cap; see
// UnpackWith). The result is checked with OpenBundle. On error, what Unpack wrote is
// removed again (destDir too when Unpack created it); still, unpack into a temporary
// directory and rename it when Unpack succeeds, so that readers never see a partial bundle.
func Unpack(recordingDir, destDir string) error {
	l, err := DefaultUnpackLimits()
	if err != nil {
		return fmt.Errorf("unpack %s: %w", recordingDir, err)
	}
	return UnpackWith(recordingDir, destDir, l)
}

// UnpackWith is Unpack with the given limits: reading stops, with an *UnpackLimitError
// naming the recording, as soon as the bytes written pass them.
func UnpackWith(recordingDir, destDir string, l UnpackLimits) (err error) {
	files, err := RecordingFiles(recordingDir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("recording %s: no recording files", recordingDir)
	}
	m, format, err := readRecordingManifest(recordingDir, files[0])
	if err != nil {
		return err
	}
	if (format == RecordingFormat) != isDataFile(files[3]) {
		return fmt.Errorf("recording %s: manifest says format %d, but the archive is %s", recordingDir, format, filepath.Base(files[3]))
	}
	budget, err := newUnpackBudget(recordingDir, files, l)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", recordingDir, err)
	}
	_, statErr := os.Lstat(destDir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := makeEmptyDir(destDir); err != nil {
		return fmt.Errorf("unpack %s: %w", recordingDir, err)
	}
	defer func() {
		if err != nil {
			removeOutput(destDir, created)
		}
	}()
	for _, d := range []string{filepath.Dir(WARCFile), filepath.Dir(EntriesFile), filepath.Dir(PagesFile)} {
		if err := os.Mkdir(filepath.Join(destDir, d), 0o755); err != nil {
			return fmt.Errorf("unpack %s: %w", recordingDir, err)
		}
	}
	m.Format = 0
	if err := writeJSONFile(filepath.Join(destDir, ManifestFile), m); err != nil {
		return fmt.Errorf("unpack %s: %w", recordingDir, err)
	}
	if err := copyBounded(files[1], filepath.Join(destDir, PagesFile), MaxPagesBytes, false, budget); err != nil {
		return err
	}
	if format == RecordingFormat {
		if err := unpackFormat3(recordingDir, files, destDir, budget); err != nil {
			return err
		}
	} else {
		if err := copyBounded(files[2], filepath.Join(destDir, EntriesFile), MaxEntriesBytes, true, budget); err != nil {
			return err
		}
		if err := unpackWARC(files[3:], filepath.Join(destDir, WARCFile), MaxWARCBytes, budget); err != nil {
			return err
		}
	}
	for _, d := range []string{filepath.Dir(WARCFile), filepath.Dir(EntriesFile), filepath.Dir(PagesFile), "."} {
		if err := syncPath(filepath.Join(destDir, d)); err != nil {
			return fmt.Errorf("unpack %s: %w", recordingDir, err)
		}
	}
	b, err := OpenBundle(destDir)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", recordingDir, err)
	}
	return b.Close()
}

// removeOutput removes what an unpack wrote into dir: dir itself when the unpack created
// it, else its content.
func removeOutput(dir string, created bool) {
	if created {
		os.RemoveAll(dir)
		return
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		os.RemoveAll(filepath.Join(dir, de.Name()))
	}
}

// readRecordingManifest reads recording/manifest.json and checks its format first (3 or
// 2), so a recording of another format gets the format error rather than a field error.
func readRecordingManifest(recordingDir, path string) (Manifest, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return Manifest{}, 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return Manifest{}, 0, fmt.Errorf("read %s: %w", path, err)
	}
	var probe struct {
		Format json.RawMessage `json:"format"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Manifest{}, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if probe.Format == nil {
		return Manifest{}, 0, fmt.Errorf("recording %s has no format (older than format 2); this pab reads format %d", recordingDir, RecordingFormat)
	}
	format, err := strconv.Atoi(string(probe.Format))
	if err != nil {
		return Manifest{}, 0, fmt.Errorf("recording %s has format %.20s; this pab reads format %d", recordingDir, probe.Format, RecordingFormat)
	}
	if format != RecordingFormat && format != RecordingFormat2 {
		return Manifest{}, 0, fmt.Errorf("recording %s has format %d; this pab reads format %d (and %d)", recordingDir, format, RecordingFormat, RecordingFormat2)
	}
	m, err := readManifest(bytes.NewReader(data), path)
	return m, format, err
}

// makeEmptyDir creates dir (and its parents), or checks that it is an empty directory.
func makeEmptyDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(dir, 0o755)
	if err == nil || !errors.Is(err, os.ErrExist) {
		return err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(des) > 0 {
		return fmt.Errorf("destination %s is not empty", dir)
	}
	return nil
}

// copyBounded copies src to the new file dst, gunzipping it when gunzip is set, and fails
// when the (decompressed) content is longer than max bytes or passes the budget u (nil:
// none), whose error is returned as it is.
func copyBounded(src, dst string, max int64, gunzip bool, u *unpackBudget) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := newCountReader(f)
	var r io.Reader = cr.br
	if gunzip {
		zr, err := gzip.NewReader(cr.br)
		if err != nil {
			return fmt.Errorf("read %s at offset %d: %w", src, cr.offset(), err)
		}
		defer zr.Close()
		r = zr
	}
	return createSynced(dst, func(w io.Writer) error {
		n, err := io.Copy(&budgetWriter{w: w, u: u}, io.LimitReader(r, max+1))
		if le, ok := asLimitError(err); ok {
			return le
		}
		if err != nil {
			return fmt.Errorf("read %s at offset %d: %w", src, cr.offset(), err)
		}
		if n > max {
			return fmt.Errorf("%s expands to more than %d bytes", src, max)
		}
		return nil
	})
}

// countReader is a buffered reader that knows how many bytes its user has consumed, to
// name offsets in errors. The decompressor reads the *bufio.Reader directly (its fast path)
// and does not read ahead of what it decodes.
type countReader struct {
	br *bufio.Reader
	n  int64 // bytes read from the source into br
}

func newCountReader(r io.Reader) *countReader {
	c := &countReader{}
	c.br = bufio.NewReaderSize(readerFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		c.n += int64(n)
		return n, err
	}), 64<<10)
	return c
}

// offset is the number of bytes consumed from the source.
func (c *countReader) offset() int64 { return c.n - int64(c.br.Buffered()) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// unpackWARC reads the parts in order as one gzip-compressed tar and extracts its only
// entry to dst, within the budget u (nil: none), whose error is returned as it is. The
// whole gzip stream is read to its end, so a truncated or corrupt tail is found even after
// the tar's last block.
func unpackWARC(parts []string, dst string, max int64, u *unpackBudget) error {
	var readers []io.Reader
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		readers = append(readers, f)
	}
	name := parts[0]
	if len(parts) > 1 {
		name = fmt.Sprintf("%s (%d parts)", strings.TrimSuffix(parts[0], ".000"), len(parts))
	}
	cr := newCountReader(io.MultiReader(readers...))
	zr, err := gzip.NewReader(cr.br)
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	defer zr.Close()
	err = createSynced(dst, func(w io.Writer) error { return extractWARCTar(zr, w, max, u) })
	if le, ok := asLimitError(err); ok {
		return le
	}
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(zr, maxTarTrailer+1))
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	if n > maxTarTrailer {
		return fmt.Errorf("read %s: more than %d bytes after the end of the tar", name, maxTarTrailer)
	}
	return nil
}

// extractWARCTar reads a tar stream that must hold exactly one entry: the regular file
// archive/data.warc of at most max bytes, whose content it copies to w within the budget u
// (nil: none; an entry that claims more than the budget allows is refused before a byte is
// copied).
func extractWARCTar(r io.Reader, w io.Writer, max int64, u *unpackBudget) error {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err == io.EOF {
		return fmt.Errorf("tar holds no %s", WARCFile)
	}
	if err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if err := checkTarEntry(hdr, max); err != nil {
		return err
	}
	if u != nil && u.allow >= 0 && hdr.Size > u.allow-u.used {
		return u.add(hdr.Size)
	}
	if n, err := io.Copy(&budgetWriter{w: w, u: u}, tr); err != nil {
		return fmt.Errorf("tar entry %s after %d of %d bytes: %w", WARCFile, n, hdr.Size, err)
	}
	hdr, err = tr.Next()
	if err == nil {
		return fmt.Errorf("tar holds a second entry %q; only %s is allowed", hdr.Name, WARCFile)
	}
	if err != io.EOF {
		return fmt.Errorf("tar: %w", err)
	}
	return nil
}

// checkTarEntry accepts only a regular file named exactly archive/data.warc, of at most max
// bytes.
func checkTarEntry(hdr *tar.Header, max int64) error {
	name := hdr.Name
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) || slices.Contains(strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }), "..") {
		return fmt.Errorf("tar entry %q: path outside archive/", name)
	}
	switch hdr.Typeflag {
	case tar.TypeReg:
	case tar.TypeSymlink:
		return fmt.Errorf("tar entry %q is a symlink to %q; only a regular file %s is allowed", name, hdr.Linkname, WARCFile)
	case tar.TypeLink:
		return fmt.Errorf("tar entry %q is a hard link to %q; only a regular file %s is allowed", name, hdr.Linkname, WARCFile)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return fmt.Errorf("tar entry %q is a device or pipe; only a regular file %s is allowed", name, WARCFile)
	case tar.TypeDir:
		return fmt.Errorf("tar entry %q is a directory; only a regular file %s is allowed", name, WARCFile)
	default:
		return fmt.Errorf("tar entry %q has type %q; only a regular file %s is allowed", name, hdr.Typeflag, WARCFile)
	}
	if name != WARCFile {
		return fmt.Errorf("tar entry %q: only %s is allowed", name, WARCFile)
	}
	if hdr.Size > max {
		return fmt.Errorf("tar entry %s is %d bytes, more than the limit of %d", name, hdr.Size, max)
	}
	return nil
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
