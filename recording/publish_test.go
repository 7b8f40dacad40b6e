package recording

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// packHand builds the hand-made bundle and packs it; it returns the bundle and recording dirs.
func packHand(t *testing.T, partSize int64) (bundleDir, recDir string) {
	t.Helper()
	bundleDir = filepath.Join(t.TempDir(), "bundle")
	writeHandBundle(t, bundleDir, handExchanges())
	recDir = filepath.Join(t.TempDir(), "tasks", "hand", "recording")
	if err := packParts2(bundleDir, recDir, partSize); err != nil {
		t.Fatal(err)
	}
	return bundleDir, recDir
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func baseNames(paths []string) []string {
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}

func TestPackUnpackRoundTrip(t *testing.T) {
	bundleDir, recDir := packHand(t, PartSize)
	files, err := RecordingFiles(recDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(baseNames(files), " "); got != "manifest.json pages.jsonl entries.jsonl.gz warc.tar.gz" {
		t.Errorf("recording files: %s", got)
	}
	var m map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(recDir, RecordingManifestFile)), &m); err != nil {
		t.Fatal(err)
	}
	if m["format"] != float64(2) || m["task_id"] != "hand" {
		t.Errorf("recording manifest = %v", m)
	}

	dest := filepath.Join(t.TempDir(), "unpacked")
	if err := Unpack(recDir, dest); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{WARCFile, EntriesFile, PagesFile} {
		if !bytes.Equal(mustRead(t, filepath.Join(bundleDir, name)), mustRead(t, filepath.Join(dest, name))) {
			t.Errorf("%s differs after pack and unpack", name)
		}
	}
	if n, err := CountRecordingEntries(recDir); n != len(handExchanges()) || err != nil {
		t.Errorf("CountRecordingEntries = %d, %v", n, err)
	}
	if strings.Contains(string(mustRead(t, filepath.Join(dest, ManifestFile))), "format") {
		t.Errorf("unpacked manifest keeps format")
	}
	b, err := OpenBundle(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Manifest.Format != 0 || b.Manifest.CapturedTo != "2024-01-02T03:04:06.000Z" {
		t.Errorf("manifest %+v", b.Manifest)
	}
	r, err := b.Response(b.ByID("e000003"))
	if err != nil {
		t.Fatal(err)
	}
	if readAllString(t, r.Body) != handBigBody {
		t.Errorf("revisit body differs after round trip")
	}
}

func TestPackIsDeterministic(t *testing.T) {
	_, rec1 := packHand(t, PartSize)
	_, rec2 := packHand(t, PartSize)
	h1, err := HashRecording(rec1)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := HashRecording(rec2)
	if err != nil {
		t.Fatal(err)
	}
	if h1 != h2 || len(h1) != 64 {
		t.Errorf("hashes %s and %s", h1, h2)
	}
	// the tar entry carries only fixed metadata
	zr, err := gzip.NewReader(bytes.NewReader(mustRead(t, filepath.Join(rec1, RecordingWARCFile))))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Header.Name != "" || !zr.Header.ModTime.IsZero() {
		t.Errorf("gzip header %+v", zr.Header)
	}
	hdr, err := tar.NewReader(zr).Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != WARCFile || hdr.Mode != 0o644 || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" ||
		hdr.Gname != "" || !hdr.ModTime.Equal(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("tar header %+v", hdr)
	}
	// a change in any file changes the hash
	if err := os.WriteFile(filepath.Join(rec2, RecordingPagesFile), []byte(`{"url":"https://x/"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if h3, _ := HashRecording(rec2); h3 == h1 {
		t.Errorf("hash did not change with pages.jsonl")
	}
}

func TestPackSplitsParts(t *testing.T) {
	_, whole := packHand(t, PartSize)
	size := int64(len(mustRead(t, filepath.Join(whole, RecordingWARCFile))))

	// exactly one part's size: not split
	_, rec := packHand(t, size)
	if files, _ := RecordingFiles(rec); filepath.Base(files[3]) != RecordingWARCFile || len(files) != 4 {
		t.Errorf("part size = archive size: files %v", baseNames(files))
	}

	const partSize = 100
	_, rec = packHand(t, partSize)
	files, err := RecordingFiles(rec)
	if err != nil {
		t.Fatal(err)
	}
	parts := files[3:]
	wantParts := int((size + partSize - 1) / partSize)
	if len(parts) != wantParts {
		t.Fatalf("%d parts, want %d: %v", len(parts), wantParts, baseNames(files))
	}
	var joined []byte
	for i, p := range parts {
		if filepath.Base(p) != fmt.Sprintf("warc.tar.gz.%03d", i) {
			t.Errorf("part %d is %s", i, p)
		}
		data := mustRead(t, p)
		if i < len(parts)-1 && len(data) != partSize {
			t.Errorf("part %d is %d bytes", i, len(data))
		}
		joined = append(joined, data...)
	}
	if !bytes.Equal(joined, mustRead(t, filepath.Join(whole, RecordingWARCFile))) {
		t.Errorf("parts do not join to the unsplit archive")
	}
	dest := filepath.Join(t.TempDir(), "b")
	if err := Unpack(rec, dest); err != nil {
		t.Fatal(err)
	}

	// a missing part
	if err := os.Remove(parts[1]); err != nil {
		t.Fatal(err)
	}
	err = Unpack(rec, filepath.Join(t.TempDir(), "b"))
	if err == nil || !strings.Contains(err.Error(), "part warc.tar.gz.001 is missing") {
		t.Errorf("missing part: %v", err)
	}
}

func TestPackReplacesOldRecording(t *testing.T) {
	bundleDir, recDir := packHand(t, 100)
	if err := os.WriteFile(filepath.Join(recDir, "stale.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Pack(bundleDir, recDir); err != nil {
		t.Fatal(err)
	}
	des, err := os.ReadDir(recDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if got := strings.Join(names, " "); got != "data.warc.gz entries.jsonl.gz manifest.json pages.jsonl" {
		t.Errorf("recording holds %s", got)
	}
	assertOnlyEntry(t, filepath.Dir(recDir), "recording")

	// a failed pack leaves the recording as it was, and no temporary directory
	before, _ := HashRecording(recDir)
	if err := os.WriteFile(filepath.Join(bundleDir, EntriesFile), []byte("{bad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Pack(bundleDir, recDir); err == nil || !strings.Contains(err.Error(), "entries.jsonl line 1") {
		t.Errorf("pack of a broken bundle: %v", err)
	}
	if after, _ := HashRecording(recDir); after != before {
		t.Errorf("failed pack changed the recording")
	}
	assertOnlyEntry(t, filepath.Dir(recDir), "recording")
}

func assertOnlyEntry(t *testing.T, dir, name string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 1 || des[0].Name() != name {
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		t.Errorf("%s holds %v, want only %s", dir, names, name)
	}
}

func TestRecordingFiles(t *testing.T) {
	if files, err := RecordingFiles(filepath.Join(t.TempDir(), "none")); files != nil || err != nil {
		t.Errorf("missing dir: %v %v", files, err)
	}
	if files, err := RecordingFiles(t.TempDir()); files != nil || err != nil {
		t.Errorf("empty dir: %v %v", files, err)
	}
	if _, err := HashRecording(t.TempDir()); err == nil {
		t.Errorf("hash of no recording succeeded")
	}
	cases := []struct {
		name string
		edit func(t *testing.T, rec string)
		want string
	}{
		{"both archive and parts", func(t *testing.T, rec string) {
			writeFile("warc.tar.gz.000", "x")(t, rec)
		}, "has both warc.tar.gz and warc.tar.gz.000"},
		{"no archive", removeFile(RecordingWARCFile), "data.warc.gz is missing"},
		{"archives of both formats", writeFile(RecordingDataFile, "x"), "has both data.warc.gz (format 3) and warc.tar.gz (format 2)"},
		{"format 3 parts with a gap", func(t *testing.T, rec string) {
			removeFile(RecordingWARCFile)(t, rec)
			writeFile(RecordingDataPart(0), "x")(t, rec)
			writeFile(RecordingDataPart(2), "x")(t, rec)
		}, "part data-001.warc.gz is missing"},
		{"format 3 whole and parts", func(t *testing.T, rec string) {
			removeFile(RecordingWARCFile)(t, rec)
			writeFile(RecordingDataFile, "x")(t, rec)
			writeFile(RecordingDataPart(0), "x")(t, rec)
		}, "has both data.warc.gz and data-000.warc.gz"},
		{"no entries", removeFile(RecordingEntriesFile), "entries.jsonl.gz is missing"},
		{"symlinked archive", func(t *testing.T, rec string) {
			removeFile(RecordingWARCFile)(t, rec)
			if err := os.Symlink("/dev/zero", filepath.Join(rec, RecordingWARCFile)); err != nil {
				t.Fatal(err)
			}
		}, "warc.tar.gz is not a regular file"},
		{"directory as manifest", func(t *testing.T, rec string) {
			removeFile(RecordingManifestFile)(t, rec)
			if err := os.Mkdir(filepath.Join(rec, RecordingManifestFile), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "manifest.json is not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, rec := packHand(t, PartSize)
			c.edit(t, rec)
			_, err := RecordingFiles(rec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// packTarEntry is one entry of a tar built by a test.
type packTarEntry struct {
	hdr  tar.Header
	body []byte
}

func packTar(t testing.TB, entries ...packTarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := e.hdr
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func packGzip(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUnpackRejects(t *testing.T) {
	warcBytes := func(t *testing.T, rec string) []byte {
		d := filepath.Join(t.TempDir(), "d")
		if err := Unpack(rec, d); err != nil {
			t.Fatal(err)
		}
		return mustRead(t, filepath.Join(d, WARCFile))
	}
	reg := func(name string, body []byte) packTarEntry {
		return packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name}, body: body}
	}
	withTar := func(entries func(w []byte) []packTarEntry) func(t *testing.T, rec string) {
		return func(t *testing.T, rec string) {
			w := warcBytes(t, rec)
			data := packGzip(t, packTar(t, entries(w)...))
			if err := os.WriteFile(filepath.Join(rec, RecordingWARCFile), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name string
		edit func(t *testing.T, rec string)
		want string
	}{
		{"format 1", writeFile(RecordingManifestFile, `{"task_id":"hand","format":1,"start_url":"x"}`), "has format 1; this pab reads format 3 (and 2)"},
		{"format 3 over warc.tar.gz", writeFile(RecordingManifestFile, `{"format":3}`), "manifest says format 3, but the archive is warc.tar.gz"},
		{"format 4", writeFile(RecordingManifestFile, `{"format":4}`), "has format 4; this pab reads format 3 (and 2)"},
		{"no format", writeFile(RecordingManifestFile, `{"task_id":"hand"}`), "has no format (older than format 2); this pab reads format 3"},
		{"format as a string", writeFile(RecordingManifestFile, `{"format":"2"}`), `has format "2"; this pab reads format 3`},
		{"manifest unknown field", writeFile(RecordingManifestFile, `{"format":2,"who":"me"}`), `unknown field "who"`},
		{"dotdot path", withTar(func(w []byte) []packTarEntry { return []packTarEntry{reg("archive/../../evil", w)} }), `tar entry "archive/../../evil": path outside archive/`},
		{"absolute path", withTar(func(w []byte) []packTarEntry { return []packTarEntry{reg("/tmp/evil", w)} }), `tar entry "/tmp/evil": path outside archive/`},
		{"symlink", withTar(func(w []byte) []packTarEntry {
			return []packTarEntry{{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: WARCFile, Linkname: "/etc/passwd"}}}
		}), `tar entry "archive/data.warc" is a symlink to "/etc/passwd"`},
		{"hard link", withTar(func(w []byte) []packTarEntry {
			return []packTarEntry{reg("archive/x.warc", w), {hdr: tar.Header{Typeflag: tar.TypeLink, Name: WARCFile, Linkname: "archive/x.warc"}}}
		}), `tar entry "archive/x.warc": only archive/data.warc is allowed`},
		{"hard link first", withTar(func(w []byte) []packTarEntry {
			return []packTarEntry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: WARCFile, Linkname: "/etc/passwd"}}}
		}), `is a hard link to "/etc/passwd"`},
		{"device", withTar(func(w []byte) []packTarEntry {
			return []packTarEntry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: WARCFile, Devmajor: 1, Devminor: 5}}}
		}), "is a device or pipe"},
		{"directory entry", withTar(func(w []byte) []packTarEntry {
			return []packTarEntry{{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "archive/", Mode: 0o755}}, reg(WARCFile, w)}
		}), `tar entry "archive/" is a directory`},
		{"other name", withTar(func(w []byte) []packTarEntry { return []packTarEntry{reg("archive/data.warc.gz", w)} }), "only archive/data.warc is allowed"},
		{"extra file", withTar(func(w []byte) []packTarEntry { return []packTarEntry{reg(WARCFile, w), reg("README", []byte("hi"))} }), `tar holds a second entry "README"`},
		{"second copy", withTar(func(w []byte) []packTarEntry { return []packTarEntry{reg(WARCFile, w), reg(WARCFile, w)} }), `second entry "archive/data.warc"`},
		{"empty tar", withTar(func(w []byte) []packTarEntry { return nil }), "tar holds no archive/data.warc"},
		{"shortened warc", withTar(func(w []byte) []packTarEntry { return []packTarEntry{reg(WARCFile, w[:len(w)-10])} }), "past the end of archive/data.warc"},
		{"not gzip", writeFile(RecordingWARCFile, "plain text"), "warc.tar.gz at offset"},
		{"truncated gzip", func(t *testing.T, rec string) {
			p := filepath.Join(rec, RecordingWARCFile)
			data := mustRead(t, p)
			writeFile(RecordingWARCFile, string(data[:len(data)-6]))(t, rec)
		}, "unexpected EOF"},
		{"corrupt gzip", func(t *testing.T, rec string) {
			p := filepath.Join(rec, RecordingWARCFile)
			data := mustRead(t, p)
			data[len(data)-5] ^= 0xff // the stored length
			writeFile(RecordingWARCFile, string(data))(t, rec)
		}, "warc.tar.gz"},
		{"truncated entries", func(t *testing.T, rec string) {
			p := filepath.Join(rec, RecordingEntriesFile)
			data := mustRead(t, p)
			writeFile(RecordingEntriesFile, string(data[:len(data)/2]))(t, rec)
		}, "entries.jsonl.gz at offset"},
		{"entries not gzip", writeFile(RecordingEntriesFile, "{}"), "entries.jsonl.gz at offset 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, rec := packHand(t, PartSize)
			c.edit(t, rec)
			dest := filepath.Join(t.TempDir(), "dest")
			err := Unpack(rec, dest)
			if err == nil {
				t.Fatalf("Unpack succeeded, want an error containing %q", c.want)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v\nwant one line containing %q", err, c.want)
			}
			if strings.Contains(c.name, "path") {
				if _, err := os.Stat(filepath.Join(filepath.Dir(dest), "evil")); err == nil {
					t.Errorf("file written outside the destination")
				}
			}
		})
	}
}

func TestUnpackDestination(t *testing.T) {
	_, rec := packHand(t, PartSize)
	dest := t.TempDir() // exists and is empty: accepted
	if err := Unpack(rec, dest); err != nil {
		t.Fatal(err)
	}
	if err := Unpack(rec, dest); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("unpack into a full directory: %v", err)
	}
	if err := Unpack(t.TempDir(), filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "no recording files") {
		t.Errorf("unpack of nothing: %v", err)
	}
}

func TestExtractWARCTarBound(t *testing.T) {
	data := packTar(t, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: WARCFile}, body: make([]byte, 2000)})
	err := extractWARCTar(bytes.NewReader(data), io.Discard, 1000, nil)
	if err == nil || !strings.Contains(err.Error(), "is 2000 bytes, more than the limit of 1000") {
		t.Errorf("err = %v", err)
	}
	err = extractWARCTar(bytes.NewReader(data[:1500]), io.Discard, 4000, nil)
	if err == nil || !strings.Contains(err.Error(), "after 988 of 2000 bytes: unexpected EOF") {
		t.Errorf("truncated tar: %v", err)
	}
}

// FuzzUnpackTar feeds arbitrary tar streams to the extraction: it must either copy out one
// entry of at most the bound, or return a one-line error; never panic.
func FuzzUnpackTar(f *testing.F) {
	w := []byte("WARC/1.1\r\nContent-Length: 0\r\n\r\n\r\n\r\n")
	f.Add(packTar(f, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: WARCFile}, body: w}))
	f.Add(packTar(f, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "../evil"}, body: w}))
	f.Add(packTar(f, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: WARCFile, Linkname: "/etc/passwd"}}))
	f.Add(packTar(f, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: WARCFile}, body: w},
		packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "x"}, body: w}))
	f.Add(packTar(f, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: WARCFile, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"path": "/abs"}}, body: w}))
	f.Add(packTar(f, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: WARCFile, Format: tar.FormatGNU}, body: w}))
	f.Add([]byte{})
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		err := extractWARCTar(bytes.NewReader(data), &out, max, nil)
		if err == nil {
			if out.Len() > max {
				t.Fatalf("accepted an entry of %d bytes", out.Len())
			}
			// an accepted stream must name archive/data.warc as a regular file
			hdr, herr := tar.NewReader(bytes.NewReader(data)).Next()
			if herr != nil || hdr.Name != WARCFile || hdr.Typeflag != tar.TypeReg {
				t.Fatalf("accepted %+v, %v", hdr, herr)
			}
		} else if strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
	})
}

// BenchmarkPackUnpack packs and unpacks a synthetic bundle of about 50 MB of HTML-like
// records and the bundle imported from the 2.5 MB blackbook capture (run with
// -benchtime 1x to measure once; the times are logged).
func BenchmarkPackUnpack(b *testing.B) {
	b.Run("synthetic-50MB", func(b *testing.B) {
		bundleDir := filepath.Join(b.TempDir(), "bundle")
		var xs []handExchange
		page := strings.Repeat(`<div class="product"><a href="/item/%[1]d">Item %[1]d</a><span class="price">$%[1]d.99</span></div>`+"\n", 40)
		for i := 0; len(xs)*len(page) < 50<<20; i++ {
			xs = append(xs, handExchange{id: fmt.Sprintf("e%06d", i), url: fmt.Sprintf("https://shop.test/p/%d", i),
				head: "HTTP/1.1 200 OK\r\nContent-Type: text/html", body: fmt.Sprintf(page, i)})
		}
		writeHandBundle(b, bundleDir, xs)
		benchPackUnpack(b, bundleDir)
	})
	b.Run("words-50MB", func(b *testing.B) {
		// pseudo-random words: compresses about as well as real HTML text
		bundleDir := filepath.Join(b.TempDir(), "bundle")
		rng := rand.New(rand.NewPCG(1, 2))
		words := strings.Fields("the a price book item cart search result page next previous title author review stars " +
			"stock available shipping free order total tax add remove quantity category travel mystery history science")
		var xs []handExchange
		var size int
		for i := 0; size < 50<<20; i++ {
			var body strings.Builder
			for body.Len() < 64<<10 {
				body.WriteString(words[rng.IntN(len(words))])
				body.WriteString(fmt.Sprintf(" %d ", rng.IntN(100000)))
			}
			xs = append(xs, handExchange{id: fmt.Sprintf("e%06d", i), url: fmt.Sprintf("https://shop.test/p/%d", i),
				head: "HTTP/1.1 200 OK\r\nContent-Type: text/html", body: body.String()})
			size += body.Len()
		}
		writeHandBundle(b, bundleDir, xs)
		benchPackUnpack(b, bundleDir)
	})
	b.Run("random-50MB", func(b *testing.B) {
		// incompressible bodies: the archive is split into parts of PartSize
		bundleDir := filepath.Join(b.TempDir(), "bundle")
		rng := rand.New(rand.NewPCG(3, 4))
		var xs []handExchange
		for i := 0; len(xs) < 50; i++ {
			body := make([]byte, 1<<20)
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
			xs = append(xs, handExchange{id: fmt.Sprintf("e%06d", i), url: fmt.Sprintf("https://shop.test/img/%d", i),
				head: "HTTP/1.1 200 OK\r\nContent-Type: image/png", body: string(body)})
		}
		writeHandBundle(b, bundleDir, xs)
		benchPackUnpack(b, bundleDir)
	})
	b.Run("blackbook", func(b *testing.B) {
		bundleDir := filepath.Join(b.TempDir(), "bundle")
		if _, err := ImportWARCs([]string{"../testdata/sites/IAH-20080430204825-00000-blackbook.warc.gz"}, bundleDir, ImportOptions{}); err != nil {
			b.Skip(err)
		}
		benchPackUnpack(b, bundleDir)
	})
}

func benchPackUnpack(b *testing.B, bundleDir string) {
	dir := b.TempDir()
	fi, _ := os.Stat(filepath.Join(bundleDir, WARCFile))
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := filepath.Join(dir, fmt.Sprintf("rec%d", i))
		start := time.Now()
		if err := Pack(bundleDir, rec); err != nil {
			b.Fatal(err)
		}
		packed := time.Since(start)
		start = time.Now()
		if err := Unpack(rec, filepath.Join(dir, fmt.Sprintf("un%d", i))); err != nil {
			b.Fatal(err)
		}
		unpacked := time.Since(start)
		files, _ := RecordingFiles(rec)
		var size int64
		for _, f := range files {
			st, _ := os.Stat(f)
			size += st.Size()
		}
		b.Logf("data.warc %d bytes: pack %v, unpack %v; recording %d bytes in %d files", fi.Size(), packed, unpacked, size, len(files))
	}
}
