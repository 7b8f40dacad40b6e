package recording

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pab-dev/pab/warc"
)

// importTestBundle imports testdata files into a bundle and opens it.
func importTestBundle(t testing.TB, files ...string) *Bundle {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("..", "testdata", f))
	}
	return importPaths(t, paths...)
}

func importPaths(t testing.TB, paths ...string) *Bundle {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	rep, err := ImportWARCs(paths, dir, ImportOptions{TaskID: "export-test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exchanges == 0 {
		t.Fatalf("no exchanges imported from %v", paths)
	}
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// exchangeView is what a round trip must keep of an entry.
type exchangeView struct {
	Method, URL, Mime, Digest, ReqBody string
	Status                             int
	Size                               int64
	Revisit, Unresolved                bool
}

func viewOf(b *Bundle) []exchangeView {
	var out []exchangeView
	for _, e := range b.Entries {
		v := exchangeView{Method: e.Method, URL: e.URL, Mime: e.Mime, Digest: e.Digest, ReqBody: e.ReqBody,
			Status: e.Status, Size: e.Size, Revisit: e.RevisitOf != "", Unresolved: e.Unresolved}
		out = append(out, v)
	}
	return out
}

func compareBundles(t *testing.T, want, got *Bundle) {
	t.Helper()
	w, g := viewOf(want), viewOf(got)
	if len(w) != len(g) {
		t.Fatalf("%d exchanges after the round trip, want %d", len(g), len(w))
	}
	for i := range w {
		if w[i] != g[i] {
			t.Errorf("exchange %d:\n got %+v\nwant %+v", i+1, g[i], w[i])
		}
	}
	for i, e := range want.Entries {
		if e.Unresolved {
			continue
		}
		a, err := want.Response(&e)
		if err != nil {
			t.Fatal(err)
		}
		ge := got.Entries[i]
		b, err := got.Response(&ge)
		if err != nil {
			t.Fatal(err)
		}
		ab, _ := io.ReadAll(a.Body)
		bb, _ := io.ReadAll(b.Body)
		if !bytes.Equal(ab, bb) || a.Status != b.Status {
			t.Errorf("exchange %d (%s): payload or status differs after the round trip", i+1, e.URL)
		}
	}
	if !slices.Equal(want.Pages, got.Pages) {
		t.Errorf("pages after the round trip:\n got %+v\nwant %+v", got.Pages, want.Pages)
	}
}

// TestExportWARCRoundTrip: a recording exported as .warc and .warc.gz imports back to the
// same exchanges (method, URL, status, payload digest and bytes, revisits), pages included,
// with no warning: pab's export is a clean WARC for pab's own tolerant reader.
func TestExportWARCRoundTrip(t *testing.T) {
	for _, src := range []string{"sites/IAH-20080430204825-00000-blackbook.warc.gz", "sites/lil-projects.warc.gz", "warc/post-test.warc.gz", "warc/example-url-agnostic-revisit.warc.gz"} {
		b := importTestBundle(t, src)
		for _, name := range []string{"out.warc", "out.warc.gz"} {
			t.Run(filepath.Base(src)+"/"+name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), name)
				if err := ExportWARCFile(b, out); err != nil {
					t.Fatal(err)
				}
				checkExportedRecords(t, b, out)
				dir := filepath.Join(t.TempDir(), "again")
				rep, err := ImportWARCs([]string{out}, dir, ImportOptions{TaskID: "export-test"})
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range rep.Warnings {
					// the input's revisit without its original stays one
					if !strings.Contains(w, "original not in the input") {
						t.Errorf("re-import warning: %s", w)
					}
				}
				if rep.Skipped["warcinfo"] != 1 {
					t.Errorf("skipped %v, want the one warcinfo record", rep.Skipped)
				}
				got, err := OpenBundle(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer got.Close()
				compareBundles(t, b, got)
			})
		}
	}
}

// checkExportedRecords reads an exported file record by record: a warcinfo first, then the
// bundle's records in order; with .gz, every record is exactly one gzip member; every
// resolved revisit names its original by WARC-Refers-To, target URI, date and digest.
func checkExportedRecords(t *testing.T, b *Bundle, path string) {
	t.Helper()
	r, err := warc.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var types []string
	byID := map[string]*warc.Record{}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Warnings) != 0 {
			t.Errorf("%s at %s: %q", path, rec.Where(), rec.Warnings)
		}
		types = append(types, rec.Type)
		byID[rec.ID] = rec
		if rec.Type == "revisit" && rec.Get("WARC-Refers-To") != "" {
			orig := byID[rec.Get("WARC-Refers-To")]
			if orig == nil {
				t.Errorf("revisit at %s: WARC-Refers-To %s is not an earlier record", rec.Where(), rec.Get("WARC-Refers-To"))
				continue
			}
			if rec.Get("WARC-Refers-To-Target-URI") != orig.TargetURI || rec.Get("WARC-Refers-To-Date") != orig.Get("WARC-Date") ||
				rec.Get("WARC-Payload-Digest") != orig.Get("WARC-Payload-Digest") || rec.Get("WARC-Profile") != RevisitProfile {
				t.Errorf("revisit at %s does not name its original %s fully", rec.Where(), orig.ID)
			}
		}
	}
	if ws := r.Warnings(); len(ws) != 0 {
		t.Errorf("%s: reader warnings %+v", path, ws)
	}
	var want []string
	want = append(want, "warcinfo")
	for _, e := range b.Entries {
		if e.RevisitOf != "" || e.Unresolved {
			want = append(want, "revisit")
		} else {
			want = append(want, "response")
		}
		if e.ReqLength > 0 {
			want = append(want, "request")
		}
	}
	if !slices.Equal(types, want) {
		t.Errorf("%s: record types %v, want %v", path, types, want)
	}
	if strings.HasSuffix(path, ".gz") {
		if n := gzipMembers(t, path); n != len(want) {
			t.Errorf("%s: %d gzip members, want one per record (%d)", path, n, len(want))
		}
	}
}

// gzipMembers counts the gzip members of the file at path.
func gzipMembers(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		zr.Multistream(false)
		if _, err := io.Copy(io.Discard, zr); err != nil {
			t.Fatal(err)
		}
		n++
		if err := zr.Reset(br); err == io.EOF {
			return n
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// TestExportDeterministic: exporting the same bundle twice gives the same bytes, for WARC
// and WACZ.
func TestExportDeterministic(t *testing.T) {
	b := importTestBundle(t, "sites/lil-projects.warc.gz")
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, name := range []string{"a.warc.gz", "a.wacz"} {
		var outs [][]byte
		for _, dir := range dirs {
			p := filepath.Join(dir, name)
			var err error
			if strings.HasSuffix(name, ".wacz") {
				err = ExportWACZ(b, p)
			} else {
				err = ExportWARCFile(b, p)
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, data)
		}
		if !bytes.Equal(outs[0], outs[1]) {
			t.Errorf("%s: two exports differ", name)
		}
	}
	for _, dir := range dirs {
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Errorf("export left %d files in %s, want 2 (no temporary files)", len(ents), dir)
		}
	}
}

// TestExportWACZ: the WACZ verifies against its datapackage.json, holds the layout and
// files WACZ 1.1.1 asks for, its CDXJ lines are sorted and point at the right records in
// the stored data.warc.gz, and importing the WACZ gives the same exchanges.
func TestExportWACZ(t *testing.T) {
	b := importTestBundle(t, "sites/IAH-20080430204825-00000-blackbook.warc.gz", "warc/post-test.warc.gz")
	out := filepath.Join(t.TempDir(), "rec.wacz")
	if err := ExportWACZ(b, out); err != nil {
		t.Fatal(err)
	}
	pkg, err := VerifyWACZ(out)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Profile != "data-package" || pkg.WACZVersion != "1.1.1" || pkg.Software == "" || pkg.Created == "" || len(pkg.Resources) != 3 {
		t.Errorf("datapackage.json: %+v", pkg)
	}
	if pkg.MainPageURL != b.Pages[0].URL {
		t.Errorf("mainPageUrl %q, want %q", pkg.MainPageURL, b.Pages[0].URL)
	}

	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		names = append(names, f.Name)
		files[f.Name] = f
		if f.Method != zip.Store {
			t.Errorf("%s is compressed with method %d, want stored", f.Name, f.Method)
		}
	}
	wantNames := []string{WACZWARCFile, WACZIndexFile, WACZPagesFile, WACZPackageFile, WACZDigestFile}
	if !slices.Equal(names, wantNames) {
		t.Errorf("members %v, want %v", names, wantNames)
	}
	readMember := func(name string) []byte {
		rc, err := files[name].Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	pages := strings.Split(strings.TrimSpace(string(readMember(WACZPagesFile))), "\n")
	if !strings.Contains(pages[0], `"format":"json-pages-1.0"`) {
		t.Errorf("pages.jsonl header line %q", pages[0])
	}
	if len(pages)-1 != len(b.Pages) {
		t.Errorf("pages.jsonl has %d pages, want %d", len(pages)-1, len(b.Pages))
	}

	// CDXJ: one line per exchange, sorted, each pointing at its record's gzip member.
	warcOff, err := files[WACZWARCFile].DataOffset()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(bytes.NewReader(readMember(WACZIndexFile)))
	var keys []string
	n, posts := 0, 0
	for sc.Scan() {
		n++
		key, rest, _ := strings.Cut(sc.Text(), " ")
		ts, js, _ := strings.Cut(rest, " ")
		keys = append(keys, key+" "+ts)
		var fields map[string]string
		if err := json.Unmarshal([]byte(js), &fields); err != nil {
			t.Fatalf("cdxj line %d: %v", n, err)
		}
		if len(ts) != 14 || fields["filename"] != "data.warc.gz" || fields["status"] == "" {
			t.Errorf("cdxj line %d: %q", n, sc.Text())
		}
		if fields["method"] == "POST" {
			posts++
			if !strings.Contains(key, "__wb_method=post") {
				t.Errorf("cdxj line %d: POST key %q lacks __wb_method=post", n, key)
			}
		}
		off, _ := strconv.ParseInt(fields["offset"], 10, 64)
		length, _ := strconv.ParseInt(fields["length"], 10, 64)
		rec, err := warc.ReadRecordAt(io.NewSectionReader(f, warcOff+off, length), "member", 0, length)
		if err != nil {
			t.Fatalf("cdxj line %d: %v", n, err)
		}
		if rec.TargetURI != fields["url"] || (rec.Type != "response" && rec.Type != "revisit") ||
			(rec.Type == "revisit") != (fields["mime"] == "warc/revisit") {
			t.Errorf("cdxj line %d points at a %s record of %s", n, rec.Type, rec.TargetURI)
		}
	}
	if n != len(b.Entries) {
		t.Errorf("%d cdxj lines, want %d", n, len(b.Entries))
	}
	if posts != 3 {
		t.Errorf("%d POST lines in the index, want 3", posts)
	}
	if !slices.IsSorted(keys) {
		t.Errorf("cdxj lines are not sorted")
	}

	// Import of the WACZ.
	dir := filepath.Join(t.TempDir(), "again")
	rep, err := ImportWARCs([]string{out}, dir, ImportOptions{TaskID: "export-test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) != 0 || rep.Files != 1 {
		t.Errorf("import of the WACZ: %d files, warnings %q", rep.Files, rep.Warnings)
	}
	got, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	compareBundles(t, b, got)
}

func TestSURT(t *testing.T) {
	for in, want := range map[string]string{
		"http://www.Example.com/A/b?z=1&a=2#frag": "com,example)/a/b?a=2&z=1",
		"https://example.com":                     "com,example)/",
		"https://example.com:443/x":               "com,example)/x",
		"http://example.com:8080/x":               "com,example:8080)/x",
		"http://127.0.0.1/x":                      "1,0,0,127)/x",
		"http://WWW.example.com/":                 "com,example,www)/",
		"https://www2.example.com/?":              "com,example)/",
		"https://sub.archive.org/path?q=a%20b":    "org,archive,sub)/path?q=a%20b",
	} {
		if got := SURT(in); got != want {
			t.Errorf("SURT(%q) = %q, want %q", in, got, want)
		}
	}
}

// zipMember is one member of a hand-made ZIP: its header (sizes, CRC, mode as given, so a
// header may lie) and its stored bytes.
type zipMember struct {
	hdr  *zip.FileHeader
	data []byte
}

// zipData builds a ZIP in memory with CreateRaw, so the headers say what the test wants.
func zipData(t testing.TB, members ...zipMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		w, err := zw.CreateRaw(m.hdr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// storedMember is a stored member whose header claims `claimed` uncompressed bytes.
func storedMember(name string, data []byte, mode os.FileMode, claimed uint64) zipMember {
	h := &zip.FileHeader{Name: name, Method: zip.Store, CompressedSize64: uint64(len(data)),
		UncompressedSize64: claimed, CRC32: crc32.ChecksumIEEE(data)}
	h.SetMode(mode)
	return zipMember{h, data}
}

// TestImportBadWACZ: hostile or broken WACZ files are refused with one line naming the
// file and what is wrong, and leave no output.
func TestImportBadWACZ(t *testing.T) {
	warcData, err := os.ReadFile(filepath.Join("..", "testdata", "warc", "example.warc"))
	if err != nil {
		t.Fatal(err)
	}
	member := storedMember
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"notzip.wacz", []byte("WARC/1.1\r\nthis is not a zip file\r\n"), "not a ZIP file"},
		{"traversal.wacz", zipData(t, member("archive/../../evil.warc", warcData, 0o644, uint64(len(warcData)))), `".."`},
		{"absolute.wacz", zipData(t, member("/archive/data.warc", warcData, 0o644, uint64(len(warcData)))), "absolute path"},
		{"symlink.wacz", zipData(t, member("archive/data.warc", []byte("/etc/passwd"), os.ModeSymlink|0o777, 11)), "not a regular file"},
		{"huge.wacz", zipData(t, member("archive/data.warc", warcData, 0o644, 1<<40)), "claims 1099511627776 bytes"},
		{"empty.wacz", zipData(t, member("pages/pages.jsonl", []byte("{}\n"), 0o644, 3)), "no archive/*.warc"},
		{"lying.wacz", zipData(t, member("archive/data.warc", warcData, 0o644, uint64(len(warcData))-100)), "lying.wacz!archive/data.warc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "bundle")
			_, err := ImportWARCs([]string{p}, out, ImportOptions{})
			if err == nil {
				t.Fatal("import succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.name) || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q; want one line naming %s and containing %q", msg, tc.name, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused import left %s", out)
			}
		})
	}
}

// FuzzWACZ opens arbitrary bytes as a WACZ and reads its WARC members as an import does:
// it must give records or a one-line error, never panic, and never accept a member name
// that leaves the archive. Seeds: a real exported WACZ and the hostile ones above.
func FuzzWACZ(f *testing.F) {
	b := importTestBundle(f, "warc/example.warc")
	p := filepath.Join(f.TempDir(), "seed.wacz")
	if err := ExportWACZ(b, p); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(zipData(f, storedMember("archive/../x.warc", []byte("WARC/1.1\r\n"), 0o644, 10)))
	f.Add(zipData(f, storedMember("archive/data.warc", []byte("WARC/1.1\r\n"), 0o644, 1<<40)))
	f.Add([]byte("PK\x03\x04 not really a zip"))
	f.Fuzz(readWACZBytes)
}

// readWACZBytes is FuzzWACZ's body.
func readWACZBytes(t *testing.T, data []byte) {
	{
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		ins, err := waczMembers("f.wacz", zr.File)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error with a line break: %q", err)
			}
			return
		}
		for _, in := range ins {
			if checkMemberName(in.f.Name) != nil || !strings.HasPrefix(strings.ToLower(in.f.Name), "archive/") {
				t.Fatalf("member %q accepted", in.f.Name)
			}
			r, err := in.open()
			if err != nil {
				continue
			}
			r.MaxBlockSize = 1 << 20
			for range 1000 {
				if _, err := r.Next(); err != nil {
					if err != io.EOF && strings.Contains(err.Error(), "\n") {
						t.Fatalf("error with a line break: %q", err)
					}
					break
				}
			}
			r.Close()
		}
	}
}

// FuzzCDXJKey builds CDXJ keys from arbitrary URLs and request bodies (the JSON flattening,
// decodeURI and SURT above): never a panic, never a line break or blank in a key, and the
// same input always gives the same key.
func FuzzCDXJKey(f *testing.F) {
	f.Add("POST", "application/json", []byte(`{"a":[1,{"b":null}],"2":"x","a":1e21}`), "https://www.shop.test/api?x=1")
	f.Add("POST", "application/x-www-form-urlencoded", []byte("q=%E2%82%AC&r=%ZZ"), "http://shop.test:8080/form")
	f.Add("PUT", "text/plain", []byte("not json"), "https://shop.test/p?q=café")
	f.Add("DELETE", "", []byte{0, 1, 0xff}, "http://[::1]:80/x")
	f.Fuzz(func(t *testing.T, method, ctype string, body []byte, u string) {
		q, _ := methodQuery(method, ctype, body)
		key := SURT(appendQuery(u, q))
		if key != SURT(appendQuery(u, q)) {
			t.Fatal("SURT is not deterministic")
		}
		pu, err := url.Parse(u)
		web := err == nil && (pu.Scheme == "http" || pu.Scheme == "https") && pu.Host != "" && !strings.ContainsAny(u+method, " \t\n\r")
		if web && strings.ContainsAny(key, " \t\n\r") {
			t.Fatalf("key %q holds a blank or line break", key)
		}
	})
}

// TestImportDeflatedWACZ: a WACZ as other tools may write it, members deflated and two
// WARC files (one plain, one gzip), imports both, in name order.
func TestImportDeflatedWACZ(t *testing.T) {
	b := importTestBundle(t, "sites/books.toscrape.warc")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.wacz")
	if err := ExportWACZ(b, src); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	copyMember := func(name string, r io.Reader) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, r); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := os.ReadFile(filepath.Join("..", "testdata", "warc", "redirect.warc"))
	if err != nil {
		t.Fatal(err)
	}
	copyMember("archive/a-redirect.warc", bytes.NewReader(plain))
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		copyMember(strings.Replace(f.Name, "data.warc.gz", "b-data.warc.gz", 1), rc)
		rc.Close()
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "deflated.wacz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := ImportWARCs([]string{p}, filepath.Join(dir, "bundle"), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 2 || rep.Exchanges != len(b.Entries)+1 {
		t.Errorf("imported %d files, %d exchanges; want 2 files, %d exchanges", rep.Files, rep.Exchanges, len(b.Entries)+1)
	}
}
