package main

// pab's HAR as Chromium DevTools loads it: the Network panel's "Import HAR file" parses the
// file with DevTools' own HAR model (HARRoot of front_end/models/har/HARFormat.ts), which
// throws on a missing or invalid required field (a date, a number, an object). The model is
// copied into testdata/devtools (SOURCES.md says from which package version and how little
// was changed) and run by node.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/internal/testtool"
)

// devtoolsResult is one line of testdata/devtools/check.mjs's output.
type devtoolsResult struct {
	File        string   `json:"file"`
	Error       string   `json:"error"`
	Version     string   `json:"version"`
	Pages       int      `json:"pages"`
	Entries     int      `json:"entries"`
	URLs        []string `json:"urls"`
	EntryErrors []struct {
		Index int    `json:"index"`
		URL   string `json:"url"`
		Error string `json:"error"`
	} `json:"entryErrors"`
}

// devtoolsLoad parses each HAR file with DevTools' HARRoot (testdata/devtools/check.mjs)
// and returns one result per file, in order. Without node the test is skipped, except in
// CI (CI=true), where it fails.
func devtoolsLoad(t *testing.T, files ...string) []devtoolsResult {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testtool.Missing(t, "node missing (apt-get install nodejs; scripts/test.sh installs it)")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "devtools", "check.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, append([]string{script}, files...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, stderr.String())
	}
	var out []devtoolsResult
	dec := json.NewDecoder(&stdout)
	for {
		var r devtoolsResult
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("node check.mjs output: %v", err)
		}
		out = append(out, r)
	}
	if len(out) != len(files) {
		t.Fatalf("node check.mjs: %d results for %d files", len(out), len(files))
	}
	return out
}

// harURLs reads a HAR with pab's reader and returns its entries' request URLs, in order.
func harURLs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hr, err := har.NewReader(f, har.Limits{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var urls []string
	for {
		e, err := hr.Next()
		if err == io.EOF {
			return urls
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		urls = append(urls, e.Request.URL)
	}
}

// checkDevtoolsLoads asserts that DevTools loaded r's file whole: no error, version 1.2,
// every entry parsed, and the entries' URLs (in order) those of want.
func checkDevtoolsLoads(t *testing.T, r devtoolsResult, want []string) {
	t.Helper()
	if r.Error != "" || len(r.EntryErrors) != 0 {
		t.Errorf("%s: DevTools refuses it: %s %+v", r.File, r.Error, r.EntryErrors)
		return
	}
	if r.Version != "1.2" {
		t.Errorf("%s: DevTools read version %q, want 1.2", r.File, r.Version)
	}
	if r.Entries != len(want) || !reflect.DeepEqual(r.URLs, want) {
		t.Errorf("%s: DevTools read %d entries:\n  %s\nwant %d:\n  %s", r.File, r.Entries,
			strings.Join(r.URLs, "\n  "), len(want), strings.Join(want, "\n  "))
	}
}

// TestHARDevToolsImport: the HAR of a recording (pab export --har) and the HAR of a run on
// it (pab export --har --log) load in Chromium DevTools' HAR importer (its HARRoot): every
// entry parses, with the URLs pab wrote, in order; a broken HAR is refused, with the
// entries DevTools cannot parse named. A run's HAR from pab run --har and pab grade --har
// is checked the same way in checkRunHAR (run_test.go).
func TestHARDevToolsImport(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "devtools", "shop.har")
	broken := filepath.Join("testdata", "devtools", "broken.har")
	srcURLs := harURLs(t, src)

	// The check can fail: DevTools' own parse of the hand-made HARs.
	res := devtoolsLoad(t, src, broken)
	checkDevtoolsLoads(t, res[0], srcURLs)
	if res[1].Error == "" || len(res[1].EntryErrors) != 2 ||
		res[1].EntryErrors[0].Index != 1 || !strings.Contains(res[1].EntryErrors[0].Error, "Invalid date format") ||
		res[1].EntryErrors[1].Index != 2 || !strings.Contains(res[1].EntryErrors[1].Error, "NaN") {
		t.Errorf("broken.har: DevTools should refuse entry 1 (no startedDateTime) and entry 2 (time \"soon\"): %+v", res[1])
	}

	repo := harRepo(t)
	importHAR(t, repo, "shop", src)
	recHAR := filepath.Join(dir, "recording.har")
	if _, stderr, code := runPab(t, "--repo", repo, "export", "shop", "--har", recHAR); code != 0 {
		t.Fatalf("pab export --har: exit %d: %s", code, stderr)
	}

	// A run: every recorded URL, the form POST, and one URL the recording does not hold.
	rp := startReplay(t, "shop", "--repo", repo)
	client := rp.client(t)
	var sent []string
	for _, u := range append(srcURLs, "http://shop.test/never-recorded") {
		var resp *http.Response
		var err error
		if strings.HasSuffix(u, "/cart") {
			resp, err = client.PostForm(u, url.Values{"item": {"green"}, "qty": {"2"}})
		} else {
			resp, err = client.Get(u)
		}
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sent = append(sent, u)
	}
	rp.stop(t)
	runHAR := filepath.Join(dir, "run.har")
	if _, stderr, code := runPab(t, "--repo", repo, "export", "shop", "--har", runHAR, "--log", rp.log); code != 0 {
		t.Fatalf("pab export --har --log: exit %d: %s", code, stderr)
	}

	res = devtoolsLoad(t, recHAR, runHAR)
	// the recording's HAR: pab's own reading of it, and the same URLs as the source HAR
	recURLs := harURLs(t, recHAR)
	checkDevtoolsLoads(t, res[0], recURLs)
	got, want := append([]string(nil), recURLs...), append([]string(nil), srcURLs...)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recording.har URLs %q, the imported HAR's %q", got, want)
	}
	if res[0].Pages != 1 {
		t.Errorf("recording.har: DevTools read %d pages, want 1", res[0].Pages)
	}
	// the run's HAR: one entry per request sent, in order, the miss included
	checkDevtoolsLoads(t, res[1], sent)
	if runURLs := harURLs(t, runHAR); !reflect.DeepEqual(runURLs, sent) {
		t.Errorf("run.har URLs (pab's reader) %q, sent %q", runURLs, sent)
	}
}
