package recording

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPackTeeSameBytes: a bundle packed by ImportWARCs as it writes it (PackDir, then
// FinishTeePack) has the files, byte for byte, that PackStaged gives for the bundle
// written, for the repository's demo crawl (request records, revisits of identical
// payloads, pages) and for a bundle of three small parts; and the packed recording passes
// the audit.
func TestPackTeeSameBytes(t *testing.T) {
	crawl := filepath.Join("..", "testdata", "sites", "books.toscrape.warc")
	for _, partSize := range []int64{PartSize, 100 << 10} {
		tmp := t.TempDir()
		bundle := filepath.Join(tmp, "bundle")
		rec := filepath.Join(tmp, "task", "recording")
		staged, err := NewStagingDir(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ImportWARCs([]string{crawl}, bundle, ImportOptions{TaskID: "books", PackDir: staged, partSize: partSize}); err != nil {
			t.Fatal(err)
		}
		if err := FinishTeePack(bundle, staged); err != nil {
			t.Fatal(err)
		}
		want, err := packStaged(context.Background(), bundle, filepath.Join(tmp, "other", "recording"), partSize, RecordingFormat)
		if err != nil {
			t.Fatal(err)
		}
		sameDirs(t, staged, want)
		if files, _ := RecordingFiles(want); partSize < PartSize && len(files) < 6 {
			t.Errorf("%d files, want several parts", len(files))
		}
		if probs := AuditRecording(staged, filepath.Join(tmp, "audit")); len(probs) > 0 {
			t.Errorf("audit: %s", problemText(probs))
		}
	}
}

// TestPackTeeInterrupted: an import stopped while it writes stops the pack too, with the
// context's error, and leaves the pack's directory to the caller (no goroutine left
// writing into it: it is removed whole).
func TestPackTeeInterrupted(t *testing.T) {
	crawl := filepath.Join("..", "testdata", "sites", "books.toscrape.warc")
	tmp := t.TempDir()
	staged, err := NewStagingDir(filepath.Join(tmp, "task", "recording"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := false
	_, err = ImportWARCs([]string{crawl}, filepath.Join(tmp, "bundle"), ImportOptions{TaskID: "books", PackDir: staged, Context: ctx,
		Progress: func(p ImportProgress) {
			if p.Phase == "write" && !stopped {
				stopped = true
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if err := os.RemoveAll(staged); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "bundle")); !os.IsNotExist(err) {
		t.Errorf("bundle: %v, want none", err)
	}
}
