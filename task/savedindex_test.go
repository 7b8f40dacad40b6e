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
	defer o.Bundle.Close()
	o.Index.WaitSaved()
	var got []string
	for i := range o.Bundle.Entries {
		e := &o.Bundle.Entries[i]
		res := o.Index.Lookup(rules.Request{Method: e.Method, URL: mustURL(t, e.URL)})
		id := ""
		if res.Entry != nil {
			id = res.Entry.ID
		}
		got = append(got, res.Source+" "+id)
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
				want = "written: computed from another recording, rules or pab"
			}
			if st, _ := openState(t, repo); st != want {
				t.Errorf("open after the recording's times changed: %q, want %q", st, want)
			}

			// a rule file changed just now: no saved index used or written
			stampRacyAge = time.Hour
			if err := os.WriteFile(filepath.Join(repo.SitesDir(), "extra.yaml"), []byte("hosts: [\"other.test\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if st, _ := openState(t, repo); st != "" {
				t.Errorf("open with a racy rule file: %q, want no saved index", st)
			}
			stampRacyAge = 0
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
