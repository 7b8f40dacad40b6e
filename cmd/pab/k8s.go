//go:build !pab_lite

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/k8s"
)

func newK8sCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Kubernetes manifests for batches of runs",
		Long:  "Kubernetes manifests for batches of runs (docs/deploy.md).",
		Example: `  deploy/build-images.sh --images-file images.txt   # builds the images (podman)
  pab k8s render --images images.txt --agent-image my-agent:1 --repeat 3 \
    books-sapiens-price > batch.yaml
  kubectl apply -f batch.yaml`,
	}
	cmd.AddCommand(newK8sRenderCmd(g), newK8sCollectCmd(), newK8sStatusCmd())
	return cmd
}

// kubectlFlags are the flags of the commands that talk to a cluster through kubectl.
type kubectlFlags struct {
	path, kubeconfig, context, namespace string
	timeout                              time.Duration
}

func (k *kubectlFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.path, "kubectl", "kubectl", "the kubectl binary (it brings your kubeconfig and credential plugins)")
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "kubectl's --kubeconfig")
	f.StringVar(&k.context, "context", "", "kubectl's --context")
	f.StringVarP(&k.namespace, "namespace", "n", "", "the batch's namespace (default: kubectl's)")
	f.DurationVar(&k.timeout, "kubectl-timeout", 2*time.Minute, "time limit of each kubectl call")
}

func (k *kubectlFlags) kubectl() k8s.Kubectl {
	kc := k8s.Kubectl{Path: k.path, Timeout: k.timeout}
	for _, a := range [][2]string{{"--kubeconfig", k.kubeconfig}, {"--context", k.context}, {"--namespace", k.namespace}} {
		if a[1] != "" {
			kc.Args = append(kc.Args, a[0]+"="+a[1])
		}
	}
	return kc
}

func newK8sCollectCmd() *cobra.Command {
	var (
		kf  kubectlFlags
		out string
	)
	cmd := &cobra.Command{
		Use:   "collect BATCH",
		Short: "Fetch a batch's finished runs from its pods' collector logs",
		Long:  longHelp("k8s-collect"),
		Example: `  pab k8s collect -n evals exp1 --out runs/exp1
  pab run --collect runs/exp1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = filepath.Join("runs", args[0])
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			b, res, err := k8s.Collect(cmd.Context(), kf.kubectl(), args[0], out)
			if err != nil {
				return fmt.Errorf("k8s collect: %w", err)
			}
			w := cmd.OutOrStdout()
			now, failed := 0, 0
			for _, c := range res {
				switch {
				case c.Err != nil:
					failed++
					fmt.Fprintf(cmd.ErrOrStderr(), "pab k8s collect: %s/%d (pod %s): %v\n", c.Task, c.Repeat, c.Pod, c.Err)
				case c.Now:
					now++
					fmt.Fprintf(w, "collected %s/%d from pod %s (%s)\n", c.Task, c.Repeat, c.Pod, c.Phase)
				}
			}
			k8s.WriteStatus(w, b)
			fmt.Fprintf(w, "collected %d run(s) now into %s\n", now, out)
			if failed > 0 {
				return fmt.Errorf("k8s collect: %d finished run(s) could not be collected", failed)
			}
			return nil
		},
	}
	kf.add(cmd)
	cmd.Flags().StringVar(&out, "out", "", "the batch's run directory: runs go to OUT/<task>/<k>/ (default runs/BATCH)")
	return cmd
}

func newK8sStatusCmd() *cobra.Command {
	var (
		kf  kubectlFlags
		out string
	)
	cmd := &cobra.Command{
		Use:     "status BATCH",
		Short:   "Show a batch's Jobs, failed indexes and runs not yet collected",
		Long:    longHelp("k8s-status"),
		Example: `  pab k8s status -n evals exp1 --out runs/exp1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = filepath.Join("runs", args[0])
			}
			b, err := k8s.Status(cmd.Context(), kf.kubectl(), args[0], out)
			if err != nil {
				return fmt.Errorf("k8s status: %w", err)
			}
			k8s.WriteStatus(cmd.OutOrStdout(), b)
			return nil
		},
	}
	kf.add(cmd)
	cmd.Flags().StringVar(&out, "out", "", "the directory pab k8s collect writes (default runs/BATCH): its runs count as collected")
	return cmd
}

func newK8sRenderCmd(g *globalFlags) *cobra.Command {
	var (
		o            k8s.Options
		imagesFile   string
		taskPrefix   string
		agentCommand []string
		out          string
		secretEnv    []string
		agentEnv     []string
		gwSecretEnv  []string
		kf           kubectlFlags
		offline      bool
		replace      bool
	)
	cmd := &cobra.Command{
		Use:   "render --agent-image IMG (--images FILE | --replay-image IMG --task-image-prefix P) [TASK...]",
		Short: "Write the manifests that run an agent on tasks in a Kubernetes cluster",
		Long:  longHelp("k8s-render"),
		Example: `  pab k8s render --images deploy/out/images.txt --agent-image registry.example.com/my-agent:1 \
    --agent-command /agent --repeat 5 --parallelism 3 --out k8s-out books-sapiens-price
  kubectl apply -f k8s-out/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, err := g.findRepo()
			if err != nil {
				return err
			}
			o.Repo, o.AgentCommand = repo, agentCommand
			var im *k8s.Images
			if imagesFile != "" {
				f, err := os.Open(imagesFile)
				if err != nil {
					return fmt.Errorf("--images: %w", err)
				}
				read, err := k8s.ReadImages(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("--images %s: %w", imagesFile, err)
				}
				im = &read
			}
			o.Tasks = args
			if len(o.Tasks) == 0 {
				if o.Tasks, err = repo.TaskIDs(); err != nil {
					return err
				}
				if len(o.Tasks) == 0 {
					return fmt.Errorf("no tasks in %s", repo.TasksDir())
				}
			}
			o.SetImages(im, taskPrefix)
			for _, v := range secretEnv {
				se, err := k8s.ParseSecretEnv(v)
				if err != nil {
					return fmt.Errorf("--secret-env %w", err)
				}
				o.SecretEnv = append(o.SecretEnv, se)
			}
			for _, v := range gwSecretEnv {
				se, err := k8s.ParseSecretEnv(v)
				if err != nil {
					return fmt.Errorf("--gateway-secret-env %w", err)
				}
				o.Gateway.SecretEnv = append(o.Gateway.SecretEnv, se)
			}
			for _, v := range agentEnv {
				e, err := k8s.ParseEnv(v)
				if err != nil {
					return fmt.Errorf("--agent-env %w", err)
				}
				o.AgentEnv = append(o.AgentEnv, e)
			}
			files, err := k8s.Render(o)
			if err != nil {
				return fmt.Errorf("k8s render: %w", err)
			}
			if !offline {
				kf.namespace = o.Namespace
				objs, err := k8s.BatchObjects(cmd.Context(), kf.kubectl(), o.Batch)
				if err != nil {
					return fmt.Errorf("k8s render: checking whether batch %s exists in the cluster: %w (give --offline to render without asking the cluster)", o.Batch, err)
				}
				if len(objs) > 0 && !replace {
					return fmt.Errorf("k8s render: batch %s exists in the cluster (%s): give another --batch, or --replace and delete it before you apply (kubectl delete jobs,deployments,services,networkpolicies -l pab.dev/batch=%s)", o.Batch, strings.Join(objs, ", "), o.Batch)
				}
				if len(objs) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "pab k8s render: batch %s exists (%s); delete it before you apply: kubectl delete jobs,deployments,services,networkpolicies -l pab.dev/batch=%s --wait\n", o.Batch, strings.Join(objs, ", "), o.Batch)
				}
			}
			if out == "" {
				return k8s.WriteStream(cmd.OutOrStdout(), files)
			}
			if err := k8s.WriteFiles(out, files); err != nil {
				return fmt.Errorf("k8s render: %w", err)
			}
			for _, f := range files {
				fmt.Fprintf(cmd.ErrOrStderr(), "pab k8s render: wrote %s/%s\n", out, f.Name)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.AgentImage, "agent-image", "", "the agent's container image (required)")
	f.StringSliceVar(&agentCommand, "agent-command", nil, "run the agent as this command (comma-separated arguments) through pab-pod, which records its exit and output and enforces --timeout; default: the image's entrypoint")
	f.IntVar(&o.Repeat, "repeat", 1, "runs per task (the completions of its Job)")
	f.IntVar(&o.Parallelism, "parallelism", 1, "pods of one task's Job that run at once")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of every object (default: kubectl's)")
	f.BoolVar(&o.AllowDNS, "allow-dns", false, "let the pods query kube-dns (port 53); nothing else leaves the pod")
	f.StringVar(&o.ReplayImage, "replay-image", "", "pab's replay image (default: from --images)")
	f.StringVar(&o.BrowserImage, "browser-image", "", "pab's browser image (default: from --images; none: no browser in the pods)")
	f.StringVar(&taskPrefix, "task-image-prefix", "", "task image of task T is PREFIX+T (e.g. registry.example.com/pab/task-); overrides --images")
	f.StringVar(&imagesFile, "images", "", "the images file written by deploy/build-images.sh")
	f.StringVar(&o.Batch, "batch", "pab", "batch name: Job names, labels and the results subdirectory")
	f.StringVar(&o.ResultsClaim, "results-claim", "", "copy the runs to this PersistentVolumeClaim (RWX, or RWO on one node); default none: each pod's collector writes its run to its log, and pab k8s collect fetches it")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "the agent's time limit (with --agent-command); the pod's deadline is 15 minutes more")
	f.StringVar(&out, "out", "", "write the manifests into this directory (default: stdout)")
	f.StringArrayVar(&secretEnv, "secret-env", nil, "NAME=SECRET/KEY: the agent container's variable NAME from key KEY of Secret SECRET (secretKeyRef; the agent only; repeatable)")
	f.StringArrayVar(&agentEnv, "agent-env", nil, "NAME=VALUE: a literal variable of the agent container (e.g. a model endpoint; repeatable)")
	f.DurationVar(&o.TTL, "ttl", 72*time.Hour, "ttlSecondsAfterFinished of the Jobs: they and their pods (with uncollected runs) are deleted this long after they finished; 0: never")
	f.StringArrayVar(&o.ImagePullSecrets, "image-pull-secret", nil, "a docker-registry Secret the kubelet pulls the images with (repeatable)")
	f.StringVar(&o.Gateway.Image, "gateway-image", "", "render gateway.yaml: a model gateway Deployment and Service with this image, and a NetworkPolicy letting the pods reach it and nothing else; the agent gets its URL in $PAB_MODEL_GATEWAY")
	f.IntVar(&o.Gateway.Port, "gateway-port", 0, "the gateway's HTTP port (default 4000)")
	f.StringSliceVar(&o.Gateway.Args, "gateway-args", nil, "arguments of the gateway's container (comma-separated)")
	f.StringArrayVar(&gwSecretEnv, "gateway-secret-env", nil, "NAME=SECRET/KEY: a variable of the gateway from a Secret (the provider's API key; repeatable)")
	f.BoolVar(&offline, "offline", false, "do not ask the cluster (kubectl) whether the batch name is taken")
	f.BoolVar(&replace, "replace", false, "render a batch whose name exists in the cluster (delete it before you apply)")
	f.StringVar(&kf.path, "kubectl", "kubectl", "the kubectl that checks the batch name")
	f.StringVar(&kf.kubeconfig, "kubeconfig", "", "kubectl's --kubeconfig")
	f.StringVar(&kf.context, "context", "", "kubectl's --context")
	kf.timeout = 30 * time.Second
	return cmd
}
