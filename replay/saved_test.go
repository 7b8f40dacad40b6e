package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// savedCase is a recording and its rules for the saved index tests: the site recording
// (exclusions, latest, blocked), the shop (search and promo endpoints, bodies) and the
// fidelity recording (redirects).
type savedCase struct {
	name string
	b    *recording.Bundle
	rs   *rules.Set
	root string
}

func savedCases(t *testing.T) []savedCase {
	t.Helper()
	root, shopRS := shopRepo(t, nil)
	return []savedCase{
		{"site", writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges()), testRules(t, defaultTestRules), ""},
		{"shop", writeTestBundle(t, t.TempDir(), recording.Manifest{}, shopExchanges()), shopRS, root},
		{"fidelity", writeTestBundle(t, t.TempDir(), recording.Manifest{}, fidExchanges(t)), testRules(t, fidRules()), ""},
	}
}

// probes are requests for every recorded entry (its own, with a changed query, as HEAD,
// under another path) plus a few never recorded.
func probes(t testing.TB, b *recording.Bundle) []rules.Request {
	t.Helper()
	var out []rules.Request
	for i := range b.Entries {
		e := &b.Entries[i]
		u, err := url.Parse(e.URL)
		if err != nil {
			continue
		}
		body, _ := b.RequestBody(e)
		out = append(out, rules.Request{Method: e.Method, URL: u, Body: body, ContentType: e.ReqType})
		v := *u
		q := v.Query()
		q.Set("zz", "1")
		v.RawQuery = q.Encode()
		out = append(out, rules.Request{Method: e.Method, URL: &v})
		out = append(out, rules.Request{Method: "HEAD", URL: u})
		w := *u
		w.Path += "/deeper"
		out = append(out, rules.Request{Method: "GET", URL: &w})
	}
	for _, raw := range []string{"https://nowhere.test/", "http://site.test/search?q=boot", "https://www.shop.test/s?k=usb+cable+c"} {
		u, _ := url.Parse(raw)
		out = append(out, rules.Request{Method: "GET", URL: u})
	}
	return out
}

// decisions renders what ix answers and explains for every probe.
func decisions(t *testing.T, ix *Index, reqs []rules.Request) string {
	t.Helper()
	var sb strings.Builder
	for _, r := range reqs {
		ex := ix.Explain(r)
		ex.Print(&sb)
		res := ix.Lookup(r)
		id := ""
		if res.Entry != nil {
			id = res.Entry.ID
		}
		sb.WriteString(string(res.Source) + " " + id + " " + res.Note + " " + res.Rule + " " + res.Endpoint + "\n")
	}
	return sb.String()
}

func newSavedIndex(t *testing.T, c savedCase, path string, key SavedIndexKey) *Index {
	t.Helper()
	ix, err := NewIndex(c.b, c.rs, IndexOptions{RuleRoot: c.root, SavedIndex: path, SavedKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ix.WaitSaved()
	return ix
}

// TestSavedIndexRemovesStaleTemps: a write of the saved index removes the temporary files
// of earlier writes that a process left behind, and leaves a recent one (a write going on)
// and other files alone.
func TestSavedIndexRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x[1].idx")
	stale, fresh, other := filepath.Join(dir, ".x[1].idx.tmp-123"), filepath.Join(dir, ".x[1].idx.tmp-456"), filepath.Join(dir, ".y.idx.tmp-789")
	// BuildSavedIndex's parts, and a build's for one start only with its own parts
	parts := []string{filepath.Join(dir, ".x[1].idx.tmp-table-1"), filepath.Join(dir, ".x[1].idx.tmp-blob-2"),
		filepath.Join(dir, ".x[1].idx.tmp-start-3"), filepath.Join(dir, "..x[1].idx.tmp-start-3.tmp-records-4")}
	otherStart := filepath.Join(dir, "..y.idx.tmp-start-5.tmp-table-6")
	old := time.Now().Add(-time.Hour)
	for _, f := range append([]string{stale, fresh, other, otherStart}, parts...) {
		if err := os.WriteFile(f, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range append([]string{stale, other, otherStart}, parts...) {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSaved(path, []byte("data")); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{stale: false, fresh: true, other: true, otherStart: true, path: true}
	for _, f := range parts {
		want[f] = false
	}
	for f, want := range want {
		if _, err := os.Stat(f); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(f), err == nil, want)
		}
	}
}

// TestSavedIndexSameDecisions: an index read from its saved file answers and explains
// every probe exactly as one computed from the recording; a saved index that is damaged,
// cut short, of another key or version, or not a saved index at all is computed again
// (and rewritten), never used.
func TestSavedIndexSameDecisions(t *testing.T) {
	key := SavedIndexKey(sha256.Sum256([]byte("test key")))
	for _, c := range savedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			reqs := probes(t, c.b)
			fresh, err := NewIndex(c.b, c.rs, IndexOptions{RuleRoot: c.root})
			if err != nil {
				t.Fatal(err)
			}
			want := decisions(t, fresh, reqs)
			path := filepath.Join(t.TempDir(), "index", "saved.idx")
			if ix := newSavedIndex(t, c, path, key); !strings.HasPrefix(ix.SavedIndexState(), "written: ") {
				t.Fatalf("first start: %q, want written", ix.SavedIndexState())
			}
			good, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			loaded := newSavedIndex(t, c, path, key)
			if loaded.SavedIndexState() != "loaded" {
				t.Fatalf("second start: %q, want loaded", loaded.SavedIndexState())
			}
			if got := decisions(t, loaded, reqs); got != want {
				t.Errorf("the loaded index decides otherwise:\n%s\nwant:\n%s", got, want)
			}
			if !reflect.DeepEqual(loaded.Skipped(), fresh.Skipped()) || loaded.Len() != fresh.Len() {
				t.Errorf("the loaded index's skipped entries or length differ from the computed one's")
			}
			for ks, sp := range fresh.exact {
				got, ps, ok := loaded.exactOf(ks)
				_, want, _ := fresh.exactOf(ks)
				if !ok || got != sp || (sp.n > 1 && !slices.Equal(ps, want)) {
					t.Errorf("key %q: loaded %+v %v, computed %+v %v", ks, got, ps, sp, want)
				}
			}
			for b, want := range fresh.base {
				if got := loaded.baseOf(b); !slices.Equal(got, want) {
					t.Errorf("base %q: loaded %v, computed %v", b, got, want)
				}
			}
			for u, want := range fresh.urls {
				if got, ok := loaded.urlOf(u); !ok || got != want {
					t.Errorf("url %q: loaded %d, computed %d", u, got, want)
				}
			}
			for i := range fresh.entries {
				a, b := fresh.entries[i], loaded.entry(i)
				ka, kb := a.key, b.key
				ka.Params, kb.Params = nil, nil
				if *a.e != *b.e || !reflect.DeepEqual(ka, kb) || !slices.Equal(a.key.Params, b.key.Params) || a.keyStr != b.keyStr || !slices.Equal(a.params, b.params) ||
					a.static != b.static || a.https != b.https || !reflect.DeepEqual(a.loc, b.loc) {
					t.Errorf("entry %s: loaded %+v, computed %+v", a.e.ID, *b, *a)
				}
			}
			if again, err := encodeDisk(key, c.b, builtOf(t, c)); err != nil || !bytes.Equal(again, good) {
				t.Errorf("a second encoding differs from the file (err %v): not deterministic", err)
			}
			loaded.Close()

			otherKey := key
			otherKey[0] ^= 1
			for _, bad := range []struct {
				name string
				data []byte
				key  SavedIndexKey
				why  string
			}{
				{"flipped header byte", flip(good, 60), key, "header checksum"},
				{"cut short", good[:len(good)-7], key, "counts say"},
				{"empty", nil, key, "not a saved index"},
				{"other key", good, otherKey, "another recording"},
				{"inflated entry count", resum(good, func(d []byte) { d[56]++ }), key, "entries, the bundle has"},
				{"inflated indexed count", resum(good, func(d []byte) { d[64+4] = 0x7f }), key, "do not fit"},
				{"wrong section size", resum(good, func(d []byte) { d[80]++ }), key, "counts say"},
				{"other version", resum(good, func(d []byte) { d[16] = SavedIndexVersion + 1 }), key, "version"},
			} {
				if err := os.WriteFile(path, bad.data, 0o644); err != nil {
					t.Fatal(err)
				}
				ix := newSavedIndex(t, savedCase{c.name, c.b, c.rs, c.root}, path, bad.key)
				if st := ix.SavedIndexState(); !strings.HasPrefix(st, "written: ") || !strings.Contains(st, bad.why) {
					t.Errorf("%s: %q, want written after %q", bad.name, st, bad.why)
				}
				if got := decisions(t, ix, reqs); got != want {
					t.Errorf("%s: the rebuilt index decides otherwise", bad.name)
				}
			}
			// damage inside the sections: found when the record is read, and never an answer
			// the computed index would not give (a miss instead)
			freshRes := make([]Result, len(reqs))
			for i, r := range reqs {
				freshRes[i] = fresh.Lookup(r)
			}
			for off := diskHeadBytes; off < len(good); off += max(1, (len(good)-diskHeadBytes)/97) {
				s, err := parseDisk(flip(good, off), key)
				if err != nil {
					continue
				}
				ix := &Index{b: c.b, rs: c.rs, root: c.root}
				if err := newDiskIndex(ix, s); err != nil {
					continue
				}
				for i, r := range reqs {
					got, want := ix.Lookup(r), freshRes[i]
					if got.Source == SourceMiss || (got.Source == want.Source && (got.Entry == nil) == (want.Entry == nil) && (got.Entry == nil || got.Entry.ID == want.Entry.ID)) {
						continue
					}
					if got.Entry != nil && want.Entry != nil && got.Source == SourceExact && want.Source == SourceExact {
						continue // another copy of the same key: a duplicate's list item was hit
					}
					t.Errorf("byte %d flipped: %s %s answered %s %v, the computed index %s %v", off, r.Method, r.URL, got.Source, entryID(got.Entry), want.Source, entryID(want.Entry))
				}
			}
		})
	}
}

func entryID(e *recording.Entry) string {
	if e == nil {
		return "-"
	}
	return e.ID
}

// flip returns a copy of data with byte off changed.
func flip(data []byte, off int) []byte {
	d := bytes.Clone(data)
	d[off] ^= 0x20
	return d
}

// resum edits a copy of a saved index's header and writes its checksum again: damage the
// checksum cannot see.
func resum(data []byte, edit func([]byte)) []byte {
	d := bytes.Clone(data)
	edit(d)
	sum := sha256.Sum256(d[:128])
	copy(d[128:160], sum[:])
	return d
}

// builtOf computes what NewIndex computes for every entry of c's bundle.
func builtOf(t *testing.T, c savedCase) []built {
	t.Helper()
	ix := &Index{b: c.b, rs: c.rs}
	out := make([]built, c.b.Len())
	ix.buildAll(out)
	return out
}

// FuzzSavedIndex reads fuzzed saved index files (seeded with real ones, their header
// checksum made right so the fuzzer reaches the sections): never a panic, whatever the
// lookup asked of them.
func FuzzSavedIndex(f *testing.F) {
	key := SavedIndexKey(sha256.Sum256([]byte("fuzz key")))
	b := writeTestBundle(f, f.TempDir(), siteManifest(), siteExchanges())
	rs := testRules(f, defaultTestRules)
	path := filepath.Join(f.TempDir(), "saved.idx")
	ix, err := NewIndex(b, rs, IndexOptions{SavedIndex: path, SavedKey: key})
	if err != nil {
		f.Fatal(err)
	}
	ix.WaitSaved()
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, true)
	f.Add(data[:200], true)
	reqs := probes(f, b)
	f.Fuzz(func(t *testing.T, data []byte, sum bool) {
		if sum && len(data) >= diskHeadBytes {
			data = resum(data, func([]byte) {})
		}
		s, err := parseDisk(data, key)
		if err != nil {
			return
		}
		s.Verify()                           //nolint:errcheck // hostile bytes: an error or nil, never a panic
		recording.CheckEntryTable(s.Table()) //nolint:errcheck
		if tb, err := recording.OpenBundleTable(b.Dir, s.Table(), "fuzzed"); err == nil {
			for i := range tb.Len() {
				tb.Entry(i)
			}
			tb.Close()
		}
		ix := &Index{b: b, rs: rs}
		if newDiskIndex(ix, s) != nil {
			return
		}
		for _, r := range reqs {
			ix.Lookup(r)
			ix.Explain(r)
		}
		ix.Skipped()
	})
}

// TestSavedIndexVerify: the saved index of the same recording and rules is the same bytes
// each time it is written, and Verify passes on it; flipping any one byte of the lookup
// lists, the record offsets, the records, the padding or the end of the entry table makes
// opening it or Verify fail.
func TestSavedIndexVerify(t *testing.T) {
	key := SavedIndexKey(sha256.Sum256([]byte("verify key")))
	for _, c := range savedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a.idx"), filepath.Join(dir, "b.idx")
			newSavedIndex(t, c, a, key)
			newSavedIndex(t, c, b, key)
			da, err := os.ReadFile(a)
			if err != nil {
				t.Fatal(err)
			}
			db, err := os.ReadFile(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(da, db) {
				t.Fatalf("two writes of the same saved index differ (%d and %d bytes)", len(da), len(db))
			}
			s, err := OpenSavedIndex(a, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Verify(); err != nil {
				t.Fatalf("Verify of a good file: %v", err)
			}
			tabEnd := diskHeadBytes + len(s.table)
			from, to := tabEnd-min(64, len(s.table)), len(da)-len(s.skips)
			s.Close()
			for off := from; off < to; off++ {
				d := bytes.Clone(da)
				d[off] ^= 0x41
				s, err := parseDisk(d, key)
				if err != nil {
					continue // found at open (the offsets' ends are checked there)
				}
				if err := s.Verify(); err == nil {
					t.Fatalf("byte %d of %d flipped (entry table ends at %d): Verify passed", off, len(d), tabEnd)
				}
			}
		})
	}
}

// TestCandidatesSkipDamagedEntries: with one entry of a saved index's entry table
// damaged, pab inspect's nearest candidates (read from the records' keys without decoding
// every entry) never list the damaged entry, as a lookup never answers with it.
func TestCandidatesSkipDamagedEntries(t *testing.T) {
	c := savedCases(t)[0]
	key := SavedIndexKey(sha256.Sum256([]byte("test key")))
	path := filepath.Join(t.TempDir(), "saved.idx")
	newSavedIndex(t, c, path, key)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// the first entry with a path segment: its record in the table's blob gets a byte flipped
	victim := -1
	for i := range c.b.Len() {
		if u, err := url.Parse(c.b.Entry(i).URL); err == nil && len(pathSegments(u.Path)) > 0 {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("no entry with a path segment")
	}
	le := binary.LittleEndian
	tab := good[diskHeadBytes:]
	n, nmem := le.Uint64(tab[24:]), le.Uint64(tab[32:])
	blob := 64 + (n+1)*8 + n*12 + nmem*48
	lo, hi := le.Uint64(tab[64+8*uint64(victim):]), le.Uint64(tab[64+8*uint64(victim+1):])
	s, err := parseDisk(flip(good, diskHeadBytes+int(blob+(lo+hi)/2)), key)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := recording.OpenBundleTable(c.b.Dir, s.Table(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	ix, err := NewIndex(tb, c.rs, IndexOptions{RuleRoot: c.root, Opened: s})
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for i := range c.b.Len() {
		u, err := url.Parse(c.b.Entry(i).URL)
		if err != nil || len(pathSegments(u.Path)) == 0 {
			continue
		}
		u.Path, u.RawQuery = "/"+pathSegments(u.Path)[0]+"/nothing-recorded-here", ""
		for _, cand := range ix.Explain(rules.Request{Method: "GET", URL: u}).Candidates {
			shown++
			if strings.HasPrefix(cand.ID, "damaged-") {
				t.Errorf("%s: the damaged entry is a candidate: %+v", u, cand)
			}
		}
	}
	if shown == 0 {
		t.Fatal("no probe had candidates: the test shows nothing")
	}
}
