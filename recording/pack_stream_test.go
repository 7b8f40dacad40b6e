package recording

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// packInMemory is what packStaged did before packStream: the bundle opened, its entries in
// memory, sorted by archive offset (packMembers), then entries.jsonl.gz.
func packInMemory(t *testing.T, bundleDir, dir string, partSize int64) {
	t.Helper()
	b, err := OpenBundle(bundleDir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	entries, err := packMembers(b, dir, partSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeEntriesGz(filepath.Join(dir, RecordingEntriesFile), entries); err != nil {
		t.Fatal(err)
	}
}

// sameDirs fails unless dirs a and b hold the same files with the same bytes.
func sameDirs(t *testing.T, a, b string) {
	t.Helper()
	list := func(d string) []string {
		des, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}
	na, nb := list(a), list(b)
	if !slices.Equal(na, nb) {
		t.Fatalf("files %v, want %v", na, nb)
	}
	for _, n := range na {
		if !bytes.Equal(mustRead(t, filepath.Join(a, n)), mustRead(t, filepath.Join(b, n))) {
			t.Errorf("%s differs", n)
		}
	}
}

// TestPackStreamSameBytes: packing one entry at a time gives the bytes packing with the
// entries in memory gives, for a hand-made bundle (with gaps between records) and for a
// bundle ImportWARCs wrote from a real crawl (with request records), whole and cut into
// small parts; a bundle whose entries are not in archive order is refused by packStream and
// packed by PackStaged all the same, with the same bytes as before.
func TestPackStreamSameBytes(t *testing.T) {
	hand := filepath.Join(t.TempDir(), "hand")
	writeHandBundle(t, hand, handExchanges())
	imported := filepath.Join(t.TempDir(), "imported")
	// the repository's demo crawl (a 2018 capture of books.toscrape.com, README.md)
	if _, err := ImportWARCs([]string{filepath.Join("..", "testdata", "sites", "books.toscrape.warc")}, imported, ImportOptions{TaskID: "books"}); err != nil {
		t.Fatal(err)
	}
	for _, bundle := range []string{hand, imported} {
		for _, partSize := range []int64{PartSize, 700} {
			a, b := t.TempDir(), t.TempDir()
			if err := packStream(context.Background(), bundle, a, partSize); err != nil {
				t.Fatalf("%s: %v", bundle, err)
			}
			packInMemory(t, bundle, b, partSize)
			sameDirs(t, a, b)
		}
	}

	// entries out of archive order: every line reversed
	data := mustRead(t, filepath.Join(imported, EntriesFile))
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	slices.Reverse(lines)
	out := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(imported, EntriesFile), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := packStream(context.Background(), imported, t.TempDir(), PartSize); !errors.Is(err, errNotInArchiveOrder) {
		t.Fatalf("reversed entries: %v, want errNotInArchiveOrder", err)
	}
	rec := filepath.Join(t.TempDir(), "recording")
	staged, err := PackStaged(imported, rec, PartSize)
	if err != nil {
		t.Fatal(err)
	}
	b := t.TempDir()
	packInMemory(t, imported, b, PartSize)
	for _, n := range []string{RecordingEntriesFile, RecordingDataFile} {
		if !bytes.Equal(mustRead(t, filepath.Join(staged, n)), mustRead(t, filepath.Join(b, n))) {
			t.Errorf("reversed entries, packed by PackStaged: %s differs", n)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(rec), ".recording.tmp-*")); len(leftovers) != 1 {
		t.Errorf("staging directories beside the recording: %v, want the one staged", leftovers)
	}
}

// TestPackStreamChecksEntries: packStream refuses what OpenBundle refuses in entries.jsonl
// (here a duplicate id and a record past the archive's end), naming the file and line.
func TestPackStreamChecksEntries(t *testing.T) {
	for name, edit := range map[string]func(string) string{
		"duplicate id": func(s string) string { return strings.Replace(s, `"id":"e000002"`, `"id":"e000001"`, 1) },
		"past the end": func(s string) string { return strings.Replace(s, `"respOffset":0`, `"respOffset":99999999`, 1) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "hand")
			writeHandBundle(t, dir, handExchanges())
			p := filepath.Join(dir, EntriesFile)
			edited := edit(string(mustRead(t, p)))
			if edited == string(mustRead(t, p)) {
				t.Fatal("the edit changed nothing")
			}
			if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			_, openErr := OpenBundle(dir)
			err := packStream(context.Background(), dir, t.TempDir(), PartSize)
			if err == nil || openErr == nil || !strings.Contains(err.Error(), p+" line ") {
				t.Errorf("packStream: %v (OpenBundle: %v)", err, openErr)
			}
		})
	}
}

// TestOpenBundleSample: a sample of max entries is evenly spaced from the first, holds the
// original of each revisit in it, and reads responses as the whole bundle does; max at or
// above the size, or 0, gives every entry.
func TestOpenBundleSample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hand")
	writeHandBundle(t, dir, handExchanges())
	whole, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	n := whole.Len()
	// the revisit e000003 of e000002: a sample of 2 of n takes entries 0 and n/2
	for _, c := range []struct {
		max  int
		want []string
	}{
		{0, nil}, {n, nil}, {n + 5, nil},
		{1, []string{whole.Entries[0].ID}},
	} {
		b, total, err := OpenBundleSample(dir, c.max)
		if err != nil {
			t.Fatal(err)
		}
		if total != n || b.Pages != nil {
			t.Errorf("max %d: total %d, want %d; %d pages read", c.max, total, n, len(b.Pages))
		}
		var ids []string
		for i := range b.Len() {
			ids = append(ids, b.Entry(i).ID)
		}
		want := c.want
		if want == nil {
			for i := range whole.Entries {
				want = append(want, whole.Entries[i].ID)
			}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("max %d: entries %v, want %v", c.max, ids, want)
		}
		b.Close()
	}
	// a sample that takes the revisit: its original comes along, and the revisit's
	// response has the original's payload
	rev := -1
	for i := range whole.Entries {
		if whole.Entries[i].RevisitOf != "" && !whole.Entries[i].Unresolved {
			rev = i
			break
		}
	}
	if rev <= 0 {
		t.Fatal("the hand bundle has no resolved revisit after its first entry")
	}
	for max := 2; max <= n; max++ {
		taken := false
		for _, k := range spreadIndexes(n, max) {
			taken = taken || k == rev
		}
		if !taken {
			continue
		}
		b, _, err := OpenBundleSample(dir, max)
		if err != nil {
			t.Fatal(err)
		}
		e := b.ByID(whole.Entries[rev].ID)
		if e == nil || b.ByID(e.RevisitOf) == nil {
			t.Fatalf("max %d: the revisit or its original is missing", max)
		}
		got, err := b.Response(e)
		if err != nil {
			t.Fatal(err)
		}
		wantResp, err := whole.Response(&whole.Entries[rev])
		if err != nil {
			t.Fatal(err)
		}
		gb, _ := io.ReadAll(got.Body)
		wb, _ := io.ReadAll(wantResp.Body)
		if !bytes.Equal(gb, wb) || len(gb) == 0 {
			t.Errorf("max %d: revisit body %q, want %q", max, gb, wb)
		}
		b.Close()
		return
	}
	t.Fatal("no sample size takes the revisit")
}

// countdownCtx is a context whose Err turns to context.Canceled once it has been asked
// more than n times: an interruption in the middle of a loop that checks it.
type countdownCtx struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *countdownCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// TestPackAndAuditInterrupted: PackStagedContext and AuditRecordingContext stop when their
// context ends, before the start or part way through (after a few records or members),
// with an error wrapping context.Canceled; the pack leaves no staging directory, and an
// audit of the same recording with a live context finds it sound.
func TestPackAndAuditInterrupted(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "imported")
	if _, err := ImportWARCs([]string{filepath.Join("..", "testdata", "sites", "books.toscrape.warc")}, bundle, ImportOptions{TaskID: "books"}); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "recording")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for name, ctx := range map[string]context.Context{"canceled": done, "after 5 checks": &countdownCtx{Context: context.Background(), n: 5}} {
		if _, err := PackStagedContext(ctx, bundle, rec, 700); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: pack: %v, want context.Canceled", name, err)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(rec), ".recording.tmp-*")); len(left) != 0 {
			t.Errorf("%s: staging directories left: %v", name, left)
		}
	}
	staged, err := PackStagedContext(context.Background(), bundle, rec, 700)
	if err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{"canceled": done, "after 5 checks": &countdownCtx{Context: context.Background(), n: 5}} {
		if probs, err := AuditRecordingContext(ctx, staged, filepath.Join(t.TempDir(), "audit")); !errors.Is(err, context.Canceled) || probs != nil {
			t.Errorf("%s: audit: %v (%d problems), want context.Canceled and none", name, err, len(probs))
		}
	}
	if probs, err := AuditRecordingContext(context.Background(), staged, filepath.Join(t.TempDir(), "audit")); err != nil || len(Blocking(probs)) != 0 {
		t.Errorf("audit: %v, %v", err, probs)
	}
}
