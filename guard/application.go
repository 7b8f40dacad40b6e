package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/readlimit"
	"go.yaml.in/yaml/v3"
)

// Size bounds of the files an application reads.
const (
	MaxApplicationBytes = 1 << 20  // the application file
	MaxGroundingBytes   = 1 << 20  // each grounding file
	MaxArtifactBytes    = 50 << 20 // each artifact
)

// Default limits when the file gives none.
const (
	DefaultActions = 150
	DefaultPages   = 30
	DefaultMinutes = 20
)

// Limits bound a run: browser actions, pages landed on, wall-clock minutes.
type Limits struct {
	Actions int
	Pages   int
	Minutes int
}

// Answer is a question/answer pair the owner gave.
type Answer struct {
	Question string
	Answer   string
}

// Grounding holds the owner's sources, as text (files already read).
type Grounding struct {
	Profile   string
	Answers   []Answer
	Materials []string
	// Mode is GroundingStrict (a weak fill is asked of the owner first; the default under
	// auto_submit) or GroundingLenient (typed and traced weak; the default under
	// fill_and_review): grounding.mode in the file.
	Mode string
}

// Artifact is an approved document: an absolute path and the sha256 (64 lower-case hex
// digits) the file must still have when it is attached.
type Artifact struct {
	Kind   string // resume | cover_letter
	Path   string
	SHA256 string
}

// ManifestPath is one page of a reviewed site manifest (seed 001).
type ManifestPath struct {
	Path      string // "/axon/jobs/:id" (":name" segments match one segment)
	Sensitive bool   // landing on it pauses the run (reason "sensitive_page")
}

// Manifest is a reviewed site manifest. RestrictPaths limits navigation on the allowed sites
// to the listed paths.
type Manifest struct {
	RestrictPaths bool
	Paths         []ManifestPath
}

// Application is a parsed, validated application file.
type Application struct {
	ID        string
	Mode      string // fill_and_review | auto_submit
	Gate      string // the submit gate id; set exactly when Mode is auto_submit
	Sites     []string
	StartURL  string
	Limits    Limits
	Grounding Grounding
	Artifacts map[string]Artifact // by kind
	Manifest  *Manifest           // nil when the file has none
	Dir       string              // the application file's directory (absolute)
	// SourceFiles lists the grounding sources as loaded, in file order: the profile (inline
	// or profile_file), each answer, each material (inline or a material_files item), with
	// their size; the Bridge traces them as source.read (never their text).
	SourceFiles []SourceFile
}

// SourceFile is one grounding source of an application as loaded: Kind is SourceProfile,
// SourceAnswer or SourceMaterial, Path the file it was read from (relative to the
// application's directory; "" when inline) and Bytes its size in bytes.
type SourceFile struct {
	Kind  string
	Path  string
	Bytes int
}

// Sources is the grounding text a source_quote may come from: the profile, each answer (as
// "question answer" and the answer alone) and each material. The slice is new; extra sources
// (answers given at pauses) are added by the Bridge.
func (a *Application) Sources() []string {
	var s []string
	if a.Grounding.Profile != "" {
		s = append(s, a.Grounding.Profile)
	}
	for _, x := range a.Grounding.Answers {
		s = append(s, x.Question+"\n"+x.Answer, x.Answer)
	}
	return append(s, a.Grounding.Materials...)
}

// GroundingSources is Sources with the kind of each text: the profile (SourceProfile), each
// answer (SourceAnswer, as "question\nanswer": the question on the first line, its line
// breaks made spaces, so WholeValues reads it as the answer's key) and each material
// (SourceMaterial), in that order. The slice is new.
func (a *Application) GroundingSources() []GroundingSource {
	var s []GroundingSource
	if a.Grounding.Profile != "" {
		s = append(s, GroundingSource{SourceProfile, a.Grounding.Profile})
	}
	for _, x := range a.Grounding.Answers {
		q := strings.Join(strings.Fields(x.Question), " ")
		s = append(s, GroundingSource{SourceAnswer, q + "\n" + x.Answer})
	}
	for _, m := range a.Grounding.Materials {
		s = append(s, GroundingSource{SourceMaterial, m})
	}
	return s
}

// AllowsHost reports whether host is one of the application's sites.
func (a *Application) AllowsHost(host string) bool { return hostAllowed(a.Sites, host) }

// PathAllowed reports whether a URL path may be visited under the manifest (always true
// without a manifest or without restrict_paths) and whether the page is sensitive.
func (a *Application) PathAllowed(path string) (allowed, sensitive bool) {
	if path == "" {
		path = "/"
	}
	if a.Manifest == nil {
		return true, false
	}
	for _, p := range a.Manifest.Paths {
		if matchPath(p.Path, path) {
			return true, p.Sensitive
		}
	}
	return !a.Manifest.RestrictPaths, false
}

// ErrArtifactChanged is wrapped by ArtifactFile when the file no longer has its approved hash.
var ErrArtifactChanged = errors.New("artifact changed")

// ArtifactFile re-reads the artifact of kind and checks its hash. It returns the absolute
// path and the sha256, or an error: unknown kind, unreadable or oversized file, or
// ErrArtifactChanged (wrapped) when the content differs from the approved hash.
func (a *Application) ArtifactFile(kind string) (string, string, error) {
	art, ok := a.Artifacts[kind]
	if !ok {
		return "", "", fmt.Errorf("no %s is approved for this application", strings.ReplaceAll(kind, "_", " "))
	}
	sum, err := hashFile(art.Path, MaxArtifactBytes)
	if err != nil {
		return "", "", fmt.Errorf("the approved %s cannot be read: %v", strings.ReplaceAll(kind, "_", " "), err)
	}
	if sum != art.SHA256 {
		return "", "", fmt.Errorf("%w: the %s file no longer matches its approved sha256", ErrArtifactChanged, strings.ReplaceAll(kind, "_", " "))
	}
	return art.Path, sum, nil
}

func hashFile(path string, limit int64) (string, error) {
	f, err := readlimit.OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, limit+1))
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LoadApplication reads the application file at path (at most 1 MiB) and parses it with
// ParseApplication, relative paths resolved against its directory.
func LoadApplication(path string) (*Application, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	f, err := readlimit.OpenRegular(abs)
	if err != nil {
		return nil, fmt.Errorf("application: %w", err)
	}
	defer f.Close()
	data, err := readlimit.All(f, MaxApplicationBytes)
	var tl *readlimit.TooLargeError
	switch {
	case errors.As(err, &tl):
		return nil, fmt.Errorf("%s: %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("application: %w", err)
	}
	return ParseApplication(data, filepath.Dir(abs), path)
}

// appError is a parse error "name:line: msg".
type appParser struct {
	name string
	dir  string
}

func (p *appParser) errf(n *yaml.Node, format string, a ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return fmt.Errorf("%s:%d: %s", p.name, line, fmt.Sprintf(format, a...))
}

var (
	idRe     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
	gateRe   = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,100}$`)
	hostRe   = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ParseApplication parses an application file's YAML. dir is the directory relative paths
// are resolved against (files must stay inside it unless given absolutely; symlinks may not
// lead out); name prefixes error messages ("name:line: msg"). Unknown fields, wrong types,
// missing required fields, unreadable grounding files, a missing or changed artifact and an
// unreviewed manifest are errors.
func ParseApplication(data []byte, dir, name string) (*Application, error) {
	p := &appParser{name: name, dir: dir}
	if len(data) > MaxApplicationBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, MaxApplicationBytes)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("%s:1: the application must be a YAML mapping", name)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p.dir = absDir
	app := &Application{Dir: absDir, Mode: "fill_and_review", Artifacts: map[string]Artifact{},
		Limits: Limits{DefaultActions, DefaultPages, DefaultMinutes}}
	root := doc.Content[0]
	fields, err := p.mapping(root, "application", "id", "mode", "gate", "sites", "start_url", "limits", "grounding", "artifacts", "manifest")
	if err != nil {
		return nil, err
	}
	if err := p.identity(root, fields, app); err != nil {
		return nil, err
	}
	if err := p.sites(root, fields, app); err != nil {
		return nil, err
	}
	if err := p.settings(fields, app); err != nil {
		return nil, err
	}
	return app, nil
}

// identity reads the application's id, mode and gate (fields of root) into app.
func (p *appParser) identity(root *yaml.Node, fields map[string]*yaml.Node, app *Application) error {
	var err error
	if n := fields["id"]; n == nil {
		return p.errf(root, "id is required")
	} else if app.ID, err = p.str(n, "id"); err != nil {
		return err
	} else if !idRe.MatchString(app.ID) {
		return p.errf(n, "id must be 1-100 letters, digits, '-' or '_'")
	}
	if n := fields["mode"]; n != nil {
		if app.Mode, err = p.str(n, "mode"); err != nil {
			return err
		}
		if app.Mode != "fill_and_review" && app.Mode != "auto_submit" {
			return p.errf(n, "mode must be fill_and_review or auto_submit, not %q", app.Mode)
		}
	}
	if n := fields["gate"]; n != nil {
		if app.Gate, err = p.str(n, "gate"); err != nil {
			return err
		}
		if !gateRe.MatchString(app.Gate) {
			return p.errf(n, "gate must be 1-100 letters, digits or . _ : -")
		}
		if app.Mode != "auto_submit" {
			return p.errf(n, "gate is only used with mode: auto_submit")
		}
	}
	if app.Mode == "auto_submit" && app.Gate == "" {
		return p.errf(root, "mode auto_submit requires gate (the submit gate id)")
	}
	return nil
}

// sites reads the allowed sites and the start_url (fields of root) into app.
func (p *appParser) sites(root *yaml.Node, fields map[string]*yaml.Node, app *Application) error {
	var err error
	n := fields["sites"]
	if n == nil {
		return p.errf(root, "sites is required (the allowed host names)")
	}
	if app.Sites, err = p.strList(n, "sites"); err != nil {
		return err
	}
	if len(app.Sites) == 0 {
		return p.errf(n, "sites must list at least one host")
	}
	for i, s := range app.Sites {
		s = strings.ToLower(strings.TrimSuffix(s, "."))
		if !hostRe.MatchString(s) || len(s) > 253 {
			return p.errf(n.Content[i], "sites: %q is not a host name or *.domain pattern", s)
		}
		app.Sites[i] = s
	}
	if n := fields["start_url"]; n != nil {
		if app.StartURL, err = p.str(n, "start_url"); err != nil {
			return err
		}
		_, host, refusal := checkURL(app.StartURL)
		if refusal != "" {
			return p.errf(n, "start_url: %s", refusal)
		}
		if !app.AllowsHost(host) {
			return p.errf(n, "start_url: %s is not one of sites", host)
		}
	}
	return nil
}

// settings reads limits, grounding, artifacts and manifest into app, and sets the
// grounding mode's default (strict under auto_submit, else lenient).
func (p *appParser) settings(fields map[string]*yaml.Node, app *Application) error {
	var err error
	if n := fields["limits"]; n != nil {
		lf, err := p.mapping(n, "limits", "actions", "pages", "minutes")
		if err != nil {
			return err
		}
		for key, dst := range map[string]*int{"actions": &app.Limits.Actions, "pages": &app.Limits.Pages, "minutes": &app.Limits.Minutes} {
			if v := lf[key]; v != nil {
				if *dst, err = p.intRange(v, "limits."+key, 1, 100000); err != nil {
					return err
				}
			}
		}
	}
	if n := fields["grounding"]; n != nil {
		if err := p.grounding(n, app); err != nil {
			return err
		}
	}
	if app.Grounding.Mode == "" {
		app.Grounding.Mode = GroundingLenient
		if app.Mode == "auto_submit" {
			app.Grounding.Mode = GroundingStrict
		}
	}
	if n := fields["artifacts"]; n != nil {
		af, err := p.mapping(n, "artifacts", "resume", "cover_letter")
		if err != nil {
			return err
		}
		for _, kind := range []string{"resume", "cover_letter"} {
			v := af[kind]
			if v == nil {
				continue
			}
			art, err := p.artifact(v, kind)
			if err != nil {
				return err
			}
			app.Artifacts[kind] = art
		}
	}
	if n := fields["manifest"]; n != nil {
		if app.Manifest, err = p.manifest(n); err != nil {
			return err
		}
	}
	return nil
}

func (p *appParser) mapping(n *yaml.Node, what string, keys ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%s must be a mapping", what)
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.errf(k, "%s: keys must be plain names", what)
		}
		known := false
		for _, key := range keys {
			if k.Value == key {
				known = true
			}
		}
		if !known {
			return nil, p.errf(k, "%s: unknown field %q (expected one of %s)", what, k.Value, strings.Join(keys, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.errf(k, "%s: field %q given twice", what, k.Value)
		}
		out[k.Value] = v
	}
	return out, nil
}

func (p *appParser) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n, "%s must be a string", what)
	}
	// Answers are text as written: "answer: 5" or "answer: yes" mean the characters typed.
	lenient := what == "grounding.answers.answer" || what == "grounding.answers.question"
	if n.Tag != "!!str" && !(lenient && (n.Tag == "!!int" || n.Tag == "!!float" || n.Tag == "!!bool")) {
		return "", p.errf(n, "%s must be a string, not %s", what, strings.TrimPrefix(n.Tag, "!!"))
	}
	return n.Value, nil
}

func (p *appParser) boolean(n *yaml.Node, what string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		return false, p.errf(n, "%s must be true or false", what)
	}
	return b, nil
}

func (p *appParser) intRange(n *yaml.Node, what string, lo, hi int) (int, error) {
	var v int
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		return 0, p.errf(n, "%s must be a whole number", what)
	}
	if v < lo || v > hi {
		return 0, p.errf(n, "%s must be between %d and %d", what, lo, hi)
	}
	return v, nil
}

func (p *appParser) strList(n *yaml.Node, what string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "%s must be a list", what)
	}
	var out []string
	for _, c := range n.Content {
		s, err := p.str(c, what+" item")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// file resolves a path of the file: relative paths stay inside the application directory
// (also after symlinks); absolute paths are taken as given. The file must be regular.
func (p *appParser) file(n *yaml.Node, what string) (string, error) {
	s, err := p.str(n, what)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", p.errf(n, "%s is empty", what)
	}
	full := s
	if !filepath.IsAbs(s) {
		full = filepath.Join(p.dir, s)
		real, err := filepath.EvalSymlinks(full)
		if err != nil {
			return "", p.errf(n, "%s: %v", what, err)
		}
		realDir, err := filepath.EvalSymlinks(p.dir)
		if err != nil {
			return "", p.errf(n, "%s: %v", what, err)
		}
		rel, err := filepath.Rel(realDir, real)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", p.errf(n, "%s: %s leads outside the application's directory", what, s)
		}
		full = real
	}
	fi, err := os.Stat(full)
	if err != nil {
		return "", p.errf(n, "%s: %v", what, err)
	}
	if !fi.Mode().IsRegular() {
		return "", p.errf(n, "%s: %s is not a regular file", what, s)
	}
	return full, nil
}

func (p *appParser) readText(n *yaml.Node, what string) (string, error) {
	path, err := p.file(n, what)
	if err != nil {
		return "", err
	}
	f, err := readlimit.OpenRegular(path)
	if err != nil {
		return "", p.errf(n, "%s: %v", what, err)
	}
	defer f.Close()
	data, err := readlimit.All(f, MaxGroundingBytes)
	if err != nil {
		return "", p.errf(n, "%s: %v", what, err)
	}
	return string(data), nil
}

func (p *appParser) grounding(n *yaml.Node, app *Application) error {
	gf, err := p.mapping(n, "grounding", "profile", "profile_file", "answers", "materials", "material_files", "mode")
	if err != nil {
		return err
	}
	if v := gf["mode"]; v != nil {
		if app.Grounding.Mode, err = p.str(v, "grounding.mode"); err != nil {
			return err
		}
		if app.Grounding.Mode != GroundingStrict && app.Grounding.Mode != GroundingLenient {
			return p.errf(v, "grounding.mode must be strict or lenient, not %q", app.Grounding.Mode)
		}
	}
	if gf["profile"] != nil && gf["profile_file"] != nil {
		return p.errf(gf["profile_file"], "grounding: give profile or profile_file, not both")
	}
	if v := gf["profile"]; v != nil {
		if app.Grounding.Profile, err = p.str(v, "grounding.profile"); err != nil {
			return err
		}
		app.SourceFiles = append(app.SourceFiles, SourceFile{Kind: SourceProfile, Bytes: len(app.Grounding.Profile)})
	}
	if v := gf["profile_file"]; v != nil {
		if app.Grounding.Profile, err = p.readText(v, "grounding.profile_file"); err != nil {
			return err
		}
		app.SourceFiles = append(app.SourceFiles, SourceFile{Kind: SourceProfile, Path: v.Value, Bytes: len(app.Grounding.Profile)})
	}
	if v := gf["answers"]; v != nil {
		if v.Kind != yaml.SequenceNode {
			return p.errf(v, "grounding.answers must be a list of {question, answer}")
		}
		for _, c := range v.Content {
			af, err := p.mapping(c, "grounding.answers item", "question", "answer")
			if err != nil {
				return err
			}
			if af["question"] == nil || af["answer"] == nil {
				return p.errf(c, "grounding.answers item needs question and answer")
			}
			q, err := p.str(af["question"], "grounding.answers.question")
			if err != nil {
				return err
			}
			a, err := p.str(af["answer"], "grounding.answers.answer")
			if err != nil {
				return err
			}
			if len(app.Grounding.Answers) == capAnswers {
				return p.errf(c, "grounding.answers: at most %d answers (the contract's cap)", capAnswers)
			}
			if n := utf8.RuneCountInString(a); n > capAnswerChars {
				return p.errf(af["answer"], "grounding.answers.answer is %d characters; at most %d", n, capAnswerChars)
			}
			if n := utf8.RuneCountInString(q); n > capQuestionChar {
				return p.errf(af["question"], "grounding.answers.question is %d characters; at most %d", n, capQuestionChar)
			}
			app.Grounding.Answers = append(app.Grounding.Answers, Answer{Question: q, Answer: a})
			app.SourceFiles = append(app.SourceFiles, SourceFile{Kind: SourceAnswer, Bytes: len(q) + len(a)})
		}
	}
	if v := gf["materials"]; v != nil {
		m, err := p.strList(v, "grounding.materials")
		if err != nil {
			return err
		}
		app.Grounding.Materials = append(app.Grounding.Materials, m...)
		for _, x := range m {
			app.SourceFiles = append(app.SourceFiles, SourceFile{Kind: SourceMaterial, Bytes: len(x)})
		}
	}
	if v := gf["material_files"]; v != nil {
		if v.Kind != yaml.SequenceNode {
			return p.errf(v, "grounding.material_files must be a list of paths")
		}
		for _, c := range v.Content {
			t, err := p.readText(c, "grounding.material_files item")
			if err != nil {
				return err
			}
			app.Grounding.Materials = append(app.Grounding.Materials, t)
			app.SourceFiles = append(app.SourceFiles, SourceFile{Kind: SourceMaterial, Path: c.Value, Bytes: len(t)})
		}
	}
	return nil
}

func (p *appParser) artifact(n *yaml.Node, kind string) (Artifact, error) {
	what := "artifacts." + kind
	f, err := p.mapping(n, what, "path", "sha256")
	if err != nil {
		return Artifact{}, err
	}
	if f["path"] == nil || f["sha256"] == nil {
		return Artifact{}, p.errf(n, "%s needs path and sha256", what)
	}
	sum, err := p.str(f["sha256"], what+".sha256")
	if err != nil {
		return Artifact{}, err
	}
	sum = strings.ToLower(sum)
	if !sha256Re.MatchString(sum) {
		return Artifact{}, p.errf(f["sha256"], "%s.sha256 must be 64 hex digits", what)
	}
	path, err := p.file(f["path"], what+".path")
	if err != nil {
		return Artifact{}, err
	}
	got, err := hashFile(path, MaxArtifactBytes)
	if err != nil {
		return Artifact{}, p.errf(f["path"], "%s.path: %v", what, err)
	}
	if got != sum {
		return Artifact{}, p.errf(f["sha256"], "%s: the file's sha256 is %s, not the approved %s", what, got, sum)
	}
	return Artifact{Kind: kind, Path: path, SHA256: sum}, nil
}

func (p *appParser) manifest(n *yaml.Node) (*Manifest, error) {
	f, err := p.mapping(n, "manifest", "reviewed", "restrict_paths", "paths")
	if err != nil {
		return nil, err
	}
	if f["reviewed"] == nil {
		return nil, p.errf(n, "manifest: reviewed: true is required (a manifest is used only after a person reviewed it)")
	}
	reviewed, err := p.boolean(f["reviewed"], "manifest.reviewed")
	if err != nil {
		return nil, err
	}
	if !reviewed {
		return nil, p.errf(f["reviewed"], "manifest: reviewed is false; a manifest is used only after a person reviewed it")
	}
	m := &Manifest{}
	if v := f["restrict_paths"]; v != nil {
		if m.RestrictPaths, err = p.boolean(v, "manifest.restrict_paths"); err != nil {
			return nil, err
		}
	}
	if v := f["paths"]; v != nil {
		if v.Kind != yaml.SequenceNode {
			return nil, p.errf(v, "manifest.paths must be a list of {path, sensitive}")
		}
		for _, c := range v.Content {
			pf, err := p.mapping(c, "manifest.paths item", "path", "sensitive")
			if err != nil {
				return nil, err
			}
			if pf["path"] == nil {
				return nil, p.errf(c, "manifest.paths item needs path")
			}
			path, err := p.str(pf["path"], "manifest.paths.path")
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# \t") || strings.Contains(path, "//") {
				return nil, p.errf(pf["path"], "manifest.paths.path must be a same-site absolute path like /jobs/:id")
			}
			mp := ManifestPath{Path: path}
			if s := pf["sensitive"]; s != nil {
				if mp.Sensitive, err = p.boolean(s, "manifest.paths.sensitive"); err != nil {
					return nil, err
				}
			}
			m.Paths = append(m.Paths, mp)
		}
	}
	if m.RestrictPaths && len(m.Paths) == 0 {
		return nil, p.errf(n, "manifest: restrict_paths needs at least one path")
	}
	return m, nil
}
