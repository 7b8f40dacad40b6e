package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/importer"
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
			var err error
			if isRegularFile(arg) {
				probs, warns = warc.AuditWARCFile(arg, strict)
			} else {
				var repo *task.Repo
				if repo, err = g.findRepo(); err != nil {
					return err
				}
				target, probs, err = importer.Audit(repo, arg)
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
