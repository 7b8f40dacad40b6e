package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pab-dev/pab/internal/runarchive"
)

// fakeCluster writes a kubectl stand-in (a shell script) that answers `get jobs`, `get
// pods` and `logs pod/NAME -c collect` from files, and logs each call.
func fakeCluster(t *testing.T, jobs batchv1.JobList, pods corev1.PodList, logs map[string]string) (Kubectl, string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	write("jobs.json", jobs)
	write("pods.json", pods)
	os.Mkdir(filepath.Join(dir, "logs"), 0o755)
	for pod, log := range logs {
		os.WriteFile(filepath.Join(dir, "logs", pod), []byte(log), 0o644)
	}
	script := `#!/bin/sh
d=` + dir + `
echo "$*" >>$d/calls
while [ $# -gt 0 ]; do case "$1" in --namespace=*) shift ;; *) break ;; esac; done
case "$1 $2" in
"get jobs") cat $d/jobs.json ;;
"get pods") cat $d/pods.json ;;
logs\ pod/*) [ "$3 $4" = "-c collect" ] || { echo "bad container" >&2; exit 1; }
	f=$d/logs/${2#pod/}; [ -f "$f" ] || { echo "Error from server (NotFound)" >&2; exit 1; }; cat "$f" ;;
*) echo "unexpected: $*" >&2; exit 1 ;;
esac
`
	kc := filepath.Join(dir, "kubectl")
	if err := os.WriteFile(kc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return Kubectl{Path: kc, Args: []string{"--namespace=evals"}}, filepath.Join(dir, "calls")
}

func fakeJob(name, task, results string, completions int32, failed string) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{TaskIDAnnotation: task, ResultsAnnotation: results}}}
	j.Spec.Completions = &completions
	if failed != "" {
		j.Status.FailedIndexes = &failed
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
	}
	return j
}

func fakePod(name, job, index string, phase corev1.PodPhase) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{RunIndexAnnotation: index},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: job}}}}
	p.Status.Phase = phase
	if phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	}
	return p
}

func archiveLog(t *testing.T, task string, repeat int, answer string) string {
	t.Helper()
	data, err := runarchive.Build([]runarchive.File{{Name: "answer.txt", Data: []byte(answer)}, {Name: "run.json", Data: []byte(`{"format":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("pab-pod collect: waiting\n")
	runarchive.Emit(&b, task, repeat, data)
	return b.String()
}

// TestCollect: the finished runs come from the collectors' logs into OUT/<task>/<k>; a
// pending pod is not touched; the failed index is reported with its reason and its run
// collected; a damaged or mismatched log fails that run only; a second collect fetches
// nothing again.
func TestCollect(t *testing.T) {
	jobs := batchv1.JobList{Items: []batchv1.Job{fakeJob("b-t1", "t1", "log", 3, "1"), fakeJob("b-t2", "t2", "claim/pab-results", 1, "")}}
	pods := corev1.PodList{Items: []corev1.Pod{
		fakePod("b-t1-0-aaaaa", "b-t1", "0", corev1.PodSucceeded),
		fakePod("b-t1-1-bbbbb", "b-t1", "1", corev1.PodFailed),
		fakePod("b-t1-2-ccccc", "b-t1", "2", corev1.PodRunning),
		fakePod("b-t2-0-ddddd", "b-t2", "0", corev1.PodSucceeded),
		fakePod("other", "not-ours", "0", corev1.PodSucceeded),
	}}
	bad := archiveLog(t, "t1", 1, "x")
	bad = strings.Replace(bad, "\nH4sI", "\nH4sJ", 1) // gzip's magic, changed: the digest no longer holds
	logs := map[string]string{
		"b-t1-0-aaaaa": archiveLog(t, "t1", 1, "answer one"),
		"b-t1-1-bbbbb": archiveLog(t, "t1", 2, "answer two"),
	}
	kc, calls := fakeCluster(t, jobs, pods, logs)
	out := t.TempDir()
	b, res, err := Collect(context.Background(), kc, "b", out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || b.Waiting != 1 {
		t.Fatalf("%d finished runs, %d waiting: %+v", len(res), b.Waiting, res)
	}
	for _, c := range res[:2] {
		if c.Err != nil || !c.Now {
			t.Errorf("%s/%d: %v", c.Task, c.Repeat, c.Err)
		}
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "claim/pab-results") {
		t.Errorf("claim-mode run: %v", res[2].Err)
	}
	for k, want := range map[string]string{"1": "answer one", "2": "answer two"} {
		got, err := os.ReadFile(filepath.Join(out, "t1", k, "answer.txt"))
		if err != nil || string(got) != want {
			t.Errorf("t1/%s: %q %v", k, got, err)
		}
	}
	var st bytes.Buffer
	WriteStatus(&st, b)
	for _, want := range []string{"b-t1", "0/3", "failed: t1/2 (index 1), pod b-t1-1-bbbbb: container agent exited 1", "not collected: t2/1"} {
		if !strings.Contains(st.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, st.String())
		}
	}
	for _, l := range strings.Split(st.String(), "\n") {
		if f := strings.Fields(l); len(f) == 7 && f[0] == "b-t1" && (f[5] != "1" || f[6] != "Failed") {
			t.Errorf("b-t1: failed indexes %q, conditions %q, want 1 and Failed", f[5], f[6])
		}
	}
	before, _ := os.ReadFile(calls)
	if _, res, err = Collect(context.Background(), kc, "b", out); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(calls)
	if n := strings.Count(string(after[len(before):]), "logs "); n != 0 {
		t.Errorf("second collect read %d logs again", n)
	}

	// a damaged log, and a log of another run, fail that run only
	logs["b-t1-0-aaaaa"] = bad
	logs["b-t1-1-bbbbb"] = archiveLog(t, "t1", 3, "wrong index")
	kc, _ = fakeCluster(t, jobs, pods, logs)
	out2 := t.TempDir()
	_, res, err = Collect(context.Background(), kc, "b", out2)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "want t1/2") {
		t.Errorf("damaged %v; mismatched %v", res[0].Err, res[1].Err)
	}
	if entries, _ := os.ReadDir(filepath.Join(out2, "t1")); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if _, _, err := Collect(context.Background(), kc, "Bad_Name", out2); err == nil {
		t.Error("a bad batch name was accepted")
	}
}
