package main

// pab's HAR as Chromium DevTools loads it: the Network panel's "Import HAR file" parses the
// file with DevTools' own HAR model (HARRoot of front_end/models/har/HARFormat.ts), which
// throws on a missing or invalid required field (a date, a number, an object), then builds
// its network requests with Importer.requestsFromHARLog (Importer.ts). tools/devtools-har
// runs both, bundled unchanged from the pinned npm package chrome-devtools-frontend.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// devtoolsResult is one line of tools/devtools-har/check.mjs's output.
type devtoolsResult struct {
	File        string `json:"file"`
	Error       string `json:"error"`
	Version     string `json:"version"`
	Pages       int    `json:"pages"`
	Entries     int    `json:"entries"`
	EntryErrors []struct {
		Index int    `json:"index"`
		URL   string `json:"url"`
		Error string `json:"error"`
	} `json:"entryErrors"`
	Requests []devtoolsRequest `json:"requests"`
}

// devtoolsRequest is one network request DevTools' importer built from a HAR entry.
type devtoolsRequest struct {
	Method       string  `json:"method"`
	URL          string  `json:"url"`
	Status       int     `json:"status"`
	MimeType     string  `json:"mimeType"`
	ResourceType string  `json:"resourceType"`
	Protocol     string  `json:"protocol"`
	FormData     *string `json:"formData"`
	BodySHA256   string  `json:"bodySHA256"`
	BodyLength   int     `json:"bodyLength"`
	ContentError string  `json:"contentError"`
}

// devtoolsTool returns node and tools/devtools-har/check.mjs, or why they cannot run.
func devtoolsTool() (node, script, missing string) {
	tool, err := filepath.Abs(filepath.Join("..", "..", "tools", "devtools-har"))
	if err == nil {
		node, err = exec.LookPath("node")
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(tool, "node_modules", "chrome-devtools-frontend", "package.json"))
	}
	if err != nil {
		return "", "", "DevTools HAR import check needs node and `npm ci --prefix tools/devtools-har` (scripts/test.sh runs it): " + err.Error()
	}
	return node, filepath.Join(tool, "check.mjs"), ""
}

// devtoolsLoad loads each HAR file with DevTools' importer (tools/devtools-har/check.mjs)
// and returns one result per file, in order. Without node or `npm ci --prefix
// tools/devtools-har` the test is skipped, except in CI (CI=true), where it fails.
func devtoolsLoad(t *testing.T, files ...string) []devtoolsResult {
	t.Helper()
	node, script, missing := devtoolsTool()
	if missing != "" {
		testtool.Missing(t, "%s", missing)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, append([]string{script}, files...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node tools/devtools-har/check.mjs: %v\n%s", err, stderr.String())
	}
	var out []devtoolsResult
	dec := json.NewDecoder(&stdout)
	for {
		var r devtoolsResult
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("node tools/devtools-har/check.mjs output: %v", err)
		}
		out = append(out, r)
	}
	if len(out) != len(files) {
		t.Fatalf("node tools/devtools-har/check.mjs: %d results for %d files", len(out), len(files))
	}
	return out
}

// harRequest is what DevTools' importer should make of one HAR entry, as pab's reader
// reads the entry.
type harRequest struct {
	started    string
	method     string
	url        string
	status     int
	formData   *string
	bodySHA256 string
}

// harRequests reads a HAR with pab's reader and returns what DevTools should show of its
// entries, in DevTools' order (sorted by startedDateTime, a stable sort).
func harRequests(t *testing.T, path string) []harRequest {
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
	var out []harRequest
	for {
		e, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		started, err := e.Started()
		if err != nil {
			t.Fatalf("%s: entry %d: %v", path, e.Index, err)
		}
		body, err := e.Response.Content.Body()
		if err != nil {
			t.Fatalf("%s: entry %d: %v", path, e.Index, err)
		}
		sum := sha256.Sum256(body)
		r := harRequest{started: started.UTC().Format("2006-01-02T15:04:05.000"), method: e.Request.Method,
			url: e.Request.URL, status: e.Response.Status, bodySHA256: hex.EncodeToString(sum[:])}
		if e.Request.PostData != nil {
			text := e.Request.PostData.Text
			r.formData = &text
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].started < out[j].started })
	return out
}

// harURLs returns the URLs of harRequests(path), in DevTools' order.
func harURLs(t *testing.T, path string) []string {
	t.Helper()
	var urls []string
	for _, r := range harRequests(t, path) {
		urls = append(urls, r.url)
	}
	return urls
}

// checkDevtoolsLoads asserts that DevTools loaded the HAR at path whole (r is its result):
// no error, version 1.2, every entry parsed and turned into a network request with the
// method, URL, status, request body and response body (SHA-256) that pab's reader reads in
// the entry, in DevTools' order. It returns the URLs DevTools read.
func checkDevtoolsLoads(t *testing.T, r devtoolsResult, path string) []string {
	t.Helper()
	if r.Error != "" || len(r.EntryErrors) != 0 {
		t.Errorf("%s: DevTools refuses it: %s %+v", path, r.Error, r.EntryErrors)
		return nil
	}
	if r.Version != "1.2" {
		t.Errorf("%s: DevTools read version %q, want 1.2", path, r.Version)
	}
	want := harRequests(t, path)
	var urls []string
	for _, q := range r.Requests {
		urls = append(urls, q.URL)
	}
	if r.Entries != len(want) || len(r.Requests) != len(want) {
		t.Errorf("%s: DevTools read %d entries and built %d requests, pab's reader %d entries:\n  %s", path,
			r.Entries, len(r.Requests), len(want), strings.Join(urls, "\n  "))
		return urls
	}
	for i, q := range r.Requests {
		w := want[i]
		got := devtoolsRequest{Method: w.method, URL: w.url, Status: w.status, FormData: w.formData, BodySHA256: w.bodySHA256}
		have := devtoolsRequest{Method: q.Method, URL: q.URL, Status: q.Status, FormData: q.FormData, BodySHA256: q.BodySHA256}
		if q.ContentError != "" || !reflect.DeepEqual(have, got) {
			t.Errorf("%s: request %d as DevTools built it: %s %s %d form %v body %s %s\nin the HAR: %s %s %d form %v body %s", path, i,
				q.Method, q.URL, q.Status, deref(q.FormData), q.BodySHA256, q.ContentError, w.method, w.url, w.status, deref(w.formData), w.bodySHA256)
		}
	}
	return urls
}

// devtoolsCheck loads each HAR at paths with DevTools' importer and checks it as
// checkDevtoolsLoads does. For tests whose main subject is something else: on a machine
// without node or tools/devtools-har it only logs that it did not check (the rest of the
// test still runs; TestHARDevToolsImport says what is missing); under CI=true it fails.
func devtoolsCheck(t *testing.T, paths ...string) {
	t.Helper()
	if _, _, missing := devtoolsTool(); missing != "" && os.Getenv("CI") != "true" {
		t.Logf("%s: not loaded with DevTools: %s", strings.Join(paths, ", "), missing)
		return
	}
	for i, r := range devtoolsLoad(t, paths...) {
		checkDevtoolsLoads(t, r, paths[i])
	}
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// TestHARDevToolsImport: the HAR of a recording (pab export --har) and the HAR of a run on
// it (pab export --har --log) load in Chromium DevTools' HAR importer (HARRoot, then
// Importer.requestsFromHARLog): every entry parses and becomes a request with the method,
// URL, status, request body and response body the file holds; the recording's requests are
// those of the HAR it was imported from, bodies included; the run's are the requests sent,
// in order, the miss included. A broken HAR is refused, with the entries DevTools cannot
// parse named. A run's HAR from pab run --har and pab grade --har is checked the same way
// in checkRunHAR (run_test.go).
func TestHARDevToolsImport(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "devtools", "shop.har")
	broken := filepath.Join("testdata", "devtools", "broken.har")
	srcURLs := harURLs(t, src)

	// The check can fail: DevTools' own reading of the hand-made HARs.
	res := devtoolsLoad(t, src, broken)
	srcRes := res[0]
	checkDevtoolsLoads(t, srcRes, src)
	if b := res[1]; b.Error == "" || len(b.EntryErrors) != 2 ||
		b.EntryErrors[0].Index != 1 || !strings.Contains(b.EntryErrors[0].Error, "Invalid date format") ||
		b.EntryErrors[1].Index != 2 || !strings.Contains(b.EntryErrors[1].Error, "NaN") {
		t.Errorf("broken.har: DevTools should refuse entry 1 (no startedDateTime) and entry 2 (time \"soon\"): %+v", b)
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
	// the recording's HAR: the requests of the HAR it came from, the same bodies
	checkDevtoolsLoads(t, res[0], recHAR)
	if res[0].Pages != 1 {
		t.Errorf("recording.har: DevTools read %d pages, want 1", res[0].Pages)
	}
	type key struct{ method, url string }
	want := map[key]devtoolsRequest{}
	for _, q := range srcRes.Requests {
		want[key{q.Method, q.URL}] = q
	}
	if len(res[0].Requests) != len(want) {
		t.Errorf("recording.har: DevTools built %d requests, shop.har %d", len(res[0].Requests), len(want))
	}
	for _, q := range res[0].Requests {
		w, ok := want[key{q.Method, q.URL}]
		if !ok || q.Status != w.Status || q.BodySHA256 != w.BodySHA256 || q.BodyLength != w.BodyLength || deref(q.FormData) != deref(w.FormData) {
			t.Errorf("recording.har: DevTools shows %s %s %d form %s body %d bytes %s; from shop.har: %+v", q.Method, q.URL, q.Status,
				deref(q.FormData), q.BodyLength, q.BodySHA256, w)
		}
	}
	// the run's HAR: one request per request sent, in order, the miss included
	runURLs := checkDevtoolsLoads(t, res[1], runHAR)
	if !reflect.DeepEqual(runURLs, sent) {
		t.Errorf("run.har: DevTools shows\n  %s\nsent:\n  %s", strings.Join(runURLs, "\n  "), strings.Join(sent, "\n  "))
	}
	for _, q := range res[1].Requests {
		if w, ok := want[key{q.Method, q.URL}]; ok && (q.Status != w.Status || q.BodySHA256 != w.BodySHA256) {
			t.Errorf("run.har: DevTools shows %s %s %d body %s; recorded %d body %s", q.Method, q.URL, q.Status, q.BodySHA256, w.Status, w.BodySHA256)
		} else if ok && q.Method == http.MethodPost && deref(q.FormData) != "item=green&qty=2" {
			// an exact answer to a POST carries the recorded request's body (docs/replay.md)
			t.Errorf("run.har: DevTools shows the POST %s with form data %s, want the recorded item=green&qty=2", q.URL, deref(q.FormData))
		} else if !ok && q.Status != http.StatusNotFound {
			t.Errorf("run.har: DevTools shows the miss %s %s as %d, want 404", q.Method, q.URL, q.Status)
		}
	}
}
