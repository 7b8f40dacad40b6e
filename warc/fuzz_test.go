package warc

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pab-dev/pab/internal/warctest"
)

// FuzzReader reads arbitrary bytes as a WARC file: it must return records or an error,
// never panic or loop, and every plain record's offset must point at "WARC/".
func FuzzReader(f *testing.F) {
	warctest.AddFileSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "f.warc")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReader(p)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Close() }()
		r.MaxBlockSize = 1 << 20
		gz := len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b
		for n := 0; ; n++ {
			if n > len(data) {
				t.Fatalf("%d records from %d bytes", n, len(data))
			}
			rec, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				if _, err2 := r.Next(); err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				return
			}
			if !gz && (rec.Offset < 0 || !bytes.HasPrefix(data[rec.Offset:], []byte("WARC/")) || rec.Offset+rec.Length > int64(len(data))) {
				t.Fatalf("record at %d+%d", rec.Offset, rec.Length)
			}
		}
	})
}

// FuzzDecodePayload decodes arbitrary bodies under each coding: decoded output stays
// within the bound, and a failure returns the body it was given (de-chunked at most).
func FuzzDecodePayload(f *testing.F) {
	f.Add("gzip", true, warctest.Encode(f, "gzip", []byte("hello hello hello")))
	f.Add("br", false, warctest.Encode(f, "br", []byte("hello")))
	f.Add("zstd", false, warctest.Encode(f, "zstd", []byte("hello")))
	f.Add("deflate", false, warctest.Encode(f, "raw-deflate", []byte("hello")))
	f.Add("deflate", true, []byte("5\r\nhello\r\n0\r\n\r\n"))
	f.Add("", true, []byte("abc\r\n"))
	f.Add("gzip, br", false, []byte{})
	f.Fuzz(func(t *testing.T, coding string, chunked bool, body []byte) {
		h := http.Header{}
		if coding != "" {
			h.Set("Content-Encoding", coding)
		}
		if chunked {
			h.Set("Transfer-Encoding", "chunked")
		}
		const limit = 1 << 16
		out, orig, err := DecodePayloadLimit(h, body, limit)
		if err != nil && orig != "" {
			t.Fatalf("error %v with original encoding %q", err, orig)
		}
		if orig != "" && len(out) > limit {
			t.Fatalf("%d bytes decoded over the %d limit", len(out), limit)
		}
		if d, ok := Dechunk(body); ok && len(d) > len(body) {
			t.Fatalf("de-chunked body grew")
		}
	})
}

// FuzzParseHTTP parses arbitrary blocks as requests and responses.
func FuzzParseHTTP(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\nbody"), false)
	f.Add([]byte("GET / HTTP/1.1\nHost: x\n\n"), true)
	f.Add([]byte("HTTP/1.1 200\r\n:\r\n"), false)
	f.Fuzz(func(t *testing.T, block []byte, request bool) {
		m, _, err := ParseHTTP(block, request)
		if err != nil {
			return
		}
		if len(m.Body) > len(block) || (request && m.Method == "") || (!request && m.StatusCode < 100) {
			t.Fatalf("%+v", m)
		}
	})
}

// FuzzParseDigest parses arbitrary digest values.
func FuzzParseDigest(f *testing.F) {
	f.Add("sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ")
	f.Add("sha1:2jmj7l5rSw0yVb_vlWAYkK_YBwk=")
	f.Add("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err == nil && len(d.Sum) != d.Hash().Size() {
			t.Fatalf("%s: %d bytes for %s", s, len(d.Sum), d.Algorithm)
		}
	})
}

// mutateWARC changes the which-th Content-Length value of data by delta and, when crcrlf
// is set, turns every CRLF into CR CR LF.
func mutateWARC(data []byte, which uint8, delta int16, crcrlf bool) []byte {
	out := append([]byte(nil), data...)
	key := []byte("\r\nContent-Length: ")
	for i, n := 0, 0; ; n++ {
		j := bytes.Index(out[i:], key)
		if j < 0 {
			break
		}
		s := i + j + len(key)
		e := s
		for e < len(out) && out[e] >= '0' && out[e] <= '9' {
			e++
		}
		if n == int(which) {
			v, _ := strconv.Atoi(string(out[s:e]))
			v = max(0, v+int(delta))
			out = append(out[:s:s], append([]byte(strconv.Itoa(v)), out[e:]...)...)
			break
		}
		i = e
	}
	if crcrlf {
		out = bytes.ReplaceAll(out, []byte("\r\n"), []byte("\r\r\n"))
	}
	return out
}

// FuzzReaderResync reads seed WARCs with one Content-Length off and their line ends
// changed, in memory and streamed: never a panic or a hang, at most one record per 10
// bytes, and both paths agree on the records, their places and block sizes, and on the
// error (nil or not).
func FuzzReaderResync(f *testing.F) {
	for _, name := range []string{"warc/example.warc", "warc/example-trunc.warc", "warc/example-bad-length.warc", "warc/redirect.warc", "warc/example.warc.gz"} {
		b, err := os.ReadFile("../testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(2), int16(10), false)
		f.Add(b, uint8(2), int16(-3), false)
		f.Add(b, uint8(4), int16(200), false)
		f.Add(b, uint8(0), int16(0), true)
	}
	f.Fuzz(func(t *testing.T, seed []byte, which uint8, delta int16, crcrlf bool) {
		data := seed
		if !(len(seed) >= 2 && seed[0] == 0x1f && seed[1] == 0x8b) {
			data = mutateWARC(seed, which, delta, crcrlf)
		}
		p := filepath.Join(t.TempDir(), "f.warc")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		a, _, errA := readRecs(t, p, false, false)
		b, _, errB := readRecs(t, p, false, true)
		if len(a) > len(data)/10+1 {
			t.Fatalf("%d records from %d bytes", len(a), len(data))
		}
		if (errA == nil) != (errB == nil) || len(a) != len(b) {
			t.Fatalf("in memory %d records (%v), streamed %d (%v)", len(a), errA, len(b), errB)
		}
		for i := range a {
			if a[i].Pos != b[i].Pos || a[i].BlockSize != b[i].BlockSize || a[i].Length != b[i].Length {
				t.Fatalf("record %d: in memory %d+%d, streamed %d+%d", i, a[i].Pos, a[i].BlockSize, b[i].Pos, b[i].BlockSize)
			}
			if (a[i].HTTP == nil) != (b[i].HTTP == nil) || (a[i].HTTP != nil && !bytes.Equal(a[i].HTTP.Body, b[i].HTTP.Body)) {
				t.Fatalf("record %d: HTTP messages differ", i)
			}
		}
	})
}
