package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/pab-dev/pab/internal/procgroup"
	"github.com/pab-dev/pab/internal/runarchive"
	"github.com/pab-dev/pab/task"
)

// Annotations and labels of the rendered objects that collect and status read.
const (
	// BatchLabel is the label holding the batch name on every rendered object and pod.
	BatchLabel = "pab.dev/batch"
	// TaskIDAnnotation holds a Job's task id (its label is the DNS-1123 form).
	TaskIDAnnotation = "pab.dev/task-id"
	// ResultsAnnotation says where a Job's runs go: "log" or "claim/<name>".
	ResultsAnnotation = "pab.dev/results"
	// maxList bounds what one kubectl get returns (64 MiB); maxLog one container log read.
	maxList = 64 << 20
	maxLog  = 10 << 20
)

// Kubectl runs kubectl, the client of pab k8s collect and status: it brings the user's
// kubeconfig, contexts and credential plugins (GKE's, EKS's) with it. Args go before every
// command (--context, --kubeconfig, --namespace).
type Kubectl struct {
	// Path of kubectl; default "kubectl" on $PATH.
	Path string
	// Args are global flags for every call.
	Args []string
	// Timeout bounds each call; default 2 minutes.
	Timeout time.Duration
}

// output runs kubectl with args and returns its stdout, at most limit bytes (more is an
// error); a failure's error holds the end of its stderr.
func (k Kubectl) output(ctx context.Context, limit int64, args ...string) ([]byte, error) {
	path := k.Path
	if path == "" {
		path = "kubectl"
	}
	timeout := k.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	all := append(append([]string{}, k.Args...), args...)
	c := exec.CommandContext(ctx, path, all...)
	var stdout bytes.Buffer
	var errBuf bytes.Buffer
	c.Stdout, c.Stderr = procgroup.NewCapWriter(&stdout, limit+1), procgroup.NewCapWriter(&errBuf, 8<<10)
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	if err != nil {
		msg := strings.TrimSpace(errBuf.String())
		if ctx.Err() != nil {
			msg = fmt.Sprintf("no answer in %s", timeout)
		}
		return nil, fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	if int64(stdout.Len()) > limit {
		return nil, fmt.Errorf("kubectl %s: more than %d bytes of output", strings.Join(args, " "), limit)
	}
	return stdout.Bytes(), nil
}

// Job is the state of one task's Job of a batch, as the Job controller reports it.
type Job struct {
	Name, Task string
	// Completions is the number of runs; Succeeded, Failed and Active count pods.
	Completions, Succeeded, Failed, Active int
	// CompletedIndexes and FailedIndexes are the controller's interval lists ("0-2,4").
	CompletedIndexes, FailedIndexes string
	// Conditions are the types of the conditions that hold (Complete, Failed, ...).
	Conditions []string
	// Results is "log" or "claim/<name>" (ResultsAnnotation).
	Results string
}

// Run is one finished run of a batch: its pod, phase and whether its directory exists
// under the output directory.
type Run struct {
	Task   string
	Repeat int // completion index + 1
	Pod    string
	Phase  corev1.PodPhase
	// Reason is the pod's reason and message when it Failed.
	Reason    string
	Collected bool
}

// Batch is what Status found: the batch's Jobs (by name) and its finished runs (by task
// and repeat), plus the count of runs still pending or running.
type Batch struct {
	Name    string
	Jobs    []Job
	Runs    []Run
	Waiting int
}

// ValidBatch checks a batch name (a DNS-1123 label of at most 20 characters).
func ValidBatch(b string) error {
	if b == "" || len(b) > 20 || len(validation.IsDNS1123Label(b)) > 0 {
		return fmt.Errorf("bad batch name %q: want 1 to 20 lower-case letters, digits and '-', starting and ending with a letter or digit", b)
	}
	return nil
}

// Status reads the batch's Jobs and pods through kubectl and marks the runs whose
// directory outDir/<task>/<repeat> holds a run.json as collected (outDir may be empty:
// nothing collected).
func Status(ctx context.Context, kc Kubectl, batch, outDir string) (Batch, error) {
	b := Batch{Name: batch}
	if err := ValidBatch(batch); err != nil {
		return b, err
	}
	sel := "-l=" + BatchLabel + "=" + batch
	data, err := kc.output(ctx, maxList, "get", "jobs", sel, "-o", "json")
	if err != nil {
		return b, err
	}
	var jobs batchv1.JobList
	if err := json.Unmarshal(data, &jobs); err != nil {
		return b, fmt.Errorf("kubectl get jobs: %v", err)
	}
	taskOf := map[string]string{}
	for _, j := range jobs.Items {
		id := j.Annotations[TaskIDAnnotation]
		if task.ValidID(id) != nil {
			return b, fmt.Errorf("job %s: annotation %s %q is not a task id", j.Name, TaskIDAnnotation, id)
		}
		taskOf[j.Name] = id
		js := Job{Name: j.Name, Task: id, Succeeded: int(j.Status.Succeeded), Failed: int(j.Status.Failed),
			Active: int(j.Status.Active), CompletedIndexes: j.Status.CompletedIndexes, Results: j.Annotations[ResultsAnnotation]}
		if j.Spec.Completions != nil {
			js.Completions = int(*j.Spec.Completions)
		}
		if j.Status.FailedIndexes != nil {
			js.FailedIndexes = *j.Status.FailedIndexes
		}
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				js.Conditions = append(js.Conditions, string(c.Type))
			}
		}
		b.Jobs = append(b.Jobs, js)
	}
	sort.Slice(b.Jobs, func(i, j int) bool { return b.Jobs[i].Name < b.Jobs[j].Name })
	if len(b.Jobs) == 0 {
		return b, fmt.Errorf("no Jobs with label %s=%s (wrong namespace or context?)", BatchLabel, batch)
	}
	data, err = kc.output(ctx, maxList, "get", "pods", sel, "-o", "json")
	if err != nil {
		return b, err
	}
	var pods corev1.PodList
	if err := json.Unmarshal(data, &pods); err != nil {
		return b, fmt.Errorf("kubectl get pods: %v", err)
	}
	type key struct {
		task string
		idx  int
	}
	best := map[key]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		owner := ""
		for _, o := range p.OwnerReferences {
			if o.Kind == "Job" {
				owner = o.Name
			}
		}
		id, ok := taskOf[owner]
		if !ok {
			continue
		}
		idx, err := strconv.Atoi(p.Annotations[RunIndexAnnotation])
		if err != nil || idx < 0 || idx >= MaxRepeat {
			continue
		}
		k := key{id, idx}
		if cur := best[k]; cur == nil || better(p, cur) {
			best[k] = p
		}
	}
	for k, p := range best {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			b.Waiting++
			continue
		}
		r := Run{Task: k.task, Repeat: k.idx + 1, Pod: p.Name, Phase: p.Status.Phase}
		if p.Status.Phase == corev1.PodFailed {
			r.Reason = strings.TrimSpace(p.Status.Reason + " " + p.Status.Message)
			if r.Reason == "" {
				r.Reason = failedContainers(p)
			}
		}
		if outDir != "" {
			if _, err := os.Stat(filepath.Join(outDir, k.task, strconv.Itoa(k.idx+1), "run.json")); err == nil {
				r.Collected = true
			}
		}
		b.Runs = append(b.Runs, r)
	}
	sort.Slice(b.Runs, func(i, j int) bool {
		if b.Runs[i].Task != b.Runs[j].Task {
			return b.Runs[i].Task < b.Runs[j].Task
		}
		return b.Runs[i].Repeat < b.Runs[j].Repeat
	})
	return b, nil
}

// better says whether pod p stands for its run rather than cur: a Succeeded pod first,
// then a finished one, then the newer.
func better(p, cur *corev1.Pod) bool {
	rank := func(q *corev1.Pod) int {
		switch q.Status.Phase {
		case corev1.PodSucceeded:
			return 2
		case corev1.PodFailed:
			return 1
		}
		return 0
	}
	if rank(p) != rank(cur) {
		return rank(p) > rank(cur)
	}
	return cur.CreationTimestamp.Before(&p.CreationTimestamp)
}

// failedContainers names the containers of p that ended with a non-zero exit code.
func failedContainers(p *corev1.Pod) string {
	var out []string
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			out = append(out, fmt.Sprintf("container %s exited %d (%s)", cs.Name, t.ExitCode, t.Reason))
		}
	}
	return strings.Join(out, "; ")
}

// Collected is what Collect did with one run.
type Collected struct {
	Run
	// Err is why the run could not be collected (nil: it was written now or before).
	Err error
	// Now is true when Collect wrote the run's directory in this call.
	Now bool
}

// Collect fetches every finished run of the batch that outDir does not hold yet from its
// collector's container log (`kubectl logs POD -c collect`, the API server's pods/log),
// checks the run archive (runarchive.Read: size and SHA-256, task and repeat of the pod)
// and unpacks it into outDir/<task>/<repeat>/, whole or not at all. Runs of a Job whose
// results go to a claim are reported with an error naming the claim. The Batch is
// Status's after the collection; the error is about the batch as a whole (kubectl
// failed, no such batch); each run's own failure is in its Collected.Err.
func Collect(ctx context.Context, kc Kubectl, batch, outDir string) (Batch, []Collected, error) {
	if outDir == "" {
		return Batch{}, nil, errors.New("no output directory")
	}
	b, err := Status(ctx, kc, batch, outDir)
	if err != nil {
		return b, nil, err
	}
	mode := map[string]string{}
	for _, j := range b.Jobs {
		mode[j.Task] = j.Results
	}
	var res []Collected
	for i, r := range b.Runs {
		c := Collected{Run: r}
		switch {
		case r.Collected:
		case mode[r.Task] != "log":
			c.Err = fmt.Errorf("the results of this Job go to %q, not to the collector's log: copy them off the claim (docs/deploy.md)", mode[r.Task])
		default:
			c.Err = collectRun(ctx, kc, r, outDir)
			if c.Err == nil {
				c.Now, c.Collected, b.Runs[i].Collected = true, true, true
			}
		}
		res = append(res, c)
	}
	return b, res, nil
}

func collectRun(ctx context.Context, kc Kubectl, r Run, outDir string) error {
	data, err := kc.output(ctx, maxLog, "logs", "pod/"+r.Pod, "-c", "collect", "--limit-bytes="+strconv.Itoa(maxLog))
	if err != nil {
		return err
	}
	a, err := runarchive.Read(bytes.NewReader(data), maxLog)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pod %s: no run archive in the collector's log (did the collector get to run? kubectl logs pod/%s -c collect)", r.Pod, r.Pod)
		}
		return fmt.Errorf("pod %s: %w", r.Pod, err)
	}
	if a.Task != r.Task || a.Repeat != r.Repeat {
		return fmt.Errorf("pod %s: its log holds the run %s/%d, want %s/%d", r.Pod, a.Task, a.Repeat, r.Task, r.Repeat)
	}
	files, err := runarchive.Unpack(a.Data)
	if err != nil {
		return fmt.Errorf("pod %s: %w", r.Pod, err)
	}
	dir := filepath.Join(outDir, r.Task)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return runarchive.WriteDir(filepath.Join(dir, strconv.Itoa(r.Repeat)), files)
}

// WriteStatus prints b as a table: per Job its completions, failed count, completed and
// failed indexes and conditions; then every failed run with its reason, and the runs
// finished but not collected.
func WriteStatus(w io.Writer, b Batch) {
	fmt.Fprintf(w, "batch %s: %d job(s)\n", b.Name, len(b.Jobs))
	fmt.Fprintf(w, "%-40s %-10s %-6s %-6s %-12s %-12s %s\n", "JOB", "COMPLETED", "FAILED", "ACTIVE", "COMPLETED-IX", "FAILED-IX", "CONDITIONS")
	for _, j := range b.Jobs {
		fmt.Fprintf(w, "%-40s %-10s %-6d %-6d %-12s %-12s %s\n", j.Name, fmt.Sprintf("%d/%d", j.Succeeded, j.Completions),
			j.Failed, j.Active, orDash(j.CompletedIndexes), orDash(j.FailedIndexes), orDash(strings.Join(j.Conditions, ",")))
	}
	notCollected := 0
	for _, r := range b.Runs {
		if r.Phase == corev1.PodFailed {
			fmt.Fprintf(w, "failed: %s/%d (index %d), pod %s: %s\n", r.Task, r.Repeat, r.Repeat-1, r.Pod, orDash(r.Reason))
		}
		if !r.Collected {
			notCollected++
		}
	}
	fmt.Fprintf(w, "runs: %d finished (%d not collected), %d pending or running\n", len(b.Runs), notCollected, b.Waiting)
	for _, r := range b.Runs {
		if !r.Collected {
			fmt.Fprintf(w, "not collected: %s/%d (pod %s, %s)\n", r.Task, r.Repeat, r.Pod, r.Phase)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// BatchObjects returns the names (kind/name) of the objects in the cluster labelled with
// the batch: Jobs, and the gateway's Deployments and Services. Render refuses such a
// batch name unless told to replace it, since applying a Job over one of the same name
// fails (a Job's pod template is immutable) or, when nothing changed, reruns nothing.
func BatchObjects(ctx context.Context, kc Kubectl, batch string) ([]string, error) {
	if err := ValidBatch(batch); err != nil {
		return nil, err
	}
	data, err := kc.output(ctx, maxList, "get", "jobs,deployments,services", "-l="+BatchLabel+"="+batch, "-o", "name")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}
