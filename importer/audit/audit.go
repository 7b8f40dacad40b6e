// Package audit is pab audit's work on a task, a published recording or a bundle
// directory: warc's audit (recording.Audit, recording.AuditRecording) plus the check of the
// manifest's not_found keys against the rules a replay would layer (NotFoundKeys), which
// the import pipeline (package importer) runs on every new recording too. It imports
// neither grade nor record, so the lite build's pab audit stays small. See
// docs/bundle-format.md, "Audit".
package audit

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
)

// Audit audits arg, a published recording directory, a bundle directory, a task directory
// or a task id of repo (tried in that order), as pab audit does: the recording's problems
// (recording.Audit, recording.AuditRecording) and its manifest's not_found keys checked against the
// rules a replay would layer (NotFoundKeys). target is what was audited (a task's recording
// directory for a task). An arg that is none of these, or a task without a recording, is
// an error naming it, and so is a task directory with a link leading outside the repository
// (task.Repo.CheckArg).
func Audit(repo *task.Repo, arg string) (target string, probs []recording.Problem, err error) {
	target = arg
	if err := repo.CheckArg(arg); err != nil { // a link out of the repository is not read
		return target, nil, fmt.Errorf("audit: %w", err)
	}
	switch {
	case IsRecordingDir(arg):
		rulesDirs := []string{repo.SitesDir()}
		if parent := filepath.Dir(filepath.Clean(arg)); pathx.IsRegularFile(filepath.Join(parent, task.CardFile)) {
			rulesDirs = TaskRulesDirs(repo, parent)
		}
		probs, err = AuditRecording(repo, arg, rulesDirs)
	case IsBundleDir(arg):
		probs = recording.Audit(arg)
		var rulesDirs []string
		if pathx.IsDir(filepath.Join(arg, "rules")) {
			rulesDirs = []string{filepath.Join(arg, "rules")} // as pab replay layers a bundle's rules
		}
		probs = append(probs, NotFoundKeys(arg, filepath.Join(arg, recording.ManifestFile), rulesDirs)...)
	case pathx.IsRegularFile(filepath.Join(arg, task.CardFile)):
		target = filepath.Join(arg, "recording")
		probs, err = AuditRecording(repo, target, TaskRulesDirs(repo, arg))
	default:
		var t *task.Task
		if t, err = repo.Task(arg); err != nil {
			return target, nil, fmt.Errorf("audit: %s is not a task id, a task directory, a recording or a bundle directory (%v)", arg, err)
		}
		target = t.RecordingDir()
		probs, err = AuditRecording(repo, target, []string{repo.SitesDir(), t.RulesDir()})
	}
	if err == nil {
		probs = append(probs, savedIndexProblems(repo, arg)...)
	}
	return target, probs, err
}

// savedIndexProblems reads the saved index of arg's replay target in repo's cache whole
// (task.CheckSavedIndex), when there is one of the current key: a damaged one is a problem
// (and is removed, so the next start computes it again).
func savedIndexProblems(repo *task.Repo, arg string) []recording.Problem {
	tgt, err := task.Resolve(arg, repo)
	if err != nil {
		return nil // what cannot be resolved has no saved index; the audit above said why
	}
	path, err := task.CheckSavedIndex(tgt, repo)
	if err != nil {
		return []recording.Problem{{File: path, Msg: fmt.Sprintf("the saved index is damaged (%v); it was removed, and the next start computes it again", err)}}
	}
	return nil
}

// AuditRecording audits the published recording in dir, unpacking it into a temporary
// directory of repo's cache, and checks its manifest's not_found keys against rulesDirs
// (see NotFoundKeys). A dir without a recording is an error naming it.
func AuditRecording(repo *task.Repo, dir string, rulesDirs []string) ([]recording.Problem, error) {
	if !IsRecordingDir(dir) {
		return nil, fmt.Errorf("audit: %s holds no recording", dir)
	}
	if err := os.MkdirAll(repo.CacheDir(), 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(repo.CacheDir(), "audit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	bundle := filepath.Join(work, "bundle")
	probs := recording.AuditRecording(dir, bundle)
	return append(probs, NotFoundKeys(bundle, filepath.Join(dir, recording.RecordingManifestFile), rulesDirs)...), nil
}

// NotFoundKeys opens the bundle in bundleDir and lists, as problems of manifestPath, the
// keys of its manifest's not_found that are neither a host of the recording nor a site of
// the rules in rulesDirs (replay.NotFoundKeyProblems): replay never serves their pages. A
// bundle that does not open gives nothing (the audit has listed why); rules that do not
// load give one problem.
func NotFoundKeys(bundleDir, manifestPath string, rulesDirs []string) []recording.Problem {
	if m, err := recording.ReadBundleManifest(bundleDir); err != nil || len(m.NotFound) == 0 {
		return nil // an unreadable bundle is the audit's to report
	}
	b, err := recording.OpenBundle(bundleDir)
	if err != nil {
		return nil
	}
	defer b.Close()
	rs, err := rules.Load(rulesDirs...)
	if err != nil {
		return []recording.Problem{{File: manifestPath, Msg: fmt.Sprintf("not_found keys not checked: %v", err)}}
	}
	var probs []recording.Problem
	for _, msg := range replay.NotFoundKeyProblems(b.Manifest.NotFound, b.AllEntries(), rs) {
		probs = append(probs, recording.Problem{File: manifestPath, Msg: msg})
	}
	return probs
}

// TaskRulesDirs are the rule directories of the task in taskDir, as pab replay layers
// them (task.Resolve): the sites/ of the task's own repository when it sits in a tasks/
// directory next to a sites/ directory, else repo's sites/, then the task's rules/.
func TaskRulesDirs(repo *task.Repo, taskDir string) []string {
	sites := repo.SitesDir()
	if abs, err := filepath.Abs(taskDir); err == nil {
		taskDir = abs
		parent := filepath.Dir(abs)
		if filepath.Base(parent) == "tasks" && pathx.IsDir(filepath.Join(filepath.Dir(parent), "sites")) {
			sites = filepath.Join(filepath.Dir(parent), "sites")
		}
	}
	return []string{sites, filepath.Join(taskDir, "rules")}
}

// IsRecordingDir reports whether dir holds a published recording's archive: data.warc.gz
// (format 3), warc.tar.gz (format 2) or bundle.tar.gz (format 1), whole or in parts, or an
// entries.jsonl.
func IsRecordingDir(dir string) bool {
	for _, name := range []string{recording.RecordingDataFile, recording.RecordingDataPart(0), recording.RecordingWARCFile, recording.RecordingWARCFile + ".000", recording.RecordingEntriesFile, recording.Format1File, recording.Format1File + ".000"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// IsBundleDir reports whether dir holds a bundle: a regular file manifest.json (links
// followed).
func IsBundleDir(dir string) bool {
	return pathx.IsRegularFile(filepath.Join(dir, recording.ManifestFile))
}
