// Package k8s renders the Kubernetes manifests of a batch of pab runs (docs/deploy.md): one
// Indexed Job per task, one completion per repeat, each pod holding the task (init
// container), a collector, the replay and optionally the browser (native sidecars), and the
// agent; one NetworkPolicy that denies every connection to or from the batch's pods; and
// optionally a model gateway the pods may reach (gateway.go). It also reads a batch back
// from a cluster through kubectl (cluster.go): the Jobs' state and failed indexes
// (Status), and the runs from the collectors' logs (Collect, internal/runarchive).
package k8s

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// The fixed addresses and paths inside a pod; the agent's environment names them.
const (
	ProxyAddr   = "127.0.0.1:8899"
	CDPPort     = 9222
	OutDir      = "/pab/out"     // the agent's pod-local run directory (emptyDir): prompt, answer, agent output
	LogDir      = "/pab/log"     // the replay log's directory (emptyDir the agent cannot write)
	ResultsDir  = "/pab/results" // the results volume (the batch's subdirectory of the PVC)
	CacheDir    = "/pab/cache"   // $PAB_CACHE of the replay and the browser (emptyDir)
	RepoDir     = "/pab/repo"    // the replay image's repository (sites/ baked in)
	BinDir      = "/pab/bin"     // pab-pod copied here by the task container
	TaskImgRoot = "/task"        // where the task image holds tasks/<id>
	// RunIndexAnnotation is the annotation the Job controller sets to a pod's completion index.
	RunIndexAnnotation = "batch.kubernetes.io/job-completion-index"
	// MaxRepeat bounds --repeat and MaxParallelism bounds --parallelism.
	MaxRepeat      = 10000
	MaxParallelism = 10000
	maxPrompt      = 64 << 10
	maxManifest    = 1 << 20
	maxImagesFile  = 1 << 20
	runAsID        = 65532
)

// Options are the inputs of Render. Repo, Tasks, AgentImage, ReplayImage, a task image for
// every task, Repeat and Parallelism are required.
type Options struct {
	// Repo is the task repository (holding tasks/); the tasks' prompts, locales and time
	// zones are read from it.
	Repo *task.Repo
	// Tasks are the task ids, in the order given (each at most once).
	Tasks []string
	// AgentImage is the agent's container image.
	AgentImage string
	// AgentCommand, when set, runs the agent as `pab-pod agent -- AgentCommand...`, which
	// records its exit, stdout and stderr and enforces Timeout; else the image's own
	// entrypoint runs and the pod's deadline is the only time limit.
	AgentCommand []string
	// ReplayImage and BrowserImage are pab's images; no browser sidecar when BrowserImage
	// is empty.
	ReplayImage, BrowserImage string
	// TaskImages maps a task id to its task image.
	TaskImages map[string]string
	// Repeat is the number of runs per task (completions of its Job), 1 to MaxRepeat.
	Repeat int
	// Parallelism is the number of pods per Job that run at once, 1 to MaxParallelism.
	Parallelism int
	// Namespace of every object; empty leaves it to kubectl.
	Namespace string
	// Batch names the batch: job names, labels, and the results subdirectory. A DNS-1123
	// label of at most 20 characters; default "pab".
	Batch string
	// ResultsClaim is the PersistentVolumeClaim the runs are copied to (ReadWriteMany when
	// pods run on several nodes, ReadWriteOnce on one node); empty: no volume, each pod's
	// collector writes its run as a run archive to its container log (internal/runarchive),
	// which `pab k8s collect` reads through the API server.
	ResultsClaim string
	// AllowDNS lets the pods ask kube-dns (UDP and TCP port 53), nothing else.
	AllowDNS bool
	// Timeout is the agent's time limit (default 10 minutes); the pod's deadline is
	// Timeout plus 15 minutes for start and collection.
	Timeout time.Duration
	// SecretEnv are environment variables of the agent container only, each taken from a
	// key of a Secret (secretKeyRef): the value never passes through pab, the manifests or
	// any other container.
	SecretEnv []SecretEnv
	// AgentEnv are literal environment variables of the agent container (e.g. a model
	// endpoint); they may not override the run's own (AgentEnv's PAB_* names).
	AgentEnv []corev1.EnvVar
	// TTL is the Jobs' ttlSecondsAfterFinished: the Job and its pods (and, in log mode,
	// the runs not yet collected) are deleted that long after the Job finished. Zero: no
	// TTL, the Jobs stay until deleted.
	TTL time.Duration
	// ImagePullSecrets name the Secrets (kubernetes.io/dockerconfigjson) the kubelet pulls
	// the pods' images with, for a private registry.
	ImagePullSecrets []string
	// Gateway, when its Image is set, adds gateway.yaml: the model gateway's Deployment
	// and Service, and a second NetworkPolicy letting the batch's pods reach it (and DNS)
	// and nothing else.
	Gateway Gateway
}

// SecretEnv is one --secret-env NAME=SECRET/KEY.
type SecretEnv struct{ Name, Secret, Key string }

// Gateway is the optional model gateway of a batch: a proxy to a hosted model (e.g.
// LiteLLM) that holds the provider's key, so the agent needs none and can reach nothing else.
type Gateway struct {
	// Image of the gateway; empty: no gateway.
	Image string
	// Command and Args of its container (default: the image's entrypoint).
	Command, Args []string
	// Port it listens on (HTTP), 1 to 65535; default 4000.
	Port int
	// SecretEnv are the gateway's own secrets (the provider's API key).
	SecretEnv []SecretEnv
	// Replicas of its Deployment; default 1.
	Replicas int
}

// GatewayEnv is the agent's variable holding the gateway's URL (http://NAME:PORT).
const GatewayEnv = "PAB_MODEL_GATEWAY"

var (
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)
)

// ParseSecretEnv parses NAME=SECRET/KEY: NAME an environment variable name, SECRET a
// Secret's name (DNS-1123 subdomain), KEY one of its keys.
func ParseSecretEnv(v string) (SecretEnv, error) {
	name, ref, ok := strings.Cut(v, "=")
	sec, key, ok2 := strings.Cut(ref, "/")
	if !ok || !ok2 {
		return SecretEnv{}, fmt.Errorf("%q: want NAME=SECRET/KEY", v)
	}
	se := SecretEnv{Name: name, Secret: sec, Key: key}
	return se, se.valid()
}

func (s SecretEnv) valid() error {
	switch {
	case !envName.MatchString(s.Name):
		return fmt.Errorf("%q is not an environment variable name", s.Name)
	case len(validation.IsDNS1123Subdomain(s.Secret)) > 0:
		return fmt.Errorf("%q is not a Secret name (lower-case letters, digits, '-' and '.')", s.Secret)
	case !secretKey.MatchString(s.Key):
		return fmt.Errorf("%q is not a Secret key (letters, digits, '-', '_' and '.')", s.Key)
	}
	return nil
}

// ParseEnv parses NAME=VALUE (a literal environment variable).
func ParseEnv(v string) (corev1.EnvVar, error) {
	name, val, ok := strings.Cut(v, "=")
	if !ok || !envName.MatchString(name) {
		return corev1.EnvVar{}, fmt.Errorf("%q: want NAME=VALUE with NAME an environment variable name", v)
	}
	return corev1.EnvVar{Name: name, Value: val}, nil
}

// File is one rendered manifest file: a name (no directory) and its YAML.
type File struct {
	Name string
	Data []byte
}

var (
	// imageRef is a container image reference: [host[:port]/]path[:tag][@sha256:hex].
	imageRef = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::[0-9]+)?/)?` +
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
		`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`)
)

// ValidImage checks a container image reference ([registry/]name[:tag][@sha256:digest]),
// at most 512 characters; the error names the reference.
func ValidImage(ref string) error {
	if len(ref) > 512 || !imageRef.MatchString(ref) {
		return fmt.Errorf("bad image name %q: want [registry[:port]/]name[:tag][@sha256:digest], lower-case path", ref)
	}
	return nil
}

// ContentTagged says whether ref names its image by a tag other than "latest" or by a
// digest, as deploy/build-images.sh's content tags do.
func ContentTagged(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	return ok && tag != "" && tag != "latest"
}

// runInfo is what a task contributes to its Job.
type runInfo struct {
	id, name, prompt, locale, timezone, image string
}

// Render returns the manifests for o: networkpolicy.yaml, gateway.yaml when o.Gateway is
// set, then job-<task>.yaml per task in the order of o.Tasks. Same options and repository, same bytes. Errors name the flag or
// task at fault: an unknown task, a bad image name, Repeat or Parallelism out of range, a
// task without a prompt.
func Render(o Options) ([]File, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	var runs []runInfo
	seen := map[string]bool{}
	for _, id := range o.Tasks {
		if seen[id] {
			return nil, fmt.Errorf("task %s given twice", id)
		}
		seen[id] = true
		r, err := readTask(o, id)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	names := map[string]string{}
	for _, r := range runs {
		if other, ok := names[r.name]; ok {
			return nil, fmt.Errorf("tasks %s and %s get the same job name %s", other, r.id, r.name)
		}
		names[r.name] = r.id
	}
	files := []File{}
	np, err := marshal(networkPolicy(o))
	if err != nil {
		return nil, err
	}
	files = append(files, File{Name: "networkpolicy.yaml", Data: np})
	if o.Gateway.Image != "" {
		var docs [][]byte
		for _, obj := range gatewayObjects(o) {
			d, err := marshal(obj)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d)
		}
		files = append(files, File{Name: "gateway.yaml", Data: bytes.Join(docs, []byte("---\n"))})
	}
	for _, r := range runs {
		data, err := marshal(job(o, r))
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: "job-" + r.id + ".yaml", Data: data})
	}
	return files, nil
}

func (o *Options) defaults() error {
	if o.Repo == nil {
		return errors.New("no task repository")
	}
	if len(o.Tasks) == 0 {
		return errors.New("no tasks given")
	}
	if o.Batch == "" {
		o.Batch = "pab"
	}
	if len(o.Batch) > 20 || len(validation.IsDNS1123Label(o.Batch)) > 0 {
		return fmt.Errorf("bad --batch %q: want 1 to 20 lower-case letters, digits and '-', starting and ending with a letter or digit", o.Batch)
	}
	if o.ResultsClaim != "" && len(validation.IsDNS1123Subdomain(o.ResultsClaim)) > 0 {
		return fmt.Errorf("bad --results-claim %q: want a Kubernetes object name (lower-case letters, digits, '-' and '.')", o.ResultsClaim)
	}
	if o.Namespace != "" && len(validation.IsDNS1123Label(o.Namespace)) > 0 {
		return fmt.Errorf("bad --namespace %q: want a DNS-1123 label (lower-case letters, digits and '-', at most 63)", o.Namespace)
	}
	if o.Repeat < 1 || o.Repeat > MaxRepeat {
		return fmt.Errorf("--repeat %d: want 1 to %d", o.Repeat, MaxRepeat)
	}
	if o.Parallelism < 1 || o.Parallelism > MaxParallelism {
		return fmt.Errorf("--parallelism %d: want 1 to %d", o.Parallelism, MaxParallelism)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Timeout < time.Second || o.Timeout > 48*time.Hour {
		return fmt.Errorf("--timeout %s: want 1s to 48h", o.Timeout)
	}
	if o.AgentImage == "" {
		return errors.New("--agent-image is required: the image of the agent to run")
	}
	if o.ReplayImage == "" {
		return errors.New("--replay-image is required: give --images FILE, the image list deploy/build-images.sh --images-file FILE writes, or --replay-image and --task-image-prefix (docs/deploy.md)")
	}
	for _, c := range []struct{ flag, img string }{{"--agent-image", o.AgentImage}, {"--replay-image", o.ReplayImage}, {"--browser-image", o.BrowserImage}} {
		if c.img != "" {
			if err := ValidImage(c.img); err != nil {
				return fmt.Errorf("%s: %w", c.flag, err)
			}
		}
	}
	for i, a := range o.AgentCommand {
		if a == "" && i == 0 {
			return errors.New("--agent-command: the command is empty")
		}
	}
	taken := map[string]string{}
	for _, e := range AgentEnv("x", "x", true) {
		taken[e.Name] = "the run's own variable"
	}
	taken[GatewayEnv] = "the gateway's URL"
	for _, e := range o.AgentEnv {
		if !envName.MatchString(e.Name) {
			return fmt.Errorf("--agent-env %q is not an environment variable name", e.Name)
		}
		if why, ok := taken[e.Name]; ok {
			return fmt.Errorf("--agent-env %s: %s (given twice or reserved)", e.Name, why)
		}
		taken[e.Name] = "given with --agent-env"
	}
	for _, se := range o.SecretEnv {
		if err := se.valid(); err != nil {
			return fmt.Errorf("--secret-env: %w", err)
		}
		if why, ok := taken[se.Name]; ok {
			return fmt.Errorf("--secret-env %s: %s (given twice or reserved)", se.Name, why)
		}
		taken[se.Name] = "given with --secret-env"
	}
	if o.TTL < 0 || o.TTL > 365*24*time.Hour {
		return fmt.Errorf("--ttl %s: want 0 (none) to 8760h", o.TTL)
	}
	for _, s := range o.ImagePullSecrets {
		if len(validation.IsDNS1123Subdomain(s)) > 0 {
			return fmt.Errorf("--image-pull-secret %q is not a Secret name", s)
		}
	}
	if g := &o.Gateway; g.Image != "" {
		if err := ValidImage(g.Image); err != nil {
			return fmt.Errorf("--gateway-image: %w", err)
		}
		if g.Port == 0 {
			g.Port = 4000
		}
		if g.Port < 1 || g.Port > 65535 {
			return fmt.Errorf("--gateway-port %d: want 1 to 65535", g.Port)
		}
		if g.Replicas == 0 {
			g.Replicas = 1
		}
		if g.Replicas < 1 || g.Replicas > 100 {
			return fmt.Errorf("gateway replicas %d: want 1 to 100", g.Replicas)
		}
		for _, se := range g.SecretEnv {
			if err := se.valid(); err != nil {
				return fmt.Errorf("--gateway-secret-env: %w", err)
			}
		}
	} else if len(o.Gateway.SecretEnv) > 0 || len(o.Gateway.Command) > 0 || len(o.Gateway.Args) > 0 || o.Gateway.Port != 0 {
		return errors.New("--gateway-* flags given without --gateway-image")
	}
	return nil
}

func readTask(o Options, id string) (runInfo, error) {
	t, err := o.Repo.Task(id)
	if err != nil {
		return runInfo{}, fmt.Errorf("unknown task: %w", err)
	}
	card, err := t.Card()
	if err != nil {
		return runInfo{}, err
	}
	if strings.TrimSpace(card.Prompt) == "" {
		return runInfo{}, fmt.Errorf("task %s has no prompt in %s", id, t.CardPath())
	}
	if len(card.Prompt) > maxPrompt {
		return runInfo{}, fmt.Errorf("task %s: the prompt is larger than %d bytes", id, maxPrompt)
	}
	img := o.TaskImages[id]
	if img == "" {
		return runInfo{}, fmt.Errorf("no task image for %s: give --images (from deploy/build-images.sh) or --task-image-prefix", id)
	}
	if err := ValidImage(img); err != nil {
		return runInfo{}, fmt.Errorf("task image of %s: %w", id, err)
	}
	if !ContentTagged(img) {
		return runInfo{}, fmt.Errorf("task image of %s: %s has no tag or the tag latest; task images are referenced by their content tag (deploy/build-images.sh), so a pod never runs another build's recording: give --images (with --task-image-prefix it takes the tags from there)", id, img)
	}
	r := runInfo{id: id, name: o.Batch + "-" + nameOf(id), prompt: card.Prompt, image: img}
	if m, err := readManifest(filepath.Join(t.RecordingDir(), recording.ManifestFile)); err != nil {
		return runInfo{}, fmt.Errorf("task %s: %w", id, err)
	} else {
		r.locale, r.timezone = m.Locale, m.Timezone
	}
	if c := card.Capture; c != nil {
		if r.locale == "" {
			r.locale = c.Locale
		}
		if r.timezone == "" {
			r.timezone = c.Timezone
		}
	}
	return r, nil
}

// readManifest reads the locale and time zone of a published recording's manifest (at
// most 1 MiB); a task without a recording is an error (the pod would have nothing to replay).
func readManifest(path string) (recording.Manifest, error) {
	var m recording.Manifest
	data, err := readlimit.File(path, maxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return m, fmt.Errorf("no recording: %w", err)
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s: %v", path, err)
	}
	return m, nil
}

// nameOf turns a task id into a DNS-1123 label of at most 40 characters: lower case, other
// characters as '-'; when that changed the id, 8 hex digits of its SHA-256 are appended so
// two ids never share a name.
func nameOf(id string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(id) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	n := strings.Trim(b.String(), "-")
	if n == id && len(n) <= 40 {
		return n
	}
	sum := sha256.Sum256([]byte(id))
	if len(n) > 31 {
		n = strings.TrimRight(n[:31], "-")
	}
	if n == "" {
		return hex.EncodeToString(sum[:4])
	}
	return n + "-" + hex.EncodeToString(sum[:4])
}

func labels(o Options) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "pab", "app.kubernetes.io/component": "run", "pab.dev/batch": o.Batch}
}

func objectMeta(o Options, name string, extra map[string]string) metav1.ObjectMeta {
	l := labels(o)
	for k, v := range extra {
		l[k] = v
	}
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: l}
}

// networkPolicy denies every ingress and egress of the batch's pods; with AllowDNS it lets
// them reach kube-dns on port 53. Traffic between a pod's containers goes over loopback,
// which NetworkPolicy never filters.
func networkPolicy(o Options) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(o, o.Batch+"-no-network", nil),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels(o)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			// no ingress and no egress rule: with both policy types, everything is denied
		},
	}
	if o.AllowDNS {
		udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
		port := intstr.FromInt32(53)
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port}},
		})
	}
	return np
}

func ptr[T any](v T) *T { return &v }

func ttl(d time.Duration) *int32 {
	if d <= 0 {
		return nil
	}
	return ptr(int32(d / time.Second))
}

func pullSecrets(names []string) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, n := range names {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}

func res(cpuReq, memReq, memLim string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memLim)},
	}
}

// hardened is the security context of pab's own containers: no privilege, no capability,
// read-only root file system.
func hardened(readOnlyRoot bool) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(readOnlyRoot),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func mount(name, path string, ro bool) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: ro}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// AgentEnv is the agent's environment in a pod (docs/run.md, docs/deploy.md), in order,
// for a task id and prompt; cdp is false when the pod has no browser.
func AgentEnv(id, prompt string, cdp bool) []corev1.EnvVar {
	e := []corev1.EnvVar{
		env("PAB_TASK_ID", id),
		env("PAB_PROMPT", prompt),
		env("PAB_PROMPT_FILE", OutDir+"/prompt.txt"),
		env("PAB_ANSWER_FILE", OutDir+"/answer.txt"),
		env("PAB_PROXY", "http://"+ProxyAddr),
		env("PAB_CA_FILE", CacheDir+"/ca/ca.pem"),
		env("NODE_EXTRA_CA_CERTS", CacheDir+"/ca/ca.pem"),
		env("PAB_RUN_DIR", OutDir),
	}
	if cdp {
		e = append(e, env("PAB_CDP_URL", "http://127.0.0.1:"+strconv.Itoa(CDPPort)))
	}
	return e
}

// job is the Indexed Job of task r: o.Repeat pods, each with the task, collector, replay
// (and browser) sidecars and the agent, hardened and cut off at the agent's timeout plus
// 15 minutes.
func job(o Options, r runInfo) *batchv1.Job {
	always := corev1.ContainerRestartPolicyAlways
	runIndex := corev1.EnvVar{Name: "PAB_RUN_INDEX", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + RunIndexAnnotation + "']"}}}
	taskDir := RepoDir + "/tasks"
	volumes := []corev1.Volume{
		{Name: "tasks", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "log", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "replay-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "agent-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	collect := corev1.Container{
		Name:            "collect",
		Image:           r.image,
		RestartPolicy:   &always,
		Command:         []string{"/bin/pab-pod", "collect", "--out", OutDir, "--log", LogDir, "--emit-log"},
		Env:             []corev1.EnvVar{env("PAB_TASK_ID", r.id), runIndex},
		VolumeMounts:    []corev1.VolumeMount{mount("out", OutDir, true), mount("log", LogDir, true)},
		Resources:       res("10m", "64Mi", "256Mi"),
		SecurityContext: hardened(true),
	}
	results := "log"
	if o.ResultsClaim != "" {
		results = "claim/" + o.ResultsClaim
		volumes = append(volumes, corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: o.ResultsClaim}}})
		collect.Command = []string{"/bin/pab-pod", "collect", "--out", OutDir, "--log", LogDir, "--results", ResultsDir}
		collect.VolumeMounts = append(collect.VolumeMounts, corev1.VolumeMount{Name: "results", MountPath: ResultsDir, SubPath: o.Batch})
		collect.Resources = res("10m", "16Mi", "128Mi")
	}
	init := []corev1.Container{
		{
			Name:  "task",
			Image: r.image,
			Command: []string{"/bin/pab-pod", "install-task", TaskImgRoot + "/tasks/" + r.id, taskDir + "/" + r.id,
				"--bin", BinDir, "--prompt-file", OutDir + "/prompt.txt"},
			Env:             []corev1.EnvVar{env("PAB_PROMPT", r.prompt)},
			VolumeMounts:    []corev1.VolumeMount{mount("tasks", taskDir, false), mount("bin", BinDir, false), mount("out", OutDir, false)},
			Resources:       res("10m", "16Mi", "128Mi"),
			SecurityContext: hardened(true),
		},
		collect,
		{
			Name:          "replay",
			Image:         o.ReplayImage,
			RestartPolicy: &always,
			Command: []string{"/bin/pab", "--repo", RepoDir, "replay", r.id, "--listen", ProxyAddr,
				"--log", LogDir + "/replay.jsonl"},
			Env: []corev1.EnvVar{env("PAB_CACHE", CacheDir), env("TMPDIR", "/tmp")},
			VolumeMounts: []corev1.VolumeMount{mount("tasks", taskDir, true), mount("cache", CacheDir, false),
				mount("log", LogDir, false), mount("replay-tmp", "/tmp", false)},
			StartupProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"/bin/pab-pod", "probe", "--proxy", ProxyAddr, "http://rr.control/health"}}},
				PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 600,
			},
			Resources:       res("100m", "128Mi", "1Gi"),
			SecurityContext: hardened(true),
		},
	}
	if o.BrowserImage != "" {
		bc, bv := browserSidecar(o, r)
		init, volumes = append(init, bc), append(volumes, bv...)
	}
	agent := agentContainer(o, r)
	deadline := int64((o.Timeout + 15*time.Minute) / time.Second)
	taskLabel := map[string]string{"pab.dev/task": nameOf(r.id)}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: withAnnotations(objectMeta(o, r.name, taskLabel), TaskIDAnnotation, r.id, ResultsAnnotation, results),
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ttl(o.TTL),
			CompletionMode:          ptr(batchv1.IndexedCompletion),
			Completions:             ptr(int32(o.Repeat)),
			Parallelism:             ptr(int32(min(o.Parallelism, o.Repeat))),
			BackoffLimitPerIndex:    ptr(int32(0)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				// a pod evicted or preempted is run again without counting as a failure
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: func() map[string]string {
					l := labels(o)
					l["pab.dev/task"] = nameOf(r.id)
					return l
				}()},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					ActiveDeadlineSeconds:         ptr(deadline),
					TerminationGracePeriodSeconds: ptr(int64(30)),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(runAsID)),
						RunAsGroup:     ptr(int64(runAsID)),
						FSGroup:        ptr(int64(runAsID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					InitContainers:   init,
					Containers:       []corev1.Container{agent},
					Volumes:          volumes,
					ImagePullSecrets: pullSecrets(o.ImagePullSecrets),
				},
			},
		},
	}
}

// browserSidecar is the browser's native sidecar of r's pods (pab browser --proxy through
// the replay, with the recording's time zone and language) and the volumes it needs.
func browserSidecar(o Options, r runInfo) (corev1.Container, []corev1.Volume) {
	volumes := []corev1.Volume{
		{Name: "browser-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("512Mi"))}}}}
	benv := []corev1.EnvVar{env("PAB_CACHE", CacheDir), env("HOME", "/tmp"), env("TMPDIR", "/tmp")}
	if r.timezone != "" {
		benv = append(benv, env("TZ", r.timezone))
	}
	if r.locale != "" {
		// pab browser --proxy has no --lang; Chromium on Linux takes its language from
		// LANGUAGE (en_US form), and Accept-Language from that.
		benv = append(benv, env("LANGUAGE", strings.ReplaceAll(r.locale, "-", "_")))
	}
	always := corev1.ContainerRestartPolicyAlways
	return corev1.Container{
		Name:          "browser",
		Image:         o.BrowserImage,
		RestartPolicy: &always,
		Command: []string{"/usr/local/bin/pab", "--repo", "/tmp", "browser", "--proxy", ProxyAddr,
			"--port", strconv.Itoa(CDPPort), "--chrome", "/usr/local/bin/chromium-pod"},
		Env: benv,
		VolumeMounts: []corev1.VolumeMount{mount("cache", CacheDir, true), mount("browser-tmp", "/tmp", false),
			mount("shm", "/dev/shm", false)},
		StartupProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{"/usr/local/bin/pab-pod", "probe", "http://127.0.0.1:" + strconv.Itoa(CDPPort) + "/json/version"}}},
			PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 120,
		},
		Resources:       res("500m", "512Mi", "2Gi"),
		SecurityContext: hardened(true),
	}, volumes
}

// agentContainer is the main container of r's pods: the agent's image with the run's
// environment (AgentEnv), run through pab-pod when o.AgentCommand is set.
func agentContainer(o Options, r runInfo) corev1.Container {
	aenv := AgentEnv(r.id, r.prompt, o.BrowserImage != "")
	if o.Gateway.Image != "" {
		aenv = append(aenv, env(GatewayEnv, "http://"+gatewayName(o)+":"+strconv.Itoa(o.Gateway.Port)))
	}
	aenv = append(aenv, o.AgentEnv...)
	aenv = append(aenv, secretEnv(o.SecretEnv)...)
	agent := corev1.Container{
		Name:  "agent",
		Image: o.AgentImage,
		Env:   aenv,
		VolumeMounts: []corev1.VolumeMount{mount("out", OutDir, false), mount("cache", CacheDir, true),
			mount("bin", BinDir, true), mount("agent-tmp", "/tmp", false)},
		Resources: res("250m", "256Mi", "2Gi"),
		// the agent's image is not ours: its root file system may need to be writable
		SecurityContext: hardened(false),
	}
	if len(o.AgentCommand) > 0 {
		agent.Command = append([]string{BinDir + "/pab-pod", "agent", "--out", OutDir, "--timeout", o.Timeout.String(), "--"},
			o.AgentCommand...)
	}
	return agent
}

// withAnnotations sets the annotations kv (key, value, key, value...) on m.
// secretEnv are the secretKeyRef variables of ses.
func secretEnv(ses []SecretEnv) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, se := range ses {
		out = append(out, corev1.EnvVar{Name: se.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: se.Secret}, Key: se.Key}}})
	}
	return out
}

func withAnnotations(m metav1.ObjectMeta, kv ...string) metav1.ObjectMeta {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Annotations[kv[i]] = kv[i+1]
	}
	return m
}

// marshal writes obj as YAML (sorted keys, so the same object gives the same bytes),
// without the empty creationTimestamp and status that the API types always carry.
func marshal(obj any) ([]byte, error) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if t := strings.TrimSpace(line); t == "creationTimestamp: null" || (line == "status: {}") {
			continue
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), sc.Err()
}

// Images are image references read from an images file (ReadImages).
type Images struct {
	Replay, Browser string
	// Agent is the reference agent's image (cmd/refagent; kind `agent`); Render does not
	// use it: the agent's image is --agent-image.
	Agent string
	Task  map[string]string
}

// ReadImages reads the images file deploy/build-images.sh writes: one image per line,
// `KIND REFERENCE [DIGEST]`, KIND being `replay`, `browser`, `agent` or `task/<task id>`; blank
// lines and lines starting with '#' are skipped. At most 1 MiB; an unknown kind, a bad
// reference or a kind given twice is an error naming the line.
func ReadImages(r io.Reader) (Images, error) {
	im := Images{Task: map[string]string{}}
	data, err := io.ReadAll(io.LimitReader(r, maxImagesFile+1))
	if err != nil {
		return im, err
	}
	if len(data) > maxImagesFile {
		return im, fmt.Errorf("images file larger than %d bytes", maxImagesFile)
	}
	seen := map[string]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return im, fmt.Errorf("images file line %d: want KIND REFERENCE [DIGEST]", i+1)
		}
		if seen[f[0]] {
			return im, fmt.Errorf("images file line %d: %s given twice", i+1, f[0])
		}
		seen[f[0]] = true
		if err := ValidImage(f[1]); err != nil {
			return im, fmt.Errorf("images file line %d: %w", i+1, err)
		}
		switch {
		case f[0] == "replay":
			im.Replay = f[1]
		case f[0] == "browser":
			im.Browser = f[1]
		case f[0] == "agent":
			im.Agent = f[1]
		case strings.HasPrefix(f[0], "task/"):
			id := strings.TrimPrefix(f[0], "task/")
			if err := task.ValidID(id); err != nil {
				return im, fmt.Errorf("images file line %d: %w", i+1, err)
			}
			im.Task[id] = f[1]
		default:
			return im, fmt.Errorf("images file line %d: unknown kind %q (want replay, browser, agent or task/<id>)", i+1, f[0])
		}
	}
	return im, nil
}

// WriteFiles writes files into dir, creating it (and its parents) when missing. dir may
// not contain a ".." element; every file is written through a temporary file renamed into
// place, and an existing symlink in its place is refused.
func WriteFiles(dir string, files []File) error {
	if dir == "" {
		return errors.New("no output directory")
	}
	for _, el := range strings.Split(filepath.ToSlash(dir), "/") {
		if el == ".." {
			return fmt.Errorf("--out %s: a path with \"..\" is refused; give the directory itself", dir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, f := range files {
		if f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, `/\`) {
			return fmt.Errorf("bad manifest file name %q", f.Name)
		}
		path := filepath.Join(dir, f.Name)
		if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("%s exists and is not a regular file", path)
		}
		if err := atomicfile.Write(path, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
