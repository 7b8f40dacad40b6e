package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/proctest"
	"github.com/pab-dev/pab/internal/runarchive"
	"github.com/pab-dev/pab/internal/testtool"
)

func TestPodCopyTree(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "recording"), 0o755)
	os.WriteFile(filepath.Join(src, "task.yaml"), []byte("id: x\n"), 0o644)
	os.WriteFile(filepath.Join(src, "recording", "warc.tar.gz"), bytes.Repeat([]byte{1}, 100000), 0o644)
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	dst := filepath.Join(t.TempDir(), "tasks", "x")
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dst, "recording", "warc.tar.gz"))
	if err != nil || len(data) != 100000 {
		t.Fatalf("copied %d bytes, %v", len(data), err)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "run.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", fi.Mode())
	}
	if err := copyTree(src, dst); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second copy: %v", err)
	}
	// a symlink is refused and nothing is left behind
	os.Symlink("/etc/passwd", filepath.Join(src, "rules"))
	dst2 := filepath.Join(filepath.Dir(dst), "y")
	if err := copyTree(src, dst2); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("symlink: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestPodInstallTask(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "task.yaml"), []byte("id: x\n"), 0o644)
	dir := t.TempDir()
	t.Setenv("PAB_PROMPT", "What does it cost?")
	err := installTask([]string{src, filepath.Join(dir, "x"), "--bin", dir, "--prompt-file", filepath.Join(dir, "out", "prompt.txt")})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := os.ReadFile(filepath.Join(dir, "out", "prompt.txt")); string(p) != "What does it cost?" {
		t.Errorf("prompt %q", p)
	}
	if fi, err := os.Stat(filepath.Join(dir, "pab-pod")); err != nil || fi.Mode().Perm() != 0o755 || fi.Size() == 0 {
		t.Errorf("self copy: %v %v", fi, err)
	}
	if err := installTask([]string{src}); err == nil {
		t.Error("one argument accepted")
	}
}

func TestPodCopyRun(t *testing.T) {
	out, logDir, results := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("PAB_TASK_ID", "books-sapiens-price")
	t.Setenv("PAB_RUN_INDEX", "2")
	task, repeat, dir, err := runDir(results)
	if err != nil || task != "books-sapiens-price" || repeat != 3 || dir != filepath.Join(results, "books-sapiens-price", "3") {
		t.Fatalf("%s %d %s %v", task, repeat, dir, err)
	}
	os.WriteFile(filepath.Join(logDir, "replay.jsonl"), []byte("{\"a\":1}\n{\"a\":2}\n{\"a\":"), 0o644)
	os.WriteFile(filepath.Join(out, "answer.txt"), bytes.Repeat([]byte("x"), 3<<20), 0o644)
	os.WriteFile(filepath.Join(out, "agent.json"), []byte(`{"exit_code":-1,"signal":"SIGKILL","timed_out":true,"started":"s","ended":"e"}`), 0o644)
	if err := copyRun(out, logDir, dir, task, repeat); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "replay.jsonl")); string(log) != "{\"a\":1}\n{\"a\":2}\n" {
		t.Errorf("log %q: want the complete lines only", log)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "answer.txt")); fi.Size() != maxAnswer {
		t.Errorf("answer copied %d bytes, want %d (one more than pab grades)", fi.Size(), maxAnswer)
	}
	if _, err := os.Stat(filepath.Join(dir, "agent.stdout")); !os.IsNotExist(err) {
		t.Errorf("agent.stdout made up: %v", err)
	}
	var run map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, "run.json"))
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	if run["task"] != "books-sapiens-price" || run["repeat"] != 3.0 || run["format"] != 1.0 || run["exit_code"] != -1.0 || run["signal"] != "SIGKILL" || run["timed_out"] != true {
		t.Errorf("run.json %s", data)
	}
	// no files at all: still a run.json, no answer (the no_answer status)
	empty := filepath.Join(results, "books-sapiens-price", "4")
	if err := copyRun(t.TempDir(), t.TempDir(), empty, task, 4); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(empty)
	if len(entries) != 1 || entries[0].Name() != "run.json" {
		t.Errorf("empty run: %v", entries)
	}
	for _, bad := range [][2]string{{"../x", "0"}, {"ok", "-1"}, {"ok", "x"}, {"", "0"}} {
		t.Setenv("PAB_TASK_ID", bad[0])
		t.Setenv("PAB_RUN_INDEX", bad[1])
		if _, _, _, err := runDir(results); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestPodAgent(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		testtool.Missing(t, "no sh on PATH")
	}
	var so, se bytes.Buffer
	res := runAgent([]string{"sh", "-c", "echo out; echo err >&2; exit 3"}, 0, &so, &se)
	if res.ExitCode != 3 || res.TimedOut || so.String() != "out\n" || se.String() != "err\n" || res.Started == "" || res.Ended == "" {
		t.Errorf("%+v %q %q", res, so.String(), se.String())
	}
	// a hanging agent with a child that ignores SIGTERM: the whole group is killed
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	start := time.Now()
	res = runAgent([]string{"sh", "-c", "sh -c 'trap \"\" TERM; echo $$ > " + pidFile + "; sleep 60' & sleep 60"}, 500*time.Millisecond, &so, &se)
	if !res.TimedOut || res.ExitCode != -1 || res.Signal == "" {
		t.Errorf("timeout: %+v", res)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %s", d)
	}
	pid, _ := os.ReadFile(pidFile)
	if p := strings.TrimSpace(string(pid)); p == "" {
		t.Error("the child did not start")
	} else if n, _ := strconv.Atoi(p); !proctest.GoneWithin(n, 5*time.Second) {
		t.Errorf("child %s outlived the agent", p)
	}
	res = runAgent([]string{filepath.Join(dir, "no-such-agent")}, 0, &so, &se)
	if res.ExitCode != 127 {
		t.Errorf("missing command: %+v", res)
	}
	// the agent subcommand writes agent.stdout, agent.stderr and agent.json
	code, err := agent([]string{"--out", dir, "--timeout", "10s", "--", "sh", "-c", "echo hi"})
	if err != nil || code != 0 {
		t.Fatal(code, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "agent.stdout")); string(b) != "hi\n" {
		t.Errorf("agent.stdout %q", b)
	}
	var a agentResult
	b, _ := os.ReadFile(filepath.Join(dir, "agent.json"))
	if err := json.Unmarshal(b, &a); err != nil || a.ExitCode != 0 {
		t.Errorf("agent.json %s %v", b, err)
	}
}

func TestPodProbe(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.String() == "http://rr.control/health" {
			w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	}))
	defer ok.Close()
	if err := probe([]string{ok.URL + "/health"}); err != nil {
		t.Error(err)
	}
	if err := probe([]string{ok.URL + "/nope"}); err == nil {
		t.Error("404 passed")
	}
	// through a proxy: the request line carries the absolute URL
	if err := probe([]string{"http://rr.control/health", "--proxy", strings.TrimPrefix(ok.URL, "http://")}); err != nil {
		t.Error(err)
	}
	ok.Close()
	if err := probe([]string{ok.URL + "/health"}); err == nil {
		t.Error("a closed port passed")
	}
}

// TestPodEmitRun: the run archive collect --emit-log writes to its log holds the same
// files, byte for byte, as the run directory collect --results writes; a replay log too
// large for the archive gives a too-large line that runarchive.Read reports.
func TestPodEmitRun(t *testing.T) {
	out, logDir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(logDir, "replay.jsonl"), []byte("{\"a\":1}\n{\"a\":2}\n{\"a\":"), 0o644)
	os.WriteFile(filepath.Join(out, "answer.txt"), []byte("£12.99"), 0o644)
	os.WriteFile(filepath.Join(out, "prompt.txt"), []byte("find the price"), 0o644)
	os.WriteFile(filepath.Join(out, "agent.stdout"), bytes.Repeat([]byte("line\n"), 1000), 0o644)
	os.WriteFile(filepath.Join(out, "agent.json"), []byte(`{"exit_code":3,"signal":"","timed_out":false,"started":"s","ended":"e"}`), 0o644)
	dir := filepath.Join(t.TempDir(), "t", "1")
	if err := copyRun(out, logDir, dir, "books-sapiens-price", 1); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := emitRun(&log, out, logDir, "books-sapiens-price", 1); err != nil {
		t.Fatal(err)
	}
	a, err := runarchive.Read(&log, 32<<20)
	if err != nil {
		t.Fatal(err)
	}
	if a.Task != "books-sapiens-price" || a.Repeat != 1 {
		t.Fatalf("archive of %s/%d", a.Task, a.Repeat)
	}
	files, err := runarchive.Unpack(a.Data)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(files) {
		t.Fatalf("archive has %d files, the run directory %d", len(files), len(entries))
	}
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil || !bytes.Equal(want, f.Data) {
			t.Errorf("%s: archive %q, directory %q (%v)", f.Name, f.Data, want, err)
		}
	}
	big, err := os.Create(filepath.Join(logDir, "replay.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(maxEmitLog + 1)
	big.Close()
	log.Reset()
	if err := emitRun(&log, out, logDir, "books-sapiens-price", 1); err == nil {
		t.Fatal("a replay log over the bound was emitted")
	}
	if _, err := runarchive.Read(&log, 1<<20); err == nil || !strings.Contains(err.Error(), "--results-claim") {
		t.Fatalf("too large: %v, want an error naming --results-claim", err)
	}
}
