package recording

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWARCProtocolRoundTrip: WARC-Protocol (WARC 1.1 section 5.15) of an input response and
// its request is kept on import, written on both records, and survives a merge, a WARC
// export read back, and a WACZ export read back.
func TestWARCProtocolRoundTrip(t *testing.T) {
	rec := func(typ, id, extra, block string) string {
		return "WARC/1.1\r\nWARC-Type: " + typ + "\r\nWARC-Record-ID: <urn:uuid:11111111-0000-4000-8000-00000000000" + id + ">\r\n" +
			"WARC-Date: 2024-05-01T10:00:00Z\r\nWARC-Target-URI: https://proto.test/\r\n" + extra +
			"Content-Type: application/http; msgtype=" + typ + "\r\nContent-Length: " + strconv.Itoa(len(block)) + "\r\n\r\n" + block + "\r\n\r\n"
	}
	in := rec("response", "1", "WARC-Protocol: h2\r\nWARC-Protocol: tls/1.3\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello") +
		rec("request", "2", "WARC-Protocol: H2\r\nWARC-Concurrent-To: <urn:uuid:11111111-0000-4000-8000-000000000001>\r\n",
			"GET / HTTP/1.1\r\nHost: proto.test\r\n\r\n")
	src := filepath.Join(t.TempDir(), "in.warc")
	if err := os.WriteFile(src, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "WARC-Protocol: h2\r\nWARC-Protocol: tls/1.3\r\n"
	check := func(what, dir string) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, WARCFile))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(data, []byte(want)); n != 2 {
			t.Errorf("%s: %d records carry %q, want 2 (response and request):\n%s", what, n, want, data)
		}
		if probs := Audit(dir); len(probs) != 0 {
			t.Errorf("%s: audit: %v", what, probs)
		}
	}
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := ImportWARCs([]string{src}, dir, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	check("import", dir)
	merged := filepath.Join(t.TempDir(), "m")
	if err := Merge("", dir, merged, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	check("merge", merged)
	b, err := OpenBundle(merged)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, name := range []string{"out.warc", "out.warc.gz", "out.wacz"} {
		p := filepath.Join(t.TempDir(), name)
		if strings.HasSuffix(name, ".wacz") {
			err = ExportWACZ(b, p)
		} else {
			err = ExportWARCFile(b, p)
		}
		if err != nil {
			t.Fatal(err)
		}
		back := filepath.Join(t.TempDir(), "back")
		if _, err := ImportWARCs([]string{p}, back, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		check("export "+name+" imported again", back)
	}
}
