package recording

// This file unpacks a published recording (format 2 or 3) into a bundle directory, within
// UnpackLimits, so that a small hostile recording cannot fill the disk.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/readlimit"
)

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
	return syncAndCheck(destDir, recordingDir, []string{filepath.Dir(WARCFile), filepath.Dir(EntriesFile), filepath.Dir(PagesFile)})
}

// syncAndCheck ends an unpack of name into destDir: it syncs the directories dirs and
// destDir itself, then opens the bundle to check it reads. Errors are "unpack NAME: ...".
func syncAndCheck(destDir, name string, dirs []string) error {
	for _, d := range append(slices.Clone(dirs), ".") {
		if err := atomicfile.SyncDir(filepath.Join(destDir, d)); err != nil {
			return fmt.Errorf("unpack %s: %w", name, err)
		}
	}
	b, err := OpenBundle(destDir)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
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
	data, err := readlimit.File(path, MaxManifestBytes)
	if err != nil {
		return Manifest{}, 0, err
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
	return atomicfile.WriteNew(dst, 0o644, func(w io.Writer) error {
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
	name, r, closeParts, err := openParts(parts)
	if err != nil {
		return err
	}
	defer closeParts()
	cr := newCountReader(r)
	zr, err := gzip.NewReader(cr.br)
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	defer zr.Close()
	err = atomicfile.WriteNew(dst, 0o644, func(w io.Writer) error { return extractWARCTar(zr, w, max, u) })
	if le, ok := asLimitError(err); ok {
		return le
	}
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	return readTarTrailer(zr, cr, name)
}

// readTarTrailer reads what follows the end of a tar inside its gzip stream zr to the
// stream's end, so that a truncated or corrupt tail is found: at most maxTarTrailer bytes
// (other tar tools pad with zeros). Errors name the stream and the compressed offset cr is at.
func readTarTrailer(zr io.Reader, cr *countReader, name string) error {
	n, err := io.Copy(io.Discard, io.LimitReader(zr, maxTarTrailer+1))
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	if n > maxTarTrailer {
		return fmt.Errorf("read %s: more than %d bytes after the end of the tar", name, maxTarTrailer)
	}
	return nil
}

// openParts opens the parts of one split gzip stream (NAME.000, NAME.001, ...) as one
// reader, in order. name is how errors call it: the one file, or "NAME (N parts)". Call
// closeParts when done; on an error the parts opened so far are closed.
func openParts(parts []string) (name string, r io.Reader, closeParts func(), err error) {
	var files []*os.File
	closeParts = func() {
		for _, f := range files {
			f.Close()
		}
	}
	readers := make([]io.Reader, 0, len(parts))
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			closeParts()
			return "", nil, nil, err
		}
		files = append(files, f)
		readers = append(readers, f)
	}
	name = parts[0]
	if len(parts) > 1 {
		name = fmt.Sprintf("%s (%d parts)", strings.TrimSuffix(parts[0], ".000"), len(parts))
	}
	return name, io.MultiReader(readers...), closeParts, nil
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
