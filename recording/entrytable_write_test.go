package recording

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// writtenTable is WriteEntryTable's table of dir (its temporary blob in a test directory,
// which must be empty again afterwards) and its error.
func writtenTable(t *testing.T, dir string) ([]byte, error) {
	t.Helper()
	tmp := t.TempDir()
	var buf bytes.Buffer
	n, err := WriteEntryTable(dir, tmp, &buf)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("WriteEntryTable left %v in its temporary directory", left)
	}
	if err == nil {
		if tab, perr := parseEntryTable(buf.Bytes()); perr != nil || tab.n != n {
			t.Errorf("the written table does not parse (%v) or holds another count than the %d returned", perr, n)
		}
	}
	return buf.Bytes(), err
}

// sameTable checks that WriteEntryTable gives dir the bytes EncodeEntryTable gives the
// bundle OpenBundle opens, or the same error OpenBundle or EncodeEntryTable gives.
func sameTable(t *testing.T, dir string) {
	t.Helper()
	got, gotErr := writtenTable(t, dir)
	b, err := OpenBundle(dir)
	if err != nil {
		if gotErr == nil || gotErr.Error() != err.Error() {
			t.Errorf("%s: WriteEntryTable's error %v, OpenBundle's %v", dir, gotErr, err)
		}
		return
	}
	defer b.Close()
	want, err := EncodeEntryTable(b)
	if err != nil {
		if gotErr == nil || gotErr.Error() != err.Error() {
			t.Errorf("%s: WriteEntryTable's error %v, EncodeEntryTable's %v", dir, gotErr, err)
		}
		return
	}
	if gotErr != nil {
		t.Errorf("%s: WriteEntryTable: %v; OpenBundle opens it", dir, gotErr)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: WriteEntryTable wrote %d bytes that differ from EncodeEntryTable's %d", dir, len(got), len(want))
	}
}

// TestWriteEntryTable: for every shipped recording (read in place) and the same unpacked
// (a bundle directory), and a recording packed in several parts, the entry table written
// one entry at a time has the bytes of the one encoded from the bundle in memory.
func TestWriteEntryTable(t *testing.T) {
	for _, rec := range realRecordings(t) {
		t.Run(filepath.Base(filepath.Dir(rec)), func(t *testing.T) {
			sameTable(t, rec)
			sameTable(t, bundleOf(t, rec))
		})
	}
	t.Run("parts", func(t *testing.T) {
		xs := handExchanges()
		bundleDir := filepath.Join(t.TempDir(), "bundle")
		writeHandBundle(t, bundleDir, xs)
		rec := filepath.Join(t.TempDir(), "tasks", "hand", "recording")
		if err := PackParts(bundleDir, rec, 1); err != nil {
			t.Fatal(err)
		}
		if files, _ := filepath.Glob(filepath.Join(rec, "data-*.warc.gz")); len(files) < 2 {
			t.Fatalf("packed into %v, want parts", files)
		}
		sameTable(t, rec)
	})
}
