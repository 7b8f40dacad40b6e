package task

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
)

// stampPath returns the one stamp file in the repository's cache.
func stampPath(t *testing.T, repo *Repo) string {
	t.Helper()
	got, _ := filepath.Glob(filepath.Join(repo.CacheDir(), stampsDir, "*.json"))
	if len(got) != 1 {
		t.Fatalf("stamps %q, want exactly one", got)
	}
	return got[0]
}

func TestRecordingHashStamp(t *testing.T) {
	orig := stampRacyAge
	stampRacyAge = 0 // the test's recording was just written
	t.Cleanup(func() { stampRacyAge = orig })
	repo, tk := newRepo(t)
	rec := tk.RecordingDir()
	files, err := recording.RecordingFiles(rec)
	if err != nil {
		t.Fatal(err)
	}
	real, err := recording.HashRecording(rec)
	if err != nil {
		t.Fatal(err)
	}
	hash := func() string {
		t.Helper()
		h, err := recordingHash(repo.CacheDir(), rec, files)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := hash(); h != real {
		t.Fatalf("first hash %s, want %s", h, real)
	}
	path := stampPath(t, repo)
	st, err := readStamp(path)
	if err != nil || st.Hash != real || len(st.Files) != len(files) {
		t.Fatalf("stamp %+v, %v", st, err)
	}

	// A matching stamp is believed without reading the recording: plant a different hash.
	fake := strings.Repeat("ab", 32)
	st.Hash = fake
	writeStamp(path, *st)
	if h := hash(); h != fake {
		t.Fatalf("with a matching stamp: %s, want the stamped %s", h, fake)
	}

	// Any change to a file's identity means hashing again (and a fresh stamp).
	warcPart := ""
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "warc.tar.gz") {
			warcPart = f
		}
	}
	if warcPart == "" {
		t.Fatalf("no warc.tar.gz part in %q", files)
	}
	later := time.Now().Add(-time.Hour)
	if err := os.Chtimes(warcPart, later, later); err != nil {
		t.Fatal(err)
	}
	if h := hash(); h != real {
		t.Fatalf("after a new mtime: %s, want the real hash", h)
	}
	if st2, err := readStamp(path); err != nil || st2.Hash != real {
		t.Fatalf("stamp not rewritten: %+v, %v", st2, err)
	}

	// Same size, same mtime, new content through a new inode: hashed again.
	data, err := os.ReadFile(warcPart)
	if err != nil {
		t.Fatal(err)
	}
	st, _ = readStamp(path)
	data[len(data)/2] ^= 0xff
	tmp := warcPart + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, warcPart); err != nil {
		t.Fatal(err)
	}
	changed, err := recording.HashRecording(rec)
	if err != nil || changed == real {
		t.Fatalf("changed recording hashes to %s (%v)", changed, err)
	}
	if h := hash(); h != changed {
		t.Fatalf("after replacing the file: %s, want %s", h, changed)
	}

	// Corrupt, truncated, foreign or oversized stamps mean hashing again.
	for name, body := range map[string]string{
		"garbage":   "\x00not json",
		"truncated": `{"version":1,"recording":"` + rec,
		"unknown":   `{"version":1,"extra":1}`,
		"bad hash":  `{"version":1,"recording":"x","files":[{"name":"a"}],"hash":"zz"}`,
		"huge":      strings.Repeat(" ", maxStampBytes+1),
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if h := hash(); h != changed {
			t.Errorf("%s stamp: %s, want %s", name, h, changed)
		}
		if st, err := readStamp(path); err != nil || st.Hash != changed {
			t.Errorf("%s stamp not replaced by a good one: %v", name, err)
		}
	}
	st, _ = readStamp(path)
	st.Recording = "/elsewhere"
	st.Hash = fake
	writeStamp(path, *st)
	if h := hash(); h != changed {
		t.Errorf("stamp of another directory used: %s", h)
	}
	// No temporary files are left behind.
	if left, _ := filepath.Glob(filepath.Join(repo.CacheDir(), stampsDir, "*.tmp-*")); len(left) > 0 {
		t.Errorf("temporary stamp files left: %q", left)
	}
}

// TestRecordingHashRacy checks that a recording changed within stampRacyAge is hashed but
// not stamped.
func TestRecordingHashRacy(t *testing.T) {
	repo, tk := newRepo(t) // just written: racy under the default age
	files, _ := recording.RecordingFiles(tk.RecordingDir())
	if _, err := recordingHash(repo.CacheDir(), tk.RecordingDir(), files); err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.Glob(filepath.Join(repo.CacheDir(), stampsDir, "*")); len(got) != 0 {
		t.Errorf("stamps %q written for a recording changed just now", got)
	}
}

// TestBundleDirUsesStamp checks that BundleDir finds the same unpacked copy through the
// stamp, and a new one when the recording changes.
func TestBundleDirUsesStamp(t *testing.T) {
	orig := stampRacyAge
	stampRacyAge = 0
	t.Cleanup(func() { stampRacyAge = orig })
	repo, tk := newRepo(t)
	n := countUnpacks(t)
	dir, err := tk.BundleDir()
	if err != nil {
		t.Fatal(err)
	}
	stampPath(t, repo)
	again, err := tk.BundleDir()
	if err != nil || again != dir || n.Load() != 1 {
		t.Fatalf("second call: %s, %v, %d unpacks", again, err, n.Load())
	}
	// Republish with one more page (a new pages.jsonl renamed into place): a new hash, a
	// new copy.
	rec := tk.RecordingDir()
	pages := filepath.Join(rec, recording.RecordingPagesFile)
	pf, err := os.ReadFile(pages)
	if err != nil {
		t.Fatal(err)
	}
	pf = append(pf, `{"url":"https://books.toscrape.com/extra","ts":"2024-01-01T00:00:00Z","fetched":"GET"}`+"\n"...)
	if err := os.WriteFile(pages+".new", pf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pages+".new", pages); err != nil {
		t.Fatal(err)
	}
	if h, _ := recording.HashRecording(rec); strings.HasPrefix(filepath.Base(dir), "books-"+h[:16]) {
		t.Fatalf("the republished recording hashes as before (%s): the test changed nothing", h)
	}
	moved, err := tk.BundleDir()
	if err != nil {
		t.Fatal(err)
	}
	if moved == dir || n.Load() != 2 {
		t.Errorf("after republishing: %s (was %s), %d unpacks; want a new copy", moved, dir, n.Load())
	}
}
