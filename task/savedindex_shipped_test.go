package task

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// TestSavedIndexShippedTasks: for every task shipped in tasks/, the index read in place
// from the saved index (second Open: the bundle from its entry table, nothing of
// entries.jsonl read) answers and explains every probe (each recorded request as recorded,
// with a parameter added and one changed, as HEAD, one path deeper, and its search text cut
// short) exactly as the index computed from the recording on the first Open: the exact,
// search, promo, fuzzy and latest steps alike.
func TestSavedIndexShippedTasks(t *testing.T) {
	repo, _ := shippedRepo(t)
	// a fresh clone's files may be seconds old: the saved index is written all the same
	stampRacyAge = 0
	for _, id := range shippedTaskIDs(t, repo) {
		t.Run(id, func(t *testing.T) {
			t.Setenv("PAB_CACHE", t.TempDir())
			first, reqs, want := openProbed(t, id, repo)
			if st := first.Index.SavedIndexState(); !strings.HasPrefix(st, "written: ") {
				first.Close()
				t.Fatalf("no saved index was written for this task: %q", st)
			}
			first.Close()
			again, err := Open(id, repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if st := again.Index.SavedIndexState(); st != "loaded" || !again.Bundle.FromTable() {
				t.Fatalf("second open: %q, from the entry table %v; want both", st, again.Bundle.FromTable())
			}
			got := probeDecisions(again.Index, reqs)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("probe %s %s:\nread in place: %s\ncomputed:      %s", reqs[i].Method, reqs[i].URL, got[i], want[i])
				}
			}
		})
	}
}

// TestSavedIndexBuiltShippedTasks: for every task shipped in tasks/, the first start of a
// recording at or above streamIndexBytes (made 0 here) builds the saved index one entry at
// a time (replay.BuildSavedIndex) and opens from it: the file has the same bytes as the one
// the in-memory start writes, and the index answers every probe as the computed one. With
// the recording's files just changed (no key), the file built is this start's only: the
// answers are the same and nothing is left in the cache.
func TestSavedIndexBuiltShippedTasks(t *testing.T) {
	repo, origBytes := shippedRepo(t)
	for _, id := range shippedTaskIDs(t, repo) {
		t.Run(id, func(t *testing.T) {
			stampRacyAge, streamIndexBytes = 0, origBytes
			t.Setenv("PAB_CACHE", t.TempDir())
			computed, reqs, want := openProbed(t, id, repo)
			files, _ := filepath.Glob(filepath.Join(repo.CacheDir(), savedIndexDir, "*.idx"))
			if len(files) != 1 {
				t.Fatalf("the in-memory start wrote %v, want one saved index", files)
			}
			inMemory, err := os.ReadFile(files[0])
			computed.Close()
			if err != nil {
				t.Fatal(err)
			}

			streamIndexBytes = 0
			t.Setenv("PAB_CACHE", t.TempDir())
			built, err := Open(id, repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if st := built.Index.SavedIndexState(); st != "loaded" || !built.Bundle.FromTable() {
				t.Errorf("built start: %q, from the entry table %v; want both", st, built.Bundle.FromTable())
			}
			checkDecisions(t, "built", probeDecisions(built.Index, reqs), want, reqs)
			built.Close()
			got, err := os.ReadFile(filepath.Join(repo.CacheDir(), savedIndexDir, filepath.Base(files[0])))
			if err != nil {
				t.Fatalf("the built start left no saved index: %v", err)
			}
			if !bytes.Equal(got, inMemory) {
				t.Errorf("the built saved index (%d bytes) differs from the in-memory start's (%d bytes)", len(got), len(inMemory))
			}

			// every file "just changed" (a window of a century, whatever the clone's age): no key
			stampRacyAge = 100 * 365 * 24 * time.Hour
			t.Setenv("PAB_CACHE", t.TempDir())
			racy, err := Open(id, repo, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !racy.Bundle.FromTable() {
				t.Errorf("a start with no key did not open from a built index")
			}
			checkDecisions(t, "built without a key", probeDecisions(racy.Index, reqs), want, reqs)
			racy.Close()
			left, _ := os.ReadDir(filepath.Join(repo.CacheDir(), savedIndexDir))
			if len(left) != 0 {
				t.Errorf("a start with no key left %v in the cache", left)
			}
		})
	}
}

// openProbed opens task id of repo, asks it the shipped probes and waits for its saved
// index to be written; it returns the opened target (the caller closes it), the probes and
// their decisions.
func openProbed(t *testing.T, id string, repo *Repo) (*Opened, []rules.Request, []string) {
	t.Helper()
	o, err := Open(id, repo, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	reqs := shippedProbes(o)
	want := probeDecisions(o.Index, reqs)
	o.Index.WaitSaved()
	return o, reqs, want
}

// shippedTaskIDs are the ids of the tasks shipped in repo with a recording.
func shippedTaskIDs(t *testing.T, repo *Repo) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(repo.TasksDir(), "*", "recording"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("shipped tasks: %v %v", dirs, err)
	}
	ids := make([]string, len(dirs))
	for i, d := range dirs {
		ids[i] = filepath.Base(filepath.Dir(d))
	}
	return ids
}

// shippedRepo is the repository of the shipped tasks, with stampRacyAge and
// streamIndexBytes restored when the test ends; it returns streamIndexBytes as it was.
func shippedRepo(t *testing.T) (*Repo, int64) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	origRacy, origBytes := stampRacyAge, streamIndexBytes
	t.Cleanup(func() { stampRacyAge, streamIndexBytes = origRacy, origBytes })
	return &Repo{Root: root}, origBytes
}

// checkDecisions reports each probe whose decision got differs from want's.
func checkDecisions(t *testing.T, what string, got, want []string, reqs []rules.Request) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("probe %s %s:\n%s: %s\ncomputed: %s", reqs[i].Method, reqs[i].URL, what, got[i], want[i])
		}
	}
}

// shippedProbes are the requests TestSavedIndexShippedTasks asks of a recording.
func shippedProbes(o *Opened) []rules.Request {
	var out []rules.Request
	b := o.Bundle
	for i := range b.Len() {
		e := b.Entry(i)
		u, err := url.Parse(e.URL)
		if err != nil {
			continue
		}
		body, _ := b.RequestBody(e)
		out = append(out, rules.Request{Method: e.Method, URL: u, Body: body, ContentType: e.ReqType})
		out = append(out, rules.Request{Method: "HEAD", URL: u})
		v := *u
		q := v.Query()
		q.Set("zz", "1")
		for k := range q {
			if k != "zz" {
				q.Set(k, q.Get(k)+"x")
				break
			}
		}
		v.RawQuery = q.Encode()
		out = append(out, rules.Request{Method: e.Method, URL: &v})
		w := *u
		w.Path += "/deeper"
		out = append(out, rules.Request{Method: "GET", URL: &w})
		if ep := o.Rules.Endpoint(rules.Request{Method: e.Method, URL: u}); ep != nil && ep.TextParam != "" {
			if text := u.Query().Get(ep.TextParam); len(text) > 2 {
				x := *u
				qq := x.Query()
				qq.Set(ep.TextParam, text[:len(text)-2])
				x.RawQuery = qq.Encode()
				out = append(out, rules.Request{Method: e.Method, URL: &x})
			}
		}
	}
	return out
}

// probeDecisions renders the answer and explanation of each request.
func probeDecisions(ix *replay.Index, reqs []rules.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		var sb strings.Builder
		ix.Explain(r).Print(&sb)
		res := ix.Lookup(r)
		id := "-"
		if res.Entry != nil {
			id = res.Entry.ID
		}
		sb.WriteString(string(res.Source) + " " + id + " " + res.Note + " " + res.Rule + " " + res.Endpoint)
		out[i] = sb.String()
	}
	return out
}

// TestSavedIndexBuiltSideBySide: starts of the same large recording side by side (as pab
// run starts them) all open from a built saved index and answer as the computed index;
// it is built once (the others wait for it), and the cache holds one saved index after
// them and no temporary file.
func TestSavedIndexBuiltSideBySide(t *testing.T) {
	repo, _ := shippedRepo(t)
	stampRacyAge = 0
	t.Setenv("PAB_CACHE", t.TempDir())
	const id = "archive-org-jobs"
	computed, reqs, want := openProbed(t, id, repo)
	computed.Close()

	streamIndexBytes = 0
	t.Setenv("PAB_CACHE", t.TempDir())
	const starts = 4
	got := make([][]string, starts)
	errs := make([]error, starts)
	fromTable := make([]bool, starts)
	builds := savedIndexBuilds.Load()
	var wg sync.WaitGroup
	for i := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := Open(id, repo, io.Discard)
			if err != nil {
				errs[i] = err
				return
			}
			defer o.Close()
			fromTable[i] = o.Bundle.FromTable()
			got[i] = probeDecisions(o.Index, reqs)
		}()
	}
	wg.Wait()
	if n := savedIndexBuilds.Load() - builds; n != 1 {
		t.Errorf("%d starts side by side built the saved index %d times, want once", starts, n)
	}
	for i := range starts {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if !fromTable[i] {
			t.Errorf("start %d did not open from the built saved index", i)
		}
		checkDecisions(t, fmt.Sprintf("start %d", i), got[i], want, reqs)
	}
	var names []string
	ents, _ := os.ReadDir(filepath.Join(repo.CacheDir(), savedIndexDir))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".lock") {
			names = append(names, e.Name())
		}
	}
	if len(names) != 1 || !strings.HasSuffix(names[0], ".idx") {
		t.Errorf("the cache holds %v, want one saved index", names)
	}
}
