package warc

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pab-dev/pab/internal/warctest"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestDecodePayloadCodings(t *testing.T) {
	payload := []byte(strings.Repeat("<p>hello, payload</p>\n", 200))
	cases := []struct {
		header   string
		body     []byte
		wantOrig string
	}{
		{"gzip", warctest.Encode(t, "gzip", payload), "gzip"},
		{"x-gzip", warctest.Encode(t, "gzip", payload), "x-gzip"},
		{"deflate", warctest.Encode(t, "zlib", payload), "deflate"},
		{"deflate", warctest.Encode(t, "raw-deflate", payload), "deflate"},
		{"br", warctest.Encode(t, "br", payload), "br"},
		{"zstd", warctest.Encode(t, "zstd", payload), "zstd"},
		{"Gzip, BR", warctest.Encode(t, "br", warctest.Encode(t, "gzip", payload)), "gzip, br"},
		{"identity", payload, ""},
	}
	for _, c := range cases {
		got, orig, err := DecodePayload(hdr("Content-Encoding", c.header), c.body)
		if err != nil || !bytes.Equal(got, payload) || orig != c.wantOrig {
			t.Errorf("%s: err %v, orig %q, %d bytes", c.header, err, orig, len(got))
		}
	}
}

func TestDecodePayloadFailuresKeepRaw(t *testing.T) {
	payload := bytes.Repeat([]byte("a"), 10000)
	gz := warctest.Encode(t, "gzip", payload)
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"truncated gzip", hdr("Content-Encoding", "gzip"), gz[:len(gz)/2], nil},
		{"not gzip", hdr("Content-Encoding", "gzip"), []byte("plain text"), nil},
		{"unknown coding", hdr("Content-Encoding", "compress"), []byte("x"), ErrUnsupportedEncoding},
		{"bomb", hdr("Content-Encoding", "gzip"), gz, ErrDecodedTooLarge},
		{"bomb br", hdr("Content-Encoding", "br"), warctest.Encode(t, "br", payload), ErrDecodedTooLarge},
		{"bomb zstd", hdr("Content-Encoding", "zstd"), warctest.Encode(t, "zstd", payload), ErrDecodedTooLarge},
	}
	for _, c := range cases {
		got, orig, err := DecodePayloadLimit(c.header, c.body, 5000)
		if err == nil || orig != "" || !bytes.Equal(got, c.body) {
			t.Errorf("%s: err %v orig %q, %d bytes", c.name, err, orig, len(got))
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}

func TestDecodePayloadChunked(t *testing.T) {
	chunked := []byte("7\r\nMozilla\r\n9;ext=1\r\nDeveloper\r\n7\r\nNetwork\r\n0\r\nTrailer: x\r\n\r\n")
	got, _, err := DecodePayload(hdr("Transfer-Encoding", "chunked"), chunked)
	if err != nil || string(got) != "MozillaDeveloperNetwork" {
		t.Errorf("chunked: %q %v", got, err)
	}
	// Says chunked, is not: kept as is (books.toscrape, the goller capture).
	html := []byte("<!DOCTYPE html>\n<html></html>\n")
	got, _, err = DecodePayload(hdr("Transfer-Encoding", "chunked"), html)
	if err != nil || !bytes.Equal(got, html) {
		t.Errorf("not chunked: %q %v", got, err)
	}
	// Chunked and gzip.
	gz := warctest.Encode(t, "gzip", []byte("hello"))
	body := append([]byte("5\r\n"), gz[:5]...)
	body = append(body, "\r\n"...)
	body = append(body, fmt.Sprintf("%X", len(gz)-5)...)
	body = append(body, "\r\n"...)
	body = append(body, gz[5:]...)
	body = append(body, "\r\n0\r\n\r\n"...)
	got, orig, err := DecodePayload(hdr("Transfer-Encoding", "chunked", "Content-Encoding", "gzip"), body)
	if err != nil || string(got) != "hello" || orig != "gzip" {
		t.Errorf("chunked gzip: %q %q %v", got, orig, err)
	}
}

func TestDechunk(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"3\r\nabc\r\n0\r\n\r\n", "abc", true},
		{"3\nabc\n0\n\n", "abc", true},
		{"3\r\nabc\r\n", "abc", true}, // cut before the last chunk
		{"0\r\n\r\n", "", true},
		{"3\r\nabc\r\n0\r\n\r\nmore", "", false},
		{"3\r\nab", "", false},
		{"zz\r\nabc\r\n0\r\n\r\n", "", false},
		{"abc\n", "", false}, // 0xabc bytes announced, 0 present
		{"", "", false},
		{"3\r\nabcX0\r\n\r\n", "", false},
		// what browsers accept: extensions, bare LF, trailers before and after the
		// trailer's closing empty line, a body cut inside the trailer
		{"3;name=\"v\"\r\nabc\r\n0;x\r\n\r\n", "abc", true},
		{"3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n", "abc", true},
		{"3\r\nabc\r\n0\r\n\r\nX-Sum: 1\r\n", "abc", true},
		{"3\r\nabc\r\n0\r\n\r\nX-Sum: 1\r\n\r\n", "abc", true},
		{"3\r\nabc\r\n0\r\n\r\nX-Sum: 1", "abc", true},
		{"3\r\nabc\r\n0\r\nX-Su", "abc", true},
		{"3\r\nabc\r\n0\r\n\r\nX-Sum: 1\r\nmore\r\n", "", false},
	}
	for _, c := range cases {
		got, ok := Dechunk([]byte(c.in))
		if ok != c.ok || (ok && string(got) != c.want) {
			t.Errorf("%q: %q %v", c.in, got, ok)
		}
	}
}

func TestDecodeCorpusBodies(t *testing.T) {
	cases := []struct {
		file, url, prefix string
		size              int
		orig              string
	}{
		{"warc/example-iana.org-chunked.warc", "http://www.iana.org/", "<!doctype html>", 0, ""},
		{"warc/transfer_compression_brotli.warc", "http://tokemon.sb.statsbiblioteket.dk/", "", 246, "br"},
		{"warc/transfer_compression_brotli.warc.gz", "http://tokemon.sb.statsbiblioteket.dk/", "", 246, "br"},
		{"warc/rec-20181019023222666572-goller.warc.gz", "https://www.google.co.uk/", "<!doctype html>", 208003, "br"},
		{"warc/example.warc.gz", "http://example.com/", "<!doctype html>", 1270, "gzip"},
	}
	for _, c := range cases {
		recs, _ := readAll(t, "../testdata/"+c.file)
		found := false
		for _, rec := range recs {
			if rec.Type != "response" || rec.TargetURI != c.url {
				continue
			}
			found = true
			got, orig, err := DecodePayload(rec.HTTP.HTTPHeader(), rec.HTTP.Body)
			if err != nil || orig != c.orig {
				t.Errorf("%s: orig %q err %v", c.file, orig, err)
			}
			if !strings.HasPrefix(strings.ToLower(string(got)), c.prefix) || (c.size > 0 && len(got) != c.size) {
				t.Errorf("%s: %d bytes starting %q", c.file, len(got), got[:min(len(got), 30)])
			}
		}
		if !found {
			t.Errorf("%s: no response for %s", c.file, c.url)
		}
	}
}
