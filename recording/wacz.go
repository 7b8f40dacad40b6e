package recording

// wacz.go: WACZ 1.1.1 (Web Archive Collection Zipped, https://specs.webrecorder.net/wacz/1.1.1/)
// export of a bundle, and the reading of a WACZ's WARC files for import.

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/warc"
)

// WACZVersion is the WACZ version ExportWACZ writes (datapackage.json wacz_version).
const WACZVersion = "1.1.1"

// Paths of the files ExportWACZ writes inside the ZIP (WACZ 1.1.1 "Directory Layout").
const (
	WACZWARCFile     = "archive/data.warc.gz"
	WACZIndexFile    = "indexes/index.cdx"
	WACZPagesFile    = "pages/pages.jsonl"
	WACZPackageFile  = "datapackage.json"
	WACZDigestFile   = "datapackage-digest.json"
	waczPagesFormat  = "json-pages-1.0"
	waczProfile      = "data-package"
	waczSoftwareName = "pab"
)

// Bounds for reading a WACZ given to ImportWARCs. Every WACZ is treated as hostile.
const (
	// MaxWACZMembers bounds the number of files in a WACZ's ZIP directory.
	MaxWACZMembers = 100000
	// MaxWACZMemberBytes bounds the uncompressed size a WARC member of a WACZ may claim:
	// 64 GiB. The reader also stops at the claimed size, so a member cannot inflate past it.
	MaxWACZMemberBytes int64 = 64 << 30
)

// WACZPackage is datapackage.json of a WACZ (WACZ 1.1.1 "datapackage.json", a Frictionless
// Data Package): profile "data-package", the WACZ version, and one resource per file.
type WACZPackage struct {
	Profile     string `json:"profile"`
	WACZVersion string `json:"wacz_version"`
	Title       string `json:"title,omitempty"`
	// Created is an RFC 3339 time; ExportWACZ writes the recording's captured_to so that
	// the same bundle always gives the same bytes.
	Created      string         `json:"created,omitempty"`
	Software     string         `json:"software,omitempty"`
	MainPageURL  string         `json:"mainPageUrl,omitempty"`
	MainPageDate string         `json:"mainPageDate,omitempty"`
	Resources    []WACZResource `json:"resources"`
}

// WACZResource is one file of a WACZ in datapackage.json: its name, its path inside the
// ZIP, "sha256:" and the lowercase hex sha256 of its bytes, and its size in bytes.
type WACZResource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// WACZDigest is datapackage-digest.json (WACZ 1.1.1): the hash of datapackage.json.
type WACZDigest struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
}

// ExportWACZ writes the recording of b as a WACZ 1.1.1 file at path, a ZIP holding, in this
// order:
//
//   - archive/data.warc.gz: ExportWARC with one gzip member per record;
//   - indexes/index.cdx: a CDXJ index (pywb's format: SURT key, 14-digit timestamp, JSON
//     with url, mime, status, digest, length, offset, filename) of every response and
//     revisit record, sorted by key then timestamp (recording order breaks ties). Keys
//     are made as warcio.js, and so ReplayWeb.page, make them (see SURT); a request with a
//     method other than GET gets "__wb_method=post" and its body appended to the URL's
//     query (see methodQuery), so a replay tool finds the answer to that POST (a
//     multipart body is the one kind warcio.js keys differently);
//   - pages/pages.jsonl: the "json-pages-1.0" header line, then the bundle's pages (not
//     the not-found probes) with id, url, ts and title;
//   - datapackage.json: profile, wacz_version, title, created, software, mainPageUrl,
//     mainPageDate, and a resource (path, sha256 hash, bytes) for each file above;
//   - datapackage-digest.json: the sha256 of datapackage.json.
//
// Every member is stored (not deflated): the WARC is already compressed and replay tools
// read it at the CDXJ offsets. Output is deterministic: every member's modification time,
// and datapackage.json "created", is the recording's captured_to. The file is written
// beside path and renamed into place.
func ExportWACZ(b *Bundle, path string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".warc-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	sum := sha256.New()
	crc := crc32.NewIEEE()
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, sum, crc), 256<<10)
	recs, err := exportWARC(b, bw, true, path2name(WACZWARCFile))
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	index, err := cdxjIndex(b, recs, path2name(WACZWARCFile))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	pages, err := waczPages(b)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	mtime := waczTime(b)
	pkg := WACZPackage{
		Profile:     waczProfile,
		WACZVersion: WACZVersion,
		Title:       waczTitle(b),
		Created:     mtime.Format(time.RFC3339),
		Software:    waczSoftwareName,
		Resources: []WACZResource{
			{Name: path2name(WACZWARCFile), Path: WACZWARCFile, Hash: "sha256:" + hex.EncodeToString(sum.Sum(nil)), Bytes: size},
			resourceOf(WACZIndexFile, index),
			resourceOf(WACZPagesFile, pages),
		},
	}
	for _, p := range b.pagesLoaded() {
		if p.Note == "" {
			pkg.MainPageURL, pkg.MainPageDate = p.URL, p.TS
			break
		}
	}
	pkgJSON, err := json.MarshalIndent(pkg, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	pkgJSON = append(pkgJSON, '\n')
	digJSON, err := json.MarshalIndent(WACZDigest{Path: WACZPackageFile, Hash: "sha256:" + sha256Hex(pkgJSON)}, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	digJSON = append(digJSON, '\n')

	return atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		zw := zip.NewWriter(w)
		if err := storeMember(zw, WACZWARCFile, mtime, tmp, uint64(size), crc.Sum32()); err != nil {
			return err
		}
		for _, m := range []struct {
			name string
			data []byte
		}{{WACZIndexFile, index}, {WACZPagesFile, pages}, {WACZPackageFile, pkgJSON}, {WACZDigestFile, digJSON}} {
			if err := storeMember(zw, m.name, mtime, bytes.NewReader(m.data), uint64(len(m.data)), crc32.ChecksumIEEE(m.data)); err != nil {
				return err
			}
		}
		return zw.Close()
	})
}

// storeMember adds one stored (uncompressed) member to zw, sizes and CRC given up front
// so no data descriptor follows it.
func storeMember(zw *zip.Writer, name string, mtime time.Time, r io.Reader, size uint64, crc uint32) error {
	fh := &zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		CRC32:              crc,
		CompressedSize64:   size,
		UncompressedSize64: size,
	}
	// CreateRaw writes the MS-DOS date and time fields as given (it ignores Modified).
	fh.ModifiedDate, fh.ModifiedTime = msDosTime(mtime)
	fh.SetMode(0o644)
	w, err := zw.CreateRaw(fh)
	if err != nil {
		return fmt.Errorf("zip %s: %w", name, err)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		return fmt.Errorf("zip %s: %w", name, err)
	}
	if uint64(n) != size {
		return fmt.Errorf("zip %s: wrote %d bytes, expected %d", name, n, size)
	}
	return nil
}

// msDosTime is t (UTC) as a ZIP MS-DOS date and time (APPNOTE.TXT 4.4.6: two-second
// resolution, years 1980 to 2107; earlier times give 1980-01-01 00:00:00).
func msDosTime(t time.Time) (date, clock uint16) {
	t = t.UTC()
	if t.Year() < 1980 {
		t = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if t.Year() > 2107 {
		t = time.Date(2107, 12, 31, 23, 59, 58, 0, time.UTC)
	}
	date = uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
	clock = uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
	return date, clock
}

func resourceOf(p string, data []byte) WACZResource {
	return WACZResource{Name: path2name(p), Path: p, Hash: "sha256:" + sha256Hex(data), Bytes: int64(len(data))}
}

func path2name(p string) string { return path.Base(p) }

// waczTime is the recording's captured_to (else its start, see exportDate), in UTC to the
// second: the modification time of every member and datapackage.json "created".
func waczTime(b *Bundle) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, b.Manifest.CapturedTo); err == nil {
		return t.UTC().Truncate(time.Second)
	}
	return exportDate(b).Truncate(time.Second)
}

// waczTitle is the first page's title, else the task id.
func waczTitle(b *Bundle) string {
	for _, p := range b.pagesLoaded() {
		if p.Note == "" && p.Title != "" {
			return p.Title
		}
	}
	return b.Manifest.TaskID
}

// waczPage is one line of a WACZ's pages/pages.jsonl (WACZ 1.1.1 "pages.jsonl").
type waczPage struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	TS    string `json:"ts"`
	Title string `json:"title,omitempty"`
}

// waczPages builds pages/pages.jsonl: the format header line, then one line per page
// (ids "p1", "p2", ... in visit order), not-found probes left out.
func waczPages(b *Bundle) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeJSONLine(&buf, map[string]string{"format": waczPagesFormat, "id": "pages", "title": "All Pages"}); err != nil {
		return nil, err
	}
	n := 0
	pages, err := b.AllPages()
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		if p.Note != "" {
			continue
		}
		n++
		if err := writeJSONLine(&buf, waczPage{ID: "p" + strconv.Itoa(n), URL: p.URL, TS: p.TS, Title: p.Title}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// waczInput is one WARC member of a WACZ, opened for reading by the import.
type waczInput struct {
	name string // "FILE.wacz!archive/data.warc.gz", used in messages
	f    *zip.File
}

// openWACZ opens the WACZ at p and lists its WARC members: the files under archive/ whose
// names end in ".warc" or ".warc.gz", in name order. The WACZ is refused, with one line
// naming it, when it is not a ZIP, has more than MaxWACZMembers files, holds a member whose
// name is absolute or contains "..", a backslash or a control character, or that is a
// symlink or other non-regular file, holds a WARC member claiming more than
// MaxWACZMemberBytes, or holds no WARC member. Its pages.jsonl and indexes are not read: the import infers pages itself.
// The caller closes the returned zip.ReadCloser.
func openWACZ(p string) (*zip.ReadCloser, []waczInput, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("read %s: not a regular file", p)
	}
	zr, err := zip.OpenReader(p)
	if err != nil {
		if errors.Is(err, zip.ErrFormat) {
			return nil, nil, fmt.Errorf("read %s: not a WACZ: not a ZIP file (%v)", p, err)
		}
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	ins, err := waczMembers(p, zr.File)
	if err != nil {
		_ = zr.Close()
		return nil, nil, err
	}
	return zr, ins, nil
}

// waczMembers checks the members of a WACZ at p and returns its WARC members (see openWACZ).
func waczMembers(p string, files []*zip.File) ([]waczInput, error) {
	if len(files) > MaxWACZMembers {
		return nil, fmt.Errorf("read %s: %d files in the ZIP, more than %d", p, len(files), MaxWACZMembers)
	}
	var ins []waczInput
	for _, f := range files {
		name := f.Name
		if err := checkMemberName(name); err != nil {
			return nil, fmt.Errorf("read %s: member %q: %w", p, name, err)
		}
		mode := f.Mode()
		if mode&fs.ModeSymlink != 0 || (!mode.IsRegular() && !mode.IsDir()) {
			return nil, fmt.Errorf("read %s: member %q: not a regular file (mode %s)", p, name, mode)
		}
		lower := strings.ToLower(name)
		if mode.IsDir() || !strings.HasPrefix(lower, "archive/") ||
			!(strings.HasSuffix(lower, ".warc") || strings.HasSuffix(lower, ".warc.gz")) {
			continue
		}
		if f.UncompressedSize64 > uint64(MaxWACZMemberBytes) {
			return nil, fmt.Errorf("read %s: member %q claims %d bytes, more than %d", p, name, f.UncompressedSize64, MaxWACZMemberBytes)
		}
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return nil, fmt.Errorf("read %s: member %q: unsupported ZIP compression method %d", p, name, f.Method)
		}
		ins = append(ins, waczInput{name: p + "!" + name, f: f})
	}
	if len(ins) == 0 {
		return nil, fmt.Errorf("read %s: not a WACZ: no archive/*.warc or archive/*.warc.gz member", p)
	}
	slices.SortStableFunc(ins, func(a, b waczInput) int { return strings.Compare(a.f.Name, b.f.Name) })
	for i := 1; i < len(ins); i++ {
		if ins[i].f.Name == ins[i-1].f.Name {
			return nil, fmt.Errorf("read %s: member %q occurs twice", p, ins[i].f.Name)
		}
	}
	return ins, nil
}

// checkMemberName refuses ZIP member names that could leave a folder when extracted.
func checkMemberName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return errors.New("name holds a backslash or a control character")
	case strings.HasPrefix(name, "/") || (len(name) > 1 && name[1] == ':'):
		return errors.New("absolute path")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return errors.New("path leaves the archive (\"..\")")
		}
	}
	return nil
}

// open opens the member for the WARC reader: its uncompressed bytes, checked against the
// size and CRC-32 the ZIP claims.
func (in waczInput) open() (*warc.Reader, error) {
	rc, err := in.f.Open()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", in.name, err)
	}
	r, err := warc.NewReader(in.name, rc, 0, int64(in.f.UncompressedSize64))
	if err != nil {
		_ = rc.Close()
		return nil, err
	}
	r.File = rc
	return r, nil
}

// VerifyWACZ checks the WACZ at p against its datapackage.json: every resource is a member
// whose size and sha256 match, and datapackage-digest.json, when present, holds the sha256
// of datapackage.json. It returns the package. Members are read in full, so this is for
// tests and checks, not for import.
func VerifyWACZ(p string) (*WACZPackage, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer zr.Close()
	byName := map[string]*zip.File{}
	for _, f := range zr.File {
		if err := checkMemberName(f.Name); err != nil {
			return nil, fmt.Errorf("read %s: member %q: %w", p, f.Name, err)
		}
		byName[f.Name] = f
	}
	read := func(name string, max int64) ([]byte, error) {
		f := byName[name]
		if f == nil {
			return nil, fmt.Errorf("read %s: no %s", p, name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, name, err)
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, max+1))
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, name, err)
		}
		if int64(len(data)) > max {
			return nil, fmt.Errorf("read %s!%s: larger than %d bytes", p, name, max)
		}
		return data, nil
	}
	pkgJSON, err := read(WACZPackageFile, MaxManifestBytes*16)
	if err != nil {
		return nil, err
	}
	var pkg WACZPackage
	if err := json.Unmarshal(pkgJSON, &pkg); err != nil {
		return nil, fmt.Errorf("read %s!%s: %w", p, WACZPackageFile, err)
	}
	if pkg.Profile != waczProfile {
		return nil, fmt.Errorf("read %s!%s: profile %q, want %q", p, WACZPackageFile, pkg.Profile, waczProfile)
	}
	if _, ok := byName[WACZDigestFile]; ok {
		digJSON, err := read(WACZDigestFile, MaxManifestBytes)
		if err != nil {
			return nil, err
		}
		var dig WACZDigest
		if err := json.Unmarshal(digJSON, &dig); err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, WACZDigestFile, err)
		}
		if want := "sha256:" + sha256Hex(pkgJSON); dig.Path != WACZPackageFile || dig.Hash != want {
			return nil, fmt.Errorf("read %s!%s: names %q %s, want %q %s", p, WACZDigestFile, dig.Path, dig.Hash, WACZPackageFile, want)
		}
	}
	for _, res := range pkg.Resources {
		f := byName[res.Path]
		if f == nil {
			return nil, fmt.Errorf("read %s!%s: resource %q is not in the ZIP", p, WACZPackageFile, res.Path)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, res.Path, err)
		}
		var h hash.Hash = sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, res.Path, err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != res.Hash || n != res.Bytes {
			return nil, fmt.Errorf("read %s!%s: %d bytes %s, datapackage.json says %d bytes %s", p, res.Path, n, got, res.Bytes, res.Hash)
		}
	}
	return &pkg, nil
}
