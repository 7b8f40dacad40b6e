package task

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
)

// Target is what replay serves: a bundle directory and the rule directories to layer, in
// order (later ones win, see docs/rules.md).
type Target struct {
	// Name is the task id, or the base name of the bundle directory or WARC file.
	Name string
	// BundleDir is what recording.OpenBundle opens: an unpacked bundle (manifest.json,
	// archive/data.warc, indexes/, pages/), or a format 3 recording read in place.
	BundleDir string
	// RulesDirs are rule directories, lowest priority first; they may not exist.
	RulesDirs []string
	// Task is the task replayed, nil for a bundle directory or a WARC file.
	Task *Task
	// Warnings are the task card's warnings (Card.Warnings), for the caller to print.
	Warnings []string
}

// Hooks for tests: they count and slow down the builds of cache entries.
var (
	unpack      = recording.Unpack
	importWARCs = recording.ImportWARCs
)

// staleTempAge is how old a leftover temporary directory in the bundle cache must be
// before it is removed (a pab that crashed mid-unpack leaves one).
const staleTempAge = 24 * time.Hour

// Resolve turns a command-line argument into a replay target, trying in order:
//
//   - a bundle directory (it holds manifest.json): replayed as is, with its own rules/
//     directory when there is one;
//   - a task directory (it holds task.yaml), or its recording/ directory: its recording is unpacked into the cache (see
//     Task.BundleDir); its rules are the sites/ of its own repository when it sits in a
//     tasks/ directory next to a sites/ directory, else repo's sites/, then its rules/;
//   - a WARC file or a WACZ package (a path ending in .warc, .warc.gz or .wacz): imported
//     with recording.ImportWARCs
//     into <cache>/bundles/warc-<first 16 hex digits of the file's sha256>, once per file
//     content, with repo's sites/ as rules;
//   - else a task id of repo.
func Resolve(arg string, repo *Repo) (*Target, error) {
	if arg == "" {
		return nil, errors.New("no replay target given")
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", arg, err)
	}
	if filepath.Base(abs) == recordingName && pathx.IsRegularFile(filepath.Join(filepath.Dir(abs), CardFile)) {
		abs = filepath.Dir(abs) // a task's published recording: replay the task
	}
	if pathx.IsRegularFile(filepath.Join(abs, recording.ManifestFile)) {
		t := &Target{Name: filepath.Base(abs), BundleDir: abs}
		if pathx.IsDir(filepath.Join(abs, rulesName)) {
			t.RulesDirs = []string{filepath.Join(abs, rulesName)}
		}
		return t, nil
	}
	if pathx.IsRegularFile(filepath.Join(abs, CardFile)) {
		id := filepath.Base(abs)
		if err := ValidID(id); err != nil {
			return nil, fmt.Errorf("task directory %s: %w", abs, err)
		}
		owner := repo
		parent := filepath.Dir(abs)
		if filepath.Base(parent) == "tasks" && pathx.IsDir(filepath.Join(filepath.Dir(parent), "sites")) {
			owner = &Repo{Root: filepath.Dir(parent)}
		}
		return (&Task{Repo: owner, ID: id, Dir: abs}).Target()
	}
	if lower := strings.ToLower(arg); strings.HasSuffix(lower, ".warc") || strings.HasSuffix(lower, ".warc.gz") || strings.HasSuffix(lower, ".wacz") {
		fi, err := os.Stat(abs)
		if errors.Is(err, os.ErrNotExist) && ValidID(arg) == nil && pathx.IsRegularFile(filepath.Join(repo.TasksDir(), arg, CardFile)) {
			return repo.taskTarget(arg) // a task whose id ends in .warc
		}
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", arg, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("target %s: not a regular file", arg)
		}
		dir, err := repo.importWARC(abs)
		if err != nil {
			return nil, err
		}
		return &Target{Name: filepath.Base(abs), BundleDir: dir, RulesDirs: []string{repo.SitesDir()}}, nil
	}
	if ValidID(arg) != nil || !pathx.IsDir(filepath.Join(repo.TasksDir(), arg)) {
		if fi, err := os.Stat(abs); err == nil {
			what := "the file exists but is not a WARC file (.warc, .warc.gz) or a WACZ package (.wacz)"
			if fi.IsDir() {
				what = "the directory exists but is not a bundle directory (with manifest.json) or a task directory (with task.yaml)"
			} else if isHARFile(abs) {
				what = "the file is a HAR, which is replayed once imported into a task (pab import --task ID " + arg + ")"
			}
			return nil, fmt.Errorf("target %s: %s, and there is no task %q in %s", arg, what, arg, repo.TasksDir())
		}
	}
	if ValidID(arg) != nil {
		return nil, fmt.Errorf("target %s is not a bundle directory (with manifest.json), a task directory (with task.yaml), a .warc, .warc.gz or .wacz file, or a task id", arg)
	}
	return repo.taskTarget(arg)
}

func (r *Repo) taskTarget(id string) (*Target, error) {
	t, err := r.Task(id)
	if err != nil {
		return nil, err
	}
	return t.Target()
}

// Target unpacks the task's recording (BundleDir) and returns it with the rule
// directories [repository sites/, task rules/]. A task directory with a symbolic link
// leading outside the repository is refused first (CheckTaskDir).
func (t *Task) Target() (*Target, error) {
	if err := t.Repo.CheckTaskDir(t.Dir); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	card, err := t.Card()
	if err != nil { // a broken task.yaml is reported before any unpacking
		return nil, err
	}
	dir, err := t.BundleDir()
	if err != nil {
		return nil, err
	}
	return &Target{Name: t.ID, BundleDir: dir, RulesDirs: []string{t.Repo.SitesDir(), t.RulesDir()}, Task: t, Warnings: card.Warnings}, nil
}

// BundleDir returns the directory recording.OpenBundle opens to replay the task. A recording of
// the current format (3) is read in place: BundleDir is the recording directory itself,
// nothing is hashed or unpacked, and unpacked copies of the task left in the cache by
// earlier formats are removed. A format 2 recording is unpacked into the cache,
// <cache>/bundles/<id>-<first 16 hex digits of recording.HashRecording>. The hash is taken
// from a stamp in <cache>/stamps when the recording files' names, sizes, times, devices and
// inodes are those stamped (see recordingHash); otherwise the recording is hashed and
// stamped. The recording is unpacked only when that directory does not exist yet: into a temporary directory beside it
// (<dest>.tmp-<pid>-<random>), renamed into place once complete. When another process or
// goroutine renamed its copy first, that copy is used. After an unpack, older copies of the
// same task (<id>-<other hash>) and temporary directories older than a day are removed.
func (t *Task) BundleDir() (string, error) {
	rec := t.RecordingDir()
	files, err := recording.RecordingFiles(rec)
	if err != nil {
		return "", fmt.Errorf("task %s: %w", t.ID, err)
	}
	if len(files) == 0 {
		if f, ferr := recording.RecordingFormatOf(rec); ferr == nil && f != 0 && f != recording.RecordingFormat {
			return "", fmt.Errorf("task %s has a format %d recording (%s); this pab reads format %d: run pab recording migrate %s", t.ID, f, rec, recording.RecordingFormat, t.ID)
		}
		return "", fmt.Errorf("task %s has no recording (%s)", t.ID, rec)
	}
	bundles := filepath.Join(t.Repo.CacheDir(), "bundles")
	if recording.InPlaceArchive(files[len(files)-1]) {
		removeOlderCopies(bundles, t.ID, "")
		return rec, nil
	}
	hash, err := recordingHash(t.Repo.CacheDir(), rec, files)
	if err != nil {
		return "", fmt.Errorf("task %s: %w", t.ID, err)
	}
	name := t.ID + "-" + hash[:16]
	dest, built, err := buildCached(bundles, name, func(out string) error { return unpack(rec, out) })
	if err != nil {
		return "", fmt.Errorf("task %s: %w", t.ID, err)
	}
	if built {
		removeOlderCopies(bundles, t.ID, name)
	}
	return dest, nil
}

// What a recording hash (Target.RecordingHash) is a hash of.
const (
	// HashOfRecording: recording.HashRecording over the task's published recording files
	// (tasks/<id>/recording, in the order recording.RecordingFiles lists them).
	HashOfRecording = "recording"
	// HashOfBundle: HashBundle over an unpacked bundle's four files.
	HashOfBundle = "bundle"
)

// RecordingHash returns the lowercase hex sha256 identifying the recording the task's
// replay serves: recording.HashRecording of its recording directory, taken from the cache's
// stamp when the files are those stamped (as BundleDir does), so that a hash known already
// costs no read of the recording.
func (t *Task) RecordingHash() (string, error) {
	rec := t.RecordingDir()
	files, err := recording.RecordingFiles(rec)
	if err != nil {
		return "", fmt.Errorf("task %s: %w", t.ID, err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("task %s has no recording (%s)", t.ID, rec)
	}
	return recordingHash(t.Repo.CacheDir(), rec, files)
}

// RecordingHash returns the hash identifying the recording t serves and what it is a hash
// of: for a task, its published recording (HashOfRecording, see Task.RecordingHash); for a
// bundle directory or an imported WARC file, the bundle's files (HashOfBundle, see
// HashBundle).
func (t *Target) RecordingHash() (hash, of string, err error) {
	if t.Task != nil {
		h, err := t.Task.RecordingHash()
		return h, HashOfRecording, err
	}
	h, err := HashBundle(t.BundleDir)
	return h, HashOfBundle, err
}

// HashBundle returns the lowercase hex sha256 of an unpacked bundle's content: for each of
// manifest.json, pages/pages.jsonl, indexes/entries.jsonl and archive/data.warc in that
// order, its path relative to the bundle (slash-separated), a NUL byte, its length as 8
// bytes big-endian, and its bytes (the framing of recording.HashRecording). Other files of the
// directory (rules/) are not part of it. A missing file is an error.
func HashBundle(dir string) (string, error) {
	h := sha256.New()
	for _, name := range []string{recording.ManifestFile, recording.PagesFile, recording.EntriesFile, recording.WARCFile} {
		if err := recording.HashFramed(h, filepath.Join(dir, filepath.FromSlash(name)), name); err != nil {
			return "", fmt.Errorf("bundle %s: %w", dir, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// importWARC imports the WARC file at path into the cache once per content hash.
func (r *Repo) importWARC(path string) (string, error) {
	hash, err := hashFile(path)
	if err != nil {
		return "", err
	}
	bundles := filepath.Join(r.CacheDir(), "bundles")
	dest, _, err := buildCached(bundles, "warc-"+hash[:16], func(out string) error {
		_, err := importWARCs([]string{path}, out, recording.ImportOptions{})
		return err
	})
	return dest, err
}

// buildCached returns dir/name, building it first when it does not hold a bundle
// (manifest.json) yet: build writes a new bundle directory at the path it is given, inside a
// fresh temporary directory dir/<name>.tmp-<pid>-<random>, which is then renamed into
// place. built reports whether this call's copy was installed.
func buildCached(dir, name string, build func(out string) error) (dest string, built bool, err error) {
	dest = filepath.Join(dir, name)
	if pathx.IsRegularFile(filepath.Join(dest, recording.ManifestFile)) {
		return dest, false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("cache: %w", err)
	}
	work, err := os.MkdirTemp(dir, name+".tmp-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", false, fmt.Errorf("cache: %w", err)
	}
	defer os.RemoveAll(work)
	out := filepath.Join(work, "bundle")
	if err := build(out); err != nil {
		return "", false, err
	}
	if err := os.Rename(out, dest); err != nil {
		if pathx.IsRegularFile(filepath.Join(dest, recording.ManifestFile)) {
			return dest, false, nil // another process was faster
		}
		return "", false, fmt.Errorf("cache: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return "", false, fmt.Errorf("cache: %w", err)
	}
	return dest, true, nil
}

// removeOlderCopies removes dir/<id>-<16 hex digits> except keep (with its saved index,
// savedIndexPath; dir is <cache>/bundles), and temporary
// directories of the task older than staleTempAge. Errors are ignored: a copy left behind
// only costs disk space.
func removeOlderCopies(dir, id, keep string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		name := de.Name()
		rest, ok := strings.CutPrefix(name, id+"-")
		if !ok || name == keep || len(rest) < 16 || !isHex(rest[:16]) {
			continue
		}
		switch {
		case len(rest) == 16:
			os.RemoveAll(filepath.Join(dir, name))
			if abs, err := filepath.Abs(filepath.Join(dir, name)); err == nil {
				os.Remove(savedIndexPath(filepath.Dir(dir), abs)) // its saved index
			}
		case strings.HasPrefix(rest[16:], ".tmp-"):
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > staleTempAge {
				os.RemoveAll(filepath.Join(dir, name))
			}
		}
	}
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// hashFile returns the lowercase hex sha256 of the file's content.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if n, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s at offset %d: %w", path, n, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isHARFile says whether the file at path starts as a HAR does (har.Sniff).
func isHARFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	return har.Sniff(head[:n])
}
