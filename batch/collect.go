package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// CollectConfig is a batch of run directories written elsewhere (a Kubernetes job) to grade
// and summarize.
type CollectConfig struct {
	Harness Harness
	// Dir holds <task>/<repeat>/ run directories (docs/run.md).
	Dir string
	// Jobs is how many runs are graded at once (at least 1).
	Jobs int
	// Progress and Live are as in Config.
	Progress io.Writer
	Live     bool
	// Label names the agent in the summary.
	Label string
}

// Collect grades every run directory in cfg.Dir exactly as Batch grades its own runs,
// keeping what the pod wrote to run.json (exit code, signal, time limit, times), and writes
// summary.json and index.html into cfg.Dir. Entries that are not task/repeat directories
// are skipped with a note on Progress. A run that cannot be graded gets status error; the
// others go on. It fails only when Dir holds no run directory at all.
func Collect(ctx context.Context, cfg CollectConfig) (*Summary, error) {
	if cfg.Jobs < 1 {
		cfg.Jobs = 1
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("run --collect: %w", err)
	}
	jobs, tasks, notes, err := scanRuns(dir)
	if err != nil {
		return nil, fmt.Errorf("run --collect: %w", err)
	}
	for _, n := range notes {
		fmt.Fprintln(cfg.Progress, "pab run --collect:", n)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("run --collect: %s holds no run directories (<task>/<repeat>/, see docs/run.md)", dir)
	}
	remaining := map[string]int{}
	repeat := 0
	for _, j := range jobs {
		remaining[j.task]++
		repeat = max(repeat, j.repeat)
	}
	b := &batch{cfg: Config{Harness: cfg.Harness, Out: dir}, tasks: map[string]*taskSlot{}, remaining: remaining}
	prog := newProgress(cfg.Progress, cfg.Live, len(jobs), 0)
	prog.start()
	infos := map[job]*Info{}
	b.pool(ctx, jobs, cfg.Jobs, prog, infos, b.collectOne)
	b.closeAll()
	prog.stop()
	sum := summarize(dir, cfg.Label, tasks, repeat, infos)
	if err := sum.Write(dir); err != nil {
		return sum, fmt.Errorf("run --collect: %w", err)
	}
	if ctx.Err() != nil {
		return sum, ErrInterrupted
	}
	return sum, nil
}

// scanRuns lists the run directories of dir in task order (by name), then repeat order.
func scanRuns(dir string) (jobs []job, tasks []string, notes []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() {
			continue // summary.json, index.html, anything else
		}
		if !validDirName(name) {
			notes = append(notes, fmt.Sprintf("skipped %s: not a task directory", name))
			continue
		}
		sub, err := os.ReadDir(filepath.Join(dir, name))
		if err != nil {
			notes = append(notes, fmt.Sprintf("skipped %s: %v", name, err))
			continue
		}
		var ks []int
		for _, s := range sub {
			k, err := strconv.Atoi(s.Name())
			if !s.IsDir() || err != nil || k < 1 || strconv.Itoa(k) != s.Name() {
				notes = append(notes, fmt.Sprintf("skipped %s/%s: not a run directory (a repeat number from 1)", name, s.Name()))
				continue
			}
			ks = append(ks, k)
		}
		if len(ks) == 0 {
			continue
		}
		sort.Ints(ks)
		tasks = append(tasks, name)
		for _, k := range ks {
			jobs = append(jobs, job{name, k})
		}
	}
	return jobs, tasks, notes, nil
}

// collectOne grades one run directory written elsewhere.
func (b *batch) collectOne(ctx context.Context, j job) *Info {
	defer b.release(j.task)
	dir := runDir(b.cfg.Out, j)
	in := &Info{Format: InfoFormat, Task: j.task, Repeat: j.repeat, AnswerBytes: -1}
	var problems []string
	if pod, err := readInfo(dir); err != nil {
		in.Notes = append(in.Notes, "the run.json found was not used: "+err.Error())
	} else if pod != nil {
		in.ExitCode, in.Signal, in.TimedOut = pod.ExitCode, pod.Signal, pod.TimedOut
		in.Started, in.Ended, in.DurationMS = pod.Started, pod.Ended, pod.DurationMS
		in.StdoutBytes, in.StderrBytes = pod.StdoutBytes, pod.StderrBytes
		if in.Signal != "" && in.ExitCode == nil {
			code := -1
			in.ExitCode = &code
		}
		if in.TimedOut {
			in.Error = "the agent ran past its time limit and was killed"
		}
		if in.DurationMS == 0 && in.Started != "" && in.Ended != "" {
			s, err1 := time.Parse(time.RFC3339Nano, in.Started)
			e, err2 := time.Parse(time.RFC3339Nano, in.Ended)
			if err1 == nil && err2 == nil && !e.Before(s) {
				in.DurationMS = e.Sub(s).Milliseconds()
			}
		}
	} else {
		in.Notes = append(in.Notes, "no run.json: the agent's exit is unknown")
	}
	t, err := b.task(ctx, j.task)
	if err != nil {
		in.Status, in.Finished, in.ErrorKind = StatusError, true, ErrorHarness
		in.Error = fmt.Sprintf("open task %s: %v", j.task, err)
		if werr := atomicfile.WriteJSON(filepath.Join(dir, FileInfo), in, 0o644); werr != nil {
			in.Notes = append(in.Notes, werr.Error())
		}
		return in
	}
	if fi, err := os.Stat(filepath.Join(dir, FileLog)); err == nil && !fi.Mode().IsRegular() {
		problems = append(problems, FileLog+" is not a regular file")
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		problems = append(problems, err.Error())
	}
	finishRun(ctx, t, dir, in, problems)
	return in
}
