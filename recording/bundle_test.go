package recording

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// handExchange is one exchange of a bundle built byte by byte in a test, independent of
// the bundle writer.
type handExchange struct {
	id, url    string
	head       string // HTTP status line and fields, CRLF separated, without the empty line
	body       string
	revisitOf  string
	unresolved bool
	reqBody    []byte
}

// handRecord renders one uncompressed WARC 1.1 record.
func handRecord(typ, id, uri string, block []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "WARC/1.1\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:%s>\r\nWARC-Target-URI: %s\r\n", typ, id, uri)
	fmt.Fprintf(&b, "WARC-Date: 2024-01-02T03:04:05.678Z\r\nContent-Type: application/http;msgtype=%s\r\n", map[bool]string{true: "request", false: "response"}[typ == "request"])
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(block))
	b.Write(block)
	b.WriteString("\r\n\r\n")
	return b.Bytes()
}

// writeHandBundle writes a complete bundle for xs into dir and returns its entries.
func writeHandBundle(t testing.TB, dir string, xs []handExchange) []Entry {
	t.Helper()
	var warcBuf bytes.Buffer
	var entries []Entry
	for i, x := range xs {
		typ := "response"
		block := x.head + "\r\n\r\n" + x.body
		if x.revisitOf != "" || x.unresolved {
			typ = "revisit"
			block = x.head + "\r\n\r\n"
		}
		e := Entry{ID: x.id, TS: "2024-01-02T03:04:05.678Z", Method: "GET", URL: x.url, Status: 200,
			Size: int64(len(x.body)), RevisitOf: x.revisitOf, Unresolved: x.unresolved, ResourceType: "document"}
		if x.reqBody != nil {
			e.Method = "POST"
			e.ReqBody = base64.StdEncoding.EncodeToString(x.reqBody)
		}
		if x.revisitOf != "" {
			for _, o := range xs {
				if o.id == x.revisitOf {
					e.Size = int64(len(o.body))
				}
			}
		}
		e.RespOffset = int64(warcBuf.Len())
		warcBuf.Write(handRecord(typ, fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i), x.url, []byte(block)))
		e.RespLength = int64(warcBuf.Len()) - e.RespOffset
		e.ReqOffset = int64(warcBuf.Len())
		req := fmt.Sprintf("%s / HTTP/1.1\r\nHost: example.test\r\n\r\n%s", e.Method, x.reqBody)
		warcBuf.Write(handRecord("request", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+1), x.url, []byte(req)))
		e.ReqLength = int64(warcBuf.Len()) - e.ReqOffset
		entries = append(entries, e)
	}
	var entriesBuf bytes.Buffer
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		entriesBuf.Write(line)
		entriesBuf.WriteByte('\n')
	}
	manifest := `{"task_id":"hand","captured_from":"2024-01-02T03:04:05.678Z","captured_to":"2024-01-02T03:04:06.000Z","not_found":{"example.test":"https://example.test/nope"}}` + "\n"
	pages := `{"url":"https://example.test/","ts":"2024-01-02T03:04:05.678Z","fetched":"GET","title":"Home"}` + "\n"
	for name, data := range map[string][]byte{
		ManifestFile: []byte(manifest),
		WARCFile:     warcBuf.Bytes(),
		EntriesFile:  entriesBuf.Bytes(),
		PagesFile:    []byte(pages),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return entries
}

var handBigBody = strings.Repeat("function f(){return 42}\n", 100)

func handExchanges() []handExchange {
	return []handExchange{
		{id: "e000001", url: "https://example.test/",
			head: "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nSet-Cookie: a=REDACTED\r\nSet-Cookie: b=REDACTED\r\nP3P : CP=x\r\nX-Folded: one\r\n two\r\nX-Legacy: first\r\nsecond",
			body: "<html><title>Home</title>hello</html>"},
		{id: "e000002", url: "https://example.test/app.js",
			head: "HTTP/2 200\r\nContent-Type: text/javascript\r\nContent-Length: 2400",
			body: handBigBody},
		{id: "e000003", url: "https://example.test/copy.js", revisitOf: "e000002",
			head: "HTTP/1.1 203 Copied\r\nContent-Type: text/javascript\r\nX-Copy: yes"},
		{id: "e000004", url: "https://example.test/gone.js", unresolved: true,
			head: "HTTP/1.1 200 OK\r\nContent-Type: text/javascript"},
		{id: "e000005", url: "https://example.test/form", reqBody: []byte("q=books&x=\x00\xff"),
			head: "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain", body: ""},
	}
}

func openHandBundle(t *testing.T) (*Bundle, []Entry) {
	t.Helper()
	dir := t.TempDir()
	want := writeHandBundle(t, dir, handExchanges())
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, want
}

func TestOpenBundleReadsIndexes(t *testing.T) {
	b, want := openHandBundle(t)
	if b.Manifest.TaskID != "hand" || b.Manifest.NotFound["example.test"] != "https://example.test/nope" {
		t.Errorf("manifest = %+v", b.Manifest)
	}
	if len(b.Entries) != len(want) {
		t.Fatalf("got %d entries, want %d", len(b.Entries), len(want))
	}
	for i := range want {
		if b.Entries[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, b.Entries[i], want[i])
		}
	}
	if len(b.Pages) != 1 || b.Pages[0].Title != "Home" || b.Pages[0].Fetched != "GET" {
		t.Errorf("pages = %+v", b.Pages)
	}
	if e := b.ByID("e000002"); e == nil || e.URL != "https://example.test/app.js" {
		t.Errorf("ByID(e000002) = %+v", e)
	}
	if e := b.ByID("nope"); e != nil {
		t.Errorf("ByID(nope) = %+v, want nil", e)
	}
}

func readAllString(t *testing.T, r io.Reader) string {
	t.Helper()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestResponse(t *testing.T) {
	b, _ := openHandBundle(t)
	r, err := b.Response(b.ByID("e000001"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 || r.Proto != "HTTP/1.1" {
		t.Errorf("status %d %q", r.Status, r.Proto)
	}
	if got := r.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "a=REDACTED" || got[1] != "b=REDACTED" {
		t.Errorf("Set-Cookie = %q", got)
	}
	if got := r.Header.Get("P3p"); got != "CP=x" {
		t.Errorf("P3P = %q", got)
	}
	if got := r.Header.Get("X-Folded"); got != "one two" {
		t.Errorf("X-Folded = %q", got)
	}
	if got := r.Header.Values("X-Legacy"); len(got) != 2 || got[1] != "second" {
		t.Errorf("X-Legacy = %q", got)
	}
	if body := readAllString(t, r.Body); body != "<html><title>Home</title>hello</html>" || r.Size != int64(len(body)) {
		t.Errorf("body %q size %d", body, r.Size)
	}
	if r.RecordID != "<urn:uuid:00000000-0000-0000-0000-000000000000>" {
		t.Errorf("record id %q", r.RecordID)
	}
	if _, ok := r.Body.(*io.SectionReader); !ok {
		t.Errorf("body is %T, want a section of the archive", r.Body)
	}

	r, err = b.Response(b.ByID("e000002"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Proto != "HTTP/2" || r.Status != 200 || readAllString(t, r.Body) != handBigBody {
		t.Errorf("e000002: %q %d", r.Proto, r.Status)
	}

	r, err = b.Response(b.ByID("e000005"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 404 || r.Size != 0 || readAllString(t, r.Body) != "" {
		t.Errorf("e000005: %d size %d", r.Status, r.Size)
	}
}

func TestResponseRevisit(t *testing.T) {
	b, _ := openHandBundle(t)
	r, err := b.Response(b.ByID("e000003"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 203 || r.Header.Get("X-Copy") != "yes" {
		t.Errorf("revisit head: %d %v", r.Status, r.Header)
	}
	if body := readAllString(t, r.Body); body != handBigBody || r.Size != int64(len(handBigBody)) {
		t.Errorf("revisit body is %d bytes, size %d; want the original's %d", len(body), r.Size, len(handBigBody))
	}
	if r.RecordID != "<urn:uuid:00000000-0000-0000-0000-000000000004>" {
		t.Errorf("record id %q, want the revisit record's", r.RecordID)
	}

	_, err = b.Response(b.ByID("e000004"))
	if !errors.Is(err, ErrUnresolvedRevisit) {
		t.Errorf("unresolved: err = %v", err)
	}
	dangling := *b.ByID("e000003")
	dangling.RevisitOf = "e999999"
	if _, err := b.Response(&dangling); !errors.Is(err, ErrUnresolvedRevisit) || !strings.Contains(err.Error(), "e999999") {
		t.Errorf("dangling revisitOf: err = %v", err)
	}
}

func TestResponseChecksRecordAgainstIndex(t *testing.T) {
	b, _ := openHandBundle(t)
	cases := []struct {
		name string
		edit func(e *Entry)
		want string
	}{
		{"length off by one", func(e *Entry) { e.RespLength-- }, "entries.jsonl says"},
		{"offset into the middle", func(e *Entry) { e.RespOffset += 10; e.RespLength -= 10 }, "WARC version"},
		{"request record", func(e *Entry) { e.RespOffset, e.RespLength = e.ReqOffset, e.ReqLength }, `WARC-Type is "request"`},
		{"revisit expected", func(e *Entry) { e.RevisitOf = "e000002" }, `WARC-Type is "response", want "revisit"`},
		{"wrong size", func(e *Entry) { e.Size++ }, "payload is 37 bytes, entries.jsonl says 38"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := *b.ByID("e000001")
			c.edit(&e)
			_, err := b.Response(&e)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "data.warc at offset") {
				t.Errorf("err = %v, want one containing %q and the offset", err, c.want)
			}
		})
	}
}

func TestRequestBody(t *testing.T) {
	b, _ := openHandBundle(t)
	got, err := b.RequestBody(b.ByID("e000005"))
	if err != nil || string(got) != "q=books&x=\x00\xff" {
		t.Errorf("RequestBody = %q, %v", got, err)
	}
	if got, err := b.RequestBody(b.ByID("e000001")); got != nil || err != nil {
		t.Errorf("bodiless: %q, %v", got, err)
	}
	bad := Entry{ID: "x", ReqBody: "!!!"}
	if _, err := b.RequestBody(&bad); err == nil || !strings.Contains(err.Error(), "entry x") {
		t.Errorf("bad base64: err = %v", err)
	}
}

func TestResponseConcurrent(t *testing.T) {
	b, _ := openHandBundle(t)
	want := map[string]string{"e000001": "<html><title>Home</title>hello</html>", "e000002": handBigBody, "e000003": handBigBody}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				for _, id := range []string{"e000001", "e000002", "e000003"} {
					r, err := b.Response(b.ByID(id))
					if err != nil {
						errs <- err
						return
					}
					// read in small pieces to interleave with other goroutines
					var got bytes.Buffer
					buf := make([]byte, 7)
					if _, err := io.CopyBuffer(&got, struct{ io.Reader }{r.Body}, buf); err != nil {
						errs <- err
						return
					}
					if got.String() != want[id] {
						errs <- fmt.Errorf("%s: body differs", id)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOpenBundleRejects(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
	}{
		{"manifest unknown field", writeFile(ManifestFile, `{"task_id":"x","start_url":"https://a/","recorder":"me"}`), `manifest.json: json: unknown field "recorder"`},
		{"manifest start_url not a string", writeFile(ManifestFile, `{"task_id":"x","start_url":1}`), `manifest.json: at byte`},
		{"manifest trailing data", writeFile(ManifestFile, `{"task_id":"x"} {}`), "manifest.json: at byte 15: data after the JSON object"},
		{"manifest syntax", writeFile(ManifestFile, `{"task_id":`), "manifest.json"},
		{"manifest null", writeFile(ManifestFile, `null`), "manifest.json: not a JSON object"},
		{"manifest array", writeFile(ManifestFile, `[1]`), "manifest.json: at byte"},
		{"manifest bad time", writeFile(ManifestFile, `{"captured_from":"yesterday"}`), "captured_from"},
		{"manifest too large", writeFile(ManifestFile, `{"task_id":"`+strings.Repeat("x", MaxManifestBytes)+`"}`), "larger than"},
		{"manifest missing", removeFile(ManifestFile), "manifest.json"},
		{"entries bad line", appendFile(EntriesFile, "{not json}\n"), "entries.jsonl line 6: at byte 2"},
		{"entries unknown field", appendFile(EntriesFile, `{"id":"e9","method":"GET","url":"u","status":200,"respOffset":0,"respLength":10,"key":"k"}`+"\n"), `entries.jsonl line 6: json: unknown field "key"`},
		{"entries duplicate id", appendFile(EntriesFile, `{"id":"e000001","method":"GET","url":"u","status":200,"respOffset":0,"respLength":10}`+"\n"), `entries.jsonl line 6: id "e000001" already on line 1`},
		{"entries offset past end", appendFile(EntriesFile, `{"id":"e9","method":"GET","url":"u","status":200,"respOffset":999999,"respLength":10}`+"\n"), "entries.jsonl line 6: respOffset 999999 + respLength 10 is past the end"},
		{"entries negative offset", appendFile(EntriesFile, `{"id":"e9","method":"GET","url":"u","status":200,"respOffset":-1,"respLength":10}`+"\n"), "line 6: respOffset -1"},
		{"entries overflow", appendFile(EntriesFile, `{"id":"e9","method":"GET","url":"u","status":200,"respOffset":9223372036854775807,"respLength":9223372036854775807}`+"\n"), "past the end"},
		{"entries zero length", appendFile(EntriesFile, `{"id":"e9","method":"GET","url":"u","status":200,"respOffset":0,"respLength":0}`+"\n"), "not a record span"},
		{"entries bad status", appendFile(EntriesFile, `{"id":"e9","method":"GET","url":"u","status":0,"respOffset":0,"respLength":10}`+"\n"), "status 0"},
		{"entries no id", appendFile(EntriesFile, `{"method":"GET","url":"u","status":200,"respOffset":0,"respLength":10}`+"\n"), "line 6: no id"},
		{"pages line too long", appendFile(PagesFile, `{"url":"`+strings.Repeat("x", MaxPageLineBytes)+`"}`+"\n"), "pages.jsonl line 2: longer than"},
		{"pages no url", appendFile(PagesFile, `{"ts":"x"}`+"\n"), "pages.jsonl line 2: no url"},
		{"pages missing", removeFile(PagesFile), "pages.jsonl"},
		{"warc is a directory", func(t *testing.T, dir string) {
			removeFile(WARCFile)(t, dir)
			if err := os.Mkdir(filepath.Join(dir, WARCFile), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "data.warc: not a regular file"},
		{"warc symlink out of the bundle", func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "data.warc")
			if err := os.Rename(filepath.Join(dir, WARCFile), outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, WARCFile)); err != nil {
				t.Fatal(err)
			}
		}, "data.warc"},
		{"archive dir symlink out of the bundle", func(t *testing.T, dir string) {
			outside := t.TempDir()
			if err := os.Rename(filepath.Join(dir, "archive"), filepath.Join(outside, "archive")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, "archive"), filepath.Join(dir, "archive")); err != nil {
				t.Fatal(err)
			}
		}, "data.warc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeHandBundle(t, dir, handExchanges())
			c.edit(t, dir)
			b, err := OpenBundle(dir)
			if err == nil {
				b.Close()
				t.Fatalf("OpenBundle succeeded, want an error containing %q", c.want)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v\nwant one line containing %q", err, c.want)
			}
		})
	}
}

func TestOpenBundleSymlinkInsideIsAllowed(t *testing.T) {
	dir := t.TempDir()
	writeHandBundle(t, dir, handExchanges())
	if err := os.Rename(filepath.Join(dir, WARCFile), filepath.Join(dir, "archive", "real.warc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.warc", filepath.Join(dir, WARCFile)); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

func writeFile(name, data string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func appendFile(name, data string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(data); err != nil {
			t.Fatal(err)
		}
	}
}

func removeFile(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzEntries feeds arbitrary bytes to the entries.jsonl, pages.jsonl and manifest.json
// readers: they must return entries that pass their own checks, or an error, never panic.
func FuzzEntries(f *testing.F) {
	f.Add([]byte(`{"id":"e1","method":"GET","url":"https://a/","status":200,"size":3,"respOffset":0,"respLength":100,"reqOffset":100,"reqLength":50}` + "\n"))
	f.Add([]byte(`{"id":"e1","method":"GET","url":"u","status":200,"respOffset":0,"respLength":10}` + "\n" + `{"id":"e1"}`))
	f.Add([]byte(`{"task_id":"t","captured_from":"2024-01-02T03:04:05.678Z","not_found":{"a":"b"}}`))
	f.Add([]byte(`{"url":"https://a/","ts":"2024-01-02T03:04:05Z","fetched":"none","note":"not-found-probe"}` + "\r\n\r\n{}"))
	f.Add([]byte("\xff\xfe{\"id\":1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const warcSize = 1000
		entries, err := readEntries(bytes.NewReader(data), "entries.jsonl", warcSize)
		if err == nil {
			seen := map[string]bool{}
			for _, e := range entries {
				if e.ID == "" || seen[e.ID] || e.RespOffset < 0 || e.RespLength <= 0 || e.RespOffset+e.RespLength > warcSize {
					t.Fatalf("accepted bad entry %+v", e)
				}
				seen[e.ID] = true
			}
		} else if strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
		if _, err := readPages(bytes.NewReader(data), "pages.jsonl"); err != nil && !strings.HasPrefix(err.Error(), "read pages.jsonl line ") {
			t.Fatalf("error without line: %v", err)
		}
		_, _ = readManifest(bytes.NewReader(data), "manifest.json")
	})
}

// FuzzResponse parses arbitrary bytes as the one record of data.warc: Response must return
// an error, or a body of exactly Size bytes inside the record.
func FuzzResponse(f *testing.F) {
	f.Add(handRecord("response", "x", "https://a/", []byte("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody")), int64(4), "")
	f.Add(handRecord("revisit", "x", "https://a/", []byte("HTTP/1.1 304 OK\r\n\r\n")), int64(0), "e0")
	f.Add([]byte("WARC/1.1\nContent-Length: 0\nWARC-Type: response\n\n\r\n\r\n"), int64(0), "")
	f.Add([]byte("WARC/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n\r\n\r\n"), int64(0), "")
	dir := f.TempDir()
	path := filepath.Join(dir, "data.warc")
	f.Fuzz(func(t *testing.T, data []byte, size int64, revisitOf string) {
		if len(data) == 0 {
			return
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		b := &Bundle{Dir: dir, warc: file, warcSize: int64(len(data)), Entries: []Entry{
			{ID: "e0", RespOffset: 0, RespLength: int64(len(data)), Size: size},
			{ID: "e1", RespOffset: 0, RespLength: int64(len(data)), Size: size, RevisitOf: revisitOf},
		}}
		b.byID = map[string]int{"e0": 0, "e1": 1}
		for i := range b.Entries {
			r, err := b.Response(&b.Entries[i])
			if err != nil {
				continue
			}
			body, err := io.ReadAll(r.Body)
			if err != nil || int64(len(body)) != r.Size || r.Size > int64(len(data)) {
				t.Fatalf("body %d bytes (%v), size %d, record %d bytes", len(body), err, r.Size, len(data))
			}
		}
	})
}

func TestBundleWriterRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	w, err := NewBundleWriter(dir, Manifest{TaskID: "rt", Locale: "en-US"})
	if err != nil {
		t.Fatal(err)
	}
	date := time.Date(2024, 5, 6, 7, 8, 9, 10e6, time.UTC)
	shared := bytes.Repeat([]byte("shared payload "), 100) // 1500 bytes: stored once
	xs := []Exchange{
		{URL: "https://shop.test/", Date: date, Status: 200, Proto: "HTTP/2",
			ReqHeader:  http.Header{"Cookie": {"sid=1"}, "Accept": {"text/html"}},
			RespHeader: http.Header{"Content-Type": {"text/html"}, "Set-Cookie": {"sid=secret; Path=/", "b=2"}, "Content-Encoding": {"gzip"}},
			Body:       []byte("<title>Shop</title>"), OrigEncoding: "gzip", ResourceType: "document"},
		{URL: "https://shop.test/a.js", Date: date.Add(time.Second), Status: 200,
			RespHeader: http.Header{"Content-Type": {"text/javascript"}}, Body: shared},
		{URL: "https://shop.test/b.js", Date: date.Add(2 * time.Second), Status: 200,
			RespHeader: http.Header{"Content-Type": {"text/javascript"}, "X-B": {"1"}}, Body: shared},
		{URL: "https://shop.test/gone.js", Date: date.Add(3 * time.Second), Status: 200,
			RespHeader: http.Header{"Content-Type": {"text/javascript"}}, Unresolved: &UnresolvedRevisit{TargetURI: "https://shop.test/old.js"}},
		{Method: "POST", URL: "https://shop.test/cart", Date: date.Add(4 * time.Second), Status: 302,
			ReqHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, ReqBody: []byte("sku=1&qty=2"),
			RespHeader: http.Header{"Location": {"/cart"}}},
	}
	for _, x := range xs {
		if _, err := w.Add(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddPage(Page{URL: "https://shop.test/", TS: FormatTime(date), Fetched: "GET", Title: "Shop"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, dir string) {
		b, err := OpenBundle(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if len(b.Entries) != len(xs) || len(b.Pages) != 1 || b.Manifest.CapturedFrom != FormatTime(date) {
			t.Fatalf("%d entries, %d pages, manifest %+v", len(b.Entries), len(b.Pages), b.Manifest)
		}
		for i, x := range xs {
			e := &b.Entries[i]
			r, err := b.Response(e)
			if x.Unresolved != nil {
				if !errors.Is(err, ErrUnresolvedRevisit) {
					t.Errorf("%s: err = %v, want unresolved", e.ID, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", e.ID, err)
			}
			body := readAllString(t, r.Body)
			if r.Status != x.Status || body != string(x.Body) || r.Header.Get("Content-Length") != fmt.Sprint(len(x.Body)) {
				t.Errorf("%s: status %d, body %q, Content-Length %q", e.ID, r.Status, clipForTest(body), r.Header.Get("Content-Length"))
			}
			if sum := sha256.Sum256([]byte(body)); hex.EncodeToString(sum[:]) != e.Digest {
				t.Errorf("%s: body digest differs from entries.jsonl", e.ID)
			}
			if got, err := b.RequestBody(e); err != nil || string(got) != string(x.ReqBody) {
				t.Errorf("%s: request body %q, %v", e.ID, got, err)
			}
		}
		r, _ := b.Response(&b.Entries[0])
		if got := r.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "REDACTED" || r.Header.Get("Content-Encoding") != "" {
			t.Errorf("first response header %v", r.Header)
		}
		if e := b.Entries[2]; e.RevisitOf != b.Entries[1].ID {
			t.Errorf("identical payload not stored as a revisit: %+v", e)
		}
		if r, _ := b.Response(&b.Entries[2]); r == nil || r.Header.Get("X-B") != "1" {
			t.Errorf("revisit header not from the revisit record")
		}
	}
	check(t, dir)

	rec := filepath.Join(t.TempDir(), "recording")
	if err := Pack(dir, rec); err != nil {
		t.Fatal(err)
	}
	unpacked := filepath.Join(t.TempDir(), "unpacked")
	if err := Unpack(rec, unpacked); err != nil {
		t.Fatal(err)
	}
	check(t, unpacked)
}

func clipForTest(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// TestImportedCorpusReadsBack imports every corpus WARC in testdata/ that the importer
// accepts and reads every response back through Bundle.Response: each body must hash to
// the entry's digest and have its size.
func TestImportedCorpusReadsBack(t *testing.T) {
	paths, _ := filepath.Glob("../testdata/sites/*.warc*")
	more, _ := filepath.Glob("../testdata/warc/*.warc*")
	paths = append(paths, more...)
	if len(paths) == 0 {
		t.Fatal("no corpus files in testdata/ (they are committed)")
	}
	// files with no HTTP response record at all, which the importer refuses by design
	refused := map[string]string{
		"example-digest.warc":                 "4 unpaired-request",
		"example-space-in-target-uri.warc.gz": "1 resource, 1 warcinfo",
		"gzip_extra_sl.warc.gz":               "1 warcinfo",
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			if fi, err := os.Stat(p); err == nil && fi.Size() > 1<<20 && testing.Short() {
				t.Skip("large file; skipped with -short")
			}
			dir := filepath.Join(t.TempDir(), "b")
			_, err := ImportWARCs([]string{p}, dir, ImportOptions{TaskID: "corpus"})
			if why, ok := refused[filepath.Base(p)]; ok {
				if err == nil || !strings.Contains(err.Error(), "no HTTP response records") || !strings.Contains(err.Error(), why) {
					t.Errorf("import: %v; want it refused for holding no HTTP response (%s)", err, why)
				}
				return
			}
			if err != nil {
				t.Fatalf("import refused it: %v", err)
			}
			b, err := OpenBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var read, unresolved int
			for i := range b.Entries {
				e := &b.Entries[i]
				r, err := b.Response(e)
				if errors.Is(err, ErrUnresolvedRevisit) {
					unresolved++
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				h := sha256.New()
				n, err := io.Copy(h, r.Body)
				if err != nil || n != e.Size || hex.EncodeToString(h.Sum(nil)) != e.Digest || r.Status != e.Status {
					t.Errorf("%s %s: read %d bytes (%v), size %d, status %d/%d, digest match %v", e.ID, e.URL, n, err, e.Size, r.Status, e.Status, hex.EncodeToString(h.Sum(nil)) == e.Digest)
				}
				read++
			}
			t.Logf("%d responses read back, %d unresolved revisits", read, unresolved)
		})
	}
}
