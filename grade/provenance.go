package grade

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/sites"
)

// Provenance says what produced a result (seed 003: "a run can record exactly which code
// and which recording it used"): the recording, grading file and rules a run was graded
// against, and the pab build that graded it. It holds no time, so grading the same run
// again with the same files and build gives the same bytes. Hashes are lowercase hex
// sha256 (FIPS 180-4).
type Provenance struct {
	// Recording identifies the recording graded against; RecordingOf says what it is a
	// hash of: "recording" (the task's published recording files, recording.HashRecording) or
	// "bundle" (an unpacked bundle's files, task.HashBundle). Empty when it could not be
	// hashed (Notes of the result say why).
	Recording   string `json:"recording,omitempty"`
	RecordingOf string `json:"recording_of,omitempty"`
	// Grading is the sha256 of grading.yaml's bytes as read; empty without a grading file.
	Grading string `json:"grading,omitempty"`
	// Rules is RulesHash over the rule files in effect; RuleFiles names them, in load
	// order, as hashed.
	Rules     string   `json:"rules,omitempty"`
	RuleFiles []string `json:"rule_files,omitempty"`
	// Pab is the build that graded.
	Pab Build `json:"pab"`
}

// Build is a pab binary as runtime/debug.ReadBuildInfo describes it.
type Build struct {
	// Version is the main module's version: a release tag, a pseudo-version, or "(devel)"
	// for a build from a checkout; "unknown" when the binary carries no build information.
	Version string `json:"version"`
	// Revision is the VCS revision the binary was built from (the vcs.revision setting);
	// empty when it was built outside a checkout or with -buildvcs=false.
	Revision string `json:"revision,omitempty"`
	// Modified is the vcs.modified setting: the checkout had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Go is the Go version that built the binary ("go1.26.0").
	Go string `json:"go,omitempty"`
}

// ReadBuild returns the running binary's Build.
func ReadBuild() Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{Version: "unknown"}
	}
	b := Build{Version: bi.Main.Version, Go: bi.GoVersion}
	if b.Version == "" {
		b.Version = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the build for a person: "(devel) 1a2b3c4d5e6f+modified".
func (b Build) String() string {
	s := b.Version
	if r := b.Revision; r != "" {
		if len(r) > 12 {
			r = r[:12]
		}
		s += " " + r
		if b.Modified {
			s += "+modified"
		}
	}
	return s
}

// HashBytes returns the lowercase hex sha256 of data.
func HashBytes(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// RulesHash returns the sha256 identifying the rules in effect, and the names it hashed:
// for each file of rs.Files() in load order (the sites directory's files, then the task's
// rules directory's, each sorted by name; the embedded _default.yaml first when it was
// used), its name, a NUL byte, its length as 8 bytes big-endian, and its bytes. A file's
// name is its path relative to root (the task repository), slash-separated, when it lies
// inside root, else its last two path elements ("rules/site.yaml"), so the hash does not
// depend on where the repository is checked out. The files are read again for the hash; a
// file that cannot be read is an error naming it.
func RulesHash(rs *rules.Set, root string) (string, []string, error) {
	h := sha256.New()
	var names []string
	for _, f := range rs.Files() {
		var data []byte
		name := f.Path
		if f.Path == rules.EmbeddedDefaultPath {
			data = sites.Default
		} else {
			name = ruleFileName(f.Path, root)
			fi, err := os.Stat(f.Path)
			if err != nil {
				return "", nil, fmt.Errorf("rules hash: %w", err)
			}
			if fi.Size() > rules.MaxFileSize {
				return "", nil, fmt.Errorf("rules hash: %s is %d bytes, over %d", f.Path, fi.Size(), rules.MaxFileSize)
			}
			if data, err = os.ReadFile(f.Path); err != nil {
				return "", nil, fmt.Errorf("rules hash: %w", err)
			}
		}
		recording.FrameBytes(h, name, data)
		names = append(names, name)
	}
	return hex.EncodeToString(h.Sum(nil)), names, nil
}

// ruleFileName is path relative to root when inside it, else its last two elements.
func ruleFileName(path, root string) string {
	if root != "" {
		if rel, ok := pathx.Rel(root, path); ok {
			return rel
		}
	}
	return filepath.ToSlash(filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path)))
}
