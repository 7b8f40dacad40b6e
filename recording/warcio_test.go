package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/testtool"
)

// warcioResult is one line of tools/warcio/check.mjs's output.
type warcioResult struct {
	File     string         `json:"file"`
	Records  int            `json:"records"`
	Types    map[string]int `json:"types"`
	Warnings []string       `json:"warnings"`
	Index    []string       `json:"index"`
}

// TestWarcioReadsExport reads pab's exported WARC files, plain and gzip per record, with
// warcio.js (the npm package warcio, pinned in tools/warcio/package.json): it must find
// every record, of the right types, with no warning and no exception, and its own CDXJ
// index of each .warc.gz must equal, line for line, the index pab writes into a WACZ
// (keys, POST keys included, timestamps, offsets, lengths, digests). Without node (or without `npm ci --prefix tools/warcio`) the
// test is skipped, except in CI (CI=true), where it fails.
func TestWarcioReadsExport(t *testing.T) {
	tool := filepath.Join("..", "tools", "warcio")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(tool, "node_modules", "warcio", "package.json"))
	}
	if err != nil {
		msg := "warcio.js peer check needs node and `npm ci --prefix tools/warcio`: " + err.Error()
		testtool.Missing(t, "%s", msg)
	}

	dir := t.TempDir()
	var files []string
	bundles := map[string]*Bundle{}
	for _, src := range []string{"sites/IAH-20080430204825-00000-blackbook.warc.gz", "sites/lil-projects.warc.gz",
		"sites/books.toscrape.warc", "warc/post-test.warc.gz", "warc/example-url-agnostic-revisit.warc.gz"} {
		b := importTestBundle(t, src)
		for _, ext := range []string{".warc", ".warc.gz"} {
			p := filepath.Join(dir, strings.TrimSuffix(strings.TrimSuffix(filepath.Base(src), ".gz"), ".warc")+ext)
			if err := ExportWARCFile(b, p); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
			bundles[p] = b
		}
	}
	// Requests other than GET, with bodies of every kind a replay tool turns into a key.
	posts := filepath.Join(dir, "posts.warc.gz")
	pb := postBundle(t)
	if err := ExportWARCFile(pb, posts); err != nil {
		t.Fatal(err)
	}
	files = append(files, posts)
	bundles[posts] = pb

	cmd := exec.Command(node, append([]string{filepath.Join(tool, "check.mjs")}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	seen := 0
	for sc.Scan() {
		var r warcioResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("check.mjs output %.200q: %v", sc.Text(), err)
		}
		b := bundles[r.File]
		if b == nil {
			t.Fatalf("check.mjs reported on %s, which was not asked for", r.File)
		}
		seen++
		name := filepath.Base(r.File)
		if len(r.Warnings) != 0 {
			t.Errorf("%s: warcio.js warnings: %q", name, r.Warnings)
		}
		want := map[string]int{"warcinfo": 1}
		for _, e := range b.Entries {
			if e.RevisitOf != "" || e.Unresolved {
				want["revisit"]++
			} else {
				want["response"]++
			}
			if e.ReqLength > 0 {
				want["request"]++
			}
		}
		total := 0
		for _, n := range want {
			total += n
		}
		if r.Records != total || !mapsEqual(r.Types, want) {
			t.Errorf("%s: warcio.js read %d records %v, want %d %v", name, r.Records, r.Types, total, want)
		}

		// pab's CDXJ lines against warcio.js's for the gzip files, the layout a WACZ holds.
		// (For a plain file warcio.js counts a record's length without its closing
		// CRLF CRLF, so lengths differ by 4 there by design.)
		if !strings.HasSuffix(r.File, ".gz") {
			continue
		}
		recs, err := exportWARC(b, io.Discard, strings.HasSuffix(r.File, ".gz"), name)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := cdxjIndex(b, recs, r.File)
		if err != nil {
			t.Fatal(err)
		}
		ours := strings.Split(strings.TrimSpace(string(idx)), "\n")
		theirs := slices.Clone(r.Index)
		slices.Sort(ours)
		slices.Sort(theirs)
		if !slices.Equal(ours, theirs) {
			for i := range max(len(ours), len(theirs)) {
				var a, b string
				if i < len(ours) {
					a = ours[i]
				}
				if i < len(theirs) {
					b = theirs[i]
				}
				if a != b {
					t.Errorf("%s: first CDXJ difference, line %d:\n  pab:       %s\n  warcio.js: %s", name, i+1, a, b)
					break
				}
			}
		}
	}
	if seen != len(files) {
		t.Errorf("check.mjs reported on %d files, want %d\n%s", seen, len(files), stderr.String())
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// postBundle writes and opens a bundle of POST, PUT and DELETE requests with form, JSON,
// text and binary bodies.
func postBundle(t *testing.T) *Bundle {
	t.Helper()
	date := time.Date(2026, 10, 22, 10, 40, 57, 0, time.UTC)
	var xs []Exchange
	add := func(method, u, ctype, body string) {
		h := http.Header{}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		xs = append(xs, Exchange{Method: method, URL: u, Date: date, ReqHeader: h, ReqBody: []byte(body),
			Status: 200, RespHeader: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)})
		date = date.Add(time.Second)
	}
	add("POST", "https://shop.test/api/cart", "application/json", `{"item":"Sapiens","qty":2,"price":12.50,"tags":["a","b",""],"gift":false,"note":null,"opts":{"wrap":true,"qty":3},"10":"x","2":"y","big":1e21,"small":1.5e-7}`)
	add("POST", "https://shop.test/api/search?page=2", "application/json; charset=utf-8", `["x", {"q": "café au lait & more"}]`)
	add("POST", "https://shop.test/api/bad", "application/json", `{not json`)
	add("POST", "https://shop.test/log", "text/plain", `{"event":"view","id":7}`)
	add("POST", "https://shop.test/form", "application/x-www-form-urlencoded", `q=a%20b%2Fc&x=%E2%82%AC&y=1`)
	add("POST", "https://shop.test/form-bad", "application/x-www-form-urlencoded", `q=%ZZ`)
	add("PUT", "https://shop.test/blob", "application/octet-stream", "\x00\x01binary\xff")
	add("DELETE", "https://shop.test/api/cart/1", "", "")
	add("POST", "https://www2.shop.test/beacon?a=1", "", "")
	dir := filepath.Join(t.TempDir(), "posts")
	writeBundle(t, dir, xs, nil)
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
