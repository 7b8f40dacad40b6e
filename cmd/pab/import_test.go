package main

// Tests of `pab import` of bundles and recordings (audit refusal, merging, the self-check),
// `pab audit` and `pab recording migrate`, each in a fresh task repository.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
)

// newTestRepo makes a task repository holding a copy of this repository's sites/.
func newTestRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	sites := filepath.Join(root, "sites")
	if err := os.MkdirAll(sites, 0o755); err != nil {
		t.Fatal(err)
	}
	des, err := os.ReadDir(filepath.Join(repoRoot, "sites"))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".yaml") {
			data, err := os.ReadFile(filepath.Join(repoRoot, "sites", de.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(sites, de.Name()), data, 0o644)
		}
	}
	return root
}

// runIn runs pab against the repository root and returns stdout, stderr and exit code.
func runIn(t *testing.T, root string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(pabBin, append([]string{"--repo", root}, args...)...)
	cmd.Env = append(os.Environ(), "PAB_CACHE="+filepath.Join(root, ".cache"), "PAB_REPO=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// shopBundle writes a bundle of GET exchanges (path, body pairs) on https://shop.test,
// captured from t0 on, as `pab record --out` would.
func shopBundle(t *testing.T, t0 time.Time, pairs ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(pairs); i += 2 {
		d := t0.Add(time.Duration(i) * time.Second)
		_, err := w.Add(recording.Exchange{URL: "https://shop.test" + pairs[i], Date: d, Status: 200,
			ReqHeader:  http.Header{"Accept": {"text/html"}, "Xookie": {"planted"}},
			RespHeader: http.Header{"Content-Type": {"text/html"}},
			Body:       []byte("<html><head><title>" + pairs[i+1] + "</title></head><body>" + pairs[i+1] + "</body></html>"), ResourceType: "document"})
		if err != nil {
			t.Fatal(err)
		}
		w.AddPage(recording.Page{URL: "https://shop.test" + pairs[i], TS: recording.FormatTime(d), Fetched: "GET", Title: pairs[i+1]})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// replayTitles serves the task's recording in-process and returns the <title> answered
// for each path.
func replayTitles(t *testing.T, root, id string, paths ...string) []string {
	t.Helper()
	t.Setenv("PAB_CACHE", filepath.Join(root, ".cache"))
	repo := &task.Repo{Root: root}
	tgt, err := task.Resolve(id, repo)
	if err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(tgt.BundleDir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rs, err := rules.Load(tgt.RulesDirs...)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsca.LoadOrCreate(filepath.Join(root, ".cache", "ca"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := replay.New(replay.Options{Bundle: b, Rules: rs, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: ln.Addr().String()}),
		TLSClientConfig: &tls.Config{RootCAs: ca.CertPool()},
	}}
	var titles []string
	for _, p := range paths {
		req, _ := http.NewRequest("GET", "https://shop.test"+p, nil)
		req.Header.Set("Sec-Fetch-Dest", "document")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		titles = append(titles, recording.HTMLTitle(body))
	}
	return titles
}

// TestImportMergesRecordings: two recordings of the same task imported one after the
// other are merged: a request recorded both times answers with the first copy, a latest
// page (a cart) with the second; --prefer-new and --replace change that as documented.
func TestImportMergesRecordings(t *testing.T) {
	root := newTestRepo(t)
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	first := shopBundle(t, t1, "/a", "first a", "/cart", "first cart")
	second := shopBundle(t, t1.Add(24*time.Hour), "/a", "second a", "/cart", "second cart", "/b", "second b")

	stdout, stderr, code := runIn(t, root, "import", "--task", "shop", first)
	if code != 0 {
		t.Fatalf("first import: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"self-check: every recorded request replayed once (2 exchanges)", "generic rules only", "+ inferred", "+ hand-written", "hit rate 100.0%"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("first import output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, stderr, code = runIn(t, root, "import", "--task", "shop", second)
	if code != 0 || !strings.Contains(stdout, "merged with the existing recording: 2 exchanges before, 5 now") {
		t.Fatalf("second import: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := strings.Join(replayTitles(t, root, "shop", "/a", "/cart", "/b"), "|"); got != "first a|second cart|second b" {
		t.Errorf("merged: %s", got)
	}
	if _, _, code := runIn(t, root, "audit", "shop"); code != 0 {
		t.Errorf("merged recording fails the audit")
	}

	// --prefer-new: the first copies of requests recorded again are dropped
	third := shopBundle(t, t1.Add(48*time.Hour), "/a", "third a")
	stdout, stderr, code = runIn(t, root, "import", "--task", "shop", "--prefer-new", third)
	if code != 0 || !strings.Contains(stdout, "5 exchanges before, 4 now") {
		t.Fatalf("--prefer-new: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := strings.Join(replayTitles(t, root, "shop", "/a", "/cart", "/b"), "|"); got != "third a|second cart|second b" {
		t.Errorf("--prefer-new: %s", got)
	}

	// --replace: only the new recording is left
	if _, stderr, code := runIn(t, root, "import", "--task", "shop", "--replace", first); code != 0 {
		t.Fatalf("--replace: %s", stderr)
	}
	if n, err := recording.CountRecordingEntries(filepath.Join(root, "tasks", "shop", "recording")); n != 2 || err != nil {
		t.Errorf("after --replace: %d entries, %v", n, err)
	}
	if _, stderr, code := runIn(t, root, "import", "--task", "shop", "--replace", "--prefer-new", first); code != 1 || !strings.Contains(stderr, "exclude each other") {
		t.Errorf("--replace with --prefer-new: exit %d, %s", code, stderr)
	}

	// a published recording directory imports too (here into another task)
	if _, stderr, code := runIn(t, root, "import", "--task", "copy", filepath.Join(root, "tasks", "shop", "recording")); code != 0 {
		t.Fatalf("import of a recording directory: %s", stderr)
	}
	if got := strings.Join(replayTitles(t, root, "copy", "/a", "/cart"), "|"); got != "first a|first cart" {
		t.Errorf("imported recording: %s", got)
	}
	m, _ := os.ReadFile(filepath.Join(root, "tasks", "copy", "recording", "manifest.json"))
	if !strings.Contains(string(m), `"task_id": "copy"`) {
		t.Errorf("manifest of the copy: %s", m)
	}
}

// TestImportRefusesBadBundles: a bundle that fails the audit, and a recording whose tar is
// unsafe, are refused with every problem listed, and nothing is written.
func TestImportRefusesBadBundles(t *testing.T) {
	root := newTestRepo(t)
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	bad := shopBundle(t, t1, "/a", "a", "/b", "b")
	path := filepath.Join(bad, recording.WARCFile)
	data, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.ReplaceAll(data, []byte("Xookie:"), []byte("Cookie:")), 0o644)
	os.WriteFile(filepath.Join(bad, recording.ManifestFile), []byte(`{"task_id":"shop","recorded_by":"me"}`), 0o644)

	stdout, stderr, code := runIn(t, root, "import", "--task", "shop", bad)
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{
		`manifest.json: unknown field "recorded_by"`,
		"archive/data.warc: entry e000001: request stores the Cookie header",
		"archive/data.warc: entry e000002: request stores the Cookie header",
		"fails the audit (5 problems, listed above); nothing was imported",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "tasks", "shop")); err == nil {
		t.Errorf("a refused import created the task")
	}
	// pab audit lists the same problems and exits 1
	out, _, code := runIn(t, root, "audit", bad)
	if code != 1 || strings.Count(out, "\n") != 5 {
		t.Errorf("audit: exit %d\n%s", code, out)
	}

	// a recording whose tar holds a link, another path or a second file
	good := shopBundle(t, t1, "/a", "a")
	warcData, _ := os.ReadFile(filepath.Join(good, recording.WARCFile))
	for _, tc := range []struct {
		name    string
		entries []tar.Header
		want    string
	}{
		{"link", []tar.Header{{Typeflag: tar.TypeSymlink, Name: recording.WARCFile, Linkname: "/etc/passwd"}}, "symlink"},
		{"outside", []tar.Header{{Typeflag: tar.TypeReg, Name: "../data.warc", Size: int64(len(warcData))}}, "path outside archive/"},
		{"second file", []tar.Header{{Typeflag: tar.TypeReg, Name: recording.WARCFile, Size: int64(len(warcData))}, {Typeflag: tar.TypeReg, Name: "archive/x.warc", Size: int64(len(warcData))}}, "second entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "recording")
			if err := recording.PackFormat2(good, rec, recording.PartSize); err != nil { // a format 2 tar
				t.Fatal(err)
			}
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			for _, h := range tc.entries {
				h.Mode = 0o644
				tw.WriteHeader(&h)
				if h.Typeflag == tar.TypeReg {
					tw.Write(warcData)
				}
			}
			tw.Close()
			zw.Close()
			os.WriteFile(filepath.Join(rec, recording.RecordingWARCFile), buf.Bytes(), 0o644)
			_, stderr, code := runIn(t, root, "import", "--task", "shop", rec)
			if code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "nothing was imported") {
				t.Errorf("exit %d, stderr:\n%s", code, stderr)
			}
			if _, err := os.Stat(filepath.Join(root, "tasks", "shop")); err == nil {
				t.Errorf("a refused import created the task")
			}
		})
	}
}

// TestRecordingMigrateCommand: a task with a format 1 recording is rewritten into format 2,
// then audits clean and replays.
func TestRecordingMigrateCommand(t *testing.T) {
	root := newTestRepo(t)
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	b := shopBundle(t, t1, "/a", "old a", "/b", "old b")
	// Xookie is not a credential; keep the bundle clean
	rec := filepath.Join(root, "tasks", "old", "recording")
	os.MkdirAll(rec, 0o755)
	os.WriteFile(filepath.Join(root, "tasks", "old", "task.yaml"), []byte("title: Old\n"), 0o644)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	// seed 003's bundles also held a CDXJ index and a datapackage.json: both are skipped
	for _, name := range []string{recording.ManifestFile, recording.WARCFile, "indexes/index.cdxj", recording.EntriesFile, recording.PagesFile, "datapackage.json"} {
		data, _ := os.ReadFile(filepath.Join(b, name))
		switch name {
		case recording.ManifestFile:
			data = []byte(`{"task_id":"old","start_url":"https://shop.test/a","captured_from":"2026-05-01T09:00:00.000Z"}`)
		case "indexes/index.cdxj":
			data = []byte("test,shop)/a 20260501090000 {\"url\":\"https://shop.test/a\"}\n")
		case "datapackage.json":
			data = []byte(`{"profile":"data-package","wacz_version":"1.1.1","resources":[]}`)
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))})
		tw.Write(data)
	}
	tw.Close()
	zw.Close()
	os.WriteFile(filepath.Join(rec, recording.Format1File), buf.Bytes(), 0o644)

	out, stderr, code := runIn(t, root, "audit", "old")
	if code != 1 || !strings.Contains(out, "format 1 recording") {
		t.Errorf("audit before migration: exit %d\n%s%s", code, out, stderr)
	}
	// an import never drops a format 1 recording without being told to
	_, stderr, code = runIn(t, root, "import", "--task", "old", shopBundle(t, t1, "/c", "new c"))
	if code != 1 || !strings.Contains(stderr, "format 1 recording; run pab recording migrate old first") {
		t.Errorf("import over a format 1 recording: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(rec, recording.Format1File)); err != nil {
		t.Fatalf("the format 1 recording is gone: %v", err)
	}
	if _, stderr, code := runIn(t, root, "replay", "old", "--check"); code != 1 || !strings.Contains(stderr, "run pab recording migrate old") {
		t.Errorf("replay of a format 1 task: exit %d\n%s", code, stderr)
	}
	out, stderr, code = runIn(t, root, "recording", "migrate", "old")
	if code != 0 || !strings.Contains(out, "migrated from format 1 to format 3") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code := runIn(t, root, "audit", "old"); code != 0 {
		t.Errorf("audit after migration: %s", out)
	}
	if got := strings.Join(replayTitles(t, root, "old", "/a", "/b"), "|"); got != "old a|old b" {
		t.Errorf("replay after migration: %s", got)
	}
	out, _, code = runIn(t, root, "recording", "migrate", "old")
	if code != 0 || !strings.Contains(out, "already format 3") {
		t.Errorf("second migrate: exit %d %s", code, out)
	}
	_, stderr, code = runIn(t, root, "recording", "migrate", "nosuch")
	if code != 1 || !strings.Contains(stderr, `no task "nosuch"`) {
		t.Errorf("unknown task: exit %d %s", code, stderr)
	}
}

// TestRecordingMigrateLegacyManifest: a format 2 recording whose manifest still has seed
// 003's start_url replays (--check), inspects and audits as it is; migrate then drops the
// field, keeps every other byte of the recording, and says so.
func TestRecordingMigrateLegacyManifest(t *testing.T) {
	root := newTestRepo(t)
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	b := shopBundle(t, t1, "/a", "page a", "/b", "page b")
	taskDir := filepath.Join(root, "tasks", "shop")
	os.MkdirAll(taskDir, 0o755)
	os.WriteFile(filepath.Join(taskDir, "task.yaml"), []byte("title: Shop\n"), 0o644)
	rec := filepath.Join(taskDir, "recording")
	if err := recording.Pack(b, rec); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(rec, recording.RecordingManifestFile)
	m, _ := os.ReadFile(mpath)
	legacy := bytes.Replace(m, []byte("{\n"), []byte("{\n  \"start_url\": \"https://shop.test/a\",\n"), 1)
	if bytes.Equal(legacy, m) {
		t.Fatalf("manifest %s", m)
	}
	os.WriteFile(mpath, legacy, 0o644)
	others := map[string][]byte{}
	for _, name := range []string{recording.RecordingPagesFile, recording.RecordingEntriesFile, recording.RecordingWARCFile} {
		others[name], _ = os.ReadFile(filepath.Join(rec, name))
	}

	if out, stderr, code := runIn(t, root, "replay", "shop", "--check"); code != 0 || strings.Contains(stderr, "start_url") {
		t.Errorf("replay --check with start_url: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runIn(t, root, "inspect", "shop", "https://shop.test/a"); code != 0 || strings.Contains(stderr, "start_url") {
		t.Errorf("inspect with start_url: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runIn(t, root, "audit", "shop"); code != 0 {
		t.Errorf("audit with start_url: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code := runIn(t, root, "recording", "migrate", "shop")
	if code != 0 || !strings.Contains(out, "dropped the legacy manifest field start_url") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, stderr)
	}
	if got, _ := os.ReadFile(mpath); !bytes.Equal(got, m) {
		t.Errorf("manifest after migrate:\n%s\nwant:\n%s", got, m)
	}
	for name, data := range others {
		if got, _ := os.ReadFile(filepath.Join(rec, name)); !bytes.Equal(got, data) {
			t.Errorf("%s changed", name)
		}
	}
	if out, stderr, code := runIn(t, root, "audit", "shop"); code != 0 {
		t.Errorf("audit after migrate: exit %d\n%s%s", code, out, stderr)
	}
	if got := strings.Join(replayTitles(t, root, "shop", "/a", "/b"), "|"); got != "page a|page b" {
		t.Errorf("replay after migrate: %s", got)
	}
	out, _, code = runIn(t, root, "recording", "migrate", "shop")
	if code != 0 || !strings.Contains(out, "already format 3") {
		t.Errorf("second migrate: exit %d %s", code, out)
	}

	// a field neither pab nor seed 003 defined is still refused
	os.WriteFile(mpath, bytes.Replace(m, []byte("{\n"), []byte("{\n  \"recorder\": \"me\",\n"), 1), 0o644)
	if _, stderr, code := runIn(t, root, "replay", "shop", "--check"); code != 1 || !strings.Contains(stderr, `unknown field "recorder"`) {
		t.Errorf("replay with an unknown field: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runIn(t, root, "recording", "migrate", "shop"); code != 1 || !strings.Contains(stderr, `unknown field "recorder"`) {
		t.Errorf("migrate with an unknown field: exit %d\n%s", code, stderr)
	}
}
