// Command pab-pod is the small static helper inside pab's container images (deploy/). It
// does the few things a pod needs that no image has a shell for (the replay and task images
// are FROM scratch):
//
//	pab-pod install-task SRC DST [--bin DIR] [--prompt-file F]
//	    copy the task directory SRC to DST (regular files and directories only; DST must
//	    not exist; it appears whole or not at all), copy pab-pod itself to DIR/pab-pod (for
//	    the agent wrapper), and write $PAB_PROMPT to F. Used by the task image's init
//	    container.
//	pab-pod collect --out DIR --log DIR (--results DIR | --emit-log)
//	    a sidecar that waits for SIGTERM (sent by the kubelet after the agent ended and the
//	    browser and replay sidecars stopped: sidecars stop in reverse order), then copies
//	    the run's files from the pod-local directories (--out: the agent's prompt.txt,
//	    answer.txt, agent.*; --log: replay.jsonl) to RESULTS/<task>/<k>/, k being
//	    $PAB_RUN_INDEX + 1, and writes run.json there (docs/run.md); with --emit-log it
//	    writes the same files as a run archive (internal/runarchive) to its stdout, the
//	    container log that `pab k8s collect` reads through the API server.
//	pab-pod agent --out DIR --timeout D -- CMD [ARG...]
//	    run the agent command in its own process group, copying its stdout and stderr to
//	    DIR/agent.stdout and DIR/agent.stderr (at most 10 MiB each; all of it still goes to
//	    the container's own output), kill the whole group after D, and write
//	    DIR/agent.json (exit_code, signal, timed_out, started, ended). Exits 0 once that is
//	    written: the run's outcome is data, not a failed pod.
//	pab-pod probe URL [--proxy HOST:PORT]
//	    exit 0 when a GET of URL (through the proxy when given) answers 200 within 2 s: the
//	    replay's and the browser's startup probe.
//
// Errors are one line on stderr and exit status 1 (2 for bad usage).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/procgroup"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/runarchive"
)

// Size bounds of what collect copies. The answer is copied up to one byte more than pab
// grades (1 MiB), so an answer too large stays detectably too large.
const (
	maxAnswer  = 1<<20 + 1
	maxOutput  = 10 << 20
	maxLog     = 4 << 30
	maxPrompt  = 1 << 20
	maxAgentJS = 64 << 10
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "install-task":
		err = installTask(os.Args[2:])
	case "collect":
		err = collect(os.Args[2:])
	case "agent":
		var code int
		code, err = agent(os.Args[2:])
		if err == nil {
			os.Exit(code)
		}
	case "probe":
		err = probe(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		var ue usageError
		fmt.Fprintf(os.Stderr, "pab-pod %s: %v\n", os.Args[1], err)
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: pab-pod install-task SRC DST [--bin DIR] [--prompt-file F] | collect --out DIR --log DIR (--results DIR | --emit-log) | agent --out DIR --timeout D -- CMD... | probe URL [--proxy ADDR]")
	os.Exit(2)
}

// parse parses flags that may come before or after the positional arguments.
func parse(fs *flag.FlagSet, args []string, npos int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != npos {
		return nil, usageError{fmt.Sprintf("want %d arguments, got %d", npos, len(pos))}
	}
	return pos, nil
}

func installTask(args []string) error {
	fs := flag.NewFlagSet("install-task", flag.ContinueOnError)
	bin := fs.String("bin", "", "copy pab-pod itself into this directory")
	promptFile := fs.String("prompt-file", "", "write $PAB_PROMPT to this file")
	pos, err := parse(fs, args, 2)
	if err != nil {
		return err
	}
	if err := copyTree(pos[0], pos[1]); err != nil {
		return err
	}
	if *bin != "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if err := copyFile(self, filepath.Join(*bin, "pab-pod"), 0o755, -1); err != nil {
			return err
		}
	}
	if *promptFile != "" {
		p := os.Getenv("PAB_PROMPT")
		if len(p) > maxPrompt {
			return fmt.Errorf("$PAB_PROMPT is larger than %d bytes", maxPrompt)
		}
		if err := writeAtomic(*promptFile, []byte(p), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the directory src to dst, which must not exist. Only regular files and
// directories are copied (a symlink, device or pipe is an error); modes keep their
// executable bits. The copy is made in dst.tmp-<pid> and renamed into place when complete.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", src)
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists already", dst)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dst, os.Getpid())
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	err = filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		out := filepath.Join(tmp, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			return os.MkdirAll(out, 0o755)
		case info.Mode().IsRegular():
			return copyFile(path, out, modeOf(info.Mode()), -1)
		default:
			return fmt.Errorf("%s: not a regular file or directory (%s)", path, info.Mode().Type())
		}
	})
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return nil
}

func modeOf(m os.FileMode) os.FileMode {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// copyFile copies at most limit bytes (all when limit < 0) of src to dst through a
// temporary file renamed into place.
func copyFile(src, dst string, mode os.FileMode, limit int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	var r io.Reader = in
	if limit >= 0 {
		r = io.LimitReader(in, limit)
	}
	return writeAtomicFrom(dst, r, mode)
}

// writeAtomic writes data to dst (making its directory) with atomicfile.
func writeAtomic(dst string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(dst, data, mode)
}

// writeAtomicFrom writes what r holds to dst (making its directory) with atomicfile.
func writeAtomicFrom(dst string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFrom(dst, mode, func(w io.Writer) error {
		_, err := io.Copy(w, r)
		return err
	})
}

var taskID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// runDir is RESULTS/<task>/<k> for $PAB_TASK_ID and k = $PAB_RUN_INDEX + 1.
func runDir(results string) (task string, repeat int, dir string, err error) {
	task = os.Getenv("PAB_TASK_ID")
	if !taskID.MatchString(task) {
		return "", 0, "", fmt.Errorf("$PAB_TASK_ID %q is not a task id", task)
	}
	idx, err := strconv.Atoi(os.Getenv("PAB_RUN_INDEX"))
	if err != nil || idx < 0 || idx > 1_000_000 {
		return "", 0, "", fmt.Errorf("$PAB_RUN_INDEX %q is not a completion index (0 to 1000000)", os.Getenv("PAB_RUN_INDEX"))
	}
	return task, idx + 1, filepath.Join(results, task, strconv.Itoa(idx+1)), nil
}

// agentResult is what `pab-pod agent` writes to agent.json: the run.json fields a pod
// knows (docs/run.md).
type agentResult struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal"`
	TimedOut bool   `json:"timed_out"`
	Started  string `json:"started"`
	Ended    string `json:"ended"`
}

func collect(args []string) error {
	fs := flag.NewFlagSet("collect", flag.ContinueOnError)
	out := fs.String("out", "", "the agent's pod-local run directory")
	logDir := fs.String("log", "", "the directory of replay.jsonl")
	results := fs.String("results", "", "the results volume")
	emit := fs.Bool("emit-log", false, "write the run as a run archive to stdout (the container log) instead of --results")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" || *logDir == "" || (*results == "") == !*emit {
		return usageError{"--out, --log and one of --results and --emit-log are required"}
	}
	task, repeat, dir, err := runDir(*results)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Fprintf(os.Stderr, "pab-pod collect: run %s/%d; waiting for the pod to end\n", task, repeat)
	<-sig
	if *emit {
		return emitRun(os.Stdout, *out, *logDir, task, repeat)
	}
	return copyRun(*out, *logDir, dir, task, repeat)
}

// maxEmitLog bounds the replay log put into a run archive: read whole into memory (the
// collector's limit is 256Mi in this mode), and a log larger than this does not compress
// to runarchive.MaxArchive anyway (replay logs compress about 10:1).
const maxEmitLog = 96 << 20

// emitRun writes the run of out and logDir as a run archive to w: the same files and
// run.json as copyRun. A run that does not fit is reported by a too-large line and an error.
func emitRun(w io.Writer, out, logDir, task string, repeat int) error {
	var files []runarchive.File
	var errs []error
	add := func(name, path string, limit int64) {
		data, err := readUpTo(path, limit)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			errs = append(errs, err)
			return
		}
		files = append(files, runarchive.File{Name: name, Data: data})
	}
	add("answer.txt", filepath.Join(out, "answer.txt"), maxAnswer)
	add("prompt.txt", filepath.Join(out, "prompt.txt"), maxPrompt)
	add("agent.stdout", filepath.Join(out, "agent.stdout"), maxOutput)
	add("agent.stderr", filepath.Join(out, "agent.stderr"), maxOutput)
	logPath := filepath.Join(logDir, "replay.jsonl")
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxEmitLog {
		reason := fmt.Sprintf("replay.jsonl is %d bytes, more than %d", fi.Size(), maxEmitLog)
		runarchive.EmitTooLarge(w, task, repeat, reason)
		return errors.New(reason)
	}
	if data, err := readUpTo(logPath, maxEmitLog); err == nil {
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			files = append(files, runarchive.File{Name: "replay.jsonl", Data: data[:i+1]})
		} else {
			files = append(files, runarchive.File{Name: "replay.jsonl", Data: nil})
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	run, err := runJSON(out, task, repeat)
	if err != nil {
		errs = append(errs, err)
	}
	files = append(files, runarchive.File{Name: "run.json", Data: run})
	data, err := runarchive.Build(files)
	if err != nil {
		runarchive.EmitTooLarge(w, task, repeat, err.Error())
		return err
	}
	if err := runarchive.Emit(w, task, repeat, data); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "pab-pod collect: wrote the run to the log (%d bytes compressed)\n", len(data))
	return nil
}

// readUpTo reads at most limit bytes of the regular file path.
func readUpTo(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// runJSON is the run.json of a run: format, task, repeat and, when out/agent.json exists
// (pab-pod agent wrote it), the agent's exit.
func runJSON(out, task string, repeat int) ([]byte, error) {
	run := map[string]any{"format": 1, "task": task, "repeat": repeat}
	var err error
	if data, rerr := readlimit.File(filepath.Join(out, "agent.json"), maxAgentJS); rerr == nil {
		var a agentResult
		if uerr := json.Unmarshal(data, &a); uerr != nil {
			err = fmt.Errorf("agent.json: %w", uerr)
		} else {
			run["exit_code"], run["signal"], run["timed_out"], run["started"], run["ended"] =
				a.ExitCode, a.Signal, a.TimedOut, a.Started, a.Ended
		}
	}
	data, _ := json.MarshalIndent(run, "", "  ")
	return append(data, '\n'), err
}

// copyRun copies the run files of out and logDir into dir and writes dir/run.json. Missing files are
// skipped (a missing answer is the no_answer status, not an error); the replay log is cut
// after its last complete line.
func copyRun(out, logDir, dir, task string, repeat int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	files := []struct {
		name  string
		limit int64
	}{{"answer.txt", maxAnswer}, {"prompt.txt", maxPrompt}, {"agent.stdout", maxOutput}, {"agent.stderr", maxOutput}}
	for _, f := range files {
		err := copyFile(filepath.Join(out, f.name), filepath.Join(dir, f.name), 0o644, f.limit)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := copyLog(filepath.Join(logDir, "replay.jsonl"), filepath.Join(dir, "replay.jsonl")); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	data, err := runJSON(out, task, repeat)
	if err != nil {
		errs = append(errs, err)
	}
	if err := writeAtomic(filepath.Join(dir, "run.json"), data, 0o644); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "pab-pod collect: copied the run to %s\n", dir)
	return nil
}

// copyLog copies the replay log up to and including its last newline (at most maxLog
// bytes), so a line being written when the pod was stopped is left out.
func copyLog(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	n := min(fi.Size(), maxLog)
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	// find the last newline within the first n bytes, reading backwards in blocks
	end := int64(0)
	buf := make([]byte, 64<<10)
	for off := n; off > 0 && end == 0; {
		start := max(off-int64(len(buf)), 0)
		b := buf[:off-start]
		if _, err := in.ReadAt(b, start); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			end = start + int64(i) + 1
		}
		off = start
	}
	return writeAtomicFrom(dst, io.NewSectionReader(in, 0, end), 0o644)
}

func agent(args []string) (int, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "directory for agent.stdout, agent.stderr and agent.json")
	timeout := fs.Duration("timeout", 0, "kill the agent's process group after this long (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return 0, usageError{err.Error()}
	}
	cmdArgs := fs.Args()
	if *out == "" || len(cmdArgs) == 0 {
		return 0, usageError{"want --out DIR [--timeout D] -- CMD [ARG...]"}
	}
	if *timeout < 0 {
		return 0, usageError{"--timeout must not be negative"}
	}
	stdout, err := os.Create(filepath.Join(*out, "agent.stdout"))
	if err != nil {
		return 0, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(*out, "agent.stderr"))
	if err != nil {
		return 0, err
	}
	defer stderr.Close()
	res := runAgent(cmdArgs, *timeout, io.MultiWriter(os.Stdout, procgroup.NewCapWriter(stdout, maxOutput)),
		io.MultiWriter(os.Stderr, procgroup.NewCapWriter(stderr, maxOutput)))
	data, _ := json.MarshalIndent(res, "", "  ")
	if err := writeAtomic(filepath.Join(*out, "agent.json"), append(data, '\n'), 0o644); err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "pab-pod agent: exit_code %d, signal %q, timed_out %v\n", res.ExitCode, res.Signal, res.TimedOut)
	return 0, nil
}

// runAgent runs the command in a process group of its own, kills the whole group after
// timeout (SIGTERM, SIGKILL five seconds later), and always kills what is left of the
// group once the command itself has exited.
func runAgent(args []string, timeout time.Duration, stdout, stderr io.Writer) agentResult {
	res := agentResult{Started: now()}
	c := exec.Command(args[0], args[1:]...)
	c.Stdout, c.Stderr = stdout, stderr
	procgroup.Set(c, false)
	// a grandchild holding the pipes open must not keep Wait from returning
	c.WaitDelay = 2 * time.Second
	if err := c.Start(); err != nil {
		fmt.Fprintf(stderr, "pab-pod agent: %v\n", err)
		res.ExitCode, res.Ended = 127, now()
		return res
	}
	pgid := c.Process.Pid
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(term)
	var limit <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		limit = t.C
	}
	var err error
	select {
	case err = <-done:
	case <-limit:
		res.TimedOut = true
		err = procgroup.Stop(pgid, done, 5*time.Second)
	case <-term:
		err = procgroup.Stop(pgid, done, 5*time.Second)
	}
	procgroup.Kill(pgid) //nolint:errcheck // children that outlive the agent
	res.Ended = now()
	res.ExitCode = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode, res.Signal = -1, procgroup.SignalName(ws.Signal())
		}
	} else if err != nil {
		res.ExitCode = -1
	}
	return res
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func probe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	proxy := fs.String("proxy", "", "HTTP proxy host:port")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	tr := &http.Transport{Proxy: nil}
	if *proxy != "" {
		pu, err := url.Parse("http://" + *proxy)
		if err != nil || pu.Host == "" {
			return usageError{fmt.Sprintf("--proxy %q is not host:port", *proxy)}
		}
		tr.Proxy = http.ProxyURL(pu)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pos[0], nil)
	if err != nil {
		return usageError{err.Error()}
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", pos[0], resp.Status)
	}
	return nil
}
