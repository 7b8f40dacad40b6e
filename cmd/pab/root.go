package main

import (
	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/task"
)

// globalFlags are the flags every command accepts.
type globalFlags struct {
	repo string
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "pab",
		Short: "Record and replay websites offline for web-browsing AI agents",
		Long: withFormat(`pab records websites and replays the recordings (WARC files) through an HTTPS
man-in-the-middle proxy, so a browser agent sees the same pages on every run
without the internet. Every request and how it was answered goes to a JSONL log.

The task repository holds sites/ (shared matching rules) and tasks/<id>/
(task.yaml, recording/ in the published layout format {{format}}, rules/). It is
--repo, else $PAB_REPO, else the current directory. A task folder, recording/ or
rules/ that is a symbolic link leading outside the repository is refused by
every command. Saved indexes and unpacked recordings of older formats live in
$PAB_CACHE, default .cache/ in the repository (a current directory holding
neither tasks/ nor sites/ uses the per-user cache, ~/.cache/pab or
$XDG_CACHE_HOME/pab). pab's CA is one per user, the same from any directory:
$PAB_CA_DIR, else $PAB_CACHE/ca when PAB_CACHE is set, else
~/.local/share/pab/ca ($XDG_DATA_HOME/pab/ca); 'pab ca' prints where.`),
		Example: `  pab tasks
  pab replay books-sapiens-price --check
  pab replay lil-former-projects --listen 127.0.0.1:8899 --log replay.jsonl
  curl --proxy http://127.0.0.1:8899 --cacert "$(pab ca)" https://lil.law.harvard.edu/projects/`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.repo, "repo", "", "task repository holding sites/ and tasks/ (default $PAB_REPO, else the current directory)")
	root.AddCommand(
		newReplayCmd(g),
		newInspectCmd(g),
		newStatsCmd(g),
		newTasksCmd(g),
		newCACmd(g),
		newRulesCmd(g),
		newExportCmd(g),
		newAuditCmd(g),
		newBrowserCmd(g),
	)
	// check, grade, guard, run, k8s, import, record, recording: not in the lite build
	root.AddCommand(heavyCommands(g)...)
	return root
}

func (g *globalFlags) findRepo() (*task.Repo, error) {
	return task.FindRepo(g.repo)
}
