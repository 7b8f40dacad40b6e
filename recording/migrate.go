package recording

// This file rewrites a published recording of an older layout into the current one
// (`pab recording migrate`), so that replay reads exactly one format. The only older layout is
// format 1: one gzip-compressed tar, bundle.tar.gz (or bundle.tar.gz.000, .001, ... when
// split at the same size as today's parts), holding the four files of a bundle (and, in
// bundles of seed 003, indexes/index.cdxj and datapackage.json, which are skipped). A
// format 2 recording whose manifest keeps a legacy field (start_url) gets that field dropped.

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/atomicfile"
)

// Format1File is the archive of a format 1 recording: a gzip-compressed tar of manifest.json,
// archive/data.warc, indexes/entries.jsonl and pages/pages.jsonl, split into
// bundle.tar.gz.000, .001, ... when large.
const Format1File = "bundle.tar.gz"

var format1PartName = regexp.MustCompile(`^bundle\.tar\.gz\.([0-9]{3})$`)

// format1Files lists the files of a format 1 recording in recordingDir in read order:
// bundle.tar.gz alone, or its parts in number order. It returns nil when there are none,
// and an error when both forms are present, a part is missing, or a file is not regular.
func format1Files(recordingDir string) ([]string, error) {
	des, err := os.ReadDir(recordingDir)
	if err != nil {
		return nil, err
	}
	whole := false
	var parts []int
	for _, de := range des {
		name := de.Name()
		m := format1PartName.FindStringSubmatch(name)
		if name != Format1File && m == nil {
			continue
		}
		if !de.Type().IsRegular() {
			return nil, fmt.Errorf("recording %s: %s is not a regular file", recordingDir, name)
		}
		if m == nil {
			whole = true
			continue
		}
		n, _ := strconv.Atoi(m[1])
		parts = append(parts, n)
	}
	switch {
	case whole && len(parts) > 0:
		return nil, fmt.Errorf("recording %s: has both %s and its parts", recordingDir, Format1File)
	case whole:
		return []string{filepath.Join(recordingDir, Format1File)}, nil
	}
	return partPaths(recordingDir, Format1File, parts)
}

// RecordingFormatOf reports the layout of the published recording in recordingDir: the
// "format" of its manifest.json (RecordingFormat for a current recording), 1 for a
// bundle.tar.gz recording, or 0 when the directory holds no recording. A manifest.json
// without "format" is an error, as is one whose format is not a number.
func RecordingFormatOf(recordingDir string) (int, error) {
	if f1, err := format1Files(recordingDir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	} else if len(f1) > 0 {
		return 1, nil
	}
	data, err := readAuditFile(recordingDir, RecordingManifestFile, MaxManifestBytes)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", filepath.Join(recordingDir, RecordingManifestFile), err)
	}
	var probe struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return 0, fmt.Errorf("read %s: %w", filepath.Join(recordingDir, RecordingManifestFile), err)
	}
	if probe.Format == nil {
		return 0, fmt.Errorf("read %s: no format", filepath.Join(recordingDir, RecordingManifestFile))
	}
	return *probe.Format, nil
}

// format1Paths are the bundle files a format 1 tar must hold, format1Extras the files it may
// hold as well, and format1Dirs the directories that may precede them.
var (
	format1Paths = []string{ManifestFile, WARCFile, EntriesFile, PagesFile}
	format1Dirs  = []string{filepath.Dir(WARCFile), filepath.Dir(EntriesFile), filepath.Dir(PagesFile)}
)

// format1Extras are the files a format 1 tar may hold besides the four bundle files:
// the CDXJ index and the WACZ datapackage.json that bundles of seed 003 carried before
// they were left out. Migration reads past them (each at most once, a regular file of at most
// the size given here, counted against the unpack limits) and does not keep them: pab
// builds its own indexes, and a WACZ export writes both afresh.
var format1Extras = map[string]int64{
	"indexes/index.cdxj": MaxEntriesBytes,
	"datapackage.json":   MaxManifestBytes,
}

// UnpackFormat1 extracts the format 1 recording in recordingDir (bundle.tar.gz or its parts,
// read in order as one gzip stream) into the bundle directory destDir (created; if it exists
// it must be empty). The tar may hold only the regular files manifest.json,
// archive/data.warc, indexes/entries.jsonl and pages/pages.jsonl, each once and all four,
// the regular files indexes/index.cdxj and datapackage.json of seed 003's bundles, each at
// most once (read past and not kept), and directory entries archive/, indexes/ and pages/ (a
// leading "./" is ignored); any other path, a link, a device or a repeated file is an error.
// Sizes are bounded as for Unpack (MaxManifestBytes, MaxWARCBytes, MaxEntriesBytes,
// MaxPagesBytes; MaxEntriesBytes for index.cdxj and MaxManifestBytes for datapackage.json),
// and DefaultUnpackLimits applies to all of them together. The manifest's legacy fields
// (start_url, "format") are dropped. On error destDir may hold part of the output: extract
// into a temporary directory.
func UnpackFormat1(recordingDir, destDir string) error {
	parts, err := format1Files(recordingDir)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return fmt.Errorf("recording %s: no %s", recordingDir, Format1File)
	}
	name, r, closeParts, err := openParts(parts)
	if err != nil {
		return err
	}
	defer closeParts()
	limits, err := DefaultUnpackLimits()
	if err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
	}
	budget, err := newUnpackBudget(recordingDir, parts, limits)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
	}
	if err := makeEmptyDir(destDir); err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
	}
	for _, d := range format1Dirs {
		if err := os.Mkdir(filepath.Join(destDir, d), 0o755); err != nil {
			return fmt.Errorf("unpack %s: %w", name, err)
		}
	}
	cr := newCountReader(r)
	zr, err := gzip.NewReader(cr.br)
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	defer zr.Close()
	if err := extractFormat1Tar(zr, destDir, budget); err != nil {
		if le, ok := asLimitError(err); ok {
			return le
		}
		return fmt.Errorf("read %s at offset %d: %w", name, cr.offset(), err)
	}
	if err := readTarTrailer(zr, cr, name); err != nil {
		return err
	}
	mpath := filepath.Join(destDir, ManifestFile)
	data, err := os.ReadFile(mpath)
	if err != nil {
		return err
	}
	m, err := readLegacyManifest(data, filepath.Join(name, ManifestFile), true)
	if err != nil {
		return err
	}
	if err := os.Remove(mpath); err != nil {
		return err
	}
	if err := writeJSONFile(mpath, m); err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
	}
	return syncAndCheck(destDir, name, format1Dirs)
}

// extractFormat1Tar writes the four bundle files of a format 1 tar into destDir, within
// the budget u.
func extractFormat1Tar(r io.Reader, destDir string, u *unpackBudget) error {
	tr := tar.NewReader(r)
	got := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if hdr.Typeflag == tar.TypeDir {
			if !slices.Contains(format1Dirs, strings.TrimSuffix(name, "/")) && name != "" {
				return fmt.Errorf("tar entry %q is a directory other than archive/, indexes/ or pages/", hdr.Name)
			}
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			switch hdr.Typeflag {
			case tar.TypeSymlink, tar.TypeLink:
				return fmt.Errorf("tar entry %q is a link to %q; only regular files are allowed", hdr.Name, hdr.Linkname)
			default:
				return fmt.Errorf("tar entry %q has type %q; only regular files are allowed", hdr.Name, hdr.Typeflag)
			}
		}
		extraMax, extra := format1Extras[name]
		if !slices.Contains(format1Paths, name) && !extra {
			return fmt.Errorf("tar entry %q: only %s (and %s, which are skipped) are allowed", hdr.Name,
				strings.Join(format1Paths, ", "), strings.Join(slices.Sorted(maps.Keys(format1Extras)), ", "))
		}
		if got[name] {
			return fmt.Errorf("tar holds %s twice", name)
		}
		got[name] = true
		if extra {
			if hdr.Size > extraMax {
				return fmt.Errorf("tar entry %s is %d bytes, more than the limit of %d", name, hdr.Size, extraMax)
			}
			if u.allow >= 0 && hdr.Size > u.allow-u.used {
				return u.add(hdr.Size)
			}
			if n, err := io.Copy(&budgetWriter{w: io.Discard, u: u}, tr); err != nil {
				return fmt.Errorf("tar entry %s after %d of %d bytes: %w", name, n, hdr.Size, err)
			}
			continue
		}
		max := map[string]int64{ManifestFile: MaxManifestBytes, WARCFile: MaxWARCBytes, EntriesFile: MaxEntriesBytes, PagesFile: MaxPagesBytes}[name]
		if hdr.Size > max {
			return fmt.Errorf("tar entry %s is %d bytes, more than the limit of %d", name, hdr.Size, max)
		}
		if u.allow >= 0 && hdr.Size > u.allow-u.used {
			return u.add(hdr.Size)
		}
		err = atomicfile.WriteNew(filepath.Join(destDir, filepath.FromSlash(name)), 0o644, func(w io.Writer) error {
			n, err := io.Copy(&budgetWriter{w: w, u: u}, tr)
			if err != nil {
				return fmt.Errorf("tar entry %s after %d of %d bytes: %w", name, n, hdr.Size, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, p := range format1Paths {
		if !got[p] {
			return fmt.Errorf("tar holds no %s", p)
		}
	}
	return nil
}

// readLegacyManifest reads a manifest written by an older pab: start_url (and, with
// dropFormat, "format") are dropped, every other field must be known (see readManifest).
func readLegacyManifest(data []byte, path string, dropFormat bool) (Manifest, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		return Manifest{}, fmt.Errorf("read %s: %w", path, err)
	}
	for _, k := range legacyManifestFields {
		delete(raw, k)
	}
	if dropFormat {
		delete(raw, "format")
	}
	clean, err := json.Marshal(raw)
	if err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", path, err)
	}
	return readManifest(bytes.NewReader(clean), path)
}

// MigrateRecording rewrites the recording in recordingDir to the current format (3): a
// format 1 or format 2 recording is extracted into a bundle under workDir (UnpackFormat1,
// Unpack; workDir must not exist or be empty; the caller removes it) and packed again with
// Pack, which replaces recordingDir as a whole only once the new recording is complete. The WARC is kept byte for byte; run Audit on
// the result to check its content. It returns the format found. A recording already in the
// current format is left untouched, except that legacy manifest fields (start_url) are
// dropped from its manifest.json (DropLegacyManifestFields); dropped names them. Any other
// format is an error.
func MigrateRecording(recordingDir, workDir string) (from int, dropped []string, err error) {
	from, err = RecordingFormatOf(recordingDir)
	if err != nil {
		return 0, nil, err
	}
	switch from {
	case RecordingFormat:
		dropped, err = DropLegacyManifestFields(recordingDir)
		return from, dropped, err
	case 0:
		return 0, nil, fmt.Errorf("recording %s: no recording", recordingDir)
	case 1, RecordingFormat2:
	default:
		return from, nil, fmt.Errorf("recording %s has format %d; this pab migrates formats 1 and %d to %d", recordingDir, from, RecordingFormat2, RecordingFormat)
	}
	bundle := filepath.Join(workDir, "bundle")
	unpack := UnpackFormat1
	if from == RecordingFormat2 {
		unpack = Unpack // drops the legacy fields as it goes
		if data, err := readAuditFile(recordingDir, RecordingManifestFile, MaxManifestBytes); err == nil {
			_, dropped, _ = withoutMembers(data, legacyManifestFields)
		}
	}
	if err := unpack(recordingDir, bundle); err != nil {
		return from, nil, err
	}
	return from, dropped, Pack(bundle, recordingDir)
}

// DropLegacyManifestFields removes the legacy fields (start_url) from the manifest.json of the
// current-format recording in recordingDir and returns their names, in manifest order; the
// other files are not touched, and every other byte of the manifest is kept. With none, it
// changes nothing and returns nil. The manifest must otherwise be one Unpack reads. The new
// manifest is written beside recordingDir as ".<base>.tmp-<random>" (removed by
// RecoverRecording when left behind), synced and renamed over the old one, so a reader sees
// either manifest whole. Call it holding the task's write lock.
func DropLegacyManifestFields(recordingDir string) ([]string, error) {
	path := filepath.Join(recordingDir, RecordingManifestFile)
	if _, _, err := readRecordingManifest(recordingDir, path); err != nil {
		return nil, err
	}
	data, err := readAuditFile(recordingDir, RecordingManifestFile, MaxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	clean, dropped, err := withoutMembers(data, legacyManifestFields)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	if _, err := decodeStrictJSON[Manifest](clean); err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, clean, fi.Mode().Perm()); err != nil {
		return nil, err
	}
	return dropped, nil
}

// withoutMembers returns the JSON object text data without its top-level members named in
// names, every other byte kept as it was (white space and the order of the rest included),
// and the names removed, in text order. data must be one JSON object.
func withoutMembers(data []byte, names []string) ([]byte, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	type member struct {
		start, end int64 // from the key's opening quote to the end of the value
		drop       bool
	}
	var ms []member
	var dropped []string
	prev := dec.InputOffset()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := tok.(string)
		start := prev
		for start < int64(len(data)) && bytes.IndexByte([]byte(" \t\r\n,"), data[start]) >= 0 {
			start++
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		prev = dec.InputOffset()
		drop := slices.Contains(names, key)
		if drop {
			dropped = append(dropped, key)
		}
		ms = append(ms, member{start: start, end: prev, drop: drop})
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	if len(dropped) == 0 {
		return data, nil, nil
	}
	// a dropped member followed by another loses everything up to that one's key; a run of
	// dropped members at the end loses everything from the end of the last kept value (its
	// comma included) to the end of the run
	keep := make([]bool, len(data))
	for i := range keep {
		keep[i] = true
	}
	cut := func(from, to int64) {
		for i := from; i < to; i++ {
			keep[i] = false
		}
	}
	last := len(ms)
	for last > 0 && ms[last-1].drop {
		last--
	}
	for i := 0; i < last; i++ {
		if ms[i].drop {
			cut(ms[i].start, ms[i+1].start)
		}
	}
	if last < len(ms) {
		from := ms[0].start
		if last > 0 {
			from = ms[last-1].end
		}
		cut(from, ms[len(ms)-1].end)
	}
	out := make([]byte, 0, len(data))
	for i, k := range keep {
		if k {
			out = append(out, data[i])
		}
	}
	return out, dropped, nil
}
