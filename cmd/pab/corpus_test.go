package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCorpusReplayTable runs `pab replay FILE --check` on every WARC of testdata/warc and
// testdata/sites (copies of the shared corpus; testdata/SOURCES.md says what is odd about
// each). A file is either imported and replayed, every recorded exchange answered from the
// recording (exact), or refused with a one-line error that names the file and the problem.
func TestCorpusReplayTable(t *testing.T) {
	type want struct {
		exchanges int    // recorded exchanges; 0 means the file is refused
		exact     int    // requests of the self-check answered exactly
		other     string // other sources expected in the check, e.g. "blocked 1"
		refusal   string // part of the one-line error when refused
	}
	table := map[string]want{
		"sites/IAH-20080430204825-00000-blackbook.warc.gz": {exchanges: 261, exact: 261},
		"sites/books.toscrape.warc":                        {exchanges: 30, exact: 30},
		"sites/lil-projects.warc.gz":                       {exchanges: 27, exact: 26, other: "blocked 1"}, // its Matomo beacon
		"warc/cc.warc.gz":                                  {exchanges: 1, exact: 1},
		"warc/example-bad-length.warc":                     {exchanges: 2, exact: 1}, // wrong Content-Lengths corrected (warned)
		"warc/example-bad-non-chunked.warc.gz":             {exchanges: 2, exact: 1}, // a response and its revisit: one URL
		"warc/example-digest.warc":                         {refusal: "no HTTP response records"},
		"warc/example-iana.org-chunked.warc":               {exchanges: 1, exact: 1},
		"warc/example-space-in-target-uri.warc.gz":         {refusal: "no HTTP response records"},
		"warc/example-trunc.warc":                          {exchanges: 1, exact: 1},                  // Content-Length 2 bytes short, corrected (warned)
		"warc/example-url-agnostic-revisit.warc.gz":        {exchanges: 1, exact: 0, other: "miss 1"}, // its original is not in the file
		"warc/example-wget-bad-target-uri.warc.gz":         {exchanges: 1, exact: 1},
		"warc/example-wrong-chunks.warc.gz":                {exchanges: 1, exact: 1},
		"warc/example.warc":                                {exchanges: 2, exact: 1},
		"warc/example.warc.gz":                             {exchanges: 2, exact: 1},
		"warc/gzip_extra_sl.warc.gz":                       {refusal: "no HTTP response records"},
		"warc/post-test.warc.gz":                           {exchanges: 3, exact: 3},
		"warc/rec-20181019023222666572-goller.warc.gz":     {exchanges: 9, exact: 9},
		"warc/redirect.warc":                               {exchanges: 1, exact: 1},
		"warc/transfer_compression_brotli.warc":            {exchanges: 1, exact: 1},
		"warc/transfer_compression_brotli.warc.gz":         {exchanges: 1, exact: 1},
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "*", "*.warc*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(table) {
		t.Errorf("testdata holds %d WARC files, the table %d: keep them in step", len(files), len(table))
	}
	exchangesRe := regexp.MustCompile(`\((\d+) exchanges?[,)]`)
	sourceRe := regexp.MustCompile(`(?m)^  (\w+)\s+(\d+)\s`)
	var report strings.Builder
	report.WriteString("\nfile | outcome | exchanges | check\n")
	for _, f := range files {
		rel, _ := filepath.Rel(filepath.Join(repoRoot, "testdata"), f)
		w, ok := table[rel]
		if !ok {
			t.Errorf("%s: not in the table", rel)
			continue
		}
		t.Run(rel, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := pabCmd("replay", f, "--listen", "127.0.0.1:0", "--check")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if w.exchanges == 0 {
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("want a refusal with exit 1, got %v\n%s%s", err, stdout.String(), stderr.String())
				}
				msg := strings.TrimSpace(stderr.String())
				if strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "pab: ") || !strings.Contains(msg, w.refusal) || !strings.Contains(msg, filepath.Base(f)) {
					t.Errorf("refusal is not one line naming the file and %q:\n%s", w.refusal, msg)
				}
				report.WriteString(rel + " | refused: " + strings.TrimPrefix(msg, "pab: ") + " | - | -\n")
				return
			}
			if err != nil {
				t.Fatalf("pab replay --check: %v\n%s", err, stderr.String())
			}
			m := exchangesRe.FindStringSubmatch(stderr.String())
			if m == nil {
				t.Fatalf("no exchange count in:\n%s", stderr.String())
			}
			if n, _ := strconv.Atoi(m[1]); n != w.exchanges {
				t.Errorf("%d exchanges, want %d", n, w.exchanges)
			}
			got := map[string]int{}
			for _, m := range sourceRe.FindAllStringSubmatch(stdout.String(), -1) {
				got[m[1]], _ = strconv.Atoi(m[2])
			}
			if got["exact"] != w.exact {
				t.Errorf("check: %d exact, want %d\n%s", got["exact"], w.exact, stdout.String())
			}
			var others []string
			for _, s := range []string{"fuzzy", "blocked", "preflight", "miss"} {
				if got[s] > 0 {
					others = append(others, s+" "+strconv.Itoa(got[s]))
				}
			}
			if strings.Join(others, ", ") != w.other {
				t.Errorf("check: other sources %q, want %q\n%s", strings.Join(others, ", "), w.other, stdout.String())
			}
			if strings.Contains(stdout.String(), "errors:") {
				t.Errorf("check had errors:\n%s", stdout.String())
			}
			check := "exact " + strconv.Itoa(got["exact"])
			if w.other != "" {
				check += ", " + w.other
			}
			report.WriteString(rel + " | imported, replayed | " + m[1] + " | " + check + "\n")
		})
	}
	t.Log(report.String())
}
