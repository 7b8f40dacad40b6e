package recording

import (
	"io"
	"path/filepath"
	"testing"
)

// BenchmarkBundleResponse reads a recorded response's head and body: the per-request work of
// replay for a payload its head cache does not hold (record header parse, HTTP head parse).
func BenchmarkBundleResponse(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "bundle")
	writeTestBundle(b, dir, Manifest{TaskID: "shop"}, auditExchanges(), nil)
	bu, err := OpenBundle(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer bu.Close()
	e := &bu.Entries[1] // the 2,200-byte script
	b.ReportAllocs()
	for b.Loop() {
		r, err := bu.Response(e)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			b.Fatal(err)
		}
	}
}
