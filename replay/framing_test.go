package replay

// framing_test.go: issue 13, "never broken bytes". WARC files built byte by byte here are
// imported with recording.ImportWARCs (and merged with recording.Merge) and served through the real
// proxy over TLS; each answer must carry exactly the payload the site sent, with the
// Content-Encoding that describes it (docs/bundle-format.md, rules F1 to F5).

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
)

// framingRecord is one WARC record of a hand-built file: its type, target, date, extra
// WARC header lines and block.
type framingRecord struct {
	typ, uri, date string
	extra          []string
	block          []byte
}

// writeFramingWARC writes the records as an uncompressed WARC 1.1 file and returns its path.
func writeFramingWARC(t *testing.T, name string, recs []framingRecord) string {
	t.Helper()
	var b bytes.Buffer
	for i, r := range recs {
		fmt.Fprintf(&b, "WARC/1.1\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:%s-0000-4000-8000-%012d>\r\nWARC-Date: %s\r\nWARC-Target-URI: %s\r\n",
			r.typ, strings.Repeat("a", 8), i+1+len(name)*100, r.date, r.uri)
		for _, l := range r.extra {
			b.WriteString(l + "\r\n")
		}
		ct := "application/http; msgtype=response"
		if r.typ == "request" {
			ct = "application/http; msgtype=request"
		}
		fmt.Fprintf(&b, "Content-Type: %s\r\nContent-Length: %d\r\n\r\n", ct, len(r.block))
		b.Write(r.block)
		b.WriteString("\r\n\r\n")
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func importFraming(t *testing.T, paths ...string) (string, *recording.ImportReport) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b")
	rep, err := recording.ImportWARCs(paths, dir, recording.ImportOptions{TaskID: "framing"})
	if err != nil {
		t.Fatal(err)
	}
	return dir, rep
}

func openFraming(t *testing.T, dir string) *recording.Bundle {
	t.Helper()
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestFramingServedExact: a node-warc style payload of Content-Length + CRLF is served with
// Content-Length bytes (F1); a truncated gzip body is served as stored, with
// Content-Encoding: gzip (F4); a chunked body cut inside a chunk is served de-chunked, never
// with its chunk-size lines (F3), and its record says WARC-Truncated.
func TestFramingServedExact(t *testing.T) {
	font := bytes.Repeat([]byte("wOFF\x00\x01\x00\x00font-data-"), 300) // 4500 bytes
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte("<p>zipped page</p>\n"), 200))
	zw.Close()
	cutGzip := gz.Bytes()[:gz.Len()/2]
	d := "2018-11-11T22:56:36Z"
	path := writeFramingWARC(t, "site.warc", []framingRecord{
		{typ: "response", uri: "https://fonts.test/fa.woff", date: d,
			block: append([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/font-woff\r\nContent-Length: "+strconv.Itoa(len(font))+"\r\n\r\n"), append(append([]byte{}, font...), "\r\n"...)...)},
		{typ: "response", uri: "https://fonts.test/a.js", date: d,
			block: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/javascript\r\nContent-Length: 5\r\n\r\nab();\r\n")},
		{typ: "response", uri: "https://gz.test/", date: d,
			block: append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\r\n"), cutGzip...)},
		{typ: "response", uri: "https://chunk.test/", date: d,
			block: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n<html>\r\n20\r\n<body>cut short insi")},
	})
	dir, rep := importFraming(t, path)
	var trimWarn []string
	for _, w := range rep.Warnings {
		if strings.Contains(w, "Content-Length by CR/LF") {
			trimWarn = append(trimWarn, w)
		}
	}
	if len(trimWarn) != 1 || !strings.Contains(trimWarn[0], path+" at offset 0: 2 response payloads") {
		t.Errorf("trim warnings %q; want one line naming %s at offset 0 and 2 payloads (all: %q)", trimWarn, path, rep.Warnings)
	}
	if rep.DecodeFailures != 1 || rep.Truncated != 1 {
		t.Errorf("report: %d decode failures, %d truncated; want 1 and 1", rep.DecodeFailures, rep.Truncated)
	}
	data, err := os.ReadFile(filepath.Join(dir, recording.WARCFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("WARC-Truncated: unspecified\r\n")); n != 1 {
		t.Errorf("data.warc has %d WARC-Truncated fields, want 1 (the chunked body)", n)
	}
	if probs := recording.Audit(dir); len(probs) != 0 {
		t.Errorf("audit: %v", probs)
	}
	tp := startProxyBundle(t, openFraming(t, dir), nil)

	r := tp.get(t, "https://fonts.test/fa.woff", nil)
	if !bytes.Equal(r.body, font) || r.header.Get("Content-Length") != strconv.Itoa(len(font)) {
		t.Errorf("font: %d bytes, Content-Length %s; want %d", len(r.body), r.header.Get("Content-Length"), len(font))
	}
	if r := tp.get(t, "https://fonts.test/a.js", nil); string(r.body) != "ab();" {
		t.Errorf("script: %q, want %q", r.body, "ab();")
	}
	r = tp.get(t, "https://gz.test/", nil)
	if r.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(r.body, cutGzip) {
		t.Errorf("truncated gzip: Content-Encoding %q, %d bytes; want gzip and the %d bytes recorded", r.header.Get("Content-Encoding"), len(r.body), len(cutGzip))
	}
	r = tp.get(t, "https://chunk.test/", nil)
	if string(r.body) != "<html><body>cut short insi" || r.header.Get("Transfer-Encoding") != "" {
		t.Errorf("truncated chunked: %q (Transfer-Encoding %q); want the de-chunked data", r.body, r.header.Get("Transfer-Encoding"))
	}
}

// TestRevisitResolvedAcrossImports: a revisit imported on its own is unresolved (audit
// says so); merged into the recording that holds its original, by URI and date or by
// payload digest only, it is resolved and served 200 with the original's payload (F5).
func TestRevisitResolvedAcrossImports(t *testing.T) {
	body := bytes.Repeat([]byte("original payload "), 100)
	first := writeFramingWARC(t, "first.warc", []framingRecord{
		{typ: "response", uri: "https://rv.test/page", date: "2020-01-01T00:00:00Z",
			block: append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...)},
	})
	sum := sha1Base32(body)
	second := writeFramingWARC(t, "second.warc", []framingRecord{
		{typ: "revisit", uri: "https://rv.test/page", date: "2020-01-02T00:00:00Z",
			extra: []string{"WARC-Profile: http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
				"WARC-Refers-To-Target-URI: https://rv.test/page", "WARC-Refers-To-Date: 2020-01-01T00:00:00Z",
				"WARC-Payload-Digest: sha1:" + sum},
			block: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Second: yes\r\n\r\n")},
		{typ: "revisit", uri: "https://rv.test/other", date: "2020-01-02T00:00:01Z",
			extra: []string{"WARC-Profile: http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
				"WARC-Payload-Digest: sha1:" + sum},
			block: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")},
	})
	oldDir, _ := importFraming(t, first)
	newDir, rep := importFraming(t, second)
	if rep.RevisitsUnresolved != 2 {
		t.Fatalf("second import alone: %d unresolved, want 2", rep.RevisitsUnresolved)
	}
	probs := recording.Audit(newDir)
	if len(probs) != 2 || !probs[0].Unresolved || len(recording.Blocking(probs)) != 0 {
		t.Errorf("audit of the revisits alone: %v; want two unresolved-revisit problems", probs)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if err := recording.Merge(oldDir, newDir, merged, recording.MergeOptions{TaskID: "framing"}); err != nil {
		t.Fatal(err)
	}
	if probs := recording.Audit(merged); len(probs) != 0 {
		t.Errorf("audit of the merged recording: %v", probs)
	}
	b := openFraming(t, merged)
	for _, e := range b.Entries {
		if e.Unresolved {
			t.Errorf("entry %s (%s) still unresolved after the merge", e.ID, e.URL)
		}
	}
	tp := startProxyBundle(t, b, nil)
	for _, u := range []string{"https://rv.test/other"} {
		r := tp.get(t, u, nil)
		if r.status != 200 || !bytes.Equal(r.body, body) {
			t.Errorf("%s: status %d, %d bytes; want 200 and the original's %d", u, r.status, len(r.body), len(body))
		}
	}
	// the page itself answers from the earlier copy; the revisit's own header is kept
	var second2 bool
	for _, e := range b.Entries {
		if e.URL == "https://rv.test/page" && e.RevisitOf != "" {
			resp, err := b.Response(&e)
			if err != nil {
				t.Fatal(err)
			}
			second2 = resp.Header.Get("X-Second") == "yes" && resp.Size == int64(len(body))
		}
	}
	if !second2 {
		t.Errorf("the revisit of /page is not a resolved revisit with its own header: %+v", b.Entries)
	}
}

// sha1Base32 is a WARC-Payload-Digest value as Heritrix and warcio write it.
func sha1Base32(b []byte) string {
	sum := sha1.Sum(b)
	return base32.StdEncoding.EncodeToString(sum[:])
}
