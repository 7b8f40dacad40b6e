//go:build !pab_lite

package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/warc"
)

func newImportCmd(g *globalFlags) *cobra.Command {
	var (
		id        string
		replace   bool
		preferNew bool
		noCheck   bool
		noWait    bool
		title     string
		locale    string
		timezone  string
	)
	cmd := &cobra.Command{
		Use:   "import --task ID (FILE.warc[.gz]|FILE.wacz... | BUNDLE-DIR | RECORDING-DIR)",
		Short: "Turn WARC files or a bundle into a task's recording (tasks/ID/recording, format 2)",
		Long: `Import into tasks/ID/recording, in pab's published layout (format 2, see
docs/bundle-format.md), one of:
  - WARC or WACZ files written by any archiving tool (wget, warcprox, Browsertrix,
    pywb, Webrecorder, Heritrix, pab export);
  - a bundle directory (manifest.json, archive/data.warc, indexes/, pages/), such as
    'pab record --out DIR' writes;
  - a published recording directory (another task's recording/).
A bundle or recording is audited first (see 'pab audit') and refused, with every
problem listed, when the audit fails.

From WARC files, response bodies are stored decoded, identical payloads of 1 KB or
more once, requests lose Cookie and Authorization, and every Set-Cookie value
becomes REDACTED (docs/import.md).

When the task already has a recording, the two are merged: every exchange of both
is kept, the recording captured first before the other, so a request recorded both
times is answered from the earlier copy and a "latest" page from the newer one.
--prefer-new drops the existing exchanges recorded again (same method, URL and
request body), so the new copies answer them; --replace drops the existing
recording entirely.

Afterwards rules are inferred from the recording and written to
tasks/ID/rules/<site>.auto.yaml (hand-written rule files are never touched), and
every recorded request is replayed once offline to print hit rates with the generic
rules only, with the inferred rules, and with all the rules in effect.

Nothing is written unless the whole import succeeds: the new recording is packed
beside the old one, audited as 'pab audit' would, and only then renamed into
place. A task.yaml with a title is created when the task has none.

Writers of one task take turns: an import waits while another pab writes the
task (an import, the end of a recording, a migration), saying so on stderr, and
then merges with the recording that one left; --no-wait fails at once instead.`,
		Example: `  pab import --task my-books testdata/sites/books.toscrape.warc
  pab import --task my-task --replace crawl-00000.warc.gz crawl-00001.warc.gz
  pab import --task my-task ./recorded-bundle
  pab import --task my-task --prefer-new ./second-visit`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				return fmt.Errorf("import: --task ID is required")
			}
			if replace && preferNew {
				return fmt.Errorf("import: --replace and --prefer-new exclude each other")
			}
			if err := checkLocaleFlags("import", locale, timezone); err != nil {
				return err
			}
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			return runImport(cmd, repo, id, args, importOptions{replace: replace, preferNew: preferNew, noCheck: noCheck, noWait: noWait, title: title,
				locale: locale, timezone: timezone})
		},
	}
	cmd.Flags().StringVar(&id, "task", "", "task id: the recording goes to tasks/ID/recording (required)")
	cmd.Flags().BoolVar(&replace, "replace", false, "drop the task's existing recording instead of merging with it")
	cmd.Flags().BoolVar(&preferNew, "prefer-new", false, "merge, but let the new copies of requests recorded again replace the existing ones")
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "skip the replay self-check after the import")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once, instead of waiting, when another pab is writing the task")
	cmd.Flags().StringVar(&title, "title", "", "title for a new task.yaml (default: the first page's title); an existing task.yaml is never changed")
	cmd.Flags().StringVar(&locale, "locale", "", "the browser language of the capture, a BCP 47 tag (en-US): written to the manifest and task.yaml's capture (default: what the recording's manifest says)")
	cmd.Flags().StringVar(&timezone, "timezone", "", "the time zone of the capture, an IANA name (America/New_York): written to the manifest and task.yaml's capture (default: what the recording's manifest says)")
	return cmd
}

// importOptions are the flags of pab import.
type importOptions struct {
	replace, preferNew, noCheck, noWait bool
	title                               string
	// locale and timezone, when set, go into the manifest and task.yaml's capture.
	locale, timezone string
}

// checkLocaleFlags checks --locale and --timezone of command cmd (when given): a BCP 47
// tag and an IANA zone time.LoadLocation loads.
func checkLocaleFlags(cmd, locale, timezone string) error {
	if locale != "" {
		if err := warc.CheckLocale(locale); err != nil {
			return fmt.Errorf("%s: --locale: %w", cmd, err)
		}
	}
	if timezone != "" {
		if err := warc.CheckTimezone(timezone); err != nil {
			return fmt.Errorf("%s: --timezone: %w", cmd, err)
		}
	}
	return nil
}

// runImport imports args (WARC or WACZ files, or one bundle or recording directory) into
// tasks/id/recording of repo: audited, merged with the existing recording unless replace,
// packed beside it, audited again, published, with inferred rules and a self-check. It
// holds the task's write lock (lockTask) throughout, so the recording it merges with is the
// one the previous writer left. pab record uses it for what it recorded.
func runImport(cmd *cobra.Command, repo *task.Repo, id string, args []string, o importOptions) error {
	title := o.title
	if err := task.ValidID(id); err != nil {
		return err
	}
	taskDir := filepath.Join(repo.TasksDir(), id)
	recDir := filepath.Join(taskDir, "recording")
	dirInput := false
	for _, p := range args {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		switch {
		case st.IsDir():
			dirInput = true
		case !st.Mode().IsRegular():
			return fmt.Errorf("import: %s is not a regular file", p)
		}
	}
	if dirInput && len(args) > 1 {
		return fmt.Errorf("import: give one bundle or recording directory, or WARC files")
	}
	errOut, out := cmd.ErrOrStderr(), cmd.OutOrStdout()
	unlock, err := lockTask(repo, taskDir, "pab "+cmd.Name(), o.noWait, errOut)
	if err != nil {
		return err
	}
	defer unlock()

	// From here on the task is read as the last writer left it.
	if f, err := warc.RecordingFormatOf(recDir); err != nil {
		return fmt.Errorf("import: existing recording: %w", err)
	} else if f != 0 && f != warc.RecordingFormat && !o.replace {
		return fmt.Errorf("import: %s holds a format %d recording; run pab recording migrate %s first, or pass --replace to drop it", recDir, f, id)
	}
	old, err := warc.RecordingFiles(recDir)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	merge := len(old) > 0 && !o.replace
	// Ctrl-C stops the import between records; what was begun is removed.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := taskWorkDir(repo, taskDir, "import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// 1. the incoming recording as a bundle directory
	incoming := filepath.Join(work, "in")
	var rep *warc.ImportReport
	if dirInput {
		incoming, err = auditedInput(args[0], filepath.Join(work, "in"), errOut)
		if err != nil {
			return err
		}
	} else {
		rep, err = warc.ImportWARCs(args, incoming, warc.ImportOptions{TaskID: id, Context: ctx, Locale: o.locale, Timezone: o.timezone})
		if err != nil {
			return err
		}
	}

	// 2. merged with the existing recording (or normalized alone)
	final := incoming
	oldCount := 0
	if merge || dirInput {
		oldDir := ""
		if merge {
			oldDir = filepath.Join(work, "old")
			if err := warc.Unpack(recDir, oldDir); err != nil {
				return fmt.Errorf("import: existing recording: %w (pass --replace to drop it, or run pab recording migrate)", err)
			}
			if oldCount, err = warc.CountRecordingEntries(recDir); err != nil {
				return err
			}
		}
		final = filepath.Join(work, "merged")
		if err := warc.Merge(oldDir, incoming, final, warc.MergeOptions{PreferNew: o.preferNew, TaskID: id, Context: ctx,
			Locale: o.locale, Timezone: o.timezone}); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}

	// 3. packed beside the recording and audited there; rules inferred. Nothing of the
	// task changes before all of it has passed.
	_, statErr := os.Stat(taskDir)
	newTask := os.IsNotExist(statErr)
	if err := os.MkdirAll(taskDir, 0o755); err != nil {
		return err
	}
	failed := func(err error) error {
		if newTask {
			os.RemoveAll(taskDir)
		}
		return err
	}
	staged, err := warc.PackStaged(final, recDir, warc.PartSize)
	if err != nil {
		return failed(err)
	}
	// An unresolved revisit was already a warning of the import; it does not stop it.
	if probs := warc.Blocking(warc.AuditRecording(staged, filepath.Join(work, "audit"))); len(probs) > 0 {
		os.RemoveAll(staged)
		for _, p := range probs {
			fmt.Fprintln(errOut, strings.ReplaceAll(p.String(), staged, recDir+" (new)"))
		}
		return failed(fmt.Errorf("import: the new recording fails the audit (%d problems, listed above); nothing was imported, %s is as it was", len(probs), recDir))
	}
	t := &task.Task{Repo: repo, ID: id, Dir: taskDir}
	inferred, layers, err := inferRules(t, final, work)
	if err != nil {
		os.RemoveAll(staged)
		return failed(err)
	}
	// the audit's not_found check (pab audit): every key a host of the recording or a site
	// name of the rules the task will replay with (sites/, its rules/, the rules inferred now)
	if probs := auditNotFoundKeys(final, filepath.Join(recDir, warc.RecordingManifestFile)+" (new)",
		[]string{repo.SitesDir(), t.RulesDir(), filepath.Join(work, "inferred-rules")}); len(probs) > 0 {
		os.RemoveAll(staged)
		for _, p := range probs {
			fmt.Fprintln(errOut, p)
		}
		return failed(fmt.Errorf("import: the new recording fails the audit (%d problems, listed above); nothing was imported, %s is as it was", len(probs), recDir))
	}

	// 4. published
	if err := warc.Publish(staged, recDir); err != nil {
		return failed(err)
	}
	if err := writeInferredRules(t, inferred, out); err != nil {
		return err
	}
	if title == "" && rep != nil {
		title = rep.Title
	}
	if title == "" {
		title = firstPageTitle(final)
	}
	if err := task.WriteCardIfMissing(taskDir, id, title); err != nil {
		return err
	}
	if err := writeCapture(t, final, errOut); err != nil {
		return err
	}
	if rep != nil {
		for _, w := range rep.Warnings {
			fmt.Fprintln(errOut, "pab import: warning:", w)
		}
	}
	fmt.Fprintf(out, "imported %s into %s\n", joinArgs(args), recDir)
	if rep != nil {
		fmt.Fprint(out, rep.Summary())
	}
	if total, err := warc.CountRecordingEntries(recDir); err == nil && merge {
		fmt.Fprintf(out, "merged with the existing recording: %d exchanges before, %d now\n", oldCount, total)
	}

	// 5. the self-check
	if o.noCheck {
		return nil
	}
	if err := selfCheck(ctx, out, repo, final, layers); err != nil {
		fmt.Fprintln(errOut, "pab import: warning: the self-check did not run:", err)
	}
	return checkGradingSources(t, final, out, errOut)
}

// checkGradingSources checks the task's grading.yaml, when it has one, against the imported
// recording (as pab grade --check does). The recording stays imported either way; a
// grading that does not fit it is an error, so the author sees it now.
func checkGradingSources(t *task.Task, bundleDir string, out, errOut io.Writer) error {
	gr, name, err := gradingOf(t, errOut)
	if err != nil {
		return fmt.Errorf("import: the recording was imported, but %w", err)
	}
	if gr == nil {
		return nil
	}
	b, err := warc.OpenBundle(bundleDir)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := reportSourceCheck(out, errOut, gr, name, b); err != nil {
		return fmt.Errorf("import: the recording was imported, but %w", err)
	}
	return nil
}

// auditedInput checks a bundle or published recording directory with the audit, printing
// every problem to errOut, and returns a bundle directory holding it (dir itself, or the
// recording unpacked into work).
func auditedInput(dir, work string, errOut io.Writer) (string, error) {
	var probs []warc.Problem
	bundle := dir
	switch {
	case isRecordingDir(dir):
		probs = warc.AuditRecording(dir, work)
		bundle = work
	case isRegularFile(filepath.Join(dir, warc.ManifestFile)):
		probs = warc.Audit(dir)
	default:
		return "", fmt.Errorf("import: %s is neither a bundle directory (manifest.json, archive/data.warc, ...) nor a published recording (manifest.json with data.warc.gz, or warc.tar.gz, ...)", dir)
	}
	for _, p := range probs {
		if p.Unresolved {
			fmt.Fprintln(errOut, "pab import: warning:", p)
		}
	}
	if probs = warc.Blocking(probs); len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintln(errOut, p)
		}
		return "", fmt.Errorf("import: %s fails the audit (%d problems, listed above); nothing was imported", dir, len(probs))
	}
	return bundle, nil
}

// firstPageTitle is the title of the bundle's first page that has one, or "".
func firstPageTitle(dir string) string {
	b, err := warc.OpenBundle(dir)
	if err != nil {
		return ""
	}
	defer b.Close()
	for _, p := range b.Pages {
		if p.Title != "" {
			return p.Title
		}
	}
	return ""
}

// Bounds of the part of each payload handed to rule inference: HTML pages are parsed
// (rules.InferOptions.MaxHTMLBytes), other payloads are only told apart by size and digest,
// which the samples carry whole, and sniffed for tracking pixels.
const (
	maxInferBody      = 2 << 20
	maxInferOtherBody = 4 << 10
)

// inferRules infers site rules from the bundle (rules.Infer), with the repository's sites/
// and the task's hand-written rule files as what is already known, writes them into work
// (nothing of the task is touched: writeInferredRules does that), and returns them with the
// rule layers of the self-check: generic rules only, generic + inferred, and everything in
// effect.
func inferRules(t *task.Task, bundleDir, work string) ([]*rules.InferredFile, []ruleLayer, error) {
	handDir := filepath.Join(work, "hand-rules")
	if err := copyHandRules(t.RulesDir(), handDir); err != nil {
		return nil, nil, err
	}
	base, err := rules.Load(t.Repo.SitesDir(), handDir)
	if err != nil {
		return nil, nil, err
	}
	samples, err := bundleSamples(bundleDir)
	if err != nil {
		return nil, nil, err
	}
	files := rules.Infer(samples, base, rules.InferOptions{})
	inferredDir := filepath.Join(work, "inferred-rules")
	if err := rules.WriteAutoFiles(inferredDir, files); err != nil {
		return nil, nil, err
	}
	return files, []ruleLayer{
		{name: "generic rules only"},
		{name: "+ inferred", dirs: []string{inferredDir}},
		{name: "+ hand-written", dirs: []string{t.Repo.SitesDir(), t.RulesDir()}},
	}, nil
}

// writeInferredRules writes the inferred rules as the task's rules/<site>.auto.yaml
// (rules.WriteAutoFiles: hand-written files are never touched) and says which on out.
func writeInferredRules(t *task.Task, files []*rules.InferredFile, out io.Writer) error {
	if len(files) > 0 || isDirPath(t.RulesDir()) {
		if err := rules.WriteAutoFiles(t.RulesDir(), files); err != nil {
			return err
		}
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Join(t.RulesDir(), rules.AutoFileName(f.Site)))
	}
	if len(names) > 0 {
		fmt.Fprintf(out, "inferred rules: %s\n", strings.Join(names, ", "))
	} else {
		fmt.Fprintln(out, "inferred rules: none")
	}
	return nil
}

// copyHandRules copies the hand-written rule files of a task's rules directory (every
// *.yaml but *.auto.yaml, regular files of at most rules.MaxFileSize bytes) into dst.
func copyHandRules(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	des, err := os.ReadDir(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".auto.yaml") || !de.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(src, name))
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(f, rules.MaxFileSize+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(src, name), err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// bundleSamples reads the bundle's exchanges as rule inference sees them, in recording
// order: each payload cut as maxInferBody and maxInferOtherBody say, unresolved revisits
// left out.
func bundleSamples(dir string) ([]rules.Sample, error) {
	b, err := warc.OpenBundle(dir)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var samples []rules.Sample
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Unresolved {
			continue
		}
		resp, err := b.Response(e)
		if err != nil {
			return nil, err
		}
		limit := int64(maxInferOtherBody)
		if e.Mime == "text/html" || e.Mime == "application/xhtml+xml" {
			limit = maxInferBody
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
		if err != nil {
			return nil, fmt.Errorf("read %s (entry %s): %w", filepath.Join(dir, warc.WARCFile), e.ID, err)
		}
		reqBody, err := b.RequestBody(e)
		if err != nil {
			return nil, err
		}
		ts, _ := time.Parse(time.RFC3339Nano, e.TS)
		samples = append(samples, rules.Sample{Method: e.Method, URL: e.URL, Status: e.Status,
			ContentType: resp.Header.Get("Content-Type"), Body: body, Digest: e.Digest, Size: e.Size,
			Time: ts, ReqBody: reqBody, ReqContentType: e.ReqType})
	}
	return samples, nil
}

// writeCapture puts the locale and time zone of the imported recording's manifest (bundle
// directory final) into task.yaml's capture section (docs/import.md): added when the card
// has none; a card whose capture says otherwise is left as it is, with one warning line on
// errOut (the manifest is what replay uses).
func writeCapture(t *task.Task, final string, errOut io.Writer) error {
	b, err := warc.OpenBundle(final)
	if err != nil {
		return err
	}
	locale, tz := b.Manifest.Locale, b.Manifest.Timezone
	b.Close()
	if locale == "" && tz == "" {
		return nil
	}
	changed, err := task.SetCapture(t.CardPath(), task.Capture{Locale: locale, Timezone: tz})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if changed != "" {
		fmt.Fprintf(errOut, "pab import: warning: %s\n", changed)
	}
	return nil
}
