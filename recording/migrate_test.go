package recording

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// format1Tar builds the tar of a format 1 recording from the bundle in dir, with the
// manifest replaced by manifest and extra entries appended.
func format1Tar(t *testing.T, dir, manifest string, extra ...packTarEntry) []byte {
	t.Helper()
	entries := []packTarEntry{
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: ManifestFile}, body: []byte(manifest)},
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "archive/"}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: WARCFile}, body: mustRead(t, filepath.Join(dir, WARCFile))},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "./" + EntriesFile}, body: mustRead(t, filepath.Join(dir, EntriesFile))},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: PagesFile}, body: mustRead(t, filepath.Join(dir, PagesFile))},
	}
	return packTar(t, append(entries, extra...)...)
}

const format1Manifest = `{"task_id":"shop","captured_from":"2026-03-01T10:00:00.000Z","start_url":"https://shop.test/","format":1}`

func TestMigrateFormat1(t *testing.T) {
	bundle := cleanAuditBundle(t)
	for _, split := range []bool{false, true} {
		rec := filepath.Join(t.TempDir(), "tasks", "shop", "recording")
		os.MkdirAll(rec, 0o755)
		gz := packGzip(t, format1Tar(t, bundle, format1Manifest))
		if split {
			half := len(gz) / 2
			os.WriteFile(filepath.Join(rec, "bundle.tar.gz.000"), gz[:half], 0o644)
			os.WriteFile(filepath.Join(rec, "bundle.tar.gz.001"), gz[half:], 0o644)
		} else {
			os.WriteFile(filepath.Join(rec, Format1File), gz, 0o644)
		}
		if f, err := RecordingFormatOf(rec); f != 1 || err != nil {
			t.Fatalf("RecordingFormatOf = %d, %v", f, err)
		}
		if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w")); len(probs) != 1 || !strings.Contains(probs[0].String(), "format 1 recording") {
			t.Errorf("audit of a format 1 recording: %v", probs)
		}
		from, _, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work"))
		if from != 1 || err != nil {
			t.Fatalf("MigrateRecording = %d, %v", from, err)
		}
		if f, err := RecordingFormatOf(rec); f != RecordingFormat || err != nil {
			t.Fatalf("after migration: format %d, %v", f, err)
		}
		files, _ := os.ReadDir(rec)
		var names []string
		for _, f := range files {
			names = append(names, f.Name())
		}
		if got := strings.Join(names, " "); got != "data.warc.gz entries.jsonl.gz manifest.json pages.jsonl" {
			t.Errorf("recording holds %s", got)
		}
		dest := filepath.Join(t.TempDir(), "unpacked")
		if err := Unpack(rec, dest); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{WARCFile, EntriesFile, PagesFile} {
			if !bytes.Equal(mustRead(t, filepath.Join(bundle, name)), mustRead(t, filepath.Join(dest, name))) {
				t.Errorf("%s changed in migration", name)
			}
		}
		m := string(mustRead(t, filepath.Join(rec, RecordingManifestFile)))
		if strings.Contains(m, "start_url") || !strings.Contains(m, `"format": 3`) || !strings.Contains(m, `"task_id": "shop"`) {
			t.Errorf("manifest %s", m)
		}
		if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w")); len(probs) != 0 {
			t.Errorf("migrated recording fails the audit:\n%s", problemText(probs))
		}
		// migrating again changes nothing
		h1, _ := HashRecording(rec)
		if from, dropped, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work")); from != RecordingFormat || dropped != nil || err != nil {
			t.Errorf("second migration: %d, %v", from, err)
		}
		if h2, _ := HashRecording(rec); h1 != h2 {
			t.Errorf("second migration changed the recording")
		}
	}
}

func TestMigrateRefusesBadTars(t *testing.T) {
	bundle := cleanAuditBundle(t)
	reg := func(name, body string) packTarEntry {
		return packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name}, body: []byte(body)}
	}
	for _, tc := range []struct {
		name string
		gz   func() []byte
		want string
	}{
		{"path outside", func() []byte {
			return packGzip(t, format1Tar(t, bundle, format1Manifest, reg("../escape", "x")))
		}, `tar entry "../escape": only manifest.json`},
		{"symlink", func() []byte {
			return packGzip(t, format1Tar(t, bundle, format1Manifest, packTarEntry{hdr: tarLink("archive/other", "/etc/passwd")}))
		}, `tar entry "archive/other" is a link to "/etc/passwd"`},
		{"hard link", func() []byte {
			return packGzip(t, format1Tar(t, bundle, format1Manifest, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: PagesFile, Linkname: WARCFile}}))
		}, "is a link to"},
		{"second file", func() []byte {
			return packGzip(t, format1Tar(t, bundle, format1Manifest, reg(ManifestFile, "{}")))
		}, "tar holds manifest.json twice"},
		{"other file", func() []byte {
			return packGzip(t, format1Tar(t, bundle, format1Manifest, reg("archive/notes.txt", "hi")))
		}, `tar entry "archive/notes.txt"`},
		{"other directory", func() []byte {
			return packGzip(t, format1Tar(t, bundle, format1Manifest, packTarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "etc/"}}))
		}, "a directory other than"},
		{"missing file", func() []byte {
			return packGzip(t, packTar(t, reg(ManifestFile, format1Manifest)))
		}, "tar holds no archive/data.warc"},
		{"unknown manifest field", func() []byte {
			return packGzip(t, format1Tar(t, bundle, `{"task_id":"shop","recorder":"x"}`))
		}, `unknown field "recorder"`},
		{"truncated gzip", func() []byte {
			gz := packGzip(t, format1Tar(t, bundle, format1Manifest))
			return gz[:len(gz)-20]
		}, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "recording")
			os.MkdirAll(rec, 0o755)
			gz := tc.gz()
			os.WriteFile(filepath.Join(rec, Format1File), gz, 0o644)
			_, _, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			// the recording is left as it was
			if got := mustRead(t, filepath.Join(rec, Format1File)); !bytes.Equal(got, gz) {
				t.Errorf("recording changed")
			}
			if _, err := os.Stat(filepath.Join(rec, RecordingManifestFile)); err == nil {
				t.Errorf("a manifest.json appeared")
			}
		})
	}
}

// TestPublishingIsDeterministic packs the same bundle twice, and imports the same WARC
// twice, and compares every published file byte for byte, split into parts and whole.
func TestPublishingIsDeterministic(t *testing.T) {
	pub := func(t *testing.T, bundle string, partSize int64) map[string][]byte {
		rec := filepath.Join(t.TempDir(), "recording")
		if err := PackParts(bundle, rec, partSize); err != nil {
			t.Fatal(err)
		}
		files, err := RecordingFiles(rec)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, f := range files {
			out[filepath.Base(f)] = mustRead(t, f)
		}
		return out
	}
	same := func(t *testing.T, a, b map[string][]byte, wantParts bool) {
		t.Helper()
		if len(a) != len(b) {
			t.Fatalf("%d files, then %d", len(a), len(b))
		}
		_, split := a[RecordingDataPart(1)]
		if split != wantParts {
			t.Errorf("split into parts: %v", split)
		}
		for name, data := range a {
			if len(data) == 0 || !bytes.Equal(data, b[name]) {
				t.Errorf("%s differs", name)
			}
		}
	}
	bundle := cleanAuditBundle(t)
	same(t, pub(t, bundle, PartSize), pub(t, bundle, PartSize), false)
	same(t, pub(t, bundle, 1000), pub(t, bundle, 1000), true)

	imp := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "bundle")
		if _, err := ImportWARCs([]string{"../testdata/sites/lil-projects.warc.gz"}, dir, ImportOptions{TaskID: "lil"}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b := imp(t), imp(t)
	same(t, pub(t, a, PartSize), pub(t, b, PartSize), false)
	same(t, pub(t, a, 100_000), pub(t, b, 100_000), true)
}

// FuzzUnpackFormat1 feeds arbitrary tar bytes to the format 1 reader: it must return an
// error or a bundle that opens, never panic or write outside the destination.
func FuzzUnpackFormat1(f *testing.F) {
	bundle := filepath.Join(f.TempDir(), "b")
	writeTestBundle(f, bundle, Manifest{TaskID: "f"}, auditExchanges()[:1], nil)
	read := func(name string) []byte { d, _ := os.ReadFile(filepath.Join(bundle, name)); return d }
	good := packTar(f,
		packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: ManifestFile}, body: []byte(format1Manifest)},
		packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: WARCFile}, body: read(WARCFile)},
		packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: EntriesFile}, body: read(EntriesFile)},
		packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: PagesFile}, body: read(PagesFile)})
	f.Add(good)
	f.Add(good[:700])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		rec := filepath.Join(root, "rec")
		os.Mkdir(rec, 0o755)
		os.WriteFile(filepath.Join(rec, Format1File), packGzip(t, data), 0o644)
		dest := filepath.Join(root, "out", "bundle")
		if err := UnpackFormat1(rec, dest); err != nil {
			return
		}
		b, err := OpenBundle(dest)
		if err != nil {
			t.Fatalf("unpacked bundle does not open: %v", err)
		}
		b.Close()
	})
}

// TestMigrateFormat1ExtraFiles: a format 1 tar that also holds seed 003's
// indexes/index.cdxj and datapackage.json migrates; both are skipped. Each may appear only
// once and only as a regular file.
func TestMigrateFormat1ExtraFiles(t *testing.T) {
	bundle := cleanAuditBundle(t)
	reg := func(name, body string) packTarEntry {
		return packTarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name}, body: []byte(body)}
	}
	cdxj := reg("indexes/index.cdxj", "test,shop)/ 20260301100000 {\"url\":\"https://shop.test/\"}\n")
	dp := reg("./datapackage.json", `{"profile":"data-package","resources":[]}`)
	rec := filepath.Join(t.TempDir(), "recording")
	os.MkdirAll(rec, 0o755)
	os.WriteFile(filepath.Join(rec, Format1File), packGzip(t, format1Tar(t, bundle, format1Manifest, cdxj, dp)), 0o644)
	if from, _, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work")); from != 1 || err != nil {
		t.Fatalf("MigrateRecording = %d, %v", from, err)
	}
	dest := filepath.Join(t.TempDir(), "unpacked")
	if err := Unpack(rec, dest); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"indexes/index.cdxj", "datapackage.json"} {
		if _, err := os.Stat(filepath.Join(dest, name)); err == nil {
			t.Errorf("%s was kept", name)
		}
	}
	if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w")); len(probs) != 0 {
		t.Errorf("migrated recording fails the audit:\n%s", problemText(probs))
	}

	for _, tc := range []struct {
		name  string
		extra []packTarEntry
		want  string
	}{
		{"cdxj twice", []packTarEntry{cdxj, cdxj}, "tar holds indexes/index.cdxj twice"},
		{"datapackage twice", []packTarEntry{dp, reg("datapackage.json", "{}")}, "tar holds datapackage.json twice"},
		{"cdxj as a symlink", []packTarEntry{{hdr: tarLink("indexes/index.cdxj", "/etc/passwd")}}, "is a link to"},
		{"datapackage as a hard link", []packTarEntry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "datapackage.json", Linkname: WARCFile}}}, "is a link to"},
		{"datapackage as a directory", []packTarEntry{{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "datapackage.json/"}}}, "a directory other than"},
		{"other cdxj", []packTarEntry{reg("indexes/other.cdxj", "x")}, `tar entry "indexes/other.cdxj": only manifest.json`},
		{"cdxj elsewhere", []packTarEntry{reg("archive/index.cdxj", "x")}, `tar entry "archive/index.cdxj"`},
		{"traversal", []packTarEntry{reg("indexes/../datapackage.json", "{}")}, `tar entry "indexes/../datapackage.json"`},
		{"datapackage too large", []packTarEntry{reg("datapackage.json", strings.Repeat(" ", MaxManifestBytes+1))}, "more than the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "recording")
			os.MkdirAll(rec, 0o755)
			gz := packGzip(t, format1Tar(t, bundle, format1Manifest, tc.extra...))
			os.WriteFile(filepath.Join(rec, Format1File), gz, 0o644)
			_, _, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if got := mustRead(t, filepath.Join(rec, Format1File)); !bytes.Equal(got, gz) {
				t.Errorf("recording changed")
			}
		})
	}
}

// TestMigrateDropsLegacyManifestFields: a format 2 recording whose manifest holds start_url
// unpacks, audits clean, and migrate removes the field and nothing else: the other manifest
// bytes and the other files stay as they were.
func TestMigrateDropsLegacyManifestFields(t *testing.T) {
	bundle := cleanAuditBundle(t)
	for _, tc := range []struct{ name, in, want string }{
		{"middle", "{\n  \"task_id\": \"shop\",\n  \"start_url\": \"https://shop.test/\",\n  \"format\": 3\n}\n",
			"{\n  \"task_id\": \"shop\",\n  \"format\": 3\n}\n"},
		{"first", `{"start_url":"https://shop.test/", "task_id":"shop","format":3}`, `{"task_id":"shop","format":3}`},
		{"last", "{\"task_id\":\"shop\",\"format\":3 ,\n \"start_url\" : \"x\"\n}", "{\"task_id\":\"shop\",\"format\":3\n}"},
		{"twice", `{"start_url":"a","format":3,"start_url":"b"}`, `{"format":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "tasks", "shop", "recording")
			if err := Pack(bundle, rec); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(rec, RecordingManifestFile), []byte(tc.in), 0o644)
			before := map[string][]byte{}
			files, _ := RecordingFiles(rec)
			for _, f := range files {
				before[filepath.Base(f)] = mustRead(t, f)
			}
			if err := Unpack(rec, filepath.Join(t.TempDir(), "u")); err != nil {
				t.Fatalf("unpack with start_url: %v", err)
			}
			if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w")); len(probs) != 0 {
				t.Errorf("audit with start_url:\n%s", problemText(probs))
			}
			from, dropped, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work"))
			if from != RecordingFormat || len(dropped) == 0 || slices.ContainsFunc(dropped, func(k string) bool { return k != "start_url" }) || err != nil {
				t.Fatalf("MigrateRecording = %d, %v, %v", from, dropped, err)
			}
			if got := string(mustRead(t, filepath.Join(rec, RecordingManifestFile))); got != tc.want {
				t.Errorf("manifest = %q, want %q", got, tc.want)
			}
			for name, data := range before {
				if name != RecordingManifestFile && !bytes.Equal(data, mustRead(t, filepath.Join(rec, name))) {
					t.Errorf("%s changed", name)
				}
			}
			des, _ := os.ReadDir(filepath.Dir(rec))
			if len(des) != 1 {
				t.Errorf("left beside the recording: %v", des)
			}
			if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w")); len(probs) != 0 {
				t.Errorf("audit after migrate:\n%s", problemText(probs))
			}
			if _, dropped, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work")); dropped != nil || err != nil {
				t.Errorf("second migrate: %v, %v", dropped, err)
			}
		})
	}

	// any other unknown field is still refused, and migrate leaves such a manifest alone
	rec := filepath.Join(t.TempDir(), "recording")
	if err := Pack(bundle, rec); err != nil {
		t.Fatal(err)
	}
	bad := `{"task_id":"shop","start_url":"x","recorder":"me","format":3}`
	os.WriteFile(filepath.Join(rec, RecordingManifestFile), []byte(bad), 0o644)
	if err := Unpack(rec, filepath.Join(t.TempDir(), "u")); err == nil || !strings.Contains(err.Error(), `unknown field "recorder"`) {
		t.Errorf("unpack: %v", err)
	}
	if _, _, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work")); err == nil || !strings.Contains(err.Error(), `unknown field "recorder"`) {
		t.Errorf("migrate: %v", err)
	}
	if got := string(mustRead(t, filepath.Join(rec, RecordingManifestFile))); got != bad {
		t.Errorf("manifest changed to %s", got)
	}
}

// TestReadManifestLegacyFields: every legacy field the audit lets pass is accepted and
// ignored by the bundle reader, with the type the audit wants; other fields are refused.
func TestReadManifestLegacyFields(t *testing.T) {
	for _, k := range legacyManifestFields {
		m, err := readManifest(strings.NewReader(`{"task_id":"t","`+k+`":"https://shop.test/"}`), "manifest.json")
		if err != nil || m.TaskID != "t" {
			t.Errorf("%s: %+v, %v", k, m, err)
		}
		if _, err := readManifest(strings.NewReader(`{"`+k+`":5}`), "manifest.json"); err == nil {
			t.Errorf("%s as a number was accepted", k)
		}
	}
	if _, err := readManifest(strings.NewReader(`{"task_id":"t","recorder":"x"}`), "manifest.json"); err == nil || !strings.Contains(err.Error(), `unknown field "recorder"`) {
		t.Errorf("unknown field: %v", err)
	}
	dir := cleanAuditBundle(t)
	os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"task_id":"shop","start_url":"https://shop.test/"}`), 0o644)
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatalf("OpenBundle with start_url: %v", err)
	}
	b.Close()
	if probs := Audit(dir); len(probs) != 0 {
		t.Errorf("audit with start_url:\n%s", problemText(probs))
	}
}
