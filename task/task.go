// Package task is the task repository: a directory holding sites/ (shared site rules) and
// tasks/<id>/ (one directory per task: task.yaml, recording/, rules/, grading.yaml), and
// the unpacked-bundle cache. See docs/bundle-format.md and docs/rules.md.
package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
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
type Repo struct{ Root string }

// FindRepo returns the task repository: flagValue (--repo) when not empty, else $PAB_REPO,
// else the current directory. The directory must exist; it need not hold tasks/ yet.
func FindRepo(flagValue string) (*Repo, error) {
	root := flagValue
	if root == "" {
		root = os.Getenv("PAB_REPO")
	}
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
	return &Repo{Root: abs}, nil
}

// SitesDir is <root>/sites, the shared site rules.
func (r *Repo) SitesDir() string { return filepath.Join(r.Root, "sites") }

// TasksDir is <root>/tasks.
func (r *Repo) TasksDir() string { return filepath.Join(r.Root, "tasks") }

// CacheDir holds unpacked bundles and other derived files: $PAB_CACHE (made absolute) when
// set, else <root>/.cache.
func (r *Repo) CacheDir() string {
	if c := os.Getenv("PAB_CACHE"); c != "" {
		if abs, err := filepath.Abs(c); err == nil {
			return abs
		}
		return c
	}
	return filepath.Join(r.Root, ".cache")
}

// TaskIDs lists the tasks of the repository, sorted: the directories of tasks/ holding a
// task.yaml. A repository without tasks/ has none.
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
		if !de.IsDir() || ValidID(de.Name()) != nil {
			continue
		}
		if fi, err := os.Stat(filepath.Join(r.TasksDir(), de.Name(), CardFile)); err == nil && fi.Mode().IsRegular() {
			ids = append(ids, de.Name())
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Task returns the task id of the repository. The id must be valid (ValidID) and
// tasks/<id>/task.yaml must exist, else the error is `no task "id" in <tasks dir>`.
func (r *Repo) Task(id string) (*Task, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	dir := filepath.Join(r.TasksDir(), id)
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

// Card is task.yaml. Unknown fields are errors.
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

// RecordingDir is <task>/recording, the published recording (format 2).
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

// Card reads task.yaml strictly: one YAML document of at most 1 MiB, only the fields of
// Card, and an id (when given) equal to the directory name. The returned card's ID is
// always set. Errors name the file and, for YAML errors, the line.
func (t *Task) Card() (*Card, error) {
	path := t.CardPath()
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read task card: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCardBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxCardBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, maxCardBytes)
	}
	c, err := parseCard(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %s", path, oneLine(err))
	}
	if c.ID != "" && c.ID != t.ID {
		return nil, fmt.Errorf("read %s: id %q differs from the task directory name %q", path, c.ID, t.ID)
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

// parseCard decodes one strict YAML document; an empty document gives an empty card.
func parseCard(data []byte) (*Card, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Card
	if err := dec.Decode(&c); err != nil && err != io.EOF {
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: a second YAML document; task.yaml holds one", extra.Line)
	}
	return &c, nil
}

// WriteCardIfMissing creates dir/task.yaml with id and title when it does not exist (dir
// is created if needed). The file is written to a temporary file in dir, synced, and
// linked into place without replacing a task.yaml created meanwhile.
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
	tmp, err := os.CreateTemp(dir, "."+CardFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// link(2) fails when path exists: a card written meanwhile is kept
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
