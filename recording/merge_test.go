package recording

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mergeRecording writes a bundle of GET exchanges url -> body captured from t0 on.
func mergeRecording(t *testing.T, t0 time.Time, notFound map[string]string, pairs ...string) string {
	t.Helper()
	var xs []Exchange
	var pages []Page
	for i := 0; i < len(pairs); i += 2 {
		d := t0.Add(time.Duration(i) * time.Second)
		xs = append(xs, Exchange{URL: pairs[i], Date: d, Status: 200, RespHeader: http.Header{"Content-Type": {"text/html"}},
			Body: []byte(pairs[i+1]), ResourceType: "document"})
		pages = append(pages, Page{URL: pairs[i], TS: FormatTime(d), Fetched: "GET"})
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	writeTestBundle(t, dir, Manifest{TaskID: "m", NotFound: notFound, Locale: "en-US"}, xs, pages)
	return dir
}

// bodies lists "url=body" for every entry of the bundle, in order.
func bodies(t *testing.T, dir string) []string {
	t.Helper()
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out []string
	for i := range b.Entries {
		e := &b.Entries[i]
		r, err := b.Response(e)
		if err != nil {
			t.Fatal(err)
		}
		body := readAllString(t, r.Body)
		if len(body) > 12 {
			body = body[:12]
		}
		out = append(out, strings.TrimPrefix(e.URL, "https://s.test")+"="+body)
	}
	return out
}

func TestMerge(t *testing.T) {
	big := strings.Repeat("same payload ", 100)
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(48 * time.Hour)
	old := mergeRecording(t, t1, map[string]string{"s.test": "https://s.test/404a", "o.test": "https://o.test/x"},
		"https://s.test/a", "old a", "https://s.test/news", "old news", "https://s.test/big", big)
	nw := mergeRecording(t, t2, map[string]string{"s.test": "https://s.test/404b"},
		"https://s.test/a", "new a", "https://s.test/news", "new news", "https://s.test/b", "new b", "https://s.test/big2", big)

	for _, tc := range []struct {
		name       string
		old, nw    string
		opts       MergeOptions
		want       string
		revisitURL string
	}{
		// every copy kept, the earlier recording first: exact lookups find the old copy
		// first, latest lookups the new copy last
		{"default", old, nw, MergeOptions{},
			"/a=old a|/news=old news|/big=same payload|/a=new a|/news=new news|/b=new b|/big2=same payload", "https://s.test/big2"},
		// the old copies of requests recorded again are dropped
		{"prefer new", old, nw, MergeOptions{PreferNew: true},
			"/big=same payload|/a=new a|/news=new news|/b=new b|/big2=same payload", "https://s.test/big2"},
		// a recording captured earlier goes first even when it is the one imported
		{"new is older", nw, old, MergeOptions{},
			"/a=old a|/news=old news|/big=same payload|/a=new a|/news=new news|/b=new b|/big2=same payload", "https://s.test/big2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "merged")
			if err := Merge(tc.old, tc.nw, out, tc.opts); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(bodies(t, out), "|"); got != tc.want {
				t.Errorf("merged\n got %s\nwant %s", got, tc.want)
			}
			if probs := Audit(out); len(probs) != 0 {
				t.Errorf("merged bundle fails the audit:\n%s", problemText(probs))
			}
			b, err := OpenBundle(out)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			m := b.Manifest
			if m.CapturedFrom != FormatTime(t1) || m.CapturedTo != FormatTime(t2.Add(6*time.Second)) || m.TaskID != "m" || m.Locale != "en-US" {
				t.Errorf("manifest %+v", m)
			}
			if len(m.NotFound) != 2 || m.NotFound["o.test"] != "https://o.test/x" {
				t.Errorf("not_found %v", m.NotFound)
			}
			for _, e := range b.Entries {
				if e.URL == tc.revisitURL && e.RevisitOf == "" {
					t.Errorf("%s is stored again, not as a revisit", e.URL)
				}
			}
			if len(b.Pages) != 7 {
				t.Errorf("%d pages", len(b.Pages))
			}
		})
	}
	// not_found: the bundle being imported wins for a host in both
	out := filepath.Join(t.TempDir(), "merged")
	if err := Merge(old, nw, out, MergeOptions{TaskID: "renamed"}); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBundle(out)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Manifest.NotFound["s.test"] != "https://s.test/404b" || b.Manifest.TaskID != "renamed" {
		t.Errorf("manifest %+v", b.Manifest)
	}
}

// TestMergeKeepsExchangesWhole: a merge of an imported real recording with itself keeps
// every request and response (header, body, POST body, unresolved revisit).
func TestMergeKeepsExchangesWhole(t *testing.T) {
	for _, file := range []string{"../testdata/warc/post-test.warc.gz", "../testdata/warc/example-url-agnostic-revisit.warc.gz", "../testdata/sites/lil-projects.warc.gz"} {
		src := filepath.Join(t.TempDir(), "src")
		if _, err := ImportWARCs([]string{file}, src, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "out")
		if err := Merge(src, src, out, MergeOptions{}); err != nil {
			t.Fatal(err)
		}
		if probs := Blocking(Audit(out)); len(probs) != 0 {
			t.Errorf("%s: merged bundle fails the audit:\n%s", file, problemText(probs))
		}
		a, err := OpenBundle(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := OpenBundle(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Entries) != 2*len(a.Entries) || len(b.Pages) != 2*len(a.Pages) {
			t.Fatalf("%s: %d entries from %d", file, len(b.Entries), len(a.Entries))
		}
		for i := range b.Entries {
			x, y := a.Entries[i%len(a.Entries)], b.Entries[i]
			if x.URL != y.URL || x.Method != y.Method || x.ReqBody != y.ReqBody || x.ReqType != y.ReqType ||
				x.Status != y.Status || x.Digest != y.Digest || x.Size != y.Size || x.Unresolved != y.Unresolved || x.ResourceType != y.ResourceType || x.TS != y.TS {
				t.Errorf("%s: entry %d\n was %+v\n now %+v", file, i, x, y)
			}
			if x.Unresolved {
				continue
			}
			rx, err := a.Response(&x)
			if err != nil {
				t.Fatal(err)
			}
			ry, err := b.Response(&y)
			if err != nil {
				t.Fatal(err)
			}
			if readAllString(t, rx.Body) != readAllString(t, ry.Body) || rx.Header.Get("Content-Type") != ry.Header.Get("Content-Type") {
				t.Errorf("%s: entry %d response differs", file, i)
			}
			// the second copy of every stored payload of 1 KB or more is a revisit
			if i >= len(a.Entries) && y.Size >= DedupMinSize && y.RevisitOf == "" {
				t.Errorf("%s: entry %s (%d bytes) stored twice", file, y.ID, y.Size)
			}
		}
		a.Close()
		b.Close()
	}
}

func TestMergeLegacyManifestAndErrors(t *testing.T) {
	dir := cleanAuditBundle(t)
	writeManifestJSON(t, dir, map[string]any{"task_id": "shop", "start_url": "https://shop.test/"})
	out := filepath.Join(t.TempDir(), "out")
	if err := Merge("", dir, out, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := string(mustRead(t, filepath.Join(out, ManifestFile))); strings.Contains(m, "start_url") || !strings.Contains(m, `"task_id": "shop"`) {
		t.Errorf("manifest %s", m)
	}
	writeManifestJSON(t, dir, map[string]any{"task_id": "shop", "recorder": "x"})
	err := Merge("", dir, filepath.Join(t.TempDir(), "out2"), MergeOptions{})
	if err == nil || !strings.Contains(err.Error(), `unknown field "recorder"`) {
		t.Errorf("err = %v", err)
	}
}
