package task

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
)

// corpusWARC is a real capture (books.toscrape.com, node-warc's test file; see
// testdata/SOURCES.md).
const corpusWARC = "../testdata/sites/books.toscrape.warc"

// packedOnce holds a bundle imported from corpusWARC, shared by the tests (read-only).
var packedOnce struct {
	sync.Once
	dir string
	err error
}

// corpusBundle imports corpusWARC once per test binary and returns the bundle directory.
func corpusBundle(t *testing.T) string {
	t.Helper()
	packedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pab-task-test-")
		if err != nil {
			packedOnce.err = err
			return
		}
		packedOnce.dir = filepath.Join(dir, "bundle")
		_, packedOnce.err = recording.ImportWARCs([]string{corpusWARC}, packedOnce.dir, recording.ImportOptions{TaskID: "books"})
	})
	if packedOnce.err != nil {
		t.Fatal(packedOnce.err)
	}
	return packedOnce.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if packedOnce.dir != "" {
		os.RemoveAll(filepath.Dir(packedOnce.dir))
	}
	os.Exit(code)
}

// newRepo makes a repository with sites/ and a task "books" whose recording is the packed
// corpus capture, in format 2 (unpacked into the cache by BundleDir).
func newRepo(t *testing.T) (*Repo, *Task) {
	t.Helper()
	return newRepoFormat(t, recording.RecordingFormat2)
}

// newRepoFormat is newRepo with the recording in the given format (2 or 3).
func newRepoFormat(t *testing.T, format int) (*Repo, *Task) {
	t.Helper()
	root := t.TempDir()
	t.Setenv("PAB_CACHE", "")
	repo := &Repo{Root: root}
	if err := os.MkdirAll(repo.SitesDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	taskDir := filepath.Join(repo.TasksDir(), "books")
	if err := WriteCardIfMissing(taskDir, "books", "Books"); err != nil {
		t.Fatal(err)
	}
	pack := recording.Pack
	if format == recording.RecordingFormat2 {
		pack = func(b, r string) error { return recording.PackFormat2(b, r, recording.PartSize) }
	}
	if err := pack(corpusBundle(t), filepath.Join(taskDir, "recording")); err != nil {
		t.Fatal(err)
	}
	tk, err := repo.Task("books")
	if err != nil {
		t.Fatal(err)
	}
	return repo, tk
}

// countUnpacks replaces the unpack hook with a counting one for the test.
func countUnpacks(t *testing.T) *atomic.Int32 {
	var n atomic.Int32
	orig := unpack
	unpack = func(rec, dest string) error {
		n.Add(1)
		return orig(rec, dest)
	}
	t.Cleanup(func() { unpack = orig })
	return &n
}

func TestFindRepo(t *testing.T) {
	flagDir, envDir, wd := t.TempDir(), t.TempDir(), t.TempDir()
	t.Chdir(wd)
	t.Setenv("PAB_REPO", envDir)
	for _, c := range []struct{ flag, want string }{{flagDir, flagDir}, {"", envDir}} {
		r, err := FindRepo(c.flag)
		if err != nil || r.Root != c.want {
			t.Errorf("FindRepo(%q) = %v, %v; want %s", c.flag, r, err, c.want)
		}
	}
	t.Setenv("PAB_REPO", "")
	r, err := FindRepo("")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.EvalSymlinks(r.Root); got != mustEval(t, wd) {
		t.Errorf("FindRepo from the working directory = %s, want %s", r.Root, wd)
	}
	if _, err := FindRepo(filepath.Join(wd, "missing")); err == nil {
		t.Errorf("FindRepo of a missing directory succeeded")
	}

	t.Setenv("PAB_CACHE", "")
	if got := (&Repo{Root: "/r"}).CacheDir(); got != "/r/.cache" {
		t.Errorf("default cache %s", got)
	}
	t.Setenv("PAB_CACHE", "rel/cache")
	if got := (&Repo{Root: "/r"}).CacheDir(); got != filepath.Join(mustEval(t, wd), "rel/cache") && got != filepath.Join(wd, "rel/cache") {
		t.Errorf("PAB_CACHE cache %s", got)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	got, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTaskIDsAndTask(t *testing.T) {
	repo := &Repo{Root: t.TempDir()}
	if ids, err := repo.TaskIDs(); ids != nil || err != nil {
		t.Errorf("no tasks/: %v %v", ids, err)
	}
	for _, id := range []string{"zeta", "alpha", "mid-1.x"} {
		if err := WriteCardIfMissing(filepath.Join(repo.TasksDir(), id), id, "T "+id); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(repo.TasksDir(), "no-card"), 0o755)
	os.WriteFile(filepath.Join(repo.TasksDir(), "file.yaml"), nil, 0o644)
	ids, err := repo.TaskIDs()
	if err != nil || strings.Join(ids, ",") != "alpha,mid-1.x,zeta" {
		t.Errorf("TaskIDs = %v, %v", ids, err)
	}
	tk, err := repo.Task("alpha")
	if err != nil || tk.ID != "alpha" || tk.Dir != filepath.Join(repo.TasksDir(), "alpha") {
		t.Fatalf("Task(alpha) = %+v, %v", tk, err)
	}
	if tk.RecordingDir() != filepath.Join(tk.Dir, "recording") || tk.RulesDir() != filepath.Join(tk.Dir, "rules") || tk.GradingPath() != filepath.Join(tk.Dir, "grading.yaml") {
		t.Errorf("paths %s %s %s", tk.RecordingDir(), tk.RulesDir(), tk.GradingPath())
	}
	if tk.HasGrading() {
		t.Errorf("HasGrading without grading.yaml")
	}
	os.WriteFile(tk.GradingPath(), []byte("require: []\n"), 0o644)
	if !tk.HasGrading() {
		t.Errorf("HasGrading with grading.yaml")
	}
	_, err = repo.Task("no-card")
	if want := fmt.Sprintf("no task %q in %s", "no-card", repo.TasksDir()); err == nil || err.Error() != want {
		t.Errorf("missing task: %v, want %s", err, want)
	}
	for _, bad := range []string{"", "..", "../alpha", "a/b", `a\b`, ".hidden", "-x", "a b", strings.Repeat("x", 101)} {
		if _, err := repo.Task(bad); err == nil || !strings.Contains(err.Error(), "bad task id") {
			t.Errorf("Task(%q): %v", bad, err)
		}
	}
}

func writeCard(t *testing.T, dir, body string) *Task {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CardFile), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Task{Repo: &Repo{Root: filepath.Dir(filepath.Dir(dir))}, ID: filepath.Base(dir), Dir: dir}
}

func TestShippedTaskCards(t *testing.T) {
	repo := &Repo{Root: ".."}
	// the demo tasks shipped in tasks/ (a user's own imports may lack a prompt)
	for _, id := range []string{"archive-org-jobs", "books-sapiens-price", "lil-former-projects"} {
		tk, err := repo.Task(id)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := tk.Card(); err != nil || c.Title == "" || c.Prompt == "" {
			t.Errorf("%s: card %+v, %v", id, c, err)
		}
	}
}

func TestCard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tasks", "amazon-airpods")
	tk := writeCard(t, dir, `id: amazon-airpods
title: Buy AirPods
prompt: >-
  I want AirPods
  shipped to New York.
capture:
  locale: en-US
  timezone: America/New_York
answer: "$199.00"
tags: [shopping, cart]
`)
	c, err := tk.Card()
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "amazon-airpods" || c.Title != "Buy AirPods" || c.Prompt != "I want AirPods shipped to New York." ||
		c.Capture == nil || c.Capture.Timezone != "America/New_York" || c.Answer != "$199.00" || !slices.Equal(c.Tags, []string{"shopping", "cart"}) {
		t.Errorf("card %+v", c)
	}

	tk = writeCard(t, dir, "")
	if c, err := tk.Card(); err != nil || c.ID != "amazon-airpods" {
		t.Errorf("empty card: %+v, %v", c, err)
	}

	for _, bad := range []struct{ body, want string }{
		{"title: x\npromt: y\n", `line 2: unknown field "promt"; did you mean "prompt"?`},
		{"Title: x\n", `line 1: unknown field "Title"; did you mean "title"?`},
		{"ids: x\n", `did you mean "id"?`},
		{"id: other\ntitle: x\n", `id "other" differs from the task directory name "amazon-airpods"`},
		{"title: x\n---\ntitle: y\n", "line 2: a second YAML document"},
		{"title: [unclosed\n", "task.yaml: line 1: did not find expected"},
		{"capture:\n  locale: en\n  timezon: x\n", `line 3: unknown field "capture.timezon"; did you mean "capture.timezone"?`},
		{"title: " + strings.Repeat("x", maxCardBytes) + "\n", "larger than"},
	} {
		tk = writeCard(t, dir, bad.body)
		_, err := tk.Card()
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "task.yaml") {
			t.Errorf("card %.40q: err = %v, want %q", bad.body, err, bad.want)
		}
	}
}

// TestCardUnknownFields: the seed's card with an extra field reads, the field is kept and
// warned about with file and line; short unknown names are not taken for typos.
func TestCardUnknownFields(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tasks", "amazon-airpods")
	tk := writeCard(t, dir, `id: amazon-airpods
title: Buy AirPods Pro 3 on Amazon
prompt: >-                       # the instruction given to the agent
  I want Apple AirPods Pro 3 from Amazon, shipped to New York (ZIP 10001). ...
difficulty: easy
capture:                         # the browser's language and time zone while recording;
  locale: en-US                  # replay keeps them
  timezone: America/New_York
  os: linux
`)
	c, err := tk.Card()
	if err != nil {
		t.Fatal(err)
	}
	if c.Title != "Buy AirPods Pro 3 on Amazon" || c.Capture == nil || c.Capture.Locale != "en-US" || c.Capture.Timezone != "America/New_York" {
		t.Errorf("card %+v", c)
	}
	if c.Extra["difficulty"] != "easy" {
		t.Errorf("extra = %v, want difficulty kept", c.Extra)
	}
	want := []string{
		`tasks/amazon-airpods/task.yaml:5: unknown field "difficulty" ignored`,
		`tasks/amazon-airpods/task.yaml:9: unknown field "capture.os" ignored`,
	}
	if !slices.Equal(c.Warnings, want) {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(c.Warnings, "\n"), strings.Join(want, "\n"))
	}
	tk = writeCard(t, dir, "title: x\n")
	if c, err := tk.Card(); err != nil || c.Warnings != nil || c.Extra != nil {
		t.Errorf("plain card: %+v, %v", c, err)
	}
	for _, tc := range []struct {
		name string
		want string
	}{{"promt", "prompt"}, {"titel", "title"}, {"tag", "tags"}, {"answr", "answer"}, {"di", ""}, {"os", ""}, {"difficulty", ""}, {"grading", ""}} {
		if got := nearestField(tc.name, cardFields); got != tc.want {
			t.Errorf("nearestField(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestWriteCardIfMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tasks", "t1")
	if err := WriteCardIfMissing(dir, "t1", `Price: "£54.23" and more`); err != nil {
		t.Fatal(err)
	}
	if err := WriteCardIfMissing(dir, "t1", "other title"); err != nil {
		t.Fatal(err)
	}
	tk := &Task{ID: "t1", Dir: dir}
	c, err := tk.Card()
	if err != nil || c.Title != `Price: "£54.23" and more` {
		t.Errorf("card %+v, %v", c, err)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 {
		t.Errorf("task dir holds %d entries, want only task.yaml", len(des))
	}
	if err := WriteCardIfMissing(dir, "../x", "t"); err == nil {
		t.Errorf("bad id accepted")
	}
}

func TestBundleDirUnpacksOncePerContent(t *testing.T) {
	repo, tk := newRepo(t)
	n := countUnpacks(t)
	dir, err := tk.BundleDir()
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := recording.HashRecording(tk.RecordingDir())
	if want := filepath.Join(repo.Root, ".cache", "bundles", "books-"+hash[:16]); dir != want {
		t.Errorf("bundle dir %s, want %s", dir, want)
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Entries) != 30 {
		t.Errorf("%d entries, want the capture's 30", len(b.Entries))
	}
	if _, err := b.Response(&b.Entries[0]); err != nil {
		t.Error(err)
	}
	b.Close()

	again, err := tk.BundleDir()
	if err != nil || again != dir || n.Load() != 1 {
		t.Errorf("second call: %s, %v, %d unpacks; want the cached copy", again, err, n.Load())
	}

	// leftovers: another task's copy, a fresh and a stale temporary directory
	bundles := filepath.Dir(dir)
	other := filepath.Join(bundles, "books-extra-0123456789abcdef")
	fresh := filepath.Join(bundles, "books-0123456789abcdef.tmp-1-1")
	stale := filepath.Join(bundles, "books-0123456789abcdef.tmp-2-2")
	for _, d := range []string{other, fresh, stale} {
		os.MkdirAll(d, 0o755)
	}
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(stale, old, old)

	// a changed recording is unpacked again and replaces the older copy
	pages := filepath.Join(tk.RecordingDir(), recording.RecordingPagesFile)
	f, _ := os.OpenFile(pages, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"url":"http://books.toscrape.com/extra","ts":"2018-11-11T22:56:36.000Z","fetched":"GET"}` + "\n")
	f.Close()
	newDir, err := tk.BundleDir()
	if err != nil {
		t.Fatal(err)
	}
	if newDir == dir || n.Load() != 2 {
		t.Errorf("changed recording: %s (old %s), %d unpacks", newDir, dir, n.Load())
	}
	for _, c := range []struct {
		path string
		keep bool
	}{{dir, false}, {newDir, true}, {other, true}, {fresh, true}, {stale, false}} {
		if _, err := os.Stat(c.path); (err == nil) != c.keep {
			t.Errorf("%s: exists %v, want %v", filepath.Base(c.path), err == nil, c.keep)
		}
	}
}

func TestBundleDirConcurrent(t *testing.T) {
	_, tk := newRepo(t)
	n := countUnpacks(t)
	const callers = 8
	dirs := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirs[i], errs[i] = tk.BundleDir()
		}()
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Errorf("caller %d: %s, %v", i, dirs[i], errs[i])
		}
	}
	b, err := recording.OpenBundle(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	des, _ := os.ReadDir(filepath.Dir(dirs[0]))
	if len(des) != 1 {
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		t.Errorf("cache holds %v after %d unpacks, want one bundle", names, n.Load())
	}
}

func TestBundleDirErrorsLeaveNoCacheEntry(t *testing.T) {
	repo, tk := newRepo(t)
	manifest := filepath.Join(tk.RecordingDir(), recording.RecordingManifestFile)
	os.WriteFile(manifest, []byte(`{"task_id":"books","format":1}`), 0o644)
	_, err := tk.BundleDir()
	if err == nil || !strings.Contains(err.Error(), "has format 1; this pab reads format 3 (and 2)") {
		t.Errorf("format 1: %v", err)
	}
	if des, _ := os.ReadDir(filepath.Join(repo.CacheDir(), "bundles")); len(des) != 0 {
		t.Errorf("failed unpack left %d cache entries", len(des))
	}

	os.RemoveAll(tk.RecordingDir())
	_, err = tk.BundleDir()
	if err == nil || !strings.Contains(err.Error(), "task books has no recording") {
		t.Errorf("no recording: %v", err)
	}
}

func TestResolve(t *testing.T) {
	repo, tk := newRepo(t)

	// a task id
	tg, err := Resolve("books", repo)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Name != "books" || tg.Task == nil || !slices.Equal(tg.RulesDirs, []string{repo.SitesDir(), tk.RulesDir()}) {
		t.Errorf("task id target %+v", tg)
	}
	cached := tg.BundleDir

	// the task's recording directory means the task
	if tg, err := Resolve(tk.RecordingDir(), repo); err != nil || tg.Task == nil || tg.BundleDir != cached {
		t.Errorf("recording dir target %+v, %v", tg, err)
	}

	// a bundle directory, with and without rules/
	tg, err = Resolve(cached, repo)
	if err != nil || tg.BundleDir != cached || tg.Task != nil || len(tg.RulesDirs) != 0 {
		t.Errorf("bundle target %+v, %v", tg, err)
	}
	os.Mkdir(filepath.Join(cached, "rules"), 0o755)
	if tg, _ := Resolve(cached, repo); !slices.Equal(tg.RulesDirs, []string{filepath.Join(cached, "rules")}) {
		t.Errorf("bundle rules %v", tg.RulesDirs)
	}

	// a task directory in another repository uses that repository's sites/
	other, otherTask := newRepo(t)
	tg, err = Resolve(otherTask.Dir, repo)
	if err != nil {
		t.Fatal(err)
	}
	if tg.RulesDirs[0] != other.SitesDir() || tg.Task.Repo.Root != other.Root {
		t.Errorf("task dir of another repo: rules %v", tg.RulesDirs)
	}
	// ... and a lone task directory uses repo's
	lone := filepath.Join(t.TempDir(), "lone")
	if err := os.CopyFS(lone, os.DirFS(otherTask.Dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lone, CardFile), []byte("title: a lone task\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tg, err = Resolve(lone, repo)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Name != "lone" || tg.RulesDirs[0] != repo.SitesDir() || tg.RulesDirs[1] != filepath.Join(lone, "rules") {
		t.Errorf("lone task dir: %+v", tg)
	}

	// a WARC file, imported once per content
	var imports atomic.Int32
	origImport := importWARCs
	importWARCs = func(p []string, d string, o recording.ImportOptions) (*recording.ImportReport, error) {
		imports.Add(1)
		return origImport(p, d, o)
	}
	t.Cleanup(func() { importWARCs = origImport })
	tg, err = Resolve(corpusWARC, repo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(tg.BundleDir), "warc-") || tg.Name != "books.toscrape.warc" || !slices.Equal(tg.RulesDirs, []string{repo.SitesDir()}) {
		t.Errorf("warc target %+v", tg)
	}
	if b, err := recording.OpenBundle(tg.BundleDir); err != nil {
		t.Error(err)
	} else {
		b.Close()
	}
	if tg2, err := Resolve(corpusWARC, repo); err != nil || tg2.BundleDir != tg.BundleDir || imports.Load() != 1 {
		t.Errorf("second WARC resolve: %v, %d imports", err, imports.Load())
	}

	// errors
	for _, c := range []struct{ arg, want string }{
		{"missing-task", `no task "missing-task" in ` + repo.TasksDir()},
		{"no/such/dir", "is not a bundle directory"},
		{"gone.warc.gz", "gone.warc.gz: no such file"},
		{"", "no replay target"},
	} {
		if _, err := Resolve(c.arg, repo); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%q): %v, want %q", c.arg, err, c.want)
		}
	}
	// a bad WARC leaves nothing in the cache
	bad := filepath.Join(t.TempDir(), "bad.warc")
	os.WriteFile(bad, []byte("WARC/1.1\r\nContent-Length: 99\r\n\r\nshort"), 0o644)
	if _, err := Resolve(bad, repo); err == nil {
		t.Errorf("bad WARC resolved")
	}
	des, _ := os.ReadDir(filepath.Join(repo.CacheDir(), "bundles"))
	for _, de := range des {
		if strings.Contains(de.Name(), ".tmp-") {
			t.Errorf("failed import left %s", de.Name())
		}
	}
}

// FuzzCard parses arbitrary task.yaml content: a card or an error, never a panic.
func FuzzCard(f *testing.F) {
	f.Add([]byte("id: x\ntitle: t\nprompt: >-\n  p\ncapture:\n  locale: en-US\n  timezone: UTC\nanswer: a\ntags: [a]\n"))
	f.Add([]byte("title: x\n---\ntitle: y\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("title: !!binary aGk=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := parseCard(data)
		if err == nil && c == nil {
			t.Fatal("nil card without error")
		}
		if err != nil && errors.Is(err, os.ErrNotExist) {
			t.Fatal("unexpected error kind")
		}
	})
}

// TestBundleDirFormat3InPlace: a format 3 recording is replayed in place: BundleDir is the
// recording directory, nothing is hashed, stamped or unpacked, and copies of the task that
// earlier formats unpacked into the cache are removed.
func TestBundleDirFormat3InPlace(t *testing.T) {
	repo, tk := newRepoFormat(t, recording.RecordingFormat)
	n := countUnpacks(t)
	bundles := filepath.Join(repo.CacheDir(), "bundles")
	old := filepath.Join(bundles, "books-0123456789abcdef")
	other := filepath.Join(bundles, "books-extra-0123456789abcdef")
	for _, d := range []string{old, other} {
		os.MkdirAll(d, 0o755)
	}
	dir, err := tk.BundleDir()
	if err != nil || dir != tk.RecordingDir() || n.Load() != 0 {
		t.Fatalf("BundleDir = %s, %v, %d unpacks; want the recording itself", dir, err, n.Load())
	}
	if _, err := os.Stat(old); err == nil {
		t.Errorf("the format 2 copy %s is left in the cache", old)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another task's copy was removed")
	}
	if des, _ := os.ReadDir(filepath.Join(repo.CacheDir(), "stamps")); len(des) != 0 {
		t.Errorf("a stamp was written")
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.InPlace() || len(b.Entries) != 30 {
		t.Errorf("in place %v, %d entries", b.InPlace(), len(b.Entries))
	}
	if _, err := b.Response(&b.Entries[0]); err != nil {
		t.Error(err)
	}
	tg, err := Resolve("books", repo)
	if err != nil || tg.BundleDir != tk.RecordingDir() {
		t.Errorf("Resolve: %+v, %v", tg, err)
	}
	// a format the manifest does not fit is refused when the recording is opened
	os.WriteFile(filepath.Join(dir, recording.RecordingManifestFile), []byte(`{"task_id":"books","format":4}`), 0o644)
	if _, err := recording.OpenBundle(dir); err == nil || !strings.Contains(err.Error(), "format 4") {
		t.Errorf("format 4: %v", err)
	}
}
