package importer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pab-dev/pab/importer/audit"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

// warcResponses writes a WARC 1.0 file of response records, one per URL → HTTP message.
func warcResponses(t *testing.T, msgs [][2]string) string {
	t.Helper()
	var w bytes.Buffer
	for i, m := range msgs {
		fmt.Fprintf(&w, "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:6f1c2a8e-1b7d-4c2e-9a10-%012d>\r\n"+
			"WARC-Date: 2019-05-05T10:%02d:%02dZ\r\nWARC-Target-URI: %s\r\nContent-Type: application/http; msgtype=response\r\n"+
			"Content-Length: %d\r\n\r\n%s\r\n\r\n", i+1, i/60, i%60, m[0], len(m[1]), m[1])
	}
	p := filepath.Join(t.TempDir(), "framing.warc")
	if err := os.WriteFile(p, w.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportFramingReplays: bodies a browser of the time accepted are replayed as it showed
// them. A chunked page with a chunk extension, a bare-LF head ending and a trailer after
// the last chunk's empty line is served decoded, with the decoded Content-Length, and the
// import says what it repaired. A chunked body whose framing breaks off after a chunk is
// served as recorded, with a note in the replay log, a warning of the import and a
// problem of pab audit. An HTML payload longer than its Content-Length is served whole
// with a note. The 40 identical head warnings of other pages are one line.
func TestImportFramingReplays(t *testing.T) {
	repo := testRepo(t)
	page := "<!doctype html><html><head><title>Jobs</title></head><body>" + strings.Repeat("<p>a job</p>", 300) + "</body></html>"
	half := len(page) / 2
	chunked := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nTransfer-Encoding: chunked\n\n"+
		"%x;name=\"first\"\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\nX-Served-By: cache-7\r\n", half, page[:half], len(page)-half, page[half:])
	broken := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nnot a chunk size\r\n"
	dom := "<html><body>the DOM as the extension saw it, longer than what was sent</body></html>"
	longer := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 20\r\n\r\n%s", dom)
	msgs := [][2]string{
		{"https://jobs.example/listing", chunked},
		{"https://jobs.example/feed.txt", broken},
		{"https://jobs.example/dom", longer},
	}
	for i := range 40 {
		// head not ended by an empty line: one warning each, collapsed to one line
		msgs = append(msgs, [2]string{fmt.Sprintf("https://jobs.example/p%d", i), "HTTP/1.1 204 No Content\r\nX-A: b\r\n"})
	}
	in := warcResponses(t, msgs)
	var out, errOut bytes.Buffer
	if _, err := Run(context.Background(), Options{Repo: repo, TaskID: "framing", Inputs: []string{in}, Command: "pab import",
		Out: &out, ErrOut: &errOut}); err != nil {
		t.Fatalf("import: %v\n%s%s", err, out.String(), errOut.String())
	}
	warns := errOut.String()
	for _, want := range []string{
		"chunked body of https://jobs.example/listing de-chunked as a browser reads it (chunk extensions ignored, trailer fields after the trailer's closing empty line); stored the " + fmt.Sprint(len(page)) + " decoded bytes",
		"body of https://jobs.example/feed.txt says chunked and starts as chunks, but its framing breaks off",
		"HTML payload of https://jobs.example/dom is " + fmt.Sprint(len(dom)) + " bytes, longer than its recorded Content-Length 20",
		"(the same in 39 more records of " + in + ", the last at offset ",
	} {
		if !strings.Contains(warns, want) {
			t.Errorf("import warnings lack %q:\n%s", want, warns)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^.*not ended by an empty line.*$`).FindAllString(warns, -1)); n != 1 {
		t.Errorf("%d lines of the head warning, want 1:\n%s", n, warns)
	}

	client, stop := serveTask(t, repo, "framing")
	get := func(u string) (*http.Response, string) {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// the proxy is plain HTTP here; https URLs go through CONNECT, which this client does
	// not trust: ask for them as plain-HTTP proxy requests of the same URL
	resp, body := get("http://jobs.example/listing")
	if resp.StatusCode != 200 || body != page || resp.ContentLength != int64(len(page)) {
		t.Errorf("chunked page: %d, %d bytes (Content-Length %d), want the %d decoded bytes", resp.StatusCode, len(body), resp.ContentLength, len(page))
	}
	if _, body := get("http://jobs.example/feed.txt"); body != "5\r\nhello\r\nnot a chunk size\r\n" {
		t.Errorf("broken framing served %q, want it as recorded", body)
	}
	if _, body := get("http://jobs.example/dom"); body != dom {
		t.Errorf("longer HTML served %q, want all of it", body)
	}
	lines, err := replay.ReadLog(strings.NewReader(stop()), "log")
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]string{}
	for _, l := range lines {
		notes[l.URL] = l.Note
	}
	if n := notes["http://jobs.example/listing"]; n != "" {
		t.Errorf("repaired page logged with note %q", n)
	}
	if n := notes["http://jobs.example/feed.txt"]; !strings.Contains(n, recording.NoteChunkedKept) {
		t.Errorf("broken framing logged with note %q, want %q", n, recording.NoteChunkedKept)
	}
	if n := notes["http://jobs.example/dom"]; !strings.Contains(n, recording.NoteLongerThanLength+": "+fmt.Sprint(len(dom))+" bytes, Content-Length 20") {
		t.Errorf("longer HTML logged with note %q", n)
	}

	_, probs, err := audit.Audit(repo, "framing")
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 1 || !probs[0].Kept || !strings.Contains(probs[0].Msg, recording.NoteChunkedKept) {
		t.Errorf("audit problems %v, want the one of the kept framing", probs)
	}
}
