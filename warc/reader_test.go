package warc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/warctest"
)

// readAll reads every record of path; it fails the test on an error.
func readAll(t testing.TB, path string) ([]*Record, *Reader) {
	t.Helper()
	r, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	var recs []*Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, r
		}
		if err != nil {
			t.Fatalf("%s: record %d: %v", path, len(recs), err)
		}
		recs = append(recs, rec)
	}
}

func TestReaderOffsetsPerRecordGzip(t *testing.T) {
	// warcio's indexer gives these offsets for the same file.
	recs, r := readAll(t, "../testdata/warc/example.warc.gz")
	want := []int64{0, 353, 784, 2012, 2621, 3207}
	if len(recs) != len(want) {
		t.Fatalf("got %d records, want %d", len(recs), len(want))
	}
	for i, rec := range recs {
		if rec.Offset != want[i] {
			t.Errorf("record %d: offset %d, want %d", i, rec.Offset, want[i])
		}
		end := int64(3816)
		if i+1 < len(want) {
			end = want[i+1]
		}
		if rec.Length != end-rec.Offset {
			t.Errorf("record %d: length %d, want %d", i, rec.Length, end-rec.Offset)
		}
	}
	if len(r.Warnings()) != 0 {
		t.Errorf("unexpected warnings %v", r.Warnings())
	}
	if recs[2].Type != "response" || recs[2].HTTP == nil || recs[2].HTTP.StatusCode != 200 {
		t.Fatalf("record 2 = %s %+v", recs[2].Type, recs[2].HTTP)
	}
	if got := recs[2].HTTP.Header.Get("Content-Encoding"); got != "gzip" {
		t.Errorf("Content-Encoding %q", got)
	}
	if recs[3].HTTP.Method != "GET" || recs[3].HTTP.Proto != "HTTP/1.0" || recs[3].HTTP.Host() != "example.com" {
		t.Errorf("request = %+v host %q", recs[3].HTTP, recs[3].HTTP.Host())
	}
}

func TestReaderPlainOffsetsMatchFile(t *testing.T) {
	for _, name := range []string{"example.warc", "redirect.warc", "example-iana.org-chunked.warc", "transfer_compression_brotli.warc"} {
		path := "../testdata/warc/" + name
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := readAll(t, path)
		var next int64
		for i, rec := range recs {
			if rec.Offset != next {
				t.Errorf("%s record %d: offset %d, want %d", name, i, rec.Offset, next)
			}
			if !bytes.HasPrefix(data[rec.Offset:], []byte("WARC/1.")) {
				t.Errorf("%s record %d: no WARC/ at offset %d", name, i, rec.Offset)
			}
			next = rec.Offset + rec.Length
		}
		if next != int64(len(data)) {
			t.Errorf("%s: records end at %d, file at %d", name, next, len(data))
		}
	}
	// solrwayback reads the brotli HTML response at offset 1227 of the plain file.
	recs, _ := readAll(t, "../testdata/warc/transfer_compression_brotli.warc")
	if recs[2].Type != "response" || recs[2].Offset != 1227 {
		t.Errorf("brotli response at %d (%s), want 1227", recs[2].Offset, recs[2].Type)
	}
}

func TestReaderWholeFileGzip(t *testing.T) {
	// One gzip member holding all six records: gowarc alone would return only the first.
	recs, r := readAll(t, "../testdata/warc/example-bad-non-chunked.warc.gz")
	var types []string
	for _, rec := range recs {
		types = append(types, rec.Type)
		if rec.Offset != -1 || rec.Length != -1 {
			t.Errorf("%s record: offset %d length %d, want -1 -1", rec.Type, rec.Offset, rec.Length)
		}
	}
	if got := strings.Join(types, ","); got != "warcinfo,warcinfo,response,request,revisit,request" {
		t.Fatalf("types %s", got)
	}
	if recs[2].Where() != "offset 0 (uncompressed 1197)" {
		t.Errorf("where %q", recs[2].Where())
	}
	if !hasWarning(r.Warnings(), "gzip members do not hold one record each") {
		t.Errorf("no whole-file gzip warning: %v", r.Warnings())
	}
}

func TestReaderMembersNotAlignedWithRecords(t *testing.T) {
	// Three members for two records; the response's Content-Length is also one byte short,
	// followed by "\n" and the end marker: read, with warnings.
	recs, r := readAll(t, "../testdata/warc/example-wrong-chunks.warc.gz")
	if len(recs) != 2 || recs[0].Type != "response" || recs[1].Type != "request" {
		t.Fatalf("got %d records", len(recs))
	}
	if !strings.HasPrefix(string(recs[0].HTTP.Body), "<!doctype html>") {
		t.Errorf("body starts %q", recs[0].HTTP.Body[:20])
	}
	if recs[1].HTTP.Method != "GET" || recs[1].TargetURI != "http://example.com/" {
		t.Errorf("request %+v", recs[1].HTTP)
	}
	if !hasWarning(r.Warnings(), `followed by 5 newline bytes`) {
		t.Errorf("warnings %v", r.Warnings())
	}
}

func TestReaderRecordFillingItsMember(t *testing.T) {
	// The warcinfo's Content-Length includes the end marker; its member ends right after.
	recs, r := readAll(t, "../testdata/warc/example-url-agnostic-revisit.warc.gz")
	if len(recs) != 2 || recs[0].Offset != 0 || recs[1].Offset != recs[0].Length {
		t.Fatalf("records %d, offsets %d+%d, %d", len(recs), recs[0].Offset, recs[0].Length, recs[1].Offset)
	}
	if recs[0].ID != "<urn:uuid:urn:uuid:85d57ef9-0bd2-4a35-ba46-946ccf9e3d9f>" {
		t.Errorf("doubled record id read as %q", recs[0].ID)
	}
	rv := recs[1]
	if rv.Type != "revisit" || rv.HTTP == nil || rv.HTTP.StatusCode != 200 || len(rv.HTTP.Body) != 0 {
		t.Fatalf("revisit %+v", rv.HTTP)
	}
	if rv.TargetURI != "http://test@example.com/" || rv.Get("WARC-Refers-To-Target-URI") != "http://example.iana.org/" {
		t.Errorf("revisit target %q", rv.TargetURI)
	}
	if !hasWarning(r.Warnings(), "no CRLF CRLF end marker") {
		t.Errorf("warnings %v", r.Warnings())
	}
}

func TestReaderGzipExtraField(t *testing.T) {
	recs, _ := readAll(t, "../testdata/warc/gzip_extra_sl.warc.gz")
	if len(recs) != 1 || recs[0].Type != "warcinfo" || recs[0].Offset != 0 || recs[0].Length != 459 {
		t.Fatalf("got %+v", recs)
	}
	if !bytes.Contains(recs[0].Block, []byte("Wget/1.20.3")) {
		t.Errorf("block %q", recs[0].Block)
	}
}

func TestReaderDraftVersion(t *testing.T) {
	recs, r := readAll(t, "../testdata/sites/IAH-20080430204825-00000-blackbook.warc.gz")
	if len(recs) != 822 {
		t.Fatalf("%d records, want 822", len(recs))
	}
	count := map[string]int{}
	for _, rec := range recs {
		count[rec.Type]++
		if rec.Version != "0.17" {
			t.Fatalf("version %q", rec.Version)
		}
		if rec.Offset < 0 {
			t.Fatalf("record at %s has no offset", rec.Where())
		}
	}
	if count["response"] != 299 || count["request"] != 261 || count["metadata"] != 261 || count["warcinfo"] != 1 {
		t.Errorf("types %v", count)
	}
	ws := r.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0].Msg, "WARC/0.17 is not WARC 1.0 or 1.1") {
		t.Errorf("warnings %v", ws)
	}
}

func TestReaderTargetURIs(t *testing.T) {
	recs, _ := readAll(t, "../testdata/warc/example-wget-bad-target-uri.warc.gz")
	found := false
	for _, rec := range recs {
		if rec.Type == "response" {
			found = true
			if rec.TargetURI != "http://example.com/" {
				t.Errorf("target %q", rec.TargetURI)
			}
			if rec.Get("WARC-Target-URI") != "<http://example.com/>" {
				t.Errorf("raw header %q", rec.Get("WARC-Target-URI"))
			}
		}
	}
	if !found {
		t.Fatal("no response")
	}
	recs, _ = readAll(t, "../testdata/warc/example-space-in-target-uri.warc.gz")
	if recs[1].Type != "resource" || recs[1].TargetURI != "file:///example%20with%20spaces.png" {
		t.Errorf("resource target %q", recs[1].TargetURI)
	}
	if !bytes.HasPrefix(recs[1].Block, []byte("\x89PNG")) {
		t.Errorf("resource block %q", recs[1].Block[:8])
	}
}

func TestReaderHeaderNamesWithSpaces(t *testing.T) {
	recs, r := readAll(t, "../testdata/sites/books.toscrape.warc")
	if len(recs) != 60 {
		t.Fatalf("%d records", len(recs))
	}
	q := recs[0].HTTP
	if q == nil || q.Method != "GET" || q.RequestURI != "/" {
		t.Fatalf("request %+v", q)
	}
	if q.Header.Get("Upgrade-Insecure Requests") != "1" || q.Host() != "books.toscrape.com" {
		t.Errorf("header %v", q.Header)
	}
	resp := recs[1].HTTP
	if resp.StatusCode != 200 || resp.Reason != "OK" || resp.Header.Get("Transfer-Encoding") != "chunked" {
		t.Errorf("response %d %q %v", resp.StatusCode, resp.Reason, resp.Header)
	}
	// node-warc ends records with one CRLF: read, one warning for the file.
	if !hasWarning(r.Warnings(), "(59 records)") {
		t.Errorf("warnings %v", r.Warnings())
	}
}

func TestReaderDigests(t *testing.T) {
	recs, _ := readAll(t, "../testdata/warc/example-digest.warc")
	if len(recs) != 4 || recs[1].Offset != 922 {
		t.Fatalf("%d records, second at %d", len(recs), recs[1].Offset)
	}
	// Only record 1 has a bad payload digest; base32, base64 and base64url all verify.
	for i, rec := range recs {
		if i == 0 {
			if len(rec.Warnings) != 1 || !strings.Contains(rec.Warnings[0], "WARC-Payload-Digest") {
				t.Errorf("record 0 warnings %v", rec.Warnings)
			}
			continue
		}
		if len(rec.Warnings) != 0 {
			t.Errorf("record %d warnings %v", i, rec.Warnings)
		}
	}
	// sha256 hex, in the warcio.js metadata record.
	recs, _ = readAll(t, "../testdata/warc/example.warc")
	md := recs[6]
	if md.Type != "metadata" || !strings.HasPrefix(md.Get("WARC-Block-Digest"), "sha256:") || len(md.Warnings) != 0 {
		t.Errorf("metadata %s %q %v", md.Type, md.Get("WARC-Block-Digest"), md.Warnings)
	}
}

func TestParseDigest(t *testing.T) {
	empty := "da39a3ee5e6b4b0d3255bfef95601890afd80709" // sha1 of ""
	for _, s := range []string{
		"sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
		"sha1:3i42h3s6nnfq2msvx7xzkyaysCX5QBYJ",
		"sha1:2jmj7l5rSw0yVb/vlWAYkK/YBwk=",
		"sha1:2jmj7l5rSw0yVb_vlWAYkK_YBwk=",
		"sha1:2jmj7l5rSw0yVb_vlWAYkK_YBwk",
		"SHA-1:" + empty,
	} {
		d, err := ParseDigest(s)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if d.Key() != "sha1:"+empty || !d.Matches(nil) {
			t.Errorf("%s: key %s", s, d.Key())
		}
	}
	d, err := ParseDigest("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	if err != nil || !d.Matches([]byte{}) || d.Matches([]byte("x")) {
		t.Errorf("sha256: %v", err)
	}
	for _, bad := range []string{"", "sha1", "sha1:1112H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", "crc32:abcd", "sha256:abc"} {
		if _, err := ParseDigest(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestReaderRefusesWrongContentLength(t *testing.T) {
	cases := []struct {
		name, want string
	}{
		// Content-Length 973 for a 975-byte block: two block bytes before the end marker.
		{"example-trunc.warc", `read ../testdata/warc/example-trunc.warc at offset 1197: WARC Content-Length does not match the record: Content-Length 973, but the block is followed by "\x00\x00\r\n\r"`},
		// Content-Length 974, one byte short.
		{"example-bad-length.warc", `read ../testdata/warc/example-bad-length.warc at offset 1197: WARC Content-Length does not match the record: Content-Length 974`},
	}
	for _, c := range cases {
		// Strict: refused as WARC 1.1 section 5.1 requires (without Strict, resync_test.go).
		recs, _, err := readRecs(t, "../testdata/warc/"+c.name, true, false)
		n := len(recs)
		if !errors.Is(err, ErrContentLength) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.name, err)
		}
		if n != 2 {
			t.Errorf("%s: %d records before the error, want 2", c.name, n)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line", c.name)
		}
	}
}

func TestReaderTruncated(t *testing.T) {
	dir := t.TempDir()
	// Every cut of a plain file inside a record is an error naming that record's offset.
	data, err := os.ReadFile("../testdata/warc/example.warc")
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{10, 488 + 100, 1197 + 500, 1197 + 1300} {
		p := filepath.Join(dir, "cut.warc")
		if err := os.WriteFile(p, data[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := warctest.ReadAll(OpenReader(p))
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("cut at %d: %v", cut, err)
		}
	}
	// Every cut of a gzip file is an error (jwarc's truncation test), never a hang.
	gz, err := os.ReadFile("../testdata/warc/cc.warc.gz")
	if err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(gz); cut += 97 {
		p := filepath.Join(dir, "cut.warc.gz")
		if err := os.WriteFile(p, gz[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		n, err := warctest.ReadAll(OpenReader(p))
		if err == nil || n != 0 {
			t.Errorf("cut at %d: %d records, err %v", cut, n, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "read "+p+" at offset 0: ") {
			t.Errorf("cut at %d: %v", cut, err)
		}
	}
}

func TestReaderJunk(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../testdata/warc/redirect.warc")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recs, _ := readAll(t, "../testdata/warc/redirect.warc")
	second := recs[1].Offset

	// Not a WARC at all.
	_, err = warctest.ReadAll(OpenReader(write("junk.warc", []byte("<html>not a warc</html>"))))
	if !errors.Is(err, ErrNotWARC) || !strings.Contains(err.Error(), "at offset 0: not a WARC record: the file does not start with a WARC record") {
		t.Errorf("junk: %v", err)
	}
	// An empty file.
	if _, err := warctest.ReadAll(OpenReader(write("empty.warc", nil))); !errors.Is(err, ErrNotWARC) {
		t.Errorf("empty: %v", err)
	}
	// Junk between records, after a correct end marker.
	b := append(append(append([]byte{}, data[:second]...), "garbage"...), data[second:]...)
	n, err := warctest.ReadAll(OpenReader(write("mid.warc", b)))
	if n != 1 || !errors.Is(err, ErrNotWARC) || !strings.Contains(err.Error(), "expected the next record") {
		t.Errorf("junk between records: %d %v", n, err)
	}
	// Blank padding is read with warnings.
	b = append(append(append([]byte("\r\n"), data[:second]...), "\r\n\r\n"...), data[second:]...)
	b = append(b, 0, 0, 0)
	p := write("pad.warc", b)
	recs, r := readAll(t, p)
	if len(recs) != 2 || len(r.Warnings()) != 3 {
		t.Errorf("padded: %d records, warnings %v", len(recs), r.Warnings())
	}
	// Garbage after the last gzip member is refused; NUL padding is not.
	gz, err := os.ReadFile("../testdata/warc/example.warc.gz")
	if err != nil {
		t.Fatal(err)
	}
	_, err = warctest.ReadAll(OpenReader(write("tail.warc.gz", append(append([]byte{}, gz...), "trailing junk"...))))
	if err == nil || !strings.Contains(err.Error(), "at offset 3816: gzip member: 13 bytes after the gzip member ending here are not gzip data") {
		t.Errorf("gzip tail: %v", err)
	}
	_, r = readAll(t, write("pad.warc.gz", append(append([]byte{}, gz...), make([]byte, 512)...)))
	if !hasWarning(r.Warnings(), "512 blank bytes after the last gzip member") {
		t.Errorf("gzip padding warnings %v", r.Warnings())
	}
	// A directory is not a WARC file.
	if _, err := OpenReader(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("dir: %v", err)
	}
}

func TestReaderBlockBound(t *testing.T) {
	r, err := OpenReader("../testdata/warc/example.warc")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	r.MaxBlockSize = 500
	rec, err := r.Next() // warcinfo, 249 bytes
	if err != nil || rec.Block == nil {
		t.Fatalf("%v", err)
	}
	rec, err = r.Next() // warcinfo, 470 bytes
	if err != nil || rec.Block == nil {
		t.Fatalf("%v", err)
	}
	_, err = r.Next() // response, 975 bytes
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "at offset 1197: record too large: response block of 975 bytes is over the 500 byte limit") {
		t.Fatalf("got %v", err)
	}
	// A non-HTTP record over the bound is skipped, not refused.
	r2, err := OpenReader("../testdata/warc/example.warc")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r2.Close() }()
	r2.MaxBlockSize = 300
	rec, _ = r2.Next()
	rec, err = r2.Next()
	if err != nil || rec.Block != nil || len(rec.Warnings) != 1 {
		t.Fatalf("skipped warcinfo: %v %v", err, rec.Warnings)
	}
}

func TestReadRecordAt(t *testing.T) {
	for _, name := range []string{"../testdata/warc/example.warc", "../testdata/warc/example.warc.gz"} {
		recs, _ := readAll(t, name)
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range recs {
			got, err := ReadRecordAt(f, name, want.Offset, want.Length)
			if err != nil {
				t.Fatalf("%s at %d: %v", name, want.Offset, err)
			}
			if got.ID != want.ID || !bytes.Equal(got.Block, want.Block) || got.Offset != want.Offset || got.Length != want.Length {
				t.Errorf("%s at %d: got %s %d+%d", name, want.Offset, got.ID, got.Offset, got.Length)
			}
		}
		if _, err := ReadRecordAt(f, name, 5, 100); !errors.Is(err, ErrNotWARC) && !strings.Contains(err.Error(), "gzip") {
			t.Errorf("%s at 5: %v", name, err)
		}
		_ = f.Close()
	}
}

func TestParseHTTP(t *testing.T) {
	block := "HTTP/1.1 302 Found\r\nLocation: /x\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Folded: one\r\n  two\r\nnonsense line\r\n\r\nbody"
	m, warns, err := ParseHTTP([]byte(block), false)
	if err != nil {
		t.Fatal(err)
	}
	if m.StatusCode != 302 || m.Reason != "Found" || string(m.Body) != "body" {
		t.Errorf("%+v", m)
	}
	if got := m.Header.Values("set-cookie"); len(got) != 2 || got[1] != "b=2" {
		t.Errorf("set-cookie %v", got)
	}
	if m.Header.Get("X-Folded") != "one two" || len(warns) != 1 {
		t.Errorf("folded %q warns %v", m.Header.Get("X-Folded"), warns)
	}
	m, _, err = ParseHTTP([]byte("POST /a b HTTP/1.1\nHost: h\n\nx=1"), true)
	if err != nil || m.Method != "POST" || m.RequestURI != "/a%20b" || m.Host() != "h" || string(m.Body) != "x=1" {
		t.Errorf("request %+v %v", m, err)
	}
	for _, bad := range []string{"", "HTTP/1.1 2000 OK\r\n\r\n", "garbage\r\n\r\n"} {
		if _, _, err := ParseHTTP([]byte(bad), false); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseWARCDate(t *testing.T) {
	for s, want := range map[string]string{
		"2020-04-12T18:42:50.696509Z": "2020-04-12T18:42:50.696509Z",
		"2008-04-30T20:48:25Z":        "2008-04-30T20:48:25Z",
		"20080430204825":              "2008-04-30T20:48:25Z",
	} {
		got, err := ParseWARCDate(s)
		if err != nil || got.Format(time.RFC3339Nano) != want {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	if _, err := ParseWARCDate("yesterday"); err == nil {
		t.Error("no error")
	}
}

func hasWarning(ws []Warning, part string) bool {
	for _, w := range ws {
		if strings.Contains(w.Msg, part) {
			return true
		}
	}
	return false
}

// gzipMember compresses b as one member (a helper for tests that build files).
func gzipMember(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReaderGzipOfPlainFileEqualsPlain(t *testing.T) {
	// The same records, as one member, per-record members, and plain, read the same.
	data, err := os.ReadFile("../testdata/warc/example.warc")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := readAll(t, "../testdata/warc/example.warc")
	var per []byte
	for _, rec := range plain {
		per = append(per, gzipMember(t, data[rec.Offset:rec.Offset+rec.Length])...)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"whole.warc.gz": gzipMember(t, data), "per.warc.gz": per} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		recs, _ := readAll(t, p)
		if len(recs) != len(plain) {
			t.Fatalf("%s: %d records", name, len(recs))
		}
		for i := range recs {
			if recs[i].ID != plain[i].ID || !bytes.Equal(recs[i].Block, plain[i].Block) || recs[i].Pos != plain[i].Offset {
				t.Errorf("%s record %d differs", name, i)
			}
			if name == "per.warc.gz" && (recs[i].Offset < 0 || recs[i].Length <= 0) {
				t.Errorf("%s record %d: offset %d", name, i, recs[i].Offset)
			}
		}
	}
}
