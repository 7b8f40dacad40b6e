package k8s

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/pab-dev/pab/task"
)

var demoTasks = []string{"books-sapiens-price", "archive-org-jobs", "lil-former-projects"}

func demoOptions(t *testing.T) Options {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[string]string{}
	for _, id := range demoTasks {
		imgs[id] = "registry.example.com/pab/task-" + id + ":0123abcd"
	}
	return Options{
		Repo:         &task.Repo{Root: root},
		Tasks:        demoTasks,
		AgentImage:   "registry.example.com/agents/ref:1.0",
		AgentCommand: []string{"/agent", "--plan", "x"},
		ReplayImage:  "registry.example.com/pab/replay:89ab",
		BrowserImage: "registry.example.com/pab/browser:cdef",
		TaskImages:   imgs,
		Repeat:       3,
		Parallelism:  2,
		Namespace:    "evals",
		AllowDNS:     true,
		Timeout:      5 * time.Minute,
	}
}

func TestK8sRenderDecodesStrictly(t *testing.T) {
	o := demoOptions(t)
	files, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1+len(demoTasks) {
		t.Fatalf("got %d files, want %d", len(files), 1+len(demoTasks))
	}
	if files[0].Name != "networkpolicy.yaml" {
		t.Fatalf("first file %s", files[0].Name)
	}
	var np networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(files[0].Data, &np); err != nil {
		t.Fatalf("networkpolicy.yaml: %v\n%s", err, files[0].Data)
	}
	if np.Kind != "NetworkPolicy" || np.APIVersion != "networking.k8s.io/v1" || np.Namespace != "evals" {
		t.Errorf("type/namespace: %+v", np.TypeMeta)
	}
	if got := np.Spec.PolicyTypes; len(got) != 2 || got[0] != networkingv1.PolicyTypeIngress || got[1] != networkingv1.PolicyTypeEgress {
		t.Errorf("policyTypes %v", got)
	}
	if len(np.Spec.Ingress) != 0 {
		t.Errorf("ingress rules %v, want none", np.Spec.Ingress)
	}
	if len(np.Spec.Egress) != 1 || len(np.Spec.Egress[0].To) != 1 || len(np.Spec.Egress[0].Ports) != 2 {
		t.Fatalf("egress %+v, want one DNS rule", np.Spec.Egress)
	}
	to := np.Spec.Egress[0].To[0]
	if to.IPBlock != nil || to.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" || to.PodSelector.MatchLabels["k8s-app"] != "kube-dns" {
		t.Errorf("DNS peer %+v", to)
	}
	for _, p := range np.Spec.Egress[0].Ports {
		if p.Port.IntValue() != 53 {
			t.Errorf("DNS port %v", p.Port)
		}
	}
	if np.Spec.PodSelector.MatchLabels["pab.dev/batch"] != "pab" {
		t.Errorf("pod selector %v", np.Spec.PodSelector)
	}

	for i, id := range demoTasks {
		f := files[i+1]
		if f.Name != "job-"+id+".yaml" {
			t.Errorf("file %d is %s", i+1, f.Name)
		}
		var job batchv1.Job
		if err := yaml.UnmarshalStrict(f.Data, &job); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		checkJob(t, o, id, &job, np.Spec.PodSelector.MatchLabels)
	}
	// the same with a results claim (the RWX or single-node RWO mode)
	o = demoOptions(t)
	o.ResultsClaim = "pab-results"
	if files, err = Render(o); err != nil {
		t.Fatal(err)
	}
	for i, id := range demoTasks {
		var job batchv1.Job
		if err := yaml.UnmarshalStrict(files[i+1].Data, &job); err != nil {
			t.Fatal(err)
		}
		checkJob(t, o, id, &job, np.Spec.PodSelector.MatchLabels)
	}
}

func checkJob(t *testing.T, o Options, id string, job *batchv1.Job, selector map[string]string) {
	t.Helper()
	s := job.Spec
	if job.Kind != "Job" || job.APIVersion != "batch/v1" || job.Name != "pab-"+id || job.Namespace != "evals" {
		t.Errorf("%s: meta %+v %s/%s", id, job.TypeMeta, job.Namespace, job.Name)
	}
	if *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 3 || *s.Parallelism != 2 || *s.BackoffLimitPerIndex != 0 {
		t.Errorf("%s: mode %v completions %d parallelism %d backoffPerIndex %d", id, *s.CompletionMode, *s.Completions, *s.Parallelism, *s.BackoffLimitPerIndex)
	}
	pod := s.Template.Spec
	for k, v := range selector {
		if s.Template.Labels[k] != v {
			t.Errorf("%s: pod label %s=%q, the NetworkPolicy selects %q", id, k, s.Template.Labels[k], v)
		}
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever || *pod.AutomountServiceAccountToken || *pod.EnableServiceLinks {
		t.Errorf("%s: restart %s, token %v, service links %v", id, pod.RestartPolicy, *pod.AutomountServiceAccountToken, *pod.EnableServiceLinks)
	}
	if sc := pod.SecurityContext; !*sc.RunAsNonRoot || *sc.RunAsUser == 0 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security %+v", id, sc)
	}
	if *pod.ActiveDeadlineSeconds != int64((5*time.Minute+15*time.Minute)/time.Second) {
		t.Errorf("%s: deadline %d", id, *pod.ActiveDeadlineSeconds)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, name := range []string{"tasks", "cache", "out", "log", "bin", "shm"} {
		if vols[name].EmptyDir == nil {
			t.Errorf("%s: volume %s is not an emptyDir", id, name)
		}
	}
	if o.ResultsClaim == "" {
		// no volume outside the pod: the collector writes the run to its log
		for _, v := range pod.Volumes {
			if v.EmptyDir == nil {
				t.Errorf("%s: volume %s is not an emptyDir (log mode needs none)", id, v.Name)
			}
		}
		if job.Annotations[ResultsAnnotation] != "log" {
			t.Errorf("%s: results annotation %q", id, job.Annotations[ResultsAnnotation])
		}
	} else if c := vols["results"].PersistentVolumeClaim; c == nil || c.ClaimName != o.ResultsClaim || job.Annotations[ResultsAnnotation] != "claim/"+o.ResultsClaim {
		t.Errorf("%s: results volume %+v, annotation %q", id, vols["results"], job.Annotations[ResultsAnnotation])
	}
	if vols["shm"].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("%s: /dev/shm not in memory", id)
	}

	names := []string{}
	for _, c := range pod.InitContainers {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "task,collect,replay,browser" {
		t.Fatalf("%s: init containers %v", id, names)
	}
	ic := pod.InitContainers
	if ic[0].RestartPolicy != nil {
		t.Errorf("%s: the task container must be a plain init container", id)
	}
	for _, c := range ic[1:] {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("%s: %s is not a native sidecar (restartPolicy Always)", id, c.Name)
		}
	}
	for _, c := range append(append([]corev1.Container{}, ic...), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s/%s: security context %+v", id, c.Name, sc)
		}
		if c.Name != "agent" && !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root file system writable", id, c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s/%s: resources %+v", id, c.Name, c.Resources)
		}
	}
	if ic[0].Image != o.TaskImages[id] || ic[1].Image != o.TaskImages[id] || ic[2].Image != o.ReplayImage || ic[3].Image != o.BrowserImage {
		t.Errorf("%s: images %s %s %s %s", id, ic[0].Image, ic[1].Image, ic[2].Image, ic[3].Image)
	}
	if got := strings.Join(ic[0].Command, " "); got != "/bin/pab-pod install-task /task/tasks/"+id+" /pab/repo/tasks/"+id+" --bin /pab/bin --prompt-file /pab/out/prompt.txt" {
		t.Errorf("%s: task command %s", id, got)
	}
	// the collector knows its completion index from the Job controller's annotation
	idx := envOf(ic[1].Env, "PAB_RUN_INDEX")
	if idx == nil || idx.ValueFrom == nil || idx.ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("%s: PAB_RUN_INDEX %+v", id, idx)
	}
	if o.ResultsClaim == "" {
		if got := strings.Join(ic[1].Command, " "); got != "/bin/pab-pod collect --out /pab/out --log /pab/log --emit-log" || mountOf(ic[1].VolumeMounts, "results") != nil {
			t.Errorf("%s: collect %s, mounts %+v", id, got, ic[1].VolumeMounts)
		}
	} else if m := mountOf(ic[1].VolumeMounts, "results"); m == nil || m.SubPath != job.Labels[BatchLabel] || m.MountPath != ResultsDir || !strings.HasSuffix(strings.Join(ic[1].Command, " "), "--results /pab/results") {
		t.Errorf("%s: results mount %+v", id, m)
	}
	if got := strings.Join(ic[2].Command, " "); got != "/bin/pab --repo /pab/repo replay "+id+" --listen 127.0.0.1:8899 --log /pab/log/replay.jsonl" {
		t.Errorf("%s: replay command %s", id, got)
	}
	if p := ic[2].StartupProbe; p == nil || p.Exec == nil || strings.Join(p.Exec.Command, " ") != "/bin/pab-pod probe --proxy 127.0.0.1:8899 http://rr.control/health" {
		t.Errorf("%s: replay startup probe %+v", id, p)
	}
	if !strings.Contains(strings.Join(ic[3].Command, " "), "browser --proxy 127.0.0.1:8899 --port 9222") {
		t.Errorf("%s: browser command %v", id, ic[3].Command)
	}
	if ic[3].StartupProbe == nil || ic[3].StartupProbe.Exec == nil {
		t.Errorf("%s: browser has no startup probe", id)
	}
	// the agent cannot write the replay log
	if len(pod.Containers) != 1 || pod.Containers[0].Name != "agent" {
		t.Fatalf("%s: containers %+v", id, pod.Containers)
	}
	a := pod.Containers[0]
	if mountOf(a.VolumeMounts, "log") != nil || mountOf(a.VolumeMounts, "results") != nil {
		t.Errorf("%s: the agent mounts the log or the results", id)
	}
	if m := mountOf(a.VolumeMounts, "cache"); m == nil || !m.ReadOnly {
		t.Errorf("%s: the agent's cache mount %+v", id, m)
	}
	if a.Image != o.AgentImage || strings.Join(a.Command, " ") != "/pab/bin/pab-pod agent --out /pab/out --timeout 5m0s -- /agent --plan x" {
		t.Errorf("%s: agent %s %v", id, a.Image, a.Command)
	}
	card, err := (&task.Task{Repo: o.Repo, ID: id, Dir: filepath.Join(o.Repo.TasksDir(), id)}).Card()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PAB_TASK_ID": id, "PAB_PROMPT": card.Prompt, "PAB_PROMPT_FILE": "/pab/out/prompt.txt",
		"PAB_ANSWER_FILE": "/pab/out/answer.txt", "PAB_PROXY": "http://127.0.0.1:8899",
		"PAB_CA_FILE": "/pab/cache/ca/ca.pem", "PAB_CDP_URL": "http://127.0.0.1:9222",
	}
	for k, v := range want {
		if e := envOf(a.Env, k); e == nil || e.Value != v {
			t.Errorf("%s: agent env %s = %+v, want %q", id, k, e, v)
		}
	}
	if e := envOf(ic[0].Env, "PAB_PROMPT"); e == nil || e.Value != card.Prompt {
		t.Errorf("%s: the task container's PAB_PROMPT %+v", id, e)
	}
}

func envOf(env []corev1.EnvVar, name string) *corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			return &env[i]
		}
	}
	return nil
}

func mountOf(ms []corev1.VolumeMount, name string) *corev1.VolumeMount {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}

func TestK8sRenderDeterministic(t *testing.T) {
	a, err := Render(demoOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := Render(demoOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if a[i].Name != b[i].Name || !bytes.Equal(a[i].Data, b[i].Data) {
				t.Fatalf("render %s differs between two runs", a[i].Name)
			}
		}
	}
	if bytes.Contains(a[1].Data, []byte("creationTimestamp")) || bytes.Contains(a[1].Data, []byte("status: {}")) {
		t.Errorf("empty fields left in:\n%s", a[1].Data)
	}
}

func TestK8sRenderVariants(t *testing.T) {
	o := demoOptions(t)
	o.AllowDNS, o.BrowserImage, o.AgentCommand, o.Tasks = false, "", nil, []string{"books-sapiens-price"}
	o.Repeat, o.Parallelism, o.Namespace = 2, 8, ""
	files, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(files[0].Data, &np); err != nil {
		t.Fatal(err)
	}
	// policyTypes naming Egress with no egress rule denies all egress
	if len(np.Spec.Egress) != 0 || len(np.Spec.Ingress) != 0 || len(np.Spec.PolicyTypes) != 2 || np.Spec.PolicyTypes[1] != networkingv1.PolicyTypeEgress {
		t.Errorf("without --allow-dns the policy must deny all:\n%s", files[0].Data)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(files[1].Data, &job); err != nil {
		t.Fatal(err)
	}
	if *job.Spec.Parallelism != 2 {
		t.Errorf("parallelism %d, want it capped at the completions (2)", *job.Spec.Parallelism)
	}
	if n := len(job.Spec.Template.Spec.InitContainers); n != 3 {
		t.Errorf("%d init containers without a browser, want 3", n)
	}
	a := job.Spec.Template.Spec.Containers[0]
	if a.Command != nil || envOf(a.Env, "PAB_CDP_URL") != nil {
		t.Errorf("agent without --agent-command or browser: command %v, env %v", a.Command, a.Env)
	}
	if job.Namespace != "" {
		t.Errorf("namespace %q", job.Namespace)
	}
}

func TestK8sRenderBadInput(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"unknown task", func(o *Options) { o.Tasks = []string{"no-such-task"} }, `unknown task: no task "no-such-task"`},
		{"traversal task id", func(o *Options) { o.Tasks = []string{"../etc"} }, "bad task id"},
		{"task twice", func(o *Options) { o.Tasks = []string{"archive-org-jobs", "archive-org-jobs"} }, "given twice"},
		{"bad agent image", func(o *Options) { o.AgentImage = "Registry.example.com/UPPER case" }, "--agent-image: bad image name"},
		{"bad replay image", func(o *Options) { o.ReplayImage = "replay:tag:tag" }, "--replay-image: bad image name"},
		{"no agent image", func(o *Options) { o.AgentImage = "" }, "--agent-image is required"},
		{"no replay image", func(o *Options) { o.ReplayImage = "" }, "deploy/build-images.sh --images-file"},
		{"bad task image", func(o *Options) { o.TaskImages["archive-org-jobs"] = "x@sha256:12" }, "task image of archive-org-jobs: bad image name"},
		{"missing task image", func(o *Options) { delete(o.TaskImages, "archive-org-jobs") }, "no task image for archive-org-jobs"},
		{"parallelism 0", func(o *Options) { o.Parallelism = 0 }, "--parallelism 0"},
		{"repeat 0", func(o *Options) { o.Repeat = 0 }, "--repeat 0"},
		{"repeat huge", func(o *Options) { o.Repeat = MaxRepeat + 1 }, "--repeat"},
		{"bad namespace", func(o *Options) { o.Namespace = "Evals_1" }, "bad --namespace"},
		{"bad batch", func(o *Options) { o.Batch = "a/b" }, "bad --batch"},
		{"bad claim", func(o *Options) { o.ResultsClaim = "../x" }, "bad --results-claim"},
		{"timeout", func(o *Options) { o.Timeout = time.Millisecond }, "--timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := demoOptions(t)
			c.edit(&o)
			_, err := Render(o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestK8sValidImage(t *testing.T) {
	good := []string{"pab-replay", "localhost/pab/replay:0123abcd", "registry.example.com:5000/a/b-c_d.e:v1.2",
		"ghcr.io/x/y@sha256:" + strings.Repeat("a", 64), "x:latest@sha256:" + strings.Repeat("0", 64)}
	for _, g := range good {
		if err := ValidImage(g); err != nil {
			t.Errorf("%s: %v", g, err)
		}
	}
	bad := []string{"", "UPPER/x", "a b", "x:", ":tag", "x/../y", "x@sha256:abc", "x:" + strings.Repeat("t", 129), "-x", "x//y", "x;rm -rf /"}
	for _, b := range bad {
		if err := ValidImage(b); err == nil {
			t.Errorf("%q accepted", b)
		}
	}
}

func TestK8sNameOf(t *testing.T) {
	cases := map[string]string{"books-sapiens-price": "books-sapiens-price"}
	for in, want := range cases {
		if got := nameOf(in); got != want {
			t.Errorf("nameOf(%s) = %s", in, got)
		}
	}
	a, b := nameOf("My_Task.v2"), nameOf("my-task-v2")
	if a == b || len(validation.IsDNS1123Label(a)) > 0 || !strings.HasPrefix(a, "my-task-v2-") {
		t.Errorf("nameOf: %s vs %s", a, b)
	}
	long := nameOf(strings.Repeat("a", 100))
	if len(long) > 40 || len(validation.IsDNS1123Label(long)) > 0 {
		t.Errorf("long name %s", long)
	}
}

func TestK8sReadImages(t *testing.T) {
	in := "# written by deploy/build-images.sh\nreplay localhost/pab/replay:aa sha256:" + strings.Repeat("1", 64) +
		"\n\ntask/books-sapiens-price localhost/pab/task-books-sapiens-price:bb\nbrowser localhost/pab/browser:cc\nagent localhost/pab/agent:dd\n"
	im, err := ReadImages(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if im.Replay != "localhost/pab/replay:aa" || im.Browser != "localhost/pab/browser:cc" || im.Task["books-sapiens-price"] != "localhost/pab/task-books-sapiens-price:bb" ||
		im.Agent != "localhost/pab/agent:dd" {
		t.Errorf("%+v", im)
	}
	for _, bad := range []string{"replay\n", "replay a b c d\n", "worker x:1\n", "task/../x img:1\n", "replay Bad:1\n", "replay a:1\nreplay b:1\n"} {
		if _, err := ReadImages(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
	if _, err := ReadImages(strings.NewReader(strings.Repeat("#", maxImagesFile+1))); err == nil {
		t.Error("a huge images file was accepted")
	}
}

func FuzzK8sReadImages(f *testing.F) {
	f.Add("replay localhost/pab/replay:aa\ntask/x r/t:1 sha256:00\n")
	f.Add("browser a\n# c\n")
	f.Fuzz(func(t *testing.T, s string) {
		im, err := ReadImages(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, ref := range append([]string{im.Replay, im.Browser}, values(im.Task)...) {
			if ref != "" && ValidImage(ref) != nil {
				t.Fatalf("accepted bad image %q", ref)
			}
		}
	})
}

func values(m map[string]string) []string {
	var v []string
	for _, x := range m {
		v = append(v, x)
	}
	return v
}

func TestK8sWriteFiles(t *testing.T) {
	dir := t.TempDir()
	files := []File{{Name: "a.yaml", Data: []byte("a: 1\n")}}
	if err := WriteFiles(filepath.Join(dir, "out", "sub"), files); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "out", "sub", "a.yaml")); err != nil || string(data) != "a: 1\n" {
		t.Fatalf("%q %v", data, err)
	}
	if err := WriteFiles(dir+"/out/../../x", files); err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Errorf("path traversal: %v", err)
	}
	if err := WriteFiles(dir, []File{{Name: "../b.yaml"}}); err == nil {
		t.Error("a file name with a directory was written")
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "l.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, []File{{Name: "l.yaml", Data: []byte("x")}}); err == nil {
		t.Error("wrote through a symlink")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left-over files: %v", entries)
	}
}

// TestK8sRenderSecretEnvAgentOnly: --secret-env becomes a secretKeyRef in the agent
// container's env and nowhere else in any manifest (not the task, collector, replay or
// browser containers, not the gateway); the gateway's own secret only in the gateway.
func TestK8sRenderSecretEnvAgentOnly(t *testing.T) {
	o := demoOptions(t)
	o.Tasks = []string{"books-sapiens-price"}
	o.SecretEnv = []SecretEnv{{Name: "ANTHROPIC_API_KEY", Secret: "model-key", Key: "api-key"}}
	o.Gateway = Gateway{Image: "ghcr.io/example/gateway:1.2", Port: 4000, SecretEnv: []SecretEnv{{Name: "PROVIDER_KEY", Secret: "provider", Key: "key"}}}
	o.TTL = 24 * time.Hour
	o.ImagePullSecrets = []string{"regcred"}
	files, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	for _, f := range files {
		n := bytes.Count(f.Data, []byte("secretKeyRef"))
		switch f.Name {
		case "job-books-sapiens-price.yaml":
			if n != 1 || !bytes.Contains(f.Data, []byte("name: model-key")) {
				t.Errorf("%s: %d secretKeyRefs", f.Name, n)
			}
			if err := yaml.UnmarshalStrict(f.Data, &job); err != nil {
				t.Fatal(err)
			}
		case "gateway.yaml":
			if n != 1 || bytes.Contains(f.Data, []byte("model-key")) {
				t.Errorf("%s: %d secretKeyRefs, or the agent's secret", f.Name, n)
			}
		default:
			if n != 0 {
				t.Errorf("%s: %d secretKeyRefs", f.Name, n)
			}
		}
	}
	pod := job.Spec.Template.Spec
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		e := envOf(c.Env, "ANTHROPIC_API_KEY")
		if c.Name == "agent" {
			if e == nil || e.Value != "" || e.ValueFrom.SecretKeyRef.Name != "model-key" || e.ValueFrom.SecretKeyRef.Key != "api-key" {
				t.Errorf("agent: %+v", e)
			}
			if g := envOf(c.Env, GatewayEnv); g == nil || g.Value != "http://pab-model-gateway:4000" {
				t.Errorf("agent's gateway URL %+v", g)
			}
		} else if e != nil || len(c.EnvFrom) > 0 {
			t.Errorf("container %s has the secret: %+v %+v", c.Name, e, c.EnvFrom)
		}
	}
	if *job.Spec.TTLSecondsAfterFinished != 86400 || len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("ttl %v, pull secrets %v", job.Spec.TTLSecondsAfterFinished, pod.ImagePullSecrets)
	}
}

// TestK8sRenderGateway: gateway.yaml holds the Deployment, Service and two policies: the
// run pods may reach the gateway's pods on its port and kube-dns, and only the run pods may
// reach the gateway.
func TestK8sRenderGateway(t *testing.T) {
	o := demoOptions(t)
	o.Tasks = []string{"books-sapiens-price"}
	o.Gateway = Gateway{Image: "ghcr.io/example/gateway:1.2", Port: 8080}
	files, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[1].Name != "gateway.yaml" {
		t.Fatalf("files %v", files)
	}
	docs := strings.Split(string(files[1].Data), "---\n")
	if len(docs) != 4 {
		t.Fatalf("%d documents in gateway.yaml", len(docs))
	}
	var dep appsv1.Deployment
	var svc corev1.Service
	var out, in networkingv1.NetworkPolicy
	for i, v := range []any{&dep, &svc, &out, &in} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), v); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
	}
	gw := dep.Spec.Template.Labels
	if svc.Spec.Selector["app.kubernetes.io/component"] != "model-gateway" || svc.Spec.Ports[0].Port != 8080 || gw["app.kubernetes.io/component"] != "model-gateway" {
		t.Errorf("service %+v, pod labels %v", svc.Spec, gw)
	}
	if out.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "run" || len(out.Spec.Egress) != 2 ||
		out.Spec.Egress[0].To[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "model-gateway" || out.Spec.Egress[0].Ports[0].Port.IntValue() != 8080 {
		t.Errorf("the run pods' egress policy: %+v", out.Spec)
	}
	if in.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "model-gateway" || in.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "run" {
		t.Errorf("the gateway's ingress policy: %+v", in.Spec)
	}
	// the default-deny policy does not select the gateway
	var np networkingv1.NetworkPolicy
	yaml.UnmarshalStrict(files[0].Data, &np)
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "run" {
		t.Errorf("default-deny selects %v", np.Spec.PodSelector.MatchLabels)
	}
}
