// Package importer is pab's import pipeline: it turns WARC or WACZ files, a bundle
// directory or a published recording into a task's recording (tasks/ID/recording, the
// published layout of docs/bundle-format.md). Run audits the input, imports it, merges it
// with the recording the task has, packs the result beside it, audits it again, publishes
// it, writes task.yaml's card and capture, infers site rules, replays every recorded
// request once offline (the self-check) and checks the task's grading.yaml against the
// recording, all while holding the task's write lock
// (task.Repo.LockTask). FinishRecording builds the bundle of a pab record session and
// imports it the same way; Migrate is pab recording migrate's work on a task (pab audit's
// is the sub-package audit). See docs/import.md.
package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/pab-dev/pab/importer/audit"
	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/task"
)

// Options say what Run imports into which task, and where it reports.
type Options struct {
	// Repo is the task repository; TaskID the task (task.ValidID), whose recording is
	// Repo.TasksDir()/TaskID/recording.
	Repo   *task.Repo
	TaskID string
	// Inputs are WARC or WACZ files, or one bundle or published recording directory.
	Inputs []string
	// Replace drops the existing recording instead of merging with it; PreferNew merges but
	// lets the new copies of requests recorded again replace the existing ones. They
	// exclude each other.
	Replace, PreferNew bool
	// NoCheck skips the self-check and the check of the task's grading.yaml.
	NoCheck bool
	// CheckAll lets the self-check replay every recorded page and exchange; without it the
	// self-check sends at most SelfCheckPages pages and SelfCheckOthers other exchanges,
	// evenly spaced over the recording (docs/import.md "After the import").
	CheckAll bool
	// NoWait fails at once, instead of waiting, when another process holds the task's lock.
	NoWait bool
	// Title is the title of a new task.yaml ("": the WARC's or the first page's title).
	Title string
	// Locale (BCP 47) and Timezone (IANA), when set, go into the manifest and task.yaml's
	// capture.
	Locale, Timezone string
	// Command names the writer in the lock's messages and errors ("pab import").
	Command string
	// FlagNames say how errors name the options NoWait and Replace (field name to the
	// caller's name, e.g. "NoWait" to "--no-wait"); an option not in it is named by its
	// field name.
	FlagNames map[string]string
	// Signals, once the lock is held, cancel the import between records (what was begun
	// is removed); none: only ctx does.
	Signals []os.Signal
	// Out receives the report (what was imported, merged, inferred, the hit rates, the
	// grading check); ErrOut warnings and problems. Nil discards.
	Out, ErrOut io.Writer
}

// Result is what Run did.
type Result struct {
	// RecordingDir is the task's published recording directory.
	RecordingDir string
	// Merged says the import was merged with an existing recording of Before exchanges;
	// Total is the number of exchanges published.
	Merged        bool
	Before, Total int
	// Inferred are the paths of the rule files written (tasks/ID/rules/<site>.auto.yaml).
	Inferred []string
}

// run is one import in progress: its options, the task and its work directory.
type run struct {
	o               Options
	ctx             context.Context
	t               *task.Task
	taskDir, recDir string
	work            string
	out, errOut     io.Writer
	dirInput, merge bool
	oldCount        int
	rep             *recording.ImportReport
	res             Result
	incoming, final string
	staged          string
	packed          string // the staging directory the incoming bundle was packed into as it was written, or ""
	taskMade        bool   // makeTaskDir ran
	inferred        []*rules.InferredFile
	layers          []ruleLayer
	newTask         bool
	prog            *importProgress
}

// Run imports o.Inputs into tasks/o.TaskID/recording of o.Repo: audited, merged with the
// existing recording unless o.Replace, packed beside it, audited again, published, with
// inferred rules and a self-check. It holds the task's write lock throughout, so the
// recording it merges with is the one the previous writer left. Nothing of the task changes
// unless the whole import succeeds up to publishing. Errors name the input file or the
// Options field; a missing Repo, TaskID or Inputs, or Replace with PreferNew, is an error
// before anything is read.
func Run(ctx context.Context, o Options) (Result, error) {
	switch {
	case o.Repo == nil:
		return Result{}, errors.New("importer: Options.Repo is nil")
	case o.TaskID == "":
		return Result{}, errors.New("importer: Options.TaskID is empty")
	case len(o.Inputs) == 0:
		return Result{}, errors.New("importer: Options.Inputs is empty")
	case o.Replace && o.PreferNew:
		return Result{}, errors.New("importer: Options.Replace and Options.PreferNew exclude each other")
	}
	if err := task.ValidID(o.TaskID); err != nil {
		return Result{}, err
	}
	r := &run{o: o, out: orDiscard(o.Out), errOut: orDiscard(o.ErrOut)}
	var err error
	if r.taskDir, err = o.Repo.TaskDir(o.TaskID); err != nil { // never writes through a link out
		return Result{}, fmt.Errorf("import: %w", err)
	}
	r.recDir = filepath.Join(r.taskDir, "recording")
	r.res.RecordingDir = r.recDir
	r.t = &task.Task{Repo: o.Repo, ID: o.TaskID, Dir: r.taskDir}
	if err := r.checkInputs(); err != nil {
		return Result{}, err
	}
	unlock, err := o.Repo.LockTask(r.taskDir, o.Command, o.FlagNames["NoWait"], o.NoWait, r.errOut)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	err = r.locked(ctx)
	return r.res, err
}

// name is how errors name the option field: o.FlagNames[field], else field.
func (r *run) name(field string) string {
	if n, ok := r.o.FlagNames[field]; ok {
		return n
	}
	return field
}

// orDiscard is w, or io.Discard when w is nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// checkInputs checks that the inputs exist and are regular files or one directory.
func (r *run) checkInputs() error {
	for _, p := range r.o.Inputs {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		switch {
		case st.IsDir():
			r.dirInput = true
		case !st.Mode().IsRegular():
			return fmt.Errorf("import: %s is not a regular file", p)
		}
	}
	if r.dirInput && len(r.o.Inputs) > 1 {
		return fmt.Errorf("import: give one bundle or recording directory, or WARC files")
	}
	return nil
}

// locked is the import once the task's lock is held: from here on the task is read as the
// last writer left it.
func (r *run) locked(ctx context.Context) error {
	if err := r.o.Repo.CheckTaskDir(r.taskDir); err != nil { // as the lock holder found it
		return fmt.Errorf("import: task %s: %w", r.o.TaskID, err)
	}
	if f, err := recording.RecordingFormatOf(r.recDir); err != nil {
		return fmt.Errorf("import: existing recording: %w", err)
	} else if f != 0 && f != recording.RecordingFormat && !r.o.Replace {
		return fmt.Errorf("import: %s holds a format %d recording; run pab recording migrate %s first, or pass %s to drop it", r.recDir, f, r.o.TaskID, r.name("Replace"))
	}
	old, err := recording.RecordingFiles(r.recDir)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	r.merge = len(old) > 0 && !r.o.Replace
	if len(r.o.Signals) > 0 {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, r.o.Signals...)
		defer stop()
	}
	r.ctx = ctx
	r.prog = newProgress(r.errOut) // the import's time counts from here, not while it waited
	if r.work, err = r.o.Repo.WorkDir(r.taskDir, "import-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.work)
	defer func() { // a pack staged while writing that no step took over
		if r.packed != "" {
			os.RemoveAll(r.packed)
		}
	}()
	if err := r.readIncoming(); err != nil {
		return err
	}
	if err := r.mergeOld(); err != nil {
		return err
	}
	if err := r.stage(); err != nil {
		return err
	}
	if err := r.publish(); err != nil {
		return err
	}
	return r.check()
}

// readIncoming makes the incoming recording a bundle directory: a bundle or recording
// input audited, WARC files imported.
func (r *run) readIncoming() error {
	var err error
	r.incoming = filepath.Join(r.work, "in")
	if r.dirInput {
		r.incoming, err = auditedInput(r.o.Inputs[0], filepath.Join(r.work, "in"), r.errOut)
		return err
	}
	inputs, locale, fixWarnings, err := r.harInputs() // HAR files become WARC files (har.go)
	if err != nil {
		return err
	}
	if !r.merge {
		// the incoming bundle is the final one: packed beside the recording as it is
		// written, its members compressed on the other cores (recording.ImportOptions.PackDir)
		if err := r.makeTaskDir(); err != nil {
			return err
		}
		if r.packed, err = recording.NewStagingDir(r.recDir); err != nil {
			return r.failed(fmt.Errorf("import: %w", err))
		}
	}
	r.rep, err = recording.ImportWARCs(inputs, r.incoming, recording.ImportOptions{TaskID: r.o.TaskID, Context: r.ctx, Locale: locale, Timezone: r.o.Timezone,
		Progress: r.prog.report, PackDir: r.packed})
	r.prog.end()
	fixWarnings(r.rep)
	if err != nil && r.packed != "" {
		os.RemoveAll(r.packed)
		r.packed = ""
		return r.failed(err)
	}
	return err
}

// makeTaskDir makes the task directory if it does not exist yet, remembering whether it
// did (a failed import then removes it: failed). Only its first call does anything.
func (r *run) makeTaskDir() error {
	if r.taskMade {
		return nil
	}
	r.taskMade = true
	_, statErr := os.Stat(r.taskDir)
	r.newTask = os.IsNotExist(statErr)
	return os.MkdirAll(r.taskDir, 0o755)
}

// mergeOld merges the incoming bundle with the existing recording (or normalizes a
// directory input alone) into the final bundle.
func (r *run) mergeOld() error {
	r.final = r.incoming
	if !r.merge && !r.dirInput {
		return nil
	}
	what, size := "writing the recording", progress.Size(r.incoming)
	if r.merge {
		what, size = "merging with the existing recording", size+progress.Size(r.recDir)
	}
	r.prog.begin(what, progress.Totals{Bytes: size})
	defer r.prog.end()
	oldDir := ""
	if r.merge {
		oldDir = filepath.Join(r.work, "old")
		if err := recording.Unpack(r.recDir, oldDir); err != nil {
			return fmt.Errorf("import: existing recording: %w (pass %s to drop it, or run pab recording migrate)", err, r.name("Replace"))
		}
		var err error
		if r.oldCount, err = recording.CountRecordingEntries(r.recDir); err != nil {
			return err
		}
	}
	r.final = filepath.Join(r.work, "merged")
	if err := recording.Merge(oldDir, r.incoming, r.final, recording.MergeOptions{PreferNew: r.o.PreferNew, TaskID: r.o.TaskID, Context: r.ctx,
		Locale: r.o.Locale, Timezone: r.o.Timezone}); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

// failed removes a task directory this import created, and returns err.
func (r *run) failed(err error) error {
	if r.newTask {
		os.RemoveAll(r.taskDir)
	}
	return err
}

// stage packs the final bundle beside the recording and audits it there, and infers the
// rules. Nothing of the task changes before all of it has passed.
func (r *run) stage() error {
	if err := r.makeTaskDir(); err != nil {
		return err
	}
	defer r.prog.end()
	var staged string
	if r.packed != "" { // packed as it was written
		staged, r.packed = r.packed, ""
		if err := recording.FinishTeePack(r.final, staged); err != nil {
			os.RemoveAll(staged)
			return r.failed(err)
		}
	} else {
		m := r.prog.begin("packing the recording", progress.Totals{Bytes: progress.Size(filepath.Join(r.final, recording.WARCFile)), Unit: "entries"})
		var err error
		if staged, err = recording.PackStagedContext(progress.NewContext(r.ctx, m), r.final, r.recDir, recording.PartSize); err != nil {
			return r.failed(r.interrupted("packing", err))
		}
	}
	// The rules are inferred from the final bundle while the packed recording is audited
	// (the two read different files and write to different folders of r.work); both must
	// succeed, and the audit's problems are reported first.
	type inferred struct {
		files  []*rules.InferredFile
		layers []ruleLayer
		err    error
	}
	inferDone := make(chan inferred, 1)
	go func() {
		files, layers, err := inferRules(r.ctx, r.t, r.final, r.work)
		inferDone <- inferred{files, layers, err}
	}()
	m := r.prog.begin("auditing the packed recording", progress.Totals{Bytes: archiveSize(staged), Unit: "members"})
	// An unresolved revisit was already a warning of the import; it does not stop it.
	probs, err := recording.AuditRecordingContext(progress.NewContext(r.ctx, m), staged, filepath.Join(r.work, "audit"))
	if err != nil {
		<-inferDone
		os.RemoveAll(staged)
		return r.failed(r.interrupted("the audit", err))
	}
	if probs := recording.Blocking(probs); len(probs) > 0 {
		<-inferDone
		os.RemoveAll(staged)
		for _, p := range probs {
			fmt.Fprintln(r.errOut, strings.ReplaceAll(p.String(), staged, r.recDir+" (new)"))
		}
		return r.failed(r.auditFailed(len(probs)))
	}
	r.prog.begin("inferring site rules", progress.Totals{})
	inf := <-inferDone
	if inf.err != nil {
		os.RemoveAll(staged)
		return r.failed(r.interrupted("inferring the rules", inf.err))
	}
	r.inferred, r.layers = inf.files, inf.layers
	// the audit's not_found check (pab audit): every key a host of the recording or a site
	// name of the rules the task will replay with (sites/, its rules/, the rules inferred now)
	if probs := audit.NotFoundKeys(r.final, filepath.Join(r.recDir, recording.RecordingManifestFile)+" (new)",
		[]string{r.o.Repo.SitesDir(), r.t.RulesDir(), filepath.Join(r.work, "inferred-rules")}); len(probs) > 0 {
		os.RemoveAll(staged)
		for _, p := range probs {
			fmt.Fprintln(r.errOut, p)
		}
		return r.failed(r.auditFailed(len(probs)))
	}
	r.staged = staged
	return nil
}

// archiveSize is the size in bytes of the gzip parts of the format 3 recording in dir (what
// the audit's meter counts), 0 when they cannot be listed.
func archiveSize(dir string) int64 {
	files, err := recording.RecordingFiles(dir)
	if err != nil || len(files) < 4 {
		return 0
	}
	var n int64
	for _, f := range files[3:] {
		n += progress.Size(f)
	}
	return n
}

// interrupted is err of step (packing, the audit), saying so when the import's context
// ended it (Ctrl-C): nothing of the task changed.
func (r *run) interrupted(step string, err error) error {
	if r.ctx.Err() != nil {
		return fmt.Errorf("import: interrupted during %s (%w); nothing was imported, %s is as it was", step, err, r.recDir)
	}
	return err
}

// auditFailed is the error of a new recording with n audit problems.
func (r *run) auditFailed(n int) error {
	return fmt.Errorf("import: the new recording fails the audit (%d problems, listed above); nothing was imported, %s is as it was", n, r.recDir)
}

// publish renames the staged recording into place, writes the inferred rules, the card and
// its capture, and reports what was imported.
func (r *run) publish() error {
	if err := recording.Publish(r.staged, r.recDir); err != nil {
		return r.failed(err)
	}
	names, err := writeInferredRules(r.t, r.inferred, r.out)
	if err != nil {
		return err
	}
	r.res.Inferred = names
	title := r.o.Title
	if title == "" && r.rep != nil {
		title = r.rep.Title
	}
	if title == "" {
		title = firstPageTitle(r.final)
	}
	if err := task.WriteCardIfMissing(r.taskDir, r.o.TaskID, title); err != nil {
		return err
	}
	if err := writeCapture(r.t, r.final, r.errOut); err != nil {
		return err
	}
	if r.rep != nil {
		for _, w := range r.rep.Warnings {
			fmt.Fprintln(r.errOut, "pab import: warning:", w)
		}
	}
	fmt.Fprintf(r.out, "imported %s into %s\n", strings.Join(r.o.Inputs, " "), r.recDir)
	if r.rep != nil {
		fmt.Fprint(r.out, r.rep.Summary())
	}
	total, err := recording.CountRecordingEntries(r.recDir)
	if err == nil {
		r.res.Total = total
	}
	if err == nil && r.merge {
		r.res.Merged, r.res.Before = true, r.oldCount
		fmt.Fprintf(r.out, "merged with the existing recording: %s before, %d now\n", words.Count(r.oldCount, "exchange"), total)
	}
	return nil
}

// check runs the self-check and checks the task's grading.yaml against the recording,
// unless NoCheck. A grading that does not fit the recording is an error (the recording
// stays imported).
func (r *run) check() error {
	if r.o.NoCheck {
		return nil
	}
	if err := selfCheck(r.ctx, r.out, r.errOut, r.o.Repo, r.final, r.layers, r.o.CheckAll); err != nil {
		if r.ctx.Err() != nil { // Ctrl-C: the recording is published, the check is not done
			return fmt.Errorf("import: interrupted during the self-check (%w); the recording is published in %s, run pab replay %s --check to check it", r.ctx.Err(), r.recDir, r.o.TaskID)
		}
		fmt.Fprintln(r.errOut, "pab import: warning: the self-check did not run:", err)
	}
	return checkGradingSources(r.t, r.final, r.out, r.errOut)
}

// auditedInput checks a bundle or published recording directory with the audit, printing
// every problem to errOut, and returns a bundle directory holding it (dir itself, or the
// recording unpacked into work).
func auditedInput(dir, work string, errOut io.Writer) (string, error) {
	var probs []recording.Problem
	bundle := dir
	switch {
	case audit.IsRecordingDir(dir):
		probs = recording.AuditRecording(dir, work)
		bundle = work
	case audit.IsBundleDir(dir):
		probs = recording.Audit(dir)
	default:
		return "", fmt.Errorf("import: %s is neither a bundle directory (manifest.json, archive/data.warc, ...) nor a published recording (manifest.json with data.warc.gz, or warc.tar.gz, ...)", dir)
	}
	for _, p := range probs {
		if p.Unresolved || p.Kept {
			fmt.Fprintln(errOut, "pab import: warning:", p)
		}
	}
	if probs = recording.Blocking(probs); len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintln(errOut, p)
		}
		return "", fmt.Errorf("import: %s fails the audit (%d problems, listed above); nothing was imported", dir, len(probs))
	}
	return bundle, nil
}

// firstPageTitle is the title of the bundle's first page that has one, or "" (also when
// its pages cannot be read). It reads pages.jsonl up to that page.
func firstPageTitle(dir string) string {
	title := ""
	errFound := errors.New("found")
	_ = recording.EachBundlePage(dir, func(p *recording.Page) error {
		if p.Title != "" {
			title = p.Title
			return errFound
		}
		return nil
	})
	return title
}

// writeCapture puts the locale and time zone of the imported recording's manifest (bundle
// directory final) into task.yaml's capture section (docs/import.md): added when the card
// has none; a card whose capture says otherwise is left as it is, with one warning line on
// errOut (the manifest is what replay uses).
func writeCapture(t *task.Task, final string, errOut io.Writer) error {
	m, err := recording.ReadBundleManifest(final)
	if err != nil {
		return err
	}
	locale, tz := m.Locale, m.Timezone
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
