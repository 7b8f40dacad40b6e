package warc

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// dechunkStream runs data through a chunkDecoder in pieces of the given sizes (cycled).
func dechunkStream(data []byte, pieces []byte) ([]byte, bool) {
	var out bytes.Buffer
	c := NewChunkDecoder(&out)
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(pieces) > 0 {
			n = int(pieces[i%len(pieces)]) + 1
		}
		n = min(n, len(data))
		if k, err := c.Write(data[:n]); k != n || err != nil {
			return nil, false
		}
		data = data[n:]
	}
	return out.Bytes(), c.OK()
}

func TestChunkDecoderMatchesDechunk(t *testing.T) {
	for _, in := range []string{
		"3\r\nabc\r\n0\r\n\r\n", "3\nabc\n0\n\n", "3\r\nabc\r\n", "0\r\n\r\n", "0\r\n", "0",
		"3\r\nabc\r\n0\r\n\r\nmore", "3\r\nab", "zz\r\nabc\r\n0\r\n\r\n", "abc\n", "", "3\r\nabcX0\r\n\r\n",
		"3;ext=1\r\nabc\r\n0\r\nA: b\r\n\r\n", "3 \t\r\nabc\r\n0\r\n", "3\r \r\nabc", "3 ;x\r\nabc\r\n0\r\n\r\n \r\n",
		"3\r;x\nabc", "03\r\nabc\r\n0\r\nX-T: 1\r\n:bad\r\n\r\n", "3\r\nabc\r", "3\r\nabc\n", "0\r\n\r\r\n",
		"0\r\nA:\r\n\r\n\t\t", "0\r\nnocolon\r\n\r\n", "0\r\n\rA:b\r\n\r\n", "fffffffffffffff\r\nx", "0000000000000001\r\nx",
		"1\r\nx\r\n1\r\ny\r\n0\r\n\r\n", "1\r\nx\r\n\r\n",
	} {
		want, wantOK := Dechunk([]byte(in))
		for _, pieces := range [][]byte{nil, {0}, {1, 2}, {4, 0, 9}} {
			got, ok := dechunkStream([]byte(in), pieces)
			if ok != wantOK || (ok && !bytes.Equal(got, want)) {
				t.Errorf("%q in pieces %v: %q %v, Dechunk gives %q %v", in, pieces, got, ok, want, wantOK)
			}
		}
	}
}

// FuzzChunkDecoder: the streaming de-chunker agrees with Dechunk on every input, however it
// is split into writes.
func FuzzChunkDecoder(f *testing.F) {
	f.Add([]byte("3\r\nabc\r\n0\r\nA: b\r\n\r\n"), []byte{0, 3})
	f.Add([]byte("5;x\nhello\n0\n\n"), []byte{})
	f.Add([]byte("3\r\nab"), []byte{1})
	f.Fuzz(func(t *testing.T, data, pieces []byte) {
		want, wantOK := Dechunk(data)
		got, ok := dechunkStream(data, pieces)
		if ok != wantOK || (ok && !bytes.Equal(got, want)) {
			t.Fatalf("%q: stream %q %v, Dechunk %q %v", data, got, ok, want, wantOK)
		}
	})
}

// TestChunkDecoderRepairs: what a browser accepts beyond RFC 9112's grammar is de-chunked
// and named (the import's warning); framing that breaks after a whole chunk is broken
// (stored as recorded, noted), while a body that never parsed as chunks is not.
func TestChunkDecoderRepairs(t *testing.T) {
	for _, c := range []struct {
		in      string
		ok      bool
		repairs string
		broken  bool
	}{
		{"3\r\nabc\r\n0\r\n\r\n", true, "", false},
		{"3;ext=1\r\nabc\r\n0\r\n\r\n", true, "chunk extensions ignored", false},
		{"3\r\nabc\n0\r\n\r\n", true, "bare LF line ends", false},
		{"3;e\nabc\r\n0\r\n\r\nX-T: v\r\n", true, "chunk extensions ignored, bare LF line ends, trailer fields after the trailer's closing empty line", false},
		{"3\r\nabc\r\n0\r\nX-T", true, "cut inside a trailer field", false},
		{"3\r\nabc\r\nzz\r\n", false, "", true},
		{"3\r\nabcX", false, "", false},
		{"<html>", false, "", false},
	} {
		dc := NewChunkDecoder(io.Discard)
		dc.Write([]byte(c.in))
		var rep string
		if dc.OK() {
			rep = strings.Join(dc.Repairs(), ", ")
		}
		if dc.OK() != c.ok || rep != c.repairs || dc.Broken() != c.broken {
			t.Errorf("%q: ok %v repairs %q broken %v, want %v %q %v", c.in, dc.OK(), rep, dc.Broken(), c.ok, c.repairs, c.broken)
		}
	}
}
