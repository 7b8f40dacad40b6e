package recording

// Tests of the bounded paths: streamed reading of record blocks (reader_stream.go), bodies
// spooled and streamed through an import, the writer's streamed records, the unpack limits
// and the recovery of interrupted publishes.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
	"github.com/pab-dev/pab/internal/warctest"
	"github.com/pab-dev/pab/warc"
)

// readBoth reads path once holding blocks in memory and once streaming them into a spool,
// and reports the first difference: record fields, HTTP heads, bodies, warnings and errors
// must be the same (warnings are not compared for a block the in-memory reader skipped).
func readBoth(t testing.TB, path string, maxBlock int64) string {
	t.Helper()
	mem, err := warc.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	str, err := warc.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer str.Close()
	sp, err := warc.NewSpool(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	str.Spool = sp
	mem.MaxBlockSize, str.MaxBlockSize = maxBlock, maxBlock
	for n := 0; ; n++ {
		a, errA := mem.Next()
		b, errB := str.Next()
		if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			return fmt.Sprintf("record %d: errors %v / %v", n, errA, errB)
		}
		if errA != nil {
			if fmt.Sprint(mem.Warnings()) != fmt.Sprint(str.Warnings()) {
				return fmt.Sprintf("file warnings %v / %v", mem.Warnings(), str.Warnings())
			}
			return ""
		}
		if a.Type != b.Type || a.Offset != b.Offset || a.Length != b.Length || a.Where() != b.Where() || a.BlockSize != b.BlockSize {
			return fmt.Sprintf("record %d: %s %d+%d / %s %d+%d", n, a.Type, a.Offset, a.Length, b.Type, b.Offset, b.Length)
		}
		if (a.HTTP == nil) != (b.HTTP == nil) {
			return fmt.Sprintf("record %d: HTTP %v / %v", n, a.HTTP != nil, b.HTTP != nil)
		}
		if a.HTTP != nil {
			body, err := sp.ReadPrefix(b.Body, b.Body.N)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, a.HTTP.Body) {
				return fmt.Sprintf("record %d: body of %d bytes / %d", n, len(a.HTTP.Body), len(body))
			}
			ah, bh := *a.HTTP, *b.HTTP
			ah.Body, bh.Body = nil, nil
			if fmt.Sprintf("%+v", ah) != fmt.Sprintf("%+v", bh) {
				return fmt.Sprintf("record %d: head %+v / %+v", n, ah, bh)
			}
		}
		if b.Block != nil {
			return fmt.Sprintf("record %d: a streamed record keeps its block", n)
		}
		if a.Block != nil && !slices.Equal(a.Warnings, b.Warnings) {
			return fmt.Sprintf("record %d: warnings %q / %q", n, a.Warnings, b.Warnings)
		}
	}
}

func TestReaderStreamedMatchesMemory(t *testing.T) {
	for _, c := range corpusCases {
		if msg := readBoth(t, "../testdata/"+c.file, warc.DefaultMaxBlockSize); msg != "" {
			t.Errorf("%s: %s", c.file, msg)
		}
	}
}

// FuzzReaderStreamed: streamed reading gives exactly what reading into memory gives, for
// any input (both bounded to 1 MiB blocks; HTTP heads stay far below MaxHTTPHeaderBytes).
func FuzzReaderStreamed(f *testing.F) {
	warctest.AddFileSeeds(f)
	f.Add([]byte("WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: http://x/\r\nWARC-Block-Digest: sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ\r\nContent-Length: 38\r\n\r\nHTTP/1.1 200 OK\nA: b\r\n\r\n3\r\nabc\r\n0\r\n\r\n\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "f.warc")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if msg := readBoth(t, p, 1<<20); msg != "" {
			t.Fatal(msg)
		}
	})
}

// responseWARC is one response record whose HTTP block is head then body.
func responseWARC(head string, body []byte) []byte {
	block := append([]byte(head), body...)
	return fmt.Appendf(nil, "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:12345678-1234-1234-1234-123456789abc>\r\nWARC-Date: 2026-01-02T03:04:05Z\r\nWARC-Target-URI: https://big.test/\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", len(block), block)
}

func TestReaderStreamedHeadBound(t *testing.T) {
	dir := t.TempDir()
	// An HTTP head over the bound is refused, naming the file and the record's offset...
	big := filepath.Join(dir, "big-header.warc")
	prefix := []byte("WARC/1.1\r\nWARC-Type: warcinfo\r\nContent-Length: 0\r\n\r\n\r\n\r\n")
	data := append(prefix, responseWARC("HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 2<<20)+"\r\n\r\n", []byte("ok"))...)
	if err := os.WriteFile(big, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ImportWARCs([]string{big}, filepath.Join(dir, "out"), ImportOptions{})
	want := fmt.Sprintf("read %s at offset %d: record too large: the HTTP header of this response record is longer than %d bytes", big, len(prefix), warc.MaxHTTPHeaderBytes)
	if err == nil || err.Error() != want || !errors.Is(err, warc.ErrTooLarge) {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if left := leftovers(t, dir); !slices.Equal(left, []string{"big-header.warc"}) {
		t.Errorf("left %v", left)
	}
	// ...while a block that is no HTTP message at all (one long line) is skipped with a
	// warning, as before.
	junk := filepath.Join(dir, "junk.warc")
	data = append(responseWARC("\x00\x01"+strings.Repeat("z", 2<<20), nil), responseWARC("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", []byte("fine"))...)
	if err := os.WriteFile(junk, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := ImportWARCs([]string{junk}, filepath.Join(dir, "out2"), ImportOptions{})
	if err != nil || rep.Exchanges != 1 || !hasText(rep.Warnings, "block is not an HTTP message") {
		t.Errorf("junk block: %v %+v", err, rep)
	}
}

// byteReader reads n bytes c.
type byteReader struct {
	c byte
	n int64
}

func (r *byteReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n)
	for i := range p[:k] {
		p[i] = r.c
	}
	r.n -= k
	return int(k), nil
}

// TestImportBodiesStreamed: a body of 64 MiB (gzip-encoded in the input, so it is decoded
// too) passes through an import with allocations far below its size, and arrives whole.
func TestImportBodiesStreamed(t *testing.T) {
	const size = 64 << 20
	dir := t.TempDir()
	var enc bytes.Buffer
	zw := gzip.NewWriter(&enc)
	if _, err := io.Copy(zw, &byteReader{c: 'x', n: size}); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	in := filepath.Join(dir, "big.warc.gz")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	gw := gzip.NewWriter(f)
	gw.Write(responseWARC(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", enc.Len()), enc.Bytes()))
	gw.Close()
	f.Close()
	enc = bytes.Buffer{}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := filepath.Join(dir, "out")
	if _, err := ImportWARCs([]string{in}, out, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("the import of a %d-byte body allocated %d bytes: bodies are not streamed", size, alloc)
	}
	b, err := OpenBundle(out)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resp, err := b.Response(&b.Entries[0])
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, _ := io.Copy(h, resp.Body)
	want := sha256.New()
	io.Copy(want, &byteReader{c: 'x', n: size})
	if n != size || !bytes.Equal(h.Sum(nil), want.Sum(nil)) || b.Entries[0].Digest != hex.EncodeToString(want.Sum(nil)) {
		t.Errorf("stored payload: %d bytes, digest %s", n, b.Entries[0].Digest)
	}
	if got := resp.Header.Get("Content-Length"); got != fmt.Sprint(size) || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("stored header %v", resp.Header)
	}
	if left := leftovers(t, dir); !slices.Equal(left, []string{"big.warc.gz", "out"}) {
		t.Errorf("left %v (the spool must be gone)", left)
	}
	if probs := Audit(out); len(probs) > 0 {
		t.Errorf("audit: %v", probs)
	}
}

// TestWriterRecordsAsGowarc: the streamed record writer gives byte for byte what gowarc's
// record builder and marshaler give.
func TestWriterRecordsAsGowarc(t *testing.T) {
	hdr := []warc.Field{{Name: "WARC-Type", Value: "response"}, {Name: "WARC-Record-ID", Value: "<urn:uuid:1>"}, {Name: "WARC-Date", Value: "2026-01-02T03:04:05.000Z"},
		{Name: "WARC-Target-URI", Value: "https://x.test/a b"}, {Name: "RR-Exchange-Id", Value: "e000001"}, {Name: "Rr-Odd-Case", Value: "v"}}
	head, body := []byte("HTTP/1.1 200 OK\r\nA: b\r\n\r\n"), bytes.Repeat([]byte("body "), 1000)
	var got bytes.Buffer
	w := &BundleWriter{bw: bufio.NewWriter(&got)}
	n, err := w.writeRecord(hdr, head, bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	w.bw.Flush()

	block := append(slices.Clone(head), body...)
	rb := gowarc.NewRecordBuilder(0, gowarc.WithVersion(gowarc.V1_1), gowarc.WithSkipParseBlock(),
		gowarc.WithSpecViolationPolicy(gowarc.ErrIgnore), gowarc.WithSyntaxErrorPolicy(gowarc.ErrIgnore),
		gowarc.WithBufferMaxMemBytes(int64(len(block))+1))
	for _, f := range hdr {
		rb.AddWarcHeader(f.Name, f.Value)
	}
	rb.AddWarcHeaderInt64(gowarc.ContentLength, int64(len(block)))
	rb.Write(block)
	rec, _, err := rb.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	for _, nv := range *rec.WarcHeader() {
		for _, f := range hdr {
			if strings.EqualFold(nv.Name, f.Name) {
				nv.Name = f.Name
			}
		}
	}
	var want bytes.Buffer
	if _, _, err := gowarc.NewMarshaler().Marshal(&want, rec, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) || n != int64(want.Len()) {
		t.Errorf("streamed record (%d bytes):\n%q\ngowarc:\n%q", n, got.Bytes()[:300], want.Bytes()[:300])
	}
}

// smallRecording packs a bundle of one exchange whose payload is size bytes of 'z'.
func smallRecording(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	w, err := NewBundleWriter(filepath.Join(dir, "bundle"), Manifest{TaskID: "bomb"})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("z"), int(size))
	if _, err := w.Add(Exchange{URL: "https://bomb.test/", Date: time.Unix(1e9, 0), Status: 200,
		RespHeader: http.Header{"Content-Type": {"text/plain"}}, BodyAt: bytes.NewReader(body), BodySize: size}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "recording")
	if err := Pack(filepath.Join(dir, "bundle"), rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestUnpackLimits(t *testing.T) {
	rec := smallRecording(t, 4<<20) // 4 MiB of one byte packs to a few KiB
	files, _ := RecordingFiles(rec)
	var packed int64
	for _, f := range files {
		fi, _ := os.Stat(f)
		packed += fi.Size()
	}
	for _, c := range []struct {
		name string
		l    UnpackLimits
		want string // "" for success
	}{
		{"defaults allow it (under the floor)", UnpackLimits{Ratio: DefaultUnpackRatio, Floor: DefaultUnpackFloor, Max: DefaultMaxUnpackedBytes}, ""},
		{"ratio", UnpackLimits{Ratio: 50, Floor: 1 << 20}, fmt.Sprintf("recording %s expands to more than %d bytes, 50 times its packed size of %d bytes", rec, max(50*packed, 1<<20), packed)},
		{"cap", UnpackLimits{Max: 2 << 20}, fmt.Sprintf("recording %s expands to more than %d bytes, the absolute limit; refused (set $%s", rec, 2<<20, EnvUnpackMax)},
		{"ratio off, no cap", UnpackLimits{}, ""},
	} {
		dest := filepath.Join(t.TempDir(), "dest")
		err := UnpackWith(rec, dest, c.l)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "":
			var le *UnpackLimitError
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.As(err, &le) {
				t.Errorf("%s: %v\nwant %s...", c.name, err, c.want)
			}
			if _, serr := os.Stat(dest); serr == nil {
				t.Errorf("%s: the partial unpack was left in %s", c.name, dest)
			}
		}
	}
	// the same limits apply to the audit, and come from the environment
	t.Setenv(EnvUnpackMax, "2000000")
	probs := AuditRecording(rec, filepath.Join(t.TempDir(), "w"))
	if len(probs) != 1 || !strings.Contains(probs[0].Msg, "expands to more than 2000000 bytes, the absolute limit") {
		t.Errorf("audit: %v", probs)
	}
	if err := Unpack(rec, filepath.Join(t.TempDir(), "d")); err == nil {
		t.Errorf("Unpack ignored $%s", EnvUnpackMax)
	}
	t.Setenv(EnvUnpackMax, "")
	t.Setenv(EnvUnpackRatio, "lots")
	if err := Unpack(rec, filepath.Join(t.TempDir(), "d")); err == nil || !strings.Contains(err.Error(), `$PAB_UNPACK_RATIO is "lots"; want a whole number`) {
		t.Errorf("bad $%s: %v", EnvUnpackRatio, err)
	}
}

func TestRecoverRecording(t *testing.T) {
	src := smallRecording(t, 10)
	parent := t.TempDir()
	rec := filepath.Join(parent, "recording")
	copyDir := func(to string) {
		if err := os.CopyFS(to, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
	}
	// died between Publish's renames: the recording is missing, its old copy aside
	copyDir(filepath.Join(parent, ".recording.old-123"))
	copyDir(filepath.Join(parent, ".recording.tmp-456"))
	notes, err := RecoverRecording(rec)
	if err != nil || len(notes) != 2 || !strings.HasPrefix(notes[0], "put back") {
		t.Fatalf("%q %v", notes, err)
	}
	if h1, _ := HashRecording(src); func() string { h, _ := HashRecording(rec); return h }() != h1 {
		t.Errorf("the put-back recording differs")
	}
	// with the recording in place, leftovers are removed and it is kept
	copyDir(filepath.Join(parent, ".recording.old-789"))
	os.Mkdir(filepath.Join(parent, ".recording.tmp-x"), 0o755)
	os.Mkdir(filepath.Join(parent, "other"), 0o755)
	if notes, err := RecoverRecording(rec); err != nil || len(notes) != 2 {
		t.Errorf("%q %v", notes, err)
	}
	if left := leftovers(t, parent); !slices.Equal(left, []string{"other", "recording"}) {
		t.Errorf("left %v", left)
	}
	if notes, err := RecoverRecording(filepath.Join(t.TempDir(), "none", "recording")); err != nil || notes != nil {
		t.Errorf("no directory: %q %v", notes, err)
	}
}

// FuzzDecodeSpooled: decoding a body in the spool gives what DecodePayloadLimit gives for
// the same bytes (payload, removed coding, failure), and a failure leaves no region behind.
func FuzzDecodeSpooled(f *testing.F) {
	f.Add("gzip", true, warctest.Encode(f, "gzip", []byte("hello hello hello")))
	f.Add("br", false, warctest.Encode(f, "br", []byte("hello")))
	f.Add("zstd", false, warctest.Encode(f, "zstd", []byte("hello")))
	f.Add("deflate", false, warctest.Encode(f, "raw-deflate", []byte("hello")))
	f.Add("deflate", true, []byte("5\r\nhello\r\n0\r\n\r\n"))
	f.Add("gzip, br", false, []byte{})
	f.Add("x-gzip", false, append(warctest.Encode(f, "gzip", []byte("a")), "junk"...))
	f.Fuzz(func(t *testing.T, coding string, chunked bool, body []byte) {
		h := http.Header{}
		if coding != "" {
			h.Set("Content-Encoding", coding)
		}
		if chunked {
			h.Set("Transfer-Encoding", "chunked")
		}
		const limit = 1 << 16
		want, wantOrig, wantErr := warc.DecodePayloadLimit(h, body, limit)
		sp, err := warc.NewSpool(t.TempDir(), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		sp.Write([]byte("before"))
		in := sp.Mark()
		sp.Write(body)
		d, orig, _, err := decodeSpooled(sp, h, sp.Since(in), limit)
		got, rerr := sp.ReadPrefix(d, d.N)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if !bytes.Equal(got, want) || orig != wantOrig || (err == nil) != (wantErr == nil) {
			t.Fatalf("spooled %q %q %v; in memory %q %q %v", got, orig, err, want, wantOrig, wantErr)
		}
		if err != nil && sp.Mark() != d.Off+d.N && sp.Mark() != in+int64(len(body)) {
			t.Fatalf("a failed decode left %d bytes in the spool", sp.Mark()-in-int64(len(body)))
		}
	})
}

// TestWriterRefusesHugeHeads: a head replay could not read back (over MaxHTTPHeaderBytes) is
// refused before anything is written, and the writer goes on.
func TestWriterRefusesHugeHeads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	w, err := NewBundleWriter(dir, Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("h", warc.MaxHTTPHeaderBytes)
	for _, x := range []Exchange{
		{URL: "https://x.test/", Date: t0, Status: 200, RespHeader: http.Header{"X-Huge": {huge}}},
		{URL: "https://x.test/", Date: t0, Status: 200, ReqHeader: http.Header{"X-Huge": {huge}}},
	} {
		if _, err := w.Add(x); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than the limit of %d", warc.MaxHTTPHeaderBytes)) {
			t.Errorf("huge head: %v", err)
		}
	}
	if e, err := w.Add(Exchange{URL: "https://x.test/", Date: t0, Status: 200, Body: []byte("ok")}); err != nil || e.ID != "e000001" || e.RespOffset != 0 {
		t.Fatalf("after the refusals: %+v %v", e, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if probs := Audit(dir); len(probs) > 0 {
		t.Errorf("audit: %v", probs)
	}
}
