package rules_test

// The rules package must not import warc; this external test package may, to run Infer on
// the real captures in testdata/sites/ the way `pab import` does.

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/warc"
)

// loadSamples imports a WARC into a bundle and turns every exchange into a rules.Sample.
func loadSamples(t *testing.T, warcPath string) []rules.Sample {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if _, err := recording.ImportWARCs([]string{warcPath}, dir, recording.ImportOptions{TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out []rules.Sample
	for i := range b.Entries {
		e := &b.Entries[i]
		s := rules.Sample{Method: e.Method, URL: e.URL, Status: e.Status, Digest: e.Digest, Size: e.Size, ReqContentType: e.ReqType}
		if ts, err := warc.ParseWARCDate(e.TS); err == nil {
			s.Time = ts
		}
		if s.ReqBody, err = b.RequestBody(e); err != nil {
			t.Fatal(err)
		}
		r, err := b.Response(e)
		if err != nil {
			t.Fatalf("%s: %v", e.URL, err)
		}
		s.ContentType = r.Header.Get("Content-Type")
		if s.Body, err = io.ReadAll(io.LimitReader(r.Body, 4<<20)); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestInferCorpus(t *testing.T) {
	def, err := rules.Default()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file   string
		base   *rules.Set
		want   map[string][]string // site: substrings its YAML must hold; a site not named must not appear
		absent []string
	}{
		{file: "lil-projects.warc.gz", base: nil, want: map[string][]string{
			"lil.tools": {`block:`, `"analytics.lil.tools/piwik.php"`, `beacon: 1 near-empty answer (status 204`},
		}},
		// _default already blocks */**/piwik.php and the host also serves piwik.js: nothing new.
		{file: "lil-projects.warc.gz", base: def, want: map[string][]string{}},
		{file: "books.toscrape.warc", base: def, want: map[string][]string{}},
		// The flash player answers the same bytes whatever its playlist_url; mediatype also
		// left players.js unchanged but changes collection-rss.php, so it stays.
		{file: "IAH-20080430204825-00000-blackbook.warc.gz", base: def, want: map[string][]string{
			"archive.org": {`drop_params:
  - "playlist_url" # GET www.archive.org/audio/xspf_player.swf: other values left the response unchanged`, `"www.archive.org"`},
		}, absent: []string{"mediatype", "identifier", "poster", "faq_id"}},
	}
	for _, c := range cases {
		samples := loadSamples(t, filepath.Join("..", "testdata", "sites", c.file))
		got := rules.Infer(samples, c.base, rules.InferOptions{})
		again := rules.Infer(samples, c.base, rules.InferOptions{})
		sites := map[string]bool{}
		for i, f := range got {
			t.Logf("%s (base %v): %s\n%s", c.file, c.base != nil, rules.AutoFileName(f.Site), f.YAML)
			sites[f.Site] = true
			if string(again[i].YAML) != string(f.YAML) {
				t.Errorf("%s: %s: output differs between two runs", c.file, f.Site)
			}
			if _, err := rules.ParseFile(f.Site+".auto.yaml", f.YAML); err != nil {
				t.Errorf("%s: %v", c.file, err)
			}
			want, ok := c.want[f.Site]
			if !ok {
				t.Errorf("%s: unexpected inferred site %s", c.file, f.Site)
			}
			for _, a := range c.absent {
				if strings.Contains(string(f.YAML), a) {
					t.Errorf("%s: %s holds %q", c.file, f.Site, a)
				}
			}
			for _, w := range want {
				if !strings.Contains(string(f.YAML), w) {
					t.Errorf("%s: %s lacks %q", c.file, f.Site, w)
				}
			}
		}
		for s := range c.want {
			if !sites[s] {
				t.Errorf("%s: no rules inferred for %s", c.file, s)
			}
		}
	}
}
