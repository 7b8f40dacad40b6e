// Package warctest holds test helpers shared by the tests of warc and recording: the
// corpus seeds of their WARC fuzz targets and a whole-file read. It is imported by tests
// only.
package warctest

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// FuzzSeeds are the small corpus files (testdata/warc/, plain and gzip, good and bad)
// that seed the WARC fuzz targets of warc and recording.
var FuzzSeeds = []string{
	"warc/example.warc", "warc/example.warc.gz", "warc/example-bad-non-chunked.warc.gz",
	"warc/example-wrong-chunks.warc.gz", "warc/example-trunc.warc", "warc/example-bad-length.warc",
	"warc/example-digest.warc", "warc/example-url-agnostic-revisit.warc.gz", "warc/gzip_extra_sl.warc.gz",
	"warc/redirect.warc", "warc/post-test.warc.gz", "warc/transfer_compression_brotli.warc",
	"warc/example-iana.org-chunked.warc",
}

// AddFileSeeds adds every file of FuzzSeeds (read from ../testdata, so a test of a
// package directly under the repository root) and three small hostile inputs to f.
func AddFileSeeds(f *testing.F) {
	for _, name := range FuzzSeeds {
		b, err := os.ReadFile("../testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("WARC/1.1\r\nContent-Length: 99999999999\r\n\r\n"))
	f.Add([]byte("WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 5\r\n\r\nHTTP/\r\n\r\n"))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
}

// ReadAll reads a WARC reader to its end: r and err are what warc.OpenReader returns, so
// a test calls ReadAll(warc.OpenReader(path)). It returns the number of records read and
// the error that stopped it (nil at io.EOF), err itself when opening failed.
func ReadAll[T any, R interface {
	Next() (T, error)
	Close() error
}](r R, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	defer func() { _ = r.Close() }()
	for n := 0; ; n++ {
		if _, err := r.Next(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
	}
}

// WriteTemp writes data to a file called name in a test's temporary directory and returns
// its path.
func WriteTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// SHA1Base32 is a WARC digest of b: "sha1:" and the base32 of its SHA-1 (WARC 1.1 section
// 5.8).
func SHA1Base32(b []byte) string {
	s := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}

// Record builds one record whose Content-Length is the block's length plus clDelta,
// with a correct block digest, lines ended by eol.
func Record(typ, uri, block string, clDelta int, eol string) string {
	h := []string{"WARC/1.0", "WARC-Type: " + typ, "WARC-Record-ID: <urn:uuid:" + fmt.Sprintf("%08x", len(block)+len(uri)) + "-0000-0000-0000-000000000000>",
		"WARC-Date: 2020-01-02T03:04:05Z", "WARC-Target-URI: " + uri, "Content-Type: application/http; msgtype=" + typ,
		"WARC-Block-Digest: " + SHA1Base32([]byte(block)),
		fmt.Sprintf("Content-Length: %d", len(block)+clDelta)}
	return strings.Join(h, eol) + eol + eol + block + eol + eol
}

// Response is an HTTP/1.1 200 text/html response head with a right Content-Length, then
// body.
func Response(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// Request is an HTTP/1.1 GET request head for path on example.com.
func Request(path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: example.com\r\n\r\n"
}

// Encode returns b encoded with a Content-Encoding (gzip, zlib, raw-deflate, deflate,
// br, zstd, ...).
func Encode(t testing.TB, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zlib":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		fw, err := flate.NewWriter(&buf, flate.DefaultCompression)
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		t.Fatalf("coding %s", coding)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
