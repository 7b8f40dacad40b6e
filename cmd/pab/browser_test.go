package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/pab-dev/pab/internal/cdpconn"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/tlsca"
)

var (
	cdpLine     = regexp.MustCompile(`pab browser: CDP (ws://127\.0\.0\.1:\d+/devtools/browser/\S+)`)
	profileLine = regexp.MustCompile(`pab browser: profile (\S+)`)
)

// TestBrowserCommand starts `pab browser lil-former-projects`, attaches to the Chromium it
// started over CDP (as an agent would), and checks that the first recorded page opened over
// HTTPS with a certificate from pab's CA and no certificate error, that a host missing from
// the recording gets the replay's miss page, and that SIGINT ends pab with status 0 and
// removes the browser profile.
func TestBrowserCommand(t *testing.T) {
	chromiumPath(t)
	const pageURL = "https://lil.law.harvard.edu/projects/"
	// the demo task with a capture section: the browser takes its time zone and language
	repo := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, "sites"), filepath.Join(repo, "sites"))
	taskDir := filepath.Join(repo, "tasks", "lil-former-projects")
	copyTree(t, filepath.Join(repoRoot, "tasks", "lil-former-projects"), taskDir)
	// the manifest's locale (fr-FR here) wins; the zone, which the manifest does not give,
	// comes from task.yaml's capture (Asia/Tokyo here)
	card, err := os.ReadFile(filepath.Join(taskDir, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	card = bytes.Replace(card, []byte("timezone: America/New_York"), []byte("timezone: Asia/Tokyo"), 1)
	if err := os.WriteFile(filepath.Join(taskDir, "task.yaml"), card, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(taskDir, "recording", recording.RecordingManifestFile)
	mdata, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	mdata = bytes.Replace(mdata, []byte(`"locale": "en-US"`), []byte(`"locale": "fr-FR"`), 1)
	if !bytes.Contains(mdata, []byte("fr-FR")) || !bytes.Contains(card, []byte("Asia/Tokyo")) {
		t.Fatalf("the demo task's capture changed: manifest %s, task.yaml %s", mdata, card)
	}
	if err := os.WriteFile(manifest, mdata, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := pabIn(repo, "browser", "lil-former-projects")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() { // on a failure: stop it as Ctrl-C would, so Chromium stops too
		if !waited {
			cmd.Process.Signal(syscall.SIGINT)
			stopped := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
			cmd.Wait()
			stopped.Stop()
		}
	})
	var stderr bytes.Buffer
	var ws, profile string
	deadline := time.AfterFunc(90*time.Second, func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(errPipe)
	for ws == "" && sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if m := profileLine.FindStringSubmatch(sc.Text()); m != nil {
			profile = m[1]
		}
		if m := cdpLine.FindStringSubmatch(sc.Text()); m != nil {
			ws = m[1]
		}
	}
	deadline.Stop()
	if ws == "" || profile == "" {
		t.Fatalf("pab browser printed no CDP endpoint and profile:\n%s", &stderr)
	}
	go io.Copy(io.Discard, errPipe)
	if fi, err := os.Stat(profile); err != nil || !fi.IsDir() {
		t.Fatalf("profile %s: %v", profile, err)
	}

	// the tab pab browser opened, found among the browser's targets once it shows the
	// recorded page's title (an interstitial or a miss page has another), then read in its
	// own main world through a session of pab's DevTools client (internal/cdpconn; chromedp's
	// attach to a tab that runs already races while the tab loads)
	const wantTitle = "Projects | Library Innovation Lab"
	conn, err := cdpconn.Dial(context.Background(), ws, cdpconn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pageID string
	var seen []cdpconn.TargetInfo
	for wait := time.Now().Add(60 * time.Second); pageID == ""; {
		if seen, err = conn.Targets(context.Background()); err != nil {
			t.Fatalf("list targets: %v", err)
		}
		for _, in := range seen {
			if in.Type == "page" && in.URL == pageURL && in.Title == wantTitle {
				pageID = in.TargetID
			}
		}
		if pageID == "" {
			if time.Now().After(wait) {
				t.Fatalf("no tab with %s titled %q among %+v", pageURL, wantTitle, seen)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	session, err := conn.Attach(context.Background(), pageID)
	if err != nil {
		t.Fatal(err)
	}
	var env string
	if err := conn.Evaluate(context.Background(), session, `Intl.DateTimeFormat().resolvedOptions().timeZone + " " + navigator.language`, &env); err != nil {
		t.Fatal(err)
	}
	if env != "Asia/Tokyo fr-FR" {
		t.Errorf("page's time zone and language %q, want %q (manifest locale, task.yaml capture timezone)", env, "Asia/Tokyo fr-FR")
	}

	// the page clock is on, as in pab replay: the page's Date is the recording's
	var year int
	if err := conn.Evaluate(context.Background(), session, `new Date().getUTCFullYear()`, &year); err != nil {
		t.Fatal(err)
	}
	if year != 2023 {
		t.Errorf("page's clock says year %d, want the recording's 2023", year)
	}
	conn.Detach(session)

	// navigation, as an agent's own tab does it (chromedp makes the tab)
	allocCtx, cancelAlloc := remote.NewAllocator(context.Background(), ws, remote.NoModifyURL)
	defer cancelAlloc()
	bctx, cancelB := chromedp.NewContext(allocCtx)
	defer cancelB()
	// the browser connection first (bctx's, which the tab shares, so that the cancels below
	// may run twice)
	tctx, cancelT := context.WithTimeout(bctx, 60*time.Second)
	defer cancelT()
	if _, err := chromedp.Targets(tctx); err != nil {
		t.Fatalf("list targets: %v", err)
	}
	pctx, cancelP := chromedp.NewContext(bctx)
	defer cancelP()
	ctx, cancel := context.WithTimeout(pctx, 60*time.Second)
	defer cancel()

	ca, err := tlsca.LoadOrCreate(filepath.Join(cacheDir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	caName := ca.Certificate().Subject.CommonName
	checkTLS := func(url string, resp *network.Response) {
		t.Helper()
		if resp.Protocol == "" || !strings.HasPrefix(resp.URL, "https://") {
			t.Errorf("%s: answered from %q over %q, want https", url, resp.URL, resp.Protocol)
		}
		if resp.SecurityDetails == nil || resp.SecurityDetails.Issuer != caName {
			t.Errorf("%s: certificate details %+v, want issuer %q", url, resp.SecurityDetails, caName)
		}
	}

	// the recorded page again, now with its response: 200 over TLS with a leaf of pab's CA
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(pageURL))
	if err != nil {
		t.Fatalf("navigate %s: %v", pageURL, err)
	}
	if resp.Status != 200 {
		t.Errorf("%s: status %d, want 200", pageURL, resp.Status)
	}
	checkTLS(pageURL, resp)
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != pageURL {
		t.Errorf("location after navigating %q (%v), want %s (an interstitial would be chrome-error://)", loc, err, pageURL)
	}

	// a host the recording does not have: pab's miss page, not the internet
	const missURL = "https://not-in-recording.example/"
	resp, err = chromedp.RunResponse(ctx, chromedp.Navigate(missURL))
	if err != nil {
		t.Fatalf("navigate %s: %v", missURL, err)
	}
	if resp.Status != 404 {
		t.Errorf("%s: status %d, want 404", missURL, resp.Status)
	}
	checkTLS(missURL, resp)
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title + " | " + document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "Not in the recording") || !strings.Contains(body, missURL) {
		t.Errorf("%s shows %q, want pab's miss page", missURL, body)
	}
	cancel()
	cancelP()
	cancelB()
	cancelAlloc()

	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		waited = true
		if err != nil {
			t.Errorf("pab browser after SIGINT: %v\n%s", err, &stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("pab browser did not stop on SIGINT")
	}
	if _, err := os.Stat(profile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile %s left after exit: %v", profile, err)
	}
	if pids := processesUsing(t, profile); len(pids) > 0 {
		t.Errorf("Chromium processes %v still run with profile %s after pab browser exited", pids, profile)
	}
}

// processesUsing lists the live processes whose command line holds s (Linux /proc).
func processesUsing(t *testing.T, s string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, path := range cmdlines {
		b, err := os.ReadFile(path) // empty for a zombie, gone for an ended process
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, filepath.Base(filepath.Dir(path)))
		}
	}
	return pids
}

// TestBrowserMistakes: a Chromium that cannot be found gives one line naming the Debian
// package, before anything is started; so do wrong combinations of arguments.
func TestBrowserMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"browser"}, "pab: browser: give either TARGET or --proxy ADDR\n"},
		{[]string{"browser", "lil-former-projects", "--proxy", "127.0.0.1:1"}, "pab: browser: give either TARGET or --proxy ADDR\n"},
		{[]string{"browser", "--proxy", "127.0.0.1:1", "--log", "x.jsonl"}, "pab: browser: --log needs TARGET (with --proxy, the running proxy has its own)\n"},
		{[]string{"browser", "lil-former-projects", "--port", "70000"}, "pab: browser: --port 70000 is not a port number (0 to 65535)\n"},
	} {
		stdout, stderr, code := runPab(t, tc.args...)
		if code != 1 || stdout != "" || stderr != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, stderr %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
	for _, args := range [][]string{
		{"browser", "lil-former-projects", "--chrome", "/nonexistent/chromium"},
		{"browser", "--proxy", "127.0.0.1:1", "--chrome", "/nonexistent/chromium"},
	} {
		stdout, stderr, code := runPab(t, args...)
		if code == 0 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
		want := "pab: " + chromiumMissing + "\n"
		if stderr != want {
			t.Errorf("%v: stderr %q, want %q", args, stderr, want)
		}
	}
	// PATH without chromium: the same message
	cmd := pabCmd("browser", "lil-former-projects")
	cmd.Env = append(cmd.Env, "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || string(out) != "pab: "+chromiumMissing+"\n" {
		t.Errorf("no chromium on PATH: %v, output %q", err, out)
	}
}
