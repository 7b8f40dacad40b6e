package warc

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/warctest"
)

// dumpRead reads the file at path to its end or first error, inflating ahead or not,
// streamed (bodies spooled, as an import reads) or in memory, and describes everything
// Next and Warnings gave: each record's fields, place, header, block, body and
// warnings, then the error and the file warnings.
func dumpRead(t testing.TB, path string, ahead, streamed bool) string {
	t.Helper()
	r, err := OpenReader(path)
	if err != nil {
		return "open: " + err.Error()
	}
	defer func() { _ = r.Close() }()
	r.MaxBlockSize = 1 << 20
	if ahead {
		r.InflateAhead()
	}
	var sp *Spool
	if streamed {
		if sp, err = NewSpool(t.TempDir(), 1<<30); err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		r.Spool = sp
	}
	var b strings.Builder
	for n := 0; ; n++ {
		rec, err := r.Next()
		if err != nil {
			fmt.Fprintf(&b, "end: %v\n", err)
			break
		}
		fmt.Fprintf(&b, "%d %s %s %q off %d len %d pos %d where %q size %d block %x\n", n, rec.Type, rec.ID, rec.TargetURI,
			rec.Offset, rec.Length, rec.Pos, rec.Where(), rec.BlockSize, sha256.Sum256(rec.Block))
		for _, f := range rec.Header {
			fmt.Fprintf(&b, "  %s: %s\n", f.Name, f.Value)
		}
		if rec.HTTP != nil {
			body := rec.HTTP.Body
			if streamed {
				if body, err = sp.ReadPrefix(rec.Body, 1<<30); err != nil {
					t.Fatal(err)
				}
			}
			fmt.Fprintf(&b, "  http %d %x\n", rec.HTTP.StatusCode, sha256.Sum256(body))
		}
		for _, w := range rec.Warnings {
			fmt.Fprintf(&b, "  warning: %s\n", w)
		}
	}
	for _, w := range r.Warnings() {
		fmt.Fprintf(&b, "file warning at %s: %s\n", w.Where, w.Msg)
	}
	return b.String()
}

// gzipParts compresses each part as one gzip member, concatenated.
func gzipParts(t testing.TB, parts ...[]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	for _, p := range parts {
		zw.Reset(&out)
		if _, err := zw.Write(p); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// splitEvery cuts b into parts of k bytes (the last shorter).
func splitEvery(b []byte, k int) [][]byte {
	var parts [][]byte
	for len(b) > k {
		parts, b = append(parts, b[:k]), b[k:]
	}
	return append(parts, b)
}

// splitRecords cuts a plain WARC at each "WARC/1." line start: one part per record, as a
// crawler writes its members.
func splitRecords(b []byte) [][]byte {
	var parts [][]byte
	for {
		i := bytes.Index(b[1:], []byte("\nWARC/1."))
		if i < 0 {
			return append(parts, b)
		}
		parts, b = append(parts, b[:i+2]), b[i+2:]
	}
}

// aheadInputs are gzip files of every shape the reader meets: the corpus's .warc.gz, its
// plain WARCs (resync cases among them) as one member per record, as one member for the
// whole file and as members cut across records, with empty members between, cut short,
// with a corrupt byte, with junk or padding after the last member; and a file of a few
// MiB, so that members straddle the goroutine's chunks and the reader runs behind it.
func aheadInputs(t testing.TB) map[string][]byte {
	t.Helper()
	in := map[string][]byte{}
	files, err := filepath.Glob("../testdata/warc/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		if strings.HasSuffix(name, ".gz") {
			in[name] = b
			continue
		}
		in[name+" per record"] = gzipParts(t, splitRecords(b)...)
		if name != "example.warc" && name != "example-bad-length.warc" && name != "example-trunc.warc" {
			continue // the other shapes on the files that have the reader's odd cases
		}
		in[name+" whole"] = gzipParts(t, b)
		in[name+" every 97"] = gzipParts(t, splitEvery(b, 97)...)
		parts := splitRecords(b)
		var withEmpty [][]byte
		for _, p := range parts {
			withEmpty = append(withEmpty, nil, p, nil)
		}
		in[name+" empty members"] = gzipParts(t, withEmpty...)
	}
	big := bigPlain()
	in["big per record"] = gzipParts(t, splitRecords(big)...)
	in["big every 100000"] = gzipParts(t, splitEvery(big, 100000)...)
	bigGz := in["big per record"]
	for _, cut := range []int{len(bigGz) / 3} {
		in[fmt.Sprintf("big cut at %d", cut)] = bigGz[:cut]
	}
	bad := bytes.Clone(bigGz)
	bad[len(bad)/2] ^= 0x55
	in["big corrupt"] = bad
	ex := in["example.warc.gz"]
	in["example padding after"] = append(bytes.Clone(ex), make([]byte, 300)...)
	in["example junk after"] = append(bytes.Clone(ex), "trailing junk"...)
	for _, cut := range []int{10, 100, len(ex) / 2, len(ex) - 1} {
		in[fmt.Sprintf("example cut at %d", cut)] = ex[:cut]
	}
	return in
}

// bigPlain is a plain WARC of 1,500 exchanges, about 3 MB: more than the goroutine inflates
// ahead.
func bigPlain() []byte {
	var big []byte
	for i := range 1500 {
		body := strings.Repeat(fmt.Sprintf("<p>%d</p>", i), 1+i%300)
		big = append(big, warctest.Record("request", fmt.Sprintf("http://example.com/%d", i), warctest.Request(fmt.Sprintf("/%d", i)), 0, "\r\n")...)
		big = append(big, warctest.Record("response", fmt.Sprintf("http://example.com/%d", i), warctest.Response(body), 0, "\r\n")...)
	}
	return big
}

// TestInflateAheadSameResult: inflating in a goroutine ahead of the parsing changes nothing
// Next returns (records, their offsets and places, warnings, errors), in memory and
// streamed, whatever the file's gzip members are.
func TestInflateAheadSameResult(t *testing.T) {
	dir := t.TempDir()
	for name, data := range aheadInputs(t) {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, streamed := range []bool{false, true} {
			want := dumpRead(t, p, false, streamed)
			got := dumpRead(t, p, true, streamed)
			if got != want {
				t.Errorf("%s (streamed %v): inflating ahead reads differently:\n%s", name, streamed, firstDiff(want, got))
			}
		}
	}
	// the big file is read past several chunks, with records at the members' offsets
	got := dumpRead(t, filepath.Join(dir, "big_per_record"), true, true)
	if !strings.Contains(got, "2999 response") || strings.Contains(got, "off -1") || !strings.Contains(got, "end: EOF") {
		t.Errorf("big file read ahead: %.500s", got)
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  sequential: %s\n  ahead:      %s", i+1, x, y)
		}
	}
	return ""
}

// TestInflateAheadCloseEarly: closing a reader in the middle of its file stops the
// inflating goroutine (no goroutine left, the file closed), whether it was waiting for
// the reader or not.
func TestInflateAheadCloseEarly(t *testing.T) {
	p := warctest.WriteTemp(t, "big.warc.gz", gzipParts(t, splitRecords(bigPlain())...))
	before := runtime.NumGoroutine()
	for _, records := range []int{0, 1, 100} {
		r, err := OpenReader(p)
		if err != nil {
			t.Fatal(err)
		}
		r.InflateAhead()
		for range records {
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	// Close waits for the goroutine to exit, so the count is back at once (other tests'
	// goroutines may still be ending: allow a moment for those only).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}

// FuzzInflateAhead: any bytes, as a gzip file of members of a fuzzed size (or as given
// when they are gzip already), read the same inflated ahead as inflated in step.
func FuzzInflateAhead(f *testing.F) {
	warctest.AddFileSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			k := 1 + len(data)%251
			data = gzipParts(t, splitEvery(data, k)...)
		}
		p := filepath.Join(t.TempDir(), "f.warc.gz")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, streamed := range []bool{false, true} {
			want := dumpRead(t, p, false, streamed)
			if got := dumpRead(t, p, true, streamed); got != want {
				t.Fatalf("streamed %v: %s", streamed, firstDiff(want, got))
			}
		}
	})
}
