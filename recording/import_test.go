package recording

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pab-dev/pab/internal/warctest"
	"github.com/pab-dev/pab/warc"
)

// bodyCheck names one exchange of an imported bundle and what its stored payload holds.
type bodyCheck struct {
	url, method string
	contains    string // "" to skip
	prefix      string // "" to skip
	size        int64  // 0 to skip
	origEnc     string // RR-Original-Content-Encoding, "" for none
	status      int    // 0 to skip
}

type corpusCase struct {
	file       string
	errIs      error  // for a refused file
	errText    string // the one-line error a refused file gives (after the path)
	exchanges  int
	pages      int
	resolved   int
	unresolved int
	dedup      int
	skipped    string
	checks     []bodyCheck
	note       string
}

// corpusCases covers every file of testdata/warc/ and testdata/sites/ (copied from
// ../shared/corpus/); TestImportCorpus fails if a file is missing from it.
var corpusCases = []corpusCase{
	{file: "sites/IAH-20080430204825-00000-blackbook.warc.gz", exchanges: 261, pages: 100, dedup: 45,
		skipped: "38 dns, 261 metadata, 1 warcinfo",
		checks: []bodyCheck{
			{url: "http://www.archive.org/about/jobs.php", method: "GET", contains: "Web Crawl Services Manager", status: 200},
			{url: "http://www.archive.org/about/about.php", method: "GET", contains: "info@archive.org"},
			{url: "http://www.archive.org/robots.txt", method: "GET", prefix: "##############", size: 467},
		},
		note: "WARC/0.17 read with a warning; 45 identical payloads stored once"},
	{file: "sites/books.toscrape.warc", exchanges: 30, pages: 1,
		checks: []bodyCheck{
			{url: "http://books.toscrape.com/", method: "GET", prefix: "<!DOCTYPE html>", contains: "Sapiens: A Brief History of Humankind", status: 200},
		},
		note: "chunked header on de-chunked bodies; header names with spaces repaired; 1-CRLF record ends"},
	{file: "sites/lil-projects.warc.gz", exchanges: 27, pages: 1, skipped: "1 resource, 4 warcinfo",
		checks: []bodyCheck{
			{url: "https://lil.law.harvard.edu/projects/", method: "GET", contains: "Perma.cc", origEnc: "gzip", status: 200},
		},
		note: "4 warcinfo (concatenated WARCs), gzip bodies decoded"},
	{file: "warc/cc.warc.gz", exchanges: 1, pages: 1,
		checks: []bodyCheck{{url: "http://commoncrawl.org/", method: "GET", prefix: "\n<!DOCTYPE html>", contains: "<title>Common Crawl</title>"}},
		note:   "payload stored decoded by the crawler"},
	{file: "warc/example-bad-length.warc", exchanges: 2, pages: 2, resolved: 1, skipped: "2 warcinfo",
		checks: []bodyCheck{{url: "http://example.com/", method: "GET", prefix: "<!doctype html>", size: 1270, origEnc: "gzip"}},
		note:   "the response's Content-Length is 1 byte short: resynchronised at the next record (warned)"},
	{file: "warc/example-bad-non-chunked.warc.gz", exchanges: 2, pages: 2, resolved: 1, skipped: "2 warcinfo",
		checks: []bodyCheck{{url: "http://example.com/", method: "GET", prefix: "<!doctype html>", size: 1270, origEnc: "gzip"}},
		note:   "whole-file gzip read sequentially (offsets -1); revisit resolved by target URI and date"},
	{file: "warc/example-digest.warc", errText: "import: no HTTP response records in", note: "refused: only request records (digests read, 1 bad payload digest warned)"},
	{file: "warc/example-iana.org-chunked.warc", exchanges: 1, pages: 1, skipped: "1 warcinfo",
		checks: []bodyCheck{{url: "http://www.iana.org/", method: "GET", prefix: "<!doctype html>"}},
		note:   "chunked body de-chunked"},
	{file: "warc/example-space-in-target-uri.warc.gz", errText: "import: no HTTP response records in",
		note: "refused: only a resource record (its URI reads file:///example%20with%20spaces.png)"},
	{file: "warc/example-trunc.warc", exchanges: 1, pages: 1, skipped: "2 warcinfo",
		checks: []bodyCheck{{url: "http://example.com/", method: "GET", prefix: "<!doctype html>", size: 1270, origEnc: "gzip"}},
		note:   "the response's Content-Length is 2 bytes short: resynchronised at the next record (warned)"},
	{file: "warc/example-url-agnostic-revisit.warc.gz", exchanges: 1, unresolved: 1, skipped: "1 warcinfo",
		note: "revisit whose original is elsewhere: kept, unresolved"},
	{file: "warc/example-wget-bad-target-uri.warc.gz", exchanges: 1, pages: 1, skipped: "1 metadata, 2 resource, 1 warcinfo",
		checks: []bodyCheck{{url: "http://example.com/", method: "GET", contains: "Example Domain"}},
		note:   "<angle-bracketed> target URIs"},
	{file: "warc/example-wrong-chunks.warc.gz", exchanges: 1, pages: 1,
		checks: []bodyCheck{{url: "http://example.com/", method: "GET", prefix: "<!doctype html>", size: 1270}},
		note:   "gzip members split records: read sequentially; Content-Length 1 byte short before newlines (warned)"},
	{file: "warc/example.warc", exchanges: 2, pages: 2, resolved: 1, skipped: "1 metadata, 2 warcinfo",
		checks: []bodyCheck{{url: "http://example.com/", method: "GET", prefix: "<!doctype html>", size: 1270, origEnc: "gzip"}},
		note:   "plain twin of example.warc.gz plus a metadata record with sha256 digests"},
	{file: "warc/example.warc.gz", exchanges: 2, pages: 2, resolved: 1, skipped: "2 warcinfo",
		checks: []bodyCheck{{url: "http://example.com/", method: "GET", prefix: "<!doctype html>", size: 1270, origEnc: "gzip"}},
		note:   "gzip body decoded; revisit resolved"},
	{file: "warc/gzip_extra_sl.warc.gz", errText: "import: no HTTP response records in",
		note: "refused: only a warcinfo (gzip FEXTRA read)"},
	{file: "warc/post-test.warc.gz", exchanges: 3,
		checks: []bodyCheck{{url: "http://httpbin.org/post", method: "POST", contains: `"foo": "bar"`}},
		note:   "3 POST exchanges with form bodies"},
	{file: "warc/rec-20181019023222666572-goller.warc.gz", exchanges: 9, pages: 1,
		checks: []bodyCheck{{url: "https://www.google.co.uk/", method: "GET", prefix: "<!doctype html>", size: 208003, origEnc: "br"}},
		note:   "br body under a stale chunked header"},
	{file: "warc/redirect.warc", exchanges: 1, pages: 1,
		checks: []bodyCheck{{url: "https://www.iana.org/domains/example", method: "GET", status: 301}},
		note:   "301 with Location"},
	{file: "warc/transfer_compression_brotli.warc", exchanges: 1, pages: 1, skipped: "1 metadata, 1 resource, 1 warcinfo",
		checks: []bodyCheck{{url: "http://tokemon.sb.statsbiblioteket.dk/", method: "GET", contains: "Extremely simple webpage", size: 246, origEnc: "br"}},
		note:   "br"},
	{file: "warc/transfer_compression_brotli.warc.gz", exchanges: 1, pages: 1, skipped: "1 metadata, 1 resource, 1 warcinfo",
		checks: []bodyCheck{{url: "http://tokemon.sb.statsbiblioteket.dk/", method: "GET", contains: "Extremely simple webpage", size: 246, origEnc: "br"}},
		note:   "br"},
}

func TestImportCorpus(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../testdata/warc/*", "../testdata/sites/*"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, ".md") {
				files = append(files, strings.TrimPrefix(f, "../testdata/"))
			}
		}
	}
	covered := map[string]bool{}
	for _, c := range corpusCases {
		covered[c.file] = true
	}
	for _, f := range files {
		if !covered[f] {
			t.Errorf("testdata/%s has no case in corpusCases", f)
		}
	}

	var table strings.Builder
	fmt.Fprintf(&table, "\n| file | outcome | exchanges | notes |\n|---|---|---|---|\n")
	for _, c := range corpusCases {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "bundle")
			path := "../testdata/" + c.file
			rep, err := ImportWARCs([]string{path}, dir, ImportOptions{TaskID: "corpus"})
			if c.errText != "" {
				if err == nil {
					t.Fatalf("imported; want refusal %q", c.errText)
				}
				if c.errIs != nil && !errors.Is(err, c.errIs) {
					t.Errorf("error %v is not %v", err, c.errIs)
				}
				if !strings.Contains(err.Error(), c.errText) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q, want one line naming %s and containing %q", err, path, c.errText)
				}
				if left := leftovers(t, parent); len(left) != 0 {
					t.Errorf("refused import left %v", left)
				}
				fmt.Fprintf(&table, "| %s | refused: %s | - | %s |\n", c.file, err, c.note)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&table, "| %s | imported (%d pages, %d warnings) | %d | %s |\n", c.file, rep.Pages, len(rep.Warnings), rep.Exchanges, c.note)
			if rep.Exchanges != c.exchanges || rep.Pages != c.pages || rep.RevisitsResolved != c.resolved ||
				rep.RevisitsUnresolved != c.unresolved || rep.Deduplicated != c.dedup || rep.SkippedSummary() != c.skipped {
				t.Errorf("report: %d exchanges, %d pages, %d resolved, %d unresolved, %d deduplicated, skipped %q",
					rep.Exchanges, rep.Pages, rep.RevisitsResolved, rep.RevisitsUnresolved, rep.Deduplicated, rep.SkippedSummary())
			}
			es := checkBundleRoundTrip(t, dir)
			if len(es) != c.exchanges {
				t.Errorf("%d entries", len(es))
			}
			for i := 1; i < len(es); i++ {
				if es[i].TS < es[i-1].TS {
					t.Errorf("entries out of date order at %s", es[i].ID)
				}
			}
			for _, chk := range c.checks {
				checkBody(t, dir, es, chk)
			}
		})
	}
	t.Log(table.String())
}

// checkBody finds the first entry for chk.url and checks its stored payload.
func checkBody(t *testing.T, dir string, es []Entry, chk bodyCheck) {
	t.Helper()
	i := slices.IndexFunc(es, func(e Entry) bool { return e.URL == chk.url && e.Method == chk.method })
	if i < 0 {
		t.Errorf("no %s %s entry", chk.method, chk.url)
		return
	}
	e := es[i]
	if chk.status != 0 && e.Status != chk.status {
		t.Errorf("%s: status %d, want %d", chk.url, e.Status, chk.status)
	}
	rec := recordAt(t, dir, e.RespOffset, e.RespLength)
	if got := rec.Get("RR-Original-Content-Encoding"); got != chk.origEnc {
		t.Errorf("%s: original encoding %q, want %q", chk.url, got, chk.origEnc)
	}
	if rec.HTTP.Header.Has("Content-Encoding") || rec.HTTP.Header.Has("Transfer-Encoding") {
		t.Errorf("%s: stored header keeps a coding: %v", chk.url, rec.HTTP.Header)
	}
	if e.RevisitOf != "" {
		j := indexOfID(es, e.RevisitOf)
		rec = recordAt(t, dir, es[j].RespOffset, es[j].RespLength)
	}
	body := rec.HTTP.Body
	if rec.HTTP.Header.Get("Content-Length") != fmt.Sprint(len(body)) {
		t.Errorf("%s: Content-Length %s for %d bytes", chk.url, rec.HTTP.Header.Get("Content-Length"), len(body))
	}
	if chk.prefix != "" && !bytes.HasPrefix(body, []byte(chk.prefix)) {
		t.Errorf("%s: body starts %q, want %q", chk.url, body[:min(len(body), 40)], chk.prefix)
	}
	if chk.contains != "" && !bytes.Contains(body, []byte(chk.contains)) {
		t.Errorf("%s: body lacks %q", chk.url, chk.contains)
	}
	if chk.size != 0 && (int64(len(body)) != chk.size || e.Size != chk.size) {
		t.Errorf("%s: body %d bytes, entry %d, want %d", chk.url, len(body), e.Size, chk.size)
	}
}

func recordAt(t *testing.T, dir string, off, length int64) *warc.Record {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, WARCFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rec, err := warc.ReadRecordAt(f, WARCFile, off, length)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func importOne(t *testing.T, paths ...string) (string, *ImportReport, []Entry) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	rep, err := ImportWARCs(paths, dir, ImportOptions{TaskID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return dir, rep, checkBundleRoundTrip(t, dir)
}

func TestImportPostBodies(t *testing.T) {
	dir, _, es := importOne(t, "../testdata/warc/post-test.warc.gz")
	want := map[string]string{
		"http://httpbin.org/post":         "foo=bar&test=abc",
		"http://httpbin.org/post?foo=bar": "data=^",
	}
	var bodies []string
	for _, e := range es {
		if e.Method != "POST" || e.ReqType != "application/x-www-form-urlencoded" {
			t.Errorf("%s: %s %q", e.ID, e.Method, e.ReqType)
		}
		b, err := base64.StdEncoding.DecodeString(e.ReqBody)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(b))
		if w, ok := want[e.URL]; ok && e.URL == "http://httpbin.org/post?foo=bar" && string(b) != w {
			t.Errorf("%s: body %q, want %q", e.URL, b, w)
		}
		q := recordAt(t, dir, e.ReqOffset, e.ReqLength)
		if string(q.HTTP.Body) != string(b) || q.HTTP.Method != "POST" {
			t.Errorf("%s: request record body %q", e.ID, q.HTTP.Body)
		}
	}
	slices.Sort(bodies)
	if strings.Join(bodies, "|") != "A=1&B=[]&C=3|data=^|foo=bar&test=abc" {
		t.Errorf("bodies %v", bodies)
	}
}

func TestImportRevisits(t *testing.T) {
	// Resolved: the revisit of example.warc points at the first response.
	dir, _, es := importOne(t, "../testdata/warc/example.warc")
	if es[1].RevisitOf != "e000001" || es[1].Digest != es[0].Digest || es[1].Size != 1270 {
		t.Errorf("revisit entry %+v", es[1])
	}
	rv := recordAt(t, dir, es[1].RespOffset, es[1].RespLength)
	if rv.Type != "revisit" || rv.Get("RR-Original-Content-Encoding") != "gzip" || rv.HTTP.Header.Get("Content-Length") != "1270" {
		t.Errorf("revisit record %s %v", rv.Type, rv.Header)
	}
	// Unresolved: kept, with what the input said about its original.
	dir, _, es = importOne(t, "../testdata/warc/example-url-agnostic-revisit.warc.gz")
	if !es[0].Unresolved || es[0].URL != "http://test@example.com/" || es[0].Status != 200 {
		t.Errorf("unresolved entry %+v", es[0])
	}
	rv = recordAt(t, dir, es[0].RespOffset, es[0].RespLength)
	if rv.Get("WARC-Refers-To-Target-URI") != "http://example.iana.org/" || rv.Get("WARC-Payload-Digest") != "sha1:B2LTWWPUOYAH7UIPQ7ZUPQ4VMBSVC36A" {
		t.Errorf("unresolved record %v", rv.Header)
	}
	// Across files: the unresolved revisit's original, by WARC-Refers-To, in another file.
	dir2 := t.TempDir()
	orig := "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:c0b8a812-1a11-4cd1-9189-58bc8eb6457f>\r\n" +
		"WARC-Target-URI: http://example.iana.org/\r\nWARC-Date: 2013-07-02T19:54:02Z\r\nContent-Type: application/http; msgtype=response\r\n"
	body := "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + strings.Repeat("x", 1270)
	orig += fmt.Sprintf("Content-Length: %d\r\n\r\n%s\r\n\r\n", len(body), body)
	p := filepath.Join(dir2, "orig.warc")
	if err := os.WriteFile(p, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rep, es := importOne(t, "../testdata/warc/example-url-agnostic-revisit.warc.gz", p)
	if rep.RevisitsResolved != 1 || rep.RevisitsUnresolved != 0 || len(es) != 2 || es[1].RevisitOf != "e000001" || es[1].Size != 1270 {
		t.Errorf("cross-file: %+v %+v", rep, es)
	}
}

func TestImportPairsAndOrders(t *testing.T) {
	// Two files: exchanges sorted by date, then file order; requests paired.
	_, rep, es := importOne(t, "../testdata/warc/redirect.warc", "../testdata/warc/example.warc")
	if rep.Files != 2 || len(es) != 3 {
		t.Fatalf("%+v", rep)
	}
	if es[0].URL != "http://example.com/" || es[2].URL != "https://www.iana.org/domains/example" {
		t.Errorf("order %s %s %s", es[0].URL, es[1].URL, es[2].URL)
	}
	// books.toscrape: requests precede responses, no WARC-Concurrent-To.
	dir, rep, es := importOne(t, "../testdata/sites/books.toscrape.warc")
	if rep.Skipped["unpaired-request"] != 0 {
		t.Errorf("unpaired requests: %v", rep.Skipped)
	}
	q := recordAt(t, dir, es[0].ReqOffset, es[0].ReqLength)
	if q.HTTP.Header.Get("Upgrade-Insecure-Requests") != "1" || q.HTTP.Host() != "books.toscrape.com" {
		t.Errorf("request header %v", q.HTTP.Header)
	}
	if !hasText(rep.Warnings, `HTTP header name "Upgrade-Insecure Requests" read as "Upgrade-Insecure-Requests"`) {
		t.Errorf("warnings %v", rep.Warnings)
	}
}

func TestImportManifestAndPages(t *testing.T) {
	dir, _, _ := importOne(t, "../testdata/sites/IAH-20080430204825-00000-blackbook.warc.gz")
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"captured_from": "2008-04-30T20:48:25.000Z"`, `"captured_to": "2008-04-30T20:53:31.000Z"`,
		`"www.archive.org": "http://www.archive.org/texts.americana"`, `"task_id": "t"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("manifest lacks %s:\n%s", want, b)
		}
	}
	pages, err := os.ReadFile(filepath.Join(dir, PagesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pages), `{"url":"http://www.archive.org/about/jobs.php","ts":"2008-04-30T20:51:37.000Z","fetched":"GET","title":"Internet Archive: Jobs"}`) {
		t.Errorf("jobs page missing")
	}
	// lil-projects: Sec-Fetch-Dest decides; the favicon (Accept */*) is not a page.
	dir, _, _ = importOne(t, "../testdata/sites/lil-projects.warc.gz")
	pages, _ = os.ReadFile(filepath.Join(dir, PagesFile))
	if string(pages) != `{"url":"https://lil.law.harvard.edu/projects/","ts":"2023-02-22T16:19:54.000Z","fetched":"GET","title":"Projects | Library Innovation Lab"}`+"\n" {
		t.Errorf("pages %s", pages)
	}
}

func TestImportDeterministic(t *testing.T) {
	a, _, _ := importOne(t, "../testdata/sites/lil-projects.warc.gz", "../testdata/warc/example.warc.gz")
	b, _, _ := importOne(t, "../testdata/sites/lil-projects.warc.gz", "../testdata/warc/example.warc.gz")
	for _, name := range []string{ManifestFile, WARCFile, EntriesFile, PagesFile} {
		x, _ := os.ReadFile(filepath.Join(a, name))
		y, _ := os.ReadFile(filepath.Join(b, name))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs", name)
		}
	}
}

func TestImportRefusals(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	good, err := os.ReadFile("../testdata/warc/example.warc")
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.warc")
	if err := os.WriteFile(cut, good[:1197+500], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{nil, "import: no WARC files given"},
		{[]string{"../testdata/warc/missing.warc"}, "read ../testdata/warc/missing.warc: "},
		// A good file first does not let a bad one through.
		{[]string{"../testdata/warc/example.warc", cut}, "read " + cut + " at offset 1197: "},
	} {
		_, err := ImportWARCs(c.paths, dir, ImportOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v", c.paths, err)
		}
		if left := leftovers(t, parent); len(left) != 0 {
			t.Errorf("%v left %v", c.paths, left)
		}
	}
	// The bound on held bytes.
	_, err = ImportWARCs([]string{"../testdata/sites/books.toscrape.warc"}, dir, ImportOptions{MaxBytes: 100000})
	if err == nil || !strings.Contains(err.Error(), "hold more than 100000 bytes") {
		t.Errorf("bound: %v", err)
	}
}

func TestImportLogf(t *testing.T) {
	var lines []string
	_, err := ImportWARCs([]string{"../testdata/warc/example-wrong-chunks.warc.gz"}, filepath.Join(t.TempDir(), "b"),
		ImportOptions{Logf: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "../testdata/warc/example-wrong-chunks.warc.gz at offset 0: ") {
		t.Errorf("logged %q", lines)
	}
}

func hasText(lines []string, part string) bool {
	for _, l := range lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}

// BenchmarkImportBlackbook imports the 2.5 MB Heritrix crawl (822 records, 261 exchanges).
func BenchmarkImportBlackbook(b *testing.B) {
	const path = "../testdata/sites/IAH-20080430204825-00000-blackbook.warc.gz"
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	parent := b.TempDir()
	for i := 0; b.Loop(); i++ {
		if _, err := ImportWARCs([]string{path}, filepath.Join(parent, fmt.Sprint(i)), ImportOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadBlackbook only reads the records (no decoding, no writing).
func BenchmarkReadBlackbook(b *testing.B) {
	const path = "../testdata/sites/IAH-20080430204825-00000-blackbook.warc.gz"
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	for b.Loop() {
		if n, err := warctest.ReadAll(warc.OpenReader(path)); err != nil || n != 822 {
			b.Fatal(n, err)
		}
	}
}

// rawRecord builds one WARC/1.1 record; hdr lines are "Name: value".
func rawRecord(typ, uri, date string, block string, hdr ...string) string {
	var b strings.Builder
	b.WriteString("WARC/1.1\r\nWARC-Type: " + typ + "\r\nWARC-Target-URI: " + uri + "\r\n")
	if date != "" {
		b.WriteString("WARC-Date: " + date + "\r\n")
	}
	for _, h := range hdr {
		b.WriteString(h + "\r\n")
	}
	msg := "response"
	if typ == "request" {
		msg = "request"
	}
	fmt.Fprintf(&b, "Content-Type: application/http; msgtype=%s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", msg, len(block), block)
	return b.String()
}

func TestImportDigestResolutionAndDates(t *testing.T) {
	payload := strings.Repeat("shared payload ", 10) // 150 bytes: below DedupMinSize
	sum := sha1Base32(payload)
	data := rawRecord("response", "http://a.test/one", "2020-01-01T00:00:02Z", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"+payload) +
		// No WARC-Date: takes its request's.
		rawRecord("response", "http://a.test/early", "", "HTTP/1.1 200 OK\r\n\r\nearly") +
		rawRecord("request", "http://a.test/early", "2020-01-01T00:00:01Z", "GET /early HTTP/1.1\r\nHost: a.test\r\n\r\n") +
		// Neither: skipped.
		rawRecord("response", "http://a.test/undated", "", "HTTP/1.1 200 OK\r\n\r\nx") +
		// A revisit found only by its payload digest (sha1 base32 of the original).
		rawRecord("revisit", "http://a.test/two", "2020-01-01T00:00:03Z", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
			"WARC-Payload-Digest: sha1:"+sum, "WARC-Profile: http://netpreserve.org/warc/1.1/revisit/identical-payload-digest")
	p := filepath.Join(t.TempDir(), "made.warc")
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, rep, es := importOne(t, p)
	if len(es) != 3 || rep.Skipped["no-date"] != 1 || rep.RevisitsResolved != 1 {
		t.Fatalf("report %+v entries %d", rep, len(es))
	}
	if es[0].URL != "http://a.test/early" || es[0].TS != "2020-01-01T00:00:01.000Z" {
		t.Errorf("first entry %+v", es[0])
	}
	if es[2].URL != "http://a.test/two" || es[2].RevisitOf != es[1].ID || es[2].Size != 150 {
		t.Errorf("revisit entry %+v", es[2])
	}
	rv := recordAt(t, dir, es[2].RespOffset, es[2].RespLength)
	if rv.Type != "revisit" || rv.Get("WARC-Refers-To-Target-URI") != "http://a.test/one" {
		t.Errorf("revisit record %v", rv.Header)
	}
}

func sha1Base32(s string) string {
	h := sha1.Sum([]byte(s))
	return base32.StdEncoding.EncodeToString(h[:])
}

// TestImportCancelled: an import whose context is done stops and leaves no output.
func TestImportCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := filepath.Join(t.TempDir(), "bundle")
	_, err := ImportWARCs([]string{filepath.Join("..", "testdata", "sites", "books.toscrape.warc")}, dir, ImportOptions{Context: ctx})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a cancelled import left %s", dir)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "*")); len(left) != 0 {
		t.Errorf("a cancelled import left %v", left)
	}
}

// TestImportSkipsHeaderTooLarge: a response whose URL is too long for a bundle's WARC
// header (ErrHeaderTooLarge) is skipped with a warning; the rest is imported.
func TestImportSkipsHeaderTooLarge(t *testing.T) {
	var in bytes.Buffer
	for i, u := range []string{"https://a.test/long?q=" + strings.Repeat("q", 70_000), "https://a.test/short"} {
		block := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
		fmt.Fprintf(&in, "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-00000000000%d>\r\n"+
			"WARC-Date: 2020-01-01T00:00:00Z\r\nWARC-Target-URI: %s\r\nContent-Type: application/http; msgtype=response\r\n"+
			"Content-Length: %d\r\n\r\n%s\r\n\r\n", i, u, len(block), block)
	}
	path := filepath.Join(t.TempDir(), "long.warc")
	if err := os.WriteFile(path, in.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, rep, es := importOne(t, path)
	if len(es) != 1 || es[0].URL != "https://a.test/short" || rep.Skipped["header-too-large"] != 1 {
		t.Fatalf("entries %d, skipped %v", len(es), rep.Skipped)
	}
	if !hasText(rep.Warnings, "more than the limit of 65536 (a URL of 70022 bytes); skipped") {
		t.Errorf("warnings %.300q", rep.Warnings)
	}
}
