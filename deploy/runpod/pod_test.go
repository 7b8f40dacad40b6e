package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/k8s"
	"github.com/pab-dev/pab/task"
	corev1 "k8s.io/api/core/v1"
)

// renderedJob writes the Job `pab k8s render` makes for books-sapiens-price to a file and
// returns its path.
func renderedJob(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := k8s.Render(k8s.Options{
		Repo:         &task.Repo{Root: root},
		Tasks:        []string{"books-sapiens-price"},
		AgentImage:   "localhost/pab/agent:1",
		AgentCommand: []string{"/bin/refagent", "--plans", "/plans"},
		ReplayImage:  "localhost/pab/replay:2",
		BrowserImage: "localhost/pab/browser:3",
		TaskImages:   map[string]string{"books-sapiens-price": "localhost/pab/task-books-sapiens-price:4"},
		Repeat:       3,
		Parallelism:  2,
		Batch:        "b1",
		ResultsClaim: "pab-results",
		Timeout:      5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasPrefix(f.Name, "job-") {
			p := filepath.Join(t.TempDir(), f.Name)
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatal("render wrote no job")
	return ""
}

func container(t *testing.T, p *corev1.Pod, name string) *corev1.Container {
	t.Helper()
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

// argAfter returns the values that follow each occurrence of flag in args.
func argAfter(args []string, flag string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			out = append(out, args[i+1])
		}
	}
	return out
}

// TestPodOfRenderedJob: the pod runpod makes of a rendered Job, and the podman arguments
// of each container, carry what the manifests say: the completion index the collector
// reads, user and group, read-only root, dropped capabilities, the mounts with the
// results subPath, and the command as a JSON entrypoint.
func TestPodOfRenderedJob(t *testing.T) {
	job := renderedJob(t)
	p, err := readPod(job, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "pab-b1-books-sapiens-price-2" && !strings.HasSuffix(p.Name, "-2") {
		t.Errorf("pod name %q", p.Name)
	}
	if p.Annotations[completionIndex] != "2" {
		t.Errorf("annotations %v", p.Annotations)
	}
	work := t.TempDir()
	vols, err := podVolumes(p, work, map[string]string{"pab-results": "/srv/results"})
	if err != nil {
		t.Fatal(err)
	}
	collect := container(t, p, "collect")
	a, err := runArgs(p, collect, "P", "P-collect", vols, nil)
	if err != nil {
		t.Fatal(err)
	}
	envs := argAfter(a, "--env")
	for _, want := range []string{"PAB_RUN_INDEX=2", "JOB_COMPLETION_INDEX=2", "PAB_TASK_ID=books-sapiens-price"} {
		if !slices.Contains(envs, want) {
			t.Errorf("collect env %v lacks %s", envs, want)
		}
	}
	if !slices.Contains(argAfter(a, "--mount"), "type=bind,src=/srv/results/b1,dst=/pab/results") {
		t.Errorf("collect mounts %v: want the claim's b1 subPath at /pab/results", argAfter(a, "--mount"))
	}
	if !slices.Contains(argAfter(a, "--mount"), "type=bind,src="+filepath.Join(work, "volumes", "out")+",dst=/pab/out,ro=true") {
		t.Errorf("collect mounts %v: want out read-only", argAfter(a, "--mount"))
	}
	if u := argAfter(a, "--user"); !slices.Equal(u, []string{"65532:65532"}) {
		t.Errorf("--user %v", u)
	}
	if g := argAfter(a, "--group-add"); !slices.Equal(g, []string{"65532"}) {
		t.Errorf("--group-add %v (fsGroup)", g)
	}
	if !slices.Contains(a, "--read-only") || !slices.Contains(a, "--read-only-tmpfs=false") {
		t.Errorf("collect: no read-only root in %v", a)
	}
	if !slices.Equal(argAfter(a, "--cap-drop"), []string{"all"}) || !slices.Contains(argAfter(a, "--security-opt"), "no-new-privileges") {
		t.Errorf("collect: capabilities and privileges %v", a)
	}
	if ep := argAfter(a, "--entrypoint"); len(ep) != 1 || !strings.HasPrefix(ep[0], `["/bin/pab-pod","collect"`) {
		t.Errorf("--entrypoint %v", ep)
	}
	if a[len(a)-1] != "localhost/pab/task-books-sapiens-price:4" {
		t.Errorf("the image is not last (no args): %v", a[len(a)-3:])
	}
	agent := container(t, p, "agent")
	a, err = runArgs(p, agent, "P", "P-agent", vols, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(a, "--read-only") {
		t.Errorf("the agent's root is writable in the manifest, not here: %v", a)
	}
	if !slices.Contains(argAfter(a, "--env"), "PAB_PROXY=http://127.0.0.1:8899") {
		t.Errorf("agent env %v", argAfter(a, "--env"))
	}
	if !sidecar(container(t, p, "replay")) || !sidecar(container(t, p, "browser")) || sidecar(container(t, p, "task")) {
		t.Error("sidecars: want replay and browser, not task")
	}
	if _, err := readPod(job, 3); err == nil || !strings.Contains(err.Error(), "0..2") {
		t.Errorf("index 3 of 3 completions: %v", err)
	}
}

// TestRunpodRefuses: what runpod cannot honour is refused with a message naming it,
// never ignored.
func TestRunpodRefuses(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "c", Image: "i"}},
		}}
	}
	cases := []struct {
		name, want string
		edit       func(p *corev1.Pod)
	}{
		{"hostPath", "only emptyDir and persistentVolumeClaim", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}},
		{"claim without dir", `claim "x" has no --volume-dir`, func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "r", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}})
		}},
		{"subPath escape", "leaves its volume", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/m", SubPath: "../../etc"}}
		}},
		{"config map env", "only value, fieldRef and secretKeyRef", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}}
		}},
		{"odd fieldRef", "not supported", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
		}},
		{"hostPort", "hostPort", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}},
		{"root under runAsNonRoot", "runAsNonRoot", func(p *corev1.Pod) {
			yes, zero := true, int64(0)
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &zero}
		}},
		{"privileged", "privileged", func(p *corev1.Pod) {
			yes := true
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.edit(p)
			vols, err := podVolumes(p, t.TempDir(), nil)
			if err == nil {
				_, err = runArgs(p, &p.Spec.Containers[0], "P", "P-c", vols, nil)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestExpand: $(VAR) references as Kubernetes expands them.
func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "x y"}
	for in, want := range map[string]string{
		"$(A)":        "1",
		"a$(A)b$(B)":  "a1bx y",
		"$$(A)":       "$(A)",
		"$(C)":        "$(C)",
		"$(A":         "$(A",
		"cost $5":     "cost $5",
		"end$":        "end$",
		"":            "",
		"$(A)$(A)$$$": "11$$",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReadPodKinds: a Pod file is read as it is; another kind is refused by name; a
// field runpod does not know is refused (a typo must not be ignored).
func TestReadPodKinds(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, err := readPod(write("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, annotations: {a: b}}\nspec: {containers: [{name: c, image: i}]}\n"), 0)
	if err != nil || p.Name != "p1" || p.Annotations["a"] != "b" {
		t.Fatalf("pod: %v %v", p, err)
	}
	if _, err := readPod(write("svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"), 0); err == nil || !strings.Contains(err.Error(), `kind "Service"`) {
		t.Errorf("service: %v", err)
	}
	if _, err := readPod(write("typo.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec: {containers: [{name: c, image: i, comand: [x]}]}\n"), 0); err == nil || !strings.Contains(err.Error(), "comand") {
		t.Errorf("typo: %v", err)
	}
	if _, err := readPod(write("big.yaml", strings.Repeat("#", maxSpec+1)), 0); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("big: %v", err)
	}
}

// TestRunpodSecretEnv: a secretKeyRef is resolved from --secrets and reaches podman in a
// 0600 env file, never on the command line; a missing Secret or key is refused by name.
func TestRunpodSecretEnv(t *testing.T) {
	p, err := readPod(renderedJob(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	agent := &p.Spec.Containers[0]
	agent.Env = append(agent.Env, corev1.EnvVar{Name: "MODEL_KEY", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "model"}, Key: "api-key"}}})
	dir := t.TempDir()
	sf := filepath.Join(dir, "secrets.json")
	os.WriteFile(sf, []byte(`{"kind":"SecretList","apiVersion":"v1","items":[{"kind":"Secret","apiVersion":"v1","metadata":{"name":"model"},"data":{"api-key":"c2stdGVzdC0xMjM="}}]}`), 0o644)
	secrets, err := readSecrets(sf)
	if err != nil {
		t.Fatal(err)
	}
	vols, err := podVolumes(p, t.TempDir(), map[string]string{"pab-results": "/srv/results"})
	if err != nil {
		t.Fatal(err)
	}
	sec := &secretStore{secrets: secrets, dir: t.TempDir()}
	a, err := runArgs(p, agent, "P", "P-agent", vols, sec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(a, " "), "sk-test-123") {
		t.Fatalf("the secret is on podman's command line: %v", a)
	}
	ef := argAfter(a, "--env-file")
	if len(ef) != 1 {
		t.Fatalf("--env-file %v", ef)
	}
	data, err := os.ReadFile(ef[0])
	fi, _ := os.Stat(ef[0])
	if err != nil || string(data) != "MODEL_KEY=sk-test-123\n" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("env file %q (%v), mode %v", data, err, fi.Mode())
	}
	agent.Env[len(agent.Env)-1].ValueFrom.SecretKeyRef.Key = "nope"
	if _, err := runArgs(p, agent, "P", "P-agent", vols, sec); err == nil || !strings.Contains(err.Error(), `no key "nope"`) {
		t.Errorf("missing key: %v", err)
	}
	agent.Env[len(agent.Env)-1].ValueFrom.SecretKeyRef.Name = "other"
	if _, err := runArgs(p, agent, "P", "P-agent", vols, sec); err == nil || !strings.Contains(err.Error(), `secret "other" not found`) {
		t.Errorf("missing secret: %v", err)
	}
}
