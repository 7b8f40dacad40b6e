package recording

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pab-dev/pab/internal/warctest"
)

// FuzzImport imports arbitrary bytes: an error or a bundle, never a panic.
func FuzzImport(f *testing.F) {
	warctest.AddFileSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		tmp := t.TempDir()
		p := filepath.Join(tmp, "f.warc")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ImportWARCs([]string{p}, filepath.Join(tmp, "out"), ImportOptions{MaxBytes: 8 << 20})
		if _, serr := os.Stat(filepath.Join(tmp, "out")); err != nil && serr == nil {
			t.Fatalf("failed import (%v) left its output", err)
		}
	})
}
