package warc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/warctest"
)

// readRecs reads every record of path, in memory or streamed (bodies spooled as an import
// does); it returns the records, the file warnings and the error that stopped it (nil at
// io.EOF). Streamed records get their HTTP body read back from the spool into HTTP.Body.
func readRecs(t testing.TB, path string, strict, streamed bool) ([]*Record, []Warning, error) {
	t.Helper()
	r, err := OpenReader(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = r.Close() }()
	r.Strict = strict
	var sp *Spool
	if streamed {
		if sp, err = NewSpool(t.TempDir(), 1<<30); err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		r.Spool = sp
	}
	var recs []*Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, r.Warnings(), nil
		}
		if err != nil {
			return recs, r.Warnings(), err
		}
		if streamed && rec.HTTP != nil {
			b, err := sp.ReadPrefix(rec.Body, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			rec.HTTP.Body = b
		}
		recs = append(recs, rec)
	}
}

// bothPaths reads path both ways and checks that they agree on records and lengths.
func bothPaths(t *testing.T, path string) ([]*Record, []Warning) {
	t.Helper()
	recs, warns, err := readRecs(t, path, false, false)
	if err != nil {
		t.Fatalf("in memory: %v", err)
	}
	srecs, _, err := readRecs(t, path, false, true)
	if err != nil {
		t.Fatalf("streamed: %v", err)
	}
	if len(recs) != len(srecs) {
		t.Fatalf("in memory %d records, streamed %d", len(recs), len(srecs))
	}
	for i := range recs {
		a, b := recs[i], srecs[i]
		if a.BlockSize != b.BlockSize || a.Pos != b.Pos || a.Length != b.Length {
			t.Errorf("record %d: in memory size %d pos %d len %d, streamed %d %d %d", i, a.BlockSize, a.Pos, a.Length, b.BlockSize, b.Pos, b.Length)
		}
		if (a.HTTP == nil) != (b.HTTP == nil) || (a.HTTP != nil && !bytes.Equal(a.HTTP.Body, b.HTTP.Body)) {
			t.Errorf("record %d: HTTP bodies differ", i)
		}
		if strings.Join(a.Warnings, "|") != strings.Join(b.Warnings, "|") {
			t.Errorf("record %d: warnings differ:\n%q\n%q", i, a.Warnings, b.Warnings)
		}
	}
	return recs, warns
}

func hasFileWarning(warns []Warning, where, sub string) bool {
	for _, w := range warns {
		if w.Where == where && strings.Contains(w.Msg, sub) {
			return true
		}
	}
	return false
}

func noDigestWarnings(t *testing.T, recs []*Record) {
	t.Helper()
	for i, rec := range recs {
		for _, w := range rec.Warnings {
			if strings.Contains(w, "does not match") {
				t.Errorf("record %d: %s", i, w)
			}
		}
	}
}

func TestResyncCorpus(t *testing.T) {
	t.Run("example-trunc", func(t *testing.T) {
		path := "../testdata/warc/example-trunc.warc"
		recs, warns := bothPaths(t, path)
		types := []string{}
		for _, r := range recs {
			types = append(types, r.Type)
		}
		if got := strings.Join(types, ","); got != "warcinfo,warcinfo,response,request" {
			t.Fatalf("records %s", got)
		}
		resp := recs[2]
		if resp.BlockSize != 975 || len(resp.Block) != 975 {
			t.Errorf("response block %d (%d held), want 975", resp.BlockSize, len(resp.Block))
		}
		if d, err := ParseDigest(resp.Get("WARC-Payload-Digest")); err != nil || !d.Matches(resp.HTTP.Body) {
			t.Errorf("payload digest does not verify on the corrected block: %v", err)
		}
		want := "WARC Content-Length 973 is 2 bytes short of the record; block taken as 975 bytes (resynchronised at the next WARC/1.0 line)"
		if !hasFileWarning(warns, "offset 1197", want) {
			t.Errorf("warnings %v", warns)
		}
		if recs[3].Pos != 2566 {
			t.Errorf("request at %d, want 2566", recs[3].Pos)
		}
	})
	t.Run("example-bad-length", func(t *testing.T) {
		recs, warns := bothPaths(t, "../testdata/warc/example-bad-length.warc")
		if len(recs) != 6 {
			t.Fatalf("%d records, want 6", len(recs))
		}
		if recs[2].Type != "response" || recs[2].BlockSize != 975 {
			t.Errorf("response %s block %d, want 975", recs[2].Type, recs[2].BlockSize)
		}
		if !hasFileWarning(warns, "offset 1197", "WARC Content-Length 974 is 1 byte short of the record; block taken as 975 bytes (resynchronised at the next WARC/1.0 line)") {
			t.Errorf("warnings %v", warns)
		}
		if recs[3].Pos != 2566 || recs[4].Type != "revisit" {
			t.Errorf("request at %d, then %s", recs[3].Pos, recs[4].Type)
		}
		// The revisit's Content-Length 371 took in 2 bytes of its end marker: its block
		// digest matches 369 bytes.
		if recs[4].BlockSize != 369 || recs[5].Pos != 4316 {
			t.Errorf("revisit block %d, next record at %d", recs[4].BlockSize, recs[5].Pos)
		}
		if !hasFileWarning(warns, "offset 3370", "WARC Content-Length 371 is 2 bytes too long for the record; block taken as 369 bytes") {
			t.Errorf("warnings %v", warns)
		}
		noDigestWarnings(t, recs)
	})
	for _, name := range []string{"example-trunc.warc", "example-bad-length.warc"} {
		for _, streamed := range []bool{false, true} {
			n, _, err := readRecs(t, "../testdata/warc/"+name, true, streamed)
			if !errors.Is(err, ErrContentLength) || !strings.Contains(err.Error(), "at offset 1197:") || len(n) != 2 {
				t.Errorf("strict %s (streamed %v): %d records, %v", name, streamed, len(n), err)
			}
		}
	}
}

func TestResyncBuilt(t *testing.T) {
	body := strings.Repeat("<p>hello</p>\n", 40)
	good := warctest.Record("request", "http://example.com/a", warctest.Request("/a"), 0, "\r\n")
	next := warctest.Record("request", "http://example.com/b", warctest.Request("/b"), 0, "\r\n")
	for _, c := range []struct {
		name    string
		delta   int
		warning string
	}{
		{"too long by 10", 10, "is 10 bytes too long for the record"},
		{"too long by 200", 200, "is 200 bytes too long for the record"},
		{"too short by 3", -3, "is 3 bytes short of the record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := warctest.Response(body)
			data := good + warctest.Record("response", "http://example.com/a", resp, c.delta, "\r\n") + next
			if c.delta > 0 {
				// The next record must be long enough to be eaten into.
				data += warctest.Record("request", "http://example.com/c", warctest.Request("/c"), 0, "\r\n")
			}
			recs, warns := bothPaths(t, warctest.WriteTemp(t, "built.warc", []byte(data)))
			want := 3
			if c.delta > 0 {
				want = 4
			}
			if len(recs) != want {
				t.Fatalf("%d records, want %d", len(recs), want)
			}
			if recs[1].BlockSize != int64(len(resp)) || string(recs[1].HTTP.Body) != body {
				t.Errorf("response block %d, want %d; body %d bytes", recs[1].BlockSize, len(resp), len(recs[1].HTTP.Body))
			}
			if recs[2].TargetURI != "http://example.com/b" {
				t.Errorf("next record %q", recs[2].TargetURI)
			}
			noDigestWarnings(t, recs)
			if !hasFileWarning(warns, fmt.Sprintf("offset %d", len(good)), c.warning) || len(recs[1].Warnings) == 0 {
				t.Errorf("warnings %v / %v", warns, recs[1].Warnings)
			}
			if _, _, err := readRecs(t, warctest.WriteTemp(t, "s.warc", []byte(data)), true, false); !errors.Is(err, ErrContentLength) {
				t.Errorf("strict: %v", err)
			}
		})
	}
	t.Run("gzip member per record", func(t *testing.T) {
		var buf bytes.Buffer
		resp := warctest.Response(body)
		// The response's Content-Length is 7 bytes too long: its gzip member says where it ends.
		for _, rec := range []string{good, warctest.Record("response", "http://example.com/a", resp, 7, "\r\n"), next} {
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write([]byte(rec))
			_ = zw.Close()
		}
		recs, warns := bothPaths(t, warctest.WriteTemp(t, "built.warc.gz", buf.Bytes()))
		if len(recs) != 3 || recs[1].BlockSize != int64(len(resp)) || recs[1].Offset < 0 {
			t.Fatalf("%d records; response %+v", len(recs), recs[1])
		}
		if !hasFileWarning(warns, fmt.Sprintf("offset %d", recs[1].Offset), "gzip member boundary") {
			t.Errorf("warnings %v", warns)
		}
		noDigestWarnings(t, recs)
	})
	t.Run("CR CR LF", func(t *testing.T) {
		resp := strings.ReplaceAll(warctest.Response(body), "\r\n", "\r\r\n")
		data := warctest.Record("request", "http://example.com/a", strings.ReplaceAll(warctest.Request("/a"), "\r\n", "\r\r\n"), 0, "\r\r\n") +
			warctest.Record("response", "http://example.com/a", resp, 0, "\r\r\n")
		recs, warns := bothPaths(t, warctest.WriteTemp(t, "crcrlf.warc", []byte(data)))
		if len(recs) != 2 || recs[1].HTTP == nil || recs[1].HTTP.StatusCode != 200 || recs[1].HTTP.Header.Get("Content-Type") != "text/html" {
			t.Fatalf("records %d", len(recs))
		}
		if recs[0].HTTP.Host() != "example.com" || recs[1].Date.IsZero() {
			t.Errorf("host %q, date %v", recs[0].HTTP.Host(), recs[1].Date)
		}
		if !hasFileWarning(warns, "offset 0", "CR CR LF") || !hasFileWarning(warns, "offset 0", "CR CR LF CR CR LF") {
			t.Errorf("warnings %v", warns)
		}
	})
	t.Run("beyond the window", func(t *testing.T) {
		junk := strings.Repeat("junk line, no record start here\n", 3000) // 96000 bytes
		data := good + warctest.Record("response", "http://example.com/a", warctest.Response(body), 0, "\r\n")
		data = data[:len(data)-4] + "x" + junk + "\r\n\r\n" + next
		recs, warns := bothPaths(t, warctest.WriteTemp(t, "far.warc", []byte(data)))
		if len(recs) != 3 || recs[2].TargetURI != "http://example.com/b" {
			t.Fatalf("%d records", len(recs))
		}
		if !hasFileWarning(warns, fmt.Sprintf("offset %d", len(good)), "no record starts within 65536 bytes; block taken as") {
			t.Errorf("warnings %v", warns)
		}
	})
	t.Run("unrecoverable", func(t *testing.T) {
		data := good + warctest.Record("response", "http://example.com/a", warctest.Response(body), -20, "\r\n") + strings.Repeat("garbage without a record start\n", 3000)
		for _, streamed := range []bool{false, true} {
			_, _, err := readRecs(t, warctest.WriteTemp(t, "bad.warc", []byte(data)), false, streamed)
			if !errors.Is(err, ErrContentLength) || !strings.Contains(err.Error(), fmt.Sprintf("at offset %d:", len(good))) || !strings.Contains(err.Error(), "no record starts in the") {
				t.Errorf("streamed %v: %v", streamed, err)
			}
		}
	})
}

func TestParseWARCDateOffsets(t *testing.T) {
	for in, want := range map[string]string{
		"2009-03-25T08:43:19-0800":        "2009-03-25T16:43:19Z",
		"2009-03-25T08:43:19.25+0100":     "2009-03-25T07:43:19.25Z",
		"2009-03-25T08:43:19-08:00":       "2009-03-25T16:43:19Z",
		"2020-04-12T18:42:50.696509Z":     "2020-04-12T18:42:50.696509Z",
		"20200412184250":                  "2020-04-12T18:42:50Z",
		"2009-03-25T08:43:19.123456-0000": "2009-03-25T08:43:19.123456Z",
	} {
		got, err := ParseWARCDate(in)
		if err != nil || got.Format(time.RFC3339Nano) != want {
			t.Errorf("%s: %v %v, want %s", in, got.Format(time.RFC3339Nano), err, want)
		}
	}
	// A record dated with an offset gets its date.
	data := strings.Replace(warctest.Record("request", "http://example.com/a", warctest.Request("/a"), 0, "\r\n"), "2020-01-02T03:04:05Z", "2020-01-02T03:04:05-0800", 1)
	recs, _ := bothPaths(t, warctest.WriteTemp(t, "date.warc", []byte(data)))
	if len(recs) != 1 || !recs[0].Date.Equal(time.Date(2020, 1, 2, 11, 4, 5, 0, time.UTC)) || len(recs[0].Warnings) != 0 {
		t.Errorf("date %v, warnings %v", recs[0].Date, recs[0].Warnings)
	}
}

func TestParseHTTPCRCRLF(t *testing.T) {
	m, warns, err := ParseHTTP([]byte("HTTP/1.1 404 Not Found\r\r\nServer: x\r\r\n\r\r\nbody"), false)
	if err != nil || m.Reason != "Not Found" || m.Header.Get("Server") != "x" || string(m.Body) != "body" || len(warns) != 0 {
		t.Errorf("%+v %v %v", m, warns, err)
	}
}
