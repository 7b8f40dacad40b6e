package recording

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInPlaceErrorsNameThePart: an error reading a record of a format 3 recording names
// the part file and its gzip member's compressed offset, and entries.jsonl.gz, not the
// logical archive/data.warc and entries.jsonl of an unpacked bundle.
func TestInPlaceErrorsNameThePart(t *testing.T) {
	xs := handExchanges()
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	writeHandBundle(t, bundleDir, xs)
	rec := filepath.Join(t.TempDir(), "tasks", "hand", "recording")
	if err := Pack(bundleDir, rec); err != nil {
		t.Fatal(err)
	}
	var zoff int64
	editRecordingEntries(t, rec, func(es []Entry) { es[0].Size++; zoff = es[0].RespGzOffset })
	b, err := OpenBundle(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Response(&b.Entries[0])
	want := filepath.Join(rec, RecordingDataFile) + ", gzip member at offset " + itoa(zoff) + ", byte 0 of the records (entry e000001): payload is"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "entries.jsonl.gz says") || strings.Contains(err.Error(), WARCFile) {
		t.Errorf("error %v, want one naming %q and entries.jsonl.gz", err, want)
	}

	// an unpacked bundle keeps its names
	editBundle := filepath.Join(t.TempDir(), "plain")
	writeHandBundle(t, editBundle, xs)
	plain, err := OpenBundle(editBundle)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.Entries[0].Size++
	_, err = plain.Response(&plain.Entries[0])
	if want := filepath.Join(editBundle, WARCFile) + " at offset 0 (entry e000001): payload is"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "entries.jsonl says") {
		t.Errorf("unpacked bundle: error %v, want one naming %q", err, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
