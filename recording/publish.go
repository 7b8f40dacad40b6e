package recording

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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/atomicfile"
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
	return packStaged(context.Background(), bundleDir, recordingDir, partSize, RecordingFormat)
}

// PackStagedContext is PackStaged stopping once ctx is done (checked between records of a
// bundle pab wrote): it then removes what it staged and returns an error wrapping ctx's
// cause.
func PackStagedContext(ctx context.Context, bundleDir, recordingDir string, partSize int64) (string, error) {
	return packStaged(ctx, bundleDir, recordingDir, partSize, RecordingFormat)
}

// packStaged is PackStaged writing format (RecordingFormat, or RecordingFormat2 for the
// tests of the format 2 readers).
func packStaged(ctx context.Context, bundleDir, recordingDir string, partSize int64, format int) (string, error) {
	if partSize <= 0 {
		return "", fmt.Errorf("pack %s: part size %d is not positive", recordingDir, partSize)
	}
	if format == RecordingFormat {
		if _, err := os.Lstat(filepath.Join(bundleDir, WARCFile)); err == nil {
			staged, err := packStagedStream(ctx, bundleDir, recordingDir, partSize)
			if !errors.Is(err, errNotInArchiveOrder) {
				return staged, err
			}
		}
	}
	b, err := OpenBundle(bundleDir)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	defer b.Close()

	tmp, err := stagingDir(recordingDir)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()

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
	if err := atomicfile.SyncDir(tmp); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	done = true
	return tmp, nil
}

// packStagedStream is packStaged for a bundle directory and format 3, with packStream: the
// entries are never all in memory. It returns errNotInArchiveOrder (and leaves nothing)
// for a bundle packStream cannot pack.
func packStagedStream(ctx context.Context, bundleDir, recordingDir string, partSize int64) (string, error) {
	m, err := ReadBundleManifest(bundleDir)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	tmp, err := stagingDir(recordingDir)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	m.Format = RecordingFormat
	if err := writeJSONFile(filepath.Join(tmp, RecordingManifestFile), m); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	root, err := os.OpenRoot(bundleDir)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	defer root.Close()
	if err := copyBundleFile(root, bundleDir, PagesFile, filepath.Join(tmp, RecordingPagesFile), false); err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	if err := packStream(ctx, bundleDir, tmp, partSize); err != nil {
		if errors.Is(err, errNotInArchiveOrder) {
			return "", err
		}
		return "", fmt.Errorf("pack: %w", err)
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
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
		if err := atomicfile.SyncDir(parent); err != nil {
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
	return atomicfile.WriteNew(dst, 0o644, func(w io.Writer) error {
		if !compress {
			_, err := io.Copy(w, src)
			return err
		}
		return gzipTo(w, func(zw io.Writer) error {
			_, err := io.Copy(zw, src)
			return err
		})
	})
}

// gzipTo writes to w one gzip member (klauspost/compress at gzip.DefaultCompression) of
// what fill writes, through a 256 KiB buffer: the compressor hands its output on in pieces
// of a few hundred bytes, which would otherwise each be a write(2) on a file.
func gzipTo(w io.Writer, fill func(zw io.Writer) error) error {
	fw := bufio.NewWriterSize(w, 256<<10)
	zw, err := gzip.NewWriterLevel(fw, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	if err := fill(zw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return fw.Flush()
}

// writeJSONFile writes v as indented JSON (json.MarshalIndent: <, > and & escaped, as every
// published manifest has been, so the bytes and the recording hash stay the same) and a
// newline to the new file path (atomicfile.WriteNew).
func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeNewFile(path, append(data, '\n'))
}

// writeNewFile writes data to the new file path, mode 0644 (atomicfile.WriteNew).
func writeNewFile(path string, data []byte) error {
	return atomicfile.WriteNew(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// replaceDir moves the complete directory tmp to dst. An existing dst is first moved aside
// and removed only once tmp is in place; if that fails, it is put back.
func replaceDir(tmp, dst string) error {
	parent := filepath.Dir(dst)
	if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		return atomicfile.SyncDir(parent)
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
	if err := atomicfile.SyncDir(parent); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// stagingDir makes the temporary directory (mode 0755) beside recordingDir in which a new
// recording is staged before it is renamed into place; on error nothing is left.
func stagingDir(recordingDir string) (string, error) {
	parent := filepath.Dir(recordingDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(recordingDir)+".tmp-*")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return tmp, nil
}
