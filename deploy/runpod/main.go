// Command runpod runs one Kubernetes Pod with podman, the way a kubelet would run it, so
// that the pods pab's manifests describe (`pab k8s render`, or the Pods a real Job
// controller made from them) can be run on a machine with podman and no cluster. It is a
// test tool for deploy/pod-test.sh and deploy/k8s-test.sh, not a general kubelet:
//
//	runpod [--podman PATH] [--runtime PATH] [--volume-dir CLAIM=DIR]... [--index N]
//	       [--status-file F] [--logs DIR] [--timeout D] [--label K=V]... [--secrets F] [--keep] FILE
//
// FILE (JSON or YAML, "-" for stdin) is a Pod, or a Job whose pod number --index is made
// as the Job controller makes it. runpod creates a podman pod with no network (only lo,
// shared by its containers, as in a Kubernetes pod), then
//   - runs the init containers in order: a plain one to completion (a failure fails the
//     pod), a native sidecar (restartPolicy: Always) detached, waiting for its
//     startupProbe before the next one starts;
//   - starts the main containers and waits for all of them to end, or for the pod's
//     activeDeadlineSeconds (then they are killed and the pod fails);
//   - stops the sidecars in reverse order (SIGTERM, then SIGKILL after
//     terminationGracePeriodSeconds), so a collector started first stops last;
//   - removes the pod and its emptyDir directories (unless --keep).
//
// Each container gets its image (never pulled), command as entrypoint and args, the
// environment (values with $(VAR) references, downward-API fieldRefs, secretKeyRefs from
// the Secrets of --secrets, passed to podman in a 0600 --env-file, never on its command
// line), its volume mounts
// (an emptyDir is a directory of the pod's own, mode 0777; a persistentVolumeClaim the
// host directory --volume-dir names for it; subPath applied), user and group, fsGroup,
// read-only root, dropped capabilities and no-new-privileges. Exec probes run with
// `podman exec`. Resource limits are not applied (podman may not enforce them; see
// docs/deploy.md). Any other pod feature it cannot honour (other volume types, secret volumes,
// envFrom, host ports, httpGet probes, privileged containers) is refused, never ignored.
//
// It prints each step with its time since the pod was created on stderr, writes the
// container logs to --logs DIR/<container>.log, and writes {"status": <PodStatus>} to
// --status-file (phase, start time, the containers' terminated states), the patch a
// test sends to the API server's pods/status. Exit status: 0 when the pod Succeeded, 1
// when it Failed, 2 when runpod itself could not run it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// claimFlag collects --volume-dir CLAIM=DIR.
type claimFlag map[string]string

func (c claimFlag) String() string { return fmt.Sprint(map[string]string(c)) }

func (c claimFlag) Set(v string) error {
	k, d, ok := strings.Cut(v, "=")
	if !ok || k == "" || d == "" {
		return fmt.Errorf("%q: want CLAIM=DIR", v)
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return err
	}
	c[k] = abs
	return nil
}

func main() {
	claims := claimFlag{}
	fs := flag.NewFlagSet("runpod", flag.ContinueOnError)
	podman := fs.String("podman", "podman", "the podman binary")
	runtime := fs.String("runtime", os.Getenv("PAB_PODMAN_RUNTIME"), "podman's OCI runtime (--runtime); default $PAB_PODMAN_RUNTIME, else podman's own")
	fs.Var(claims, "volume-dir", "CLAIM=DIR: the host directory of a persistentVolumeClaim (repeatable)")
	index := fs.Int("index", 0, "for a Job: the completion index of the pod to run")
	statusFile := fs.String("status-file", "", `write {"status": PodStatus} here`)
	logs := fs.String("logs", "", "write each container's output to DIR/<container>.log")
	timeout := fs.Duration("timeout", 0, "end the pod after this long (default: its activeDeadlineSeconds, else 30m)")
	keep := fs.Bool("keep", false, "keep the podman pod and the emptyDir directories")
	secretsFile := fs.String("secrets", "", "a Secret or SecretList (JSON or YAML, as kubectl get secret -o json prints it): the Secrets secretKeyRefs name")
	var labels []string
	fs.Func("label", "KEY=VALUE: a label of the podman pod (repeatable), to find it again", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("%q: want KEY=VALUE", v)
		}
		labels = append(labels, v)
		return nil
	})
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "runpod: want one FILE (a Pod or a Job, JSON or YAML)")
		os.Exit(2)
	}
	p, err := readPod(fs.Arg(0), *index)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runpod:", err)
		os.Exit(2)
	}
	r := &runner{podman: []string{*podman}, pod: p, logs: *logs, keep: *keep, labels: labels, secrets: &secretStore{}}
	if *secretsFile != "" {
		if r.secrets.secrets, err = readSecrets(*secretsFile); err != nil {
			fmt.Fprintln(os.Stderr, "runpod:", err)
			os.Exit(2)
		}
	}
	if *runtime != "" {
		r.podman = append(r.podman, "--runtime", *runtime)
	}
	limit := *timeout
	if limit == 0 {
		limit = 30 * time.Minute
		if d := p.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
			limit = time.Duration(*d) * time.Second
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := r.run(ctx, claims, limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runpod:", err)
	}
	if *statusFile != "" && st.Phase != "" {
		if werr := writeStatus(*statusFile, st); werr != nil {
			fmt.Fprintln(os.Stderr, "runpod:", werr)
			os.Exit(2)
		}
	}
	switch {
	case err != nil:
		os.Exit(2)
	case st.Phase == corev1.PodSucceeded:
		os.Exit(0)
	default:
		os.Exit(1)
	}
}

// runner runs one pod.
type runner struct {
	podman  []string // podman and its global flags
	pod     *corev1.Pod
	logs    string
	keep    bool
	name    string // the podman pod's name
	created time.Time
	vols    map[string]string
	started []string // containers started, in order
	labels  []string // KEY=VALUE labels of the podman pod
	secrets *secretStore
}

// say prints one step with the time since the pod was created.
func (r *runner) say(format string, a ...any) {
	t := 0.0
	if !r.created.IsZero() {
		t = time.Since(r.created).Seconds()
	}
	fmt.Fprintf(os.Stderr, "runpod: +%6.2fs %s\n", t, fmt.Sprintf(format, a...))
}

// podmanOut runs podman with args and returns its trimmed stdout; an error carries its
// stderr.
func (r *runner) podmanOut(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, r.podman[0], append(append([]string{}, r.podman[1:]...), args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "..."
		}
		return "", fmt.Errorf("podman %s: %v: %s", args[0], err, msg)
	}
	return strings.TrimSpace(out.String()), nil
}

var nameRE = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// run runs the pod and returns its final status; an error means runpod could not run it
// (the status then still says what happened when a container had started).
func (r *runner) run(ctx context.Context, claims map[string]string, limit time.Duration) (corev1.PodStatus, error) {
	p := r.pod
	st := corev1.PodStatus{}
	if p.Spec.HostNetwork || p.Spec.HostPID || p.Spec.HostIPC {
		return st, errors.New("host namespaces are not supported")
	}
	if len(p.Spec.Containers) == 0 {
		return st, errors.New("the pod has no containers")
	}
	work, err := os.MkdirTemp("", "runpod-")
	if err != nil {
		return st, err
	}
	if r.vols, err = podVolumes(p, work, claims); err != nil {
		os.RemoveAll(work)
		return st, err
	}
	if r.secrets == nil {
		r.secrets = &secretStore{}
	}
	r.secrets.dir = filepath.Join(work, "secrets")
	if err := os.Mkdir(r.secrets.dir, 0o700); err != nil {
		os.RemoveAll(work)
		return st, err
	}
	// every container's arguments first: a pod runpod cannot honour fails before it starts
	r.name = nameRE.ReplaceAllString(p.Name, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	inits, mains, err := r.plan()
	if err != nil {
		os.RemoveAll(work)
		return st, err
	}
	initCs := make([]*corev1.Container, len(inits))
	for i, in := range inits {
		initCs[i] = in.c
	}
	if err := r.makeDirs(); err != nil {
		os.RemoveAll(work)
		return st, err
	}
	cleanup := func() {
		if r.logs != "" {
			r.saveLogs()
		}
		if r.keep {
			r.say("kept pod %s and %s", r.name, work)
			return
		}
		c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := r.podmanOut(c, "pod", "rm", "--force", r.name); err != nil {
			fmt.Fprintln(os.Stderr, "runpod:", err)
		}
		os.RemoveAll(work)
	}
	defer cleanup()

	grace := 30 * time.Second
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	hostname := p.Spec.Hostname
	if hostname == "" {
		hostname = p.Name
	}
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	r.created = time.Now()
	create := []string{"pod", "create", "--name", r.name, "--network", "none", "--hostname", hostname}
	for _, l := range r.labels {
		create = append(create, "--label", l)
	}
	if _, err := r.podmanOut(ctx, create...); err != nil {
		return st, err
	}
	st.StartTime = ptrTime(r.created)
	r.say("pod %s created (podman pod %s, network none)", p.Name, r.name)
	deadline := r.created.Add(limit)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	fail := func(reason, msg string) (corev1.PodStatus, error) {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, reason, msg
		r.say("pod failed: %s: %s", reason, msg)
		r.stopSidecars(initCs, grace)
		st.InitContainerStatuses, st.ContainerStatuses = r.statuses(p.Spec.InitContainers), r.statuses(p.Spec.Containers)
		return st, nil
	}
	if reason, msg := r.startInits(dctx, inits); reason != "" {
		return fail(reason, msg)
	}
	st.Phase = corev1.PodRunning
	failed, reason, msg := r.runMains(dctx, mains, limit)
	if reason != "" {
		return fail(reason, msg)
	}
	r.stopSidecars(initCs, grace)
	st.InitContainerStatuses, st.ContainerStatuses = r.statuses(p.Spec.InitContainers), r.statuses(p.Spec.Containers)
	if failed != "" {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "Error", failed
	} else {
		st.Phase = corev1.PodSucceeded
	}
	r.say("pod %s: %s", p.Name, st.Phase)
	return st, nil
}

// planned is a container of the pod with its podman run arguments.
type planned struct {
	c    *corev1.Container
	args []string
}

// plan turns every init container and container of the pod into podman run arguments, so
// that a pod runpod cannot honour fails before anything starts.
func (r *runner) plan() (inits, mains []planned, err error) {
	p := r.pod
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		a, err := runArgs(p, c, r.name, r.name+"-"+c.Name, r.vols, r.secrets)
		if err != nil {
			return nil, nil, err
		}
		if c.StartupProbe != nil && !sidecar(c) {
			return nil, nil, fmt.Errorf("init container %s: a startupProbe on a plain init container is not valid", c.Name)
		}
		inits = append(inits, planned{c, a})
	}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		a, err := runArgs(p, c, r.name, r.name+"-"+c.Name, r.vols, r.secrets)
		if err != nil {
			return nil, nil, err
		}
		mains = append(mains, planned{c, a})
	}
	return inits, mains, nil
}

// startInits runs the init containers in order, as the kubelet does: a sidecar
// (restartPolicy Always) is started and waited on through its startup probe, a plain one
// run to its end. A failure is returned as the pod's reason and message ("" when all
// started).
func (r *runner) startInits(dctx context.Context, inits []planned) (reason, msg string) {
	for _, in := range inits {
		name := r.name + "-" + in.c.Name
		t0 := time.Now()
		if _, err := r.podmanOut(dctx, append([]string{"run"}, in.args...)...); err != nil {
			return "ContainerCannotRun", err.Error()
		}
		r.started = append(r.started, name)
		if sidecar(in.c) {
			if in.c.StartupProbe != nil {
				if err := r.probe(dctx, name, in.c.StartupProbe); err != nil {
					return "StartupProbeFailed", fmt.Sprintf("sidecar %s: %v", in.c.Name, err)
				}
				r.say("sidecar %s started; startup probe passed after %.2fs", in.c.Name, time.Since(t0).Seconds())
			} else {
				r.say("sidecar %s started", in.c.Name)
			}
			continue
		}
		code, err := r.wait(dctx, name)
		if err != nil {
			return "DeadlineExceeded", fmt.Sprintf("init container %s: %v", in.c.Name, err)
		}
		r.say("init container %s exited %d after %.2fs", in.c.Name, code, time.Since(t0).Seconds())
		if code != 0 {
			return "InitContainerFailed", fmt.Sprintf("init container %s exited %d", in.c.Name, code)
		}
	}
	return "", ""
}

// runMains starts the pod's containers and waits for each to end. failed names the first
// that exited non-zero; a container that cannot start, or the deadline (every container
// is then killed), is returned as the pod's reason and message instead.
func (r *runner) runMains(dctx context.Context, mains []planned, limit time.Duration) (failed, reason, msg string) {
	var names []string
	t0 := time.Now()
	for _, m := range mains {
		name := r.name + "-" + m.c.Name
		if _, err := r.podmanOut(dctx, append([]string{"run"}, m.args...)...); err != nil {
			return "", "ContainerCannotRun", err.Error()
		}
		r.started = append(r.started, name)
		names = append(names, name)
		r.say("container %s started", m.c.Name)
	}
	for i, name := range names {
		code, err := r.wait(dctx, name)
		if err != nil {
			r.say("deadline of %s reached: killing the containers", limit)
			for _, n := range names {
				c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				r.podmanOut(c, "kill", n) //nolint:errcheck // it may have ended already
				cancel()
			}
			return "", "DeadlineExceeded", fmt.Sprintf("the pod ran longer than %s", limit)
		}
		r.say("container %s exited %d after %.2fs", mains[i].c.Name, code, time.Since(t0).Seconds())
		if code != 0 && failed == "" {
			failed = fmt.Sprintf("container %s exited %d", mains[i].c.Name, code)
		}
	}
	return failed, "", ""
}

// makeDirs makes each emptyDir directory (mode 0777, as the kubelet does) and each
// subPath directory a mount needs.
func (r *runner) makeDirs() error {
	p := r.pod
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			if err := mkdir777(r.vols[v.Name]); err != nil {
				return err
			}
		}
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			ms, err := containerMounts(&cs[i], r.vols)
			if err != nil {
				return err
			}
			for _, m := range ms {
				if _, err := os.Stat(m.host); errors.Is(err, os.ErrNotExist) {
					if err := mkdir777(m.host); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func mkdir777(d string) error {
	if err := os.MkdirAll(d, 0o777); err != nil {
		return err
	}
	return os.Chmod(d, 0o777)
}

// probe runs an exec probe in container name until it passes, it fails failureThreshold
// times in a row, the container ends, or ctx ends (Kubernetes probe semantics, with the
// API's defaults: period 10 s, timeout 1 s, threshold 3).
func (r *runner) probe(ctx context.Context, name string, pr *corev1.Probe) error {
	if pr.Exec == nil {
		return errors.New("only exec probes are supported (the pod has no network the host can reach)")
	}
	period := 10 * time.Second
	if pr.PeriodSeconds > 0 {
		period = time.Duration(pr.PeriodSeconds) * time.Second
	}
	timeout := time.Second
	if pr.TimeoutSeconds > 0 {
		timeout = time.Duration(pr.TimeoutSeconds) * time.Second
	}
	threshold := int32(3)
	if pr.FailureThreshold > 0 {
		threshold = pr.FailureThreshold
	}
	if pr.InitialDelaySeconds > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(pr.InitialDelaySeconds) * time.Second):
		}
	}
	var last error
	for n := int32(0); n < threshold; n++ {
		c, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
		_, err := r.podmanOut(c, append([]string{"exec", name}, pr.Exec.Command...)...)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if running, _ := r.podmanOut(ctx, "inspect", "--format", "{{.State.Running}}", name); running != "true" {
			return fmt.Errorf("the container ended before its probe passed (%v)", last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(period):
		}
	}
	return fmt.Errorf("probe failed %d times: %v", threshold, last)
}

// wait waits for container name to end and returns its exit code.
func (r *runner) wait(ctx context.Context, name string) (int, error) {
	out, err := r.podmanOut(ctx, "wait", name)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, err
	}
	code, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, fmt.Errorf("podman wait %s: %q", name, out)
	}
	return code, nil
}

// stopSidecars stops the started sidecars in reverse order of their start, each with
// SIGTERM and then SIGKILL after grace.
func (r *runner) stopSidecars(cs []*corev1.Container, grace time.Duration) {
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if !sidecar(c) {
			continue
		}
		name := r.name + "-" + c.Name
		if !r.wasStarted(name) {
			continue
		}
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), grace+30*time.Second)
		_, err := r.podmanOut(ctx, "stop", "--time", strconv.Itoa(int(grace/time.Second)), name)
		cancel()
		if err != nil {
			r.say("sidecar %s: %v", c.Name, err)
			continue
		}
		r.say("sidecar %s stopped after %.2fs", c.Name, time.Since(t0).Seconds())
	}
}

func (r *runner) wasStarted(name string) bool {
	for _, s := range r.started {
		if s == name {
			return true
		}
	}
	return false
}

// inspectState is what podman inspect tells of a container's end.
type inspectState struct {
	State struct {
		ExitCode   int       `json:"ExitCode"`
		Running    bool      `json:"Running"`
		StartedAt  time.Time `json:"StartedAt"`
		FinishedAt time.Time `json:"FinishedAt"`
		OOMKilled  bool      `json:"OOMKilled"`
	} `json:"State"`
	ImageName string `json:"ImageName"`
	Image     string `json:"Image"`
}

// statuses reads the state of each of cs that started.
func (r *runner) statuses(cs []corev1.Container) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range cs {
		name := r.name + "-" + c.Name
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
		if !r.wasStarted(name) {
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
			out = append(out, s)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		js, err := r.podmanOut(ctx, "inspect", "--type", "container", name)
		cancel()
		var is []inspectState
		if err != nil || json.Unmarshal([]byte(js), &is) != nil || len(is) != 1 {
			s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: -1, Reason: "Unknown"}
			out = append(out, s)
			continue
		}
		st := is[0].State
		s.ImageID = is[0].Image
		started := true
		s.Started = &started
		if st.Running {
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.StartedAt)}
		} else {
			reason := "Completed"
			if st.ExitCode != 0 {
				reason = "Error"
			}
			if st.OOMKilled {
				reason = "OOMKilled"
			}
			s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(st.ExitCode), Reason: reason,
				StartedAt: metav1.NewTime(st.StartedAt), FinishedAt: metav1.NewTime(st.FinishedAt)}
		}
		out = append(out, s)
	}
	return out
}

// saveLogs writes each started container's output to r.logs/<container>.log.
func (r *runner) saveLogs() {
	if err := os.MkdirAll(r.logs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "runpod:", err)
		return
	}
	for _, name := range r.started {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, r.podman[0], append(append([]string{}, r.podman[1:]...), "logs", name)...)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		cmd.Run() //nolint:errcheck // whatever it printed is the log
		cancel()
		short := strings.TrimPrefix(name, r.name+"-")
		if err := os.WriteFile(filepath.Join(r.logs, short+".log"), b.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "runpod:", err)
		}
	}
}

// writeStatus writes {"status": st} to file through a temporary file.
func writeStatus(file string, st corev1.PodStatus) error {
	b, err := json.MarshalIndent(map[string]any{"status": st}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(file, append(b, '\n'), 0o644)
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// readAllLimited reads r whole, failing when it holds more than limit bytes.
func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return b, nil
}
