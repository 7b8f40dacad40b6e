package recording

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCollapseWarnings: 171 records of one file with the same warning are one line at the
// first, with the count and the last offset; the same message in another file, other
// messages and warnings of no record stay apart, in order.
func TestCollapseWarnings(t *testing.T) {
	var ws []string
	for i := range 171 {
		ws = append(ws, fmt.Sprintf("a.warc at offset %d: HTTP header is not ended by an empty line", 100+i*10))
		if i == 1 {
			ws = append(ws, "a.warc at offset 115 (uncompressed 300): chunked body of https://x.test/ de-chunked leniently: bare LF line ends",
				"b.warc at offset 7: HTTP header is not ended by an empty line",
				"a.warc: 2 records cut to their Content-Length")
		}
	}
	got := collapseWarnings(ws)
	want := []string{
		"a.warc at offset 100: HTTP header is not ended by an empty line (the same in 170 more records of a.warc, the last at offset 1800)",
		"a.warc at offset 115 (uncompressed 300): chunked body of https://x.test/ de-chunked leniently: bare LF line ends",
		"b.warc at offset 7: HTTP header is not ended by an empty line",
		"a.warc: 2 records cut to their Content-Length",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if got := collapseWarnings(ws[:1]); !slices.Equal(got, ws[:1]) {
		t.Errorf("one warning: %q", got)
	}
}

// TestAuditWARCFileFraming: pab audit FILE.warc judges framing as the import does: a
// chunked body with an extension, a bare-LF head ending and a trailer after the last
// chunk's empty line is a warning naming the repairs; HTML longer than its Content-Length
// a warning; chunked framing that breaks off a problem (rule F6); a body cut to its
// Content-Length by rule F1 neither.
func TestAuditWARCFileFraming(t *testing.T) {
	msgs := []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\n\n5;x=1\r\nhello\r\n0\r\n\r\nX-T: v\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\n<html>more</html>",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nnot a size\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nabcd\r\n",
	}
	var w strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&w, "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:6f1c2a8e-1b7d-4c2e-9a10-%012d>\r\nWARC-Date: 2019-05-05T10:00:00Z\r\n"+
			"WARC-Target-URI: https://x.test/%d\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", i, i, len(m), m)
	}
	p := filepath.Join(t.TempDir(), "f.warc")
	if err := os.WriteFile(p, []byte(w.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	probs, warns := AuditWARCFile(p, false)
	var ws []string
	for _, x := range warns {
		ws = append(ws, x.Msg)
	}
	want := []string{
		"chunked body de-chunked as a browser reads it (chunk extensions ignored, trailer fields after the trailer's closing empty line)",
		"HTML payload of 17 bytes is longer than its Content-Length 4: pab import keeps it whole, and replay notes it",
	}
	if !slices.Equal(ws, want) {
		t.Errorf("warnings %q, want %q", ws, want)
	}
	if len(probs) != 1 || !strings.Contains(probs[0].Msg, "framing breaks off") {
		t.Errorf("problems %v, want the broken framing", probs)
	}
}
