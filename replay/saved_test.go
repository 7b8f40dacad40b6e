package replay

import (
	"bytes"
	"crypto/sha256"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/warc"
)

// savedCase is a recording and its rules for the saved index tests: the site recording
// (exclusions, latest, blocked), the shop (search and promo endpoints, bodies) and the
// fidelity recording (redirects).
type savedCase struct {
	name string
	b    *warc.Bundle
	rs   *rules.Set
	root string
}

func savedCases(t *testing.T) []savedCase {
	t.Helper()
	root, shopRS := shopRepo(t, nil)
	return []savedCase{
		{"site", writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges()), testRules(t, defaultTestRules), ""},
		{"shop", writeTestBundle(t, t.TempDir(), warc.Manifest{}, shopExchanges()), shopRS, root},
		{"fidelity", writeTestBundle(t, t.TempDir(), warc.Manifest{}, fidExchanges(t)), testRules(t, fidRules()), ""},
	}
}

// probes are requests for every recorded entry (its own, with a changed query, as HEAD,
// under another path) plus a few never recorded.
func probes(t *testing.T, b *warc.Bundle) []rules.Request {
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
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{stale, fresh, other} {
		if err := os.WriteFile(f, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{stale, other} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSaved(path, []byte("data")); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]bool{stale: false, fresh: true, other: true, path: true} {
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
			if !reflect.DeepEqual(loaded.Skipped(), fresh.Skipped()) || loaded.Len() != fresh.Len() ||
				!reflect.DeepEqual(loaded.exact, fresh.exact) || !reflect.DeepEqual(loaded.base, fresh.base) || !reflect.DeepEqual(loaded.urls, fresh.urls) {
				t.Errorf("the loaded index's buckets differ from the computed one's")
			}
			for i := range fresh.entries {
				a, b := fresh.entries[i], loaded.entries[i]
				ka, kb := a.key, b.key
				ka.Params, kb.Params = nil, nil
				if a.e != b.e || !reflect.DeepEqual(ka, kb) || !slices.Equal(a.key.Params, b.key.Params) || a.keyStr != b.keyStr || !slices.Equal(a.params, b.params) ||
					a.static != b.static || a.https != b.https || !reflect.DeepEqual(a.loc, b.loc) {
					t.Errorf("entry %s: loaded %+v, computed %+v", a.e.ID, *b, *a)
				}
			}

			flipped := bytes.Clone(good)
			flipped[len(flipped)/2] ^= 0x20
			otherKey := key
			otherKey[0] ^= 1
			for _, bad := range []struct {
				name string
				data []byte
				key  SavedIndexKey
				why  string
			}{
				{"flipped byte", flipped, key, "checksum"},
				{"cut short", good[:len(good)-7], key, "checksum"},
				{"empty", nil, key, "not a saved index"},
				{"other key", good, otherKey, "another recording"},
				{"other entry count", resum(t, good, func(d []byte) []byte {
					return bytes.Replace(d, countBytes(len(c.b.Entries)), countBytes(len(c.b.Entries)+1), 1)
				}), key, "entries"},
				{"other version", resum(t, good, func(d []byte) []byte { d[len(savedMagic)] = SavedIndexVersion + 1; return d }), key, "version"},
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
		})
	}
}

// countBytes is the uvarint of n as the saved index writes it after the key.
func countBytes(n int) []byte {
	var b []byte
	for v := uint64(n); ; v >>= 7 {
		if v < 0x80 {
			return append(b, byte(v))
		}
		b = append(b, byte(v)|0x80)
	}
}

// resum edits a saved index's body (after a copy) and writes a correct checksum again:
// damage the checksum cannot see.
func resum(t *testing.T, data []byte, edit func([]byte) []byte) []byte {
	t.Helper()
	body := edit(bytes.Clone(data[:len(data)-sha256.Size]))
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

// FuzzSavedIndex decodes fuzzed saved index files (seeded with real ones): never a panic,
// and a file that decodes is exactly what encoding its result writes (the parser reads no
// file it does not write, so it cannot read into an entry what the index computed for
// another).
func FuzzSavedIndex(f *testing.F) {
	key := SavedIndexKey(sha256.Sum256([]byte("fuzz key")))
	b := writeTestBundle(f, f.TempDir(), siteManifest(), siteExchanges())
	root, shopRS := shopRepo(f, nil)
	shop := writeTestBundle(f, f.TempDir(), warc.Manifest{}, shopExchanges())
	for _, c := range []struct {
		b  *warc.Bundle
		rs *rules.Set
	}{{b, testRules(f, defaultTestRules)}, {shop, shopRS}} {
		path := filepath.Join(f.TempDir(), "saved.idx")
		ix, err := NewIndex(c.b, c.rs, IndexOptions{RuleRoot: root, SavedIndex: path, SavedKey: key})
		if err != nil {
			f.Fatal(err)
		}
		ix.WaitSaved()
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint16(len(c.b.Entries)), false)
		f.Add(data[:len(data)-sha256.Size], uint16(len(c.b.Entries)), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint16, sum bool) {
		if sum { // the fuzzed bytes are the body: past the checksum, into the parser
			s := sha256.Sum256(data)
			data = append(bytes.Clone(data), s[:]...)
		}
		out := make([]built, n%512)
		rebuild, err := decodeSaved(data, key, out)
		if err != nil {
			return
		}
		for _, i := range rebuild {
			out[i].ep = &rules.Endpoint{}
		}
		if again := encodeSaved(key, out); !bytes.Equal(again, data) {
			t.Fatalf("decoded a file that encodes otherwise:\n%q\n%q", data, again)
		}
	})
}
