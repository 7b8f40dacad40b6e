package importer

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pab-dev/pab/warc"
)

// FuzzHARConvert: any HAR either converts into a WARC file that pab's WARC reader reads
// whole, a request after each response or revisit, or fails with an error; never a panic.
func FuzzHARConvert(f *testing.F) {
	data, err := os.ReadFile("testdata/handmade.har")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add(`{"log":{"entries":[{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"POST","url":"https://a.test/x?y=1","headers":[{"name":":authority","value":"b.test"}],"bodySize":5},"response":{"status":301,"headers":[{"name":"location","value":"/"}],"content":{"size":0}}}]}}`)
	f.Add(`{"log":{"pages":[{"id":"p"}],"entries":[{"pageref":"p","startedDateTime":"2026-12-01T10:00:00+02:00","request":{"method":"GET","url":"http://a/","postData":{"mimeType":"application/x-www-form-urlencoded","params":[{"name":"a","value":"b"}]}},"response":{"status":200,"content":{"mimeType":"text/html","text":"PGI+","encoding":"base64"}}}]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				panic(fmt.Sprintf("no end after 10 s on %q", s))
			}
		}()
		dir := t.TempDir()
		in := filepath.Join(dir, "in.har")
		if err := os.WriteFile(in, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out.warc")
		rep, err := convertHAR(in, false, out, func(string) {})
		if err != nil {
			return
		}
		rd, err := warc.OpenReader(out)
		if err != nil {
			t.Fatalf("converted WARC: %v", err)
		}
		defer rd.Close()
		n := 0
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("converted WARC record %d: %v", n, err)
			}
			want := "request"
			if n%2 == 0 {
				want = "response"
				if rec.Type == "revisit" {
					want = "revisit"
				}
			}
			if rec.Type != want {
				t.Fatalf("record %d is a %s, want a %s", n, rec.Type, want)
			}
			n++
		}
		if n != 2*rep.Exchanges {
			t.Fatalf("%d records for %d exchanges", n, rep.Exchanges)
		}
	})
}
