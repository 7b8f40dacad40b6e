package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/pathx"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
)

func newRulesCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Work with site rule files",
		Long: `Site rule files (YAML) decide how requests are matched to the recording:
which parameters and body fields are ignored, which hosts are blocked, which pages
answer with their last copy, and how endpoints are keyed. See docs/rules.md.`,
		Example: `  pab rules check                              # sites/ and every task's rules/
  pab rules check sites tasks/shop/rules       # just these directories
  pab inspect shop "https://shop.example/search?q=lamp"   # how one request is matched`,
	}
	cmd.AddCommand(newRulesCheckCmd(g))
	return cmd
}

func newRulesCheckCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "check [DIR...]",
		Short: "Validate rule files and report every problem",
		Long:  longHelp("rules-check"),
		Example: `  pab rules check
  pab rules check sites
  pab rules check tasks/books-sapiens-price/rules
  pab --repo ~/my-tasks rules check`,
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			sitesDir := shortPath(repo.SitesDir())
			var jobs []rules.CheckJob
			if len(args) == 0 {
				ids, err := repo.TaskIDs()
				if err != nil {
					return err
				}
				var dirs []string
				for _, id := range ids {
					t, err := repo.Task(id) // refuses a task leading outside the repository
					if err != nil {
						return fmt.Errorf("rules check: %w", err)
					}
					dirs = append(dirs, shortPath(t.RulesDir()))
				}
				jobs = rules.RepoJobs(sitesDir, dirs)
			} else if err := checkArgsInside(repo, args); err != nil {
				return fmt.Errorf("rules check: %w", err)
			} else if jobs, err = rules.DirJobs(sitesDir, args, shortPath); err != nil {
				return fmt.Errorf("rules check: %w", err)
			}
			out := cmd.OutOrStdout()
			problems, files, err := rules.CheckAll(jobs, func(p rules.Problem) { fmt.Fprintln(out, p.String()) })
			if err != nil {
				return err
			}
			if problems > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("rules check: %d %s in %d %s", problems, words.Plural(problems, "problem"), files, words.Plural(files, "rule file"))}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "pab rules check: %d %s, no problems\n", files, words.Plural(files, "rule file"))
			return nil
		},
	}
}

// shortPath returns path relative to the current directory when it lies inside it, so
// that problems name files as a user in the repository would type them.
func shortPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if rel, ok := pathx.Rel(wd, abs); ok {
		return rel
	}
	return path
}

// checkArgsInside refuses a directory named on the command line that lies in the repository
// but leads outside it through a symbolic link, or belongs to a task that does
// (task.Repo.CheckArg).
func checkArgsInside(repo *task.Repo, args []string) error {
	for _, a := range args {
		if err := repo.CheckArg(a); err != nil {
			return err
		}
	}
	return nil
}
