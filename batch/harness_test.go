package batch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/task"
)

// localRepo is the repository of this source tree, with the cache and CA in a temporary
// directory.
func localRepo(t *testing.T) *task.Repo {
	t.Helper()
	t.Setenv("PAB_CACHE", t.TempDir())
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return &task.Repo{Root: root}
}

// TestLocalStartAndGrade opens a shipped task through Local, starts its replay on
// loopback, sends a request through the proxy, stops it and grades the log it wrote with
// the stand-in judge of docs/examples.
func TestLocalStartAndGrade(t *testing.T) {
	repo := localRepo(t)
	judge := grade.JudgeOptions{Samples: 1, NoCache: true,
		JudgeConfig: grade.JudgeConfig{Kind: "cli", Command: filepath.Join(repo.Root, "docs", "examples", "judge.sh")}}
	opened := 0
	var warn bytes.Buffer
	h := &Local{Repo: repo, Clock: true, Warn: &warn, Samples: 1,
		OpenJudge: func() (*grade.Cache, error) { opened++; return judge.Open(t.TempDir()) }}
	ctx := context.Background()
	tk, err := h.OpenTask(ctx, "books-sapiens-price")
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if !strings.Contains(tk.Prompt(), "Sapiens") {
		t.Errorf("prompt %q does not name the book", tk.Prompt())
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "replay.jsonl")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tk.Start(ctx, StartSpec{Task: "books-sapiens-price", Repeat: 1, Dir: dir, Log: lf})
	if err != nil {
		t.Fatal(err)
	}
	if svc.CDPURL != "" || svc.MCPURL != "" || svc.CAFile == "" || svc.CASPKI == "" {
		t.Errorf("services %+v: want a replay only, with its CA", svc)
	}
	proxy, _ := url.Parse("http://" + svc.Proxy)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	resp, err := c.Get("http://books.toscrape.com/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("Books to Scrape")) {
		t.Errorf("GET through the replay: %d, %d bytes", resp.StatusCode, len(body))
	}
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	ans := filepath.Join(repo.Root, "docs", "examples", "books-sapiens-price", "wrong", "answer.txt")
	answer, err := grade.ReadAnswer(ans)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tk.Grade(ctx, logPath, answer)
	if err != nil {
		t.Fatal(err)
	}
	if answer.File != "answer.txt" || res.Task != "books-sapiens-price" || len(res.Pages.Opened) != 1 {
		t.Errorf("answer file %q, task %q, pages opened %v", answer.File, res.Task, res.Pages.Opened)
	}
	if res.Provenance == nil || res.Provenance.Recording == "" {
		t.Errorf("provenance %+v: want the recording's hash", res.Provenance)
	}
	if opened != 1 {
		t.Errorf("judge opened %d times, want 1", opened)
	}
	if res.Status != grade.StatusScored {
		t.Errorf("status %s, notes %q", res.Status, res.Notes)
	}
	if warn.Len() > 0 {
		t.Errorf("warnings: %s", warn.String())
	}
}

// TestLocalGuardExits starts a "guard" that exits at once (sh, which refuses pab guard's
// arguments) and checks that Start says so with the last line of its stderr, and leaves
// no replay running.
func TestLocalGuardExits(t *testing.T) {
	repo := localRepo(t)
	sh, err := filepath.Abs("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	h := &Local{Repo: repo, Warn: io.Discard, Samples: 1, GuardApp: filepath.Join(repo.Root, "README.md"), PabExe: sh,
		OpenJudge: func() (*grade.Cache, error) { t.Error("judge opened"); return nil, nil }}
	tk, err := h.OpenTask(context.Background(), "books-sapiens-price")
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	dir := t.TempDir()
	svc, err := tk.Start(context.Background(), StartSpec{Dir: dir, Log: io.Discard})
	if err == nil {
		svc.Stop()
		t.Fatal("Start succeeded with a guard that exits")
	}
	tail, _ := os.ReadFile(filepath.Join(dir, "guard.stderr"))
	last := lastLine(string(tail))
	if last == "" || !strings.HasPrefix(err.Error(), "guard exited (") || !strings.HasSuffix(err.Error(), "before serving MCP: "+last) {
		t.Errorf("Start: %v; guard.stderr %q", err, tail)
	}
}

// TestBatchFieldErrors: bad counts and a bad Out are *grade.FieldError naming the field and
// showing the value, so that pab run can name its flag.
func TestBatchFieldErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	base := Config{Harness: &Local{}, Tasks: []string{"t"}, Repeat: 1, Jobs: 1, Agent: "true", Out: t.TempDir()}
	for _, tc := range []struct {
		edit         func(*Config)
		field, named string
	}{
		{func(c *Config) { c.Repeat = 0 }, "Repeat", "run: --repeat 0: want at least 1"},
		{func(c *Config) { c.Jobs = -2 }, "Jobs", "run: --jobs -2: want at least 1"},
		{func(c *Config) { c.Agent = " " }, "Agent", "run: --agent: the agent command is required"},
		{func(c *Config) { c.Out = filepath.Join(file, "x") }, "Out", "run: --out: mkdir " + file + ": not a directory"},
	} {
		cfg := base
		tc.edit(&cfg)
		_, err := Batch(context.Background(), cfg)
		var fe *grade.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Batch = %v, want a FieldError on %s", tc.field, err, tc.field)
			continue
		}
		if got := strings.Replace(err.Error(), fe.Error(), fe.Named("--"+strings.ToLower(tc.field)), 1); got != tc.named {
			t.Errorf("%s: named %q, want %q", tc.field, got, tc.named)
		}
	}
}

// TestRepoTasksAndUseGuard: the task list defaults to the repository's tasks, refuses ids
// that are not tasks of it, and UseGuard refuses a missing application file naming the
// field.
func TestRepoTasksAndUseGuard(t *testing.T) {
	repo := localRepo(t)
	all, err := RepoTasks(repo, nil)
	if err != nil || !slices.Contains(all, "books-sapiens-price") {
		t.Errorf("RepoTasks(nil) = %v, %v; want the repository's tasks", all, err)
	}
	if got, err := RepoTasks(repo, []string{"archive-org-jobs"}); err != nil || !slices.Equal(got, []string{"archive-org-jobs"}) {
		t.Errorf("RepoTasks(archive-org-jobs) = %v, %v", got, err)
	}
	for id, want := range map[string]string{"../x": "run: bad task id", "nosuch": `run: no task "nosuch"`} {
		if _, err := RepoTasks(repo, []string{id}); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("RepoTasks(%q) = %v, want %q...", id, err, want)
		}
	}
	if _, err := RepoTasks(&task.Repo{Root: t.TempDir()}, nil); err == nil || !strings.HasPrefix(err.Error(), "run: no tasks in ") {
		t.Errorf("RepoTasks of an empty repository: %v", err)
	}
	var h Local
	err = h.UseGuard(filepath.Join(t.TempDir(), "app.yaml"), "", "", "/bin/pab")
	var fe *grade.FieldError
	if !errors.As(err, &fe) || fe.Field != "GuardApp" || !errors.Is(err, os.ErrNotExist) || h.GuardApp != "" {
		t.Errorf("UseGuard of a missing file = %v (guard app %q)", err, h.GuardApp)
	}
	app := filepath.Join(repo.Root, "README.md")
	if err := h.UseGuard(app, "mcp", "chrome", "/bin/pab"); err != nil || h.GuardApp != app || h.GuardMCP != "mcp" || h.Chrome != "chrome" || h.PabExe != "/bin/pab" {
		t.Errorf("UseGuard = %v, %+v", err, &h)
	}
}

// TestLocalJudgeOnce: the runs of a batch, grading at once, open the judge once and share
// it, error included.
func TestLocalJudgeOnce(t *testing.T) {
	var calls atomic.Int32
	want := &grade.Cache{}
	h := &Local{OpenJudge: func() (*grade.Cache, error) {
		calls.Add(1)
		return want, errors.New("slow key")
	}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, err := h.openJudge(); c != want || err == nil || err.Error() != "slow key" {
				t.Errorf("openJudge = %p, %v", c, err)
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("OpenJudge called %d times, want 1", n)
	}
}
