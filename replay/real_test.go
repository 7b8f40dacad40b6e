package replay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// TestReplayRealCaptures imports real public captures (testdata/sites, see
// testdata/SOURCES.md), replays them through the proxy with the default rules, checks the
// self-check hit rate, and checks that every recorded page comes back byte for byte.
func TestReplayRealCaptures(t *testing.T) {
	if testing.Short() {
		t.Skip("imports real captures")
	}
	for _, c := range []struct {
		file     string
		minExact float64 // least exact share of the self-check
	}{
		{"books.toscrape.warc", 0.95},
		{"lil-projects.warc.gz", 0.95},
		{"IAH-20080430204825-00000-blackbook.warc.gz", 0.95},
	} {
		t.Run(c.file, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bundle")
			if _, err := recording.ImportWARCs([]string{filepath.Join("..", "testdata", "sites", c.file)}, dir, recording.ImportOptions{TaskID: "real"}); err != nil {
				t.Fatal(err)
			}
			b, err := recording.OpenBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			rs, err := rules.Default()
			if err != nil {
				t.Fatal(err)
			}
			ix, err := NewIndex(b, rs) // the shipped default rules, not the test ones
			if err != nil {
				t.Fatal(err)
			}
			tp := startProxyBundle(t, b, nil, func(o *Options) { o.Index = ix })
			rep, err := Check(context.Background(), tp.addr, tp.ca, b)
			if err != nil {
				t.Fatal(err)
			}
			var sb bytes.Buffer
			rep.Print(&sb)
			t.Logf("%s: %d entries\n%s", c.file, len(b.Entries), sb.String())
			if rep.Errors != 0 || rep.Share(SourceExact) < c.minExact {
				t.Errorf("self-check below %.0f%% exact or with errors:\n%s", 100*c.minExact, sb.String())
			}
			pages := 0
			for _, p := range b.Pages {
				if p.Fetched != "GET" {
					continue
				}
				res := tp.s.ix.Lookup(req("GET", p.URL, "", ""))
				if res.Source != SourceExact {
					t.Errorf("page %s: %s", p.URL, res.Source)
					continue
				}
				rec, err := b.Response(res.Entry)
				if err != nil {
					t.Errorf("page %s: %v", p.URL, err)
					continue
				}
				want, _ := io.ReadAll(rec.Body)
				got := tp.get(t, p.URL, map[string]string{"Sec-Fetch-Dest": "document"})
				if got.status != rec.Status || !bytes.Equal(got.body, want) {
					t.Errorf("page %s: status %d (recorded %d), %d bytes (recorded %d)", p.URL, got.status, rec.Status, len(got.body), len(want))
				}
				if rec.Status != http.StatusNoContent && got.header.Get("Content-Encoding") != "" {
					t.Errorf("page %s: Content-Encoding replayed", p.URL)
				}
				pages++
			}
			if pages == 0 {
				t.Error("no GET page in the capture")
			}
		})
	}
}
