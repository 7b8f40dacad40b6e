package task

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
)

// TestOpen: a task opens with its rules and an index over its bundle; an unpacked copy in
// the cache that cannot be opened is removed and unpacked again, with one note; a target
// that does not resolve is an error and leaves nothing open.
func TestOpen(t *testing.T) {
	repo, _ := newRepo(t)
	var notes bytes.Buffer
	o, err := Open("books", repo, &notes)
	if err != nil {
		t.Fatal(err)
	}
	if o.Target.Name != "books" || o.Bundle.Len() == 0 || o.Rules == nil || o.Index == nil {
		t.Fatalf("opened %+v", o)
	}
	dir := o.Target.BundleDir
	o.Close()
	if notes.Len() != 0 {
		t.Errorf("notes on a clean open: %q", notes.String())
	}
	if !pathx.Within(dir, repo.CacheDir()) {
		t.Fatalf("newRepo packs format 2, which is unpacked into the cache; BundleDir is %s", dir)
	}

	// damage the unpacked copy: its index no longer matches its WARC
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(recording.EntriesFile)), []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err = Open("books", repo, &notes)
	if err != nil {
		t.Fatalf("open after damage: %v", err)
	}
	defer o.Close()
	if got := notes.String(); !strings.Contains(got, "pab: the unpacked copy in "+dir+" is damaged (") || !strings.HasSuffix(got, "; unpacking it again\n") {
		t.Errorf("note %q", got)
	}
	if o.Bundle.Len() == 0 {
		t.Error("the copy made again has no entries")
	}

	_, _, err = OpenBundle("no-such-task", repo, &notes)
	if err == nil || !strings.Contains(err.Error(), `no task "no-such-task"`) {
		t.Errorf("OpenBundle(no-such-task): %v", err)
	}
}

// TestLocale: the manifest's locale and time zone win, each on its own; the card's capture
// section fills what the manifest leaves empty; nothing gives "".
func TestLocale(t *testing.T) {
	card := &Card{Capture: &Capture{Locale: "de-DE", Timezone: "Europe/Berlin"}}
	for _, c := range []struct {
		m          recording.Manifest
		card       *Card
		locale, tz string
	}{
		{recording.Manifest{Locale: "en-GB", Timezone: "Europe/London"}, card, "en-GB", "Europe/London"},
		{recording.Manifest{Locale: "en-GB"}, card, "en-GB", "Europe/Berlin"},
		{recording.Manifest{}, card, "de-DE", "Europe/Berlin"},
		{recording.Manifest{Timezone: "UTC"}, nil, "", "UTC"},
		{recording.Manifest{}, &Card{}, "", ""},
	} {
		if l, z := Locale(c.m, c.card); l != c.locale || z != c.tz {
			t.Errorf("Locale(%+v, %+v) = %q %q, want %q %q", c.m, c.card, l, z, c.locale, c.tz)
		}
	}
}
