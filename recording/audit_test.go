package recording

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var auditT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// writeTestBundle writes a bundle with the bundle writer.
func writeTestBundle(t testing.TB, dir string, m Manifest, xs []Exchange, pages []Page) {
	t.Helper()
	w, err := NewBundleWriter(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		if _, err := w.Add(x); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pages {
		if err := w.AddPage(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

var auditBig = strings.Repeat("var x = 1;\n", 200)

// auditExchanges is a small clean recording: a page with cookies, a script stored twice
// (the second copy a revisit) and a POST.
func auditExchanges() []Exchange {
	return []Exchange{
		{URL: "https://shop.test/", Date: auditT0, Status: 200,
			ReqHeader:  http.Header{"Cookie": {"sid=secret"}, "Xookie": {"planted"}, "Xuthorization": {"Bearer planted"}, "Accept": {"text/html"}},
			RespHeader: http.Header{"Content-Type": {"text/html"}, "Set-Cookie": {"sid=secret; Path=/"}, "Set-Cookix": {"sid=planted"}, "X-Jzzz": {"bbbb"}},
			Body:       []byte("<title>Shop</title>hello"), ResourceType: "document"},
		{URL: "https://shop.test/app.js", Date: auditT0.Add(time.Second), Status: 200,
			RespHeader: http.Header{"Content-Type": {"text/javascript"}}, Body: []byte(auditBig), ResourceType: "script"},
		{URL: "https://shop.test/app.js?v=2", Date: auditT0.Add(2 * time.Second), Status: 200,
			RespHeader: http.Header{"Content-Type": {"text/javascript"}}, Body: []byte(auditBig), ResourceType: "script"},
		{Method: "POST", URL: "https://shop.test/cart", Date: auditT0.Add(3 * time.Second), Status: 303,
			ReqHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, ReqBody: []byte("item=7&qty=1"),
			RespHeader: http.Header{"Location": {"/cart"}}, ResourceType: "document"},
	}
}

func cleanAuditBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	writeTestBundle(t, dir, Manifest{TaskID: "shop", NotFound: map[string]string{"shop.test": "https://shop.test/nope"}},
		auditExchanges(), []Page{{URL: "https://shop.test/", TS: FormatTime(auditT0), Fetched: "GET", Title: "Shop"}})
	return dir
}

func problemText(probs []Problem) string {
	var b strings.Builder
	for _, p := range probs {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestAuditCleanBundle(t *testing.T) {
	dir := cleanAuditBundle(t)
	if probs := Audit(dir); len(probs) != 0 {
		t.Fatalf("clean bundle has problems:\n%s", problemText(probs))
	}
	// a legacy start_url passes
	writeManifestJSON(t, dir, map[string]any{"task_id": "shop", "start_url": "https://shop.test/"})
	if probs := Audit(dir); len(probs) != 0 {
		t.Fatalf("start_url is refused:\n%s", problemText(probs))
	}
}

func writeManifestJSON(t *testing.T, dir string, m map[string]any) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceSameLength changes bytes of a bundle file without moving anything.
func replaceSameLength(t *testing.T, path, old, new string) {
	t.Helper()
	if len(old) != len(new) {
		t.Fatalf("replacement changes the length")
	}
	data := mustRead(t, path)
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(data, []byte(old), []byte(new)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// editEntries rewrites entries.jsonl through edit.
func editEntries(t *testing.T, dir string, edit func([]Entry)) {
	t.Helper()
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	es := append([]Entry(nil), b.Entries...)
	b.Close()
	edit(es)
	var buf bytes.Buffer
	for _, e := range es {
		if err := writeJSONLine(&buf, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, EntriesFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAuditFindsEveryProblem plants one problem of each kind and expects each to be listed,
// the same by the audit in step with the records (auditContentStream) as by the one that
// holds them all.
func TestAuditFindsEveryProblem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir string)
		want  []string
	}{
		{"manifest unknown fields", func(t *testing.T, dir string) {
			writeManifestJSON(t, dir, map[string]any{"task_id": "shop", "recorder": "me", "user_agent": "x", "start_url": "https://shop.test/"})
		}, []string{`manifest.json: unknown field "recorder"`, `manifest.json: unknown field "user_agent"`}},
		{"manifest format", func(t *testing.T, dir string) {
			writeManifestJSON(t, dir, map[string]any{"task_id": "shop", "format": 1})
		}, []string{"manifest.json: format 1 in a bundle directory's manifest"}},
		{"manifest not json", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ManifestFile), []byte("[1,2]"), 0o644)
		}, []string{"manifest.json: not a JSON object"}},
		{"cookie in request", func(t *testing.T, dir string) {
			replaceSameLength(t, filepath.Join(dir, WARCFile), "Xookie:", "Cookie:")
		}, []string{"archive/data.warc: entry e000001: request stores the Cookie header", "WARC-Block-Digest sha256:"}},
		{"authorization in request", func(t *testing.T, dir string) {
			replaceSameLength(t, filepath.Join(dir, WARCFile), "Xuthorization:", "Authorization:")
		}, []string{"entry e000001: request stores the Authorization header"}},
		{"set-cookie not redacted", func(t *testing.T, dir string) {
			replaceSameLength(t, filepath.Join(dir, WARCFile), "Set-Cookix:", "Set-Cookie:")
		}, []string{"entry e000001: Set-Cookie value is not REDACTED"}},
		{"joined header", func(t *testing.T, dir string) {
			replaceSameLength(t, filepath.Join(dir, WARCFile), "X-Jzzz: bbbb", "bbbbbbbbbbbb")
		}, []string{`entry e000001: response header line`, `"bbbbbbbbbbbb" is not a "Name: value" field`}},
		{"http head cut short", func(t *testing.T, dir string) {
			// the empty line that ends the page's response head is gone: the head runs to
			// the end of the block, which replay would refuse to read
			replaceSameLength(t, filepath.Join(dir, WARCFile), "\r\n\r\n<title>Shop", "\r\nXY<title>Shop")
		}, []string{"entry e000001: response record's HTTP head is cut short: truncated header after"}},
		{"digest and size", func(t *testing.T, dir string) {
			editEntries(t, dir, func(es []Entry) { es[1].Digest = strings.Repeat("0", 64); es[1].Size = 5 })
		}, []string{"entries.jsonl: entry e000002: size 5, but the stored payload is 2200 bytes", "entry e000002: digest \"0000", "entry e000003: digest"}},
		{"offsets", func(t *testing.T, dir string) {
			editEntries(t, dir, func(es []Entry) { es[0].RespLength += 2; es[3].ReqOffset = es[3].RespOffset })
		}, []string{"entry e000001: respLength", "entry e000004: reqOffset", `holds a "response" record, want "request"`, "archive/data.warc: entry e000004: request record is in no entry"}},
		{"exchange id and type", func(t *testing.T, dir string) {
			editEntries(t, dir, func(es []Entry) { es[0].ID = "e000009"; es[2].RevisitOf = "" })
		}, []string{`entry e000009: the response record at offset 0 has RR-Exchange-Id "e000001"`, `entry e000003: respOffset`, `holds a "revisit" record, want "response"`}},
		{"revisit of another record", func(t *testing.T, dir string) {
			editEntries(t, dir, func(es []Entry) { es[2].RevisitOf = "e000001" })
		}, []string{"entry e000003: the revisit record's WARC-Refers-To <urn:uuid:", "is not the record of e000001", "entry e000003: digest"}},
		{"digests not of sha256 hex", func(t *testing.T, dir string) {
			// kept apart from the fixed-size rows of the entry audit (entryAuditor.odd)
			editEntries(t, dir, func(es []Entry) { es[1].Digest = "sha1:ABC"; es[2].Digest = "sha1:ABD" })
		}, []string{"entry e000003: digest sha1:ABD differs from that of its original e000002 (sha1:ABC)"}},
		{"empty digest of the original", func(t *testing.T, dir string) {
			editEntries(t, dir, func(es []Entry) { es[1].Digest = "" })
		}, []string{"entry e000003: digest ", "differs from that of its original e000002 ()"}},
		{"request body and method", func(t *testing.T, dir string) {
			editEntries(t, dir, func(es []Entry) { es[3].ReqBody = "eA=="; es[3].Method = "PUT" })
		}, []string{"entry e000004: reqBody differs", "entry e000004: method PUT"}},
		{"bad lines", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, PagesFile), []byte("{\"url\":\"https://shop.test/\",\"fetched\":\"XHR\"}\nnot json\n"), 0o644)
			f, _ := os.OpenFile(filepath.Join(dir, EntriesFile), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"id":"e000010","bogus":1}` + "\n")
			f.Close()
		}, []string{"pages/pages.jsonl: line 1: fetched \"XHR\"", "pages/pages.jsonl: line 2:", `entries.jsonl: line 5: json: unknown field "bogus"`}},
		{"truncated warc", func(t *testing.T, dir string) {
			p := filepath.Join(dir, WARCFile)
			os.Truncate(p, int64(len(mustRead(t, p))-10))
		}, []string{"is not followed by CRLF CRLF", "the rest of the file is not checked"}},
		{"missing file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, PagesFile))
		}, []string{"pages/pages.jsonl: cannot open: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := cleanAuditBundle(t)
			tc.plant(t, dir)
			probs := Audit(dir)
			text := problemText(probs)
			// the audit in step with the records and the one holding them all agree
			auditInStep = false
			held := problemText(Audit(dir))
			auditInStep = true
			if held != text {
				t.Errorf("in step:\n%s\nholding every record:\n%s", text, held)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("no problem %q in:\n%s", w, text)
				}
			}
			for _, p := range probs {
				if !strings.HasPrefix(p.File, dir) || strings.Contains(p.String(), "\n") {
					t.Errorf("problem %q does not name a bundle file on one line", p)
				}
			}
		})
	}
}

func TestAuditRecording(t *testing.T) {
	dir := cleanAuditBundle(t)
	rec := filepath.Join(t.TempDir(), "recording")
	if err := Pack(dir, rec); err != nil {
		t.Fatal(err)
	}
	if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w")); len(probs) != 0 {
		t.Fatalf("clean recording:\n%s", problemText(probs))
	}

	// a planted cookie is reported against data.warc.gz (format 3) and warc.tar.gz (format 2)
	replaceSameLength(t, filepath.Join(dir, WARCFile), "Xookie:", "Cookie:")
	if err := Pack(dir, rec); err != nil {
		t.Fatal(err)
	}
	text := problemText(AuditRecording(rec, filepath.Join(t.TempDir(), "w")))
	if !strings.Contains(text, "data.warc.gz (archive/data.warc, inflated): entry e000001: request stores the Cookie header") {
		t.Errorf("recording audit:\n%s", text)
	}
	rec2 := filepath.Join(t.TempDir(), "recording2")
	if err := packParts2(dir, rec2, PartSize); err != nil {
		t.Fatal(err)
	}
	text = problemText(AuditRecording(rec2, filepath.Join(t.TempDir(), "w")))
	if !strings.Contains(text, "warc.tar.gz (archive/data.warc): entry e000001: request stores the Cookie header") {
		t.Errorf("format 2 recording audit:\n%s", text)
	}

	// another format stops at the manifest
	m := mustRead(t, filepath.Join(rec, RecordingManifestFile))
	os.WriteFile(filepath.Join(rec, RecordingManifestFile), bytes.Replace(m, []byte(`"format": 3`), []byte(`"format": 4`), 1), 0o644)
	probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w"))
	if len(probs) != 1 || !strings.Contains(probs[0].String(), "format 4; the current format is 3") {
		t.Errorf("format 4:\n%s", problemText(probs))
	}
	// a manifest whose format does not fit the archive
	m2 := mustRead(t, filepath.Join(rec2, RecordingManifestFile))
	os.WriteFile(filepath.Join(rec2, RecordingManifestFile), bytes.Replace(m2, []byte(`"format": 2`), []byte(`"format": 3`), 1), 0o644)
	if text := problemText(AuditRecording(rec2, filepath.Join(t.TempDir(), "w"))); !strings.Contains(text, "format 3, but the archive is warc.tar.gz") {
		t.Errorf("format 3 over warc.tar.gz:\n%s", text)
	}

	// a format 2 tar holding a link is one problem
	os.WriteFile(filepath.Join(rec2, RecordingManifestFile), m2, 0o644)
	os.WriteFile(filepath.Join(rec2, RecordingWARCFile), packGzip(t, packTar(t, packTarEntry{hdr: tarLink(WARCFile, "/etc/passwd")})), 0o644)
	text = problemText(AuditRecording(rec2, filepath.Join(t.TempDir(), "w")))
	if !strings.Contains(text, "symlink") {
		t.Errorf("linked tar:\n%s", text)
	}
}

func tarLink(name, target string) tar.Header {
	return tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}
}

// FuzzAudit audits a bundle whose data.warc and entries.jsonl are arbitrary bytes: Audit
// must list problems, never panic, and find none only in a bundle that opens.
func FuzzAudit(f *testing.F) {
	seed := filepath.Join(f.TempDir(), "b")
	writeTestBundle(f, seed, Manifest{TaskID: "f"}, auditExchanges(), nil)
	warcData, _ := os.ReadFile(filepath.Join(seed, WARCFile))
	entries, _ := os.ReadFile(filepath.Join(seed, EntriesFile))
	f.Add(warcData, entries)
	f.Add(warcData[:len(warcData)/2], entries)
	f.Add([]byte("WARC/1.1\r\nContent-Length: 5\r\n\r\nabc\r\n\r\n"), []byte(`{"id":"e1","method":"GET","url":"x","status":200,"respOffset":0,"respLength":38}`))
	f.Fuzz(func(t *testing.T, w, e []byte) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{ManifestFile: []byte(`{"task_id":"f"}`), WARCFile: w, EntriesFile: e, PagesFile: nil} {
			os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
			os.WriteFile(filepath.Join(dir, name), data, 0o644)
		}
		probs := Audit(dir)
		auditInStep = false
		held := Audit(dir)
		auditInStep = true
		if problemText(held) != problemText(probs) {
			t.Fatalf("in step:\n%s\nholding every record:\n%s", problemText(probs), problemText(held))
		}
		if len(probs) == 0 {
			b, err := OpenBundle(dir)
			if err != nil {
				t.Fatalf("clean audit, but OpenBundle: %v", err)
			}
			for i := range b.Entries {
				if r, err := b.Response(&b.Entries[i]); err == nil {
					io.Copy(io.Discard, r.Body)
				} else if !errors.Is(err, ErrUnresolvedRevisit) {
					t.Fatalf("clean audit, but entry %s: %v", b.Entries[i].ID, err)
				}
			}
			b.Close()
		}
	})
}

// TestAuditImportedCorpus: every bundle the importer writes from the corpus audits clean
// (no false alarms on real recordings), and so does the same bundle packed and unpacked.
func TestAuditImportedCorpus(t *testing.T) {
	files, _ := filepath.Glob("../testdata/*/*.warc*")
	imported := 0
	for _, f := range files {
		dir := filepath.Join(t.TempDir(), "b")
		if _, err := ImportWARCs([]string{f}, dir, ImportOptions{TaskID: "corpus"}); err != nil {
			continue // refused inputs are covered by the import tests
		}
		imported++
		probs := Audit(dir)
		if b := Blocking(probs); len(b) != 0 {
			t.Errorf("%s:\n%s", f, problemText(b))
		}
		// the one corpus file with a revisit whose original is absent is reported for it
		if wantUnresolved := strings.Contains(f, "url-agnostic-revisit"); wantUnresolved != (len(probs) > 0) {
			t.Errorf("%s: unresolved revisit problems %v, want %v:\n%s", f, len(probs) > 0, wantUnresolved, problemText(probs))
		}
		rec := filepath.Join(t.TempDir(), "rec")
		if err := Pack(dir, rec); err != nil {
			t.Fatal(err)
		}
		if probs := Blocking(AuditRecording(rec, filepath.Join(t.TempDir(), "w"))); len(probs) != 0 {
			t.Errorf("%s recording:\n%s", f, problemText(probs))
		}
	}
	if imported < 10 {
		t.Errorf("only %d corpus files imported", imported)
	}
}
