package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/readlimit"
)

// maxSpec bounds the Pod or Job file read.
const maxSpec = 4 << 20

// completionIndex is the annotation (and label) the Job controller sets on each pod of an
// Indexed Job, and JOB_COMPLETION_INDEX the variable it adds to every container
// (Kubernetes, "Indexed Job for Parallel Processing with Static Work Assignment").
const (
	completionIndex    = "batch.kubernetes.io/job-completion-index"
	completionIndexEnv = "JOB_COMPLETION_INDEX"
)

// readPod reads a Pod, or a Job whose template becomes a Pod as the Job controller makes
// it (name JOB-INDEX, the completion-index annotation and label, JOB_COMPLETION_INDEX in
// every container), from a JSON or YAML file of at most 4 MiB. index is used only for a
// Job and must be in [0, completions).
func readPod(file string, index int) (*corev1.Pod, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = readAllLimited(os.Stdin, maxSpec)
	} else {
		var f *os.File
		if f, err = os.Open(file); err == nil {
			data, err = readAllLimited(f, maxSpec)
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	switch tm.Kind {
	case "Pod":
		var p corev1.Pod
		if err := yaml.UnmarshalStrict(data, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if p.Name == "" {
			return nil, fmt.Errorf("%s: the Pod has no metadata.name", file)
		}
		return &p, nil
	case "Job":
		var j batchv1.Job
		if err := yaml.UnmarshalStrict(data, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return podOfJob(&j, index)
	default:
		return nil, fmt.Errorf("%s: kind %q: want Pod or Job", file, tm.Kind)
	}
}

// podOfJob makes pod number index of an Indexed Job the way the Job controller does.
func podOfJob(j *batchv1.Job, index int) (*corev1.Pod, error) {
	if j.Name == "" {
		return nil, errors.New("the Job has no metadata.name")
	}
	n := 1
	if j.Spec.Completions != nil {
		n = int(*j.Spec.Completions)
	}
	if index < 0 || index >= n {
		return nil, fmt.Errorf("job %s: --index %d: want 0..%d", j.Name, index, n-1)
	}
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *j.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       *j.Spec.Template.Spec.DeepCopy(),
	}
	p.Name = fmt.Sprintf("%s-%d", j.Name, index)
	p.Namespace = j.Namespace
	idx := strconv.Itoa(index)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Annotations[completionIndex] = idx
	p.Labels[completionIndex] = idx
	p.Labels["job-name"] = j.Name
	if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
		ev := corev1.EnvVar{Name: completionIndexEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + completionIndex + "']"}}}
		for i := range p.Spec.InitContainers {
			p.Spec.InitContainers[i].Env = append(p.Spec.InitContainers[i].Env, ev)
		}
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, ev)
		}
	}
	return p, nil
}

// fieldPathRE matches the downward-API field paths runpod resolves.
var fieldPathRE = regexp.MustCompile(`^metadata\.(annotations|labels)\['([^']+)'\]$`)

// fieldValue resolves a downward-API fieldRef against the pod (Kubernetes "Expose Pod
// Information to Containers Through Environment Variables").
func fieldValue(p *corev1.Pod, fp string) (string, error) {
	switch fp {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.hostIP":
		return "127.0.0.1", nil
	}
	if m := fieldPathRE.FindStringSubmatch(fp); m != nil {
		if m[1] == "annotations" {
			return p.Annotations[m[2]], nil
		}
		return p.Labels[m[2]], nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", fp)
}

// readSecrets reads a Secret or a SecretList (JSON or YAML, at most 1 MiB; kubectl get
// secret -o json) and returns the Secrets by name.
func readSecrets(file string) (map[string]*corev1.Secret, error) {
	data, err := readlimit.File(file, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("--secrets: %w", err)
	}
	var probe struct{ Kind string }
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("--secrets %s: %v", file, err)
	}
	out := map[string]*corev1.Secret{}
	switch probe.Kind {
	case "Secret":
		var s corev1.Secret
		if err := yaml.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("--secrets %s: %v", file, err)
		}
		out[s.Name] = &s
	case "SecretList", "List":
		var l corev1.SecretList
		if err := yaml.Unmarshal(data, &l); err != nil {
			return nil, fmt.Errorf("--secrets %s: %v", file, err)
		}
		for i := range l.Items {
			out[l.Items[i].Name] = &l.Items[i]
		}
	default:
		return nil, fmt.Errorf("--secrets %s: kind %q, want Secret or SecretList", file, probe.Kind)
	}
	return out, nil
}

// secretStore holds the Secrets a pod's secretKeyRefs may name (runpod --secrets FILE,
// what `kubectl get secret -o json` prints), and the directory where a container's secret
// values are written as a podman --env-file (mode 0600), so they are never on a command
// line.
type secretStore struct {
	secrets map[string]*corev1.Secret
	dir     string
}

// value is key of Secret name: an error when either is missing (the kubelet's
// CreateContainerConfigError), or when the value holds a newline or NUL (an env file
// cannot carry it).
func (s *secretStore) value(ref *corev1.SecretKeySelector) (string, error) {
	if s == nil || s.secrets[ref.Name] == nil {
		return "", fmt.Errorf("secret %q not found (give it with --secrets)", ref.Name)
	}
	sec := s.secrets[ref.Name]
	v, ok := sec.Data[ref.Key]
	if !ok {
		sv, sok := sec.StringData[ref.Key]
		if !sok {
			return "", fmt.Errorf("secret %q has no key %q", ref.Name, ref.Key)
		}
		v = []byte(sv)
	}
	if strings.ContainsAny(string(v), "\n\x00") {
		return "", fmt.Errorf("secret %q key %q holds a newline or NUL, which an env file cannot carry", ref.Name, ref.Key)
	}
	return string(v), nil
}

// containerEnv resolves a container's environment in order: literal values with $(VAR)
// references expanded against the variables before them, fieldRefs, and secretKeyRefs
// from sec (their names are returned in secret). Any other source (config maps,
// resource fields) is refused.
func containerEnv(p *corev1.Pod, c *corev1.Container, sec *secretStore) (env []corev1.EnvVar, secret map[string]bool, err error) {
	if len(c.EnvFrom) > 0 {
		return nil, nil, fmt.Errorf("container %s: envFrom is not supported", c.Name)
	}
	var out []corev1.EnvVar
	secret = map[string]bool{}
	seen := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
			v = expand(v, seen)
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = fieldValue(p, e.ValueFrom.FieldRef.FieldPath); err != nil {
				return nil, nil, fmt.Errorf("container %s: env %s: %w", c.Name, e.Name, err)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			var err error
			if v, err = sec.value(e.ValueFrom.SecretKeyRef); err != nil {
				return nil, nil, fmt.Errorf("container %s: env %s: %w", c.Name, e.Name, err)
			}
			secret[e.Name] = true
		default:
			return nil, nil, fmt.Errorf("container %s: env %s: only value, fieldRef and secretKeyRef are supported", c.Name, e.Name)
		}
		seen[e.Name] = v
		out = append(out, corev1.EnvVar{Name: e.Name, Value: v})
	}
	return out, secret, nil
}

// expand replaces $(NAME) by the value of an earlier variable NAME; $$ is a literal $;
// a reference to an unknown name stays as written (Kubernetes "Define Dependent
// Environment Variables").
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// mountSpec is one bind mount of a container: a host directory (of an emptyDir or a
// claim, with the subPath applied) at a path inside it.
type mountSpec struct {
	host, path string
	readOnly   bool
}

// podVolumes maps each volume of the pod to a host directory: an emptyDir to dir/NAME
// (mode 0777, as the kubelet makes it), a persistentVolumeClaim to the directory claims
// gives for its claim name. Any other volume type is refused.
func podVolumes(p *corev1.Pod, dir string, claims map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.EmptyDir != nil:
			out[v.Name] = path.Join(dir, "volumes", v.Name)
		case v.PersistentVolumeClaim != nil:
			h, ok := claims[v.PersistentVolumeClaim.ClaimName]
			if !ok {
				return nil, fmt.Errorf("volume %s: claim %q has no --volume-dir CLAIM=DIR", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			out[v.Name] = h
		default:
			return nil, fmt.Errorf("volume %s: only emptyDir and persistentVolumeClaim volumes are supported", v.Name)
		}
	}
	return out, nil
}

// containerMounts resolves a container's volumeMounts against the pod's volume
// directories. A subPath must be relative and stay inside its volume.
func containerMounts(c *corev1.Container, vols map[string]string) ([]mountSpec, error) {
	var out []mountSpec
	for _, m := range c.VolumeMounts {
		h, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("container %s: mount of unknown volume %q", c.Name, m.Name)
		}
		if !path.IsAbs(m.MountPath) {
			return nil, fmt.Errorf("container %s: mountPath %q is not absolute", c.Name, m.MountPath)
		}
		if m.SubPath != "" {
			sp := path.Clean(m.SubPath)
			if path.IsAbs(sp) || sp == ".." || strings.HasPrefix(sp, "../") {
				return nil, fmt.Errorf("container %s: subPath %q leaves its volume", c.Name, m.SubPath)
			}
			h = path.Join(h, sp)
		}
		if m.SubPathExpr != "" || m.MountPropagation != nil {
			return nil, fmt.Errorf("container %s: subPathExpr and mountPropagation are not supported", c.Name)
		}
		out = append(out, mountSpec{host: h, path: m.MountPath, readOnly: m.ReadOnly})
	}
	return out, nil
}

// runArgs are the arguments of `podman run` (after "run") that start container c of pod p
// in the podman pod podName, detached, named name. They carry what the kubelet would
// apply: image (never pulled), command as the entrypoint and args as its arguments (with
// $(VAR) expansion), the environment, the mounts, the working directory, user and group
// (the container's securityContext over the pod's), fsGroup as a supplementary group,
// read-only root (without podman's extra tmpfs mounts), dropped capabilities and
// no-new-privileges.
func runArgs(p *corev1.Pod, c *corev1.Container, podName, name string, vols map[string]string, sec *secretStore) ([]string, error) {
	env, secret, err := containerEnv(p, c, sec)
	if err != nil {
		return nil, err
	}
	mounts, err := containerMounts(c, vols)
	if err != nil {
		return nil, err
	}
	if c.Image == "" {
		return nil, fmt.Errorf("container %s: no image", c.Name)
	}
	for _, port := range c.Ports {
		if port.HostPort != 0 {
			return nil, fmt.Errorf("container %s: hostPort is not supported", c.Name)
		}
	}
	vars := map[string]string{}
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	a := []string{"--detach", "--pod", podName, "--name", name, "--pull=never", "--init=false"}
	psc := p.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	uid, gid := psc.RunAsUser, psc.RunAsGroup
	if csc.RunAsUser != nil {
		uid = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		gid = csc.RunAsGroup
	}
	nonRoot := (psc.RunAsNonRoot != nil && *psc.RunAsNonRoot) || (csc.RunAsNonRoot != nil && *csc.RunAsNonRoot)
	if nonRoot && uid != nil && *uid == 0 {
		return nil, fmt.Errorf("container %s: runAsNonRoot with user 0", c.Name)
	}
	if nonRoot && uid == nil {
		return nil, fmt.Errorf("container %s: runAsNonRoot needs a numeric runAsUser here (runpod does not read the image's user)", c.Name)
	}
	if uid != nil {
		u := strconv.FormatInt(*uid, 10)
		if gid != nil {
			u += ":" + strconv.FormatInt(*gid, 10)
		}
		a = append(a, "--user", u)
	}
	if psc.FSGroup != nil {
		a = append(a, "--group-add", strconv.FormatInt(*psc.FSGroup, 10))
	}
	if csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem {
		a = append(a, "--read-only", "--read-only-tmpfs=false")
	}
	if csc.Privileged != nil && *csc.Privileged {
		return nil, fmt.Errorf("container %s: privileged containers are not supported", c.Name)
	}
	if csc.Capabilities != nil {
		for _, d := range csc.Capabilities.Drop {
			a = append(a, "--cap-drop", strings.ToLower(string(d)))
		}
		for _, ad := range csc.Capabilities.Add {
			a = append(a, "--cap-add", strings.ToLower(string(ad)))
		}
	}
	if csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation {
		a = append(a, "--security-opt", "no-new-privileges")
	}
	if c.WorkingDir != "" {
		a = append(a, "--workdir", c.WorkingDir)
	}
	var secretLines strings.Builder
	for _, e := range env {
		if secret[e.Name] {
			secretLines.WriteString(e.Name + "=" + e.Value + "\n")
			continue
		}
		a = append(a, "--env", e.Name+"="+e.Value)
	}
	if secretLines.Len() > 0 {
		if sec == nil || sec.dir == "" {
			return nil, fmt.Errorf("container %s: no directory for its secret env file", c.Name)
		}
		f := filepath.Join(sec.dir, name+".env")
		if err := atomicfile.Write(f, []byte(secretLines.String()), 0o600); err != nil {
			return nil, err
		}
		a = append(a, "--env-file", f)
	}
	for _, m := range mounts {
		opt := "type=bind,src=" + m.host + ",dst=" + m.path
		if m.readOnly {
			opt += ",ro=true"
		}
		a = append(a, "--mount", opt)
	}
	if len(c.Command) > 0 {
		ep, err := jsonArray(expandAll(c.Command, vars))
		if err != nil {
			return nil, err
		}
		a = append(a, "--entrypoint", ep)
	}
	a = append(a, c.Image)
	a = append(a, expandAll(c.Args, vars)...)
	return a, nil
}

func expandAll(ss []string, vars map[string]string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = expand(s, vars)
	}
	return out
}

// jsonArray writes ss as a JSON array of strings, the form of podman's --entrypoint that
// keeps each argument whole.
func jsonArray(ss []string) (string, error) {
	b, err := json.Marshal(ss)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// sidecar reports whether an init container is a native sidecar (restartPolicy: Always,
// Kubernetes 1.29 and later).
func sidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
