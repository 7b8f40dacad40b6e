package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeApp(t *testing.T, body string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	pdf := []byte("%PDF-1.4 resume")
	if err := os.WriteFile(filepath.Join(dir, "resume.pdf"), pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pdf)
	body = strings.ReplaceAll(body, "SUM", hex.EncodeToString(sum[:]))
	p := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, dir
}

const goodApp = `id: axon-swe-2
mode: auto_submit
gate: gate-7f3a
sites: [job-boards.greenhouse.io, "*.greenhouse.io"]
start_url: https://job-boards.greenhouse.io/axon/jobs/1
limits: { actions: 40, pages: 5 }
grounding:
  profile: |
    Jane Doe, jane.doe@example.com
  answers:
    - { question: "Do you need sponsorship?", answer: No }
    - { question: "Years?", answer: 5 }
  materials: [ "cover letter text" ]
artifacts:
  resume: { path: resume.pdf, sha256: "SUM" }
manifest:
  reviewed: true
  restrict_paths: true
  paths:
    - { path: "/axon/jobs/:id" }
    - { path: "/axon/jobs/:id/confirmation", sensitive: true }
`

func TestLoadApplication(t *testing.T) {
	p, _ := writeApp(t, goodApp)
	app, err := LoadApplication(p)
	if err != nil {
		t.Fatal(err)
	}
	if app.ID != "axon-swe-2" || app.Mode != "auto_submit" || app.Gate != "gate-7f3a" || app.Limits != (Limits{40, 5, DefaultMinutes}) {
		t.Errorf("%+v", app)
	}
	if len(app.Grounding.Answers) != 2 || app.Grounding.Answers[1].Answer != "5" || app.Grounding.Answers[0].Answer != "No" {
		t.Errorf("answers %+v", app.Grounding.Answers)
	}
	if ok, s := app.PathAllowed("/axon/jobs/1/confirmation"); !ok || !s {
		t.Error("sensitive path")
	}
	if ok, _ := app.PathAllowed("/other"); ok {
		t.Error("unlisted path allowed")
	}
	if _, _, err := app.ArtifactFile("resume"); err != nil {
		t.Error(err)
	}
}

func TestApplicationErrors(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"unknown field":   {"id: a\nsites: [x.com]\nbogus: 1\n", `app.yaml:3: application: unknown field "bogus"`},
		"no id":           {"sites: [x.com]\n", "id is required"},
		"bad mode":        {"id: a\nmode: yolo\nsites: [x.com]\n", "mode must be"},
		"auto no gate":    {"id: a\nmode: auto_submit\nsites: [x.com]\n", "requires gate"},
		"gate f&r":        {"id: a\ngate: g\nsites: [x.com]\n", "only used with mode: auto_submit"},
		"no sites":        {"id: a\n", "sites is required"},
		"bad site":        {"id: a\nsites: [\"http://x.com\"]\n", "not a host name"},
		"limits type":     {"id: a\nsites: [x.com]\nlimits: {actions: many}\n", "limits.actions must be a whole number"},
		"start off-site":  {"id: a\nsites: [x.com]\nstart_url: https://y.com/\n", "not one of sites"},
		"start data":      {"id: a\nsites: [x.com]\nstart_url: \"data:text/html,x\"\n", "start_url"},
		"unreviewed":      {"id: a\nsites: [x.com]\nmanifest: {reviewed: false}\n", "reviewed is false"},
		"no reviewed":     {"id: a\nsites: [x.com]\nmanifest: {paths: []}\n", "reviewed: true is required"},
		"artifact hash":   {"id: a\nsites: [x.com]\nartifacts: {resume: {path: resume.pdf, sha256: \"" + strings.Repeat("0", 64) + "\"}}\n", "not the approved"},
		"artifact escape": {"id: a\nsites: [x.com]\nartifacts: {resume: {path: ../x.pdf, sha256: SUM}}\n", "artifacts.resume.path"},
		"bad kind":        {"id: a\nsites: [x.com]\nartifacts: {photo: {path: resume.pdf, sha256: SUM}}\n", `unknown field "photo"`},
		"profile both":    {"id: a\nsites: [x.com]\ngrounding: {profile: x, profile_file: resume.pdf}\n", "not both"},
		"not yaml":        {"id: [\n", "app.yaml"},
		"list root":       {"- a\n", "must be a mapping"},
		"profile number":  {"id: a\nsites: [x.com]\ngrounding: {profile: 5}\n", "must be a string"},
	}
	for name, c := range cases {
		p, _ := writeApp(t, c.body)
		_, err := LoadApplication(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
}

func TestArtifactChanged(t *testing.T) {
	p, dir := writeApp(t, goodApp)
	app, err := LoadApplication(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resume.pdf"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := app.ArtifactFile("resume"); err == nil || !strings.Contains(err.Error(), "artifact changed") {
		t.Fatalf("changed file accepted: %v", err)
	}
}

func TestSymlinkEscape(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("x"), 0o644)
	p, dir := writeApp(t, "id: a\nsites: [x.com]\ngrounding: {profile_file: link.txt}\n")
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Skip(err)
	}
	if _, err := LoadApplication(p); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("symlink escape: %v", err)
	}
}

func FuzzParseApplication(f *testing.F) {
	f.Add([]byte(goodApp))
	f.Add([]byte("id: a\nsites: [x.com]\n"))
	f.Add([]byte("id: &a [*a]\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		app, err := ParseApplication(data, dir, "fuzz.yaml")
		if err == nil && (app.ID == "" || len(app.Sites) == 0 || (app.Mode == "auto_submit") != (app.Gate != "")) {
			t.Fatalf("invalid application accepted: %+v", app)
		}
	})
}
