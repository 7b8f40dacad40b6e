package main

// Tests of concurrent writers of one task (the task write lock), of imports that must fail
// before anything is published, and of the unpack limits, each against the built pab.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/filelock"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/warc"
)

// writeShopWARC writes a plain WARC file of n GET exchanges https://shop.test/w<k>/p<j>, each
// a response and its request record, captured from t0 on.
func writeShopWARC(t *testing.T, path string, k, n int, t0 time.Time) {
	t.Helper()
	var b bytes.Buffer
	record := func(typ, uri string, d time.Time, block string) {
		fmt.Fprintf(&b, "WARC/1.1\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:%08x-0000-4000-8000-%012x>\r\nWARC-Date: %s\r\nWARC-Target-URI: %s\r\nContent-Type: application/http; msgtype=%s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			typ, k, b.Len(), d.UTC().Format(time.RFC3339), uri, typ, len(block), block)
	}
	for j := range n {
		uri := fmt.Sprintf("https://shop.test/w%d/p%d", k, j)
		d := t0.Add(time.Duration(j) * time.Second)
		body := fmt.Sprintf("<html><head><title>w%d p%d</title></head><body>%s</body></html>", k, j, uri)
		record("response", uri, d, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		record("request", uri, d, fmt.Sprintf("GET /w%d/p%d HTTP/1.1\r\nHost: shop.test\r\nAccept: text/html\r\n\r\n", k, j))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recordedURLs unpacks the task's recording and returns its URLs in recording order.
func recordedURLs(t *testing.T, root, id string) []string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b")
	if err := recording.Unpack(filepath.Join(root, "tasks", id, "recording"), dir); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var urls []string
	for _, e := range b.Entries {
		urls = append(urls, e.URL)
	}
	return urls
}

// strayDirs lists what a writer may leave behind and must not: the recording's temporary and
// moved-aside directories, and anything in the cache's work area.
func strayDirs(t *testing.T, root, id string) []string {
	t.Helper()
	var stray []string
	des, _ := os.ReadDir(filepath.Join(root, "tasks", id))
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".recording.") {
			stray = append(stray, filepath.Join("tasks", id, de.Name()))
		}
	}
	cache := filepath.Join(root, ".cache")
	for _, sub := range []string{"work", "."} {
		des, _ := os.ReadDir(filepath.Join(cache, sub))
		for _, de := range des {
			if sub == "work" || strings.HasPrefix(de.Name(), "import-") || strings.HasPrefix(de.Name(), "migrate-") {
				stray = append(stray, filepath.Join(".cache", sub, de.Name()))
			}
		}
	}
	return stray
}

// TestImportConcurrent: eight pab import processes into one task at once, each a different
// WARC of five exchanges, all succeed, one after the other: every one of the 40 exchanges is
// in the recording, which passes the audit, and no temporary directory is left.
func TestImportConcurrent(t *testing.T) {
	root := newTestRepo(t)
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	const procs, each = 8, 5
	var want []string
	files := make([]string, procs)
	for k := range procs {
		files[k] = filepath.Join(t.TempDir(), fmt.Sprintf("w%d.warc", k))
		writeShopWARC(t, files[k], k, each, t0.Add(time.Duration(k)*time.Minute))
		for j := range each {
			want = append(want, fmt.Sprintf("https://shop.test/w%d/p%d", k, j))
		}
	}
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, procs)
	var wg sync.WaitGroup
	for k := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(pabBin, "--repo", root, "import", "--task", "shop", "--no-check", files[k])
			cmd.Env = append(os.Environ(), "PAB_CACHE="+filepath.Join(root, ".cache"), "PAB_REPO=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			results[k] = result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
			if err != nil && cmd.ProcessState == nil {
				results[k].code, results[k].stderr = -1, err.Error()
			}
		}()
	}
	wg.Wait()
	waited := 0
	for k, r := range results {
		if r.code != 0 {
			t.Errorf("import %d: exit %d\n%s%s", k, r.code, r.stdout, r.stderr)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(r.stderr), "\n") {
			switch {
			case line == "":
			case strings.HasPrefix(line, "pab import: tasks/shop is being written by another pab") && strings.HasSuffix(line, "; waiting"):
				waited++
			default:
				t.Errorf("import %d: unexpected stderr line %q", k, line)
			}
		}
	}
	got := recordedURLs(t, root, "shop")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the recording holds %d exchanges, want all %d:\n%v", len(got), len(want), got)
	}
	if out, stderr, code := runIn(t, root, "audit", "shop"); code != 0 {
		t.Errorf("audit: exit %d\n%s%s", code, out, stderr)
	}
	if stray := strayDirs(t, root, "shop"); len(stray) > 0 {
		t.Errorf("left behind: %v", stray)
	}
	t.Logf("%d of %d imports waited for another", waited, procs)
}

// lockHolder takes the write lock of tasks/<id> of root as another writer would (an open
// file description of the same lock file, which pab processes see as held) until release.
func lockHolder(t *testing.T, root, id string) (release func()) {
	t.Helper()
	path := task.LockPath(filepath.Join(root, "tasks", id))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := filelock.Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	return unlock
}

// TestImportNoWait: while another process holds the task's lock, import --no-wait and
// recording migrate --no-wait fail at once with one line; import without it says it waits,
// and goes on once the lock is released.
func TestImportNoWait(t *testing.T) {
	root := newTestRepo(t)
	in := filepath.Join(t.TempDir(), "w.warc")
	writeShopWARC(t, in, 0, 2, time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	if _, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", in); code != 0 {
		t.Fatalf("first import: %s", stderr)
	}
	release := lockHolder(t, root, "shop")

	start := time.Now()
	stdout, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", "--no-wait", in)
	msg := strings.TrimSpace(stderr)
	if code != 1 || stdout != "" || strings.Contains(msg, "\n") ||
		!strings.HasPrefix(msg, "pab: import: tasks/shop is being written by another pab") || !strings.Contains(msg, "not waiting (--no-wait)") {
		t.Errorf("import --no-wait: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, stderr, code = runIn(t, root, "recording", "migrate", "--no-wait", "shop")
	if code != 1 || !strings.Contains(stderr, "pab: recording migrate: tasks/shop is being written by another pab") {
		t.Errorf("migrate --no-wait: exit %d, stderr %q", code, stderr)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("--no-wait took %v", d)
	}

	// without --no-wait: one line, then the import waits for the lock
	cmd := exec.Command(pabBin, "--repo", root, "import", "--task", "shop", "--no-check", in)
	cmd.Env = append(os.Environ(), "PAB_CACHE="+filepath.Join(root, ".cache"), "PAB_REPO=")
	var out bytes.Buffer
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errLines := bufio.NewReader(errPipe)
	line, err := errLines.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pab import: tasks/shop is being written by another pab") || !strings.HasSuffix(line, "; waiting\n") {
		t.Errorf("waiting line %q %v", line, err)
	}
	if n := len(recordedURLs(t, root, "shop")); n != 2 {
		t.Errorf("the waiting import changed the task: %d exchanges", n)
	}
	release()
	rest, _ := io.ReadAll(errLines)
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "merged with the existing recording: 2 exchanges before, 4 now") {
		t.Errorf("the import after the wait: %v\n%s%s", err, out.String(), rest)
	}
}

// TestImportRefusedBeforePublishing: a WARC whose HTTP header is 20 MB is refused with the
// file and offset, and neither the existing recording nor the task list changes.
func TestImportRefusedBeforePublishing(t *testing.T) {
	root := newTestRepo(t)
	dir := t.TempDir()
	small := filepath.Join(dir, "w.warc")
	writeShopWARC(t, small, 0, 3, time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	if _, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", small); code != 0 {
		t.Fatalf("first import: %s", stderr)
	}
	rec := filepath.Join(root, "tasks", "shop", "recording")
	before, err := recording.HashRecording(rec)
	if err != nil {
		t.Fatal(err)
	}

	huge := filepath.Join(dir, "huge-header.warc.gz")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Padding: " + strings.Repeat("p", 20<<20) + "\r\nContent-Length: 2\r\n\r\nok"
	fmt.Fprintf(zw, "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000001>\r\nWARC-Date: 2026-05-02T09:00:00Z\r\nWARC-Target-URI: https://shop.test/huge\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", len(head), head)
	zw.Close()
	f.Close()

	for _, id := range []string{"shop", "fresh"} {
		stdout, stderr, code := runIn(t, root, "import", "--task", id, huge)
		msg := strings.TrimSpace(stderr)
		want := fmt.Sprintf("pab: read %s at offset 0: record too large: the HTTP header of this response record is longer than %d bytes", huge, warc.MaxHTTPHeaderBytes)
		if code != 1 || stdout != "" || msg != want {
			t.Errorf("import into %s: exit %d, stdout %q\nstderr %q\nwant   %q", id, code, stdout, msg, want)
		}
	}
	if after, err := recording.HashRecording(rec); err != nil || after != before {
		t.Errorf("the recording changed: %v", err)
	}
	if out, stderr, code := runIn(t, root, "audit", "shop"); code != 0 {
		t.Errorf("audit: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "tasks", "fresh")); err == nil {
		t.Errorf("the refused import created tasks/fresh")
	}
	if stray := strayDirs(t, root, "shop"); len(stray) > 0 {
		t.Errorf("left behind: %v", stray)
	}
}

// TestImportRecoversInterruptedWrite: what a writer killed halfway leaves (its recording
// renamed aside and not replaced, its temporary directories) is repaired by the next writer
// under the lock, which then merges with the recording put back.
func TestImportRecoversInterruptedWrite(t *testing.T) {
	root := newTestRepo(t)
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	first, second := filepath.Join(t.TempDir(), "a.warc"), filepath.Join(t.TempDir(), "b.warc")
	writeShopWARC(t, first, 0, 2, t0)
	writeShopWARC(t, second, 1, 2, t0.Add(time.Hour))
	if _, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", first); code != 0 {
		t.Fatalf("first import: %s", stderr)
	}
	taskDir := filepath.Join(root, "tasks", "shop")
	if err := os.Rename(filepath.Join(taskDir, "recording"), filepath.Join(taskDir, ".recording.old-1234")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(taskDir, ".recording.tmp-5678"), 0o755)
	os.WriteFile(filepath.Join(taskDir, ".recording.tmp-5678", "warc.tar.gz.000"), []byte("half"), 0o644)
	t.Setenv("PAB_CACHE", filepath.Join(root, ".cache"))
	work := (&task.Repo{Root: root}).WorkRoot(taskDir)
	os.MkdirAll(filepath.Join(work, "import-999", "in"), 0o755)

	stdout, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", second)
	if code != 0 || !strings.Contains(stdout, "2 exchanges before, 4 now") {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"pab import: put back " + filepath.Join(taskDir, ".recording.old-1234"), "pab import: removed " + filepath.Join(taskDir, ".recording.tmp-5678"), "pab import: removed " + filepath.Join(work, "import-999")} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if stray := strayDirs(t, root, "shop"); len(stray) > 0 {
		t.Errorf("left behind: %v", stray)
	}
	if out, _, code := runIn(t, root, "audit", "shop"); code != 0 {
		t.Errorf("audit: %s", out)
	}
}

// TestUnpackBombRefused: a recording of 100 MiB of one byte, a few hundred KB packed, is
// more than 50 times its size: replay and audit refuse it with the recording named, and
// nothing of it stays in the cache; an import that would publish it is refused too.
func TestUnpackBombRefused(t *testing.T) {
	root := newTestRepo(t)
	const size = 100 << 20
	bundle := filepath.Join(t.TempDir(), "bundle")
	w, err := recording.NewBundleWriter(bundle, recording.Manifest{TaskID: "bomb"})
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, size)
	if _, err := w.Add(recording.Exchange{URL: "https://bomb.test/", Date: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC), Status: 200,
		RespHeader: http.Header{"Content-Type": {"text/plain"}}, Body: zeros}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(root, "tasks", "bomb", "recording")
	if err := recording.Pack(bundle, rec); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "tasks", "bomb", "task.yaml"), []byte("title: Bomb\n"), 0o644)

	_, stderr, code := runIn(t, root, "replay", "bomb", "--check")
	msg := strings.TrimSpace(stderr)
	if code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "recording "+rec+" expands to more than") ||
		!strings.Contains(msg, "50 times its packed size") || !strings.Contains(msg, "refused as a decompression bomb") {
		t.Errorf("replay: exit %d, stderr %q", code, stderr)
	}
	bundles := filepath.Join(root, ".cache", "bundles")
	if des, _ := os.ReadDir(bundles); len(des) > 0 {
		t.Errorf("the cache keeps %v", des)
	}
	out, _, code := runIn(t, root, "audit", "bomb")
	if code != 1 || !strings.Contains(out, "refused as a decompression bomb") {
		t.Errorf("audit: exit %d\n%s", code, out)
	}
	// importing the bundle would publish the bomb: refused, nothing written
	stdout, stderr, code := runIn(t, root, "import", "--task", "shop", bundle)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "refused as a decompression bomb") || !strings.Contains(stderr, "nothing was imported") {
		t.Errorf("import: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "tasks", "shop")); err == nil {
		t.Errorf("the refused import created tasks/shop")
	}
	if stray := strayDirs(t, root, "shop"); len(stray) > 0 {
		t.Errorf("left behind: %v", stray)
	}
}
