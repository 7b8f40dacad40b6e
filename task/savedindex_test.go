package task

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// openState opens target "books" of repo and returns what its index did with the saved
// index, and the index's decision for every entry's own URL.
func openState(t *testing.T, repo *Repo) (string, []string) {
	t.Helper()
	o, err := Open("books", repo, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Index.WaitSaved()
	var got []string
	for i := range o.Bundle.Len() {
		e := o.Bundle.Entry(i)
		res := o.Index.Lookup(rules.Request{Method: e.Method, URL: mustURL(t, e.URL)})
		id := ""
		if res.Entry != nil {
			id = res.Entry.ID
		}
		got = append(got, string(res.Source)+" "+id)
	}
	return o.Index.SavedIndexState(), got
}

// TestOpenSavedIndex: the second Open of an unchanged task reads the index saved by the
// first (in the cache, under indexes/) and decides the same; a changed rule file or a
// changed recording makes it compute the index again and save it anew; a file changed
// within the racy window means no saved index at all. In both published formats.
func TestOpenSavedIndex(t *testing.T) {
	orig := stampRacyAge
	stampRacyAge = 0 // the test's files were just written
	t.Cleanup(func() { stampRacyAge = orig })
	for _, format := range []int{2, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			repo, tk := newRepoFormat(t, format)
			st, first := openState(t, repo)
			if !strings.HasPrefix(st, "written: ") {
				t.Fatalf("first open: %q, want written", st)
			}
			saved, err := filepath.Glob(filepath.Join(repo.CacheDir(), savedIndexDir, "*.idx"))
			if err != nil || len(saved) != 1 {
				t.Fatalf("saved index files: %v, %v; want one", saved, err)
			}
			st, again := openState(t, repo)
			if st != "loaded" || strings.Join(again, "\n") != strings.Join(first, "\n") {
				t.Fatalf("second open: %q (same decisions: %v), want loaded", st, strings.Join(again, "\n") == strings.Join(first, "\n"))
			}

			// a rule file added: another key
			if err := os.WriteFile(filepath.Join(repo.SitesDir(), "extra.yaml"), []byte("hosts: [\"nothing.test\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if st, _ := openState(t, repo); !strings.Contains(st, "another recording, rules or pab") {
				t.Errorf("open after a rule change: %q, want rebuilt for another key", st)
			}
			if st, _ := openState(t, repo); st != "loaded" {
				t.Errorf("open after the rebuild: %q, want loaded", st)
			}

			// the recording's files touched: other times, another key for the recording read
			// in place; format 2's unpacked copy is found again by the recording's hash and
			// is itself unchanged, so its saved index stays good
			earlier := time.Now().Add(-time.Hour)
			files, _ := filepath.Glob(filepath.Join(tk.Dir, "recording", "*"))
			for _, f := range files {
				if err := os.Chtimes(f, earlier, earlier); err != nil {
					t.Fatal(err)
				}
			}
			want := "loaded"
			if format == 3 {
				want = "written: saved index " + filepath.Join(repo.CacheDir(), savedIndexDir) + string(filepath.Separator)
			}
			if st, _ := openState(t, repo); !strings.HasPrefix(st, want) || (format == 3 && !strings.HasSuffix(st, ": computed from another recording, rules or pab")) {
				t.Errorf("open after the recording's times changed: %q, want %q", st, want)
			}

			// the bundle's files changed within the racy window (all were written or touched
			// less than an hour ago): no saved index used or written
			stampRacyAge = time.Hour
			if st, _ := openState(t, repo); st != "" {
				t.Errorf("open with racy recording files: %q, want no saved index", st)
			}
			stampRacyAge = 0

			// a rule file edited to the same size and times: the key hashes the bytes
			// rules.Load read, so it is another key all the same
			extra := filepath.Join(repo.SitesDir(), "extra.yaml")
			fi, _ := os.Stat(extra)
			if err := os.WriteFile(extra, []byte("hosts: [\"nothing.tesT\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(extra, fi.ModTime(), fi.ModTime())
			if st, _ := openState(t, repo); !strings.Contains(st, "another recording, rules or pab") {
				t.Errorf("open after a same-size rule edit: %q, want rebuilt for another key", st)
			}
		})
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSavedIndexRecordingReplacedWhileOpening: a recording published (a directory renamed
// into place) between the moment Open looked at its files and the key is never given the
// index of the one that was read (the key would name the new files).
func TestSavedIndexRecordingReplacedWhileOpening(t *testing.T) {
	orig := stampRacyAge
	stampRacyAge = 0
	t.Cleanup(func() { stampRacyAge = orig })
	repo, tk := newRepoFormat(t, 3)
	o, err := Open("books", repo, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	rec := o.Target.BundleDir
	before, ok := indexInputs(rec)
	if !ok {
		t.Fatal("indexInputs: not ok")
	}
	if _, ok := savedIndexOptions(repo.CacheDir(), rec, before, o.Rules); !ok {
		t.Fatal("unchanged recording: no saved index options")
	}
	// publish a copy of the recording (same bytes, other files) over it
	next := filepath.Join(tk.Dir, "recording.next")
	if err := os.CopyFS(next, os.DirFS(rec)); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(tk.Dir, "recording.old")
	if err := os.Rename(rec, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := savedIndexOptions(repo.CacheDir(), rec, before, o.Rules); ok {
		t.Error("recording replaced after it was opened: saved index options given, want none")
	}
}

// TestRunningExecutable: the key names the pab that runs (/proc/self/exe), not whatever
// file is at its path now: a binary renamed over it (go build -o, install) does not make a
// running old pab save its indexes under the new one's key.
func TestRunningExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	self0, ok := statRecordingFiles([]string{"/proc/self/exe"})
	if !ok {
		testtool.Missing(t, "no /proc/self/exe with an inode here (Linux has one)")
	}
	// replace the test binary at its path (it keeps running from its inode)
	other := exe + ".other"
	if err := os.WriteFile(other, []byte("another pab"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep := exe + ".kept"
	if err := os.Link(exe, keep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(keep, exe) })
	if err := os.Rename(other, exe); err != nil {
		t.Fatal(err)
	}
	self1, _ := statRecordingFiles([]string{"/proc/self/exe"})
	atPath, _ := statRecordingFiles([]string{exe})
	if len(self1) != 1 || self1[0].Ino != self0[0].Ino {
		t.Errorf("/proc/self/exe after the replace: %+v, want the running inode %d", self1, self0[0].Ino)
	}
	if len(atPath) == 1 && atPath[0].Ino == self0[0].Ino {
		t.Error("the file at the executable's path was not replaced: the test proves nothing")
	}
}

// TestSavedIndexPagesOnDemand: a bundle opened from the saved index has not read its
// pages.jsonl (Pages nil); AllPages reads it when asked and gives the pages the computed
// open gave; a pages.jsonl that turns unreadable afterwards is an error of AllPages naming
// the file, not of the open.
func TestSavedIndexPagesOnDemand(t *testing.T) {
	orig := stampRacyAge
	stampRacyAge = 0
	t.Cleanup(func() { stampRacyAge = orig })
	for _, format := range []int{2, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			repo, _ := newRepoFormat(t, format)
			o, err := Open("books", repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			o.Index.WaitSaved()
			want, err := o.Bundle.AllPages()
			o.Close()
			if err != nil || len(want) == 0 {
				t.Fatalf("computed open: %d pages, %v", len(want), err)
			}
			o, err = Open("books", repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			if !o.Bundle.FromTable() || o.Bundle.Pages != nil {
				t.Fatalf("loaded open: from table %v, %d pages read at open", o.Bundle.FromTable(), len(o.Bundle.Pages))
			}
			got, err := o.Bundle.AllPages()
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("AllPages: %v\n%v\nwant %v", err, got, want)
			}

			o2, err := Open("books", repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer o2.Close()
			var pf string
			for _, name := range []string{recording.PagesFile, recording.RecordingPagesFile} {
				if _, err := os.Stat(filepath.Join(o2.Bundle.Dir, name)); err == nil {
					pf = filepath.Join(o2.Bundle.Dir, name)
				}
			}
			if !o2.Bundle.FromTable() || pf == "" {
				t.Fatalf("second loaded open: from table %v, pages file %q", o2.Bundle.FromTable(), pf)
			}
			if err := os.WriteFile(pf, []byte("{not json\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := o2.Bundle.AllPages(); err == nil || !strings.Contains(err.Error(), pf) {
				t.Errorf("AllPages of a damaged pages file: %v, want an error naming %s", err, pf)
			}
		})
	}
}

// TestSavedIndexBuiltFormats: a recording at or above streamIndexBytes (made 0 here) opens
// from a saved index built one entry at a time, read in place (format 3) or unpacked first
// (format 2: the unpacked bundle's entries.jsonl), and decides as the in-memory start does;
// a damaged one fails to open with the in-memory start's error, leaving no temporary file
// in the cache.
func TestSavedIndexBuiltFormats(t *testing.T) {
	origRacy, origBytes := stampRacyAge, streamIndexBytes
	t.Cleanup(func() { stampRacyAge, streamIndexBytes = origRacy, origBytes })
	stampRacyAge = 0
	for _, format := range []int{2, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			repo, tk := newRepoFormat(t, format)
			streamIndexBytes = origBytes
			_, want := openState(t, repo)
			os.RemoveAll(filepath.Join(repo.CacheDir(), savedIndexDir))

			streamIndexBytes = 0
			o, err := Open("books", repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			fromTable := o.Bundle.FromTable()
			o.Close()
			if !fromTable {
				t.Errorf("the start did not open from a built saved index")
			}
			if st, got := openState(t, repo); st != "loaded" || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("built: %q, same decisions %v; want loaded and the same", st, strings.Join(got, "\n") == strings.Join(want, "\n"))
			}

			// entries.jsonl.gz cut short: the same error either way
			if format != 3 {
				return
			}
			os.RemoveAll(filepath.Join(repo.CacheDir(), savedIndexDir))
			ef := filepath.Join(tk.Dir, "recording", recording.RecordingEntriesFile)
			data, err := os.ReadFile(ef)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ef, data[:len(data)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			streamIndexBytes = origBytes
			_, memErr := Open("books", repo, io.Discard)
			streamIndexBytes = 0
			_, builtErr := Open("books", repo, io.Discard)
			if memErr == nil || builtErr == nil || builtErr.Error() != memErr.Error() {
				t.Errorf("damaged entries: built start's error %v, in-memory start's %v; want the same error", builtErr, memErr)
			}
			left, _ := os.ReadDir(filepath.Join(repo.CacheDir(), savedIndexDir))
			for _, e := range left {
				if !strings.HasSuffix(e.Name(), ".lock") {
					t.Errorf("a failed build left %s in the cache", e.Name())
				}
			}
		})
	}
}

// TestLockBuild: a build lock held elsewhere is waited for up to the given time, then
// given up (nil: the start builds without it); once released, it is taken.
func TestLockBuild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.idx.lock")
	said := 0
	waiting := func() { said++ }
	held := lockBuild(path, time.Second, waiting)
	if held == nil || said != 0 {
		t.Fatalf("a free lock: taken %v, waiting said %d times; want taken, not said", held != nil, said)
	}
	start := time.Now()
	if u := lockBuild(path, 100*time.Millisecond, waiting); u != nil {
		u()
		t.Fatal("a held lock was taken")
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("gave up after %v, before the 100ms asked", waited)
	}
	if said != 1 {
		t.Errorf("a wait was said %d times, want once", said)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		held()
	}()
	u := lockBuild(path, time.Minute, nil)
	if u == nil {
		t.Fatal("the lock was not taken once released")
	}
	u()
}
