// Package task is the task repository: a directory holding sites/ (shared site rules) and
// tasks/<id>/ (one directory per task: task.yaml, recording/, rules/, grading.yaml), and
// the unpacked-bundle cache. See docs/bundle-format.md and docs/rules.md.
package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/recording"
)

// Names inside a task directory.
const (
	CardFile      = "task.yaml"
	recordingName = "recording"
	rulesName     = "rules"
	GradingFile   = "grading.yaml"
)

// maxCardBytes bounds task.yaml.
const maxCardBytes = 1 << 20

// Repo is a task repository rooted at Root (an absolute path).
type Repo struct {
	Root string
	// userCache, when set, is the cache directory of a Repo that is no repository: the
	// current directory, not named by --repo or $PAB_REPO, holding neither tasks/ nor
	// sites/ (see FindRepo and CacheDir).
	userCache string
}

// FindRepo returns the task repository: flagValue (--repo) when not empty, else $PAB_REPO,
// else the current directory. The directory must exist; it need not hold tasks/ yet.
// When it is the current directory and holds neither tasks/ nor sites/ (a user replaying a
// WARC file from wherever they stand), its cache is the per-user one (CacheDir), so no
// .cache/ appears in that directory.
func FindRepo(flagValue string) (*Repo, error) {
	root := flagValue
	if root == "" {
		root = os.Getenv("PAB_REPO")
	}
	fromWD := root == ""
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("find task repository: %w", err)
		}
		root = wd
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("task repository %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("task repository %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("task repository %s: not a directory", abs)
	}
	r := &Repo{Root: abs}
	if fromWD && !pathx.IsDir(r.TasksDir()) && !pathx.IsDir(r.SitesDir()) {
		if uc, err := os.UserCacheDir(); err == nil && filepath.IsAbs(uc) {
			r.userCache = filepath.Join(uc, "pab")
		}
	}
	return r, nil
}

// IsUserCache reports whether CacheDir is the per-user cache because the Repo is no
// repository (see FindRepo).
func (r *Repo) IsUserCache() bool { return r.userCache != "" && os.Getenv("PAB_CACHE") == "" }

// SitesDir is <root>/sites, the shared site rules.
func (r *Repo) SitesDir() string { return filepath.Join(r.Root, "sites") }

// TasksDir is <root>/tasks.
func (r *Repo) TasksDir() string { return filepath.Join(r.Root, "tasks") }

// CacheDir holds unpacked bundles and other derived files: $PAB_CACHE (made absolute) when
// set, else <root>/.cache; for a current directory that is no repository (FindRepo), the
// per-user cache <os.UserCacheDir>/pab ($XDG_CACHE_HOME/pab, else ~/.cache/pab).
func (r *Repo) CacheDir() string {
	if c := os.Getenv("PAB_CACHE"); c != "" {
		if abs, err := filepath.Abs(c); err == nil {
			return abs
		}
		return c
	}
	if r.userCache != "" {
		return r.userCache
	}
	return filepath.Join(r.Root, ".cache")
}

// TaskIDs lists the tasks of the repository, sorted: the directories of tasks/ (or
// symbolic links to directories) holding a task.yaml. A repository without tasks/ has none.
// A listed task may still be refused by Task (a link leading outside the repository).
func (r *Repo) TaskIDs() ([]string, error) {
	des, err := os.ReadDir(r.TasksDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	var ids []string
	for _, de := range des {
		// a task folder that is a symbolic link is listed (Task refuses it when it leads
		// outside the repository, so pab tasks can say so); other entries are not tasks
		if !de.IsDir() && de.Type()&fs.ModeSymlink == 0 || ValidID(de.Name()) != nil {
			continue
		}
		if fi, err := os.Stat(filepath.Join(r.TasksDir(), de.Name(), CardFile)); err == nil && fi.Mode().IsRegular() {
			ids = append(ids, de.Name())
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Task returns the task id of the repository. The id must be valid (ValidID), the task
// directory must stay inside the repository (CheckTaskDir: no symbolic link at any level
// of tasks/<id>, its recording/, rules/ or files leads outside; the error wraps an
// *OutsideError) and tasks/<id>/task.yaml must exist, else the error is
// `no task "id" in <tasks dir>`.
func (r *Repo) Task(id string) (*Task, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	dir := filepath.Join(r.TasksDir(), id)
	if err := r.CheckTaskDir(dir); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, CardFile)); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("no task %q in %s", id, r.TasksDir())
	}
	return &Task{Repo: r, ID: id, Dir: dir}, nil
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidID checks a task id: 1 to 100 characters, letters, digits, '.', '_' and '-', not
// starting with a punctuation character (so no slashes, no "..", no hidden names).
func ValidID(id string) error {
	if len(id) > 100 || !idPattern.MatchString(id) {
		return fmt.Errorf("bad task id %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", id)
	}
	return nil
}

// Task is one task directory of a repository.
type Task struct {
	Repo *Repo
	// ID is the directory name under tasks/.
	ID string
	// Dir is the task directory (absolute when the repository root is).
	Dir string
}

// Card is task.yaml. A field pab does not know is kept in Extra and reported in
// Warnings; one that looks like a typo of a known field is an error (see Task.Card).
type Card struct {
	// ID is the task id; when given it must equal the directory name.
	ID string `yaml:"id,omitempty"`
	// Title is a one-line name for people ("Price of a book on Books to Scrape").
	Title string `yaml:"title"`
	// Prompt is the instruction given to the agent.
	Prompt string `yaml:"prompt,omitempty"`
	// Capture is the browser's language and time zone while recording; replay keeps them.
	Capture *Capture `yaml:"capture,omitempty"`
	// Answer is the reference answer, checked by a person in the recorded pages.
	Answer string `yaml:"answer,omitempty"`
	// Tags are free labels for listing and filtering tasks.
	Tags []string `yaml:"tags,omitempty"`
	// Extra holds the top-level fields pab does not know ("difficulty: easy"), as decoded.
	Extra map[string]any `yaml:",inline"`
	// Warnings are the unknown fields found while reading, one line each, e.g.
	// `tasks/x/task.yaml:5: unknown field "difficulty" ignored`. They are not written back.
	Warnings []string `yaml:"-"`
}

// Capture is task.yaml's capture section.
type Capture struct {
	// Locale is a BCP 47 language tag, e.g. "en-US".
	Locale string `yaml:"locale,omitempty"`
	// Timezone is an IANA zone name, e.g. "America/New_York".
	Timezone string `yaml:"timezone,omitempty"`
}

// CardPath is <task>/task.yaml.
func (t *Task) CardPath() string { return filepath.Join(t.Dir, CardFile) }

// RecordingDir is <task>/recording, the published recording (recording.RecordingFormat).
func (t *Task) RecordingDir() string { return filepath.Join(t.Dir, recordingName) }

// RulesDir is <task>/rules, the task's own site rules.
func (t *Task) RulesDir() string { return filepath.Join(t.Dir, rulesName) }

// GradingPath is <task>/grading.yaml.
func (t *Task) GradingPath() string { return filepath.Join(t.Dir, GradingFile) }

// HasGrading reports whether grading.yaml exists as a regular file.
func (t *Task) HasGrading() bool {
	fi, err := os.Stat(t.GradingPath())
	return err == nil && fi.Mode().IsRegular()
}

// readCardFile reads the task card at path, at most maxCardBytes. Errors are "read task
// card: open PATH: ...", "read PATH: ..." and "read PATH: larger than N bytes".
func readCardFile(path string) ([]byte, error) {
	data, err := readlimit.File(path, maxCardBytes)
	var tl *readlimit.TooLargeError
	var pe *fs.PathError
	switch {
	case errors.As(err, &tl):
		return nil, fmt.Errorf("read %w", err)
	case errors.As(err, &pe) && pe.Op == "open":
		return nil, fmt.Errorf("read task card: %w", err)
	}
	return data, err
}

// Card reads task.yaml: one YAML document of at most 1 MiB and an id (when given) equal to
// the directory name. A field that is not one of Card's (or Capture's, under capture) is
// ignored with a line in Warnings naming the file (relative to the repository root when it
// is inside it), the line and the field; unknown top-level fields are kept in Extra. An
// unknown field within edit distance 1 or 2 of a known one (at most half the known name's
// length, so "promt" but not "os") is taken for a typo and refused with `did you mean
// "prompt"?`. capture.locale must be a BCP 47 tag and capture.timezone a zone
// time.LoadLocation loads (recording.CheckLocale, recording.CheckTimezone). The returned card's ID is
// always set. Errors name the file and, for YAML errors, the line.
func (t *Task) Card() (*Card, error) {
	path := t.CardPath()
	data, err := readCardFile(path)
	if err != nil {
		return nil, err
	}
	c, warns, err := parseCard(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %s", path, oneLine(err))
	}
	shown := path
	if t.Repo != nil {
		if rel, err := filepath.Rel(t.Repo.Root, path); err == nil && filepath.IsLocal(rel) {
			shown = filepath.ToSlash(rel)
		}
	}
	for _, w := range warns {
		c.Warnings = append(c.Warnings, shown+":"+w)
	}
	if c.ID != "" && c.ID != t.ID {
		return nil, fmt.Errorf("read %s: id %q differs from the task directory name %q", path, c.ID, t.ID)
	}
	if cp := c.Capture; cp != nil {
		if cp.Locale != "" {
			if err := recording.CheckLocale(cp.Locale); err != nil {
				return nil, fmt.Errorf("read %s: capture.locale: %w", path, err)
			}
		}
		if cp.Timezone != "" {
			if err := recording.CheckTimezone(cp.Timezone); err != nil {
				return nil, fmt.Errorf("read %s: capture.timezone: %w", path, err)
			}
		}
	}
	c.ID = t.ID
	return c, nil
}

// oneLine joins the lines of a multi-line error (yaml.v3 lists each unmarshal error on a
// line of its own) and drops yaml.v3's Go type names.
func oneLine(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = strings.ReplaceAll(msg, " in type task.Card", "")
	msg = strings.ReplaceAll(msg, " in type task.Capture", "")
	return strings.Join(strings.Fields(msg), " ")
}

// cardFields and captureFields are the field names of Card and Capture in task.yaml.
var (
	cardFields    = []string{"id", "title", "prompt", "capture", "answer", "tags"}
	captureFields = []string{"locale", "timezone"}
)

// parseCard decodes one YAML document; an empty document gives an empty card. warns are
// the unknown fields, each "LINE: unknown field \"NAME\" ignored" (see Task.Card).
func parseCard(data []byte) (*Card, []string, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("line %d: a second YAML document; task.yaml holds one", extra.Line)
	}
	var c Card
	if doc.Kind == 0 {
		return &c, nil, nil
	}
	var warns []string
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		root := doc.Content[0]
		w, err := checkFields(root, "", cardFields)
		if err != nil {
			return nil, nil, err
		}
		warns = append(warns, w...)
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k, v := root.Content[i], root.Content[i+1]; k.Value == "capture" && v.Kind == yaml.MappingNode {
				w, err := checkFields(v, "capture.", captureFields)
				if err != nil {
					return nil, nil, err
				}
				warns = append(warns, w...)
			}
		}
	}
	if err := doc.Decode(&c); err != nil {
		return nil, nil, err
	}
	if len(c.Extra) == 0 {
		c.Extra = nil
	}
	return &c, warns, nil
}

// checkFields checks the keys of mapping m against known: a key close to a known name is
// an error, any other unknown key a warning. prefix is put before names in messages.
func checkFields(m *yaml.Node, prefix string, known []string) ([]string, error) {
	var warns []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if slices.Contains(known, k.Value) {
			continue
		}
		if near := nearestField(k.Value, known); near != "" {
			return nil, fmt.Errorf("line %d: unknown field %q; did you mean %q?", k.Line, prefix+k.Value, prefix+near)
		}
		warns = append(warns, fmt.Sprintf("%d: unknown field %q ignored", k.Line, prefix+k.Value))
	}
	return warns, nil
}

// nearestField returns the known name within edit distance 1 or 2 of name (and at most
// half the known name's length, so short names need a closer match), the closest first, or
// "" when none is.
func nearestField(name string, known []string) string {
	best, bestD := "", 3
	for _, f := range known {
		d := editDistance(name, f)
		if d >= 1 && d <= len(f)/2 && d < bestD {
			best, bestD = f, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// WriteCardIfMissing creates dir/task.yaml with id and title when it does not exist (dir
// is created if needed), without replacing a task.yaml created meanwhile
// (atomicfile.WriteNoReplace).
func WriteCardIfMissing(dir, id, title string) error {
	if err := ValidID(id); err != nil {
		return err
	}
	path := filepath.Join(dir, CardFile)
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	data, err := yaml.Marshal(&Card{ID: id, Title: title})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// a card written meanwhile is kept
	if err := atomicfile.WriteNoReplace(path, data, 0o644); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
