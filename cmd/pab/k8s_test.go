package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

func runK8s(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root, _ := filepath.Abs("../..")
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"--repo", root, "k8s", "render", "--offline"}, args...))
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestK8sRenderCommand(t *testing.T) {
	images := filepath.Join(t.TempDir(), "images.txt")
	os.WriteFile(images, []byte("replay localhost/pab/replay:aa sha256:00\nbrowser localhost/pab/browser:bb\n"+
		"task/books-sapiens-price localhost/pab/task-books-sapiens-price:cc\n"), 0o644)
	stdout, _, err := runK8s(t, "--agent-image", "example.com/agent:1", "--images", images, "--repeat", "4", "--parallelism", "2", "books-sapiens-price")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(stdout, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents", len(docs))
	}
	var np networkingv1.NetworkPolicy
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &np); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &job); err != nil {
		t.Fatal(err)
	}
	ic := job.Spec.Template.Spec.InitContainers
	if *job.Spec.Completions != 4 || *job.Spec.Parallelism != 2 || len(ic) != 4 ||
		ic[0].Image != "localhost/pab/task-books-sapiens-price:cc" || ic[2].Image != "localhost/pab/replay:aa" || ic[3].Image != "localhost/pab/browser:bb" {
		t.Errorf("job %+v", job.Spec)
	}

	// --out writes files; the prefix flag names the task images
	dir := filepath.Join(t.TempDir(), "k8s")
	os.WriteFile(images, []byte("replay localhost/pab/replay:aa\ntask/archive-org-jobs localhost/pab/task-archive-org-jobs:0a1b\n"+
		"task/lil-former-projects localhost/pab/task-lil-former-projects:2c3d\n"), 0o644)
	_, errOut, err := runK8s(t, "--agent-image", "example.com/agent:1", "--images", images,
		"--task-image-prefix", "r/task-", "--out", dir, "archive-org-jobs", "lil-former-projects")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"networkpolicy.yaml", "job-archive-org-jobs.yaml", "job-lil-former-projects.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil || !strings.Contains(errOut, name) {
			t.Errorf("%s: %v (%s)", name, err, errOut)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "job-lil-former-projects.yaml"))
	if !strings.Contains(string(data), "image: r/task-lil-former-projects:2c3d\n") {
		t.Errorf("task image not from the prefix:\n%s", data)
	}
}

func TestK8sRenderCommandBadInput(t *testing.T) {
	images := filepath.Join(t.TempDir(), "images.txt")
	os.WriteFile(images, []byte("replay r/replay:1\ntask/archive-org-jobs r/task-archive-org-jobs:77\n"), 0o644)
	base := []string{"--agent-image", "example.com/agent:1", "--images", images}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"no-such-task"}, "unknown task"},
		{[]string{"--parallelism", "0", "archive-org-jobs"}, "--parallelism 0"},
		{[]string{"--agent-image", "BAD IMAGE", "archive-org-jobs"}, "bad image name"},
		{[]string{"--out", "x/../../etc", "archive-org-jobs"}, `".."`},
		{[]string{"--images", "/no/such/file", "archive-org-jobs"}, "--images"},
		{[]string{"--replay-image", "r/replay:1", "--images", "", "--task-image-prefix", "r/task-", "archive-org-jobs"}, "content tag"},
		{[]string{"--secret-env", "KEY=secret", "archive-org-jobs"}, "NAME=SECRET/KEY"},
		{[]string{"--secret-env", "PAB_PROXY=s/k", "archive-org-jobs"}, "the run's own variable"},
		{[]string{"--agent-env", "1X=y", "archive-org-jobs"}, "NAME=VALUE"},
		{[]string{"--gateway-port", "80", "archive-org-jobs"}, "without --gateway-image"},
	}
	for _, c := range cases {
		_, _, err := runK8s(t, append(append([]string{}, base...), c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestK8sRenderBatchTaken: render asks the cluster (kubectl) whether the batch name is
// taken; a taken name is refused with a message naming --replace, --replace renders it
// and says to delete the old batch first, and a cluster that cannot be asked is an error
// naming --offline.
func TestK8sRenderBatchTaken(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubectl")
	os.WriteFile(kc, []byte("#!/bin/sh\necho \"$*\" >>"+dir+"/calls\ncase \"$*\" in *pab.dev/batch=exp1*) echo job.batch/exp1-archive-org-jobs ;; esac\n"), 0o755)
	images := filepath.Join(dir, "images.txt")
	os.WriteFile(images, []byte("replay r/replay:1\ntask/archive-org-jobs r/task-archive-org-jobs:77\n"), 0o644)
	root, _ := filepath.Abs("../..")
	run := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--repo", root, "k8s", "render", "--kubectl", kc, "--agent-image", "a/agent:1", "--images", images,
			"--namespace", "evals", "--out", filepath.Join(dir, "out")}, append(args, "archive-org-jobs")...))
		err := cmd.Execute()
		return errOut.String(), err
	}
	if _, err := run("--batch", "exp1"); err == nil || !strings.Contains(err.Error(), "--replace") || !strings.Contains(err.Error(), "job.batch/exp1-archive-org-jobs") {
		t.Errorf("taken batch: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("a refused render wrote files")
	}
	if stderr, err := run("--batch", "exp1", "--replace"); err != nil || !strings.Contains(stderr, "kubectl delete jobs,deployments,services,networkpolicies -l pab.dev/batch=exp1") {
		t.Errorf("--replace: %v\n%s", err, stderr)
	}
	if _, err := run("--batch", "exp2"); err != nil {
		t.Errorf("a free batch name: %v", err)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if !strings.Contains(string(calls), "--namespace=evals get jobs,deployments,services -l=pab.dev/batch=exp2 -o name") {
		t.Errorf("kubectl calls:\n%s", calls)
	}
	os.WriteFile(kc, []byte("#!/bin/sh\necho 'The connection to the server localhost:8080 was refused' >&2\nexit 1\n"), 0o755)
	if _, err := run("--batch", "exp3"); err == nil || !strings.Contains(err.Error(), "--offline") || !strings.Contains(err.Error(), "connection to the server") {
		t.Errorf("no cluster: %v", err)
	}
}
