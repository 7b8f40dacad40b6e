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
	n, err := WriteEntryTable(dir, tmp, ".blob-*", &buf)
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

// TestWriteEntryTableSameErrors: recordings OpenBundle refuses (or opens) for what is wrong
// outside the entry lines, or in fields the table holds differently, give WriteEntryTable
// the same error in the same words (or the same bytes): damaged or missing pages, another
// format, an entry whose fields the table cannot hold next to an overlap (the error names
// both entries by id), a size above 2^62 and a request span of no bytes past the records.
func TestWriteEntryTableSameErrors(t *testing.T) {
	bundleDir := bundleOf(t, realRecordings(t)[0])
	good := filepath.Join(t.TempDir(), "tasks", "x", "recording")
	if err := Pack(bundleDir, good); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, rec string)
	}{
		{"pages damaged", func(t *testing.T, rec string) {
			os.WriteFile(filepath.Join(rec, RecordingPagesFile), []byte(`{"bogus":1}`+"\n"), 0o644)
		}},
		{"pages missing", func(t *testing.T, rec string) { os.Remove(filepath.Join(rec, RecordingPagesFile)) }},
		{"format 2", func(t *testing.T, rec string) {
			os.WriteFile(filepath.Join(rec, RecordingManifestFile), []byte(`{"task_id":"x","format":2}`), 0o644)
		}},
		{"unencodable entry next to an overlap", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) {
				es[1].ReqPart, es[1].ReqLength, es[1].ReqGzLength, es[1].ReqGzOffset = -1, 0, 0, 0
				es[1].RespOffset = es[0].RespOffset
			})
		}},
		{"unencodable entry and damaged pages", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[1].ReqPart, es[1].ReqLength, es[1].ReqGzLength, es[1].ReqGzOffset = -1, 0, 0, 0 })
			os.WriteFile(filepath.Join(rec, RecordingPagesFile), []byte("{}\n"), 0o644)
		}},
		{"size above 2^62", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[1].Size = 1<<62 + 1 })
		}},
		{"empty request span past the records", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) {
				es[1].ReqOffset, es[1].ReqLength, es[1].ReqGzLength, es[1].ReqGzOffset = 999999999, 0, 0, 0
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := copyDir(t, good)
			c.break_(t, rec)
			sameTable(t, rec)
		})
	}
	// an unpacked bundle's pages
	for name, pages := range map[string][]byte{"bundle pages damaged": []byte("not json\n"), "bundle pages missing": nil} {
		t.Run(name, func(t *testing.T) {
			dir := bundleOf(t, good)
			p := filepath.Join(dir, PagesFile)
			if pages == nil {
				os.Remove(p)
			} else {
				os.WriteFile(p, pages, 0o644)
			}
			sameTable(t, dir)
		})
	}
	// a table that holds such entries reads them back as OpenBundle did
	rec := copyDir(t, good)
	editRecordingEntries(t, rec, func(es []Entry) {
		es[1].Size = 1<<62 + 1
		es[2].ReqOffset, es[2].ReqLength, es[2].ReqGzLength, es[2].ReqGzOffset = 999999999, 0, 0, 0
	})
	b, err := OpenBundle(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tab, err := EncodeEntryTable(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckEntryTable(tab); err != nil {
		t.Errorf("the table of entries OpenBundle opens does not read back: %v", err)
	}
}
