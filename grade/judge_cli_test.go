package grade

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeJudgeScript writes an executable sh script into dir and returns its path.
func writeJudgeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func newTestCLIJudge(t *testing.T, cfg JudgeConfig) Judge {
	t.Helper()
	cfg.Kind = "cli"
	j, err := NewJudge(cfg)
	if err != nil {
		t.Fatalf("NewJudge: %v", err)
	}
	return j
}

func TestJudgeCLIAnswers(t *testing.T) {
	dir := t.TempDir()
	stdinCopy := filepath.Join(dir, "stdin.txt")
	script := writeJudgeScript(t, dir, "judge.sh", `
cat > "$1"
printf '\n   PASS (model=%s, arg=%s)  \n\n' "$PAB_JUDGE_MODEL" "$2"
`)
	cmd := judgeShellQuote(script) + " " + judgeShellQuote(stdinCopy) + " 'two words'"
	j := newTestCLIJudge(t, JudgeConfig{Command: cmd, Model: "judge-model-1"})
	if j.Name() != "cli/"+cmd {
		t.Errorf("Name() = %q", j.Name())
	}
	prompt := "Line one\nline two with 'quotes' and $HOME and `backticks`\n\n  trailing spaces  \n"
	r, err := j.Ask(judgeCtx(t), prompt)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if want := "PASS (model=judge-model-1, arg=two words)"; r.Text != want {
		t.Errorf("Text = %q, want %q", r.Text, want)
	}
	if r.Model != "judge-model-1" {
		t.Errorf("Model = %q", r.Model)
	}
	got, err := os.ReadFile(stdinCopy)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != prompt {
		t.Errorf("script read stdin %q, want the prompt %q", got, prompt)
	}
}

func TestJudgeCLIEnvironmentPassesThrough(t *testing.T) {
	t.Setenv("PAB_JUDGE_TEST_VAR", "from-parent")
	dir := t.TempDir()
	script := writeJudgeScript(t, dir, "env.sh", `cat >/dev/null; echo "var=$PAB_JUDGE_TEST_VAR model=${PAB_JUDGE_MODEL-unset}"`)
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(script)})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "var=from-parent model=unset" {
		t.Errorf("Text = %q, want the parent's variable and no PAB_JUDGE_MODEL without a model", r.Text)
	}
}

func TestJudgeCLIExitStatus(t *testing.T) {
	dir := t.TempDir()
	script := writeJudgeScript(t, dir, "fail.sh", `cat >/dev/null
echo "partial answer"
echo "first line of stderr" >&2
echo "rate limited: try later" >&2
exit 3
`)
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(script)})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil {
		t.Fatal("Ask succeeded with exit status 3")
	}
	for _, s := range []string{j.Name(), script, "exit status 3", "rate limited: try later"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestJudgeCLIStderrTailBounded(t *testing.T) {
	dir := t.TempDir()
	// 100 KB of stderr, then a marker; only the last 4 KiB are kept.
	script := writeJudgeScript(t, dir, "noisy.sh", `cat >/dev/null
i=0; while [ $i -lt 2000 ]; do echo "noise line $i ................................" >&2; i=$((i+1)); done
echo "FINAL-MARKER" >&2
exit 1
`)
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(script)})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil {
		t.Fatal("Ask succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "FINAL-MARKER") {
		t.Errorf("error lacks the end of stderr: %q", judgeClip(msg, 300))
	}
	if strings.Contains(msg, "noise line 0 ") {
		t.Errorf("error kept the start of 100 KB of stderr")
	}
	if len(msg) > judgeCLIStderrTail+1024 {
		t.Errorf("error is %d bytes, want the stderr tail bounded to %d", len(msg), judgeCLIStderrTail)
	}
}

func TestJudgeCLITimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := writeJudgeScript(t, dir, "slow.sh", `
sleep 30 &
echo $! > "$1.tmp" && mv "$1.tmp" "$1"
sleep 30
echo "too late"
`)
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(script) + " " + judgeShellQuote(pidFile), Timeout: 700 * time.Millisecond})
	start := time.Now()
	_, err := j.Ask(judgeCtx(t), "p")
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Ask succeeded past its timeout")
	}
	if !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), j.Name()) {
		t.Errorf("error %q, want a timeout naming the judge", err)
	}
	if elapsed > 10*time.Second {
		t.Errorf("Ask took %v with a 700ms timeout", elapsed)
	}
	data, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatalf("the script did not record its child: %v", rerr)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(data)))
	if perr != nil || pid <= 0 {
		t.Fatalf("bad child pid %q", data)
	}
	deadline := time.Now().Add(5 * time.Second)
	for judgeProcessAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL) // clean up before failing
			t.Fatalf("child process %d of the timed-out judge is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// judgeProcessAlive reports whether pid exists and is not a zombie.
func judgeProcessAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return !errors.Is(err, syscall.ESRCH)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// Field 3, after "(comm)", is the state; Z is a zombie (dead, not yet reaped).
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func TestJudgeCLICallerCancel(t *testing.T) {
	dir := t.TempDir()
	script := writeJudgeScript(t, dir, "slow.sh", "sleep 30\n")
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(script)})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := j.Ask(ctx, "p")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancel took %v", d)
	}
}

func TestJudgeCLIOutputLimit(t *testing.T) {
	dir := t.TempDir()
	exact := writeJudgeScript(t, dir, "exact.sh", `cat >/dev/null; head -c 1048576 /dev/zero | tr '\0' 'a'`)
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(exact)})
	r, err := j.Ask(judgeCtx(t), "p")
	if err != nil {
		t.Fatalf("exactly 1 MiB of output: %v", err)
	}
	if len(r.Text) != 1<<20 {
		t.Errorf("read %d bytes, want %d", len(r.Text), 1<<20)
	}

	big := writeJudgeScript(t, dir, "big.sh", `cat >/dev/null; head -c 1048577 /dev/zero | tr '\0' 'a'; sleep 30`)
	j = newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(big)})
	start := time.Now()
	_, err = j.Ask(judgeCtx(t), "p")
	if err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Fatalf("err = %v, want an output-too-large error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("oversized output took %v to stop; the process group should be killed at once", d)
	}
}

func TestJudgeCLIEmptyOutput(t *testing.T) {
	dir := t.TempDir()
	script := writeJudgeScript(t, dir, "quiet.sh", "cat >/dev/null; echo '   '; echo 'warming up' >&2\n")
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(script)})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil || !strings.Contains(err.Error(), "printed nothing") || !strings.Contains(err.Error(), "warming up") {
		t.Fatalf("err = %v, want an empty-output error with the stderr tail", err)
	}
}

func TestJudgeCLIMissingCommand(t *testing.T) {
	j := newTestCLIJudge(t, JudgeConfig{Command: "/nonexistent/pab-judge-xyz"})
	_, err := j.Ask(judgeCtx(t), "p")
	if err == nil || !strings.Contains(err.Error(), "exit status 127") || !strings.Contains(err.Error(), "/nonexistent/pab-judge-xyz") {
		t.Fatalf("err = %v, want exit status 127 naming the command", err)
	}
}

func TestJudgeShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"claude-opus-5-5": "claude-opus-5-5",
		"":                "''",
		"a b":             "'a b'",
		"it's":            `'it'\''s'`,
		"$(rm -rf /)":     "'$(rm -rf /)'",
	} {
		if got := judgeShellQuote(in); got != want {
			t.Errorf("judgeShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// A judge that answers and exits but leaves a background child holding stdout: the reply
// is used at once and the child is killed with the group.
func TestJudgeCLIBackgroundChildKilled(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := writeJudgeScript(t, dir, "bg.sh", `
( sleep 300 ) &
echo $! > "$1.tmp" && mv "$1.tmp" "$1"
echo '{"answer": "yes", "reason": "ok"}'
`)
	j := newTestCLIJudge(t, JudgeConfig{Command: judgeShellQuote(script) + " " + judgeShellQuote(pidFile), Timeout: 20 * time.Second})
	start := time.Now()
	rep, err := j.Ask(judgeCtx(t), "p")
	if err != nil || rep.Text != `{"answer": "yes", "reason": "ok"}` {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Ask took %v: it waited for the background child", el)
	}
	data, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 {
		t.Fatalf("bad child pid %q", data)
	}
	deadline := time.Now().Add(5 * time.Second)
	for judgeProcessAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("background child %d outlived the judge", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
