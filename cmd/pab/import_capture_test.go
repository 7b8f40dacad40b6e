package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// importedCapture returns the locale and zone of the task's recording manifest and of its
// task.yaml capture.
func importedCapture(t *testing.T, root, id string) (recording.Manifest, *task.Capture) {
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
	card, err := (&task.Task{Repo: &task.Repo{Root: root}, ID: id, Dir: filepath.Join(root, "tasks", id)}).Card()
	if err != nil {
		t.Fatal(err)
	}
	return b.Manifest, card.Capture
}

// TestImportLocaleTimezone (issue 21): pab import --locale --timezone writes both to the
// manifest and to task.yaml's capture section, from a WARC file and from a bundle; a
// task.yaml written by hand keeps its text and gets the section appended; one whose capture
// says otherwise is left alone with one warning; bad values are refused naming the flag, a
// bad capture in task.yaml naming the file and field, and a bad locale in a manifest naming
// the manifest.
func TestImportLocaleTimezone(t *testing.T) {
	root := newTestRepo(t)
	warcFile := filepath.Join(repoRoot, "testdata", "sites", "books.toscrape.warc")
	if _, stderr, code := runIn(t, root, "import", "--task", "books", "--no-check", "--locale", "en-GB", "--timezone", "Europe/London", warcFile); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	m, c := importedCapture(t, root, "books")
	if m.Locale != "en-GB" || m.Timezone != "Europe/London" || c == nil || c.Locale != "en-GB" || c.Timezone != "Europe/London" {
		t.Errorf("WARC import: manifest %q %q, capture %+v; want en-GB Europe/London in both", m.Locale, m.Timezone, c)
	}

	// a hand-written task.yaml without capture: the section is appended, the rest kept
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	taskDir := filepath.Join(root, "tasks", "shop")
	os.MkdirAll(taskDir, 0o755)
	card := "# a task written by hand\ntitle: Shop\nprompt: Find the price. # keep this comment\n"
	os.WriteFile(filepath.Join(taskDir, "task.yaml"), []byte(card), 0o644)
	if _, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", "--locale", "de-CH", "--timezone", "Europe/Zurich", shopBundle(t, t1, "/a", "a")); code != 0 {
		t.Fatalf("bundle import: exit %d\n%s", code, stderr)
	}
	data, _ := os.ReadFile(filepath.Join(taskDir, "task.yaml"))
	if !strings.HasPrefix(string(data), card) || !strings.Contains(string(data), "capture:") {
		t.Errorf("task.yaml after import:\n%s", data)
	}
	m, c = importedCapture(t, root, "shop")
	if m.Locale != "de-CH" || m.Timezone != "Europe/Zurich" || c == nil || c.Locale != "de-CH" || c.Timezone != "Europe/Zurich" {
		t.Errorf("bundle import: manifest %q %q, capture %+v; want de-CH Europe/Zurich in both", m.Locale, m.Timezone, c)
	}
	// a second import with another zone: the manifest takes it, task.yaml is left with a warning
	_, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", "--timezone", "Asia/Tokyo", shopBundle(t, t1.Add(time.Hour), "/b", "b"))
	if code != 0 {
		t.Fatalf("second import: exit %d\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "warning:"); n != 1 || !strings.Contains(stderr, `capture gives timezone "Europe/Zurich" (the recording's manifest: "Asia/Tokyo")`) {
		t.Errorf("second import: %d warnings:\n%s", n, stderr)
	}
	if m, c = importedCapture(t, root, "shop"); m.Timezone != "Asia/Tokyo" || m.Locale != "de-CH" || c.Timezone != "Europe/Zurich" {
		t.Errorf("second import: manifest %q %q, capture %+v", m.Locale, m.Timezone, c)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--locale", "en_US"}, `import: --locale: "en_US" is not a BCP 47 language tag such as "en-US" (write "en-US": BCP 47 uses hyphens)`},
		{[]string{"--locale", "zz-ZZ"}, `import: --locale: "zz-ZZ" is not a BCP 47 language tag`},
		{[]string{"--timezone", "Mars/Olympus"}, `import: --timezone: "Mars/Olympus" is not an IANA time zone name`},
		{[]string{"--timezone", "Local"}, `import: --timezone: "Local" is not an IANA time zone name`},
	} {
		_, stderr, code := runIn(t, root, append([]string{"import", "--task", "bad", warcFile}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "tasks", "bad")); err == nil {
		t.Error("a refused import created the task")
	}

	// task.yaml with a bad capture: every command reading it names the file and field
	os.WriteFile(filepath.Join(taskDir, "task.yaml"), []byte(card+"capture:\n  locale: english\n"), 0o644)
	if _, stderr, code := runIn(t, root, "replay", "shop", "--check"); code == 0 || !strings.Contains(stderr, "task.yaml: capture.locale: \"english\" is not a BCP 47 language tag") {
		t.Errorf("bad capture.locale: exit %d\n%s", code, stderr)
	}
	os.WriteFile(filepath.Join(taskDir, "task.yaml"), []byte(card+"capture:\n  timezone: New York\n"), 0o644)
	if _, stderr, code := runIn(t, root, "replay", "shop", "--check"); code == 0 || !strings.Contains(stderr, "task.yaml: capture.timezone: \"New York\" is not an IANA time zone name") {
		t.Errorf("bad capture.timezone: exit %d\n%s", code, stderr)
	}

	// a bundle whose manifest has a bad timezone: refused, naming the manifest and field
	bad := shopBundle(t, t1, "/c", "c")
	setManifest(t, bad, "timezone", "Nowhere/City")
	if _, stderr, code := runIn(t, root, "replay", bad, "--check"); code == 0 || !strings.Contains(stderr, "manifest.json: timezone: \"Nowhere/City\" is not an IANA time zone name") {
		t.Errorf("bad manifest timezone: exit %d\n%s", code, stderr)
	}
}

// TestImportChecksNotFoundKeys (issue 21): pab import runs the audit's not_found check: a
// bundle whose manifest keys not_found by a name that is neither a host of the recording
// nor a site of the rules is refused, with the problem listed and the task left as it was;
// the seed's site-name key ("books", a site of sites/) is accepted.
func TestImportChecksNotFoundKeys(t *testing.T) {
	root := newTestRepo(t)
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	withNotFound := func(key string) string {
		dir := shopBundle(t, t1, "/a", "a", "/rr-not-found-x", "shop 404")
		setManifest(t, dir, "not_found", map[string]string{key: "https://shop.test/rr-not-found-x"})
		return dir
	}
	os.WriteFile(filepath.Join(root, "sites", "shopsite.yaml"), []byte("hosts: [\"shop.test\"]\n"), 0o644)
	_, stderr, code := runIn(t, root, "import", "--task", "shop", "--no-check", withNotFound("nosuchsite"))
	if code == 0 || !strings.Contains(stderr, `not_found key "nosuchsite"`) || !strings.Contains(stderr, "nothing was imported") {
		t.Errorf("unknown not_found key: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "tasks", "shop")); err == nil {
		t.Error("the refused import left a task")
	}
	for _, key := range []string{"shopsite", "shop.test"} {
		if _, stderr, code := runIn(t, root, "import", "--task", "shop-"+strings.ReplaceAll(key, ".", "-"), "--no-check", withNotFound(key)); code != 0 {
			t.Errorf("not_found key %q: exit %d\n%s", key, code, stderr)
		}
	}
}

// setManifest sets one field of the manifest.json of the bundle in dir.
func setManifest(t *testing.T, dir, field string, v any) {
	t.Helper()
	path := filepath.Join(dir, recording.ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m[field] = v
	data, _ = json.Marshal(m)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
