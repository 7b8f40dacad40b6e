package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/warc"
)

func newAuditCmd(g *globalFlags) *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "audit TARGET",
		Short: "Check a recording for leaked credentials and damage before it is shared",
		Long: fmt.Sprintf(`Check a recording and list every problem, one line each ("FILE: entry e000012: ...").
TARGET is a task id, a task directory, a published recording directory
(tasks/ID/recording) or a bundle directory (manifest.json, archive/data.warc, ...).

The audit fails on: a manifest field pab does not write (start_url passes as
legacy); a request that stores Cookie, Cookie2, Authorization or
Proxy-Authorization; a Set-Cookie value other than REDACTED; an HTTP header line
that is not a "Name: value" field (older recorders joined repeated fields with
newlines); an entries.jsonl line that does not match its WARC records (record type,
offsets, lengths, RR-Exchange-Id, URL, status, payload size and sha256 recomputed,
request body); a damaged WARC; a record no entry points at; a published format other
than %d; a manifest not_found key that is neither a host of the recording nor a site
name of the rules (sites/ and the task's rules/, or a bundle's own rules/). Exit
status 1 when there is any problem.

TARGET may also be a WARC file (.warc or .warc.gz, before import): it is read as an
import reads it. A record whose WARC Content-Length is wrong is read on at the real
end of the record and listed as a warning; with --strict it is a problem.`, warc.RecordingFormat),
		Example: `  pab audit books-sapiens-price
  pab audit ./recorded-bundle
  pab audit --strict crawl.warc.gz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg := args[0]
			var probs, warns []warc.Problem
			target := arg
			var repo *task.Repo
			var err error
			if !isRegularFile(arg) {
				if repo, err = g.findRepo(); err != nil {
					return err
				}
			}
			switch {
			case isRegularFile(arg):
				probs, warns = warc.AuditWARCFile(arg, strict)
			case isRecordingDir(arg):
				rulesDirs := []string{repo.SitesDir()}
				if parent := filepath.Dir(filepath.Clean(arg)); isRegularFile(filepath.Join(parent, task.CardFile)) {
					rulesDirs = taskRulesDirs(repo, parent)
				}
				probs, err = auditRecording(repo, arg, rulesDirs)
			case isRegularFile(filepath.Join(arg, warc.ManifestFile)):
				probs = warc.Audit(arg)
				var rulesDirs []string
				if isDirPath(filepath.Join(arg, "rules")) {
					rulesDirs = []string{filepath.Join(arg, "rules")} // as pab replay layers a bundle's rules
				}
				probs = append(probs, auditNotFoundKeys(arg, filepath.Join(arg, warc.ManifestFile), rulesDirs)...)
			case isRegularFile(filepath.Join(arg, task.CardFile)):
				target = filepath.Join(arg, "recording")
				probs, err = auditRecording(repo, target, taskRulesDirs(repo, arg))
			default:
				var t *task.Task
				if t, err = repo.Task(arg); err != nil {
					return fmt.Errorf("audit: %s is not a task id, a task directory, a recording or a bundle directory (%v)", arg, err)
				}
				target = t.RecordingDir()
				probs, err = auditRecording(repo, target, []string{repo.SitesDir(), t.RulesDir()})
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, w := range warns {
				fmt.Fprintf(out, "warning: %s\n", w)
			}
			for _, p := range probs {
				fmt.Fprintln(out, p)
			}
			if len(probs) > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("audit: %d problems in %s", len(probs), target)}
			}
			fmt.Fprintf(out, "%s: no problems\n", target)
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "for a WARC file: a wrong WARC Content-Length is a problem (exit status 1), not a warning")
	return cmd
}

// auditRecording audits a published recording, unpacking it into a temporary directory
// of the cache, and checks its manifest's not_found keys against rulesDirs (see
// auditNotFoundKeys).
func auditRecording(repo *task.Repo, dir string, rulesDirs []string) ([]warc.Problem, error) {
	if !isRecordingDir(dir) {
		return nil, fmt.Errorf("audit: %s holds no recording", dir)
	}
	work, err := cacheWorkDir(repo, "audit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	bundle := filepath.Join(work, "bundle")
	probs := warc.AuditRecording(dir, bundle)
	return append(probs, auditNotFoundKeys(bundle, filepath.Join(dir, warc.RecordingManifestFile), rulesDirs)...), nil
}

// auditNotFoundKeys opens the bundle in bundleDir and lists, as problems of manifestPath,
// the keys of its manifest's not_found that are neither a host of the recording nor a site
// of the rules in rulesDirs (replay.NotFoundKeyProblems): replay never serves their pages.
// A bundle that does not open gives nothing (the audit has listed why); rules that do not
// load give one problem.
func auditNotFoundKeys(bundleDir, manifestPath string, rulesDirs []string) []warc.Problem {
	b, err := warc.OpenBundle(bundleDir)
	if err != nil {
		return nil
	}
	defer b.Close()
	if len(b.Manifest.NotFound) == 0 {
		return nil
	}
	rs, err := rules.Load(rulesDirs...)
	if err != nil {
		return []warc.Problem{{File: manifestPath, Msg: fmt.Sprintf("not_found keys not checked: %v", err)}}
	}
	var probs []warc.Problem
	for _, msg := range replay.NotFoundKeyProblems(b.Manifest.NotFound, b.Entries, rs) {
		probs = append(probs, warc.Problem{File: manifestPath, Msg: msg})
	}
	return probs
}

// taskRulesDirs are the rule directories of the task in taskDir, as pab replay layers
// them (task.Resolve): the sites/ of the task's own repository when it sits in a tasks/
// directory next to a sites/ directory, else repo's sites/, then the task's rules/.
func taskRulesDirs(repo *task.Repo, taskDir string) []string {
	sites := repo.SitesDir()
	if abs, err := filepath.Abs(taskDir); err == nil {
		taskDir = abs
		parent := filepath.Dir(abs)
		if filepath.Base(parent) == "tasks" && isDirPath(filepath.Join(filepath.Dir(parent), "sites")) {
			sites = filepath.Join(filepath.Dir(parent), "sites")
		}
	}
	return []string{sites, filepath.Join(taskDir, "rules")}
}
