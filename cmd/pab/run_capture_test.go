package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/pab-dev/pab/recording"
)

// TestRunBrowserCapture (issue 21): pab run --browser starts each run's Chromium in the
// capture's language and time zone: the manifest's locale (set to fr-FR in a copy of the
// demo task) and task.yaml's capture timezone (America/New_York, which the manifest does
// not give). The test attaches to the run's browser over the CDP URL the agent is given and
// reads them in a replayed page, while the machine's zone is UTC.
func TestRunBrowserCapture(t *testing.T) {
	chrome := chromiumPath(t)
	repo := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, "sites"), filepath.Join(repo, "sites"))
	taskDir := filepath.Join(repo, "tasks", "lil-former-projects")
	copyTree(t, filepath.Join(repoRoot, "tasks", "lil-former-projects"), taskDir)
	manifest := filepath.Join(taskDir, "recording", recording.RecordingManifestFile)
	mdata, _ := os.ReadFile(manifest)
	if !bytes.Contains(mdata, []byte(`"locale": "en-US"`)) {
		t.Fatalf("the demo task's manifest changed: %s", mdata)
	}
	os.WriteFile(manifest, bytes.Replace(mdata, []byte(`"locale": "en-US"`), []byte(`"locale": "fr-FR"`), 1), 0o644)

	ipc := t.TempDir()
	agent := `echo "$PAB_CDP_URL" > ` + ipc + `/cdp.tmp && mv ` + ipc + `/cdp.tmp ` + ipc + `/cdp
for i in $(seq 1 600); do [ -f ` + ipc + `/done ] && break; sleep 0.1; done
echo "Awesome Box" > "$PAB_ANSWER_FILE"`
	cmd := pabIn(repo, "run", "--out", filepath.Join(t.TempDir(), "batch"), "--browser", "--chrome", chrome,
		"--timeout", "90s", "--agent", agent, "--judge", "cli", "--judge-cmd", filepath.Join(repoRoot, exampleJudge), "lil-former-projects")
	cmd.Env = append(cmd.Env, "TZ=UTC")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		os.WriteFile(filepath.Join(ipc, "done"), nil, 0o644)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	var ws string
	for i := 0; i < 600 && ws == ""; i++ {
		if data, err := os.ReadFile(filepath.Join(ipc, "cdp")); err == nil {
			ws = strings.TrimSpace(string(data))
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !strings.HasPrefix(ws, "ws://127.0.0.1:") {
		t.Fatalf("the agent got no CDP URL (%q):\n%s", ws, &out)
	}
	alloc, cancelA := remote.NewAllocator(context.Background(), ws, remote.NoModifyURL)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(alloc)
	defer cancelB()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("https://lil.law.harvard.edu/projects/")); err != nil {
		t.Fatalf("open a replayed page in the run's browser: %v", err)
	}
	env, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Intl.DateTimeFormat().resolvedOptions().timeZone + " " + navigator.language`))
	if err != nil {
		t.Fatal(err)
	}
	if env != "America/New_York fr-FR" {
		t.Errorf("the run's browser: time zone and language %q, want %q", env, "America/New_York fr-FR")
	}
}
