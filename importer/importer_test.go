package importer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pab-dev/pab/importer/audit"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// testRepo is an empty task repository (sites/ empty) with its cache and pab's CA in
// temporary directories.
func testRepo(t *testing.T) *task.Repo {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sites"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PAB_CACHE", filepath.Join(root, ".cache"))
	t.Setenv("PAB_CA_DIR", filepath.Join(t.TempDir(), "ca"))
	return &task.Repo{Root: root}
}

// recordedURLs unpacks the recording in dir and returns "METHOD URL" of its entries.
func recordedURLs(t *testing.T, dir string) []string {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), "b")
	if err := recording.Unpack(dir, bundle); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var urls []string
	for _, e := range b.Entries {
		urls = append(urls, e.Method+" "+e.URL)
	}
	return urls
}

// TestRunImportsCorpusWARC: warcio's example.warc.gz imported into a new task is published
// as a recording that passes the audit, with a task.yaml, the self-check's three hit-rate
// lines (every request answered); a second import of post-test.warc.gz is merged with it (all exchanges of both kept, the
// counts said), and the lock and work directories are gone afterwards.
func TestRunImportsCorpusWARC(t *testing.T) {
	repo := testRepo(t)
	var out, errOut bytes.Buffer
	o := Options{Repo: repo, TaskID: "example", Inputs: []string{"testdata/example.warc.gz"}, Command: "pab import",
		Out: &out, ErrOut: &errOut}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("import: %v\n%s%s", err, out.String(), errOut.String())
	}
	recDir := filepath.Join(repo.TasksDir(), "example", "recording")
	if res.RecordingDir != recDir || res.Merged || res.Total < 2 {
		t.Errorf("result %+v", res)
	}
	first := recordedURLs(t, recDir)
	if !slices.Contains(first, "GET http://example.com/") {
		t.Errorf("recorded %v, want GET http://example.com/", first)
	}
	if _, probs, err := audit.Audit(repo, "example"); err != nil || len(probs) > 0 {
		t.Errorf("audit: %v %v", probs, err)
	}
	if _, err := os.Stat(filepath.Join(repo.TasksDir(), "example", task.CardFile)); err != nil {
		t.Errorf("no task.yaml: %v", err)
	}
	report := out.String()
	if !strings.HasPrefix(report, "inferred rules: ") || !strings.Contains(report, "imported testdata/example.warc.gz into "+recDir+"\n") {
		t.Errorf("report:\n%s", report)
	}
	hitRates := regexp.MustCompile(`(?m)^  (generic rules only|\+ inferred|\+ hand-written) +hit rate 100\.0%`).FindAllString(report, -1)
	if !strings.Contains(report, "self-check: every recorded request replayed once") || len(hitRates) != 3 {
		t.Errorf("self-check lines %q in:\n%s", hitRates, report)
	}

	out.Reset()
	o.Inputs = []string{"testdata/post-test.warc.gz"}
	res2, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("second import: %v\n%s%s", err, out.String(), errOut.String())
	}
	merged := recordedURLs(t, recDir)
	posts, rest := 0, []string(nil)
	for _, u := range merged {
		if strings.HasPrefix(u, "POST http://httpbin.org/post") {
			posts++
		} else {
			rest = append(rest, u)
		}
	}
	// the recording captured first comes first (post-test's 2017 capture): both kept whole
	if !res2.Merged || res2.Before != res.Total || res2.Total != len(merged) || posts != 3 || !slices.Equal(rest, first) {
		t.Errorf("merge: result %+v, %d POSTs, recording %v", res2, posts, merged)
	}
	if want := "merged with the existing recording: " + strconv.Itoa(res.Total) + " exchanges before, " + strconv.Itoa(len(merged)) + " now\n"; !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
	if _, err := os.Stat(repo.WorkRoot(filepath.Join(repo.TasksDir(), "example"))); !os.IsNotExist(err) {
		t.Errorf("the work root is left: %v", err)
	}
}

// TestRunRefusesBadInput: a file that is no WARC is refused with its name and nothing of
// the task changes (no task directory for a new task, the recording as it was for an
// existing one); a directory that is neither a bundle nor a recording, and options that
// contradict each other, are refused before anything is read.
func TestRunRefusesBadInput(t *testing.T) {
	repo := testRepo(t)
	bad := filepath.Join(t.TempDir(), "notes.warc")
	if err := os.WriteFile(bad, []byte("these are notes, not WARC records\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	o := Options{Repo: repo, TaskID: "fresh", Inputs: []string{bad}, NoCheck: true, Command: "pab import", ErrOut: &errOut}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("import of %s: %v, want an error naming it", bad, err)
	}
	if _, err := os.Stat(filepath.Join(repo.TasksDir(), "fresh")); !os.IsNotExist(err) {
		t.Errorf("the refused import left tasks/fresh: %v", err)
	}

	o.TaskID, o.Inputs = "example", []string{"testdata/example.warc.gz"}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	recDir := filepath.Join(repo.TasksDir(), "example", "recording")
	before, err := recording.HashRecording(recDir)
	if err != nil {
		t.Fatal(err)
	}
	o.Inputs = []string{bad}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("import of %s into a task: %v, want an error naming it", bad, err)
	}
	if after, err := recording.HashRecording(recDir); err != nil || after != before {
		t.Errorf("the recording changed: %v", err)
	}

	empty := t.TempDir()
	o.Inputs = []string{empty}
	want := "import: " + empty + " is neither a bundle directory"
	if _, err := Run(context.Background(), o); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("import of an empty directory: %v, want %q...", err, want)
	}
	o.Inputs, o.Replace, o.PreferNew = []string{"testdata/example.warc.gz"}, true, true
	if _, err := Run(context.Background(), o); err == nil || err.Error() != "importer: Options.Replace and Options.PreferNew exclude each other" {
		t.Errorf("Replace with PreferNew: %v", err)
	}
}

// writeGrading writes the task's grading.yaml with one required field whose evidence is
// text on http://example.com/.
func writeGrading(t *testing.T, repo *task.Repo, id, text string) {
	t.Helper()
	g := "extract:\n  title: { type: money, description: the price }\nrequire:\n  - field: title\n    equals: 1\n" +
		"    source: { url: \"http://example.com/\", text: \"" + text + "\" }\n"
	if err := os.MkdirAll(filepath.Join(repo.TasksDir(), id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo.TasksDir(), id, task.GradingFile), []byte(g), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunChecksGrading: after the self-check, the task's grading.yaml is checked against
// the recording just imported: evidence the recording holds is reported found; evidence it
// does not hold is an error naming grading.yaml, and the recording stays imported.
func TestRunChecksGrading(t *testing.T) {
	repo := testRepo(t)
	writeGrading(t, repo, "example", "Example Domain")
	var out, errOut bytes.Buffer
	o := Options{Repo: repo, TaskID: "example", Inputs: []string{"testdata/example.warc.gz"}, Command: "pab import", Out: &out, ErrOut: &errOut}
	if _, err := Run(context.Background(), o); err != nil || !strings.Contains(out.String(), "1 of 1") {
		t.Fatalf("import with evidence the recording holds: %v\n%s%s", err, out.String(), errOut.String())
	}
	writeGrading(t, repo, "example", "not on the page")
	o.Replace = true
	_, err := Run(context.Background(), o)
	if err == nil || !strings.HasPrefix(err.Error(), "import: the recording was imported, but ") || !strings.Contains(errOut.String()+err.Error(), "grading.yaml") {
		t.Errorf("import with evidence the recording lacks: %v\n%s", err, errOut.String())
	}
	if !audit.IsRecordingDir(filepath.Join(repo.TasksDir(), "example", "recording")) {
		t.Errorf("the recording is gone")
	}
}

// TestRunNoWait: while another writer holds the task's lock, NoWait fails at once, the
// option named by its field, or as FlagNames says; nothing is imported.
func TestRunNoWait(t *testing.T) {
	repo := testRepo(t)
	taskDir := filepath.Join(repo.TasksDir(), "example")
	unlock, err := repo.LockTask(taskDir, "pab import", "", false, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	o := Options{Repo: repo, TaskID: "example", Inputs: []string{"testdata/example.warc.gz"}, NoWait: true, NoCheck: true, Command: "pab import"}
	for _, c := range []struct {
		names map[string]string
		want  string
	}{{nil, "; not waiting (NoWait)"}, {map[string]string{"NoWait": "--no-wait"}, "; not waiting (--no-wait)"}} {
		o.FlagNames = c.names
		_, err := Run(context.Background(), o)
		if err == nil || !strings.HasPrefix(err.Error(), "import: tasks/example is being written by another pab") || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("FlagNames %v: %v, want ...%s", c.names, err, c.want)
		}
	}
	if audit.IsRecordingDir(filepath.Join(taskDir, "recording")) {
		t.Errorf("a refused import wrote the recording")
	}
}

// TestRunProgress: every step of an import that lasts longer than the progress delay (here
// lowered to 1 ns through $PAB_PROGRESS_AFTER) says on stderr what it did, each through the
// one progress meter (internal/progress): the records and bytes read with their rates, the
// exchanges written (and packed as they are written: no packing step of its own), the
// members audited, the self-check's requests; stdout is unchanged.
func TestRunProgress(t *testing.T) {
	repo := testRepo(t)
	t.Setenv("PAB_PROGRESS_AFTER", "1ns")
	var out, errOut bytes.Buffer
	o := Options{Repo: repo, TaskID: "example", Inputs: []string{"testdata/example.warc.gz"}, Command: "pab import",
		Out: &out, ErrOut: &errOut}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("import: %v\n%s%s", err, out.String(), errOut.String())
	}
	fi, err := os.Stat("testdata/example.warc.gz")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^pab import: reading the input: \d+ records, [\d.]+ MB of ` + regexp.QuoteMeta(fmt.Sprintf("%.1f MB", float64(fi.Size())/1e6)) + ` \(\d+%\), .*done in [\d.]+ s$`,
		`(?m)^pab import: writing the bundle: (\d+) of (\d+) exchanges, .*done in [\d.]+ s$`,
		`(?m)^pab import: auditing the packed recording: ([1-9]\d*) members, .*done in [\d.]+ s$`,
		`(?m)^pab import: self-check \(generic rules only\): ([1-9]\d*) requests, [\d,]+ requests/s, done in [\d.]+ s$`,
	} {
		if !regexp.MustCompile(re).MatchString(errOut.String()) {
			t.Errorf("stderr lacks %s:\n%s", re, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), "packing the recording") {
		t.Errorf("a packing step, although the new recording was packed as it was written:\n%s", errOut.String())
	}
	if strings.Contains(out.String(), "records/s") {
		t.Errorf("progress went to stdout:\n%s", out.String())
	}
}

// TestRunSelfCheckInterrupted: Ctrl-C during the self-check (the context ends once the
// check has begun) is an error wrapping context.Canceled, so pab import exits non-zero;
// the recording was published before it.
func TestRunSelfCheckInterrupted(t *testing.T) {
	repo := testRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	beforeSelfCheck = cancel
	defer func() { beforeSelfCheck = func() {} }()
	var out, errOut bytes.Buffer
	_, err := Run(ctx, Options{Repo: repo, TaskID: "example", Inputs: []string{"testdata/example.warc.gz"}, Command: "pab import",
		Out: &out, ErrOut: &errOut})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted during the self-check") {
		t.Fatalf("Run: %v; want the interrupted self-check\n%s%s", err, out.String(), errOut.String())
	}
	if files, err := recording.RecordingFiles(filepath.Join(repo.TasksDir(), "example", "recording")); err != nil || len(files) == 0 {
		t.Errorf("the recording is not published: %v %v", files, err)
	}
}
