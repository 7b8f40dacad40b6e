package har

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entryJSON is one well-formed entry whose URL ends in i.
func entryJSON(i int, text string) string {
	return fmt.Sprintf(`{"startedDateTime":"2026-12-01T10:00:0%d.000Z","time":1,"request":{"method":"GET","url":"https://a.test/%d","httpVersion":"h2","headers":[{"name":":authority","value":"a.test"}],"queryString":[],"cookies":[],"headersSize":-1,"bodySize":0},"response":{"status":200,"statusText":"OK","httpVersion":"h2","headers":[],"cookies":[],"content":{"size":%d,"mimeType":"text/plain","text":%q},"redirectURL":"","headersSize":-1,"bodySize":-1},"cache":{},"timings":{"send":0,"wait":1,"receive":0}}`, i%10, i, len(text), text)
}

func harOf(entries ...string) string {
	return `{"log":{"version":"1.2","creator":{"name":"t","version":"1"},"pages":[{"startedDateTime":"2026-12-01T10:00:00Z","id":"p1","title":"T","pageTimings":{}}],"entries":[` +
		strings.Join(entries, ",") + `]}}`
}

func readAll(t *testing.T, data string, lim Limits) ([]*Entry, *Reader, error) {
	t.Helper()
	hr, err := NewReader(strings.NewReader(data), lim)
	if err != nil {
		return nil, nil, err
	}
	var out []*Entry
	for {
		e, err := hr.Next()
		if err == io.EOF {
			return out, hr, nil
		}
		if err != nil {
			return out, hr, err
		}
		out = append(out, e)
	}
}

func TestReaderReadsEntries(t *testing.T) {
	es, hr, err := readAll(t, harOf(entryJSON(0, "a"), entryJSON(1, ""), entryJSON(2, "héllo")), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 || hr.Log.Version != "1.2" || len(hr.Log.Pages) != 1 || hr.Log.Pages[0].ID != "p1" {
		t.Fatalf("entries %d, log %+v", len(es), hr.Log)
	}
	if es[1].Index != 1 || es[1].Request.URL != "https://a.test/1" || !es[1].Response.Content.HasText() || es[1].Response.Content.Text != "" {
		t.Errorf("entry 1: %+v", es[1])
	}
	if b, _ := es[2].Response.Content.Body(); string(b) != "héllo" {
		t.Errorf("entry 2 body %q", b)
	}
}

// TestReaderPagesAfterEntries: a log whose pages follow its entries has them once Next
// returned io.EOF.
func TestReaderPagesAfterEntries(t *testing.T) {
	data := `{"log":{"entries":[` + entryJSON(0, "x") + `],"pages":[{"id":"p9","title":"x","startedDateTime":"2026-12-01T10:00:00Z","pageTimings":{}}],"version":"1.2","creator":{"name":"c","version":"2"}}}`
	es, hr, err := readAll(t, data, Limits{})
	if err != nil || len(es) != 1 || len(hr.Log.Pages) != 1 || hr.Log.Creator.Name != "c" {
		t.Fatalf("err %v, entries %d, log %+v", err, len(es), hr.Log)
	}
}

// TestReaderBadInput: every bad HAR is an error that names the entry index (when there is
// one) and what was expected.
func TestReaderBadInput(t *testing.T) {
	good := entryJSON(0, "ok")
	full := harOf(good, entryJSON(1, "ok"), entryJSON(2, "ok"))
	cases := []struct {
		name, data string
		lim        Limits
		want       string
		tooLarge   bool
	}{
		{"truncated in entry 2", full[:strings.LastIndex(full, `"text"`)], Limits{}, "entry 2: ", false},
		{"truncated after entries", full[:len(full)-2], Limits{}, "truncated JSON", false},
		{"no request", harOf(good, `{"startedDateTime":"2026-12-01T10:00:00Z","response":{"status":200,"content":{}}}`), Limits{}, "entry 1: request: missing", false},
		{"no response", harOf(good, good, `{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"GET","url":"http://a/"}}`), Limits{}, "entry 2: response: missing", false},
		{"no url", harOf(`{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"GET"},"response":{"status":200}}`), Limits{}, "entry 0: request.url: missing", false},
		{"bad date", harOf(`{"startedDateTime":"yesterday","request":{"method":"GET","url":"http://a/"},"response":{"status":200}}`), Limits{}, "entry 0: startedDateTime", false},
		{"status type", harOf(`{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"GET","url":"http://a/"},"response":{"status":"200"}}`), Limits{}, "entry 0: response.status: a JSON string", false},
		{"text too long", harOf(good, entryJSON(1, strings.Repeat("x", 5000))), Limits{MaxText: 4096}, "entry 1: a JSON string longer than 4096 bytes", true},
		{"too many entries", harOf(good, good, good), Limits{MaxEntries: 2}, "entry 2: log.entries: more than 2 entries", true},
		{"too deep", harOf(`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`), Limits{}, "nested deeper than 64", true},
		{"not an object", `[1,2]`, Limits{}, "a JSON object", false},
		{"no log", `{"foo":1}`, Limits{}, `no "log" object`, false},
		{"no entries", `{"log":{"version":"1.2"}}`, Limits{}, "log.entries: missing", false},
		{"trailing data", harOf(good) + `{}`, Limits{}, "data after", false},
		{"empty", ``, Limits{}, "truncated JSON", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := readAll(t, c.data, c.lim)
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			if errors.Is(err, ErrTooLarge) != c.tooLarge {
				t.Errorf("error %q: ErrTooLarge %v, want %v", err, errors.Is(err, ErrTooLarge), c.tooLarge)
			}
		})
	}
}

// hugeText is a reader of a HAR whose second entry's text is n bytes of "A", produced on
// the fly.
type hugeText struct {
	parts []io.Reader
}

func newHugeText(n int64) io.Reader {
	pre := `{"log":{"version":"1.2","entries":[` + entryJSON(0, "ok") + `,{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"GET","url":"http://a/"},"response":{"status":200,"content":{"text":"`
	return io.MultiReader(strings.NewReader(pre), io.LimitReader(repeatA{}, n), strings.NewReader(`"}}}]}}`))
}

type repeatA struct{}

func (repeatA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'A'
	}
	return len(p), nil
}

// TestReaderHugeTextBoundedMemory: a text of 2 GiB is refused at the bound, naming entry 1,
// having read little more than the bound (the decoder never buffers the string whole).
func TestReaderHugeTextBoundedMemory(t *testing.T) {
	cr := &countReader{r: newHugeText(2 << 30)}
	hr, err := NewReader(cr, Limits{MaxText: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hr.Next(); err != nil {
		t.Fatalf("entry 0: %v", err)
	}
	_, err = hr.Next()
	if err == nil || !strings.Contains(err.Error(), "entry 1: a JSON string longer than 1048576 bytes") || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v", err)
	}
	if cr.n > 4<<20 {
		t.Errorf("read %d bytes before refusing a 1 MiB-bounded string", cr.n)
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestReaderManyEntries streams 100,000 entries one at a time.
func TestReaderManyEntries(t *testing.T) {
	const n = 100_000
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, `{"log":{"version":"1.2","creator":{"name":"t","version":"1"},"entries":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				io.WriteString(pw, ",")
			}
			fmt.Fprintf(pw, `{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"GET","url":"u%d"},"response":{"status":200}}`, i)
		}
		io.WriteString(pw, `]}}`)
		pw.Close()
	}()
	hr, err := NewReader(pr, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		e, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Index != got {
			t.Fatalf("entry index %d, want %d", e.Index, got)
		}
		got++
	}
	if got != n {
		t.Fatalf("%d entries, want %d", got, n)
	}
}

func TestSniff(t *testing.T) {
	for in, want := range map[string]bool{
		`{"log":{}}`:               true,
		"\xef\xbb\xbf \n{ \"log\"": true,
		`{"logs":1}`:               false,
		`WARC/1.1`:                 false,
		`[{"log":1}]`:              false,
		``:                         false,
	} {
		if Sniff([]byte(in)) != want {
			t.Errorf("Sniff(%q) = %v", in, !want)
		}
	}
}

// TestWriterRoundTrip: what Writer writes, Reader reads back the same, with an empty
// captured body kept as text and a binary body as base64.
func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Log{Creator: Creator{Name: "pab", Version: "test"}, Pages: []Page{{ID: "p1", Title: "T", StartedDateTime: "2026-12-01T10:00:00Z"}}})
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{[]byte("<p>x</p>"), {}, {0xff, 0, 1}}
	for i, b := range bodies {
		e := &Entry{StartedDateTime: "2026-12-01T10:00:00Z", Request: Request{Method: "GET", URL: fmt.Sprintf("http://a.test/%d", i), HTTPVersion: "HTTP/1.1", BodySize: 0},
			Response: Response{Status: 200, StatusText: "OK", HTTPVersion: "HTTP/1.1", Content: Content{MimeType: "text/html"}, BodySize: -1, HeadersSize: -1}}
		e.Response.Content.SetBody(b)
		if err := w.WriteEntry(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	es, hr, err := readAll(t, buf.String(), Limits{})
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(es) != 3 || hr.Log.Version != "1.2" || len(hr.Log.Pages) != 1 {
		t.Fatalf("%d entries, log %+v", len(es), hr.Log)
	}
	for i, e := range es {
		if !e.Response.Content.HasText() {
			t.Errorf("entry %d: no text", i)
		}
		if b, err := e.Response.Content.Body(); err != nil || !bytes.Equal(b, bodies[i]) {
			t.Errorf("entry %d: body %q (%v), want %q", i, b, err, bodies[i])
		}
	}
	if es[2].Response.Content.Encoding != "base64" {
		t.Errorf("binary body encoding %q", es[2].Response.Content.Encoding)
	}
}

func writeZip(t *testing.T, files map[string]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "h.zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// TestZip: a Playwright .zip HAR opens with its attachments; traversal, two HARs or none
// are refused.
func TestZip(t *testing.T) {
	p := writeZip(t, map[string]string{"har.har": harOf(entryJSON(0, "x")), "abc.html": "<p>body</p>"})
	z, err := OpenZip(p)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	rc, size, err := z.Open("abc.html")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "<p>body</p>" || size != int64(len(b)) {
		t.Errorf("attachment %q size %d", b, size)
	}
	for _, bad := range []string{"../abc.html", "/etc/passwd", "a/b", "", ".."} {
		if _, _, err := z.Open(bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	for name, files := range map[string]map[string]string{
		"traversal": {"har.har": "{}", "../x": "y"},
		"two hars":  {"a.har": "{}", "b.har": "{}"},
		"no har":    {"x.txt": "y"},
	} {
		if _, err := OpenZip(writeZip(t, files)); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// TestDirAttachments: a file beside the HAR opens; a link out of the directory does not.
func TestDirAttachments(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.bin"), []byte("xyz"), 0o644)
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	d, err := NewDirAttachments(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rc, _, err := d.Open("b.bin")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	for _, bad := range []string{"link", "../secret", "missing"} {
		if _, _, err := d.Open(bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

// TestValidate: what Writer writes has every required field; a HAR missing some is told.
func TestValidate(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Log{Creator: Creator{Name: "pab", Version: "t"}})
	e := &Entry{StartedDateTime: "2026-12-01T10:00:00Z", Request: Request{Method: "POST", URL: "http://a/", HTTPVersion: "HTTP/1.1",
		PostData: &PostData{MimeType: "text/plain", Text: "x"}}, Response: Response{Status: 200, HTTPVersion: "HTTP/1.1"}}
	w.WriteEntry(e)
	w.Close()
	probs, err := Validate(&buf)
	if err != nil || len(probs) != 0 {
		t.Errorf("written HAR: %v %v", err, probs)
	}
	probs, err = Validate(strings.NewReader(`{"log":{"version":"1.2","creator":{"name":"x"},"entries":[{"request":{"method":"GET"},"response":{"status":"200","content":{}}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"log.creator: no version", "log.entries[0]: no startedDateTime", "log.entries[0].request: no url", "log.entries[0].response.status: not a number", "log.entries[0].response.content: no mimeType"}
	for _, w := range want {
		found := false
		for _, p := range probs {
			found = found || p == w
		}
		if !found {
			t.Errorf("problems %q lack %q", probs, w)
		}
	}
}
