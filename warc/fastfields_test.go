package warc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gowarcFields is what readHeader took from gowarc before fastFields: the fields of hdr,
// or gowarc's error.
func gowarcFields(t testing.TB, hdr []byte) (Fields, error) {
	t.Helper()
	r, err := NewReader("x", bytes.NewReader(nil), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.hrd.Reset(hdr)
	r.hbr.Reset(r.hrd)
	grec, _, _, err := r.um.Unmarshal(r.hbr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = grec.Close() }()
	var fs Fields
	for _, nv := range *grec.WarcHeader() {
		fs = append(fs, Field{Name: nv.Name, Value: nv.Value})
	}
	return fs, nil
}

// checkFastFields fails when fastFields takes hdr and gives other fields than gowarc, or
// takes a header gowarc refuses; it reports whether fastFields took it.
func checkFastFields(t testing.TB, r *Reader, hdr []byte) bool {
	t.Helper()
	fast, ok := r.fastFields(hdr)
	if !ok {
		return false
	}
	slow, err := gowarcFields(t, hdr)
	if err != nil {
		t.Fatalf("%q: fast path took a header gowarc refuses: %v", hdr, err)
	}
	if fmt.Sprint(fast) != fmt.Sprint(slow) || len(fast) != len(slow) {
		t.Fatalf("%q:\n  fast   %q\n  gowarc %q", hdr, fast, slow)
	}
	return true
}

// corpusHeads are the WARC headers of every record of the plain corpus files.
func corpusHeads(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("../testdata/warc/*.warc")
	if err != nil {
		t.Fatal(err)
	}
	var heads [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for {
			i := bytes.Index(b, []byte("WARC/1."))
			if i < 0 {
				break
			}
			b = b[i:]
			end := bytes.Index(b, []byte("\r\n\r\n"))
			if end < 0 {
				break
			}
			heads = append(heads, bytes.Clone(b[:end+4]))
			b = b[end+4:]
		}
	}
	return heads
}

// TestFastFieldsAsGowarc: the fast path gives gowarc's fields for the corpus's headers
// (and takes them: they are the common shape), and leaves the odd shapes to gowarc, or
// gives the same fields for them.
func TestFastFieldsAsGowarc(t *testing.T) {
	r, _ := NewReader("x", bytes.NewReader(nil), 0, 0)
	heads := corpusHeads(t)
	if len(heads) < 20 {
		t.Fatalf("%d corpus headers", len(heads))
	}
	for _, h := range heads {
		if !checkFastFields(t, r, h) {
			t.Errorf("fast path did not take a corpus header: %q", h)
		}
	}
	const base = "WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 5\r\n"
	for _, c := range []struct {
		extra string
		fast  bool
	}{
		{"warc-record-id: <urn:x>\r\n", true},
		{"WARC-TARGET-URI:http://a/b?c=d:e  \r\n", true},
		{"x-my_field: 1\r\n", true},
		{"X Spaced Name : v\r\n", true},
		{": empty name\r\n", true},
		{"Empty-Value:\r\n", true},
		{"Lone: a\rb\r\n", true},
		{"Dup: 1\r\nDUP: 2\r\n", true},
		{"WARC-Block-Digest: sha-256:abc\r\n", true},
		{"WARC-Block-Digest: SHA1:abc\r\n", true},
		{"WARC-Block-Digest: sha3:abc\r\n", false},
		{"WARC-Payload-Digest: nocolon\r\n", false},
		{"Folded: a\r\n  b\r\n", false},
		{"Tabbed: a\r\n\tb\r\n", false},
		{"Encoded: =?utf-8?q?caf=C3=A9?=\r\n", false},
		{"LF-only: a\n", false},
		{"No colon here\r\n", false},
		{"\rCR-first: a\r\n", false},
	} {
		hdr := []byte(base + c.extra + "\r\n")
		if got := checkFastFields(t, r, hdr); got != c.fast {
			t.Errorf("%q: fast path %v, want %v", c.extra, got, c.fast)
		}
	}
	if checkFastFields(t, r, []byte("WARC/1.0\r\n\r\n")) != true {
		t.Error("a header without fields not taken")
	}
}

// FuzzFastFields: for any field lines, the fast path gives gowarc's fields or leaves the
// header to gowarc.
func FuzzFastFields(f *testing.F) {
	for _, h := range corpusHeads(f) {
		f.Add(h[bytes.IndexByte(h, '\n')+1:])
	}
	f.Add([]byte("A: b\r\n  c\r\n\r\n"))
	f.Add([]byte("WARC-Block-Digest: x:y\r\n\r\n"))
	f.Fuzz(func(t *testing.T, fields []byte) {
		if len(fields) > 64<<10 {
			return
		}
		r, _ := NewReader("x", bytes.NewReader(nil), 0, 0)
		hdr := append([]byte("WARC/1.1\r\n"), fields...)
		if !bytes.HasSuffix(hdr, []byte("\r\n\r\n")) {
			hdr = append(hdr, "\r\n\r\n"...)
		}
		// readHeader stops at the first blank line: only such headers reach fastFields
		if i := bytes.Index(hdr, []byte("\n\r\n")); i+3 != len(hdr) || strings.Contains(string(hdr[:len(hdr)-2]), "\n\n") {
			return
		}
		checkFastFields(t, r, hdr)
	})
}
